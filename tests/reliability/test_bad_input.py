"""Bad input for the loaders: each stops with a DataError naming the file (and the line where there is one),
and a run on bad data writes no results.json."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from finharness.benchmarks.cfinbench.task import CFinBenchTask
from finharness.benchmarks.fintradebench.questions import read_questions
from finharness.benchmarks.ucfe.data import load_items
from finharness.data.errors import DataError

GOOD = {"text": "下列说法正确的是", "OptionList": ["A. 甲", "B. 乙", "C. 丙", "D. 丁"], "Answer": "B"}


def exam(root: Path, val_lines: bytes) -> Path:
    """A data root whose CFinBench exam holds `val_lines` as its one val file."""
    for split in ("dev", "val"):
        d = root / "cfinbench" / split / "single_choice"
        d.mkdir(parents=True)
        body = val_lines if split == "val" else "\n".join(json.dumps(GOOD, ensure_ascii=False) for _ in range(3)).encode()
        (d / "1-1.jsonl").write_bytes(body)
    return root


def good_line() -> bytes:
    return json.dumps(GOOD, ensure_ascii=False).encode("utf-8")


CFINBENCH_CASES = {
    "malformed JSON on line 2": (good_line() + b"\n{\"text\": \n", ":2:", "malformed JSON"),
    "GBK-encoded file": (json.dumps(GOOD, ensure_ascii=False).encode("gbk"), ":1:", "not UTF-8"),
    "latin-1 after a UTF-8 BOM": (b"\xef\xbb\xbf" + good_line() + b"\n" + '{"text": "caf\xe9"}'.encode("latin-1"), ":2:",
                                  "not UTF-8"),
    "empty file": (b"", "", "empty"),
    "missing Answer on line 2": (good_line() + b"\n" + json.dumps({k: v for k, v in GOOD.items() if k != "Answer"},
                                                                  ensure_ascii=False).encode(), ":2:", "Answer"),
}


@pytest.mark.parametrize("case", sorted(CFINBENCH_CASES))
def test_cfinbench_loader_names_file_and_line(tmp_path: Path, case: str):
    body, where, what = CFINBENCH_CASES[case]
    root = exam(tmp_path / "exam", body)
    with pytest.raises(DataError) as err:
        CFinBenchTask().load(root)
    message = str(err.value)
    assert "val/single_choice/1-1.jsonl" in message and where in message and what in message, message


def test_ucfe_malformed_json_names_file_and_line(tmp_path: Path):
    (tmp_path / "ucfe").mkdir()
    bad = tmp_path / "ucfe" / "UCFE_bench.json"
    bad.write_text('{\n  "0_task": [\n    {"id": 1,\n  ]\n}\n', encoding="utf-8")
    with pytest.raises(DataError) as err:
        load_items(bad)
    assert str(bad) in str(err.value) and ":4:" in str(err.value)


def test_fintradebench_seed_missing_column_and_wrong_encoding(tmp_path: Path):
    missing = tmp_path / "seed.csv"
    missing.write_text("question_id,question\nF1,What is Apple's ROA?\n", encoding="utf-8")
    with pytest.raises(DataError) as err:
        read_questions(missing)
    assert str(missing) in str(err.value) and "golden_indicators" in str(err.value)
    gbk = tmp_path / "gbk.csv"
    gbk.write_bytes("question_id,question,golden_indicators,response\nF1,苹果公司的ROA是多少？,ROA,高\n".encode("gbk"))
    with pytest.raises(DataError) as err:
        read_questions(gbk)
    assert str(gbk) in str(err.value) and ":2:" in str(err.value) and "not UTF-8" in str(err.value)


def test_a_run_on_bad_data_writes_no_results(tmp_path: Path):
    root = exam(tmp_path / "exam", good_line() + b"\n{broken\n")
    proc = subprocess.run([sys.executable, "-m", "finharness", "run", "cfinbench", "--model", "fake",
                           "--data-dir", str(root), "--out", str(tmp_path / "out"), "-q"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2 and "1-1.jsonl:2:" in proc.stderr
    assert not (tmp_path / "out" / "results.json").exists()
