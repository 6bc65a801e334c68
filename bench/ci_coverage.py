"""Coverage of the harness's 95% intervals, family by family, at small and large n.

    python bench/ci_coverage.py [--json] [--reps 2000] [--seed 0] [--sizes 3,5,10,30,100,300] [--family NAME]

Each family draws samples of size n from settings with a known true value, asks the harness's own code
(finharness.stats, the CFinBench aggregation, the rating tables) for its interval, and counts how often
the interval holds the truth. Binary accuracy is enumerated exactly (every number of successes, weighted by
its binomial probability); the other families are simulated with a fixed seed. Printed per family and n:
the worst coverage over the family's settings (and which), the mean coverage, the median width, and beside
them a reference interval's (Student's t, or the bootstrap for rating gaps) coverage and width.

Goal: coverage 0.93-0.97 everywhere; an exact method, deliberately conservative, at least 0.95. The
'heavy-tailed counts' family is shown for information only: no interval can promise the coverage of an
unbounded mean at small n (Bahadur & Savage 1956), and the goal is not asked of it.
tests/unit/test_ci_coverage.py runs a small version and fails below 0.90 anywhere.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np
from scipy import stats as sps

from finharness.stats import Estimate, mean_ci, paired_test, weighted_mean_ci

SIZES = (3, 5, 10, 30, 100, 300)
GOAL = (0.93, 0.97)
BOOTSTRAP_ROUNDS = 200
"""Bootstrap rounds of the rating tables here (the CLI's default is 1000: slower, the same percentiles)."""

Interval = tuple[float, float]


@dataclass(frozen=True)
class Case:
    """One setting of a family: draws a sample of size n, returns (sample, true value or values)."""

    label: str
    draw: Callable[[np.random.Generator, int], tuple[Any, Any]]


@dataclass(frozen=True)
class Family:
    """A kind of number the harness reports, with its interval and a reference interval."""

    name: str
    what: str
    cases: tuple[Case, ...]
    interval: Callable[[Any], Any]
    """The harness's interval(s) for a sample: an Interval, or a list of (Interval, truth key) for tables."""
    reference: Callable[[Any], Any] | None = None
    reps_factor: float = 1.0
    """Share of --reps this family runs (rating tables are slower)."""
    goal: bool = True
    """Whether the coverage goal applies (False: shown for information)."""
    exact: Callable[[float, int], list[tuple[float, Any]]] | None = None
    """(probability, sample) pairs that enumerate every sample of size n (replaces simulation)."""
    needs: str = ""
    """A module the family needs; the family is skipped where it cannot be imported (older code)."""


# -- samples ---------------------------------------------------------------------------------------

def t_interval(x: np.ndarray, lo: float = -math.inf, hi: float = math.inf) -> Interval:
    n = len(x)
    if n < 2:
        return (math.nan, math.nan)
    m, se = float(x.mean()), float(x.std(ddof=1)) / math.sqrt(n)
    half = float(sps.t.ppf(0.975, n - 1)) * se
    return (max(lo, m - half), min(hi, m + half))


def grade_case(label: str, probs: Sequence[float]) -> Case:
    grades = np.arange(1, 6) / 5
    p = np.asarray(probs, dtype=float) / sum(probs)
    return Case(label, lambda rng, n: (rng.choice(grades, size=n, p=p), float(grades @ p)))


def f1_case(label: str, zero: float, one: float) -> Case:
    """F1 of small indicator sets: a point mass at 0 and at 1, Beta(2, 2) between."""
    def draw(rng: np.random.Generator, n: int) -> tuple[np.ndarray, float]:
        u = rng.random(n)
        x = np.where(u < zero, 0.0, np.where(u < zero + one, 1.0, rng.beta(2, 2, n)))
        return x, one + (1 - zero - one) * 0.5
    return Case(label, draw)


def count_case(label: str, draw_values: Callable[[np.random.Generator, int], np.ndarray]) -> Case:
    truth = float(draw_values(np.random.default_rng(12345), 2_000_000).mean())
    return Case(label, lambda rng, n: (draw_values(rng, n), truth))


def binary_exact(p: float, n: int) -> list[tuple[float, np.ndarray]]:
    return [(float(sps.binom.pmf(k, n, p)), np.r_[np.ones(k), np.zeros(n - k)]) for k in range(n + 1)]


# -- CFinBench-style weighted means ------------------------------------------------------------------

TYPE_WEIGHTS = {"single": 0.4, "multiple": 0.4, "judgment": 0.2}
TYPE_SHARES = {"single": 0.5, "multiple": 0.3, "judgment": 0.2}
CATEGORIES = 10
"""Categories per question type in the simulation (CFinBench has 43; few items fall in most either way)."""


def category_accuracies(mean: float, seed: int, types: Sequence[str], spread: float = 8.0) -> dict:
    rng = np.random.default_rng(seed)
    return {t: rng.beta(mean * spread, (1 - mean) * spread, CATEGORIES) for t in types}


def exam_case(label: str, mean: float, types: Sequence[str], seed: int) -> Case:
    """n items spread at random over types (TYPE_SHARES) and categories; 0/1 scores; the truth is the
    weighted mean of the true accuracies of the categories present (the estimand the aggregation targets)."""
    acc = category_accuracies(mean, seed, types)

    def draw(rng: np.random.Generator, n: int) -> tuple[dict, float]:
        shares = np.asarray([TYPE_SHARES[t] for t in types])
        type_of = rng.choice(len(types), size=n, p=shares / shares.sum())
        cat_of = rng.integers(0, CATEGORIES, n)
        sample: dict[str, dict[int, np.ndarray]] = {}
        for ti, t in enumerate(types):
            for c in range(CATEGORIES):
                k = int(np.sum((type_of == ti) & (cat_of == c)))
                if k:
                    sample.setdefault(t, {})[c] = (rng.random(k) < acc[t][c]).astype(float)
        present = {t: cats for t, cats in sample.items()}
        total_w = sum(TYPE_WEIGHTS[t] for t in present) if len(types) > 1 else 1.0
        truth = sum((TYPE_WEIGHTS[t] / total_w if len(types) > 1 else 1.0) * float(np.mean([acc[t][c] for c in cats]))
                    for t, cats in present.items())
        return sample, truth
    return Case(label, draw)


def exam_interval(sample: dict) -> Interval:
    """What benchmarks/cfinbench/scoring.py does: macro over categories per type, then 0.4/0.4/0.2."""
    per_type = {t: weighted_mean_ci([(1.0 / len(cats), mean_ci(v)) for v in cats.values()])
                for t, cats in sample.items()}
    missing = Estimate(math.nan, (math.nan, math.nan), 0, math.nan)  # as scoring.py: every type, absent ones empty
    est = weighted_mean_ci([(w, per_type.get(t, missing)) for t, w in TYPE_WEIGHTS.items()], renormalise=True)
    return (max(0.0, est.ci95[0]), min(1.0, est.ci95[1]))


def macro_interval(sample: dict) -> Interval:
    (cats,) = sample.values()
    est = weighted_mean_ci([(1.0 / len(cats), mean_ci(v)) for v in cats.values()])
    return tuple(est.ci95)


def macro_reference(sample: dict) -> Interval:
    """The normal interval on Σw²·var with Agresti–Coull part variances (the harness before issue 27)."""
    z = 1.959963984540054
    type_total = sum(TYPE_WEIGHTS.get(t, 1.0) for t in sample)
    parts = []
    for t, cats in sample.items():
        for v in cats.values():
            k, m = float(v.sum()), len(v)
            p_adj = (k + z * z / 2) / (m + z * z)
            parts.append((TYPE_WEIGHTS.get(t, 1.0) / type_total / len(cats), k / m, p_adj * (1 - p_adj) / (m + z * z)))
    value, var = sum(w * p for w, p, _ in parts), sum(w * w * v for w, _, v in parts)
    return (max(0.0, value - z * math.sqrt(var)), min(1.0, value + z * math.sqrt(var)))


# -- rating gaps -----------------------------------------------------------------------------------

POINTS = 400 / math.log(10)


def match_case(label: str, strengths: Sequence[float], per_pair: bool, ties: float = 0.2,
               soft: float | None = None) -> Case:
    """Models with known strengths (rating points); n matches (two models) or n per pair (more). A match's
    expected score for a is σ((s_a − s_b)/POINTS) (ties count ½); `soft`: outcomes Beta-distributed around it
    with that concentration instead of win/tie/loss."""
    names = [f"m{i}" for i in range(len(strengths))]
    pairs = [(i, j) for i in range(len(names)) for j in range(i + 1, len(names))]

    def draw(rng: np.random.Generator, n: int) -> tuple[list, dict]:
        from finharness.rating.matches import Match

        matches = []
        for i, j in (pairs * n if per_pair else [pairs[0]] * n):
            score = 1 / (1 + math.exp(-(strengths[i] - strengths[j]) / POINTS))
            a, b = (i, j) if rng.random() < 0.5 else (j, i)
            expect = score if a == i else 1 - score
            if soft is not None:
                outcome = float(rng.beta(expect * soft, (1 - expect) * soft))
                matches.append(Match("t", names[a], names[b], "tie", outcome=outcome))
                continue
            tie = min(ties, 2 * min(expect, 1 - expect))
            u = rng.random()
            winner = "model_a" if u < expect - tie / 2 else "tie" if u < expect + tie / 2 else "model_b"
            matches.append(Match("t", names[a], names[b], winner))
        # the bootstrap's own seed varies too: one fixed set of resamples for every sample would measure
        # the coverage of that one set (with 200 rounds, noticeably off 0.95 either way)
        return (matches, int(rng.integers(2**31))), dict(zip(names, strengths))
    return Case(label, draw)


def gap_intervals(table_of: Callable) -> Callable:
    def intervals(sample: tuple) -> list[tuple[Interval, tuple[str, str]]]:
        table = table_of(*sample)
        return [(tuple(g.ci95), (g.higher, g.lower)) for g in table.gaps if g.ci95 is not None]
    return intervals


def two_model_bootstrap_reference(table_of: Callable) -> Callable:
    """With two models the ratings mirror each other, so the bootstrap gap's percentiles are twice a rating's
    offset from the mean: the plain bootstrap interval whatever the table reports for the gap."""
    def reference(sample: tuple) -> list[tuple[Interval, tuple[str, str]]]:
        table = table_of(*sample)
        (high, low) = list(table.ratings)[:2]
        lo, hi = table.ratings[high].ci95  # both tables keep the mean rating at 1000 (BT anchors it, Elo conserves it)
        return [((2 * (lo - 1000.0), 2 * (hi - 1000.0)), (high, low))]
    return reference


def bt_of(matches: list, seed: int):
    from finharness.rating.bt import bt_table

    return bt_table(matches, bootstrap=BOOTSTRAP_ROUNDS, seed=seed)


def elo_of(matches: list, seed: int):
    from finharness.rating.elo import elo_table

    return elo_table(matches, bootstrap=BOOTSTRAP_ROUNDS, seed=seed)


# -- paired differences, draws ---------------------------------------------------------------------

def paired_binary_case(label: str, pa: float, pb: float, rho: float) -> Case:
    cov = rho * math.sqrt(pa * (1 - pa) * pb * (1 - pb))
    p11 = pa * pb + cov
    cells = np.asarray([p11, pa - p11, pb - p11, 1 - pa - pb + p11])  # (1,1) (1,0) (0,1) (0,0)

    def draw(rng: np.random.Generator, n: int) -> tuple[tuple, float]:
        k = rng.choice(4, size=n, p=cells / cells.sum())
        a, b = np.isin(k, (0, 1)).astype(float), np.isin(k, (0, 2)).astype(float)
        return (a, b), pb - pa
    return Case(label, draw)


def paired_grade_case(label: str, probs: Sequence[float], shift: Sequence[float]) -> Case:
    grades = np.arange(1, 6)
    p, s = np.asarray(probs) / sum(probs), np.asarray(shift) / sum(shift)

    def sample(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
        a = rng.choice(grades, size=n, p=p)
        b = np.clip(a + rng.choice((-1, 0, 1), size=n, p=s), 1, 5)
        return a / 5, b / 5
    big_a, big_b = sample(np.random.default_rng(54321), 2_000_000)
    truth = float((big_b - big_a).mean())
    return Case(label, lambda rng, n: (sample(rng, n), truth))


def paired_interval(sample: tuple) -> Interval:
    a, b = sample
    result = paired_test({str(i): v for i, v in enumerate(a)}, {str(i): v for i, v in enumerate(b)})
    return tuple(result.ci95)


def draws_case(label: str, mean: float, spread: float, k: int = 5) -> Case:
    """Items with difficulty: item i's accuracy p_i ~ Beta(mean·spread, (1 − mean)·spread); K 0/1 draws each."""
    def draw(rng: np.random.Generator, n: int) -> tuple[np.ndarray, float]:
        p = rng.beta(mean * spread, (1 - mean) * spread, n)
        return (rng.random((n, k)) < p[:, None]).astype(float), mean
    return Case(label, draw)


def clustered_interval(sample: np.ndarray) -> Interval:
    from finharness.stats.draws import clustered_mean_ci

    return tuple(clustered_mean_ci(sample.tolist()).ci95)


def auc_case(label: str, shift: float, ties: bool = False) -> Case:
    """n seen and n unseen scores, normal with the seen side shifted by `shift` SDs (truth Φ(shift / √2)); `ties`:
    scores rounded to 0.5 SD, as a probe on short texts gives many equal values (truth by simulation)."""
    def sample(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
        pos, neg = rng.normal(shift, 1.0, n), rng.normal(0.0, 1.0, n)
        return (np.round(pos * 2) / 2, np.round(neg * 2) / 2) if ties else (pos, neg)
    if ties:  # P(X > Y) + ½ P(X = Y) over the half-SD grid, exactly
        grid = np.arange(-24, 25) / 2
        p_pos = sps.norm.cdf(grid + 0.25 - shift) - sps.norm.cdf(grid - 0.25 - shift)
        p_neg = sps.norm.cdf(grid + 0.25) - sps.norm.cdf(grid - 0.25)
        below = np.concatenate([[0.0], np.cumsum(p_neg)[:-1]])
        truth = float(np.sum(p_pos * (below + 0.5 * p_neg)))
    else:
        truth = float(sps.norm.cdf(shift / math.sqrt(2)))
    return Case(label, lambda rng, n: (sample(rng, n), truth))


def auc_interval(sample: tuple) -> Interval:
    from finharness.stats.auc import auc_ci

    return tuple(auc_ci(*sample).ci95)


def auc_bootstrap(sample: tuple) -> Interval:
    from finharness.stats.auc import bootstrap_auc_ci

    return tuple(bootstrap_auc_ci(*sample, rounds=BOOTSTRAP_ROUNDS).ci95)


# -- the families ------------------------------------------------------------------------------------

def families() -> list[Family]:
    unit = lambda x: t_interval(np.asarray(x), 0.0, 1.0)  # noqa: E731
    rounds = np.arange(1, 10)
    rounds_p = np.asarray([0.02, 0.08, 0.15, 0.15, 0.1, 0.1, 0.05, 0.05, 0.3])
    return [
        Family("binary accuracy", "0/1 scores (exact enumeration)",
               tuple(Case(f"p={p}", lambda rng, n, p=p: (None, p)) for p in (0.02, 0.1, 0.3, 0.5, 0.7, 0.9, 0.98)),
               lambda x: tuple(mean_ci(x).ci95), unit, exact=binary_exact),
        Family("judge grade /5", "grades 1-5 divided by 5", (
            grade_case("weak", [.5, .3, .1, .05, .05]), grade_case("mid", [.1, .2, .3, .3, .1]),
            grade_case("strong", [0, .02, .08, .3, .6]), grade_case("copies 4/5", [0, 0, .05, .9, .05]),
            grade_case("top", [0, 0, 0, .1, .9])), lambda x: tuple(mean_ci(x).ci95), unit),
        Family("F1", "per-answer F1 in [0, 1]", (
            f1_case("low", .6, .05), f1_case("mid", .2, .2), f1_case("high", .05, .6), f1_case("rare", .95, 0)),
            lambda x: tuple(mean_ci(x).ci95), unit),
        Family("CFinBench 0.4/0.4/0.2", f"macro over {CATEGORIES} categories per type, 0/1 scores", (
            exam_case("weak 0.3", .3, list(TYPE_WEIGHTS), 1), exam_case("mid 0.55", .55, list(TYPE_WEIGHTS), 2),
            exam_case("strong 0.85", .85, list(TYPE_WEIGHTS), 3), exam_case("near 1", .97, list(TYPE_WEIGHTS), 4)),
            exam_interval, macro_reference),
        Family("category macro", f"one type's mean over {CATEGORIES} categories", (
            exam_case("near 0", .05, ["single"], 5), exam_case("mid", .5, ["single"], 6),
            exam_case("near 1", .95, ["single"], 7)), macro_interval, macro_reference),
        Family("tokens", "completion and dialogue token counts", (
            count_case("completion (capped 512)", lambda rng, n: np.minimum(np.round(rng.gamma(1.5, 120, n)), 512)),
            count_case("dialogue total", lambda rng, n: np.round(rng.gamma(4, 300, n)))),
            lambda x: tuple(mean_ci(x, counts=True).ci95), lambda x: t_interval(np.asarray(x))),
        Family("rounds", "UCFE dialogue rounds 1-9", (
            count_case("rounds", lambda rng, n: rng.choice(rounds, size=n, p=rounds_p / rounds_p.sum()).astype(float)),),
            lambda x: tuple(mean_ci(x, counts=True).ci95), lambda x: t_interval(np.asarray(x))),
        Family("heavy-tailed counts", "lognormal σ = 1 (information only)", (
            count_case("lognormal", lambda rng, n: np.round(rng.lognormal(4.5, 1.0, n))),),
            lambda x: tuple(mean_ci(x, counts=True).ci95), lambda x: t_interval(np.asarray(x)), goal=False),
        Family("BT gap, 2 models", "n matches, ties 0.2", tuple(
            match_case(f"gap {g}", (g, 0), False) for g in (0, 100, 300)),
            gap_intervals(bt_of), two_model_bootstrap_reference(bt_of), reps_factor=1.0),
        Family("BT gap, soft outcomes", "n matches, outcomes Beta around the expected score (concentration 4)",
               tuple(match_case(f"gap {g}", (g, 0), False, soft=4.0) for g in (0, 100)),
               gap_intervals(bt_of), two_model_bootstrap_reference(bt_of), reps_factor=0.15),
        Family("BT gaps, 4 models", "n matches per pair (round robin), adjacent gaps", tuple(
            match_case(f"step {g}", (3 * g, 2 * g, g, 0), True) for g in (0, 100)),
            gap_intervals(bt_of), reps_factor=0.08),
        Family("Elo gap, 2 models", "n matches, ties 0.2 (K 4)", tuple(
            match_case(f"gap {g}", (g, 0), False) for g in (0, 100, 300)),
            gap_intervals(elo_of), two_model_bootstrap_reference(elo_of), reps_factor=1.0),
        Family("Elo gaps, 4 models", "n matches per pair (round robin), adjacent gaps", tuple(
            match_case(f"step {g}", (3 * g, 2 * g, g, 0), True) for g in (0, 100)),
            gap_intervals(elo_of), reps_factor=0.08),
        Family("paired binary", "B − A on the same items, 0/1 scores", (
            paired_binary_case("0.5 vs 0.5", .5, .5, .5), paired_binary_case("0.6 vs 0.7", .6, .7, .5),
            paired_binary_case("0.9 vs 0.95", .9, .95, .6), paired_binary_case("0.05 vs 0.1", .05, .1, .3)),
            paired_interval, lambda s: t_interval(s[1] - s[0])),
        Family("paired grades", "B − A of judge grades /5", (
            paired_grade_case("B a bit better", [.1, .2, .3, .3, .1], [.2, .5, .3]),
            paired_grade_case("same", [0, .05, .15, .4, .4], [.1, .8, .1])),
            paired_interval, lambda s: t_interval(s[1] - s[0])),
        Family("draws K=5 (clustered)", "items with difficulty Beta(spread), 5 draws each, 0/1", (
            draws_case("0.1, spread 1", .1, 1), draws_case("0.5, spread 1", .5, 1), draws_case("0.5, spread 10", .5, 10),
            draws_case("0.9, spread 10", .9, 10)),
            clustered_interval, lambda s: tuple(mean_ci(s.ravel()).ci95), needs="finharness.stats.draws"),
        Family("AUC (DeLong, logit)", "n seen + n unseen probe scores; reference: stratified bootstrap", (
            auc_case("no signal", 0.0), auc_case("d' 0.5", 0.5), auc_case("d' 1.5", 1.5),
            auc_case("d' 0.5, ties", 0.5, ties=True)),
            auc_interval, auc_bootstrap, reps_factor=0.5, needs="finharness.stats.auc"),
    ]


# -- running -----------------------------------------------------------------------------------------

@dataclass
class Tally:
    """Weighted hits and widths of one interval over one case."""

    hits: float = 0.0
    weight: float = 0.0
    widths: list = field(default_factory=list)
    width_weights: list = field(default_factory=list)

    def add(self, interval: Interval, truth: float, weight: float = 1.0) -> None:
        lo, hi = interval
        if math.isnan(lo) or math.isnan(hi):
            lo, hi = -math.inf, math.inf  # no interval: the whole line (never wrong, never useful)
        self.hits += weight * (lo <= truth <= hi)
        self.weight += weight
        self.widths.append(hi - lo)
        self.width_weights.append(weight)

    @property
    def coverage(self) -> float:
        return self.hits / self.weight if self.weight else math.nan


def weighted_median(values: Sequence[float], weights: Sequence[float]) -> float:
    if not values:
        return math.nan
    order = np.argsort(values)
    v, w = np.asarray(values, dtype=float)[order], np.asarray(weights, dtype=float)[order]
    return float(v[np.searchsorted(np.cumsum(w), 0.5 * w.sum())])


def _truths(result: Any, truth: Any) -> list[tuple[Interval, float]]:
    if isinstance(result, list):  # rating tables: (interval, (higher, lower)) per gap, truth = strengths
        return [(iv, truth[h] - truth[low]) for iv, (h, low) in result]
    return [(result, truth)]


def run_cell(family: Family, case_index: int, n: int, reps: int, seed: int) -> dict[str, Any]:
    case = family.cases[case_index]
    main, ref = Tally(), Tally()
    if family.exact is not None:
        truth = case.draw(np.random.default_rng(0), n)[1]
        for weight, sample in family.exact(truth, n):
            main.add(family.interval(sample), truth, weight)
            if family.reference:
                ref.add(family.reference(sample), truth, weight)
    else:
        rng = np.random.default_rng([seed, sum(map(ord, family.name)), case_index, n])
        for _ in range(max(1, round(reps * family.reps_factor))):
            sample, truth = case.draw(rng, n)
            for iv, t in _truths(family.interval(sample), truth):
                main.add(iv, t)
            if family.reference:
                for iv, t in _truths(family.reference(sample), truth):
                    ref.add(iv, t)
    return {"case": case.label, "coverage": main.coverage, "width": weighted_median(main.widths, main.width_weights),
            "ref_coverage": ref.coverage if family.reference else None,
            "ref_width": weighted_median(ref.widths, ref.width_weights) if family.reference else None,
            "samples": main.weight if family.exact is None else None}


def available(family: Family) -> bool:
    if not family.needs:
        return True
    try:
        __import__(family.needs)
    except ImportError:
        return False
    return True


def run(sizes: Sequence[int] = SIZES, reps: int = 2000, seed: int = 0, only: Sequence[str] = (),
        progress: bool = False) -> list[dict]:
    rows = []
    for family in families():
        if only and family.name not in only:
            continue
        if not available(family):
            rows.append({"family": family.name, "n": None, "skipped": f"needs {family.needs}"})
            continue
        for n in sizes:
            if progress:
                print(f"{family.name}, n = {n}", file=sys.stderr, flush=True)
            cells = [run_cell(family, i, n, reps, seed) for i in range(len(family.cases))]
            worst = min(cells, key=lambda c: c["coverage"])
            refs = [c for c in cells if c["ref_coverage"] is not None]
            rows.append({
                "family": family.name, "n": n, "goal": family.goal, "cases": cells,
                "coverage_min": worst["coverage"], "worst_case": worst["case"],
                "coverage_mean": float(np.mean([c["coverage"] for c in cells])),
                "width": float(np.median([c["width"] for c in cells])),
                "ref_coverage_min": min(c["ref_coverage"] for c in refs) if refs else None,
                "ref_width": float(np.median([c["ref_width"] for c in refs])) if refs else None})
    return rows


def verdict(row: dict) -> str:
    if not row.get("goal", True):
        return "info"
    c = row["coverage_min"]
    if c < GOAL[0]:
        return "LOW"
    return "high" if c > GOAL[1] else "ok"


def print_table(rows: list[dict], out=sys.stdout) -> None:
    def fmt(x: float | None, digits: int = 3) -> str:
        return "—" if x is None or (isinstance(x, float) and math.isnan(x)) else (
            "inf" if math.isinf(x) else f"{x:.{digits}g}" if abs(x) >= 100 else f"{x:.{digits}f}")

    header = f"{'family':24} {'n':>4}  {'cov min':>7} {'(worst case)':24} {'mean':>6} {'width':>8}   " \
             f"{'ref cov':>7} {'ref width':>9}  goal"
    print(header, file=out)
    print("-" * len(header), file=out)
    for r in rows:
        if r.get("skipped"):
            print(f"{r['family']:24}    —  skipped ({r['skipped']})", file=out)
            continue
        print(f"{r['family']:24} {r['n']:>4}  {fmt(r['coverage_min']):>7} {('(' + r['worst_case'] + ')'):24} "
              f"{fmt(r['coverage_mean']):>6} {fmt(r['width']):>8}   {fmt(r['ref_coverage_min']):>7} "
              f"{fmt(r['ref_width']):>9}  {verdict(r)}", file=out)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="print the rows as JSON")
    parser.add_argument("--reps", type=int, default=2000, help="simulated samples per setting (rating families: a share)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)))
    parser.add_argument("--family", action="append", default=[], help="only this family (repeatable)")
    args = parser.parse_args(argv)
    rows = run([int(s) for s in args.sizes.split(",")], args.reps, args.seed, args.family, progress=True)
    if args.json:
        print(json.dumps(rows, indent=1))
    else:
        print_table(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
