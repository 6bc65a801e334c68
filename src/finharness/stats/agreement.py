"""Agreement between two raters on the same items: Cohen's κ, its bootstrap interval, per-label agreement.

Used wherever two readings of the same items are compared: multiple-choice methods against each other
(benchmarks/mc_methods.py), an LLM judge's verdicts or scores against a human's (ui/exports.py,
a judge's agreement with people). numpy only, so a task that reports κ does not load scipy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Hashable, Sequence

import numpy as np

from .ci import RELIABLE_N, Estimate


def _codes(rater_a: Sequence[Hashable], rater_b: Sequence[Hashable]) -> tuple[np.ndarray, np.ndarray, int]:
    if len(rater_a) != len(rater_b):
        raise ValueError(f"the raters judged different numbers of items ({len(rater_a)} vs "
                         f"{len(rater_b)}); pass their verdicts on the same items, in the same order")
    labels, codes = np.unique(np.array([*map(str, rater_a), *map(str, rater_b)]), return_inverse=True)
    return codes[:len(rater_a)], codes[len(rater_a):], len(labels)


def _kappas(codes_a: np.ndarray, codes_b: np.ndarray, k: int) -> np.ndarray:
    """κ of each row of two (resamples × n) code arrays; NaN where every item of a row is in one category."""
    n = codes_a.shape[1]
    observed = np.mean(codes_a == codes_b, axis=1)
    chance = np.zeros(codes_a.shape[0])
    for label in range(k):  # few labels: one pass per label keeps it vectorised over resamples
        chance += np.count_nonzero(codes_a == label, axis=1) * np.count_nonzero(codes_b == label, axis=1) / (n * n)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(chance < 1.0, (observed - chance) / (1.0 - chance), np.nan)


def cohen_kappa(rater_a: Sequence[Hashable], rater_b: Sequence[Hashable]) -> float:
    """Cohen's κ = (p_observed − p_chance) / (1 − p_chance) for two raters on the same items.

    Labels are compared as text (1 and "1" are the same verdict). NaN when κ is undefined: no
    items, or both raters put every item in the one same category."""
    codes_a, codes_b, k = _codes(rater_a, rater_b)
    if codes_a.size == 0:
        return math.nan
    return float(_kappas(codes_a[None, :], codes_b[None, :], k)[0])


KAPPA_RESAMPLES = 2000
"""Bootstrap resamples of the κ interval (seeded: the same items give the same interval)."""


def cohen_kappa_ci(rater_a: Sequence[Hashable], rater_b: Sequence[Hashable], confidence: float = 0.95,
                   seed: int = 0, resamples: int = KAPPA_RESAMPLES) -> Estimate:
    """Cohen's κ with a seeded percentile-bootstrap interval over items (`Estimate.ci95` holds the interval at
    `confidence`).

    Why a bootstrap and not the analytic large-sample variance (Fleiss, Cohen & Everitt 1969): κ is bounded by 1
    and its sampling distribution is skewed when agreement is high (graders against humans: κ 0.8-0.95), where a
    symmetric normal interval runs past 1; resampling the items keeps the interval inside [-1, 1], needs no
    multi-category variance formula, and treats the items, not the raters, as the sample (the question the
    interval answers: would another set of answers graded the same way agree as well). Resamples in which κ is
    undefined (every item in one category) are dropped and counted in `method`. Below RELIABLE_N items the
    percentile bootstrap is too narrow, and the estimate says so."""
    codes_a, codes_b, k = _codes(rater_a, rater_b)
    n = len(codes_a)
    if n == 0:
        return Estimate(math.nan, (math.nan, math.nan), 0, math.nan, "none", warning="no items")
    value = float(_kappas(codes_a[None, :], codes_b[None, :], k)[0])
    draws = np.random.default_rng(seed).integers(0, n, size=(resamples, n))
    kappas = _kappas(codes_a[draws], codes_b[draws], k)
    defined = kappas[~np.isnan(kappas)]
    dropped = resamples - defined.size
    method = f"bootstrap percentile ({resamples} resamples over items, seed {seed}" + (
        f", {dropped} undefined dropped)" if dropped else ")")
    if defined.size == 0 or math.isnan(value):
        return Estimate(value, (math.nan, math.nan), n, math.nan, method,
                        warning="κ is undefined: both raters put every item in one category")
    alpha = 1.0 - confidence
    lo, hi = np.quantile(defined, [alpha / 2, 1 - alpha / 2])
    warning = None
    if n < RELIABLE_N:
        warning = f"n = {n} < {RELIABLE_N}: a percentile bootstrap over this few items is too narrow"
    return Estimate(value, (float(lo), float(hi)), n, float(defined.var(ddof=1)) if defined.size > 1 else 0.0,
                    method, warning=warning)


@dataclass(frozen=True)
class LabelAgreement:
    """How a rater agrees with a reference rater on one label, the label taken one against the rest."""

    label: str
    """The label (as text)."""

    support: int
    """Items the reference put in this label."""

    predicted: int
    """Items the rater put in this label."""

    agreed: int
    """Items both put in this label."""

    kappa: float
    """Cohen's κ of the two raters' yes/no verdicts on 'is it this label' (NaN when undefined)."""

    @property
    def recall(self) -> float:
        """Share of the reference's items of this label the rater also gave it (NaN with no support)."""
        return self.agreed / self.support if self.support else math.nan

    @property
    def precision(self) -> float:
        """Share of the rater's items of this label the reference also gave it (NaN when never predicted)."""
        return self.agreed / self.predicted if self.predicted else math.nan

    @property
    def f1(self) -> float:
        total = self.support + self.predicted
        return 2 * self.agreed / total if total else math.nan


def label_agreement(reference: Sequence[Hashable], rater: Sequence[Hashable],
                    labels: Sequence[Hashable] | None = None) -> dict[str, LabelAgreement]:
    """Per-label agreement of `rater` with `reference` (e.g. a grader with the human labels): counts, recall,
    precision, F1 and the one-vs-rest κ of each label; `labels` fixes which labels and their order (default:
    every label either rater used, sorted)."""
    if len(reference) != len(rater):
        raise ValueError(f"the raters judged different numbers of items ({len(reference)} vs {len(rater)})")
    ref, got = [str(x) for x in reference], [str(x) for x in rater]
    names = [str(x) for x in labels] if labels is not None else sorted(set(ref) | set(got))
    out = {}
    for name in names:
        ref_is, got_is = [r == name for r in ref], [g == name for g in got]
        out[name] = LabelAgreement(name, sum(ref_is), sum(got_is), sum(a and b for a, b in zip(ref_is, got_is)),
                                   cohen_kappa(ref_is, got_is))
    return out


def confusion_matrix(reference: Sequence[Hashable], rater: Sequence[Hashable],
                     labels: Sequence[Hashable]) -> np.ndarray:
    """Counts [i, j] of items the reference put in labels[i] and the rater in labels[j] (labels compared as text;
    an item with a label outside `labels` is not counted)."""
    if len(reference) != len(rater):
        raise ValueError(f"the raters judged different numbers of items ({len(reference)} vs {len(rater)})")
    index = {str(label): i for i, label in enumerate(labels)}
    matrix = np.zeros((len(labels), len(labels)), dtype=int)
    for r, g in zip(reference, rater):
        if str(r) in index and str(g) in index:
            matrix[index[str(r)], index[str(g)]] += 1
    return matrix
