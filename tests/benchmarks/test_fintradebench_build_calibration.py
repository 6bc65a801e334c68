"""Phase 2 of the FinTradeBench build: human Likert scores against the judge (Table 11), and `build calibrate`."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import typer
from scipy.stats import beta, norm, spearmanr, t
from typer.testing import CliRunner

from finharness.benchmarks.fintradebench.construction.calibration import (
    ALL,
    OVERALL,
    RATER_APP_DIMENSIONS,
    calibrate_both,
    calibrate_build,
    read_human_scores,
)
from finharness.benchmarks.fintradebench.construction.cli_analysis import register
from finharness.data.errors import DataError
from finharness.data.io import write_jsonl
from finharness.ui.exports import RUBRIC_COLUMNS
from finharness.ui.storage import RUBRIC_DIMENSIONS

EXAMPLE = Path(__file__).parents[1] / "golden" / "fintradebench_human_scores_example.csv"
BIG, SMALL = "embedded", "embedded:1.5b"



def scores(correctness: int, reasoning: int = 3, signals: int = 3, fundamentals: int = 3) -> dict:
    return {"correctness": correctness, "reasoning_depth": reasoning, "signal_integration": signals,
            "fundamental_integration": fundamentals}


def judged_row(qid: str, model: str, stage: str, score: dict | None, judge: str = SMALL, index: int = 0) -> dict:
    return {"question_id": qid, "model": model, "candidate_index": index, "level": "L1", "stage": stage,
            "judge": judge, "scores": score, "golden_found": 1}


@pytest.fixture
def build(tmp_path: Path) -> Path:
    """questions + judged rows matching tests/golden/fintradebench_human_scores_example.csv."""
    write_jsonl(tmp_path / "questions.jsonl", [
        {"question_id": q, "category": c, "ticker": "AAPL", "as_of": "2025-06-30", "question": "?",
         "golden_indicators": ["ROA"], "source_id": q, "scaled": False}
        for q, c in (("F1", "F"), ("T2", "T"), ("FT3", "FT"), ("F9", "F"))])
    write_jsonl(tmp_path / "judged.jsonl", [
        judged_row("F1", BIG, "after", scores(4, reasoning=4)),
        judged_row("T2", BIG, "after", scores(5, reasoning=2)),
        judged_row("FT3", BIG, "after", scores(2)),
        judged_row("F1", SMALL, "after", scores(3)),
        judged_row("T2", SMALL, "after", scores(1)),
        judged_row("FT3", SMALL, "after", scores(2)),
        judged_row("F1", BIG, "before", scores(1), index=3),  # candidates: never compared with humans
        judged_row("F9", BIG, "after", scores(5)),  # nobody scored it
    ])
    return tmp_path


def test_correctness_cells_match_the_hand_computed_table(build):
    result = calibrate_build(build, EXAMPLE)
    # (judge, human) on correctness; F1/embedded's human score is the mean of alice 4 and bob 2
    big = [(4, 3), (5, 5), (2, 1)]
    small = [(3, 2), (1, 2), (2, 2)]
    cell = result.cell(BIG, ALL, "correctness")
    assert cell.n == 3 and cell.ratings == 4
    assert cell.mae.value == pytest.approx((1 + 0 + 1) / 3)
    assert cell.bias.value == pytest.approx((1 + 0 + 1) / 3)
    assert cell.spearman == pytest.approx(1.0) and cell.spearman_null is None
    pooled = result.cell(ALL, ALL, "correctness")
    assert pooled.n == 6
    assert pooled.mae.value == pytest.approx(sum(abs(j - h) for j, h in big + small) / 6)
    assert pooled.bias.value == pytest.approx(sum(j - h for j, h in big + small) / 6)
    expected = spearmanr([j for j, _ in big + small], [h for _, h in big + small]).statistic
    assert pooled.spearman == pytest.approx(expected)
    # the bounded interval on [0, 4], not Wilson's, although every |judge − human| here is 0 or 1: an MAE is in
    # points, a quarter of the range each, not a share; Korn-Graubard's effective n, Clopper-Pearson (n < 30), the
    # variance pooled with half an item of the widest spread p(1 - p) below 30 items (stats.ci)
    u = np.asarray([1, 0, 1, 1, 1, 0]) / 4
    p = u.mean()
    spread = (6 * u.var(ddof=1) + 0.5 * p * (1 - p)) / 6.5
    n_eff = p * (1 - p) / (spread / 6) * (norm.ppf(0.975) / t.ppf(0.975, 5)) ** 2
    low, high = beta.ppf(0.025, p * n_eff, n_eff - p * n_eff + 1), beta.ppf(0.975, p * n_eff + 1, n_eff - p * n_eff)
    assert pooled.mae.ci95 == pytest.approx((4 * low, 4 * high))
    assert pooled.mae.method == "effective-n clopper-pearson" and 0 < pooled.mae.ci95[0] < 2 / 3


def test_spearman_is_null_with_the_reason_when_a_side_is_constant_or_too_small(build):
    result = calibrate_build(build, EXAMPLE)
    constant = result.cell(SMALL, ALL, "correctness")  # the humans gave embedded:1.5b 2, 2, 2
    assert constant.spearman is None and constant.spearman_p is None
    assert constant.spearman_null == "human scores constant (2)"
    assert constant.mae.value == pytest.approx((1 + 1 + 0) / 3) and constant.bias.value == pytest.approx(0.0)
    one_item = result.cell(ALL, "F", "reasoning_depth")
    assert one_item.n == 1 and one_item.spearman is None and "fewer than 3" in one_item.spearman_null
    assert result.cell(ALL, "F", "reasoning_depth").to_json()["spearman"] is None


def test_overall_is_the_mean_of_the_dimensions_both_sides_scored(build):
    result = calibrate_build(build, EXAMPLE)
    # F1/embedded: humans scored correctness (mean 3) and reasoning (3); the judge 4 and 4 -> |4 - 3| = 1
    f = result.cell(BIG, "F", OVERALL)
    assert f.n == 1 and f.mae.value == pytest.approx(1.0) and f.ratings == 3
    # per question type: F holds F1 of both models
    cat = result.cell(ALL, "F", OVERALL)
    assert cat.n == 2 and cat.mae.value == pytest.approx((1.0 + 1.0) / 2)
    table = {(c.model, c.category, c.dimension) for c in result.table_rows()}
    assert (ALL, ALL, OVERALL) in table and (BIG, ALL, OVERALL) in table and (ALL, "FT", OVERALL) in table
    assert (ALL, ALL, "reasoning_depth") in table and (BIG, "F", OVERALL) not in table


def test_join_counts_what_was_not_compared(build):
    rows = (build / "judged.jsonl").read_text().splitlines()
    rows[2] = json.dumps(judged_row("FT3", BIG, "after", None))  # unparseable reply
    (build / "judged.jsonl").write_text("\n".join(rows) + "\n")
    result = calibrate_build(build, EXAMPLE)
    assert result.judge_unparseable == 1 and result.items == 5
    assert result.judge_only == 1  # F9
    assert result.raters == ("alice", "bob") and result.human_rows == 8
    assert result.judges == (SMALL,)


@pytest.mark.parametrize("copies,warned", [(4, True), (3, False)])
def test_verdicts_that_copy_the_rubric_example_are_counted_and_flagged(build, copies, warned):
    rows = [json.loads(line) for line in (build / "judged.jsonl").read_text().splitlines()]
    compared = [r for r in rows if r["stage"] == "after" and r["question_id"] != "F9"]  # the 6 items
    for row in compared[:copies]:
        row["scores"] = scores(4, reasoning=5, signals=4, fundamentals=5)  # the release's rubric example
    write_jsonl(build / "judged.jsonl", rows)
    result = calibrate_build(build, EXAMPLE)
    assert result.items == 6 and result.rubric_example_items == copies
    flagged = [n for n in result.notes() if "rubric's example (4/5/4/5)" in n]
    assert bool(flagged) is warned and result.to_json()["notes"] == result.notes()


def test_several_judges_need_a_choice(build):
    with open(build / "judged.jsonl", "a") as f:
        f.write(json.dumps(judged_row("F1", BIG, "after", scores(1), judge="other")) + "\n")
    with pytest.raises(DataError, match=r"judged\.jsonl:9: two judged rows .*--judge"):
        calibrate_build(build, EXAMPLE)
    assert calibrate_build(build, EXAMPLE, judge=SMALL).items == 6
    assert calibrate_build(build, EXAMPLE, judge="other").cell(BIG, ALL, "correctness").mae.value == pytest.approx(2)
    with pytest.raises(DataError, match="judges in the file"):
        calibrate_build(build, EXAMPLE, judge="nobody")


def test_human_rows_are_averaged_over_raters_and_counted():
    human = read_human_scores(EXAMPLE)
    cell = human.scores[("F1", BIG, "correctness")]
    assert cell.mean == pytest.approx(3.0) and cell.raters == ("alice", "bob")
    assert human.rows == 8 and human.raters == ["alice", "bob"]


@pytest.mark.parametrize(("row", "message"), [
    ("F1,embedded,correctness,6,carol", "score 6 is outside 1-5"),
    ("F1,embedded,correctness,good,carol", "score 'good' is not a number"),
    ("F1,embedded,politeness,3,carol", "dimension 'politeness' is not one of"),
    ("F1,embedded,correctness,,carol", "score is empty"),
    ("F1,embedded,correctness,3,alice", "rater 'alice' scored F1 / embedded / correctness twice"),
])
def test_bad_human_rows_name_the_file_and_line(tmp_path, row, message):
    path = tmp_path / "h.csv"
    path.write_text(EXAMPLE.read_text() + row + "\n", encoding="utf-8")
    with pytest.raises(DataError, match=message) as err:
        read_human_scores(path)
    assert str(err.value).startswith(f"{path}:10: ")


def test_unknown_layout_is_refused(tmp_path):
    path = tmp_path / "h.csv"
    path.write_text("question_id,correctness\nF1,3\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"h\.csv:1: unknown layout"):
        read_human_scores(path)


def test_rater_app_export_maps_accuracy_and_clarity_onto_the_judge(tmp_path):
    assert set(RATER_APP_DIMENSIONS) == {key for key, _, _ in RUBRIC_DIMENSIONS}  # the app's rubric, all mapped
    path = tmp_path / "rubric.csv"
    assert ",".join(RUBRIC_COLUMNS) == "rater,task,item_id,sample_id,model,accuracy,completeness,relevance,clarity," \
                                      "mean,comment,created"
    path.write_text(",".join(RUBRIC_COLUMNS) + "\n"
                    "alice,fintradebench,F1,s1,embedded,4,5,5,2,4,,0\n"
                    "bob,fintradebench,F1,s1,embedded,2,5,5,4,4,,0\n", encoding="utf-8")
    human = read_human_scores(path)
    assert human.scores[("F1", BIG, "correctness")].mean == pytest.approx(3.0)
    assert human.scores[("F1", BIG, "reasoning_depth")].mean == pytest.approx(3.0)
    assert human.unmapped == {"completeness": 2, "relevance": 2} and human.rows == 4


def test_cli_calibrate_writes_calibration_json(build, tmp_path):
    app = typer.Typer()
    register(app)
    human = tmp_path / "human.csv"
    shutil.copy(EXAMPLE, human)
    result = CliRunner().invoke(app, ["calibrate", str(build), "--human", str(human), "--json"])
    assert result.exit_code == 0, result.output
    written = json.loads((build / "calibration.json").read_text())
    assert written == json.loads(result.output)
    overall = next(r for r in written["table"] if (r["model"], r["category"], r["dimension"]) == (ALL, ALL, OVERALL))
    assert overall["n"] == 6 and overall["mae_pct_of_scale"] == pytest.approx(100 * overall["mae"] / 4, abs=0.01)
    table = CliRunner().invoke(app, ["calibrate", str(build), "--human", str(human)], env={"COLUMNS": "200"})
    assert table.exit_code == 0 and "Spearman" in table.output and "human scores constant" in table.output
    bad = CliRunner().invoke(app, ["calibrate", str(build), "--human", str(tmp_path / "missing.csv")])
    assert bad.exit_code == 2 and "missing.csv" in bad.output


# -- expected scores (ours): the same items compared on Σ s·P(s) beside the written integers ---------------

def with_expected(build: Path, expected: dict[tuple[str, str], dict | None]) -> Path:
    """Give the judged 'after' rows of `build` expected scores ((question, model) -> scores; missing: null)."""
    lines = [json.loads(line) for line in (build / "judged.jsonl").read_text().splitlines()]
    for row in lines:
        row["expected_scores"] = expected.get((row["question_id"], row["model"]))
    write_jsonl(build / "judged.jsonl", lines)
    return build


def test_expected_scores_are_compared_where_read_and_the_integers_elsewhere(build):
    # F1/BIG read on correctness only; T2/BIG not read at all; the small model's rows fully read
    with_expected(build, {("F1", BIG): {"correctness": 3.4}, ("T2", BIG): None,
                          ("F1", SMALL): {"correctness": 2.5, "reasoning_depth": 3.0},
                          ("T2", SMALL): {"correctness": 1.8}, ("FT3", SMALL): {"correctness": 2.0}})
    official, expected = calibrate_both(build, EXAMPLE)
    assert official.scoring == "official" and expected.scoring == "expected"
    # (judge, human) on correctness: F1/BIG 3.4 vs 3, T2/BIG 5 (written) vs 5, FT3/BIG 2 (written) vs 1, ...
    pairs = [(3.4, 3), (5, 5), (2, 1), (2.5, 2), (1.8, 2), (2.0, 2)]
    cell = expected.cell(ALL, ALL, "correctness")
    assert cell.n == 6 and cell.mae.value == pytest.approx(sum(abs(j - h) for j, h in pairs) / 6)
    assert cell.spearman == pytest.approx(spearmanr(*zip(*pairs)).statistic)
    # the official comparison is untouched by the expected scores
    assert official.cell(ALL, ALL, "correctness").mae.value == pytest.approx((1 + 0 + 1 + 1 + 1 + 0) / 6)
    # coverage: compared (item x dimension) judge scores that were read; F1/BIG reasoning and T2/BIG were not
    assert (expected.expected_read, expected.expected_of) == (4, 7)
    assert "3 of 7 judge scores" in expected.coverage_note()
    assert expected.rubric_example_items == official.rubric_example_items  # counted on the written verdict


def test_calibrate_prints_official_and_expected_side_by_side(build, tmp_path):
    app = typer.Typer()
    register(app)
    with_expected(build, {(q, m): {"correctness": 2.5} for q in ("F1", "T2", "FT3") for m in (BIG, SMALL)})
    result = CliRunner().invoke(app, ["calibrate", str(build), "--human", str(EXAMPLE), "--json"])
    assert result.exit_code == 0, result.output
    written = json.loads(result.output)
    assert written["scoring"] == "official" and written["expected"]["scoring"] == "expected"
    assert written["expected"]["expected_coverage"] == [6, 7]
    cell = next(r for r in written["expected"]["table"]
                if (r["model"], r["category"], r["dimension"]) == (ALL, ALL, "correctness"))
    assert cell["mae"] == pytest.approx((0.5 + 2.5 + 1.5 + 0.5 + 0.5 + 0.5) / 6)
    assert cell["spearman_null"] == "judge scores constant (2.5)"
    table = CliRunner().invoke(app, ["calibrate", str(build), "--human", str(EXAMPLE)], env={"COLUMNS": "300"})
    assert table.exit_code == 0, table.output
    assert "MAE official" in table.output and "MAE expected" in table.output
    assert "1 of 7 judge scores had no readable digit distribution" in table.output


def test_a_build_without_expected_scores_has_no_expected_table(build):
    official, expected = calibrate_both(build, EXAMPLE)
    assert expected is None and official.to_json()["expected_coverage"] is None
    with pytest.raises(DataError, match="carry no expected scores"):
        calibrate_build(build, EXAMPLE, scoring="expected")


def test_a_bad_expected_score_names_the_line(build):
    with_expected(build, {("T2", BIG): {"correctness": 7.5}})
    with pytest.raises(DataError, match=r"judged.jsonl:2: expected_scores: correctness=7.5 is not a number 1-5"):
        calibrate_build(build, EXAMPLE)
