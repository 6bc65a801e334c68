"""Bradley–Terry ratings by maximum likelihood, on the Elo scale.

P(a beats b) = σ(θ_a − θ_b) with natural-log strengths θ. A tie counts as half a win for each
side. The fit minimises the negative log-likelihood plus ½·l2·Σθ² with scipy's L-BFGS-B; the tiny
penalty (l2 = 1e-3 by default) keeps the estimate finite when a model never lost or never won, and
fixes the level when the comparison graph falls apart in pieces. With the usual thousands of
matches it moves ratings by far less than their intervals. Ratings are
init + scale/ln(base)·(θ − mean θ): the same odds as Elo (400 points = 10:1) with mean `init`.

Intervals: a model's rating gets the percentile bootstrap over matches (seeded); unlike online Elo,
the order of matches does not matter. The gap between neighbours in the table gets a likelihood-based
interval at every n (the bootstrap of a handful of matches is far too narrow, and slightly narrow even
at hundreds): the Fisher information at the fit gives the gap's variance and from it the number of
direct 0/1 matches n_eff = 1 / (var·p(1 − p)) that carry as much; the win probability p = σ(gap) gets
the binomial interval on n_eff trials (stats.ci.binomial_ci: Clopper–Pearson below 30), mapped back
to rating points. With two models and 0/1 verdicts this is exactly that interval of the win share.
Ties and soft outcomes vary less than 0/1 verdicts: there n_eff is scaled by model / sandwich
variance (HC1-corrected), with Korn–Graubard's (z / t)² for having estimated it, as stats.ci does
for bounded means; a few soft verdicts near ½ therefore still give a wide interval.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist
from typing import Sequence

import numpy as np
from scipy.optimize import minimize
from scipy.special import expit, log_expit
from threadpoolctl import threadpool_limits

from ..stats.ci import binomial_ci
from .base import EncodedMatches, GapInterval, RatingScale, RatingTable, build_table, resample_indices
from .matches import Match


@dataclass(frozen=True)
class BTConfig(RatingScale):
    """Scale and anchor as Elo's; `init` is the mean rating."""

    l2: float = 1e-3
    """Ridge penalty on the natural-log strengths; only there to keep the optimum finite."""


