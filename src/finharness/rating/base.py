"""What Elo and Bradley–Terry share: matches as index arrays, the rating table, the bootstrap."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from ..util import finite_or_none
from .matches import Match


@dataclass(frozen=True)
class RatingScale:
    """How strengths map to rating points: P(a beats b) = 1 / (1 + base^((R_b − R_a) / scale))."""

    scale: float = 400.0
    """Rating points per factor `base` in the odds (400, as in chess and UCFE)."""

    base: float = 10.0
    """Base of the odds (10)."""

    init: float = 1000.0
    """Elo: every model's starting rating. Bradley–Terry: the mean rating the fit is anchored to."""


@dataclass(frozen=True)
class EncodedMatches:
    """Matches as integer arrays, so ratings can be computed (and bootstrapped) with numpy."""

    models: tuple[str, ...]
    """Every model that plays, sorted; index i in the arrays means models[i]."""

    a: np.ndarray
    """Index of model_a per match."""

    b: np.ndarray
    """Index of model_b per match."""

    score_a: np.ndarray
    """What model_a scored per match: 1, ½ or 0, or a soft outcome in [0, 1] (Match.score_a)."""

    hard_score_a: np.ndarray
    """1, ½ or 0 per match by the hard verdicts, for the W/T/L counts."""

    @classmethod
    def of(cls, matches: Sequence[Match]) -> "EncodedMatches":
        models = tuple(sorted({m.model_a for m in matches} | {m.model_b for m in matches}))
        index = {name: i for i, name in enumerate(models)}
        return cls(models,
                   np.fromiter((index[m.model_a] for m in matches), dtype=np.intp, count=len(matches)),
                   np.fromiter((index[m.model_b] for m in matches), dtype=np.intp, count=len(matches)),
                   np.fromiter((m.score_a for m in matches), dtype=float, count=len(matches)),
                   np.fromiter((m.hard_score_a for m in matches), dtype=float, count=len(matches)))

    @property
    def n(self) -> int:
        return int(self.a.size)


@dataclass(frozen=True)
class ModelRating:
    """One model's line in a rating table."""

    rating: float
    """Point estimate on the Elo scale."""

    ci95: tuple[float, float] | None
    """2.5th and 97.5th bootstrap percentiles (None when the bootstrap was off)."""

    wins: int
    ties: int
    losses: int

    @property
    def matches(self) -> int:
        return self.wins + self.ties + self.losses

    def to_json(self) -> dict[str, Any]:
        return {"rating": finite_or_none(self.rating),
                "ci95": [finite_or_none(v) for v in self.ci95] if self.ci95 else None,
                "wins": self.wins, "ties": self.ties, "losses": self.losses}


@dataclass(frozen=True)
class RatingGap:
    """How far one model is rated above the next one down, with the gap's own bootstrap interval (two
    overlapping rating intervals do not say whether the gap could be zero: the ratings move together)."""

    higher: str
    lower: str
    gap: float
    """higher's rating − lower's (point estimates; ≥ 0)."""
    ci95: tuple[float, float] | None
    """2.5th and 97.5th percentiles of the gap over the same bootstrap rounds (None: bootstrap off)."""

    def to_json(self) -> dict[str, Any]:
        return {"higher": self.higher, "lower": self.lower, "gap": finite_or_none(self.gap),
                "ci95": [finite_or_none(v) for v in self.ci95] if self.ci95 else None}


@dataclass(frozen=True)
class RatingTable:
    """Ratings of every model that played in one set of matches."""

    method: str
    """``elo`` or ``bt``."""

    ratings: dict[str, ModelRating]
    """Per model, best rating first."""

    n_matches: int
    """Matches the table was computed from."""

    bootstrap_rounds: int = 0
    """Resamples behind the intervals (0: no intervals)."""

    gaps: tuple[RatingGap, ...] = ()
    """Each model against the next one down the table, in table order."""

    def values(self) -> dict[str, float]:
        return {name: r.rating for name, r in self.ratings.items()}

    def to_json(self) -> dict[str, Any]:
        return {"ratings": {name: r.to_json() for name, r in self.ratings.items()},
                "gaps": [g.to_json() for g in self.gaps],
                "n_matches": self.n_matches, "bootstrap_rounds": self.bootstrap_rounds}


def resample_indices(n: int, rounds: int, seed: int) -> np.ndarray:
    """(rounds, n) match indices drawn with replacement; each row is in the order drawn (random)."""
    return np.random.default_rng(seed).integers(0, n, size=(rounds, n))


def build_table(method: str, encoded: EncodedMatches, point: np.ndarray,
                resampled: np.ndarray | None) -> RatingTable:
    """Tally wins/ties/losses and attach percentile intervals from (rounds, models) resampled ratings."""
    hard = encoded.hard_score_a
    wins = np.bincount(encoded.a, hard == 1, len(encoded.models)) + \
        np.bincount(encoded.b, hard == 0, len(encoded.models))
    ties = np.bincount(encoded.a, hard == 0.5, len(encoded.models)) + \
        np.bincount(encoded.b, hard == 0.5, len(encoded.models))
    played = np.bincount(encoded.a, minlength=len(encoded.models)) + \
        np.bincount(encoded.b, minlength=len(encoded.models))
    bounds = np.percentile(resampled, [2.5, 97.5], axis=0) if resampled is not None else None
    rows = {}
    order = sorted(range(len(encoded.models)), key=lambda i: -point[i])
    for i in order:
        ci = (float(bounds[0, i]), float(bounds[1, i])) if bounds is not None else None
        rows[encoded.models[i]] = ModelRating(float(point[i]), ci, int(wins[i]), int(ties[i]),
                                              int(played[i] - wins[i] - ties[i]))
    gaps = []
    for i, j in zip(order, order[1:]):
        ci = None
        if resampled is not None:
            low, high = np.percentile(resampled[:, i] - resampled[:, j], [2.5, 97.5])
            ci = (float(low), float(high))
        gaps.append(RatingGap(encoded.models[i], encoded.models[j], float(point[i] - point[j]), ci))
    return RatingTable(method, rows, encoded.n, 0 if resampled is None else len(resampled), tuple(gaps))
