"""Construction metrics of a FinTradeBench build (the paper's §E.1, Eq. 1-10).

The paper's text of §E.1 is not available here: every equation below is defined as we read issue 10's
words, and marked so. Notation: M the models, Q the questions, G_q the golden indicators of question q
(canonical names, questions.jsonl), C_{q,m} the candidates of model m on q (candidates.jsonl, every TELeR
level), s_{q,m} the one model m selected for q (audit.jsonl stage "after"), acc(a) ∈ {0, 1} the audit's
`accurate` (no claim contradicted and at least one supported), N_a the canonical indicators answer a names
(`indicators_named`).

- Eq. 1, numerical accuracy (as we read the issue; paper text not available): NA_stage = Σ_{a ∈ A_stage}
  acc(a) / |A_stage|, A_before = every audited candidate, A_after = every self-selected answer; pooled over
  models ("all") and per model; Wilson 95% interval.
- Eq. 2-4, metric extraction per answer (as we read the issue): P_a = |N_a ∩ G_q| / |N_a| (0 when N_a is
  empty), R_a = |N_a ∩ G_q| / |G_q|, F1_a = 2 P_a R_a / (P_a + R_a) (0 when both are 0) -- indicators.f1_proper,
  the `proper` F1 of the FinTradeBench task. Per model, P_m, R_m and F1_m are the means over its candidates
  (every level: the same answers Eq. 9 splits by level), with bounded intervals (stats.ci) -- the release
  averages per-row F1 the same way (generate_paper_tables_and_plots.py: f1_score 'mean').
- Eq. 5, macro F1 (as we read the issue): F1_macro = (1/|M|) Σ_m F1_m (stats.weighted_mean_ci: the binomial
  interval on the models' effective number of answers).
- Eq. 6, judge MAE per model (as we read the issue): MAE_m = mean over the items (q, m) that humans scored of
  |J_{q,m} − H_{q,m}|, J and H the judge's and the raters' mean over the dimensions both scored (the
  calibration's `overall` cell of model m, calibration.py). Needs a human-score file.
- Eq. 7, macro MAE (as we read the issue): MAE_macro = (1/|M_H|) Σ_m MAE_m over the models humans scored.
- Eq. 8, self-critique effectiveness (as we read the issue): how much better a model's pick is than a pick at
  random among its own candidates. Per pair (q, m) with audited candidates and an audited pick, the random
  pick is accurate with probability r_{q,m} = mean_{a ∈ C_{q,m}} acc(a); over those pairs
  SCR = (NA_sel − NA_rand) / (1 − NA_rand), NA_sel = mean acc(s_{q,m}), NA_rand = mean r_{q,m}: the share of
  the headroom above random selection that self-selection takes (1 = always an accurate pick, 0 = no better
  than random, < 0 worse). NA_rand equals Eq. 1's NA_before when every pair has the same number of
  candidates. Null when NA_rand = 1 (no headroom). 95% interval: percentile bootstrap over the pairs
  (`BOOTSTRAP_ROUNDS`, seed 0). Also reported: the ceiling, the share of pairs with any accurate candidate.
- Eq. 9, prompt sensitivity (as we read the issue): S_m = Var_ℓ(F1_{m,ℓ}), the population variance (ddof 0)
  over the prompt levels ℓ of model m of F1_{m,ℓ}, the mean F1_a of its candidates at level ℓ; S = mean_m S_m.
  Needs 2 levels. F1 lies in [0, 1], so S ≤ 1/4.
- Self-selection (ours, beside Eq. 8): per model, the levels it picked and by which reading rule, how many
  picks are the official selection prompt's own example id (L3's: prompts.selection_example; counted over
  official-style picks only) and how many are the candidate shown first, over the picks whose shown order is
  recorded (position bias; the neutral style shuffles the order). A model that copies the example picks L3
  whatever its answers say; when that is most official picks, a note says SCR measures the example.
- Eq. 10, composite (as we read the issue): C = Σ_k w_k t_k / Σ_k w_k over the terms available, each in
  [0, 1]: accuracy = NA_after; extraction = F1_macro; judge = 1 − MAE_macro / 4 (4 = the width of the 1-5
  scale); self_critique = SCR clipped to [0, 1]; stability = 1 − 4 S (S / (1/4) = sensitivity normalised by its
  maximum). Weights default to 1 each and are parameters; a term that cannot be computed (no human scores, no
  headroom, ...) is left out, the other weights renormalised, and the term named in `dropped`.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from ....data.errors import DataError
from ....data.io import iter_jsonl
from ....stats import Estimate, mean_ci, proportion_ci, weighted_mean_ci
from ....util import MISSING, finite_or_none, format_number
from ..indicators import canonical, f1_proper
from ..prompts import example_copy_note, selection_example
from .calibration import ALL, OVERALL, SCALE, Calibration, calibrate_build, checked_field

STAGES: tuple[str, ...] = ("before", "after")
"""audit.jsonl stages: every candidate, the self-selected answer."""

TERMS: tuple[str, ...] = ("accuracy", "extraction", "judge", "self_critique", "stability")
"""The composite's terms (Eq. 10), the keys of --weights."""

