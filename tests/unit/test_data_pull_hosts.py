"""Pulling the official BizBench, FinQA and ConvFinQA data from where it lives, against local servers on
127.0.0.1 that answer as the Hugging Face Hub and GitHub's raw host do (tests/servers/data_hosts.py), with
small files in the official layouts: the pinned commit is what is fetched, changed bytes are refused, a
download cut off mid-file continues with a Range request, offline mode reads the Hub cache, the first
verified download is recorded in the registry lock and checked ever after, and `finharness run
bizbench/fincode` pulls on first use, then never again."""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import zipfile

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from finharness.benchmarks.bizbench.official import load_official
from finharness.commands.data import data_app
from finharness.data import registry
from finharness.data.errors import DataError
from finharness.data.pull import pull, pull_on_first_use

from ..servers.data_hosts import git_blob_id, hub_server, raw_server

BIZBENCH = registry.get("bizbench")
PIN = BIZBENCH.commit
TEST_PARQUET, TRAIN_PARQUET = (f.path for f in sorted(BIZBENCH.files, key=lambda f: "train" in f.path))
ROWS = [
    {"question": "A call option: strike 100, price 110, premium 2, 100 shares. Profit?", "answer": "800",
     "task": "FinCode", "context": None, "context_type": None, "options": None,
     "program": "strike = 100\nprice = 110\n(price - strike - 2) * 100\n"},
    {"question": "What is the percent change?", "answer": "96.55", "task": "CodeFinQA",
     "context": "| | 2011 | 2012 |\n| a | 34.8 | 1.2 |", "context_type": "string", "options": None,
     "program": "change = 34.8 - 1.2\nchange / 34.8 * 100\n"},
    {"question": "What was a in 2011? (million)", "answer": "34.8", "task": "ConvFinQA",
     "context": "| | 2011 | 2012 |\n| a | 34.8 | 1.2 |", "context_type": "string", "options": None, "program": None},
    {"question": "Bond yields and prices?", "answer": "A", "task": "FinKnow", "context": None, "context_type": None,
     "options": ["Inversely", "Directly", "Unrelated"], "program": None},
]


def parquet_bytes(rows: list[dict]) -> bytes:
    """A parquet in the kensho/bizbench columns."""
    columns = ("question", "answer", "task", "context", "context_type", "options", "program")
    schema = pa.schema([(c, pa.list_(pa.string()) if c == "options" else pa.string()) for c in columns])
    sink = io.BytesIO()
    pq.write_table(pa.table({c: [row[c] for row in rows] for c in columns}, schema=schema), sink)
    return sink.getvalue()


PINNED_FILES = {TEST_PARQUET: parquet_bytes(ROWS), TRAIN_PARQUET: parquet_bytes(ROWS[:2])}
LATER_FILES = {TEST_PARQUET: parquet_bytes(ROWS[1:]), TRAIN_PARQUET: parquet_bytes(ROWS[1:2])}


def _quiet(_: str) -> None:
    pass


