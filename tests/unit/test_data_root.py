"""One meaning for --data-dir: the data root of every task (issue 24 item 5, issue 28 item 3).

CFinBench's exam folder is the task option `exam` (default DATA_ROOT/cfinbench); an exam folder given as
--data-dir in the old meaning is an error whose hint, followed as printed, runs; the CPA stand-in converted
from IDEAFinBench is `-o exam=standin:cpa`, named as a stand-in in its outputs; the four benchmarks and the
demo pool on one data root.
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest
from typer.testing import CliRunner

from finharness.benchmarks.cfinbench.task import STANDIN_CPA, STANDIN_NOTE, CFinBenchTask
from finharness.core.hashing import content_key
from finharness.core.results import RunConfig
from finharness.data.errors import DataError

from ..benchmarks.test_cfinbench_task import EXAM, write_exam


def cli(*args: str):
    from finharness.cli import app

    return CliRunner().invoke(app, list(args), catch_exceptions=False)


def exam_folder(tmp_path: Path) -> Path:
    """An exam in CFinBench's layout at a folder of its own (what --data-dir used to name)."""
    return write_exam(tmp_path / "data") / "cfinbench"


def test_an_exam_folder_given_as_data_dir_says_what_to_type_and_the_hint_runs(tmp_path: Path):
    exam = exam_folder(tmp_path)
    out = tmp_path / "out"
    old = cli("run", "cfinbench", "--model", "fake", "--data-dir", str(exam), "--out", str(out), "-q")
    assert old.exit_code == 2
    assert "not a data root" in old.output and f"-o exam={exam}" in old.output
    assert not (out / "results.json").exists()
    suggested = re.search(r"run the exam with (-o exam=\S+)", old.output).group(1)
    new = cli("run", "cfinbench", "--model", "fake", *shlex.split(suggested), "--out", str(out), "-q")
    assert new.exit_code == 0, new.output
    results = json.loads((out / "results.json").read_text(encoding="utf-8"))
    assert results["status"] == "complete" and results["counts"]["samples"] == sum(
        len(items) for name, items in EXAM.items() if name.startswith("val/"))


def test_the_default_exam_is_the_data_roots_cfinbench_folder_and_its_path_is_not_in_the_run_key(tmp_path: Path):
    root = write_exam(tmp_path / "a")
    elsewhere = write_exam(tmp_path / "b") / "cfinbench"
    by_root, by_option = CFinBenchTask(), CFinBenchTask(exam=elsewhere)
    assert [s.id for s in by_root.load(root)] == [s.id for s in by_option.load(None)]
    assert by_root.config() == by_option.config()  # the questions (samples_sha256) say what was asked, not the path
    key = [content_key(RunConfig(task="cfinbench", task_config=t.run_config(), models={}).to_json())
           for t in (by_root, by_option)]
    assert key[0] == key[1]


def test_missing_questions_name_the_stand_in(tmp_path: Path):
    (tmp_path / "cfinbench").mkdir()  # as ../shared/data: the release files, no questions
    with pytest.raises(DataError) as err:
        CFinBenchTask().load(tmp_path)
    assert f"-o exam={STANDIN_CPA}" in str(err.value) and "no 'val' split folder" in str(err.value)


def ideafinbench(root: Path) -> Path:
    """A data root holding a two-subject IDEAFinBench CPA copy in its official layout."""
    for folder, answers in (("cpa_one", ("B", "C")), ("cpa_multi", ("A,B", "B,D"))):
        base = root / "cfa_cpa" / "IDEAFinBench" / folder
        (base).mkdir(parents=True, exist_ok=True)
        (base / "subject_mapping.json").write_text(json.dumps({"accounting": ["Accounting", "会计", "Accounting"],
                                                               "tax_law": ["Tax Law", "税法", "Tax Law"]}),
                                                   encoding="utf-8")
        for split in ("dev", "val", "test"):
            (base / split).mkdir(exist_ok=True)
            for subject in ("accounting", "tax_law"):
                header = "id,question,A,B,C,D" + ("" if split == "test" else ",answer")
                rows = [f"{i},问题{i},甲,乙,丙,丁" + ("" if split == "test" else f",{answers[i % 2]}")
                        for i in range(3)]
                (base / split / f"{subject}_{split}.csv").write_text("\n".join([header, *rows]) + "\n",
                                                                    encoding="utf-8")
    return root


def test_the_cpa_stand_in_is_converted_once_and_named_as_a_stand_in(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("FINHARNESS_CACHE", str(tmp_path / "cache"))
    root = ideafinbench(tmp_path / "data")
    out = tmp_path / "out"
    first = cli("run", "cfinbench", "--model", "fake?reply=答案：B", "--data-dir", str(root),
                "-o", f"exam={STANDIN_CPA}", "--out", str(out), "-q")
    assert first.exit_code == 0, first.output
    results = json.loads((out / "results.json").read_text(encoding="utf-8"))
    assert results["notes"][0] == STANDIN_NOTE and "stand-in" in first.output
    assert results["extra"]["exam"]["standin"] == "cpa"
    assert results["config"]["task_config"]["exam"] == STANDIN_CPA  # another exam: another run key
    assert results["counts"]["samples"] == 12  # 2 subjects x 3 val items x (single + multiple)
    converted = list((tmp_path / "cache" / "standins").iterdir())
    assert len(converted) == 1 and (converted[0] / "categories.json").is_file()
    stamp = (converted[0] / "categories.json").stat().st_mtime_ns
    CFinBenchTask(exam=STANDIN_CPA).load(root)  # the same source: the cached conversion, not a new one
    assert (converted[0] / "categories.json").stat().st_mtime_ns == stamp
    (root / "cfa_cpa" / "IDEAFinBench" / "cpa_one" / "val" / "tax_law_val.csv").write_text(
        "id,question,A,B,C,D,answer\n0,新问题,甲,乙,丙,丁,A\n", encoding="utf-8")
    CFinBenchTask(exam=STANDIN_CPA).load(root)  # a changed source is converted again, beside the old one
    assert len(list((tmp_path / "cache" / "standins").iterdir())) == 2


def test_the_stand_in_without_its_source_says_how_to_get_it(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("FINHARNESS_CACHE", str(tmp_path / "cache"))
    with pytest.raises(DataError, match="finharness data pull ideafinbench"):
        CFinBenchTask(exam=STANDIN_CPA).load(tmp_path)


def test_every_benchmark_pools_on_one_data_root(tmp_path: Path, shared_data: Path):
    root = tmp_path / "data"
    root.mkdir()
    for name in ("fintradebench", "tatqa", "nasdaq100_ohlcv", "bizbench"):
        (root / name).symlink_to(shared_data / name)
    write_exam(root)
    out = tmp_path / "pool"
    result = cli("run", "demo", "cfinbench", "bizbench/tatqa-e", "fintradebench", "--model", "fake",
                 "--judge", "fake", "--data-dir", str(root), "--limit", "2", "-o", "per_category=1",
                 "-o", "shots=0", "--out", str(out), "-q")
    assert result.exit_code == 0, result.output
    for task in ("demo", "cfinbench", "bizbench_tatqa-e", "fintradebench"):
        assert json.loads((out / task / "results.json").read_text(encoding="utf-8"))["status"] == "complete"
    typo = cli("run", "demo", "cfinbench", "--model", "fake", "--data-dir", str(root), "-o", "shot=3",
               "--out", str(tmp_path / "typo"), "-q")
    assert typo.exit_code == 2 and "did you mean 'shots'" in typo.output