DEFAULT_WEIGHTS: Mapping[str, float] = {term: 1.0 for term in TERMS}

BOOTSTRAP_ROUNDS = 2000
"""Resamples of the (question, model) pairs for SCR's interval."""

MAX_VARIANCE = 0.25
"""The largest population variance of numbers in [0, 1]: normalises prompt sensitivity."""

NAN_ESTIMATE = Estimate(math.nan, (math.nan, math.nan), 0, math.nan)


def estimate_json(e: Estimate | None) -> dict[str, Any] | None:
    """{'value', 'ci95', 'n'} (and the interval's method and small-n warning) with nulls for what is missing."""
    if e is None:
        return None
    out = {"value": finite_or_none(e.value, 4), "ci95": [finite_or_none(x, 4) for x in e.ci95], "n": e.n}
    if e.method and e.n:
        out["method"] = e.method
    if e.warning and e.n:
        out["warning"] = e.warning
    return out


# -- records ------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class CandidateRecord:
    """One candidates.jsonl row, as the metrics read it."""

    question_id: str
    model: str
    level: str
    candidate_index: int
    indicators_named: tuple[str, ...]


@dataclass(frozen=True)
class AuditRecord:
    """One audit.jsonl row, as the metrics read it."""

    question_id: str
    model: str
    candidate_index: int
    stage: str
    accurate: bool
    supported: int
    contradicted: int
    not_found: int
    methods: Mapping[str, int] = field(default_factory=dict)
    """Claims per checking method ('deterministic', 'llm')."""


def _canonical_list(values: Any, key: str, path: Path, line: int) -> tuple[str, ...]:
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        raise DataError(f"field {key!r} should be a list of indicator names", path=path, line=line)
    try:
        return tuple(dict.fromkeys(canonical(v) for v in values))
    except ValueError as err:
        raise DataError(str(err), path=path, line=line) from None


def read_golden(out: str | Path) -> dict[str, tuple[str, ...]]:
    """question_id -> canonical golden indicators (OUT/questions.jsonl)."""
    path = Path(out) / "questions.jsonl"
    golden = {}
    for line, row in iter_jsonl(path):
        qid = checked_field(row, "question_id", str, path, line)
        names = checked_field(row, "golden_indicators", list, path, line)
        golden[qid] = _canonical_list(names, "golden_indicators", path, line)
    return golden


def read_candidates(out: str | Path) -> list[CandidateRecord]:
    path = Path(out) / "candidates.jsonl"
    rows = []
    for line, row in iter_jsonl(path):
        rows.append(CandidateRecord(
            checked_field(row, "question_id", str, path, line), checked_field(row, "model", str, path, line),
            checked_field(row, "level", str, path, line), checked_field(row, "candidate_index", int, path, line),
            _canonical_list(checked_field(row, "indicators_named", list, path, line), "indicators_named", path, line)))
    return rows


def read_audit(out: str | Path) -> list[AuditRecord]:
    path = Path(out) / "audit.jsonl"
    rows = []
    for line, row in iter_jsonl(path):
        stage = checked_field(row, "stage", str, path, line)
        if stage not in STAGES:
            raise DataError(f"stage {stage!r} is not one of {list(STAGES)}", path=path, line=line)
        methods: dict[str, int] = defaultdict(int)
        for claim in row.get("claims") or ():
            methods[str(claim.get("method") if isinstance(claim, dict) else None)] += 1
        rows.append(AuditRecord(
            checked_field(row, "question_id", str, path, line), checked_field(row, "model", str, path, line),
            checked_field(row, "candidate_index", int, path, line), stage,
            checked_field(row, "accurate", bool, path, line),
            checked_field(row, "supported", int, path, line), checked_field(row, "contradicted", int, path, line),
            checked_field(row, "not_found", int, path, line), dict(methods)))
    return rows