@pytest.fixture
def env(monkeypatch, tmp_path):
    """A private finharness cache (so the registry lock), Hub cache and data root; no proxies, no token."""
    for var in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy", "HF_TOKEN",
                "HUGGING_FACE_HUB_TOKEN", "HF_HUB_OFFLINE", "HF_HOME", "FINHARNESS_NO_PULL", "FINHARNESS_DATA_DIR",
                "FINHARNESS_GITHUB_RAW"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("FINHARNESS_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf"))
    monkeypatch.setenv("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    return monkeypatch


@pytest.fixture
def hub(env):
    """The Hub with kensho/bizbench at the pinned commit, and a later commit on main with other bytes."""
    with hub_server() as hub:
        hub.commit("kensho/bizbench", PINNED_FILES, sha=PIN, ref=None)
        hub.later = hub.commit("kensho/bizbench", LATER_FILES, ref="main")
        env.setenv("HF_ENDPOINT", hub.url)
        yield hub


def _lock() -> dict:
    return json.loads(registry.lock_path().read_text(encoding="utf-8"))


def _with_registry(monkeypatch, name: str, **changes) -> registry.DatasetSource:
    """Dataset `name` in the registry with `changes` (the tests' own files need their own checksums)."""
    changed = dataclasses.replace(registry.get(name), **changes)
    datasets = tuple(changed if d.name == name else d for d in registry.load_registry())
    monkeypatch.setattr(registry, "load_registry", lambda: datasets)
    return changed


def _pinned_to(dataset: registry.DatasetSource, contents: dict[str, bytes]) -> tuple[registry.DataFile, ...]:
    """The dataset's files re-pinned to `contents`: a registered sha256 for files that have one, else the git
    blob id in the tree (as the real entries are built)."""
    files = []
    for file in dataset.files:
        data = contents[file.path]
        if file.sha256:
            file = dataclasses.replace(file, size=len(data), sha256=hashlib.sha256(data).hexdigest())
        else:
            file = dataclasses.replace(file, git_blob=git_blob_id(data))
        files.append(file)
    return tuple(files)


def _raw_path(file: registry.DataFile) -> str:
    return file.url.removeprefix(registry.GITHUB_RAW)


# --- the Hub: kensho/bizbench ------------------------------------------------------------------------------

def test_bizbench_comes_from_the_pinned_commit_and_is_recorded(hub, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "hf_test_token")
    dest = tmp_path / "data"
    report = pull("bizbench", dest, progress=_quiet)
    assert sorted(report.fetched) == sorted(f"bizbench/{p}" for p in PINNED_FILES)
    for path, data in PINNED_FILES.items():
        assert (dest / "bizbench" / path).read_bytes() == data  # not main's bytes
    heads = [r for r in hub.requests if r.method == "HEAD"]
    assert {r.path for r in heads} == {f"/datasets/kensho/bizbench/resolve/{PIN}/{p}" for p in PINNED_FILES}
    assert all(r.headers.get("authorization") == "Bearer hf_test_token" for r in heads)
    assert not any("/resolve/main/" in r.path for r in hub.requests)
    assert hub.cdn.requests and not any("authorization" in r.headers for r in hub.cdn.requests)
    # the Hub cache holds the commit; the lock holds what the first verified download saw
    assert (tmp_path / "hf" / "datasets--kensho--bizbench" / "snapshots" / PIN / TEST_PARQUET).is_file()
    entry = _lock()["datasets"]["bizbench"]
    assert entry["commit"] == PIN and entry["resolved_commit"] == PIN
    assert entry["files"][TEST_PARQUET]["sha256"] == hashlib.sha256(PINNED_FILES[TEST_PARQUET]).hexdigest()
    assert entry["files"][TEST_PARQUET]["size"] == len(PINNED_FILES[TEST_PARQUET])
    assert registry.verify("bizbench", dest).status == "present"
    # the pulled layout is what the BizBench tasks read
    load = load_official(dest / "bizbench", tasks=["fincode", "codefinqa", "convfinqa-e"])
    assert load.counts() == {"train": {"fincode": 1, "codefinqa": 1},
                             "test": {"fincode": 1, "codefinqa": 1, "convfinqa-e": 1}}


def test_a_hub_file_changed_after_its_first_pull_is_refused(hub, tmp_path, env):
    pull("bizbench", tmp_path / "first", progress=_quiet)
    hub.replace_bytes("kensho/bizbench", PIN, TEST_PARQUET, parquet_bytes(ROWS[:1]))
    env.setenv("HF_HUB_CACHE", str(tmp_path / "hf-fresh"))  # a new machine's cache, the same lock
    dest = tmp_path / "second"
    with pytest.raises(DataError) as info:
        pull("bizbench", dest, progress=_quiet)
    message = str(info.value)
    assert "checksum mismatch" in message and "recorded at its first verified download" in message
    assert hashlib.sha256(PINNED_FILES[TEST_PARQUET]).hexdigest() in message
    assert not (dest / "bizbench" / TEST_PARQUET).exists()
    assert not list((dest / "bizbench").rglob("*.part"))
    blobs = tmp_path / "hf-fresh" / "datasets--kensho--bizbench" / "blobs"
    assert not [p for p in blobs.iterdir() if p.is_file()], "the refused bytes stay in the Hub cache"


def test_hub_bytes_that_are_not_their_lfs_sha256_are_refused_on_first_use(hub, tmp_path):
    digest = hashlib.sha256(PINNED_FILES[TEST_PARQUET]).hexdigest()
    hub.cdn.files[f"/lfs/{digest}"] = b"X" * len(PINNED_FILES[TEST_PARQUET])  # same size, other bytes
    with pytest.raises(DataError, match=f"expected sha256 {digest}"):
        pull("bizbench", tmp_path / "data", progress=_quiet)
    assert not (tmp_path / "data" / "bizbench" / TEST_PARQUET).exists()
    assert not registry.lock_path().exists() or TEST_PARQUET not in json.dumps(_lock())


def test_a_hub_download_cut_off_mid_file_continues_with_a_range_request(hub, tmp_path, monkeypatch):
    """huggingface_hub continues from the last whole chunk it wrote (10 MB; the real train parquet is 19.1 MB):
    with 256-byte chunks the cut at half the file is continued from there."""
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "DOWNLOAD_CHUNK_SIZE", 256)
    data = PINNED_FILES[TRAIN_PARQUET]
    cdn_path = f"/lfs/{hashlib.sha256(data).hexdigest()}"
    hub.cdn.cut_next(cdn_path)
    pull("bizbench", tmp_path / "data", progress=_quiet)
    assert (tmp_path / "data" / "bizbench" / TRAIN_PARQUET).read_bytes() == data
    gets = hub.cdn.gets(cdn_path)
    assert len(gets) == 2 and "range" not in gets[0].headers
    assert gets[1].headers["range"] == f"bytes={len(data) // 2 // 256 * 256}-"


