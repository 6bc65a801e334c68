"""A probe is shown only with its measured power: its AUC on texts a model had the chance to see against texts
it cannot have seen, per model, and a threshold read off the unseen side.

`validate_probe` turns the two sides' scores into a ProbeValidation: the AUC with its DeLong interval
(stats.auc_ci), a status from an interval alone, and the threshold above which FPR (5%) of the unseen texts
score. Only a probe whose interval lies wholly above 0.5 is used to call items likely seen; an interval that holds
0.5 is "no evidence either way" (never "clean": the probe cannot tell on this model), and one wholly below 0.5
ranks the wrong way and is not used either.

Several probes are validated together on a model, and a benchmark row uses whichever of them separates; read at
95% each, the chance that one of four separates by luck alone is up to 19%. So the status is read off the interval
at 1 − 0.05/family (Bonferroni over the family of probes validated together; 98.75% for four), which keeps that
chance at 5% or less; `ci95` stays the probe's own 95% interval for display.

Measured validations are kept per model, keyed by `model_key` (the weights' sha256 where the backend names it),
in JSON files: the one that ships with the package (validated.json, bench/contamination_validate.py) and the
user's own (`finharness contamination --validate`, under the cache folder), the user's first.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from ..data.io import atomic_write_text
from ..stats.auc import auc_ci
from ..util import finite_json

FAMILY_ALPHA = 0.05
"""The chance, over a family of probes validated together, that any one is called separating by luck alone."""

FPR = 0.05
"""Share of the unseen texts allowed above the threshold: what 'above the threshold' costs in false alarms."""

EVIDENCE = "separates"
"""Status: the AUC interval lies above 0.5; the probe's threshold is used."""

NO_EVIDENCE = "no evidence either way"
"""Status: the AUC interval holds 0.5; the probe says nothing about this model."""

INVERTED = "ranks the wrong way"
"""Status: the AUC interval lies below 0.5 (the unseen side scores higher); not used."""

SHIPPED = Path(__file__).with_name("validated.json")
"""The validations measured for the models finharness ships (bench/contamination_validate.py)."""


@dataclass(frozen=True)
class ProbeValidation:
    """One probe's power on one model, on one split."""

    probe: str
    """The probe's name (probes.PROBES)."""

    split: str
    """The validation split it was measured on ('filings': before vs after the model's release)."""

    auc: float
    """P(a seen text scores higher than an unseen one) + ½ P(tie)."""

    ci95: tuple[float, float]
    """95% interval of `auc` (`method`)."""

    n_seen: int
    """Texts on the side the model had the chance to see."""

    n_unseen: int
    """Texts it cannot have seen."""

    method: str
    """How ci95 was computed (stats.auc)."""

    status: str
    """EVIDENCE, NO_EVIDENCE or INVERTED, from ci95 alone."""

    threshold: float | None = None
    """The score above which FPR of the unseen texts fall (None unless status is EVIDENCE)."""

    fpr: float | None = None
    """The unseen texts' share above the threshold, as measured."""

    tpr: float | None = None
    """The seen texts' share above the threshold, as measured."""

    controls: Mapping[str, Any] = field(default_factory=dict)
    """The same probe on controlled subsets (year-free windows...) and what controls length and genre."""

    family: int = 1
    """Probes validated together on this model and split: `status` is read off the interval at
    family_confidence(family), not off ci95 (module docstring)."""

    status_ci: tuple[float, float] | None = None
    """The interval `status` is read off (None where family is 1: it is ci95)."""


def family_confidence(family: int) -> float:
    """The confidence of each probe's status interval in a family of `family` probes (Bonferroni)."""
    return 1.0 - FAMILY_ALPHA / max(1, family)


def status_of(ci95: Sequence[float]) -> str:
    lo, hi = ci95
    if math.isnan(lo) or math.isnan(hi):
        return NO_EVIDENCE
    if lo > 0.5:
        return EVIDENCE
    if hi < 0.5:
        return INVERTED
    return NO_EVIDENCE


def threshold_at(unseen: Sequence[float], fpr: float = FPR) -> float:
    """The (1 − fpr) quantile of the unseen scores (linear interpolation): a score above it is 'above'."""
    import numpy as np

    return float(np.quantile(np.asarray(unseen, dtype=float), 1.0 - fpr))