# -- Eq. 1 ----------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class ByModel:
    """One figure pooled over models and per model."""

    all: Estimate
    models: Mapping[str, Estimate]

    def to_json(self) -> dict[str, Any]:
        return {"all": estimate_json(self.all), "models": {m: estimate_json(e) for m, e in self.models.items()}}


def _by_model(values: Iterable[tuple[str, float]]) -> ByModel:
    per: dict[str, list[float]] = defaultdict(list)
    for model, value in values:
        per[model].append(value)
    return ByModel(mean_ci([v for vs in per.values() for v in vs]), {m: mean_ci(per[m]) for m in sorted(per)})


def numerical_accuracy(audit: Sequence[AuditRecord]) -> dict[str, ByModel]:
    """Eq. 1: the share of accurate answers, per stage ('before', 'after'), pooled and per model."""
    return {stage: _by_model((r.model, float(r.accurate)) for r in audit if r.stage == stage) for stage in STAGES}


def self_selection(out: str | Path) -> dict[str, Any]:
    """Per model (and 'all'): picks by level and by rule, and picks of the example id (module docstring)."""
    path = Path(out) / "selected.jsonl"
    example_id, example_level = selection_example("ideal")
    by_model: dict[str, dict[str, Any]] = {}
    for line, row in iter_jsonl(path):
        model = checked_field(row, "model", str, path, line)
        level, rule = checked_field(row, "level", str, path, line), checked_field(row, "rule", str, path, line)
        style = row.get("style", "official")  # builds before the neutral style have no 'style'
        shown = row.get("shown") or []
        for key in (model, ALL):
            entry = by_model.setdefault(key, {"picks": 0, "levels": defaultdict(int), "rules": defaultdict(int),
                                              "styles": defaultdict(int), "official_picks": 0, "example_picks": 0,
                                              "ordered_picks": 0, "first_shown_picks": 0})
            entry["levels"][level] += 1
            entry["rules"][rule] += 1
            entry["styles"][style] += 1
            if rule not in ("single-candidate", "fallback-first"):  # a pick the model made by naming one
                entry["picks"] += 1
                if shown:  # selected.jsonl of builds before the order was recorded has none
                    entry["ordered_picks"] += 1
                    entry["first_shown_picks"] += shown[0] == level
                if style == "official":
                    entry["official_picks"] += 1
                    entry["example_picks"] += level == example_level
    return {"example_id": example_id, "example_level": example_level,
            "models": {m: {**e, **{k: dict(sorted(e[k].items())) for k in ("levels", "rules", "styles")}}
                       for m, e in sorted(by_model.items())}}


def audit_counts(audit: Sequence[AuditRecord]) -> dict[str, dict[str, Any]]:
    """Per stage: answers, accurate ones, and the claims by status and by checking method."""
    counts: dict[str, dict[str, Any]] = {}
    for stage in STAGES:
        rows = [r for r in audit if r.stage == stage]
        methods: dict[str, int] = defaultdict(int)
        for r in rows:
            for method, k in r.methods.items():
                methods[method] += k
        counts[stage] = {"answers": len(rows), "accurate": sum(r.accurate for r in rows),
                         "supported": sum(r.supported for r in rows), "contradicted": sum(r.contradicted for r in rows),
                         "not_found": sum(r.not_found for r in rows), "methods": dict(sorted(methods.items()))}
    return counts


# -- Eq. 2-5 and 9 ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Extraction:
    """Eq. 2-4 of one model (means over its candidates) and their per-level F1 (Eq. 9's input)."""

    precision: Estimate
    recall: Estimate
    f1: Estimate
    f1_by_level: Mapping[str, Estimate]

    def to_json(self) -> dict[str, Any]:
        return {"precision": estimate_json(self.precision), "recall": estimate_json(self.recall),
                "f1": estimate_json(self.f1), "f1_by_level": {k: estimate_json(e) for k, e in self.f1_by_level.items()}}


