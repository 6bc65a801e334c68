"""Phase 2 of `fintradebench build`: the judge calibrated against human experts (the paper's Table 11).

Human scores (`read_human_scores`), one of two layouts, told apart by the header:
- the build's long CSV: `question_id,model,dimension,score,rater`, one Likert score (1-5) a row, `dimension`
  one of `JUDGED_DIMENSIONS`. Several raters of one (question, model, dimension) are averaged and counted;
  the same rater twice on one cell is an error.
- the rater app's rubric export (`finharness ui export --rubric`, ui/exports.py RUBRIC_COLUMNS): `item_id` is
  the question id, and its rubric dimensions are mapped onto the judge's as the judge prompt itself maps
  them (judge.py JUDGE_PROMPT: "Factual and Numerical Accuracy (Maps to `correctness_score`)", "Clarity and
  Rationale (Maps to `reasoning_score`)"): accuracy -> correctness, clarity -> reasoning_depth.
  `completeness` and `relevance` have no judge counterpart: they are left out and counted.
A bad row is a DataError naming the file and line.

Join: a human item (question_id, model) is matched with the judged row of the answer the humans read, the
self-selected one (`judged.jsonl` rows of stage "after"), optionally of one judge only. Rows whose scores the
judge left unparseable (`scores` null) are counted, not compared.

Scoring (`scoring`): "official" compares the integers the judge wrote (`scores`); "expected" (ours) compares
each dimension's expected score Σ s·P(s) (`expected_scores`, written by `build judge --judge-scores expected`),
the integer where the digit's distribution could not be read; the share read is `expected_coverage`.
`build calibrate` shows both side by side when the judged rows carry expected scores.

Agreement per cell (`agreement`), as the release's calculate_human_alignment.py computes it:
- MAE = mean |judge − human| in Likert points (also as % of the 4-point scale: the paper's "MAE < 10%");
- bias = mean (judge − human): > 0 the judge is more lenient than the humans;
- Spearman ρ (scipy, through rating/compare.compare_ratings, which `fintradebench agreement` uses too); null
  with the reason when undefined: fewer than 3 items (the release's floor), or either side constant;
- n = items compared; `ratings` = human score rows behind them.
Each item's `overall` score is the mean of the dimensions both the humans and the judge scored on it (the
release: human_overall and llm_overall, the mean of the rubric dimensions).

Cells: every combination of model (or all), question category F/T/FT (or all) and dimension (or overall)
that holds an item. Table 11 is the rows with at most one of the three not 'all'/'overall'
(`table_rows`): overall, per dimension, per question type, per model.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from ....data.errors import DataError
from ....data.io import csv_dict_reader, iter_jsonl
from ....rating.compare import compare_ratings
from ....stats import Estimate, mean_ci
from ....util import MISSING, finite_or_none, format_number
from ..judge import example_scores, rubric_copy_note
from ..questions import CATEGORIES, category_of

JUDGE_SCORE_KEYS: Mapping[str, str] = {"correctness": "correctness", "reasoning_depth": "reasoning",
                                       "signal_integration": "trading_signals",
                                       "fundamental_integration": "fundamentals"}
"""judged.jsonl score key -> the judge verdict's key (judge.py)."""

JUDGED_DIMENSIONS: tuple[str, ...] = tuple(JUDGE_SCORE_KEYS)
"""The judge's four Likert scores in `judged.jsonl` (the build contract's names)."""


def rubric_example() -> dict[str, int]:
    """The rubric's own example verdict (judge.example_scores, 4/5/4/5) under judged.jsonl's names: a small
    judge copies it instead of grading, so calibration counts the items where it did."""
    example = example_scores()
    return {key: example[source] for key, source in JUDGE_SCORE_KEYS.items()}

OVERALL = "overall"
"""The dimension name of the per-item mean over the dimensions both sides scored."""

ALL = "all"
"""The group name of a cell that pools every model, or every category."""

LIKERT_MIN, LIKERT_MAX = 1.0, 5.0
SCALE = LIKERT_MAX - LIKERT_MIN
"""The width of the Likert scale: the largest possible |judge − human|."""

RATER_APP_DIMENSIONS: Mapping[str, str | None] = {
    "accuracy": "correctness", "clarity": "reasoning_depth", "completeness": None, "relevance": None}
"""The rater app's rubric (ui/storage.py RUBRIC_DIMENSIONS) -> the judge's dimension (None: no counterpart)."""