def test_offline_mode_reads_the_hub_cache_and_says_what_is_missing(hub, tmp_path, env):
    pull("bizbench", tmp_path / "online", progress=_quiet)
    served = len(hub.requests) + len(hub.cdn.requests)
    env.setenv("HF_HUB_OFFLINE", "1")
    report = pull("bizbench", tmp_path / "offline", progress=_quiet)
    assert len(report.fetched) == 2 and registry.verify("bizbench", tmp_path / "offline").status == "present"
    assert len(hub.requests) + len(hub.cdn.requests) == served  # nothing asked of the Hub
    env.setenv("HF_HUB_CACHE", str(tmp_path / "hf-empty"))
    with pytest.raises(DataError, match=r"offline \(HF_HUB_OFFLINE=1\).*not in the Hub cache"):
        pull("bizbench", tmp_path / "nothing", progress=_quiet)
    assert len(hub.requests) + len(hub.cdn.requests) == served


def test_a_branch_revision_is_resolved_once_recorded_and_kept_to(hub, tmp_path, env, monkeypatch):
    unpinned = _with_registry(monkeypatch, "bizbench", commit="main")
    assert not unpinned.pinned
    messages: list[str] = []
    pull("bizbench", tmp_path / "first", progress=messages.append)
    assert any("'main' is not a commit id" in m and hub.later in m for m in messages)
    assert [r.path for r in hub.requests if r.path.startswith("/api/")] == [
        "/api/datasets/kensho/bizbench/revision/main"]
    assert (tmp_path / "first" / "bizbench" / TEST_PARQUET).read_bytes() == LATER_FILES[TEST_PARQUET]
    assert _lock()["datasets"]["bizbench"]["resolved_commit"] == hub.later
    # main moves on; a new machine's pull keeps to the recorded commit, asking no revision
    hub.commit("kensho/bizbench", {TEST_PARQUET: parquet_bytes(ROWS[:1]), TRAIN_PARQUET: b"new"}, ref="main")
    env.setenv("HF_HUB_CACHE", str(tmp_path / "hf-fresh"))
    pull("bizbench", tmp_path / "second", progress=_quiet)
    assert (tmp_path / "second" / "bizbench" / TEST_PARQUET).read_bytes() == LATER_FILES[TEST_PARQUET]
    assert len([r for r in hub.requests if r.path.startswith("/api/")]) == 1
    listed = CliRunner().invoke(data_app, ["list", "--json", "--data-dir", str(tmp_path / "second")])
    row = next(r for r in json.loads(listed.stdout)["datasets"] if r["name"] == "bizbench")
    assert row["pinned"] is False and row["status"] == "present"


