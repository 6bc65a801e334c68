"""The Backend protocol: the only thing the engine knows about models.

Concrete backends live in `finharness.backends` and are resolved from a model
spec at the edge (CLI, tests); the engine never imports them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Protocol, runtime_checkable

from .types import GenerateRequest, GenerateResponse, LoglikelihoodRequest, LoglikelihoodResponse


@dataclass(frozen=True)
class Capabilities:
    """What a backend can do; tasks check these before they send requests."""

    generate: bool = True
    """Chat generation."""

    loglikelihood: bool = False
    """Prompt log-likelihood of continuations (LoglikelihoodRequest)."""

    next_token_logprobs: bool = False
    """Top-k logprobs of generated tokens."""

    context_length: int | None = None
    """Maximum prompt + generation tokens; None when unknown."""

    max_concurrency: int = 1
    """Requests the backend can usefully serve at once."""

    penalties: bool = False
    """Honours frequency/presence penalties."""

    seed: bool = False
    """Honours a sampling seed."""


class BackendError(Exception):
    """A call failed. `retryable` says whether trying again may help."""

    def __init__(self, message: str, *, retryable: bool = False, status: int | None = None,
                 retry_after: float | None = None, kind: str | None = None):
        super().__init__(message)
        self.retryable = retryable
        self.status = status
        self.retry_after = retry_after
        self.kind = kind
        """Short class the run record counts by: rate_limit, server_error, client_error, timeout,
        connection, bad_response, unsupported, engine_crash (a local engine process died; None: derived from the
        status)."""


TRANSIENT_KINDS = frozenset({"rate_limit", "server_error", "timeout", "connection", "bad_response", "bad_reply",
                             "engine_crash", "error"})
"""Failure kinds a later try may not repeat (a server that was busy, a reply that came back broken, an engine
that died); every other kind (prompt-too-long, replay-miss, client_error, unsupported, task_error) is
deterministic: the same command fails the same way, so a rerun is not advised for it."""


class CallFailed(Exception):
    """A call that failed for good, after `attempts` tries. Never scored as an answer."""

    def __init__(self, message: str, *, attempts: int, kind: str):
        super().__init__(message)
        self.attempts = attempts
        self.kind = kind

    @property
    def transient(self) -> bool:
        """A rerun may succeed (TRANSIENT_KINDS); False: the same request fails the same way."""
        return self.kind in TRANSIENT_KINDS


class SpecError(ValueError):
    """A model spec that cannot be resolved (unknown scheme, missing file...)."""


@runtime_checkable
class Backend(Protocol):
    """A model behind any engine. Implementations: finharness.backends.*"""

    spec: str
    """The model spec it was made from (e.g. 'embedded', 'openai:gpt-4o@http://...')."""

    capabilities: Capabilities

    def identity(self) -> Mapping[str, Any]:
        """Everything that changes the model's answers (weights hash, template, revision).

        It is hashed into every cache key, so a changed model never reuses results."""
        ...

    async def generate(self, request: GenerateRequest) -> GenerateResponse:
        """Raise BackendError (retryable or not) or CallFailed on failure; never return empty silently."""
        ...

    async def loglikelihood(self, request: LoglikelihoodRequest) -> LoglikelihoodResponse:
        ...

    def count_tokens(self, text: str) -> int | None:
        """Token count under the model's tokenizer, None when the backend cannot tell."""
        ...

    async def aclose(self) -> None:
        ...


class BaseBackend:
    """Defaults shared by concrete backends."""

    spec: str = ""
    capabilities: Capabilities = Capabilities()

    def identity(self) -> Mapping[str, Any]:
        return {"spec": self.spec}

    async def generate(self, request: GenerateRequest) -> GenerateResponse:
        raise BackendError(f"backend {self.spec!r} cannot generate", kind="unsupported")

    async def loglikelihood(self, request: LoglikelihoodRequest) -> LoglikelihoodResponse:
        raise BackendError(
            f"backend {self.spec!r} cannot compute log-likelihoods; use a local model "
            "(embedded, llamacpp:PATH) or a generation method", kind="unsupported")

    def count_tokens(self, text: str) -> int | None:
        return None

    def plan_concurrency(self, calls_in_flight: int) -> None:
        """Told once, before the first call, how many calls a run will keep in flight (an engine that
        batches sizes itself by it). Optional: the runner calls it only where a backend has it."""
        return None

    def preflight(self) -> str | None:
        """Why the model cannot be reached (None: it can), asked once before a run's first call with one cheap
        request; a remote backend asks its server, a local one has nothing to ask."""
        return None

    async def aclose(self) -> None:
        return None
