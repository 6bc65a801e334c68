"""Agreement between two rating tables.

UCFE validates its LLM judge by correlating benchmark ratings with human preference (Pearson
r = 0.78); `compare_ratings` computes that, plus Spearman and the mean absolute difference.
Agreement of two raters' verdicts item by item (Cohen's κ) is stats.agreement.cohen_kappa, re-exported
here as `rating.cohen_kappa`.
"""

from __future__ import annotations

import json
import math
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from ..stats.agreement import cohen_kappa as cohen_kappa  # re-exported: rating.cohen_kappa stays public
from ..util import finite_or_none


@dataclass(frozen=True)
class RatingAgreement:
    """How closely two rating tables agree on the models both contain."""

    models: tuple[str, ...]
    """Models rated in both tables (sorted); models in only one table are left out."""

    pearson: float
    """Pearson r of the ratings (NaN with fewer than 2 models or a constant table)."""

    pearson_p: float
    """Two-sided p-value of r (NaN with fewer than 3 models)."""

    spearman: float
    """Spearman ρ: agreement of the orderings."""

    spearman_p: float

    mae: float
    """Mean |rating_a − rating_b| in rating points (meaningful when both share a scale)."""

    only_in_a: tuple[str, ...] = ()
    only_in_b: tuple[str, ...] = ()

    @property
    def n(self) -> int:
        return len(self.models)

    def to_json(self) -> dict[str, Any]:
        num = finite_or_none
        return {"n": self.n, "models": list(self.models),
                "pearson": {"r": num(self.pearson), "p": num(self.pearson_p)},
                "spearman": {"rho": num(self.spearman), "p": num(self.spearman_p)},
                "mae": num(self.mae), "only_in_a": list(self.only_in_a),
                "only_in_b": list(self.only_in_b)}


def _correlation(test, x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    if len(x) < 2 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return math.nan, math.nan
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # scipy warns on n = 2; we blank the p-value ourselves
        result = test(x, y)
    return float(result.statistic), float(result.pvalue) if len(x) >= 3 else math.nan


def compare_ratings(a: Mapping[str, float], b: Mapping[str, float]) -> RatingAgreement:
    from scipy import stats  # here: cohen_kappa's users (the multiple-choice tasks) never load scipy.stats

    shared = tuple(sorted(set(a) & set(b)))
    x = np.array([a[m] for m in shared], dtype=float)
    y = np.array([b[m] for m in shared], dtype=float)
    pearson, pearson_p = _correlation(stats.pearsonr, x, y)
    spearman, spearman_p = _correlation(stats.spearmanr, x, y)
    mae = float(np.mean(np.abs(x - y))) if shared else math.nan
    return RatingAgreement(shared, pearson, pearson_p, spearman, spearman_p, mae,
                           tuple(sorted(set(a) - set(b))), tuple(sorted(set(b) - set(a))))


def load_rating_values(path: str | Path) -> dict[str, float]:
    """Overall ratings from a `rate --json` output, or from a flat ``{"model": rating}`` object
    (e.g. a human-preference table)."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as err:
        raise ValueError(f"{path}: cannot read ratings ({err.strerror or err})") from err
    except json.JSONDecodeError as err:
        raise ValueError(f"{path}:{err.lineno}: not valid JSON ({err.msg})") from err
    if isinstance(data, dict) and isinstance(data.get("overall"), dict):
        rows = data["overall"].get("ratings")
        if not isinstance(rows, dict):
            raise ValueError(f"{path}: 'overall' has no 'ratings' object; pass a `rate --json` output")
        values = {m: row.get("rating") if isinstance(row, dict) else None for m, row in rows.items()}
    elif isinstance(data, dict):
        values = dict(data)
    else:
        raise ValueError(f"{path}: expected a `rate --json` output or a {{\"model\": rating}} object")
    bad = [m for m, v in values.items() if isinstance(v, bool) or not isinstance(v, (int, float))]
    if bad:
        raise ValueError(f"{path}: no numeric rating for {', '.join(map(repr, bad[:5]))}; "
                         "pass a `rate --json` output or a {\"model\": rating} object")
    return {m: float(v) for m, v in values.items()}