SPEARMAN_MIN_ITEMS = 3
"""Fewer items give no Spearman ρ (2 points are always ±1), as in the release's corr_metrics."""

SCORINGS: tuple[str, ...] = ("official", "expected")
"""What a calibration compares: the judge's written integers, or its expected scores (module docstring)."""

CALIBRATED_STAGE = "after"
"""Humans score the self-selected answer: the judged rows of this stage are the ones compared."""

ItemKey = tuple[str, str]
"""(question_id, model)."""


# -- reading the build's files ------------------------------------------------------------------

def checked_field(row: Mapping[str, Any], key: str, types: type | tuple[type, ...], path: Path, line: int,
           *, nullable: bool = False) -> Any:
    """row[key], checked: a DataError names the file, line and field when it is missing or of the wrong type."""
    if key not in row:
        raise DataError(f"missing field {key!r}", path=path, line=line, hint="see the build contract's field names")
    value = row[key]
    if value is None and nullable:
        return None
    allowed = types if isinstance(types, tuple) else (types,)
    if not isinstance(value, allowed) or (isinstance(value, bool) and bool not in allowed):  # JSON true is no int
        names = "/".join(t.__name__ for t in allowed)
        raise DataError(f"field {key!r} should be {names}, got {value!r}", path=path, line=line)
    return value


def read_categories(out: str | Path) -> dict[str, str]:
    """question_id -> F/T/FT from OUT/questions.jsonl; without that file, an empty map (ids are then read
    with questions.category_of)."""
    path = Path(out) / "questions.jsonl"
    if not path.is_file():
        return {}
    categories = {}
    for line, row in iter_jsonl(path, allow_empty=True):
        category = checked_field(row, "category", str, path, line)
        if category not in CATEGORIES:
            raise DataError(f"category {category!r} is not one of {list(CATEGORIES)}", path=path, line=line)
        categories[str(checked_field(row, "question_id", str, path, line))] = category
    return categories


def category_for(question_id: str, categories: Mapping[str, str]) -> str:
    return categories.get(question_id) or category_of(question_id)


@dataclass(frozen=True)
class JudgedAnswer:
    """One row of judged.jsonl, as calibration reads it."""

    question_id: str
    model: str
    judge: str
    stage: str
    scores: Mapping[str, float] | None
    """Dimension -> 1-5; None when the judge's reply was unparseable."""
    line: int
    """Line in judged.jsonl (named in errors)."""
    expected: Mapping[str, float] | None = None
    """Dimension -> expected score 1-5 (`expected_scores`); None when the build did not ask for them."""


def _dimension_scores(row: Mapping[str, Any], key: str, path: Path, line: int) -> dict[str, float] | None:
    """row[key] (a dimension -> 1-5 map, or null) checked; null values dropped."""
    scores = checked_field(row, key, dict, path, line, nullable=True)
    if scores is None:
        return None
    kept = {}
    for dim, value in scores.items():
        if value is None:
            continue
        if dim not in JUDGED_DIMENSIONS:
            raise DataError(f"unknown score {dim!r} in {key}; expected {list(JUDGED_DIMENSIONS)}", path=path,
                            line=line)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 1 <= value <= 5:
            raise DataError(f"{key}: {dim}={value!r} is not a number 1-5", path=path, line=line)
        kept[dim] = float(value)
    return kept


def read_judged(out: str | Path) -> list[JudgedAnswer]:
    path = Path(out) / "judged.jsonl"
    rows = []
    for line, row in iter_jsonl(path, allow_empty=True):
        scores = _dimension_scores(row, "scores", path, line)
        expected = _dimension_scores(row, "expected_scores", path, line) if "expected_scores" in row else None
        text = {key: checked_field(row, key, str, path, line) for key in ("question_id", "model", "judge", "stage")}
        rows.append(JudgedAnswer(text["question_id"], text["model"], text["judge"], text["stage"], scores, line,
                                 expected))
    return rows


# -- human scores ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class HumanScore:
    """The raters' mean on one (question, model, dimension)."""

    mean: float
    raters: tuple[str, ...]
    """Who scored it (one score each)."""


@dataclass(frozen=True)
class HumanScores:
    """A human-score file, read and averaged over raters."""

    path: str
    scores: Mapping[tuple[str, str, str], HumanScore]
    """(question_id, model, dimension) -> the raters' mean."""
    rows: int
    """Score rows read (one rater, one dimension each)."""
    unmapped: Mapping[str, int] = field(default_factory=dict)
    """Rater-app rubric scores with no judge counterpart, per rubric dimension (left out)."""

    @property
    def items(self) -> set[ItemKey]:
        return {(q, m) for q, m, _ in self.scores}

    @property
    def raters(self) -> list[str]:
        return sorted({r for s in self.scores.values() for r in s.raters})


