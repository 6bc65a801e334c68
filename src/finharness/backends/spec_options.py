"""Query options of a model spec: `fake?latency=0.1&seed=3` -> ('fake', {'latency': '0.1', 'seed': '3'})."""

from __future__ import annotations

import math
from dataclasses import field, fields
from typing import Any, Iterable, Mapping
from urllib.parse import parse_qsl

from ..core.backend import SpecError
from ..redact import redact


def split_options(spec: str, allowed: set[str]) -> tuple[str, dict[str, str]]:
    base, _, query = spec.partition("?")
    options = dict(parse_qsl(query, keep_blank_values=True))
    unknown = sorted(set(options) - allowed)
    if unknown:
        raise SpecError(f"model spec {redact(spec)!r}: unknown option(s) {unknown}; allowed: {sorted(allowed)}")
    return base, options


def int_option(shown: str, options: Mapping[str, str], name: str, *, minimum: int,
               maximum: int | None = None) -> int | None:
    """An integer option (None when absent); SpecError, naming the option, when it is not an integer in
    [minimum, maximum]. `shown`: the spec as the message may show it (redacted)."""
    raw = options.get(name)
    if raw is None:
        return None
    try:
        value = int(raw)
    except ValueError:
        raise SpecError(f"model spec {shown!r}: {name} must be an integer, got {redact(raw)!r}") from None
    if value < minimum:
        raise SpecError(f"model spec {shown!r}: {name} must be >= {minimum}, got {value}")
    if maximum is not None and value > maximum:
        raise SpecError(f"model spec {shown!r}: {name} must be <= {maximum:,}, got {value:,}")
    return value


def float_option(shown: str, options: Mapping[str, str], name: str, *, minimum: float, maximum: float,
                 inclusive: bool = True, unit: str = "seconds") -> float | None:
    """A number option (None when absent); SpecError, naming the option, when it is not a finite number in
    [minimum, maximum], or in (minimum, maximum] when not `inclusive`: `nan`, `inf` and `-1` are refused (float()
    reads them all). `shown`: the spec as the message may show it (redacted)."""
    raw = options.get(name)
    if raw is None:
        return None
    try:
        value = float(raw)
    except ValueError:
        raise SpecError(f"model spec {shown!r}: {name} must be a number of {unit}, got {redact(raw)!r}") from None
    above = value >= minimum if inclusive else value > minimum
    if not (math.isfinite(value) and above and value <= maximum):
        raise SpecError(f"model spec {shown!r}: {name} must be a finite number of {unit}, "
                        f"{'>=' if inclusive else '>'} {minimum:g} and <= {maximum:g}, got {redact(raw)!r}")
    return value


RUN_ONLY = "finharness.run_only"
"""The metadata key that marks a declaration's field as run-only (`run_only`)."""


def run_only(default: Any) -> Any:
    """A field of a backend's option declaration (`parallel: int = run_only(0)`) that changes how calls run, never
    what a model answers to a request: no backend's identity holds it, and a model's name in match files and
    ratings leaves it out (backends.model_name)."""
    return field(default=default, metadata={RUN_ONLY: True})


def run_only_names(declarations: Iterable[type]) -> frozenset[str]:
    """The fields the declarations mark `run_only`."""
    return frozenset(f.name for declared in declarations for f in fields(declared) if f.metadata.get(RUN_ONLY))
