"""Backends, resolved from a model spec. A new backend is one module plus one line here.

Specs: `embedded` (default), `embedded:1.5b`, `llamacpp:PATH.gguf`, `openai:MODEL[@BASE_URL]`,
`openai-completions:MODEL@BASE_URL` (also log-likelihoods, from /completions prompt logprobs),
`anthropic:MODEL[@BASE_URL]`, `vllm:PATH_OR_HF_ID[?max_model_len=N&...]` (GPU, `pip install vllm`),
`hf:PATH_OR_HUB_ID[?dtype=D&device=D&batch_size=N&...]` (transformers, `pip install 'finharness[hf]'`),
`fake[?latency=S&...]`, `replay:FILE`. An installed distribution adds schemes by entry point
(group `finharness.backends`, `NAME = "module:factory"`, the factory taking the whole spec); both kinds
resolve through plugins.resolve, a built-in scheme first.
"""

from __future__ import annotations

from pathlib import Path

from ..core.backend import Backend, SpecError
from ..core.model import CachedModel, PromptBudget, RunCounters
from ..core.retry import RetryPolicy
from ..core.spending import Spending
from ..core.store import RunStore
from ..plugins import BACKEND_GROUP, BUILT_IN, Plugin, PluginError, catalogue, entry_point_plugins, find, resolve

# scheme -> "module:factory"; each factory takes the whole spec string.
SCHEMES: dict[str, str] = {
    "embedded": "finharness.backends.embedded:from_spec",
    "llamacpp": "finharness.backends.llamacpp:from_spec",
    "openai": "finharness.backends.openai_compat:from_spec",
    "openai-completions": "finharness.backends.openai_completions:from_spec",
    "anthropic": "finharness.backends.anthropic:from_spec",
    "vllm": "finharness.backends.vllm:from_spec",
    "hf": "finharness.backends.hf:from_spec",
    "fake": "finharness.backends.fake:from_spec",
    "replay": "finharness.backends.replay:from_spec",
}


def scheme_of(spec: str) -> str:
    return spec.split("?", 1)[0].split(":", 1)[0]


def available_backends() -> list[tuple[Plugin, str | None]]:
    """Every built-in scheme and every backend entry point installed, each with why it is not used (None: used)."""
    return catalogue(SCHEMES, BACKEND_GROUP)


def spec_option_declarations(plugin: Plugin) -> tuple[type, ...]:
    """The declarations of a backend's query options (frozen dataclasses, a docstring under each field): its module's
    `SpecOptions`, then batch mode's for the schemes that batch; () for a backend that declares none."""
    import importlib

    from .batch import BATCH_SCHEMES, BatchOptions

    module = importlib.import_module(plugin.target.partition(":")[0])
    own = getattr(module, "SpecOptions", None)
    return ((own,) if own is not None else ()) + ((BatchOptions,) if plugin.name in BATCH_SCHEMES else ())


def run_only_options(spec: str) -> frozenset[str]:
    """The options of `spec`'s backend that change how calls run, never what the model answers: the fields its
    declarations mark run-only (spec_options.run_only). A scheme no installed backend provides (a match file from
    elsewhere): those of every built-in backend."""
    from .spec_options import run_only_names

    try:
        found = find(scheme_of(spec.strip()), SCHEMES, BACKEND_GROUP)
        if found is not None:
            return run_only_names(spec_option_declarations(found))
    except Exception:  # a plug-in that cannot be told apart or imported: name it as the built-ins would
        pass
    return frozenset().union(*(run_only_names(spec_option_declarations(Plugin(name, target, BUILT_IN)))
                               for name, target in SCHEMES.items()))


def model_name(spec: str) -> str:
    """`embedded:1.5b?prompt_cache_mb=2000` -> `embedded:1.5b`: the spec without its backend's run-only options
    (run_only_options), so runs of one model made with different run settings rate as one player."""
    from urllib.parse import parse_qsl, urlencode

    base, sep, query = spec.partition("?")
    if not sep:
        return spec
    dropped = run_only_options(spec)
    kept = [(k, v) for k, v in parse_qsl(query, keep_blank_values=True) if k not in dropped]
    return f"{base}?{urlencode(kept, safe='/:@')}" if kept else base


def from_spec(spec: str, *, batch: bool = False) -> Backend:
    """Make a backend from a model spec; an unknown spec is a SpecError that lists the known ones. `?batch=1` in the
    spec (or `batch`: every model whose provider has one, the rest live) sends its calls through the provider's batch
    interface (backends/batch.py)."""
    from .batch import BatchBackend, BatchSettings, can_batch, split_batch_spec

    live_spec, settings = split_batch_spec(spec.strip())
    backend = _live_backend(live_spec)
    if settings is None and batch and can_batch(backend):
        settings = BatchSettings.from_env()
    return backend if settings is None else BatchBackend(backend, settings)


def _live_backend(spec: str) -> Backend:
    scheme = scheme_of(spec.strip())
    installed = [] if scheme in SCHEMES else entry_point_plugins(BACKEND_GROUP)  # read once: resolve, then the error
    try:
        found = resolve(scheme, SCHEMES, BACKEND_GROUP, entry_points=installed)
    except PluginError as err:
        raise SpecError(f"model spec {spec!r}: {err}") from err
    if found is None:
        known = ", ".join(sorted({*SCHEMES, *(p.name for p in installed)}))
        raise SpecError(f"unknown model spec {spec!r}: scheme {scheme!r} is not one of {known} "
                        "(e.g. embedded, llamacpp:/path/model.gguf, openai:gpt-4o@http://127.0.0.1:8000/v1; "
                        f"more by entry point, group {BACKEND_GROUP!r})")
    return found.obj(spec.strip())


def open_model(model: str | Backend, store: RunStore | str | Path, *, role: str = "model",
               counters: RunCounters | None = None, concurrency: int | None = None,
               retry: RetryPolicy | None = None, budget: PromptBudget = PromptBudget(),
               spending: Spending | None = None) -> CachedModel:
    """The public model handle: `model` (a spec such as `embedded` or `openai:gpt-4o@URL`, or a backend already
    made) seen through `store` (a RunStore, or the path of one to open), as a task's `solve` sees it.

    Every call is looked up in the store first and stored once made (a rerun makes no call twice), retried by
    one retry layer, and counted in `counters` (a new RunCounters when None; read it as `handle.counters`).
    role: what its calls are recorded as ('model', 'judge', 'user'...). concurrency: calls in flight
    (default: the backend's own maximum). spending: the tokens, cost and budget shared with a run or suite
    (core/spending.py). A bad spec is a SpecError naming the known schemes."""
    backend = from_spec(model) if isinstance(model, str) else model
    if not isinstance(store, RunStore):
        store = RunStore(store)
    return CachedModel(backend, store, counters if counters is not None else RunCounters(), role=role,
                       concurrency=concurrency, retry=retry, budget=budget, spending=spending)