# --- GitHub: FinQA and ConvFinQA ---------------------------------------------------------------------------

FINQA = {"dataset/train.json": json.dumps([{"pre_text": ["a"], "post_text": [], "table": [["", "2011"]],
                                            "id": "X/2011/page_1.pdf-1",
                                            "qa": {"question": "what?", "program": "add(1, 2)", "exe_ans": 3,
                                                   "gold_inds": {}}}] * 40).encode(),
         "dataset/dev.json": b'[{"pre_text": [], "post_text": [], "table": [], "id": "d-1", "qa": {}}]',
         "dataset/test.json": b'[{"pre_text": [], "post_text": [], "table": [], "id": "t-1", "qa": {}}]'}


@pytest.fixture
def finqa_raw(env, monkeypatch):
    """GitHub's raw host serving the FinQA files at the pinned commit, and a registry that pins them."""
    dataset = _with_registry(monkeypatch, "finqa", files=_pinned_to(registry.get("finqa"), FINQA))
    with raw_server({_raw_path(f): FINQA[f.path] for f in dataset.files}) as raw:
        env.setenv("FINHARNESS_GITHUB_RAW", raw.url)
        yield raw


def test_finqa_is_verified_by_its_git_blob_recorded_then_checked_by_sha256(finqa_raw, tmp_path, monkeypatch):
    dest = tmp_path / "data"
    report = pull("finqa", dest, progress=_quiet)
    assert sorted(report.recorded) == sorted(f"finqa/{p}" for p in FINQA)
    assert [r.path for r in finqa_raw.requests] == sorted(_raw_path(f) for f in registry.get("finqa").files)
    assert all(f"/czyssrs/FinQA/{registry.get('finqa').commit}/dataset/" in r.path for r in finqa_raw.requests)
    assert json.loads((dest / "finqa/dataset/train.json").read_text())[0]["qa"]["exe_ans"] == 3
    recorded = _lock()["datasets"]["finqa"]["files"]["dataset/train.json"]
    assert recorded["sha256"] == hashlib.sha256(FINQA["dataset/train.json"]).hexdigest()
    assert registry.resolved("finqa").sizes_known and registry.verify("finqa", dest).status == "present"
    # present and verified: nothing is downloaded again
    again = pull("finqa", dest, progress=_quiet)
    assert again.fetched == () and len(finqa_raw.requests) == 3
    # ever after, the recorded sha256 decides (a file the host changed is refused)
    finqa_raw.files[_raw_path(registry.get("finqa").files[0])] = b"[]"
    with pytest.raises(DataError, match="checksum mismatch for dataset/dev.json.*recorded at its first verified"):
        pull("finqa", tmp_path / "other", progress=_quiet)


def test_the_real_finqa_entry_refuses_bytes_that_are_not_those_of_its_commit(env, tmp_path):
    real = registry.get("finqa")
    with raw_server({_raw_path(f): FINQA[f.path] for f in real.files}) as raw:
        env.setenv("FINHARNESS_GITHUB_RAW", raw.url)
        with pytest.raises(DataError) as info:
            pull("finqa", tmp_path / "data", progress=_quiet)
    first = real.files[0]
    message = str(info.value)
    assert f"is not the file at czyssrs/FinQA@{real.commit}" in message and first.git_blob in message
    assert not list((tmp_path / "data").rglob("*.json")) and not list((tmp_path / "data").rglob("*.part"))
    assert not registry.lock_path().exists()