LONG_COLUMNS: tuple[str, ...] = ("question_id", "model", "dimension", "score", "rater")
"""The build's human-score CSV."""

RATER_APP_COLUMNS: tuple[str, ...] = ("rater", "item_id", "model", *RATER_APP_DIMENSIONS)
"""What this module needs of the rater app's rubric export."""


def _likert(text: str, what: str, path: Path, line: int) -> float:
    try:
        value = float(text)
    except ValueError:
        raise DataError(f"{what} {text!r} is not a number", path=path, line=line,
                        hint="give a Likert score 1-5") from None
    if not LIKERT_MIN <= value <= LIKERT_MAX:
        raise DataError(f"{what} {value:g} is outside 1-5", path=path, line=line)
    return value


def _required(row: Mapping[str, str], column: str, path: Path, line: int) -> str:
    text = (row.get(column) or "").strip()
    if not text:
        raise DataError(f"{column} is empty", path=path, line=line, hint="fill it in or remove the row")
    return text


def read_human_scores(path: str | Path) -> HumanScores:
    """Read either layout of the module docstring; raters averaged per (question, model, dimension)."""
    path = Path(path)
    reader = csv_dict_reader(path)
    columns = set(reader.fieldnames or ())
    if set(LONG_COLUMNS) <= columns:
        layout = "long"
    elif set(RATER_APP_COLUMNS) <= columns:
        layout = "rater_app"
    else:
        raise DataError(f"unknown layout; expected the columns {','.join(LONG_COLUMNS)} (or a `finharness ui "
                        f"export --rubric` file); found {sorted(columns)}", path=path, line=1)
    given: dict[tuple[str, str, str], dict[str, tuple[float, int]]] = defaultdict(dict)
    unmapped: dict[str, int] = defaultdict(int)
    rows = 0

    def add(question: str, model: str, dimension: str, rater: str, value: float, line: int) -> None:
        nonlocal rows
        cell = given[(question, model, dimension)]
        if rater in cell:
            raise DataError(f"rater {rater!r} scored {question} / {model} / {dimension} twice (first on line "
                            f"{cell[rater][1]})", path=path, line=line, hint="keep one score per rater")
        cell[rater] = (value, line)
        rows += 1

    for row in reader:
        line = reader.line_num
        question = _required(row, "question_id" if layout == "long" else "item_id", path, line)
        model, rater = _required(row, "model", path, line), _required(row, "rater", path, line)
        if layout == "long":
            dimension = _required(row, "dimension", path, line)
            if dimension not in JUDGED_DIMENSIONS:
                raise DataError(f"dimension {dimension!r} is not one of {list(JUDGED_DIMENSIONS)}", path=path,
                                line=line)
            add(question, model, dimension, rater, _likert(_required(row, "score", path, line), "score", path, line),
                line)
            continue
        for rubric, dimension in RATER_APP_DIMENSIONS.items():
            value = _likert(_required(row, rubric, path, line), rubric, path, line)
            if dimension is None:
                unmapped[rubric] += 1
            else:
                add(question, model, dimension, rater, value, line)
    if not rows:
        raise DataError("no score rows", path=path, hint=f"one row per rater and dimension: {','.join(LONG_COLUMNS)}")
    scores = {key: HumanScore(float(np.mean([v for v, _ in cell.values()])), tuple(sorted(cell)))
              for key, cell in given.items()}
    return HumanScores(str(path), scores, rows, dict(unmapped))


# -- agreement ------------------------------------------------------------------------------------

def bounded_estimate(values: Sequence[float], bounds: tuple[float, float]) -> Estimate:
    """Mean with stats.mean_ci's bounded 95% interval inside `bounds` (the values' own range: |judge − human|
    on the 1-5 scale lies in [0, 4], so its 0/1 values are a quarter of the range, never read as successes)."""
    return mean_ci(values, bounds=bounds)


@dataclass(frozen=True)
class Pair:
    """One item's human and judge score on one dimension (or their overall means)."""

    question_id: str
    model: str
    category: str
    dimension: str
    human: float
    judge: float
    ratings: int
    """Human score rows behind `human`."""


