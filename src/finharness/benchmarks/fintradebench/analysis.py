"""Comparing runs: No-RAG vs RAG (RAG Δ and a paired test per category), and judge-human agreement.

`compare_modes(norag_dir, rag_dir)`: per category (F, T, FT) and overall, accuracy % (mean correctness
/ 5 x 100) of each run, RAG Δ = (RAG − NoRAG) / NoRAG x 100 (the paper's relative change), and a paired
test (`finharness.stats.paired_test`: the paper's paired t-test, scipy `ttest_rel`, from 30 questions on --
its categories have 50 -- and an exact sign-flip test below; refused under 2, with a warning) on the
per-question correctness of the questions both runs scored, starred * p < 0.05, ** p < 0.01; beside them the
mean golden-indicator F1 of each run, `official` and `proper`, over the same questions.

`judge_agreement(human_csv, run_dir)`: the calibration phase -- a human's correctness scores (1-5)
against the judge's, on the questions both scored: MAE, Spearman ρ (rating/compare.compare_ratings)
and Cohen's κ on the five labels (stats/agreement.cohen_kappa; the release's calculate_human_alignment.py
reports the quadratic-weighted κ, which weighs near misses less). The CSV needs `question_id` and a
score column: `correctness`, `human_correctness` or the release's annotation header `H_Accuracy (1-5)`.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from ...data.errors import DataError
from ...data.io import csv_dict_reader, iter_jsonl
from ...rating.compare import compare_ratings
from ...stats import paired_test
from ...stats.agreement import cohen_kappa
from ...util import finite_or_none
from .questions import CATEGORIES

HUMAN_SCORE_COLUMNS: tuple[str, ...] = ("correctness", "human_correctness", "H_Accuracy (1-5)")


def _samples_file(run: str | Path) -> Path:
    path = Path(run)
    if path.is_dir():
        path = path / "samples.jsonl"
    if not path.is_file():
        raise DataError("samples.jsonl not found", path=path, hint="pass a `finharness run fintradebench` directory")
    return path


F1_KINDS: tuple[str, ...] = ("official", "proper")


def read_run(run: str | Path) -> dict[str, Any]:
    """{'mode', 'model', 'per_category': {CAT: {id: correctness/5}}, 'f1': {KIND: {id: f1}}} of one run."""
    path = _samples_file(run)
    per_category: dict[str, dict[str, float]] = {c: {} for c in CATEGORIES}
    f1: dict[str, dict[str, float]] = {kind: {} for kind in F1_KINDS}
    for _, row in iter_jsonl(path, allow_empty=True):
        score = row.get("score") or {}
        values = score.get("values") or {}
        category = (row.get("metadata") or {}).get("category")
        hit = next(((c, v) for c in CATEGORIES if (v := values.get(f"accuracy.{c}")) is not None), None)
        if hit is None and category in per_category and score.get("value") is not None:
            hit = (category, score["value"])
        if hit is not None:
            per_category[hit[0]][str(row["id"])] = float(hit[1])
            for kind in F1_KINDS:
                if (value := values.get(f"f1.{kind}")) is not None:
                    f1[kind][str(row["id"])] = float(value)
    results = path.parent / "results.json"
    info: dict[str, Any] = {}
    if results.is_file():
        data = json.loads(results.read_text(encoding="utf-8"))
        info = {"mode": ((data.get("config") or {}).get("task_config") or {}).get("mode"), "model": data.get("model")}
    return {**info, "per_category": per_category, "f1": f1}


def _json_number(x: float) -> float | None:
    """How this module's JSON writes a statistic: 4 decimals, null when missing."""
    return finite_or_none(x, 4)


def stars(p: float) -> str:
    if p is None or math.isnan(p):
        return ""
    return "**" if p < 0.01 else "*" if p < 0.05 else ""


@dataclass(frozen=True)
class ModeComparison:
    """No-RAG vs RAG on one group of questions."""

    group: str
    n: int
    """Questions scored in both runs."""
    norag: float
    """Accuracy % of the No-RAG run on those questions."""
    rag: float
    delta_pct: float
    """(RAG − NoRAG) / NoRAG x 100."""
    p_value: float
    test: str
    f1: Mapping[str, tuple[float, float]]
    """KIND ('official', 'proper') -> mean golden-indicator F1 of (No-RAG, RAG) on those questions."""
    warning: str | None = None
    """The paired test's: too few questions (refused below 2; exact but weak below 30)."""

    def to_json(self) -> dict[str, Any]:
        num = _json_number
        return {"group": self.group, "n": self.n, "norag": num(self.norag), "rag": num(self.rag),
                "delta_pct": num(self.delta_pct), "p_value": num(self.p_value), "stars": stars(self.p_value),
                "test": self.test,
                **{f"f1_{kind}": {"norag": num(a), "rag": num(b)} for kind, (a, b) in self.f1.items()}}


def _mean_over(values: Mapping[str, float], ids: set[str]) -> float:
    present = [values[i] for i in ids if i in values]
    return sum(present) / len(present) if present else math.nan


