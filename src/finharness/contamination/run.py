"""Probing a benchmark's items for one model and writing what was found: OUT/contamination.json.

`probe_samples` computes every asked probe of every item through the model's handle (and the reference model's),
`contamination_record` puts the items' scores together with the model's validations and, where a run of the
benchmark is at hand, the seen/unseen split of its per-sample scores (impact.py). `probe_run_folder` does both
for a run folder of a suite (suite/run.py, the suite's `contamination = true`) and writes the record beside its
results.json, where the scorecard reads it.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from ..core.store import sum_counts
from ..core.types import Sample
from ..data.io import atomic_write_text
from ..util import finite_json
from .evidence import MAX_TOKENS, ItemEvidence, default_probes, probe_items
from .impact import impact_json, row_impact
from .items import item_text
from .probes import PROBE_NAMES
from .validation import ProbeValidation, model_key, validations_for

RECORD = "contamination.json"
"""The file a probed run folder holds."""

REFERENCES: dict[str, str] = {"embedded:1.5b": "embedded"}
"""Model spec -> the smaller model of its family the reference probe compares with (Qwen2.5-Coder 1.5B -> 0.5B).
The 0.5B and SmolLM2-135M have no smaller sibling here, so they have no reference probe by default."""


def reference_for(spec: str) -> str | None:
    """The default reference model of a spec (its options after '?' ignored), or None."""
    return REFERENCES.get(spec.split("?", 1)[0])


def source_of(task: Any) -> tuple[str, str]:
    """(the benchmark's name, its split) as the guided-completion prompt names them."""
    settings = getattr(task, "settings", None)
    split = getattr(settings, "split", None) or "test"
    return str(getattr(task, "name", "the benchmark")), f"{split} split"


async def probe_samples(task: Any, samples: Sequence[Sample], model: Any, *, reference: Any = None,
                        probes: Sequence[str] | None = None, max_tokens: int = MAX_TOKENS,
                        on_item: Callable[[int, int], None] | None = None) -> list[ItemEvidence]:
    """Every probe of every sample's text (items.item_text) through `model`'s handle."""
    asked = tuple(probes) if probes is not None else default_probes(model.capabilities)
    if reference is None:
        asked = tuple(p for p in asked if p != "reference")
    benchmark, split = source_of(task)
    items = [item_text(s, task) for s in samples]
    return await probe_items(items, model, reference=reference, probes=asked, source=f"the {benchmark} benchmark",
                             split=split, max_tokens=max_tokens, on_item=on_item)


def evidence_json(e: ItemEvidence) -> dict[str, Any]:
    out = {"id": e.id, "tokens": e.tokens, "scores": dict(e.scores)}
    if e.truncated:
        out["truncated"] = True
    if e.errors:
        out["errors"] = dict(e.errors)
    if e.detail:
        out["detail"] = dict(e.detail)
    return out


def contamination_record(task_name: str, model_spec: str, identity: Mapping[str, Any], evidence: Sequence[ItemEvidence],
                         *, reference: str | None, probes: Sequence[str], per_sample: Mapping[str, float] | None,
                         run_dir: str | None = None, cost: Mapping[str, Any] | None = None,
                         validations: tuple[Mapping[str, ProbeValidation], str | None] | None = None,
                         samples: Sequence[Sample] = ()) -> dict[str, Any]:
    """contamination.json: the items' scores, the model's validations, the row's impact (docs/contamination.md);
    with the samples, the fresh-items split where they are dated (impact.date_split, at the model's release)."""
    from dataclasses import replace

    from .impact import date_split, item_dates
    from .split import CUTOFF, release_of

    key = model_key(identity)
    found, source = validations if validations is not None else validations_for(key)
    impact = row_impact(evidence, found, per_sample)
    dates = item_dates(samples)
    if dates and per_sample:
        released = release_of(model_spec)[1]
        impact = replace(impact, fresh=date_split(per_sample, dates, released or CUTOFF.isoformat()))
    return {
        "task": task_name, "model": model_spec, "model_key": key, "reference": reference, "probes": list(probes),
        "probe_names": {p: PROBE_NAMES[p] for p in probes},
        "validation": {"source": source, "probes": {name: finite_json(asdict(v)) for name, v in found.items()}},
        "impact": impact_json(impact), "run": run_dir, "cost": dict(cost or {}),
        "n_items": len(evidence), "items": [evidence_json(e) for e in evidence],
    }


def probe_cost(started: float, out_dir: Path, *handles: Any) -> dict[str, Any]:
    """What probing spent: this invocation's calls, tokens, cost (USD, None: unpriced) and `billed` by role, summed
    over the handles (the model's and its reference's, each opened for the probes alone; None skipped), and
    `cumulative`, the same over every invocation that wrote OUT_DIR's record (its earlier `cost` added), so a
    suite's usage and a resumed probe count what was spent before, as results.json's `cumulative` does."""
    now = sum_counts([h.counters.to_json() for h in handles if h is not None])
    now.update(invocations=1, wall_s=round(time.perf_counter() - started, 3))
    before = ((read_record(out_dir) or {}).get("cost") or {}).get("cumulative")
    return {**now, "cumulative": sum_counts([now, before] if isinstance(before, Mapping) else [now])}


def write_record(out_dir: Path, record: Mapping[str, Any]) -> Path:
    path = Path(out_dir) / RECORD
    atomic_write_text(path, json.dumps(finite_json(dict(record)), ensure_ascii=False, indent=1, allow_nan=False) + "\n")
    return path


def read_record(run_dir: Path) -> dict[str, Any] | None:
    """A folder's contamination.json, None when it has none (or it cannot be read)."""
    path = Path(run_dir) / RECORD
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def probe_run_folder(task: Any, samples: Sequence[Sample], model: Any, out_dir: Path, *, reference: Any = None,
                     per_sample: Mapping[str, float] | None = None, probes: Sequence[str] | None = None,
                     max_tokens: int = MAX_TOKENS) -> dict[str, Any]:
    """Probe `samples` through the handles, write OUT_DIR/contamination.json and return it. The handles' counters
    should be the probes' own (open them for this folder): the record's `cost` is what they counted."""
    started = time.perf_counter()
    asked = tuple(probes) if probes is not None else default_probes(model.capabilities)
    if reference is None:
        asked = tuple(p for p in asked if p != "reference")
    evidence = asyncio.run(probe_samples(task, samples, model, reference=reference, probes=asked,
                                         max_tokens=max_tokens))
    cost = probe_cost(started, out_dir, model, reference)
    record = contamination_record(task.name, model.spec, model.identity, evidence,
                                  reference=getattr(reference, "spec", None), probes=asked, per_sample=per_sample,
                                  run_dir=str(out_dir), cost=cost, samples=samples)
    write_record(out_dir, record)
    return record