@dataclass(frozen=True)
class Agreement:
    """Judge against humans on one cell (model x category x dimension)."""

    model: str
    """A model spec, or 'all'."""
    category: str
    """F, T, FT or 'all'."""
    dimension: str
    """One of JUDGED_DIMENSIONS, or 'overall'."""
    n: int
    """Items compared."""
    ratings: int
    """Human score rows behind those items."""
    mae: Estimate
    """Mean |judge − human| in Likert points, with its 95% interval."""
    bias: Estimate
    """Mean (judge − human): > 0 the judge scores higher than the humans."""
    spearman: float | None
    """Spearman ρ, None when undefined (see `spearman_null`)."""
    spearman_p: float | None
    spearman_null: str | None
    """Why ρ is missing: too few items, or a constant side."""

    def to_json(self) -> dict[str, Any]:
        num = finite_or_none
        return {"model": self.model, "category": self.category, "dimension": self.dimension, "n": self.n,
                "ratings": self.ratings, "mae": num(self.mae.value, 4), "mae_ci95": [num(x, 4) for x in self.mae.ci95],
                "mae_pct_of_scale": num(100 * self.mae.value / SCALE, 2),
                "bias": num(self.bias.value, 4), "bias_ci95": [num(x, 4) for x in self.bias.ci95],
                "spearman": num(self.spearman, 4) if self.spearman is not None else None,
                "spearman_p": num(self.spearman_p, 4) if self.spearman_p is not None else None,
                "spearman_null": self.spearman_null}


def agreement(pairs: Sequence[Pair], *, model: str = ALL, category: str = ALL, dimension: str = OVERALL) -> Agreement:
    """MAE, bias and Spearman of the pairs (all of one cell)."""
    judge = np.array([p.judge for p in pairs], dtype=float)
    human = np.array([p.human for p in pairs], dtype=float)
    keys = [f"{p.question_id}\t{p.model}" for p in pairs]
    rank = compare_ratings(dict(zip(keys, judge)), dict(zip(keys, human)))
    if len(pairs) < SPEARMAN_MIN_ITEMS:
        reason = f"fewer than {SPEARMAN_MIN_ITEMS} items"
    elif np.ptp(human) == 0:
        reason = f"human scores constant ({human[0]:g})"
    elif np.ptp(judge) == 0:
        reason = f"judge scores constant ({judge[0]:g})"
    else:
        reason = None
    return Agreement(model, category, dimension, len(pairs), sum(p.ratings for p in pairs),
                     bounded_estimate(np.abs(judge - human), (0.0, SCALE)),
                     bounded_estimate(judge - human, (-SCALE, SCALE)),
                     None if reason else rank.spearman,
                     None if reason or math.isnan(rank.spearman_p) else rank.spearman_p, reason)


@dataclass(frozen=True)
class Calibration:
    """Phase 2's result: every cell, and what could not be compared."""

    human_csv: str
    judges: tuple[str, ...]
    """Judge specs whose rows were compared."""
    cells: tuple[Agreement, ...]
    items: int
    """(question, model) items with both human and judge scores."""
    raters: tuple[str, ...]
    human_rows: int
    human_only: tuple[ItemKey, ...]
    """Human items with no parseable judged row of stage 'after'."""
    judge_only: int
    """Judged 'after' rows no human scored."""
    judge_unparseable: int
    """Human items whose judged row has no scores (unparseable reply)."""
    unmapped: Mapping[str, int]
    rubric_example_items: int = 0
    """Compared items whose judge scores are exactly the rubric's example (rubric_example)."""
    scoring: str = "official"
    """One of SCORINGS: the judge's written integers, or its expected scores."""
    expected_read: int = 0
    """(scoring 'expected') Compared judge scores that are expected scores; the rest are the written integers."""
    expected_of: int = 0
    """(scoring 'expected') Compared judge scores in all (item x dimension)."""

    def coverage_note(self) -> str | None:
        """(scoring 'expected') How many judge scores are the written integer for want of a distribution."""
        if self.scoring != "expected" or self.expected_read == self.expected_of:
            return None
        return (f"expected scores: {self.expected_of - self.expected_read} of {self.expected_of} judge scores had "
                f"no readable digit distribution and keep the written integer")

    def notes(self) -> list[str]:
        """What a reader must know to read the table."""
        coverage = self.coverage_note()
        notes = [coverage] if coverage else []
        if self.human_only:
            notes.append(f"{len(self.human_only)} human items have no judged 'after' row")
        if self.judge_unparseable:
            notes.append(f"{self.judge_unparseable} human items were unparseable for the judge")
        if self.unmapped:
            notes.append(f"rubric scores with no judge counterpart left out: {dict(self.unmapped)}")
        copied = rubric_copy_note(self.rubric_example_items, self.items,
                                  ", so the table measures the example against the humans")
        return notes + [copied] if copied else notes

    def cell(self, model: str = ALL, category: str = ALL, dimension: str = OVERALL) -> Agreement | None:
        return next((c for c in self.cells if (c.model, c.category, c.dimension) == (model, category, dimension)),
                    None)

    def table_rows(self) -> list[Agreement]:
        """Table 11: overall, then per dimension, per question type, per model."""
        return [c for c in self.cells if (c.model == ALL) + (c.category == ALL) + (c.dimension == OVERALL) >= 2]

    def to_json(self) -> dict[str, Any]:
        return {"human_csv": self.human_csv, "stage": CALIBRATED_STAGE, "scoring": self.scoring,
                "expected_coverage": ([self.expected_read, self.expected_of] if self.scoring == "expected"
                                      else None),
                "judges": list(self.judges),
                "items": self.items, "raters": list(self.raters), "human_rows": self.human_rows,
                "human_only": [list(k) for k in self.human_only], "judge_only": self.judge_only,
                "judge_unparseable": self.judge_unparseable, "unmapped_rubric_scores": dict(self.unmapped),
                "rubric_example_items": self.rubric_example_items, "notes": self.notes(),
                "table": [c.to_json() for c in self.table_rows()], "cells": [c.to_json() for c in self.cells]}