def extraction(candidates: Sequence[CandidateRecord], golden: Mapping[str, Sequence[str]],
               candidates_path: str = "candidates.jsonl") -> dict[str, Extraction]:
    """Eq. 2-4 per model over its candidates (a question missing from `golden` is a DataError)."""
    per: dict[str, list[tuple[str, float, float, float]]] = defaultdict(list)
    for c in candidates:
        if c.question_id not in golden:
            raise DataError(f"candidate of question {c.question_id!r}, which questions.jsonl does not hold",
                            path=candidates_path, hint="rebuild candidates from the same questions.jsonl")
        score = f1_proper(c.indicators_named, golden[c.question_id])
        per[c.model].append((c.level, score.precision, score.recall, score.f1))
    result = {}
    for model in sorted(per):
        levels, precision, recall, f1 = zip(*per[model])
        result[model] = Extraction(share_estimate(precision), share_estimate(recall), share_estimate(f1),
                                   {lv: share_estimate([f for level, f in zip(levels, f1) if level == lv])
                                    for lv in sorted(set(levels))})
    return result


def share_estimate(values: Sequence[float]) -> Estimate:
    """stats.mean_ci of values in [0, 1] (precision, recall, F1): the bounded interval, inside [0, 1]."""
    return mean_ci(values, bounds=(0.0, 1.0))


def macro(estimates: Iterable[Estimate]) -> Estimate:
    """Unweighted mean over models (Eq. 5, Eq. 7), normal interval from theirs (weights sum to 1: weighted_mean_ci
    is a weighted sum)."""
    parts = list(estimates)
    return weighted_mean_ci([(1.0 / len(parts), e) for e in parts]) if parts else NAN_ESTIMATE


@dataclass(frozen=True)
class Sensitivity:
    """Eq. 9 of one model."""

    variance: float | None
    levels: int
    """Prompt levels with candidates."""
    null: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"variance": finite_or_none(self.variance, 6) if self.variance is not None else None,
                "levels": self.levels, "null": self.null}


def prompt_sensitivity(per_model: Mapping[str, Extraction]) -> dict[str, Sensitivity]:
    """Eq. 9: population variance over levels of each model's mean F1 per level."""
    result = {}
    for model, ex in per_model.items():
        values = [e.value for e in ex.f1_by_level.values()]
        if len(values) < 2:
            result[model] = Sensitivity(None, len(values), "fewer than 2 prompt levels")
        else:
            result[model] = Sensitivity(float(np.var(values)), len(values))
    return result


# -- Eq. 8 ----------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class SelfCritique:
    """Eq. 8 over a set of (question, model) pairs."""

    n: int
    """Pairs with audited candidates and an audited pick."""
    selected: float
    """NA_sel: share of accurate picks."""
    random: float
    """NA_rand: expected accuracy of a random pick among the same candidates."""
    ceiling: float
    """Share of pairs with at least one accurate candidate (the best any pick can do)."""
    scr: float | None
    ci95: tuple[float, float]
    null: str | None = None

    def to_json(self) -> dict[str, Any]:
        num = finite_or_none
        return {"n": self.n, "selected": num(self.selected, 4), "random": num(self.random, 4),
                "ceiling": num(self.ceiling, 4), "scr": num(self.scr, 4) if self.scr is not None else None,
                "ci95": [num(x, 4) for x in self.ci95], "null": self.null}


def _scr(selected: np.ndarray, random: np.ndarray) -> float:
    rand = float(random.mean())
    return math.nan if rand >= 1.0 else (float(selected.mean()) - rand) / (1.0 - rand)


def self_critique_of(pairs: Sequence[tuple[float, float, float]], seed: int = 0) -> SelfCritique:
    """SCR over (picked accurate, random-pick accuracy, any accurate) triples, with a bootstrap interval."""
    if not pairs:
        return SelfCritique(0, math.nan, math.nan, math.nan, None, (math.nan, math.nan), "no audited picks")
    data = np.asarray(pairs, dtype=float)
    selected, random, best = data[:, 0], data[:, 1], data[:, 2]
    value = _scr(selected, random)
    if math.isnan(value):
        return SelfCritique(len(data), float(selected.mean()), float(random.mean()), float(best.mean()), None,
                            (math.nan, math.nan), "every candidate accurate: no headroom over a random pick")
    ci = (math.nan, math.nan)
    if len(data) > 1:
        draws = np.random.default_rng(seed).integers(0, len(data), size=(BOOTSTRAP_ROUNDS, len(data)))
        with np.errstate(divide="ignore", invalid="ignore"):  # a resample with no headroom is dropped below
            sel, rnd = selected[draws].mean(axis=1), random[draws].mean(axis=1)
            stats = np.where(rnd < 1.0, (sel - rnd) / (1.0 - rnd), np.nan)
        stats = stats[np.isfinite(stats)]
        if stats.size:
            ci = (float(np.percentile(stats, 2.5)), float(np.percentile(stats, 97.5)))
    return SelfCritique(len(data), float(selected.mean()), float(random.mean()), float(best.mean()), value, ci)


