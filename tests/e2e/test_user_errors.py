"""Every error a user can cause ends as one `error: PATH...: what (what to do)` line, exit status 2, and loses
nothing stored (issue 26 item 6): one test per class, driven through the command line.

Classes: an unreadable or foreign run store (corrupt, truncated, newer schema, another program's SQLite file,
`replay:` on a corrupt store, a broken call row), no space left, the file-size limit (`ulimit -f`), no
permission (a read-only or immutable output folder), the wrong file type (`--out` naming a file, a folder named
`*.jsonl`, `--store` naming a folder), input past a parser's limit (JSON nested 100,000 deep, a CSV field over
128 KiB), input once accepted silently (a CSV cut inside a quote, an empty UCFE file), a hand-edited or
wrong-typed results.json, and a prediction that is not a string.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import resource
import shutil
import sqlite3
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from finharness.cli import app

SEED_HEADER = "question_id,question,golden_indicators\n"
CPA_HEADER = "id,question,A,B,C,D,answer,explanation\n"


def cli(*args: str):
    return CliRunner().invoke(app, [str(a) for a in args])


def assert_error(result, *names: str) -> str:
    """The command ended with exit 2 and one `error:` line naming each of `names`, no traceback."""
    stderr = result.stderr
    assert result.exit_code == 2, (result.exit_code, result.output, repr(result.exception))
    assert stderr.startswith("error: ") and stderr.count("error: ") == 1, stderr
    assert "Traceback" not in result.output and "Traceback" not in stderr
    for name in names:
        assert name in stderr, (name, stderr)
    return stderr


def subprocess_cli(*args: str, cwd: Path, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "finharness", *map(str, args)], cwd=cwd, capture_output=True,
                          text=True, timeout=300, **kwargs)


def results_of(run: Path) -> dict:
    return json.loads((run / "results.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished demo run on the fake model (results, samples, manifest, store)."""
    out = tmp_path_factory.mktemp("finished") / "run"
    result = cli("run", "demo", "--model", "fake", "--out", out, "-q")
    assert result.exit_code == 0, result.output
    return out


@pytest.fixture
def run_copy(finished: Path, tmp_path: Path) -> Path:
    shutil.copytree(finished, tmp_path / "run")
    return tmp_path / "run"


# -- an unreadable or foreign store -------------------------------------------------------------------------


def _corrupt(store: Path) -> None:
    store.write_bytes(random.Random(7).randbytes(8192))


def _truncated(store: Path) -> None:
    store.write_bytes(store.read_bytes()[:3000])


def _newer(store: Path) -> None:
    with contextlib.closing(sqlite3.connect(store)) as conn:  # closed: the WAL is folded into the file
        conn.execute("PRAGMA user_version=99")
        conn.commit()


def _foreign(store: Path) -> None:
    store.unlink()
    with contextlib.closing(sqlite3.connect(store)) as conn:
        conn.execute("CREATE TABLE users (name TEXT)")
        conn.execute("INSERT INTO users VALUES ('ada')")
        conn.commit()


@pytest.mark.parametrize("damage,said", [(_corrupt, "not a finharness run store, or a damaged one"),
                                         (_truncated, "not a finharness run store, or a damaged one"),
                                         (_newer, "newer than this finharness"),
                                         (_foreign, "not a finharness run store (schema v0, tables: users)")])
@pytest.mark.parametrize("through", ["run", "replay"])
def test_an_unreadable_or_foreign_store_is_an_error_naming_it(run_copy: Path, damage, said: str, through: str):
    store = run_copy / "store.sqlite"
    damage(store)
    before = store.read_bytes()
    if through == "run":
        result = cli("run", "demo", "--model", "fake", "--out", run_copy, "-q")
    else:  # the store read as recorded calls
        result = cli("run", "demo", "--model", f"replay:{store}", "--out", run_copy.parent / "replayed", "-q")
    message = assert_error(result, str(store), said)
    assert "--store" in message  # what to do
    assert store.read_bytes() == before  # nothing changed, nothing lost


