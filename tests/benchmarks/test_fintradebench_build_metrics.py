"""Construction metrics of a FinTradeBench build (Eq. 1-10) on hand-written records, and `build metrics`."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import typer
from typer.testing import CliRunner

from finharness.benchmarks.fintradebench.construction.cli_analysis import register
from finharness.benchmarks.fintradebench.construction.metrics import (
    Composite,
    composite,
    construction_metrics,
    parse_weights,
    read_audit,
    self_critique,
    self_critique_of,
)
from finharness.data.errors import DataError
from finharness.data.io import write_jsonl
from finharness.stats import clopper_pearson_ci

EXAMPLE = Path(__file__).parents[1] / "golden" / "fintradebench_human_scores_example.csv"
A, B = "embedded", "embedded:1.5b"



def candidate(qid: str, model: str, level: str, index: int, named: list[str]) -> dict:
    return {"question_id": qid, "model": model, "level": level, "candidate_index": index, "text": "...",
            "indicators_named": named}


def audited(qid: str, model: str, index: int, stage: str, accurate: bool, supported: int = 0,
            contradicted: int = 0, not_found: int = 0, methods: tuple[str, ...] = ()) -> dict:
    claims = [{"text": "x", "value": 1.0, "unit": None, "metric": None, "date": None, "reference": None,
               "tolerance": "rel 2%", "status": "SUPPORTED", "method": m} for m in methods]
    return {"question_id": qid, "model": model, "candidate_index": index, "level": "L1", "stage": stage,
            "claims": claims, "supported": supported, "contradicted": contradicted, "not_found": not_found,
            "accurate": accurate}


@pytest.fixture
def build(tmp_path: Path) -> Path:
    write_jsonl(tmp_path / "questions.jsonl", [
        {"question_id": "F1", "category": "F", "ticker": "AAPL", "as_of": "2025-06-30", "question": "?",
         "golden_indicators": ["ROA", "ROE"], "source_id": "F1", "scaled": False},
        {"question_id": "T2", "category": "T", "ticker": "NVDA", "as_of": "2025-07-31", "question": "?",
         "golden_indicators": ["RSI"], "source_id": "T2", "scaled": False},
        {"question_id": "FT3", "category": "FT", "ticker": "TSLA", "as_of": "2025-07-31", "question": "?",
         "golden_indicators": ["MACD", "Return on Assets"], "source_id": "FT3", "scaled": False},
    ])
    write_jsonl(tmp_path / "candidates.jsonl", [
        candidate("F1", A, "L1", 0, ["Return on Assets"]),                   # P 1,   R 1/2, F1 2/3
        candidate("F1", A, "L2", 1, ["Return on Assets", "Return on Equity", "RSI"]),  # P 2/3, R 1, F1 4/5
        candidate("T2", A, "L1", 0, []),                                     # P 0,   R 0,   F1 0
        candidate("T2", A, "L2", 1, ["RSI"]),                                # P 1,   R 1,   F1 1
        candidate("F1", B, "L1", 0, ["ROE"]),                                # P 1,   R 1/2, F1 2/3
        candidate("T2", B, "L1", 0, ["MACD"]),                               # P 0,   R 0,   F1 0
    ])
    write_jsonl(tmp_path / "audit.jsonl", [
        audited("F1", A, 0, "before", True, supported=2, methods=("deterministic", "deterministic")),
        audited("F1", A, 1, "before", False, supported=1, contradicted=1, methods=("deterministic", "llm")),
        audited("F1", A, 1, "after", False, supported=1, contradicted=1),  # A picked the inaccurate one
        audited("T2", A, 0, "before", False, not_found=3),
        audited("T2", A, 1, "before", False),
        audited("T2", A, 0, "after", False, not_found=3),
        audited("F1", B, 0, "before", True, supported=1),
        audited("F1", B, 0, "after", True, supported=1),
        audited("T2", B, 0, "before", False, contradicted=2),
        audited("T2", B, 0, "after", False, contradicted=2),
    ])
    return tmp_path


def add_judged(build: Path) -> None:
    """Judged 'after' rows of the humans' example items (tests/golden/fintradebench_human_scores_example.csv)."""
    def row(qid, model, c, r=3):
        return {"question_id": qid, "model": model, "candidate_index": 0, "level": "L1", "stage": "after",
                "judge": B, "scores": {"correctness": c, "reasoning_depth": r, "signal_integration": 3,
                                       "fundamental_integration": 3}, "golden_found": 1}
    write_jsonl(build / "judged.jsonl", [row("F1", A, 4, 4), row("T2", A, 5), row("FT3", A, 2),
                                         row("F1", B, 3), row("T2", B, 1), row("FT3", B, 2)])