def self_critique(audit: Sequence[AuditRecord]) -> tuple[SelfCritique, dict[str, SelfCritique]]:
    """Eq. 8 pooled over models and per model."""
    before: dict[tuple[str, str], list[float]] = defaultdict(list)
    picked: dict[tuple[str, str], float] = {}
    for r in audit:
        if r.stage == "before":
            before[(r.question_id, r.model)].append(float(r.accurate))
        else:
            picked[(r.question_id, r.model)] = float(r.accurate)
    triples: dict[str, list[tuple[float, float, float]]] = defaultdict(list)
    for key in sorted(set(before) & set(picked)):
        triples[key[1]].append((picked[key], float(np.mean(before[key])), float(max(before[key]))))
    pooled = [t for model in sorted(triples) for t in triples[model]]
    return self_critique_of(pooled), {m: self_critique_of(triples[m]) for m in sorted(triples)}


# -- Eq. 10 and the whole report --------------------------------------------------------------------

def parse_weights(text: str | None) -> dict[str, float]:
    """'accuracy=2,judge=0.5' -> the default weights with those replaced; ValueError names the bad part."""
    weights = dict(DEFAULT_WEIGHTS)
    for part in (text or "").split(","):
        if not part.strip():
            continue
        key, sep, value = part.partition("=")
        key = key.strip()
        if not sep or key not in weights:
            raise ValueError(f"weight {part.strip()!r}: expected TERM=NUMBER with TERM one of {', '.join(TERMS)}")
        try:
            weights[key] = float(value)
        except ValueError:
            raise ValueError(f"weight {part.strip()!r}: {value.strip()!r} is not a number") from None
        if not math.isfinite(weights[key]) or weights[key] < 0:
            raise ValueError(f"weight {part.strip()!r}: weights are finite numbers ≥ 0")
    if sum(weights.values()) <= 0:
        raise ValueError("every weight is 0: give at least one term a positive weight")
    return weights


@dataclass(frozen=True)
class Composite:
    """Eq. 10."""

    value: float | None
    terms: Mapping[str, float | None]
    """Each term normalised to [0, 1]; None when it could not be computed."""
    weights: Mapping[str, float]
    dropped: tuple[str, ...]
    """Terms left out (no value); the remaining weights are renormalised."""

    def to_json(self) -> dict[str, Any]:
        return {"value": finite_or_none(self.value, 4) if self.value is not None else None,
                "terms": {k: finite_or_none(v, 4) if v is not None else None for k, v in self.terms.items()},
                "weights": dict(self.weights), "dropped": list(self.dropped)}


def composite(terms: Mapping[str, float | None], weights: Mapping[str, float] = DEFAULT_WEIGHTS) -> Composite:
    """Weighted mean of the available terms (each already in [0, 1])."""
    kept = {k: v for k, v in terms.items() if v is not None and math.isfinite(v) and weights.get(k, 0) > 0}
    dropped = tuple(k for k in TERMS if k not in kept and weights.get(k, 0) > 0)
    total = sum(weights[k] for k in kept)
    value = sum(weights[k] * v for k, v in kept.items()) / total if total > 0 else None
    return Composite(value, {k: terms.get(k) for k in TERMS}, dict(weights), dropped)


def _finite(x: float | None) -> float | None:
    return x if x is not None and math.isfinite(x) else None


def composite_terms(accuracy_after: Estimate | None, macro_f1: Estimate | None, macro_mae: Estimate | None,
                    scr: SelfCritique | None, sensitivity: float | None) -> dict[str, float | None]:
    """Eq. 10's terms, each normalised to [0, 1] (module docstring)."""
    mae = _finite(macro_mae.value) if macro_mae else None
    return {"accuracy": _finite(accuracy_after.value) if accuracy_after else None,
            "extraction": _finite(macro_f1.value) if macro_f1 else None,
            "judge": None if mae is None else 1.0 - min(mae / SCALE, 1.0),
            "self_critique": None if scr is None or scr.scr is None else min(max(scr.scr, 0.0), 1.0),
            "stability": None if _finite(sensitivity) is None else 1.0 - min(sensitivity / MAX_VARIANCE, 1.0)}


