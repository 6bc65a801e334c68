"""The dataset registry is true to the real data, and pulls copy/download only verified bytes."""

from __future__ import annotations

import functools
import hashlib
import http.server
import importlib.util
import json
import re
import shutil
import sys
import threading
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from finharness.commands.data import data_app
from finharness.data import registry
from finharness.data.errors import DataError
from finharness.data.pull import pull

REPO = Path(__file__).resolve().parents[2]
AVAILABLE = [d.name for d in registry.load_registry() if d.files and all(f.sha256 for f in d.files)]
"""Datasets whose every file the registry hashed from the shared copy (the others are hashed by a first pull)."""
SMALL = "finqa-meta"  # 4 files, 235 KB: cheap to copy around


def _quiet(_: str) -> None:
    pass


def _mirror(shared: Path, tmp: Path, name: str) -> Path:
    """A private copy of one dataset's folder, laid out like a data root (so tests may corrupt it)."""
    dataset = registry.get(name)
    root = tmp / "mirror"
    shutil.copytree(shared / dataset.local_dir, root / dataset.local_dir)
    return root


def _no_network_client() -> httpx.Client:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise AssertionError(f"unexpected request to {request.url}")

    return httpx.Client(transport=httpx.MockTransport(refuse))


# --- the registry itself ---------------------------------------------------------------------------------

def test_registry_loads_with_unique_names_and_consistent_entries():
    datasets = registry.load_registry()
    names = [d.name for d in datasets]
    assert len(names) == len(set(names))
    for expected in ("ucfe", "ucfe-gpt4o-dialogues", "fintradebench-seed", "fintradebench-history",
                     "fintradebench-fundamentals", "fintradebench-sec-filings", "nasdaq100-ohlcv", "tatqa",
                     "finqa-meta", "bizbench-prompts", "cfinbench-categories", "ideafinbench", "cfa-essay",
                     "cfinbench", "bizbench", "finqa", "convfinqa"):
        assert expected in names
    for d in datasets:
        assert d.local_dir.endswith("/") and d.licence and d.layout
        assert bool(d.files) == d.available_here, d.name
        assert [f.path for f in d.files] == sorted(f.path for f in d.files)
        assert d.host in registry.HOSTS
        for f in d.files:
            if f.sha256 is None:  # hashed by its first pull: something the pinned commit names must verify it
                assert f.size is None and d.pinned and (f.git_blob or d.host == "huggingface"), (d.name, f.path)
            else:
                assert re.fullmatch(r"[0-9a-f]{64}", f.sha256) and f.size > 0
            # a URL exists exactly for confirmed upstream paths, and points at the recorded commit
            assert (f.url is None) == (f.upstream_path is None), (d.name, f.path)
            if f.url and d.host == "huggingface":
                assert f.url == f"https://huggingface.co/datasets/{d.repository}/resolve/{d.commit}/{f.upstream_path}"
            elif f.url:
                assert f.url == f"https://raw.githubusercontent.com/{d.repository}/{d.commit}/{f.upstream_path}"
            # a file is confirmed, unconfirmed or derived, never two of these
            assert sum([f.upstream_path is not None, f.unconfirmed_path is not None, f.derived]) == 1
            if f.unconfirmed_path or f.derived:
                assert d.notes, f"{d.name}: unconfirmed or derived files must be explained in notes"


def test_derived_entries_say_so():
    fundamentals = registry.get("fintradebench-fundamentals")
    assert all(f.derived and f.upstream_path is None for f in fundamentals.files)
    assert any("derived, no upstream file" in note for note in fundamentals.notes)
    assert registry.get("fintradebench-fundamentals").files[0].derived_from.startswith(
        "dummy_data/Precomputed_Contexts/")


def test_unavailable_entries_record_the_official_layout():
    assert "{dev,val,test}/{single_choice,multi_choice,judgment}/{1-1..4-11}.jsonl" in registry.get(
        "cfinbench").layout
    bizbench = registry.get("bizbench").layout
    for column in ("question", "answer", "task", "context", "context_type", "options", "program"):
        assert column in bizbench
    assert registry.get("cfinbench").files == () and not registry.get("cfinbench").available_here