def validate_probe(probe: str, seen: Sequence[float | None], unseen: Sequence[float | None], split: str,
                   fpr: float = FPR, controls: Mapping[str, Any] | None = None, family: int = 1) -> ProbeValidation:
    """The ProbeValidation of a probe's scores on both sides (None scores are left out), one of `family` probes
    validated together."""
    pos = [float(v) for v in seen if v is not None and math.isfinite(v)]
    neg = [float(v) for v in unseen if v is not None and math.isfinite(v)]
    estimate = auc_ci(pos, neg)
    status_ci = tuple(auc_ci(pos, neg, confidence=family_confidence(family)).ci95) if family > 1 else None
    status = status_of(status_ci or estimate.ci95)
    threshold = measured_fpr = tpr = None
    if status == EVIDENCE:
        threshold = threshold_at(neg, fpr)
        measured_fpr = sum(v > threshold for v in neg) / len(neg)
        tpr = sum(v > threshold for v in pos) / len(pos)
    return ProbeValidation(probe, split, estimate.value, tuple(estimate.ci95), len(pos), len(neg), estimate.method,
                           status, threshold, measured_fpr, tpr, dict(controls or {}), max(1, family), status_ci)


def model_key(identity: Mapping[str, Any]) -> str:
    """What a validation is kept under: the weights' sha256 where the identity names it (llama.cpp, a GGUF), else
    a hash of the whole identity."""
    sha = identity.get("model_sha256")
    if isinstance(sha, str) and sha:
        return f"sha256:{sha}"
    text = json.dumps(dict(identity), sort_keys=True, ensure_ascii=False, default=str)
    return "identity:" + hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


def user_file() -> Path:
    """Where `finharness contamination --validate` keeps the user's own validations."""
    from ..data.registry import cache_dir

    return cache_dir() / "contamination" / "validated.json"


def read_file(path: Path) -> dict[str, Any]:
    """A validations file ({"models": {KEY: {"label", "probes": {PROBE: ProbeValidation}}}}); {} when absent."""
    if not path.is_file():
        return {}
    data = json.loads(path.read_text(encoding="utf-8"))
    return data if isinstance(data, dict) else {}


def _from_json(raw: Mapping[str, Any]) -> ProbeValidation:
    values = dict(raw)
    values["ci95"] = tuple(values["ci95"])
    if values.get("status_ci") is not None:
        values["status_ci"] = tuple(values["status_ci"])
    return ProbeValidation(**values)


def validations_for(key: str, paths: Sequence[Path] | None = None) -> tuple[dict[str, ProbeValidation], str | None]:
    """(probe -> ProbeValidation, the file it came from) of the model `key`, the first file holding it winning
    (default: the user's file, then the shipped one); ({}, None) for a model nobody validated."""
    for path in paths if paths is not None else (user_file(), SHIPPED):
        entry = (read_file(path).get("models") or {}).get(key)
        if entry:
            return {name: _from_json(raw) for name, raw in (entry.get("probes") or {}).items()}, str(path)
    return {}, None


def record(path: Path, key: str, label: str, validations: Mapping[str, ProbeValidation],
           about: Mapping[str, Any]) -> None:
    """Keep `validations` for model `key` in `path` (other models' entries, and this model's other splits, stay)."""
    data = read_file(path) or {"version": 1, "models": {}}
    models = data.setdefault("models", {})
    splits = (models.get(key) or {}).get("splits")
    models[key] = {"label": label, **dict(about),
                   "probes": {name: finite_json(asdict(v)) for name, v in validations.items()},
                   **({"splits": splits} if splits else {})}
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps(data, ensure_ascii=False, indent=1, allow_nan=False) + "\n")


def record_split(path: Path, key: str, label: str, split: str, measured: Mapping[str, Any],
                 about: Mapping[str, Any]) -> None:
    """Keep a further split's measurements (reorder.paired_validation per probe, and what it ran on) for model
    `key` in `path`, under its entry's "splits"; the filings validation that sets the thresholds stays."""
    data = read_file(path) or {"version": 1, "models": {}}
    entry = data.setdefault("models", {}).setdefault(key, {"label": label, "probes": {}})
    entry.setdefault("splits", {})[split] = {**dict(about), "probes": finite_json(dict(measured))}
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps(data, ensure_ascii=False, indent=1, allow_nan=False) + "\n")