def test_a_github_download_cut_off_mid_file_continues_with_a_range_request(finqa_raw, tmp_path):
    train = next(f for f in registry.get("finqa").files if f.path == "dataset/train.json")
    finqa_raw.cut_next(_raw_path(train))
    pull("finqa", tmp_path / "data", progress=_quiet)
    assert (tmp_path / "data/finqa/dataset/train.json").read_bytes() == FINQA["dataset/train.json"]
    gets = finqa_raw.gets(_raw_path(train))
    assert len(gets) == 2 and gets[1].headers["range"] == f"bytes={len(FINQA['dataset/train.json']) // 2}-"


def test_a_partial_file_left_by_a_stopped_pull_is_continued(finqa_raw, tmp_path):
    train = next(f for f in registry.get("finqa").files if f.path == "dataset/train.json")
    data = FINQA["dataset/train.json"]
    part = tmp_path / "data/finqa/dataset/.train.json.part"
    part.parent.mkdir(parents=True)
    part.write_bytes(data[:1000])
    pull("finqa", tmp_path / "data", progress=_quiet)
    assert [r.headers.get("range") for r in finqa_raw.gets(_raw_path(train))] == ["bytes=1000-"]
    assert (tmp_path / "data/finqa/dataset/train.json").read_bytes() == data and not part.exists()


