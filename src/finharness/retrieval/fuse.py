"""Fusing the BM25 and dense rankings of the same candidates.

Default: reciprocal rank fusion (Cormack, Clarke & Büttcher, SIGIR 2009),
``score(d) = Σ_rankings 1 / (k + rank(d))`` with ranks from 1 and ``k = 60``, the paper's constant.
Only each ranking's top ``depth`` count; a candidate outside a ranking's top gets nothing from it. RRF
needs no score calibration, which BM25 (unbounded) and cosine (−1..1) lack.

Alternative: ``normalised score sum``, each ranking's scores min–max scaled to [0, 1] and added.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import numpy as np

RRF_K = 60
"""The RRF constant of Cormack et al. (2009)."""

FusionMethod = Literal["rrf", "minmax"]


def fuse(score_lists: Sequence[np.ndarray], method: FusionMethod = "rrf", depth: int = 200,
         k: int = RRF_K) -> np.ndarray:
    """One fused score per candidate from several aligned score arrays (higher is better).

    Candidates a ranking scores 0 or below (BM25: no query term) do not count as ranked by it.
    """
    if not score_lists:
        raise ValueError("nothing to fuse")
    fused = np.zeros(len(score_lists[0]), dtype=np.float64)
    for scores in score_lists:
        scores = np.asarray(scores, dtype=np.float64)
        if method == "rrf":
            top = np.argsort(-scores, kind="stable")[:depth]
            top = top[scores[top] > 0] if scores.min() >= 0 else top  # BM25 zeros are "not retrieved"
            fused[top] += 1.0 / (k + np.arange(1, len(top) + 1))
        elif method == "minmax":
            low, high = scores.min(), scores.max()
            fused += (scores - low) / (high - low) if high > low else 0.0
        else:
            raise ValueError(f"unknown fusion method {method!r}; use 'rrf' or 'minmax'")
    return fused