def test_the_official_question_sets_are_pinned_and_pullable():
    """BizBench on the Hub, FinQA and ConvFinQA on GitHub: full commit ids, every file downloadable."""
    for name, host, repository in (("bizbench", "huggingface", "kensho/bizbench"), ("finqa", "github", "czyssrs/FinQA"),
                                   ("convfinqa", "github", "czyssrs/ConvFinQA")):
        dataset = registry.get(name)
        assert dataset.available_here and dataset.pinned and dataset.pullable, name
        assert (dataset.host, dataset.repository) == (host, repository)
    assert registry.get("finqa").commit == registry.get("finqa-meta").commit
    assert [f.unpack for f in registry.get("convfinqa").files if f.unpack] == ["zip"]
    assert {f.path for f in registry.get("bizbench").files} == {
        "data/test-00000-of-00001-7b139510152259c8.parquet", "data/train-00000-of-00001-300a28d2e31daec3.parquet"}


def test_unknown_name_lists_known_names():
    with pytest.raises(DataError) as info:
        registry.get("no-such-set")
    assert "no-such-set" in str(info.value)
    for name in ("ucfe", "tatqa", "convfinqa"):
        assert name in str(info.value)


def test_registry_files_stay_small_and_each_dataset_has_one_home():
    files = registry.source_files()
    assert [origin.rsplit(".", 1)[-1] for origin, _ in files] == [
        "bizbench", "cfinbench", "financebench", "fintradebench", "ucfe"]  # the built-ins that bring data
    assert sum(path.stat().st_size for _, path in files) < 300_000
    homes = {d.name: [o for o, path in files if d in registry.parse_registry(path.read_text(encoding="utf-8"))]
             for d in registry.load_registry()}
    assert all(len(h) == 1 for h in homes.values())


def test_each_benchmark_declares_the_datasets_its_folder_registers():
    from finharness.benchmarks.declaration import built_in

    declared = {b.name: set(b.datasets) for b in built_in()}
    for origin, path in registry.source_files():
        owner = origin.rsplit(".", 1)[-1]
        assert {d.name for d in registry.parse_registry(path.read_text(encoding="utf-8"))} <= declared[owner]
    assert set().union(*declared.values()) <= set(registry.names())  # every declared name is registered somewhere


def test_a_dataset_registered_twice_names_both_files(monkeypatch, tmp_path):
    text = (REPO / "src/finharness/benchmarks/ucfe/sources.json").read_text(encoding="utf-8")
    (tmp_path / "a.json").write_text(text, encoding="utf-8")
    (tmp_path / "b.json").write_text(text, encoding="utf-8")
    monkeypatch.setattr(registry, "source_files", lambda: [("a", tmp_path / "a.json"), ("b", tmp_path / "b.json")])
    registry.load_registry.cache_clear()
    try:
        with pytest.raises(DataError) as info:
            registry.load_registry()
    finally:
        registry.load_registry.cache_clear()
    assert "registered twice" in str(info.value) and "a.json" in str(info.value) and "b.json" in str(info.value)


# --- the registry is true to the real data ---------------------------------------------------------------

@pytest.mark.parametrize("name", AVAILABLE)
def test_every_registered_file_matches_the_shared_copy(shared_data, name):
    report = registry.verify(name, shared_data)
    assert report.problems == (), report.problems[:3]
    assert report.status == "present" and report.n_ok == report.n_files > 0


def test_generator_reproduces_the_packaged_registry(shared_data, monkeypatch):
    """tools/make_sources.py run on the shared copy gives exactly each benchmark's sources.json, and --check says so."""
    spec = importlib.util.spec_from_file_location("make_sources", REPO / "tools" / "make_sources.py")
    make_sources = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "make_sources", make_sources)
    spec.loader.exec_module(make_sources)
    documents, unclaimed = make_sources.build(shared_data)
    assert unclaimed == []
    assert len(documents) == 5
    for package, document in documents.items():
        packaged = make_sources.entries_path(package).read_text(encoding="utf-8")
        assert make_sources.render(document) == packaged, package
    assert make_sources.main([str(shared_data), "--check"]) == 0


def test_verify_reports_missing_partial_and_modified(shared_data, tmp_path):
    root = _mirror(shared_data, tmp_path, SMALL)
    dataset = registry.get(SMALL)
    assert registry.verify(SMALL, tmp_path / "empty").status == "missing"
    first, second = (dataset.local_path(root, f) for f in dataset.files[:2])
    first.unlink()
    assert registry.verify(SMALL, root).status == "partial"
    second.write_bytes(second.read_bytes()[:-1] + b"X")  # same size, other bytes: only sha256 sees it
    assert registry.verify(SMALL, root, checksums=False).status == "partial"
    report = registry.verify(SMALL, root)
    assert report.status == "modified"
    assert [p.problem for p in report.mismatched] == ["sha256"]