@pytest.mark.parametrize("response", ["{not json", '{"text": 5, "bogus": 1}'])
def test_a_broken_call_row_is_an_error_naming_the_store_and_the_key(run_copy: Path, response: str):
    store = run_copy / "store.sqlite"
    with sqlite3.connect(store) as conn:
        key = conn.execute("SELECT key FROM calls ORDER BY key LIMIT 1").fetchone()[0]
        conn.execute("UPDATE calls SET response=? WHERE key=?", (response, key))
        conn.execute("DELETE FROM samples")  # the rerun asks the store for every call again
        calls = conn.execute("SELECT COUNT(*) FROM calls").fetchone()[0]
    message = assert_error(cli("run", "demo", "--model", "fake", "--out", run_copy, "-q"), str(store), key)
    assert f"DELETE FROM calls WHERE key='{key}'" in message
    with sqlite3.connect(store) as conn:
        assert conn.execute("SELECT COUNT(*) FROM calls").fetchone()[0] == calls
        conn.execute("DELETE FROM calls WHERE key=?", (key,))  # what the message says to do
    assert cli("run", "demo", "--model", "fake", "--out", run_copy, "-q").exit_code == 0
    assert results_of(run_copy)["counts"]["calls"] == 1  # only the deleted call was made again


# -- no space, the file-size limit ----------------------------------------------------------------------------


def _mount_namespace() -> list[str] | None:
    """The unshare prefix that runs a command in a mount namespace of its own (root: a plain one; others: with a
    user namespace), None where none can be made."""
    for prefix in (["unshare", "--mount"], ["unshare", "--user", "--map-root-user", "--mount"]):
        if shutil.which("unshare") and subprocess.run([*prefix, "true"], capture_output=True).returncode == 0:
            return prefix
    return None


def test_no_space_left_is_an_error_and_a_rerun_with_space_finishes_from_what_was_stored(tmp_path: Path):
    prefix = _mount_namespace()
    if prefix is None:  # no way to mount a small disk here: the same failure raised where results.json is written
        from unittest import mock

        import finharness.data.io as data_io

        real_fsync = os.fsync

        def full(fd: int) -> None:
            raise OSError(28, "No space left on device")

        out = tmp_path / "run"
        with mock.patch.object(data_io.os, "fsync", full):
            assert_error(cli("run", "demo", "--model", "fake", "--out", out, "-q"), str(out / "results.json"),
                         "no space left on the device", "rerun the same command")
        assert data_io.os.fsync is real_fsync
        assert cli("run", "demo", "--model", "fake", "--out", out, "-q").exit_code == 0
        assert results_of(out)["counts"]["cache_hits"] == 12 and results_of(out)["counts"]["calls"] == 0
        return
    # a 120 KiB disk takes the store's first rows, then is full; remounted larger, the same command finishes
    disk = tmp_path / "disk"
    disk.mkdir()
    run = [sys.executable, "-m", "finharness", "run", "demo", "--model", "fake", "--out", str(disk / "run"), "-q"]
    script = (f"mount -t tmpfs -o size=120k tmpfs {disk} && {{ {' '.join(run)}; echo \"exit $?\"; "
              f"sqlite3 {disk}/run/store.sqlite 'SELECT COUNT(*) FROM calls' 2>/dev/null || "
              f"{sys.executable} -c \"import sqlite3;print(sqlite3.connect('{disk}/run/store.sqlite')"
              ".execute('SELECT COUNT(*) FROM calls').fetchone()[0])\"; "
              f"mount -o remount,size=16m {disk} && {' '.join(run)} >/dev/null; echo \"exit $?\"; "
              f"cat {disk}/run/results.json; }}")
    proc = subprocess.run([*prefix, "sh", "-c", script], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    lines = proc.stdout.splitlines()
    assert lines[0] == "exit 2", proc.stdout + proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert f"{disk}/run/store.sqlite" in errors[0] and "no space left" in errors[0] and "rerun" in errors[0]
    committed = int(lines[1])
    assert lines[2] == "exit 0", proc.stdout + proc.stderr
    finished = json.loads("\n".join(lines[3:]))
    assert finished["status"] == "complete"
    assert finished["counts"]["cache_hits"] == committed and finished["counts"]["calls"] == 12 - committed


def test_the_file_size_limit_is_an_error_and_a_rerun_finishes_from_what_was_stored(tmp_path: Path):
    def limited() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (131072, 131072))  # SIGXFSZ is ignored by Python: EFBIG

    model = "fake?reply=Answer: B " + "x" * 4000  # 12 replies of 4 kB: more than the store may grow to
    args = ("run", "demo", "--model", model, "--out", "run", "-q")
    proc = subprocess_cli(*args, cwd=tmp_path, preexec_fn=limited)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.startswith("error: ") and proc.stderr.count("error: ") == 1, proc.stderr
    assert "run/store.sqlite" in proc.stderr and "ulimit -f" in proc.stderr and "131072 bytes" in proc.stderr
    with contextlib.closing(sqlite3.connect(tmp_path / "run" / "store.sqlite")) as conn:
        committed = conn.execute("SELECT COUNT(*) FROM calls").fetchone()[0]
    assert subprocess_cli(*args, cwd=tmp_path).returncode == 0
    counts = results_of(tmp_path / "run")["counts"]
    assert counts["cache_hits"] == committed and counts["calls"] == 12 - committed