@dataclass(frozen=True)
class ConstructionMetrics:
    """Eq. 1-10 of one build directory, with what was missing."""

    out: str
    accuracy: Mapping[str, ByModel] | None
    """Eq. 1 per stage; None without audit.jsonl."""
    audit: Mapping[str, Mapping[str, Any]] | None
    extraction: Mapping[str, Extraction] | None
    """Eq. 2-4 per model; None without candidates.jsonl or questions.jsonl."""
    macro_f1: Estimate | None
    """Eq. 5."""
    judge_mae: Mapping[str, Estimate] | None
    """Eq. 6; None without human scores."""
    macro_mae: Estimate | None
    """Eq. 7."""
    scr: SelfCritique | None
    """Eq. 8 pooled over models."""
    scr_models: Mapping[str, SelfCritique]
    sensitivity: Mapping[str, Sensitivity]
    """Eq. 9 per model."""
    macro_sensitivity: float | None
    composite: Composite
    """Eq. 10."""
    missing: Mapping[str, str]
    """Metric group -> why it could not be computed."""
    selection: Mapping[str, Any] | None = None
    """self_selection(): picks by level and rule, example-id picks; None without selected.jsonl."""
    notes: Sequence[str] = ()
    """What a reader must know to read the figures (e.g. picks that copy the prompt's example)."""

    def to_json(self) -> dict[str, Any]:
        num = finite_or_none
        return {
            "out": self.out,
            "numerical_accuracy": {s: b.to_json() for s, b in (self.accuracy or {}).items()} or None,
            "audit_counts": self.audit,
            "extraction": None if self.extraction is None else {
                "models": {m: e.to_json() for m, e in self.extraction.items()},
                "macro_f1": estimate_json(self.macro_f1)},
            "judge_mae": None if self.judge_mae is None else {
                "models": {m: estimate_json(e) for m, e in self.judge_mae.items()},
                "macro": estimate_json(self.macro_mae),
                "macro_pct_of_scale": num(100 * self.macro_mae.value / SCALE, 2)
                if self.macro_mae else None},
            "self_critique": None if self.scr is None else {
                "all": self.scr.to_json(), "models": {m: s.to_json() for m, s in self.scr_models.items()}},
            "prompt_sensitivity": {"models": {m: s.to_json() for m, s in self.sensitivity.items()},
                                   "macro": num(self.macro_sensitivity, 6) if self.macro_sensitivity is not None
                                   else None},
            "composite": self.composite.to_json(),
            "self_selection": self.selection,
            "missing": dict(self.missing),
            "notes": list(self.notes),
        }


