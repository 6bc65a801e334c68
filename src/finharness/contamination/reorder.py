"""The option-order split: a benchmark's published multiple-choice items against the same items with their options
in another order, for validating the log-likelihood probes on items rather than filings.

A published item (the question, its options as published, the answer) may have been trained on; the same item
with its options rotated by one has, as one text, most likely never been published (Oren et al. 2023,
"Proving test set contamination in black box language models", test a whole data set's published order the same
way). The two texts have the same words and tokens, so the split holds length, genre, topic and date the same by
construction; what differs is the order a memorising model would know.

Its confound is that published orders are not random: exam writers sort options (alphabetically, by number, "all
of the above" last), and a model that learned the convention prefers the published order of an item it never
saw. `sorted_options` marks the items whose options are already in ascending order (as text, or as numbers where
every option is one), and the split is measured again without them.

The statistic that matters here is paired: the share of items whose published text scores higher than its
reordered copy (ties half), the AUC of the matched-pair design, with the bounded mean's interval over items
(stats.mean_ci). The unpaired AUC of the two sides (stats.auc_ci) is given beside it; it mixes the between-item
spread in and so stays near 0.5 unless the order effect is large against it.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Sequence

from .items import LETTERS, ItemText, lettered

SPLIT = "option order"
"""The split's name in the validations file."""


@dataclass(frozen=True)
class ReorderedPair:
    """One item as published and with its options rotated by one."""

    published: ItemText
    reordered: ItemText
    sorted_options: bool
    """The published options are in ascending order already (the convention confound)."""


_NUMBER = re.compile(r"^[\s$€£(]*-?[\d,]*\.?\d+\s*%?[)\s.]*$")


def _as_number(text: str) -> float | None:
    if not _NUMBER.match(text):
        return None
    digits = re.sub(r"[^\d.\-]", "", text)
    try:
        return float(digits)
    except ValueError:
        return None


def sorted_options(options: Sequence[str]) -> bool:
    """The options are in ascending order: as numbers where every one reads as a number, else as text."""
    numbers = [_as_number(o) for o in options]
    if all(n is not None for n in numbers):
        return all(a <= b for a, b in zip(numbers, numbers[1:]))  # type: ignore[operator]
    keys = [o.strip().lower() for o in options]
    return keys == sorted(keys)


def reordered(item: ItemText) -> ItemText:
    """The item with its options rotated by one (B, C, ..., A) and its text rebuilt from the same parts; the answer
    line names the answer's text, so it stays as it was."""
    order = [*range(1, len(item.options)), 0]
    shown = [item.options[i] for i in order]
    parts = dict(item.parts)
    parts["options"] = lettered(shown)
    answer = LETTERS[order.index(LETTERS.index(item.answer))] if item.answer else None
    return ItemText(f"{item.id}#reordered", "\n".join(parts.values()).strip(), item.question, tuple(shown), answer,
                    parts)


def option_pairs(items: Sequence[ItemText], limit: int) -> list[ReorderedPair]:
    """The first `limit` items with at least two distinct options that went into the text as lettered lines."""
    out = []
    for item in items:
        if len(out) >= limit:
            break
        if len(set(item.options)) < 2 or "options" not in item.parts:
            continue
        out.append(ReorderedPair(item, reordered(item), sorted_options(item.options)))
    return out


def paired_validation(pairs: Sequence[ReorderedPair], published: dict[str, float | None],
                      reordered_: dict[str, float | None], family: int = 1) -> dict[str, Any]:
    """One probe (of `family` validated together) on the split: the paired AUC (published scores higher, ties
    half) with its interval, the unpaired AUC with DeLong's, both again on the items whose options are not sorted,
    and the status the paired interval at validation.family_confidence(family) gives (validation.status_of)."""
    from ..stats import mean_ci
    from ..stats.auc import auc_ci
    from .validation import family_confidence, status_of

    def measure(subset: Sequence[ReorderedPair]) -> dict[str, Any]:
        wins, pos, neg = [], [], []
        for pair in subset:
            a, b = published.get(pair.published.id), reordered_.get(pair.reordered.id)
            if a is None or b is None or not (math.isfinite(a) and math.isfinite(b)):
                continue
            wins.append(1.0 if a > b else 0.5 if a == b else 0.0)
            pos.append(a)
            neg.append(b)
        paired = mean_ci(wins, bounds=(0.0, 1.0))
        unpaired = auc_ci(pos, neg)
        status_ci = list(mean_ci(wins, confidence=family_confidence(family), bounds=(0.0, 1.0)).ci95) \
            if wins and family > 1 else None
        return {"paired_auc": paired.value, "paired_ci95": list(paired.ci95), "paired_method": paired.method,
                "auc": unpaired.value, "ci95": list(unpaired.ci95), "method": unpaired.method, "n_items": len(wins),
                "status_ci": status_ci,
                "status": status_of(status_ci or paired.ci95) if wins else status_of((math.nan, math.nan))}

    out = {**measure(pairs), "family": max(1, family)}
    unsorted = [p for p in pairs if not p.sorted_options]
    out["controls"] = {"options not sorted": measure(unsorted)}
    out["sorted_share"] = (len(pairs) - len(unsorted)) / len(pairs) if pairs else None
    return out
