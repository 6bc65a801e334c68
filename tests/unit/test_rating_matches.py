"""Reading matches files: validation with file:line errors, task splits."""

from __future__ import annotations

import json

import pytest

from finharness.rating import (
    FEW_SHOT,
    ZERO_SHOT,
    Match,
    MatchFileError,
    read_matches,
    split_by_setting,
    split_by_task,
    write_matches,
)


def _write(tmp_path, lines):
    path = tmp_path / "matches.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


GOOD = json.dumps({"task": "Analyst", "model_a": "x", "model_b": "y", "winner": "model_a"})


def test_reads_optional_fields_and_skips_blank_lines(tmp_path):
    path = _write(tmp_path, [
        GOOD, "",
        json.dumps({"task": "0_股价预测", "model_a": "y", "model_b": "z", "winner": "tie",
                    "item_id": 7, "judge": "glm-4-plus", "order": "ba", "extra": 1}, ensure_ascii=False),
    ])
    matches = read_matches(path)
    assert [m.winner for m in matches] == ["model_a", "tie"]
    assert matches[1] == Match("0_股价预测", "y", "z", "tie", item_id="7", judge="glm-4-plus", order="ba")
    assert [m.score_a for m in matches] == [1.0, 0.5]
    assert matches[1].zero_shot and not matches[0].zero_shot


def test_round_trip(tmp_path):
    matches = [Match("t", "a", "b", "model_b", item_id="3"), Match("0_t", "b", "c", "tie"),
               Match("t", "a", "c", "tie", outcome=0.4, label_probs={"ab": {"1": 0.3, "2": 0.5, "3": 0.2}})]
    write_matches(matches, tmp_path / "m.jsonl")
    assert read_matches(tmp_path / "m.jsonl") == matches


@pytest.mark.parametrize("bad_line, message", [
    ('{"task": "t", "model_a": "x", ', "not valid JSON"),
    ('["t", "x", "y", "model_a"]', "expected a JSON object"),
    ('{"task": "t", "model_a": "x", "winner": "model_a"}', "missing key(s) model_b"),
    ('{"task": "t", "model_a": "x", "model_b": "y", "winner": "A"}', "winner 'A' is not one of"),
    ('{"task": "t", "model_a": "x", "model_b": "x", "winner": "tie"}', "both 'x'"),
    ('{"task": "", "model_a": "x", "model_b": "y", "winner": "tie"}', "'task' must be a non-empty string"),
    ('{"task": "t", "model_a": "x", "model_b": "y", "winner": "tie", "label_probs": {"ab": 0.5}}',
     "label_probs must map each order to {label: probability}"),
])
def test_malformed_line_is_reported_with_file_and_line(tmp_path, bad_line, message):
    path = _write(tmp_path, [GOOD, "", bad_line, GOOD])
    with pytest.raises(MatchFileError) as err:
        read_matches(path)
    assert f"{path}:3:" in str(err.value)
    assert message in str(err.value)


def test_missing_file_names_the_path(tmp_path):
    with pytest.raises(MatchFileError, match="nope.jsonl"):
        read_matches(tmp_path / "nope.jsonl")


def test_splits_keep_file_order():
    ms = [Match("B", "x", "y", "model_a"), Match("0_A", "x", "y", "tie"),
          Match("B", "y", "x", "model_b"), Match("C", "x", "z", "tie")]
    assert list(split_by_task(ms)) == ["B", "0_A", "C"]
    assert split_by_task(ms)["B"] == [ms[0], ms[2]]
    groups = split_by_setting(ms)
    assert groups[ZERO_SHOT] == [ms[1]]
    assert groups[FEW_SHOT] == [ms[0], ms[2], ms[3]]
    assert ZERO_SHOT not in split_by_setting([ms[0]])


def test_ucfe_task_keys_split_four_zero_shot(shared_data):
    tasks = json.loads((shared_data / "ucfe" / "UCFE_bench.json").read_text(encoding="utf-8"))
    ms = [Match(task, "x", "y", "tie") for task in tasks]
    groups = split_by_setting(ms)
    assert len(groups[ZERO_SHOT]) == 4
    assert len(groups[FEW_SHOT]) == 13