# --- data dir resolution ---------------------------------------------------------------------------------

def test_default_data_dir_order(monkeypatch, tmp_path):
    for var in ("FINHARNESS_DATA_DIR", "FINHARNESS_CACHE", "XDG_CACHE_HOME"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert registry.default_data_dir() == tmp_path / "home" / ".cache" / "finharness" / "data"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert registry.default_data_dir() == tmp_path / "xdg" / "finharness" / "data"
    monkeypatch.setenv("FINHARNESS_CACHE", str(tmp_path / "cache"))
    assert registry.default_data_dir() == tmp_path / "cache" / "data"
    monkeypatch.setenv("FINHARNESS_DATA_DIR", str(tmp_path / "data"))
    assert registry.default_data_dir() == tmp_path / "data"
    assert registry.resolve_data_dir(None) == tmp_path / "data"
    assert registry.resolve_data_dir(tmp_path / "cli") == tmp_path / "cli"


# --- pull --------------------------------------------------------------------------------------------------

def test_pull_from_local_mirror_copies_and_verifies(shared_data, tmp_path):
    dest = tmp_path / "dest"
    report = pull(SMALL, dest, shared_data, progress=_quiet)
    dataset = registry.get(SMALL)
    assert len(report.fetched) == len(dataset.files) and report.skipped == ()
    assert report.bytes_fetched == dataset.total_size
    assert registry.verify(SMALL, dest).status == "present"

    again = pull(SMALL, dest, shared_data, progress=_quiet)
    assert again.fetched == () and len(again.skipped) == len(dataset.files)


def test_pull_refetches_only_what_is_missing_or_wrong(shared_data, tmp_path):
    dest = tmp_path / "dest"
    pull(SMALL, dest, shared_data, progress=_quiet)
    dataset = registry.get(SMALL)
    broken, gone = (dataset.local_path(dest, f) for f in dataset.files[:2])
    broken.write_text("not the file")
    gone.unlink()
    report = pull(SMALL, dest, shared_data, progress=_quiet)
    assert sorted(report.fetched) == sorted(dataset.local_dir + f.path for f in dataset.files[:2])
    assert registry.verify(SMALL, dest).status == "present"


def test_corrupted_mirror_is_refused_and_leaves_nothing(shared_data, tmp_path):
    mirror = _mirror(shared_data, tmp_path, SMALL)
    dataset = registry.get(SMALL)
    victim = dataset.files[-1]
    bad = dataset.local_path(mirror, victim)
    bad.write_bytes(bad.read_bytes() + b"\n")
    actual = hashlib.sha256(bad.read_bytes()).hexdigest()
    dest = tmp_path / "dest"
    with pytest.raises(DataError) as info:
        pull(SMALL, dest, mirror, progress=_quiet)
    message = str(info.value)
    assert victim.path in message and victim.sha256 in message and actual in message
    target_dir = dataset.local_path(dest, victim).parent
    assert not dataset.local_path(dest, victim).exists()
    assert not [p for p in target_dir.iterdir() if p.name.endswith(".part")]


def test_mirror_missing_a_file_names_it(shared_data, tmp_path):
    mirror = _mirror(shared_data, tmp_path, SMALL)
    dataset = registry.get(SMALL)
    dataset.local_path(mirror, dataset.files[0]).unlink()
    with pytest.raises(DataError, match=re.escape(dataset.files[0].path)):
        pull(SMALL, tmp_path / "dest", mirror, progress=_quiet)


def test_pull_over_http_from_a_loopback_mirror(shared_data, tmp_path, monkeypatch):
    for var in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(var, raising=False)
    mirror = _mirror(shared_data, tmp_path, SMALL)
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(mirror))
    handler.log_message = lambda *args: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        base = f"http://127.0.0.1:{server.server_address[1]}"
        dest = tmp_path / "dest"
        report = pull(SMALL, dest, base + "/", progress=_quiet)
        assert len(report.fetched) == len(registry.get(SMALL).files)
        assert registry.verify(SMALL, dest).status == "present"

        # a mirror that serves other bytes is refused, and a 404 names the URL
        dataset = registry.get(SMALL)
        bad = dataset.local_path(mirror, dataset.files[0])
        bad.write_bytes(b"tampered")
        with pytest.raises(DataError, match="checksum mismatch"):
            pull(SMALL, tmp_path / "dest2", base, progress=_quiet)
        bad.unlink()
        with pytest.raises(DataError, match="HTTP 404"):
            pull(SMALL, tmp_path / "dest3", base, progress=_quiet)
    finally:
        server.shutdown()
        server.server_close()


