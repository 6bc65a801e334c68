"""Backends, resolved from a model spec. A new backend is one module plus one line here.

Specs: `embedded` (default), `embedded:1.5b`, `llamacpp:PATH.gguf`, `openai:MODEL[@BASE_URL]`,
`anthropic:MODEL[@BASE_URL]`, `vllm:PATH_OR_HF_ID[?max_model_len=N&...]` (GPU, `pip install vllm`),
`fake[?latency=S&...]`, `replay:FILE`.
"""

from __future__ import annotations

import importlib

from ..core.backend import Backend, SpecError

# scheme -> "module:factory"; each factory takes the whole spec string.
SCHEMES: dict[str, str] = {
    "embedded": "finharness.backends.embedded:from_spec",
    "llamacpp": "finharness.backends.llamacpp:from_spec",
    "openai": "finharness.backends.openai_compat:from_spec",
    "anthropic": "finharness.backends.anthropic:from_spec",
    "vllm": "finharness.backends.vllm:from_spec",
    "fake": "finharness.backends.fake:from_spec",
    "replay": "finharness.backends.replay:from_spec",
}


def scheme_of(spec: str) -> str:
    return spec.split("?", 1)[0].split(":", 1)[0]


def from_spec(spec: str) -> Backend:
    """Make a backend from a model spec; an unknown spec is a SpecError that lists the known ones."""
    scheme = scheme_of(spec.strip())
    target = SCHEMES.get(scheme)
    if target is None:
        known = ", ".join(sorted(SCHEMES))
        raise SpecError(f"unknown model spec {spec!r}: scheme {scheme!r} is not one of {known} "
                        "(e.g. embedded, llamacpp:/path/model.gguf, openai:gpt-4o@http://127.0.0.1:8000/v1)")
    module_name, factory = target.split(":")
    module = importlib.import_module(module_name)
    return getattr(module, factory)(spec.strip())