def test_eq1_numerical_accuracy_before_and_after_self_filtering(build):
    m = construction_metrics(build)
    before, after = m.accuracy["before"], m.accuracy["after"]
    assert (before.all.value, before.all.n) == (pytest.approx(2 / 6), 6)
    assert (after.all.value, after.all.n) == (pytest.approx(1 / 4), 4)
    assert before.models[A].value == pytest.approx(1 / 4) and after.models[B].value == pytest.approx(1 / 2)
    lo, hi = after.all.ci95
    assert 0.0 <= lo < 0.25 < hi <= 1.0  # Wilson: a share stays a share


def test_audit_counts_sum_claims_by_status_and_method(build):
    counts = construction_metrics(build).audit
    assert counts["before"] == {"answers": 6, "accurate": 2, "supported": 4, "contradicted": 3, "not_found": 3,
                                "methods": {"deterministic": 3, "llm": 1}}
    assert counts["after"]["answers"] == 4 and counts["after"]["contradicted"] == 3


def test_eq2_to_5_extraction_precision_recall_f1_and_macro(build):
    m = construction_metrics(build)
    a, b = m.extraction[A], m.extraction[B]
    assert a.precision.value == pytest.approx((1 + 2 / 3 + 0 + 1) / 4)
    assert a.recall.value == pytest.approx((1 / 2 + 1 + 0 + 1) / 4)
    assert a.f1.value == pytest.approx((2 / 3 + 4 / 5 + 0 + 1) / 4) and a.f1.n == 4
    assert b.f1.value == pytest.approx((2 / 3 + 0) / 2)
    assert 0.0 <= b.f1.ci95[0] and b.f1.ci95[1] <= 1.0  # two answers give a wide t interval: kept inside [0, 1]
    assert m.macro_f1.value == pytest.approx((a.f1.value + b.f1.value) / 2)
    assert a.f1_by_level["L1"].value == pytest.approx(1 / 3) and a.f1_by_level["L2"].value == pytest.approx(0.9)


def test_eq9_prompt_sensitivity_is_the_variance_of_f1_over_levels(build):
    m = construction_metrics(build)
    assert m.sensitivity[A].variance == pytest.approx(np.var([1 / 3, 0.9]))
    assert m.sensitivity[A].variance == pytest.approx(((0.9 - 1 / 3) / 2) ** 2)
    assert m.sensitivity[B].variance is None and m.sensitivity[B].null == "fewer than 2 prompt levels"
    assert m.macro_sensitivity == pytest.approx(m.sensitivity[A].variance)  # B has one level: left out


def test_eq8_scr_against_a_random_pick_among_the_same_candidates(build):
    pooled, per_model = self_critique(read_audit(build))
    # (picked, random-pick accuracy, any accurate): A/F1 (0, 1/2, 1), A/T2 (0, 0, 0), B/F1 (1, 1, 1), B/T2 (0, 0, 0)
    assert (pooled.n, pooled.selected, pooled.random, pooled.ceiling) == (4, 0.25, pytest.approx(0.375), 0.5)
    assert pooled.scr == pytest.approx((0.25 - 0.375) / (1 - 0.375))
    assert per_model[A].scr == pytest.approx((0 - 0.25) / 0.75) and per_model[B].scr == pytest.approx(0.0)
    assert pooled.ci95[0] <= pooled.scr <= pooled.ci95[1]


def test_eq8_scr_is_one_for_a_perfect_picker_and_null_without_headroom():
    perfect = self_critique_of([(1.0, 0.5, 1.0), (1.0, 0.25, 1.0)])
    assert perfect.scr == pytest.approx(1.0)
    none_left = self_critique_of([(1.0, 1.0, 1.0), (1.0, 1.0, 1.0)])
    assert none_left.scr is None and "no headroom" in none_left.null
    assert self_critique_of([]).null == "no audited picks"