def _pairs(human: HumanScores, judged: Sequence[JudgedAnswer], categories: Mapping[str, str],
           judged_path: str, scoring: str) -> tuple[list[Pair], dict[str, Any]]:
    by_item: dict[ItemKey, JudgedAnswer] = {}
    for row in judged:
        key = (row.question_id, row.model)
        if key in by_item:
            raise DataError(f"two judged rows of stage {CALIBRATED_STAGE!r} for {key[0]} / {key[1]} (first on line "
                            f"{by_item[key].line})", path=judged_path, line=row.line,
                            hint="several judges in one file: pass --judge SPEC")
        by_item[key] = row
    pairs: list[Pair] = []
    human_only, unparseable, copied, read, of = [], 0, 0, 0, 0
    example = rubric_example()
    for key in sorted(human.items):
        row = by_item.get(key)
        if row is None:
            human_only.append(key)
            continue
        if row.scores is None:
            unparseable += 1
            continue
        copied += all(row.scores.get(d) == v for d, v in example.items())  # of the written verdict
        category = category_for(key[0], categories)
        shared = [d for d in JUDGED_DIMENSIONS if (*key, d) in human.scores and d in row.scores]
        judge = dict(row.scores)
        if scoring == "expected":
            found = {d: v for d, v in (row.expected or {}).items() if d in shared}
            judge.update(found)
            read, of = read + len(found), of + len(shared)
        for d in shared:
            h = human.scores[(*key, d)]
            pairs.append(Pair(*key, category, d, h.mean, judge[d], len(h.raters)))
        if shared:
            pairs.append(Pair(*key, category, OVERALL, float(np.mean([human.scores[(*key, d)].mean for d in shared])),
                              float(np.mean([judge[d] for d in shared])),
                              sum(len(human.scores[(*key, d)].raters) for d in shared)))
    info = {"human_only": tuple(human_only), "judge_unparseable": unparseable, "rubric_example_items": copied,
            "judge_only": len(set(by_item) - human.items), "expected_read": read, "expected_of": of}
    return pairs, info


def _compared_rows(judged: Sequence[JudgedAnswer], judge: str | None) -> list[JudgedAnswer]:
    """The judged rows a calibration compares: stage 'after', of `judge` when given."""
    return [r for r in judged if r.stage == CALIBRATED_STAGE and (judge is None or r.judge == judge)]


