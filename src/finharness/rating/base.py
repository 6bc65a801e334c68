"""What Elo and Bradley–Terry share: matches as index arrays, the rating table, the bootstrap."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Mapping, Sequence

import numpy as np

from ..stats.ci import RELIABLE_N
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
class GapInterval:
    """A gap's interval computed from the likelihood rather than the bootstrap (bt.likelihood_gap_interval)."""

    ci95: tuple[float, float]
    """Bounds in rating points; ±inf where the matches do not bound the gap."""
    matches: float
    """Direct 0/1 matches that would carry the same information about the gap (from the Fisher information)."""
    effective_n: float
    """Trials the binomial interval was computed on: `matches`, scaled up where ties and soft outcomes vary
    less than 0/1 verdicts."""
    method: str
    """E.g. 'bt-likelihood clopper-pearson', 'bt-sandwich wilson'."""


@dataclass(frozen=True)
class RatingGap:
    """How far one model is rated above the next one down, with the gap's own interval (two overlapping
    rating intervals do not say whether the gap could be zero: the ratings move together)."""

    higher: str
    lower: str
    gap: float
    """higher's rating − lower's (point estimates; ≥ 0)."""
    ci95: tuple[float, float] | None
    """95% interval of the gap: the 2.5th and 97.5th percentiles over the bootstrap rounds, or the likelihood
    interval when few matches are behind the gap (`method`); None: bootstrap off."""
    method: str = "bootstrap"
    """'bt-likelihood clopper-pearson' / 'bt-likelihood wilson', 'bt-sandwich …' (bt.py), or 'bootstrap'."""
    warning: str | None = None
    """Why the interval is wide (few matches behind the gap), or None."""

    @property
    def tied(self) -> bool:
        """The interval contains 0: the matches do not order the two."""
        return self.ci95 is not None and self.ci95[0] <= 0.0 <= self.ci95[1]

    def to_json(self) -> dict[str, Any]:
        out = {"higher": self.higher, "lower": self.lower, "gap": finite_or_none(self.gap),
               "ci95": [finite_or_none(v) for v in self.ci95] if self.ci95 else None}
        if self.ci95 is not None:
            out.update(method=self.method, tied=self.tied)
        if self.warning:
            out["warning"] = self.warning
        return out


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


def build_table(method: str, encoded: EncodedMatches, point: np.ndarray, resampled: np.ndarray | None,
                gap_intervals: Mapping[tuple[int, int], GapInterval] | None = None) -> RatingTable:
    """Tally wins/ties/losses and attach percentile intervals from (rounds, models) resampled ratings; a gap
    between models (i, j) in `gap_intervals` takes that interval instead of the percentiles."""
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
        gap = RatingGap(encoded.models[i], encoded.models[j], float(point[i] - point[j]), None)
        if (i, j) in (gap_intervals or {}):
            interval = gap_intervals[(i, j)]  # type: ignore[index]
            warning = None
            if interval.matches < RELIABLE_N:
                warning = (f"{interval.matches:.1f} effective matches behind the gap (< {RELIABLE_N}): the interval "
                           "is wide because the matches are few")
            gap = replace(gap, ci95=interval.ci95, method=interval.method, warning=warning)
        elif resampled is not None:
            low, high = np.percentile(resampled[:, i] - resampled[:, j], [2.5, 97.5])
            gap = replace(gap, ci95=(float(low), float(high)))
        gaps.append(gap)
    return RatingTable(method, rows, encoded.n, 0 if resampled is None else len(resampled), tuple(gaps))