def test_eq6_7_judge_mae_per_model_and_macro_from_human_scores(build):
    add_judged(build)
    m = construction_metrics(build, human_csv=EXAMPLE)
    # overall per item = mean over the dimensions both scored: A/F1 humans (3 + 3)/2 vs judge (4 + 4)/2
    assert m.judge_mae[A].value == pytest.approx((1 + 0 + 1) / 3)
    assert m.judge_mae[B].value == pytest.approx((1 + 1 + 0) / 3)
    assert m.macro_mae.value == pytest.approx(2 / 3) and m.macro_mae.n == 6
    assert m.composite.terms["judge"] == pytest.approx(1 - (2 / 3) / 4)
    assert not any("rubric's example" in n for n in m.notes)


def test_a_judge_mae_measured_on_copied_rubric_examples_says_so(build):
    add_judged(build)
    rows = [json.loads(line) for line in (build / "judged.jsonl").read_text().splitlines()]
    for row in rows[:4]:
        row["scores"] = {"correctness": 4, "reasoning_depth": 5, "signal_integration": 4, "fundamental_integration": 5}
    write_jsonl(build / "judged.jsonl", rows)
    m = construction_metrics(build, human_csv=EXAMPLE)
    assert any("4 of 6 judge verdicts are exactly the rubric's example" in n for n in m.notes)
    assert m.to_json()["notes"] == list(m.notes)


def test_eq10_composite_normalises_every_term_and_drops_the_missing(build):
    m = construction_metrics(build)  # no human scores: the judge term is left out
    terms = m.composite.terms
    assert terms["accuracy"] == pytest.approx(0.25)
    assert terms["extraction"] == pytest.approx(m.macro_f1.value)
    assert terms["self_critique"] == 0.0  # SCR -0.2: no better than random counts 0
    assert terms["stability"] == pytest.approx(1 - 4 * m.sensitivity[A].variance)
    assert terms["judge"] is None and m.composite.dropped == ("judge",)
    expected = (terms["accuracy"] + terms["extraction"] + 0.0 + terms["stability"]) / 4
    assert m.composite.value == pytest.approx(expected)
    assert "judge_mae" in m.missing
    only_accuracy = construction_metrics(build, weights=parse_weights("extraction=0,self_critique=0,stability=0,"
                                                                      "judge=0,accuracy=3"))
    assert only_accuracy.composite.value == pytest.approx(0.25) and only_accuracy.composite.dropped == ()


def test_composite_weights_are_a_weighted_mean():
    result = composite({"accuracy": 1.0, "extraction": 0.0, "judge": 0.5, "self_critique": None, "stability": 1.0},
                       parse_weights("accuracy=2,judge=2"))
    assert isinstance(result, Composite)
    assert result.value == pytest.approx((2 * 1.0 + 0.0 + 2 * 0.5 + 1.0) / (2 + 1 + 2 + 1))
    assert result.dropped == ("self_critique",)


@pytest.mark.parametrize(("text", "message"), [
    ("speed=1", "TERM one of accuracy"), ("accuracy", "TERM=NUMBER"), ("judge=abc", "'abc' is not a number"),
    ("judge=-1", "≥ 0"), ("accuracy=0,extraction=0,judge=0,self_critique=0,stability=0", "every weight is 0"),
])
def test_bad_weights_say_what_is_wrong(text, message):
    with pytest.raises(ValueError, match=message):
        parse_weights(text)


def test_missing_files_leave_their_metrics_null_with_the_reason(tmp_path):
    m = construction_metrics(tmp_path)
    assert m.accuracy is None and m.extraction is None and m.composite.value is None
    assert "audit.jsonl not found" in m.missing["numerical_accuracy"]
    assert set(m.composite.dropped) == {"accuracy", "extraction", "judge", "self_critique", "stability"}


def test_bad_records_name_the_file_and_line(build):
    with open(build / "audit.jsonl", "a") as f:
        f.write(json.dumps({**audited("F1", A, 0, "before", True), "accurate": "yes"}) + "\n")
    with pytest.raises(DataError, match=r"audit\.jsonl:11: field 'accurate' should be bool"):
        construction_metrics(build)