def calibrate(human: HumanScores, judged: Sequence[JudgedAnswer], categories: Mapping[str, str] | None = None, *,
              judge: str | None = None, judged_path: str = "judged.jsonl", scoring: str = "official") -> Calibration:
    """Join the human scores with the judged 'after' rows (of `judge` when given) and compute every cell, on
    the written scores or on the expected ones (`scoring`, one of SCORINGS)."""
    if scoring not in SCORINGS:
        raise ValueError(f"scoring {scoring!r} is not one of {list(SCORINGS)}")
    rows = _compared_rows(judged, judge)
    if judge is not None and not rows:
        known = sorted({r.judge for r in judged})
        raise DataError(f"no judged rows of judge {judge!r} at stage {CALIBRATED_STAGE!r}", path=judged_path,
                        hint=f"judges in the file: {known}")
    if scoring == "expected" and not any(r.expected is not None for r in rows):
        raise DataError("the judged rows carry no expected scores", path=judged_path,
                        hint="judge with `fintradebench build judge --judge-scores expected` (a judge with logprobs)")
    pairs, info = _pairs(human, rows, categories or {}, judged_path, scoring)
    groups: dict[tuple[str, str, str], list[Pair]] = defaultdict(list)
    for p in pairs:
        for model in (ALL, p.model):
            for category in (ALL, p.category):
                groups[(model, category, p.dimension)].append(p)
    dimension_order = {d: i for i, d in enumerate((OVERALL, *JUDGED_DIMENSIONS))}
    category_order = {c: i for i, c in enumerate((ALL, *CATEGORIES))}
    order = sorted(groups, key=lambda k: (k[0] != ALL, k[0], category_order[k[1]], dimension_order[k[2]]))
    cells = tuple(agreement(groups[k], model=k[0], category=k[1], dimension=k[2]) for k in order)
    items = {(p.question_id, p.model) for p in pairs}
    judges = tuple(sorted({r.judge for r in rows if (r.question_id, r.model) in items}))
    return Calibration(human.path, judges, cells, len(items), tuple(human.raters), human.rows,
                       info["human_only"], info["judge_only"], info["judge_unparseable"], human.unmapped,
                       info["rubric_example_items"], scoring, info["expected_read"], info["expected_of"])


def calibrate_build(out: str | Path, human_csv: str | Path, *, judge: str | None = None,
                    scoring: str = "official") -> Calibration:
    """calibrate() over a build directory's judged.jsonl (and questions.jsonl for the categories)."""
    out = Path(out)
    return calibrate(read_human_scores(human_csv), read_judged(out), read_categories(out), judge=judge,
                     judged_path=str(out / "judged.jsonl"), scoring=scoring)


def calibrate_both(out: str | Path, human_csv: str | Path, *, judge: str | None = None
                   ) -> tuple[Calibration, Calibration | None]:
    """(official, expected) for a build directory; expected is None when no compared row carries expected
    scores (a build judged without `--judge-scores expected`)."""
    out = Path(out)
    human, judged, categories = read_human_scores(human_csv), read_judged(out), read_categories(out)
    path = str(out / "judged.jsonl")
    official = calibrate(human, judged, categories, judge=judge, judged_path=path)
    if not any(r.expected is not None for r in _compared_rows(judged, judge)):
        return official, None
    return official, calibrate(human, judged, categories, judge=judge, judged_path=path, scoring="expected")


def _rho(c: Agreement, *, reason: bool = True) -> str:
    if c.spearman is not None:
        return format_number(c.spearman, 2)
    return f"{MISSING} ({c.spearman_null})" if reason else MISSING


def format_calibration(calibration: Calibration, expected: Calibration | None = None) -> Iterable[tuple[str, ...]]:
    """Table 11 as text rows (header first), for the CLI's table. With `expected`, each row gives the
    official and the expected reading side by side (the cells are the same: both join the same items), MAE
    and its interval in one column, and ρ without the reason it is missing (calibration.json has it)."""
    if expected is None:
        yield ("model", "category", "dimension", "n", "MAE", "MAE 95% CI", "bias", "Spearman ρ")
        for c in calibration.table_rows():
            yield (c.model, c.category, c.dimension, str(c.n), format_number(c.mae.value, 2),
                   f"{format_number(c.mae.ci95[0], 2)} – {format_number(c.mae.ci95[1], 2)}",
                   f"{c.bias.value:+.2f}" if c.n else MISSING, _rho(c))
        return

    def columns(c: Agreement | None) -> tuple[str, ...]:
        if c is None or not c.n:
            return (MISSING,) * 3
        mae = f"{format_number(c.mae.value, 2)} ({format_number(c.mae.ci95[0], 2)}–{format_number(c.mae.ci95[1], 2)})"
        return mae, f"{c.bias.value:+.2f}", _rho(c, reason=False)

    yield ("model", "category", "dimension", "n", "MAE official", "bias", "ρ", "MAE expected", "bias", "ρ")
    for c in calibration.table_rows():
        yield ((c.model, c.category, c.dimension, str(c.n)) + columns(c)
               + columns(expected.cell(c.model, c.category, c.dimension)))