def _zip(members: dict[str, bytes]) -> bytes:
    sink = io.BytesIO()
    with zipfile.ZipFile(sink, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return sink.getvalue()


def test_convfinqa_data_zip_is_verified_unpacked_and_its_members_recorded(env, tmp_path, monkeypatch):
    members = {"data/train.json": b'[{"id": "c-1", "annotation": {"dialogue_break": ["q1", "q2"]}}]',
               "data/dev_turn.json": b'[{"id": "c-1_0", "cur_program": "34.8", "exe_ans": 34.8}]'}
    contents = {"LICENSE": b"MIT License\n", "data.zip": _zip(members)}
    dataset = _with_registry(monkeypatch, "convfinqa", files=_pinned_to(registry.get("convfinqa"), contents))
    with raw_server({_raw_path(f): contents[f.path] for f in dataset.files}) as raw:
        env.setenv("FINHARNESS_GITHUB_RAW", raw.url)
        dest = tmp_path / "data"
        report = pull("convfinqa", dest, progress=_quiet)
        for name, data in members.items():
            assert (dest / "convfinqa" / name).read_bytes() == data
        assert set(report.fetched) == {"convfinqa/LICENSE", "convfinqa/data.zip", *(f"convfinqa/{m}" for m in members)}
        recorded = _lock()["datasets"]["convfinqa"]["files"]
        assert recorded["data/train.json"]["unpacked_from"] == "data.zip"
        assert registry.verify("convfinqa", dest).status == "present"
        assert registry.verify("convfinqa", dest).n_files == 4
        # a lost member comes back from the verified archive, without a download
        (dest / "convfinqa/data/train.json").unlink()
        assert registry.verify("convfinqa", dest).status == "partial"
        served = len(raw.requests)
        pull("convfinqa", dest, progress=_quiet)
        assert len(raw.requests) == served and registry.verify("convfinqa", dest).status == "present"


# --- the command line --------------------------------------------------------------------------------------

def test_data_list_shows_the_official_sets_as_pullable_then_present(hub, tmp_path):
    runner = CliRunner()
    dest = tmp_path / "data"

    def rows() -> dict[str, dict]:
        listed = runner.invoke(data_app, ["list", "--json", "--data-dir", str(dest)])
        assert listed.exit_code == 0, listed.output
        return {row["name"]: row for row in json.loads(listed.stdout)["datasets"]}

    before = rows()
    for name in ("bizbench", "finqa", "convfinqa"):
        assert before[name]["status"] == "missing" and before[name]["pullable"] and before[name]["pinned"]
    assert before["bizbench"]["host"] == "huggingface" and not before["bizbench"]["sizes_known"]
    assert before["cfinbench"]["status"] == "not available"
    pulled = runner.invoke(data_app, ["pull", "bizbench", "--data-dir", str(dest)])
    assert pulled.exit_code == 0 and "2 recorded in the registry lock" in pulled.output, pulled.output
    after = rows()["bizbench"]
    assert after["status"] == "present" and after["sizes_known"]
    assert after["total_size"] == sum(len(data) for data in PINNED_FILES.values())


def test_run_fincode_pulls_on_first_use_then_never_again(hub, shared_data, tmp_path, env):
    """`finharness run bizbench/fincode` on a data root without BizBench pulls the parquet from the Hub and the
    official prompts from GitHub, saying so; the second run pulls nothing; --no-pull forbids the pull."""
    from finharness.cli import app

    prompts = registry.get("bizbench-prompts")
    served = {_raw_path(f): prompts.local_path(shared_data, f).read_bytes() for f in prompts.files}
    with raw_server(served) as raw:
        env.setenv("FINHARNESS_GITHUB_RAW", raw.url)
        data = tmp_path / "data"
        runner = CliRunner()

        def run(out: str, *extra: str):
            return runner.invoke(app, ["run", "bizbench/fincode", "--model", "fake?reply=[[800]]", "--data-dir",
                                       str(data), "--out", str(tmp_path / out), "--quiet", *extra])

        first = run("run1")
        assert first.exit_code == 0, first.output
        assert "bizbench/fincode: dataset bizbench is not in" in first.output
        assert f"pulling it from kensho/bizbench@{PIN[:7]}" in first.output
        assert "dataset bizbench-prompts is not in" in first.output
        results = json.loads((tmp_path / "run1" / "results.json").read_text())
        assert results["status"] == "complete" and results["metrics"]["accuracy"]["n"] == 1
        assert results["metrics"]["accuracy"]["value"] == 1.0  # the pulled FinCode row, answered 800
        asked = (len(hub.requests), len(hub.cdn.requests), len(raw.requests))
        assert asked[0] and asked[1] and asked[2] == len(prompts.files)

        second = run("run2")
        assert second.exit_code == 0, second.output
        assert "pulling" not in second.output
        assert (len(hub.requests), len(hub.cdn.requests), len(raw.requests)) == asked

        data = tmp_path / "empty"
        refused = run("run3", "--no-pull")
        assert refused.exit_code != 0
        assert "pulling is off (--no-pull" in refused.output and "finharness data pull bizbench" in refused.output
        assert (len(hub.requests), len(hub.cdn.requests), len(raw.requests)) == asked


def test_a_first_use_pull_that_failed_is_not_waited_out_again_by_the_next_task(env, tmp_path):
    """Three BizBench tasks of one run on a data root without BizBench, and a Hub that lacks the dataset: the
    first task's pull fails and says why; the others fail at once with that reason, without asking the Hub
    again (offline, each would wait out huggingface_hub's retries); another data root is tried afresh."""
    from finharness.cli import app

    with hub_server() as hub:  # holds no kensho/bizbench
        env.setenv("HF_ENDPOINT", hub.url)
        env.setenv("FINHARNESS_GITHUB_RAW", hub.url)
        data = tmp_path / "data"
        (data / "bizbench" / "prompts").mkdir(parents=True)  # only the parquet is missing
        result = CliRunner().invoke(app, ["run", "bizbench/fincode", "bizbench/codefinqa", "bizbench/convfinqa-e",
                                          "--model", "fake", "--data-dir", str(data), "--out", str(tmp_path / "out"),
                                          "--quiet"])
        asked = len(hub.requests)
        other = tmp_path / "other"
        (other / "bizbench" / "prompts").mkdir(parents=True)
        with pytest.raises(DataError):
            pull_on_first_use("bizbench", other, needed_by="bizbench/fincode", progress=_quiet)
    assert result.exit_code != 0
    assert result.output.count("pulling it from kensho/bizbench") == 1, result.output  # one pull, not three
    errors = [line.split(": ", 2)[2] for line in result.output.splitlines() if line.startswith("error: bizbench/")]
    assert len(errors) == 3 and len(set(errors)) == 1, errors  # the same reason for each: said once by a scorecard
    assert asked > 0 and len(hub.requests) > asked, "another data root asks the Hub again"
