"""Online Elo, as UCFE rates its models (eval_elo.py: K = 4, scale 400, base 10, start 1000).

For each match in file order, with E_a = 1 / (1 + base^((R_b − R_a) / scale)) and S_a ∈ {1, ½, 0}:
R_a += K·(S_a − E_a) and R_b −= K·(S_a − E_a). Online Elo depends on the order of the matches.

Note on the official script: `evaluate_two_models` judges one model pair's items of a task in a
process pool, each from the same pre-task ratings, then keeps only the last item's new ratings, so
of each (pair, task) batch only one verdict moves the ratings. Here every match updates the ratings
in turn, which is what the paper describes.

Intervals: Chatbot Arena's bootstrap. Each round draws n matches with replacement and applies them
in the order drawn, i.e. a random order, so the interval covers both which verdicts were sampled
and the order they came in. The point estimate keeps file order, so with a small K (ratings not
yet converged) it can lie outside its own interval; Bradley–Terry (bt.py) has no order effect.
With few matches behind a gap (fewer than bt.GAP_BOOTSTRAP_MIN effective matches) Elo has not
converged: after n matches K = 4 has moved the ratings by at most about 4·n points, so the bootstrap
of Elo's own gap says how far Elo got, not how far apart the models are. Such a gap gets the
Bradley–Terry likelihood interval of the strength gap instead (same scale); Elo's point, shrunk
towards 0, may lie inside it far from its middle.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np
from scipy.special import expit

from .base import EncodedMatches, RatingScale, RatingTable, build_table, resample_indices
from .bt import fit_strengths, gap_intervals
from .matches import Match

_STEPS_PER_BLOCK = 512
"""Matches whose indices are prepared at once: bounds memory to 3·512·rounds numbers."""


@dataclass(frozen=True)
class EloConfig(RatingScale):
    """UCFE's settings by default."""

    k: float = 4.0
    """Largest change one match can make to a rating."""


def run_elo(encoded: EncodedMatches, order: np.ndarray, config: EloConfig = EloConfig()) -> np.ndarray:
    """Ratings (rounds, models) after applying, per row of `order`, the matches it indexes, in turn.

    All rows advance together, one match per step, so 1000 bootstrap rounds cost about as much as
    one pass in Python. The rows' ratings live in one flat array; a step touches one a and one b
    per row, so the fancy-indexed updates never collide."""
    order = np.atleast_2d(order)
    n_rounds, n_models = order.shape[0], len(encoded.models)
    ratings = np.full(n_rounds * n_models, float(config.init))
    row_offset = np.arange(n_rounds)[:, None] * n_models
    # E_a = 1 / (1 + base^((R_b − R_a)/scale)) = expit((R_a − R_b)·ln(base)/scale)
    logit_per_point = math.log(config.base) / config.scale
    for start in range(0, order.shape[1], _STEPS_PER_BLOCK):
        block = order[:, start:start + _STEPS_PER_BLOCK]
        # (steps, rounds), contiguous per step
        flat_a = np.ascontiguousarray((encoded.a[block] + row_offset).T)
        flat_b = np.ascontiguousarray((encoded.b[block] + row_offset).T)
        score_a = np.ascontiguousarray(encoded.score_a[block].T)
        for a, b, s in zip(flat_a, flat_b, score_a):
            delta = config.k * (s - expit(logit_per_point * (ratings[a] - ratings[b])))
            ratings[a] += delta
            ratings[b] -= delta
    return ratings.reshape(n_rounds, n_models)


def elo_ratings(matches: Sequence[Match], config: EloConfig = EloConfig()) -> dict[str, float]:
    """Final ratings after the matches in the given order."""
    encoded = EncodedMatches.of(matches)
    final = run_elo(encoded, np.arange(encoded.n), config)[0]
    return dict(zip(encoded.models, final.tolist()))


def elo_table(matches: Sequence[Match], config: EloConfig = EloConfig(), bootstrap: int = 1000,
              seed: int = 0) -> RatingTable:
    """Elo in file order, with bootstrap 95% intervals (`bootstrap` = 0 turns them off); a gap with few
    matches behind it gets the Bradley–Terry likelihood interval of the strength gap (module docstring)."""
    encoded = EncodedMatches.of(matches)
    point = run_elo(encoded, np.arange(encoded.n), config)[0]
    resampled = run_elo(encoded, resample_indices(encoded.n, bootstrap, seed), config) \
        if bootstrap > 0 and encoded.n else None
    gaps = gap_intervals(encoded, fit_strengths(encoded), point, config) if resampled is not None else None
    return build_table("elo", encoded, point, resampled, gaps)
