"""Query options of a model spec: `fake?latency=0.1&seed=3` -> ('fake', {'latency': '0.1', 'seed': '3'})."""

from __future__ import annotations

from urllib.parse import parse_qsl

from ..core.backend import SpecError


def split_options(spec: str, allowed: set[str]) -> tuple[str, dict[str, str]]:
    base, _, query = spec.partition("?")
    options = dict(parse_qsl(query, keep_blank_values=True))
    unknown = sorted(set(options) - allowed)
    if unknown:
        raise SpecError(f"model spec {spec!r}: unknown option(s) {unknown}; allowed: {sorted(allowed)}")
    return base, options
