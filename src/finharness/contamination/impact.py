"""What membership evidence does to a benchmark's score: the share of items above a validated probe's threshold,
and the score on the likely-seen items beside the score on the others.

The probe used for a row is the validated one (status `separates` on this model, read at the family-wise level:
validation.py) with the highest lower AUC bound among those the items were probed with; without one the row says "no evidence either way" and shows no
share. The likely-seen and likely-unseen items are different items, so their difference is a difference of two
groups (stats.group_difference, MOVER over each group's own interval), not a paired one: it says whether the
model scores differently on the items it likely saw, not by how much having seen them raised the score (harder
items may also be rarer on the web). Where items carry a date, `date_split` compares the items dated after the
model's release (fresh: it cannot have seen them) with the older ones, again two groups of different items.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from ..stats import Estimate, GroupDifference, group_difference, proportion_ci
from ..util import finite_json
from .evidence import ItemEvidence
from .validation import EVIDENCE, FPR, NO_EVIDENCE, ProbeValidation


@dataclass(frozen=True)
class RowImpact:
    """One benchmark row's contamination figures for one model."""

    probe: str | None
    """The validated probe used (None: none separates on this model)."""

    status: str
    """'separates' with a probe; else 'no evidence either way' or 'not validated' (no validation for the model)."""

    n_items: int
    """Items with a score of the probe (all probed items when no probe is used)."""

    above: int = 0
    """Items above the probe's threshold: likely seen."""

    share: Estimate | None = None
    """above / n_items with its interval; to be read against `fpr`, the share of unseen text above it."""

    fpr: float | None = None
    """The validated share of unseen texts above the threshold (about FPR)."""

    threshold: float | None = None
    auc: float | None = None
    auc_ci95: tuple[float, float] | None = None

    seen: Estimate | None = None
    """The benchmark's score on the likely-seen items."""

    unseen: Estimate | None = None
    """Its score on the other items."""

    difference: GroupDifference | None = None
    """seen − unseen with its interval (two groups of different items)."""

    notes: tuple[str, ...] = ()

    fresh: Mapping[str, Any] | None = None
    """Where items carry a date (a filing's, a question's as-of day): the score on the items dated after the model's
    release (fresh: it cannot have seen them) beside the older ones, with their difference (date_split)."""


def best_probe(validations: Mapping[str, ProbeValidation], available: Sequence[str]) -> ProbeValidation | None:
    """The separating validation with the highest lower AUC bound among the `available` probes."""
    usable = [v for name, v in validations.items() if name in available and v.status == EVIDENCE
              and v.threshold is not None]
    return max(usable, key=lambda v: v.ci95[0], default=None)


def row_impact(evidence: Sequence[ItemEvidence], validations: Mapping[str, ProbeValidation],
               per_sample: Mapping[str, float] | None = None) -> RowImpact:
    """The row's figures (module docstring) from its items' evidence, the model's validations and, where a run of
    the benchmark is at hand, its per-sample scores by sample id."""
    available = sorted({p for e in evidence for p, v in e.scores.items() if v is not None})
    if not validations:
        return RowImpact(None, "not validated", len(evidence), notes=(
            "no validation of the probes on this model: run `finharness contamination --validate --model SPEC` "
            "first; until then the probes' scores are listed but no item is called likely seen",))
    chosen = best_probe(validations, available)
    if chosen is None:
        said = ", ".join(f"{name} AUC {v.auc:.2f} [{v.ci95[0]:.2f}, {v.ci95[1]:.2f}]" + (
                         f", [{v.status_ci[0]:.2f}, {v.status_ci[1]:.2f}] at the family-wise level" if v.status_ci
                         else "") for name, v in validations.items() if name in available)
        return RowImpact(None, NO_EVIDENCE, len(evidence), notes=(
            f"no probe separates seen from unseen text on this model ({said or 'none validated of those run'}): "
            "no evidence either way, which is not evidence that the items are unseen",))
    scored = [(e.id, e.scores[chosen.probe]) for e in evidence if e.scores.get(chosen.probe) is not None]
    above_ids = {i for i, v in scored if v > chosen.threshold}  # type: ignore[operator]
    share = proportion_ci(len(above_ids), len(scored)) if scored else None
    impact = RowImpact(chosen.probe, EVIDENCE, len(scored), len(above_ids), share, chosen.fpr, chosen.threshold,
                       chosen.auc, chosen.ci95)
    family = f", one of {chosen.family} probes validated together" if chosen.family > 1 else ""
    notes = [f"{chosen.probe}: validated AUC {chosen.auc:.3f} [{chosen.ci95[0]:.3f}, {chosen.ci95[1]:.3f}] on "
             f"{chosen.split} (n {chosen.n_seen} + {chosen.n_unseen}{family}); about {100 * (chosen.fpr or FPR):.0f}% of "
             "unseen text also scores above the threshold, so a share near that is no sign of contamination"]
    if per_sample:
        seen = [per_sample[i] for i, _ in scored if i in above_ids and i in per_sample]
        unseen = [per_sample[i] for i, _ in scored if i not in above_ids and i in per_sample]
        bounds = (0.0, 1.0) if all(0.0 <= v <= 1.0 for v in per_sample.values()) else None
        if seen and unseen:
            diff = group_difference(seen, unseen, bounds=bounds)
            impact = _with(impact, seen=diff.first, unseen=diff.second, difference=diff)
        else:
            notes.append("the likely-seen or the likely-unseen group is empty: no score difference")
    return _with(impact, notes=tuple(notes))


DATE_KEYS: tuple[str, ...] = ("filing_date", "as_of", "date")
"""Sample metadata that dates an item."""


def item_dates(samples: Sequence[Any]) -> dict[str, str]:
    """Sample id -> its date (ISO text) where the metadata has one of DATE_KEYS."""
    out = {}
    for sample in samples:
        value = next((sample.metadata.get(k) for k in DATE_KEYS if sample.metadata.get(k)), None)
        if isinstance(value, str) and len(value) >= 10:
            out[sample.id] = value[:10]
    return out


def date_split(per_sample: Mapping[str, float], dates: Mapping[str, str], cutoff: str) -> dict[str, Any] | None:
    """The fresh-items figures: the score of the items dated on or after `cutoff` (ISO day) against the older
    ones; None unless both groups have items with scores."""
    fresh = [per_sample[i] for i, d in dates.items() if i in per_sample and d >= cutoff]
    older = [per_sample[i] for i, d in dates.items() if i in per_sample and d < cutoff]
    if not fresh or not older:
        return {"cutoff": cutoff, "fresh_n": len(fresh), "older_n": len(older)} if fresh or older else None
    bounds = (0.0, 1.0) if all(0.0 <= v <= 1.0 for v in fresh + older) else None
    diff = group_difference(fresh, older, bounds=bounds)
    return {"cutoff": cutoff, "fresh": diff.first, "older": diff.second, "difference": diff,
            "fresh_n": len(fresh), "older_n": len(older)}


def _with(impact: RowImpact, **changes: Any) -> RowImpact:
    from dataclasses import replace

    return replace(impact, **changes)


def impact_json(impact: RowImpact) -> dict[str, Any]:
    """RowImpact as plain JSON values (NaN as null)."""
    from dataclasses import asdict

    return finite_json(asdict(impact))