def _compare(group: str, a: Mapping[str, float], b: Mapping[str, float], f1_a: Mapping[str, Mapping[str, float]],
             f1_b: Mapping[str, Mapping[str, float]]) -> ModeComparison:
    result = paired_test(a, b)
    norag, rag = 100 * result.mean_a, 100 * result.mean_b
    delta = (rag - norag) / norag * 100 if result.n and norag else math.nan
    both = set(a) & set(b)
    f1 = {kind: (_mean_over(f1_a[kind], both), _mean_over(f1_b[kind], both)) for kind in F1_KINDS}
    return ModeComparison(group, result.n, norag, rag, delta, result.p_value, result.test, f1, result.warning)


def compare_modes(run_norag_dir: str | Path, run_rag_dir: str | Path) -> dict[str, Any]:
    """Per category and overall: accuracy %, RAG Δ %, paired test (see the module docstring)."""
    norag, rag = read_run(run_norag_dir), read_run(run_rag_dir)
    rows = [_compare(c, norag["per_category"][c], rag["per_category"][c], norag["f1"], rag["f1"]) for c in CATEGORIES]
    merged_a = {k: v for c in CATEGORIES for k, v in norag["per_category"][c].items()}
    merged_b = {k: v for c in CATEGORIES for k, v in rag["per_category"][c].items()}
    rows.append(_compare("overall", merged_a, merged_b, norag["f1"], rag["f1"]))
    warnings = [f"{r.group}: {r.warning}" for r in rows if r.warning and r.n]
    if norag.get("mode") not in (None, "norag"):
        warnings.append(f"the first run is mode {norag['mode']!r}, not 'norag'")
    if rag.get("mode") not in (None, "rag"):
        warnings.append(f"the second run is mode {rag['mode']!r}, not 'rag'")
    if norag.get("model") and rag.get("model") and norag["model"] != rag["model"]:
        warnings.append(f"different models: {norag['model']} vs {rag['model']}")
    return {"norag": str(run_norag_dir), "rag": str(run_rag_dir), "model": rag.get("model") or norag.get("model"),
            "rows": [r.to_json() for r in rows], "warnings": warnings}


def format_comparison(result: Mapping[str, Any]) -> str:
    lines = [f"{'group':8} {'n':>4} {'No-RAG %':>9} {'RAG %':>8} {'RAG Δ %':>9} {'p':>8}  {'test':13} "
             f"{'F1 official (No-RAG/RAG)':>25} {'F1 proper (No-RAG/RAG)':>23}"]
    for r in result["rows"]:
        def show(x: float | None, fmt: str, width: int = 0) -> str:
            return "—".rjust(width) if x is None else format(x, fmt).rjust(width)

        f1 = {kind: f"{show(r[f'f1_{kind}']['norag'], '.3f')} / {show(r[f'f1_{kind}']['rag'], '.3f')}"
              for kind in F1_KINDS}
        lines.append(f"{r['group']:8} {r['n']:4d} {show(r['norag'], '.1f', 9)} {show(r['rag'], '.1f', 8)} "
                     f"{show(r['delta_pct'], '+.1f', 9)} {show(r['p_value'], '.4f', 8)}{r['stars']:2} {r['test']:13} "
                     f"{f1['official']:>25} {f1['proper']:>23}")
    lines += [f"warning: {w}" for w in result.get("warnings", [])]
    return "\n".join(lines)


def read_human_scores(path: str | Path) -> dict[str, float]:
    """question_id -> human correctness 1-5 (DataError names the file and line of a bad row)."""
    path = Path(path)
    if not path.is_file():
        raise DataError("human scores file not found", path=path)
    reader = csv_dict_reader(path)
    column = next((c for c in HUMAN_SCORE_COLUMNS if c in (reader.fieldnames or [])), None)
    if "question_id" not in (reader.fieldnames or []) or column is None:
        raise DataError(f"needs columns question_id and one of {list(HUMAN_SCORE_COLUMNS)}", path=path, line=1)
    scores = {}
    for row in reader:
        line = reader.line_num
        text = (row.get(column) or "").strip()
        if not text:
            continue
        try:
            value = float(text)
        except ValueError:
            raise DataError(f"{column} {text!r} is not a number", path=path, line=line) from None
        if not 1 <= value <= 5:
            raise DataError(f"{column} {value} is outside 1-5", path=path, line=line)
        scores[row["question_id"].strip()] = value
    return scores


def judge_scores(run: str | Path) -> dict[str, float]:
    """question_id -> the judge's correctness 1-5 in a run."""
    return {qid: value * 5 for cat in read_run(run)["per_category"].values() for qid, value in cat.items()}


def judge_agreement(human_csv: str | Path, run_dir: str | Path) -> dict[str, Any]:
    """MAE, Spearman and Cohen's κ between human and judge correctness on the questions both scored."""
    human, judge = read_human_scores(human_csv), judge_scores(run_dir)
    agreement = compare_ratings(human, judge)
    shared = agreement.models
    kappa = cohen_kappa([round(human[q]) for q in shared], [round(judge[q]) for q in shared])
    num = _json_number
    return {"n": len(shared), "mae": num(agreement.mae), "spearman": num(agreement.spearman),
            "spearman_p": num(agreement.spearman_p), "cohen_kappa": num(kappa),
            "only_human": list(agreement.only_in_a), "only_judge": list(agreement.only_in_b)}