# -- no permission ---------------------------------------------------------------------------------------------


def _lock_folder(folder: Path) -> list[str] | None:
    """Make `folder` unwritable for the command: immutable for root (chattr +i), read-only for anyone else.
    Returns the command that undoes it (None: chmod, undone by _unlock)."""
    if os.geteuid() == 0:
        done = subprocess.run(["chattr", "+i", str(folder)], capture_output=True)
        assert done.returncode == 0, f"chattr +i failed: {done.stderr.decode()}"
        return ["chattr", "-i", str(folder)]
    folder.chmod(stat.S_IRUSR | stat.S_IXUSR)
    return None


@pytest.mark.parametrize("store_elsewhere", [False, True])
def test_a_read_only_or_immutable_output_folder_is_an_error_naming_it(run_copy: Path, tmp_path: Path,
                                                                     store_elsewhere: bool):
    store = tmp_path / "elsewhere.sqlite" if store_elsewhere else run_copy / "store.sqlite"
    if store_elsewhere:
        shutil.move(run_copy / "store.sqlite", store)
        (run_copy / "results.json").unlink()  # the run must write it again
    before = {p.name: p.read_bytes() for p in run_copy.iterdir()}
    undo = _lock_folder(run_copy)
    try:
        result = cli("run", "demo", "--model", "fake", "--out", run_copy, "--store", store, "-q")
    finally:
        if undo:
            subprocess.run(undo, check=True)
        else:
            run_copy.chmod(0o755)
    named = str(run_copy / "samples.jsonl") if store_elsewhere else str(store)  # the first file the run writes
    message = assert_error(result, named)
    assert "permission" in message or "not permitted" in message or "immutable" in message
    assert {p.name: p.read_bytes() for p in run_copy.iterdir()} == before


# -- the wrong file type ---------------------------------------------------------------------------------------


def test_a_file_where_a_folder_belongs_or_a_folder_where_a_file_belongs(tmp_path: Path):
    a_file = tmp_path / "not-a-folder"
    a_file.write_text("keep me\n")
    assert_error(cli("run", "demo", "--model", "fake", "--out", a_file, "-q"), str(a_file), "not a folder")
    assert a_file.read_text() == "keep me\n"
    folder = tmp_path / "predictions.jsonl"
    folder.mkdir()
    assert_error(cli("score", "demo", "--predictions", folder), str(folder), "is a folder")
    store_folder = tmp_path / "store.sqlite"
    store_folder.mkdir(exist_ok=True)
    assert_error(cli("run", "demo", "--model", "fake", "--out", tmp_path / "out", "--store", store_folder, "-q"),
                 str(store_folder), "is a folder")


# -- input past a parser's limit, input once accepted silently -------------------------------------------------


def _seed(tmp_path: Path, body: str) -> list[str]:
    path = tmp_path / "seed.csv"
    path.write_text(SEED_HEADER + body, encoding="utf-8")
    return ["run", "fintradebench", "--model", "fake", "--judge", "fake", "--data-dir", str(tmp_path),
            "-o", f"questions={path}", "--out", str(tmp_path / "out"), "-q"]


def _cpa(tmp_path: Path, body: str) -> list[str]:
    folder = tmp_path / "IDEAFinBench" / "cpa_one" / "dev"
    folder.mkdir(parents=True)
    (folder / "accounting_dev.csv").write_text(CPA_HEADER + body, encoding="utf-8")
    return ["data", "convert", "ideafinbench", str(tmp_path / "IDEAFinBench"), str(tmp_path / "exam")]


