"""The IDEAFinBench -> CFinBench converter on the real CPA files, and the converted exam as a task."""

from __future__ import annotations

import csv
import json

import pytest
from typer.testing import CliRunner

from finharness.benchmarks.cfinbench.convert import convert_ideafinbench
from finharness.benchmarks.cfinbench.task import CFinBenchTask
from finharness.data.errors import DataError


def csv_questions(folder, split):
    """Non-blank CSV rows per subject, counted independently of the converter."""
    counts = {}
    for path in sorted((folder / split).glob(f"*_{split}.csv")):
        with path.open(encoding="utf-8-sig", newline="") as handle:
            rows = [r for r in csv.DictReader(handle) if any((v or "").strip() for v in r.values() if isinstance(v, str))]
        counts[path.stem[: -len(split) - 1]] = len(rows)
    return counts


@pytest.fixture(scope="module")
def converted(shared_data, tmp_path_factory):
    src = shared_data / "cfa_cpa" / "IDEAFinBench"
    dest = tmp_path_factory.mktemp("cpa")
    return src, dest, convert_ideafinbench(src, dest)


def test_counts_per_split_match_the_csv_rows(converted):
    src, dest, summary = converted
    for source, question_type in (("cpa_one", "single_choice"), ("cpa_multi", "multi_choice")):
        for split in ("dev", "val", "test"):
            expected = csv_questions(src / source, split)
            assert summary.counts[split][question_type] == expected
            for subject, n in expected.items():
                lines = (dest / split / question_type / f"{subject}.jsonl").read_text(encoding="utf-8").splitlines()
                assert len(lines) == n
    assert summary.total("val", "single_choice") == 1414 and summary.total("val", "multi_choice") == 1142
    assert summary.skipped_blank_rows == 2  # two empty rows in cpa_one/dev/strategy_dev.csv


def test_converted_items_are_in_the_official_layout(converted):
    _, dest, _ = converted
    first = json.loads((dest / "val" / "multi_choice" / "tax_law.jsonl").read_text(encoding="utf-8").splitlines()[0])
    assert first["Answer"] == "AD"  # 'A,D' in the CSV
    assert first["OptionList"][0].startswith("A. ") and len(first["OptionList"]) == 4
    test_item = json.loads((dest / "test" / "single_choice" / "tax_law.jsonl").read_text(encoding="utf-8"))
    assert "Answer" not in test_item
    names = json.loads((dest / "categories.json").read_text(encoding="utf-8"))
    assert names["accounting"]["zh"] == "会计" and names["accounting"]["group"] == "CPA"


def test_converted_exam_runs_through_the_task(converted):
    _, dest, _ = converted
    task = CFinBenchTask(shots=3, exam=dest)  # an exam folder anywhere, the data root left to the other tasks
    samples = task.load(None)
    assert len(samples) == 1414 + 1142
    first = samples[0]
    assert first.id == "val/single_choice/accounting/0"
    assert task.prompt(first).startswith("请你做一道关于会计的单项选择题")
    assert task.prompt(first).count("\n答案: ") == 3
    test_samples = CFinBenchTask(split="test", exam=dest).load(None)
    assert len(test_samples) == 12 and all(s.target is None for s in test_samples)


def test_bad_answer_names_file_and_line(tmp_path):
    folder = tmp_path / "cpa_multi" / "val"
    folder.mkdir(parents=True)
    (folder / "law_val.csv").write_text("id,question,A,B,C,D,answer\n0,Q,a,b,c,d,\"A,B\"\n1,Q2,a,b,c,d,maybe\n",
                                        encoding="utf-8")
    with pytest.raises(DataError) as err:
        convert_ideafinbench(tmp_path, tmp_path / "out")
    assert err.value.path.endswith("law_val.csv") and err.value.line == 3


def test_cli_command(converted, tmp_path):
    src, _, _ = converted
    from finharness.cli import app

    result = CliRunner().invoke(app, ["data", "convert", "ideafinbench", str(src / "cpa_multi"), str(tmp_path / "out"), "--json"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output)
    assert list(summary["counts"]["val"]) == ["multi_choice"]
    missing = CliRunner().invoke(app, ["data", "convert", "ideafinbench", str(tmp_path / "nowhere"), str(tmp_path / "out2")])
    assert missing.exit_code == 2 and "no cpa_one or cpa_multi folder" in missing.output
