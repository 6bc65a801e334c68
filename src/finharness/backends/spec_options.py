"""Query options of a model spec: `fake?latency=0.1&seed=3` -> ('fake', {'latency': '0.1', 'seed': '3'})."""

from __future__ import annotations

from urllib.parse import parse_qsl, urlencode

from ..core.backend import SpecError
from ..redact import redact


def split_options(spec: str, allowed: set[str]) -> tuple[str, dict[str, str]]:
    base, _, query = spec.partition("?")
    options = dict(parse_qsl(query, keep_blank_values=True))
    unknown = sorted(set(options) - allowed)
    if unknown:
        raise SpecError(f"model spec {redact(spec)!r}: unknown option(s) {unknown}; allowed: {sorted(allowed)}")
    return base, options


RUN_ONLY_OPTIONS = frozenset({"prompt_cache_mb", "parallel", "concurrency", "timeout", "key_env"})
"""Options that change how calls run, never what a model answers to a request (none is in a backend's
identity): a model's name in match files and ratings leaves them out."""


def model_name(spec: str) -> str:
    """`embedded:1.5b?prompt_cache_mb=2000` -> `embedded:1.5b`: the spec without RUN_ONLY_OPTIONS, so runs of
    one model made with different run settings rate as one player."""
    base, sep, query = spec.partition("?")
    if not sep:
        return spec
    kept = [(k, v) for k, v in parse_qsl(query, keep_blank_values=True) if k not in RUN_ONLY_OPTIONS]
    return f"{base}?{urlencode(kept, safe='/:@')}" if kept else base