def test_unknown_indicator_names_are_refused(build):
    with open(build / "candidates.jsonl", "a") as f:
        f.write(json.dumps(candidate("F1", A, "L3", 2, ["Vibes"])) + "\n")
    with pytest.raises(DataError, match=r"candidates\.jsonl:7: unknown golden indicator 'Vibes'"):
        construction_metrics(build)


def test_cli_metrics_writes_metrics_json(build):
    add_judged(build)
    app = typer.Typer()
    register(app)
    runner = CliRunner()
    result = runner.invoke(app, ["metrics", str(build), "--human", str(EXAMPLE), "--weights", "accuracy=2", "--json"])
    assert result.exit_code == 0, result.output
    written = json.loads((build / "metrics.json").read_text())
    assert written == json.loads(result.output)
    assert written["composite"]["weights"]["accuracy"] == 2.0 and written["composite"]["dropped"] == []
    after = written["numerical_accuracy"]["after"]["all"]
    assert {k: after[k] for k in ("value", "n")} == {"value": 0.25, "n": 4}
    assert after["ci95"] == pytest.approx(list(clopper_pearson_ci(1, 4)), abs=1e-4)  # rounded to 4 places
    assert after["method"] == "clopper-pearson" and "n = 4 < 30" in after["warning"]
    assert written["self_critique"]["all"]["scr"] == pytest.approx(-0.2)
    table = runner.invoke(app, ["metrics", str(build)], env={"COLUMNS": "200"})
    assert table.exit_code == 0 and "Eq.8 SCR" in table.output and "note: judge_mae" in table.output
    bad = runner.invoke(app, ["metrics", str(build), "--weights", "speed=1"])
    assert bad.exit_code == 2 and "--weights" in bad.output


def test_self_selection_counts_picks_of_the_prompts_example_and_says_so(build):
    def picked(qid, model, level, rule):
        return {"question_id": qid, "model": model, "candidate_index": 0, "level": level, "text": "...",
                "rule": rule, "reply": "TELER_L3_Step_By_Step"}
    write_jsonl(build / "selected.jsonl", [picked("F1", A, "L3", "exact"), picked("T2", A, "L3", "contains"),
                                           picked("F1", B, "L3", "exact"), picked("T2", B, "L0", "fallback-first")])
    metrics = construction_metrics(build)
    sel = metrics.selection
    assert sel["example_id"] == "TELER_L3_Step_By_Step" and sel["example_level"] == "L3"
    assert sel["models"]["all"]["ordered_picks"] == 0  # no 'shown' recorded: no first-shown share claimed
    assert sel["models"][A]["picks"] == 2 and sel["models"][A]["example_picks"] == 2
    assert sel["models"][B]["picks"] == 1 and sel["models"][B]["levels"] == {"L0": 1, "L3": 1}
    assert sel["models"]["all"]["example_picks"] == 3 and sel["models"]["all"]["rules"]["fallback-first"] == 1
    assert len(metrics.notes) == 1 and "3 of 3 self-selections picked TELER_L3_Step_By_Step" in metrics.notes[0]
    write_jsonl(build / "selected.jsonl", [picked("F1", A, "L0", "exact"), picked("T2", A, "L3", "exact")])
    assert construction_metrics(build).notes == []  # half is not most


def test_self_selection_counts_first_shown_picks_and_leaves_neutral_picks_out_of_the_example(build):
    def picked(qid, model, level, shown, style):
        return {"question_id": qid, "model": model, "candidate_index": 0, "level": level, "text": "...",
                "rule": "exact", "reply": "Candidate 1", "style": style, "shown": shown}
    write_jsonl(build / "selected.jsonl", [picked("F1", A, "L3", ["L3", "L0"], "neutral"),
                                           picked("T2", A, "L3", ["L0", "L3"], "neutral"),
                                           picked("F1", B, "L0", ["L0", "L3"], "official")])
    metrics = construction_metrics(build)
    a, pooled = metrics.selection["models"][A], metrics.selection["models"]["all"]
    assert (a["picks"], a["official_picks"], a["example_picks"], a["first_shown_picks"]) == (2, 0, 0, 1)
    assert a["ordered_picks"] == 2
    assert pooled["styles"] == {"neutral": 2, "official": 1} and pooled["first_shown_picks"] == 2
    assert metrics.notes == []  # two L3 picks, but neither was made under the official prompt's example