def construction_metrics(out: str | Path, *, human_csv: str | Path | None = None, judge: str | None = None,
                         weights: Mapping[str, float] = DEFAULT_WEIGHTS) -> ConstructionMetrics:
    """Eq. 1-10 over a build directory (a metric whose input file is absent is null, with the reason)."""
    out = Path(out)
    missing: dict[str, str] = {}
    accuracy = counts = None
    scr: SelfCritique | None = None
    scr_models: dict[str, SelfCritique] = {}
    if (out / "audit.jsonl").is_file():
        audit = read_audit(out)
        accuracy, counts = numerical_accuracy(audit), audit_counts(audit)
        scr, scr_models = self_critique(audit)
    else:
        missing["numerical_accuracy"] = missing["self_critique"] = f"{out / 'audit.jsonl'} not found"
    per_model = None
    macro_f1 = None
    sensitivity: dict[str, Sensitivity] = {}
    macro_s = None
    if (out / "candidates.jsonl").is_file() and (out / "questions.jsonl").is_file():
        per_model = extraction(read_candidates(out), read_golden(out), str(out / "candidates.jsonl"))
        macro_f1 = macro(e.f1 for e in per_model.values()) if per_model else None
        sensitivity = prompt_sensitivity(per_model)
        values = [s.variance for s in sensitivity.values() if s.variance is not None]
        macro_s = float(np.mean(values)) if values else None
        if macro_s is None:
            missing["prompt_sensitivity"] = "no model has candidates at 2 or more prompt levels"
    else:
        missing["extraction"] = missing["prompt_sensitivity"] = (
            f"needs {out / 'candidates.jsonl'} and {out / 'questions.jsonl'}")
    judge_mae = macro_mae = None
    notes: list[str] = []
    if human_csv is not None:
        calibration: Calibration = calibrate_build(out, human_csv, judge=judge)
        judge_mae = {c.model: c.mae for c in calibration.cells
                     if c.model != ALL and c.category == ALL and c.dimension == OVERALL}
        macro_mae = macro(judge_mae.values()) if judge_mae else None
        notes += calibration.notes()  # e.g. a judge that copies the rubric's example: the MAE measures that
        if not judge_mae:
            missing["judge_mae"] = "no human-scored item has a judged 'after' row"
    else:
        missing["judge_mae"] = "no human scores (pass --human H.csv)"
    terms = composite_terms(accuracy["after"].all if accuracy else None, macro_f1, macro_mae, scr, macro_s)
    if scr is not None and scr.null:
        missing["self_critique"] = scr.null
    selection = None
    if (out / "selected.jsonl").is_file():
        selection = self_selection(out)
        pooled = selection["models"].get(ALL)
        if pooled and (copied := example_copy_note(pooled["example_picks"], pooled["official_picks"],
                                                   selection["example_id"], selection["example_level"])):
            notes.append(copied)
    return ConstructionMetrics(str(out), accuracy, counts, per_model, macro_f1, judge_mae, macro_mae, scr, scr_models,
                               sensitivity, macro_s, composite(terms, weights), missing, selection, notes)


def table_rows(metrics: ConstructionMetrics) -> Iterable[tuple[str, str, str, str, str]]:
    """(metric, group, value, 95% CI, n) text rows for the CLI's table."""

    def show(x: float | None, digits: int = 3) -> str:
        return format_number(x, digits)

    def row(metric: str, group: str, e: Estimate | None) -> tuple[str, str, str, str, str]:
        e = e or NAN_ESTIMATE
        return (metric, group, show(e.value), f"{show(e.ci95[0])} – {show(e.ci95[1])}", str(e.n))

    for stage in STAGES:
        if metrics.accuracy:
            by = metrics.accuracy[stage]
            yield row(f"Eq.1 numerical accuracy ({stage})", ALL, by.all)
            for m, e in by.models.items():
                yield row(f"Eq.1 numerical accuracy ({stage})", m, e)
    for m, ex in (metrics.extraction or {}).items():
        for name, e in (("precision", ex.precision), ("recall", ex.recall), ("F1", ex.f1)):
            yield row(f"Eq.2-4 extraction {name}", m, e)
    if metrics.extraction is not None:
        yield row("Eq.5 macro F1", ALL, metrics.macro_f1)
    for m, e in (metrics.judge_mae or {}).items():
        yield row("Eq.6 judge MAE (points)", m, e)
    if metrics.judge_mae is not None:
        yield row("Eq.7 macro judge MAE", ALL, metrics.macro_mae)
    for group, s in ([(ALL, metrics.scr)] if metrics.scr else []) + list(metrics.scr_models.items()):
        value = show(s.scr) if s.scr is not None else f"{MISSING} ({s.null})"
        yield ("Eq.8 SCR", group, value, f"{show(s.ci95[0])} – {show(s.ci95[1])}", str(s.n))
    for m, s in metrics.sensitivity.items():
        yield ("Eq.9 prompt sensitivity", m, show(s.variance, 5) if s.variance is not None else f"{MISSING} ({s.null})", "",
               f"{s.levels} level{'s' if s.levels != 1 else ''}")
    if metrics.sensitivity:
        yield ("Eq.9 prompt sensitivity", ALL, show(metrics.macro_sensitivity, 5), "", "")
    if metrics.selection:
        for m, sel in metrics.selection["models"].items():
            if sel["official_picks"]:
                yield row(f"self-selection picks of the example ({metrics.selection['example_level']})", m,
                          proportion_ci(sel["example_picks"], sel["official_picks"]))
            if sel["ordered_picks"]:
                yield row("self-selection picks of the first shown", m,
                          proportion_ci(sel["first_shown_picks"], sel["ordered_picks"]))
    c = metrics.composite
    yield ("Eq.10 composite", ALL, show(c.value), "", "dropped: " + (", ".join(c.dropped) or "none"))