DEEP = "[" * 100_000 + "]" * 100_000


@pytest.mark.parametrize("case", ["predictions", "matches", "seed", "cpa"])
def test_input_past_a_parser_limit_is_an_error_naming_the_file_and_line(tmp_path: Path, case: str):
    long_field = "x" * 140_000
    if case == "predictions":
        path = tmp_path / "p.jsonl"
        path.write_text('{"id": "demo/0", "prediction": "B"}\n{"id": "demo/1", "prediction": ' + DEEP + "}\n")
        assert_error(cli("score", "demo", "--predictions", path), f"{path}:2:", "nested deeper")
    elif case == "matches":
        path = tmp_path / "m.jsonl"
        path.write_text(json.dumps({"task": "t", "model_a": "a", "model_b": "b", "winner": "tie"}) + "\n" + DEEP + "\n")
        assert_error(cli("rate", path), f"{path}:2:", "nested deeper")
    elif case == "seed":
        assert_error(cli(*_seed(tmp_path, f'F1,"What is the P/E of AAPL?",P/E\nF2,"{long_field}",P/E\n')),
                     f"{tmp_path / 'seed.csv'}:3:", "longer than 131072 characters", "quote")
    else:
        assert_error(cli(*_cpa(tmp_path, f'0,"Q one",a,b,c,d,A,\n1,"{long_field}",a,b,c,d,B,\n')),
                     "accounting_dev.csv:3:", "longer than 131072 characters")
        assert not (tmp_path / "exam").exists()


@pytest.mark.parametrize("case", ["seed", "cpa", "ucfe"])
def test_input_once_accepted_silently_is_an_error(tmp_path: Path, case: str):
    if case == "seed":  # cut inside the quoted question of F2: F2 was read with the rest of the file as its text
        assert_error(cli(*_seed(tmp_path, 'F1,"What is the P/E of AAPL?",P/E\nF2,"What is MSFT\'s revenue,\n')),
                     f"{tmp_path / 'seed.csv'}:3:", "ends inside a quoted field")
    elif case == "cpa":
        assert_error(cli(*_cpa(tmp_path, '0,"Q one",a,b,c,d,A,\n1,"Q two, cut\n')),
                     "accounting_dev.csv:3:", "ends inside a quoted field")
        assert not (tmp_path / "exam").exists()
    else:  # `{}`: a run of it was "complete" with n = 0
        bench = tmp_path / "ucfe" / "UCFE_bench.json"
        bench.parent.mkdir()
        bench.write_text("{}\n")
        assert_error(cli("run", "ucfe", "--model", "fake", "--user-model", "fake", "--data-dir", tmp_path,
                         "--out", tmp_path / "out", "-q"), str(bench), "holds no items")


# -- results.json edited by hand, a prediction that is not a string ---------------------------------------------


@pytest.mark.parametrize("edit,said", [
    (lambda r: {**r, "metrics": [1, 2]}, "'metrics' is a list, not a dict"),
    (lambda r: {**r, "metrics": {"accuracy": {**r["metrics"]["accuracy"], "value": "high"}}},
     "metrics['accuracy'].value is a str"),
    (lambda r: {**r, "counts": "many"}, "'counts' is a str"),
    (lambda r: None, "malformed JSON")])
@pytest.mark.parametrize("html", [False, True])
def test_report_on_a_hand_edited_results_json_is_an_error_naming_it(run_copy: Path, tmp_path: Path, edit, said: str,
                                                                    html: bool):
    path = run_copy / "results.json"
    edited = edit(results_of(run_copy))
    path.write_text('{"task": "demo", ' if edited is None else json.dumps(edited), encoding="utf-8")
    args = ["report", run_copy, *(["--html", tmp_path / "r.html"] if html else [])]
    assert_error(cli(*args), str(path), said)
    assert not (tmp_path / "r.html").exists()


def test_score_with_a_prediction_that_is_not_a_string_names_the_line(tmp_path: Path):
    path = tmp_path / "p.jsonl"
    path.write_text('{"id": "demo/0", "prediction": "Answer: B"}\n{"id": "demo/1", "prediction": 5}\n')
    assert_error(cli("score", "demo", "--predictions", path), f"{path}:2:", '"prediction" is 5 (int)', "string")