@dataclass(frozen=True)
class _Pairs:
    """Matches folded into distinct (a, b) pairs: the likelihood depends on nothing else."""

    incidence: np.ndarray
    """(pairs, models): +1 at a, −1 at b, so θ @ incidence.T is θ_a − θ_b per pair."""

    pair_of_match: np.ndarray
    """Which pair each match belongs to."""

    @classmethod
    def of(cls, encoded: EncodedMatches) -> "_Pairs":
        pairs, pair_of_match = np.unique(np.stack([encoded.a, encoded.b], axis=1), axis=0,
                                         return_inverse=True)
        incidence = np.zeros((len(pairs), len(encoded.models)))
        incidence[np.arange(len(pairs)), pairs[:, 0]] = 1.0
        incidence[np.arange(len(pairs)), pairs[:, 1]] = -1.0
        return cls(incidence, pair_of_match.ravel())

    def wins(self, encoded: EncodedMatches, draws: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(a's wins, b's wins) per (round, pair) when round r uses the matches in draws[r];
        ties count ½ to each side."""
        n_pairs = len(self.incidence)
        wins_a = np.stack([np.bincount(self.pair_of_match[row], encoded.score_a[row], n_pairs)
                           for row in draws])
        played = np.stack([np.bincount(self.pair_of_match[row], minlength=n_pairs) for row in draws])
        return wins_a, played - wins_a


def _fit_strengths(pairs: _Pairs, wins_a: np.ndarray, wins_b: np.ndarray, l2: float) -> np.ndarray:
    """Penalised maximum-likelihood θ, (rounds, models), for every row of wins at once.

    The rounds are independent, so the summed objective is separable and one L-BFGS-B run solves
    them all together (one vectorised pass instead of a Python call per bootstrap round)."""
    rounds, n_models = wins_a.shape[0], pairs.incidence.shape[1]

    def objective(flat: np.ndarray) -> tuple[float, np.ndarray]:
        theta = flat.reshape(rounds, n_models)
        diff = theta @ pairs.incidence.T
        nll = -float(np.sum(wins_a * log_expit(diff) + wins_b * log_expit(-diff)))
        # d nll / d diff = (wins_a + wins_b)·σ(diff) − wins_a
        slope = (wins_a + wins_b) * expit(diff) - wins_a
        grad = slope @ pairs.incidence + l2 * theta
        return nll + 0.5 * l2 * float(np.sum(theta * theta)), grad.ravel()

    # ftol ~0: the summed objective is large, so a relative-decrease stop would end too early;
    # stop on the gradient (in units of matches) instead.
    # One BLAS thread: the work is many tiny calls, where OpenBLAS's thread start-up dominated
    # (10× slower on a 2-core machine).
    with threadpool_limits(limits=1, user_api="blas"):
        result = minimize(objective, np.zeros(rounds * n_models), jac=True, method="L-BFGS-B",
                          options={"maxiter": 10_000, "ftol": 1e-15, "gtol": 1e-7})
    # L-BFGS-B may report a line-search "failure" at an optimum it cannot improve; only a
    # non-finite answer is an error.
    if not np.all(np.isfinite(result.x)):
        raise RuntimeError(f"Bradley–Terry fit failed: {result.message}")
    return result.x.reshape(rounds, n_models)


def _to_elo_scale(theta: np.ndarray, config: BTConfig) -> np.ndarray:
    return config.init + config.scale / math.log(config.base) * (theta - theta.mean(axis=-1, keepdims=True))


def fit_strengths(encoded: EncodedMatches, l2: float = BTConfig.l2) -> np.ndarray:
    """Penalised maximum-likelihood natural-log strengths of every model (encoded.models order)."""
    pairs = _Pairs.of(encoded)
    return _fit_strengths(pairs, *pairs.wins(encoded, np.arange(encoded.n)[None]), l2)[0]


def likelihood_gap_interval(encoded: EncodedMatches, theta: np.ndarray, higher: int, lower: int,
                            scale: RatingScale, confidence: float = 0.95) -> GapInterval:
    """The strength gap θ_higher − θ_lower in rating points with its likelihood-based interval (module
    docstring); the bounds are ±inf where the matches do not bound the gap (e.g. an unbeaten model)."""
    points = scale.scale / math.log(scale.base)
    diff = theta[encoded.a] - theta[encoded.b]
    expected = expit(diff)
    n_models = len(encoded.models)

    def information(weight: np.ndarray) -> np.ndarray:
        """Σ_m weight_m·(e_a − e_b)(e_a − e_b)ᵀ over the matches."""
        out = np.zeros((n_models, n_models))
        np.add.at(out, (encoded.a, encoded.a), weight)
        np.add.at(out, (encoded.b, encoded.b), weight)
        np.add.at(out, (encoded.a, encoded.b), -weight)
        np.add.at(out, (encoded.b, encoded.a), -weight)
        return out

    fisher = information(expected * (1 - expected))  # what one 0/1 match carries about θ_a − θ_b
    contrast = np.zeros(n_models)
    contrast[higher], contrast[lower] = 1.0, -1.0
    solved = np.linalg.lstsq(fisher, contrast, rcond=None)[0]
    gap = float(theta[higher] - theta[lower])
    p = float(expit(gap))
    model_variance = float(contrast @ solved)
    if not np.allclose(fisher @ solved, contrast, atol=1e-8) or not model_variance > 0 or p * (1 - p) == 0:
        return GapInterval((-math.inf, math.inf), 0.0, 0.0, "bt-likelihood")  # not connected by matches
    matches = effective_n = 1.0 / (model_variance * p * (1 - p))
    method = "bt-likelihood"
    residual = encoded.score_a - expected
    hard = bool(np.all(np.isin(encoded.score_a, (0.0, 1.0))))
    if not hard and float(np.max(np.abs(residual))) > 1e-9:
        # ties and soft outcomes vary less than 0/1 verdicts: the sandwich variance says by how much, with
        # Korn–Graubard's t correction for estimating it (as stats.ci's bounded means)
        sandwich = float(solved @ information(residual * residual) @ solved)
        free = n_models - 1  # strengths fitted: residuals are that many degrees of freedom short (HC1)
        sandwich *= encoded.n / (encoded.n - free) if encoded.n > free else math.inf
        if 0 < sandwich < math.inf:
            from scipy.special import stdtrit

            df = max(effective_n - 1.0, 1.0)
            t = float(stdtrit(df, 0.5 + confidence / 2))
            z = NormalDist().inv_cdf(0.5 + confidence / 2)
            effective_n *= model_variance / sandwich * (z / t) ** 2
            method = "bt-sandwich"
    (low, high), binomial = binomial_ci(p * effective_n, effective_n, confidence)

    def to_points(q: float) -> float:
        return -math.inf if q <= 0 else math.inf if q >= 1 else points * math.log(q / (1 - q))

    return GapInterval((to_points(low), to_points(high)), matches, effective_n, f"{method} {binomial}")


def bt_table(matches: Sequence[Match], config: BTConfig = BTConfig(), bootstrap: int = 1000,
             seed: int = 0) -> RatingTable:
    """Bradley–Terry ratings with bootstrap 95% intervals (`bootstrap` = 0 turns them off); each gap between
    neighbours with the likelihood interval while few matches are behind it (module docstring)."""
    encoded = EncodedMatches.of(matches)
    pairs = _Pairs.of(encoded)
    theta = _fit_strengths(pairs, *pairs.wins(encoded, np.arange(encoded.n)[None]), config.l2)[0]
    resampled = None
    if bootstrap > 0 and encoded.n:
        draws = resample_indices(encoded.n, bootstrap, seed)
        resampled = _to_elo_scale(_fit_strengths(pairs, *pairs.wins(encoded, draws), config.l2), config)
    point = _to_elo_scale(theta, config)
    gaps = gap_intervals(encoded, theta, point, config) if resampled is not None else None
    return build_table("bt", encoded, point, resampled, gaps)


def gap_intervals(encoded: EncodedMatches, theta: np.ndarray, point: np.ndarray,
                  scale: RatingScale) -> dict[tuple[int, int], GapInterval]:
    """The likelihood interval of each gap between neighbours in `point`'s order (best first)."""
    order = sorted(range(len(encoded.models)), key=lambda i: -point[i])
    return {(i, j): likelihood_gap_interval(encoded, theta, i, j, scale) for i, j in zip(order, order[1:])}


def bt_ratings(matches: Sequence[Match], config: BTConfig = BTConfig()) -> dict[str, float]:
    """Point estimates only."""
    return bt_table(matches, config, bootstrap=0).values()
