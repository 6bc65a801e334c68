"""Agreement between two raters on the same items: Cohen's κ.

Used wherever two readings of the same items are compared: multiple-choice methods against each other
(benchmarks/mc_methods.py), an LLM judge's verdicts or scores against a human's (ui/exports.py,
FinTradeBench's judge analysis). numpy only, so a task that reports κ does not load scipy.
"""

from __future__ import annotations

import math
from typing import Hashable, Sequence

import numpy as np


def cohen_kappa(rater_a: Sequence[Hashable], rater_b: Sequence[Hashable]) -> float:
    """Cohen's κ = (p_observed − p_chance) / (1 − p_chance) for two raters on the same items.

    Labels are compared as text (1 and "1" are the same verdict). NaN when κ is undefined: no
    items, or both raters put every item in the one same category."""
    if len(rater_a) != len(rater_b):
        raise ValueError(f"the raters judged different numbers of items ({len(rater_a)} vs "
                         f"{len(rater_b)}); pass their verdicts on the same items, in the same order")
    if not rater_a:
        return math.nan
    labels, codes = np.unique(np.array([*map(str, rater_a), *map(str, rater_b)]), return_inverse=True)
    codes_a, codes_b = codes[:len(rater_a)], codes[len(rater_a):]
    observed = float(np.mean(codes_a == codes_b))
    share_a = np.bincount(codes_a, minlength=len(labels)) / len(rater_a)
    share_b = np.bincount(codes_b, minlength=len(labels)) / len(rater_b)
    chance = float(share_a @ share_b)
    return math.nan if chance == 1.0 else (observed - chance) / (1.0 - chance)