def test_offline_pull_says_no_network_and_suggests_from(tmp_path):
    def offline(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("Name or service not known", request=request)

    with httpx.Client(transport=httpx.MockTransport(offline)) as client:
        with pytest.raises(DataError) as info:
            pull(SMALL, tmp_path, client=client, progress=_quiet)
    assert "no network" in str(info.value) and "--from" in str(info.value)
    assert not any(p.is_file() for p in tmp_path.rglob("*"))


def test_default_pull_uses_the_registered_urls(shared_data, tmp_path):
    """Without --from each file comes from its raw URL (served here from the shared copy, no network)."""
    dataset = registry.get(SMALL)
    by_url = {dataset.candidate_url(f): dataset.local_path(shared_data, f) for f in dataset.files}
    seen = []

    def serve(request: httpx.Request) -> httpx.Response:
        seen.append(str(request.url))
        return httpx.Response(200, content=by_url[str(request.url)].read_bytes())

    with httpx.Client(transport=httpx.MockTransport(serve)) as client:
        pull(SMALL, tmp_path, client=client, progress=_quiet)
    assert sorted(seen) == sorted(by_url)
    assert any("raw.githubusercontent.com/czyssrs/FinQA/" in url for url in seen)
    assert registry.verify(SMALL, tmp_path).status == "present"


def test_derived_files_need_a_mirror(tmp_path):
    with _no_network_client() as client, pytest.raises(DataError) as info:
        pull("cfinbench-categories", tmp_path, client=client, progress=_quiet)
    assert "category_mapping.json" in str(info.value) and "--from" in str(info.value)


def test_unavailable_dataset_cannot_be_pulled(tmp_path):
    with pytest.raises(DataError, match="not available"):
        pull("cfinbench", tmp_path, progress=_quiet)


# --- command line ------------------------------------------------------------------------------------------

def test_cli_list_and_pull(shared_data, tmp_path):
    runner = CliRunner()
    listed = runner.invoke(data_app, ["list", "--json", "--data-dir", str(shared_data)])
    assert listed.exit_code == 0, listed.output
    rows = {row["name"]: row for row in json.loads(listed.stdout)["datasets"]}
    assert all(rows[name]["status"] == "present" for name in AVAILABLE)
    assert rows["cfinbench"]["status"] == "not available"
    # the shared copy lacks the official question sets: pullable, not "not available"
    assert rows["bizbench"]["status"] == rows["finqa"]["status"] == "missing"
    assert rows["convfinqa"]["status"] == "partial"  # its LICENSE is there, data.zip is not

    dest = tmp_path / "dest"
    pulled = runner.invoke(data_app, ["pull", SMALL, "--from", str(shared_data), "--data-dir", str(dest)])
    assert pulled.exit_code == 0, pulled.output
    after = runner.invoke(data_app, ["list", "--json", "--data-dir", str(dest)])
    rows = {row["name"]: row for row in json.loads(after.stdout)["datasets"]}
    assert rows[SMALL]["status"] == "present" and rows["ucfe"]["status"] == "missing"

    unknown = runner.invoke(data_app, ["pull", "nope", "--data-dir", str(dest)])
    assert unknown.exit_code == 2 and "known datasets" in unknown.output


def test_unconfirmed_upstream_path_that_fails_says_so(shared_data, tmp_path):
    """A file whose upstream path is unconfirmed is tried; when that URL fails, the error says why."""
    dataset = registry.get("ideafinbench")
    first_unconfirmed = next(f for f in dataset.files if f.unconfirmed_path)
    by_url = {f.url: dataset.local_path(shared_data, f) for f in dataset.files if f.url}

    def serve(request: httpx.Request) -> httpx.Response:
        path = by_url.get(str(request.url))
        return httpx.Response(200, content=path.read_bytes()) if path else httpx.Response(404)

    with httpx.Client(transport=httpx.MockTransport(serve)) as client, pytest.raises(DataError) as info:
        pull("ideafinbench", tmp_path, client=client, progress=_quiet)
    message = str(info.value)
    assert first_unconfirmed.path in message and "unconfirmed" in message and "HTTP 404" in message
    assert "--from" in message
    # the confirmed files fetched before it are in place and verified
    assert dataset.local_path(tmp_path, dataset.files[0]).is_file()
