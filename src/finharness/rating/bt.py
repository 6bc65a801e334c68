"""Bradley–Terry ratings by maximum likelihood, on the Elo scale.

P(a beats b) = σ(θ_a − θ_b) with natural-log strengths θ. A tie counts as half a win for each
side. The fit minimises the negative log-likelihood plus ½·l2·Σθ² with scipy's L-BFGS-B; the tiny
penalty (l2 = 1e-3 by default) keeps the estimate finite when a model never lost or never won, and
fixes the level when the comparison graph falls apart in pieces. With the usual thousands of
matches it moves ratings by far less than their intervals. Ratings are
init + scale/ln(base)·(θ − mean θ): the same odds as Elo (400 points = 10:1) with mean `init`.

Intervals: percentile bootstrap over matches (seeded). Unlike online Elo, the order of matches
does not matter.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np
from scipy.optimize import minimize
from scipy.special import expit, log_expit
from threadpoolctl import threadpool_limits

from .base import EncodedMatches, RatingScale, RatingTable, build_table, resample_indices
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


def bt_table(matches: Sequence[Match], config: BTConfig = BTConfig(), bootstrap: int = 1000,
             seed: int = 0) -> RatingTable:
    """Bradley–Terry ratings with bootstrap 95% intervals (`bootstrap` = 0 turns them off)."""
    encoded = EncodedMatches.of(matches)
    pairs = _Pairs.of(encoded)
    theta = _fit_strengths(pairs, *pairs.wins(encoded, np.arange(encoded.n)[None]), config.l2)[0]
    resampled = None
    if bootstrap > 0 and encoded.n:
        draws = resample_indices(encoded.n, bootstrap, seed)
        resampled = _to_elo_scale(_fit_strengths(pairs, *pairs.wins(encoded, draws), config.l2), config)
    return build_table("bt", encoded, _to_elo_scale(theta, config), resampled)


def bt_ratings(matches: Sequence[Match], config: BTConfig = BTConfig()) -> dict[str, float]:
    """Point estimates only."""
    return bt_table(matches, config, bootstrap=0).values()
