"""Provider batch interfaces: a model's calls sent as OpenAI Batch API or Anthropic Message Batches jobs.

`BatchBackend` stands in front of an `openai:` or `anthropic:` backend (`--batch`, or `?batch=1` in the spec) and
has the same identity, so its calls have the same content keys as live ones: a batch run, a live run and a later
rerun read and write the same store rows. What it does:

- **Waves, gathered from the runner.** The runner keeps every sample of a batched model in flight at once
  (core/runner.py), so every first-turn call of every task is asked within moments; the backend holds each call it
  is asked and, once no new call has come for `gather_s`, sends all it holds as one batch (split by the provider's
  request and byte limits). A sample's next call (a dialogue's next round, a judge's verdict once the dialogue
  exists) is asked when its batch's results come back, and these calls gather into the next wave the same way.
  Nothing in the tasks knows about batches: a wave is simply the set of calls that are all waiting.
- **Recorded before it waits.** A batch's calls (content key, request) are recorded in the run store
  (`batches`, `batch_calls`; core/store.py) before anything is uploaded, its state moves preparing -> creating ->
  submitted -> ended -> collected, and each step is committed before the step it records is taken. A process
  killed at any moment resumes from the store: a call recorded in a batch the provider may have (creating, submitted,
  ended) is awaited from that batch, never sent again; a batch stuck in `creating` is looked for at the provider
  (OpenAI: by its `metadata.finharness_batch`; Anthropic, which keeps no metadata: the one batch created in the
  minutes after, with the same number of requests), and only when it is not found are its calls sent again.
- **Results stored one call at a time.** An ended batch's output (and error file) is read, each result parsed as the
  live backend parses a reply, checked, and stored under its call's key before the batch is marked collected (so a
  kill while collecting loses nothing: the output is read again); the calls waiting get their responses, and the
  model handle stores and counts them as it does a live call's.
- **Failures.** A result that is an error fails only its call (a BackendError, retried in the next wave when the
  retry policy says so); a request an expired or cancelled batch did not process is sent again in the next batch; a
  batch the provider refuses whole fails its calls.

Options (spec query, taken off before the live backend is made, never part of the identity): `batch=1`,
`batch_poll=SECONDS` (between status requests, default 30), `batch_gather=SECONDS` (quiet time that closes a wave,
default 2), `batch_max_requests=N` (fewer requests per batch than the provider's limit); $FINHARNESS_BATCH_POLL_S and
$FINHARNESS_BATCH_GATHER_S set the first two for every batched model (`--batch`).
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from dataclasses import dataclass, field, fields, replace
from datetime import datetime
from typing import Any, Iterable, Mapping, Sequence
from urllib.parse import parse_qsl

import httpx

from ..core.backend import Backend, BackendError, BaseBackend, SpecError
from ..core.hashing import canonical_json, content_key, content_key_of_canonical
from ..core.model import READ_ERRORS, check_reply
from ..core.store import ACTIVE_BATCH_STATES, RunStore
from ..core.types import GenerateParams, GenerateRequest, GenerateResponse, Message, ToolSpec, to_jsonable
from ..util import phase
from .http_common import error_for_status
from .spec_options import run_only


@dataclass(frozen=True)
class BatchOptions:
    """The query options of batch mode, which an `openai:` or `anthropic:` spec takes beside its own."""

    batch: bool = run_only(False)
    """1: send the calls through the provider's batch interface (about half price, results within 24 h)."""

    batch_poll: float = run_only(30.0)
    """Seconds between status requests of a submitted batch ($FINHARNESS_BATCH_POLL_S)."""

    batch_gather: float = run_only(2.0)
    """Seconds without a new request that close a wave and send it as one batch."""

    batch_max_requests: int | None = run_only(None)
    """Requests one batch holds at most (default: the provider's limit)."""


BATCH_OPTIONS = tuple(f.name for f in fields(BatchOptions))
"""Spec options of batch mode (taken off the spec before the live backend is made)."""

BATCH_SCHEMES = ("openai", "anthropic")
"""Schemes whose servers may have a batch interface."""

MAX_WAITING = 1_000_000
"""Calls a batched model may hold at once (its concurrency as the runner sees it)."""


@dataclass(frozen=True)
class BatchSettings:
    """How a batched backend gathers, sends and follows its batches."""

    poll_s: float = 30.0
    """Seconds between status requests of a batch in flight."""

    gather_s: float = 2.0
    """A wave closes once no new call has been asked for this long."""

    max_requests: int | None = None
    """Most requests per batch (None: the provider's limit)."""

    max_bytes: int | None = None
    """Most bytes of JSONL per batch (None: the provider's limit)."""

    @classmethod
    def from_env(cls) -> "BatchSettings":
        """The defaults, with $FINHARNESS_BATCH_POLL_S and $FINHARNESS_BATCH_GATHER_S where set (seconds): how a
        machine's runs follow their batches, without changing the model specs."""
        import os

        made = cls()
        for name, attr in (("FINHARNESS_BATCH_POLL_S", "poll_s"), ("FINHARNESS_BATCH_GATHER_S", "gather_s")):
            raw = os.environ.get(name)
            if raw:
                try:
                    value = float(raw)
                except ValueError:
                    raise SpecError(f"${name} must be a number of seconds, not {raw!r}") from None
                if not 0 <= value <= 86_400:
                    raise SpecError(f"${name} must be between 0 and 86400 seconds, not {raw!r}")
                made = replace(made, **{attr: value})
        return made


def split_batch_spec(spec: str) -> tuple[str, BatchSettings | None]:
    """(the spec without its batch options, the batch settings it asks for; None: live). The rest of the query is
    kept as written, so `openai:m@URL?batch=1` and `openai:m@URL` make the same live backend."""
    base, sep, query = spec.partition("?")
    if not sep:
        return spec, None
    kept, mine = [], {}
    for part in query.split("&"):
        name = part.split("=", 1)[0]
        if name in BATCH_OPTIONS:
            mine.update(parse_qsl(part, keep_blank_values=True))
        elif part:
            kept.append(part)
    rest = base + ("?" + "&".join(kept) if kept else "")
    if not mine:
        return spec, None
    flag = mine.get("batch", "1" if len(mine) > 1 else "0").lower()
    if flag not in ("1", "true", "yes", "on", "", "0", "false", "no", "off"):
        raise SpecError(f"model spec {spec!r}: batch takes 1 or 0, got {flag!r}")
    if flag in ("0", "false", "no", "off"):
        return rest, None
    return rest, settings_from(spec, mine, BatchSettings.from_env())


def settings_from(spec: str, options: Mapping[str, str], base: BatchSettings) -> BatchSettings:
    """BatchSettings from a spec's batch options (SpecError naming a bad one)."""
    from .spec_options import float_option, int_option

    poll = float_option(spec, options, "batch_poll", minimum=0.0, maximum=86_400.0, inclusive=False)
    gather = float_option(spec, options, "batch_gather", minimum=0.0, maximum=3_600.0)
    most = int_option(spec, options, "batch_max_requests", minimum=1)
    return replace(base, poll_s=base.poll_s if poll is None else poll,
                   gather_s=base.gather_s if gather is None else gather,
                   max_requests=base.max_requests if most is None else most)


def request_from_json(data: Mapping[str, Any]) -> GenerateRequest:
    """A GenerateRequest back from its stored JSON form (to_jsonable's)."""
    params = dict(data.get("params") or {})
    if "stop" in params:
        params["stop"] = tuple(params["stop"])
    return GenerateRequest(messages=tuple(Message(**m) for m in data["messages"]), params=GenerateParams(**params),
                           sample_index=int(data.get("sample_index", 0)),
                           tools=tuple(ToolSpec(**t) for t in data.get("tools", ())))


def _timestamp(value: Any) -> float | None:
    """A provider's time (Unix seconds, or an RFC 3339 text) as Unix seconds."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str) and value:
        try:
            return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
        except ValueError:
            return None
    return None


@dataclass(frozen=True)
class ProviderBatch:
    """A batch as its provider describes it."""

    batch_id: str
    status: str
    """The provider's word: validating, in_progress, finalizing, completed, failed, expired, cancelling, cancelled
    (OpenAI); in_progress, canceling, ended (Anthropic)."""
    counts: Mapping[str, int]
    ended: bool
    """Its results can be read (every request processed, or the rest expired or cancelled)."""
    refused: str | None = None
    """Why the provider refused the whole batch (None: it did not)."""
    deadline: float | None = None
    output_file: str | None = None
    error_file: str | None = None
    created: float | None = None


@dataclass(frozen=True)
class LineResult:
    """One line of a batch's results."""

    key: str
    body: Mapping[str, Any] | None = None
    """The reply, as a live call's body (None: no reply)."""
    error: BackendError | None = None
    """Why this call failed (None: it did not, or it was not processed)."""

    @property
    def unprocessed(self) -> bool:
        """Expired or cancelled before it ran: sent again."""
        return self.body is None and self.error is None


class BatchAPI:
    """One provider's batch endpoints, on a live backend's client and payloads."""

    provider = ""
    max_requests = 0
    max_bytes = 0

    def __init__(self, inner: Any):
        self.inner = inner

    def client(self) -> httpx.AsyncClient:
        return self.inner._client.get()

    async def _send(self, method: str, path: str, what: str, **kwargs: Any) -> httpx.Response:
        try:
            response = await self.client().request(method, path, **kwargs)
        except httpx.TimeoutException as exc:
            raise BackendError(f"{what}: timed out ({type(exc).__name__})", kind="timeout", retryable=True) from exc
        except httpx.RequestError as exc:
            raise BackendError(f"{what}: connection error ({type(exc).__name__}: {exc})", kind="connection",
                               retryable=True) from exc
        if response.status_code >= 400:
            raise error_for_status(response, what)
        return response

    async def _json(self, method: str, path: str, what: str, **kwargs: Any) -> dict[str, Any]:
        response = await self._send(method, path, what, **kwargs)
        try:
            body = response.json()
        except ValueError:
            raise BackendError(f"{what}: not JSON ({response.text[:80]!r})", kind="bad_response",
                               retryable=True) from None
        if not isinstance(body, dict):
            raise BackendError(f"{what}: expected a JSON object", kind="bad_response", retryable=True)
        return body

    def line(self, key: str, request: GenerateRequest) -> dict[str, Any]:
        raise NotImplementedError

    def parse(self, body: Mapping[str, Any], request: GenerateRequest) -> GenerateResponse:
        raise NotImplementedError

    async def upload(self, data: bytes) -> str | None:
        """The input file's id (None: this provider takes the requests in the create call)."""
        return None

    async def create(self, row_id: str, input_file: str | None, lines: Sequence[Mapping[str, Any]]) -> ProviderBatch:
        raise NotImplementedError

    async def status(self, batch_id: str) -> ProviderBatch:
        raise NotImplementedError

    async def listing(self) -> list[Mapping[str, Any]]:
        raise NotImplementedError

    async def find(self, row: Mapping[str, Any], taken: set[str]) -> ProviderBatch | None:
        """The provider's batch a `creating` row made, if it made one (`taken`: batch ids other rows hold)."""
        raise NotImplementedError

    async def results(self, batch: ProviderBatch) -> list[LineResult]:
        raise NotImplementedError

    async def cancel(self, batch_id: str) -> ProviderBatch:
        raise NotImplementedError


def _jsonl(text: str, what: str) -> Iterable[dict[str, Any]]:
    """The objects of a provider's JSONL results. A line that is not one is an error naming it, never skipped: a
    skipped result would leave its call unanswered and send it (and bill it) again in the next wave."""
    for number, raw in enumerate(text.splitlines(), start=1):
        raw = raw.strip()
        if not raw:
            continue
        try:
            line = json.loads(raw)
        except ValueError as err:
            line = err
        if not isinstance(line, dict):
            raise BackendError(f"{what}: line {number} is not a JSON object ({raw[:80]!r}); the batch stays to be "
                               "collected by the next run", kind="bad_reply", retryable=True)
        yield line


class OpenAIBatches(BatchAPI):
    """OpenAI's Batch API: a JSONL file uploaded to /files, a batch created at /batches, an output and an error
    file. Any OpenAI-compatible server that implements these endpoints."""

    provider = "openai"
    max_requests = 50_000
    max_bytes = 200 * 1024 * 1024
    endpoint = "/v1/chat/completions"

    def line(self, key: str, request: GenerateRequest) -> dict[str, Any]:
        return {"custom_id": key, "method": "POST", "url": self.endpoint, "body": self.inner.payload(request)}

    def parse(self, body: Mapping[str, Any], request: GenerateRequest) -> GenerateResponse:
        from .openai_compat import parse_chat_reply

        adaptations = self.inner.payload_and_adaptations(request)[1]
        return parse_chat_reply(body, f"batch result ({self.inner.remote.model})", request, adaptations)

    async def upload(self, data: bytes) -> str | None:
        body = await self._json("POST", "/files", "upload of a batch input file",
                                files={"file": ("finharness-batch.jsonl", data, "application/jsonl")},
                                data={"purpose": "batch"})
        return str(body["id"])

    def _read(self, body: Mapping[str, Any]) -> ProviderBatch:
        status = str(body.get("status") or "")
        errors = body.get("errors") or {}
        refused = None
        if status == "failed":
            found = errors.get("data") if isinstance(errors, dict) else None
            refused = "; ".join(str(e.get("message", e)) for e in found or () if isinstance(e, dict)) or "failed"
        counts = body.get("request_counts") if isinstance(body.get("request_counts"), dict) else {}
        return ProviderBatch(str(body["id"]), status, {k: int(v) for k, v in counts.items()},
                             ended=status in ("completed", "expired", "cancelled", "failed"), refused=refused,
                             deadline=_timestamp(body.get("expires_at")), output_file=body.get("output_file_id"),
                             error_file=body.get("error_file_id"), created=_timestamp(body.get("created_at")))

    async def create(self, row_id: str, input_file: str | None, lines: Sequence[Mapping[str, Any]]) -> ProviderBatch:
        return self._read(await self._json("POST", "/batches", "creating a batch", json={
            "input_file_id": input_file, "endpoint": self.endpoint, "completion_window": "24h",
            "metadata": {"finharness_batch": row_id}}))

    async def status(self, batch_id: str) -> ProviderBatch:
        return self._read(await self._json("GET", f"/batches/{batch_id}", f"status of batch {batch_id}"))

    async def listing(self) -> list[Mapping[str, Any]]:
        body = await self._json("GET", "/batches", "listing batches", params={"limit": 100})
        return [b for b in body.get("data") or () if isinstance(b, dict)]

    async def find(self, row: Mapping[str, Any], taken: set[str]) -> ProviderBatch | None:
        for entry in await self.listing():
            meta = entry.get("metadata") if isinstance(entry.get("metadata"), dict) else {}
            if meta.get("finharness_batch") == row["id"]:
                return self._read(entry)
        return None

    async def results(self, batch: ProviderBatch) -> list[LineResult]:
        out: list[LineResult] = []
        for file_id in (batch.output_file, batch.error_file):
            if not file_id:
                continue
            what = f"batch results file {file_id}"
            text = (await self._send("GET", f"/files/{file_id}/content", what)).text
            for line in _jsonl(text, what):
                out.append(self._line_result(line))
        return out

    @staticmethod
    def _line_result(line: Mapping[str, Any]) -> LineResult:
        key = str(line.get("custom_id"))
        response = line.get("response") if isinstance(line.get("response"), dict) else None
        error = line.get("error") if isinstance(line.get("error"), dict) else None
        if response is not None and response.get("status_code") == 200 and isinstance(response.get("body"), dict):
            return LineResult(key, body=response["body"])
        if error is not None and error.get("code") in ("batch_expired", "batch_cancelled"):
            return LineResult(key)
        status = int(response.get("status_code") or 0) if response else 0
        body = response.get("body") if response and isinstance(response.get("body"), dict) else {}
        detail = (body.get("error") or {}).get("message") if isinstance(body.get("error"), dict) else None
        message = detail or (error or {}).get("message") or f"HTTP {status}"
        retryable = status == 0 or status in (408, 409, 429) or status >= 500
        kind = ("rate_limit" if status == 429 else "server_error" if status >= 500 else
                "client_error" if status else "error")
        return LineResult(key, error=BackendError(f"batch result: {message}", retryable=retryable,
                                                  status=status or None, kind=kind))

    async def cancel(self, batch_id: str) -> ProviderBatch:
        return self._read(await self._json("POST", f"/batches/{batch_id}/cancel", f"cancelling batch {batch_id}"))


class AnthropicBatches(BatchAPI):
    """Anthropic's Message Batches: the requests in the create call, results as JSONL at the batch's results_url."""

    provider = "anthropic"
    max_requests = 100_000
    max_bytes = 256 * 1024 * 1024
    FIND_WINDOW_S = 600.0
    """How long after a `creating` row was last written its batch may have been created (clocks differ)."""

    def line(self, key: str, request: GenerateRequest) -> dict[str, Any]:
        return {"custom_id": key, "params": self.inner.payload(request)}

    def parse(self, body: Mapping[str, Any], request: GenerateRequest) -> GenerateResponse:
        from .anthropic import parse_message

        adaptations = self.inner.payload_and_adaptations(request)[1]
        return parse_message(body, f"batch result ({self.inner.remote.model})", adaptations)

    def _read(self, body: Mapping[str, Any]) -> ProviderBatch:
        status = str(body.get("processing_status") or "")
        counts = body.get("request_counts") if isinstance(body.get("request_counts"), dict) else {}
        return ProviderBatch(str(body["id"]), status, {k: int(v) for k, v in counts.items()}, ended=status == "ended",
                             deadline=_timestamp(body.get("expires_at")), output_file=body.get("results_url"),
                             created=_timestamp(body.get("created_at")))

    async def create(self, row_id: str, input_file: str | None, lines: Sequence[Mapping[str, Any]]) -> ProviderBatch:
        return self._read(await self._json("POST", "/messages/batches", "creating a message batch",
                                           json={"requests": list(lines)}))

    async def status(self, batch_id: str) -> ProviderBatch:
        return self._read(await self._json("GET", f"/messages/batches/{batch_id}", f"status of batch {batch_id}"))

    async def listing(self) -> list[Mapping[str, Any]]:
        body = await self._json("GET", "/messages/batches", "listing message batches", params={"limit": 100})
        return [b for b in body.get("data") or () if isinstance(b, dict)]

    async def find(self, row: Mapping[str, Any], taken: set[str]) -> ProviderBatch | None:
        since = float(row["updated"]) - self.FIND_WINDOW_S
        found = []
        for entry in await self.listing():
            batch = self._read(entry)
            if batch.batch_id in taken or (batch.created is not None and batch.created < since):
                continue
            if sum(batch.counts.values()) == int(row["requests"]):
                found.append(batch)
        return found[0] if len(found) == 1 else None

    async def results(self, batch: ProviderBatch) -> list[LineResult]:
        where = batch.output_file or f"/messages/batches/{batch.batch_id}/results"
        what = f"results of batch {batch.batch_id}"
        text = (await self._send("GET", where, what)).text
        out = []
        for line in _jsonl(text, what):
            key = str(line.get("custom_id"))
            result = line.get("result") if isinstance(line.get("result"), dict) else {}
            kind = result.get("type")
            if kind == "succeeded" and isinstance(result.get("message"), dict):
                out.append(LineResult(key, body=result["message"]))
            elif kind in ("canceled", "expired"):
                out.append(LineResult(key))
            else:
                error = result.get("error") if isinstance(result.get("error"), dict) else {}
                inner = error.get("error") if isinstance(error.get("error"), dict) else error
                error_type = str(inner.get("type") or "error")
                retryable = error_type in ("api_error", "overloaded_error", "rate_limit_error", "timeout_error")
                out.append(LineResult(key, error=BackendError(
                    f"batch result: {error_type}: {inner.get('message', '')}", retryable=retryable,
                    kind="client_error" if error_type == "invalid_request_error" else "server_error")))
        return out

    async def cancel(self, batch_id: str) -> ProviderBatch:
        return self._read(await self._json("POST", f"/messages/batches/{batch_id}/cancel",
                                           f"cancelling batch {batch_id}"))


def batch_api(inner: Backend) -> BatchAPI:
    """The batch endpoints of a live backend's provider; SpecError for a backend that has none."""
    from .anthropic import AnthropicBackend
    from .openai_compat import OpenAICompatBackend

    if isinstance(inner, OpenAICompatBackend):
        return OpenAIBatches(inner)
    if isinstance(inner, AnthropicBackend):
        return AnthropicBatches(inner)
    raise SpecError(f"model spec {inner.spec!r}: batch mode needs an openai: or anthropic: model (a provider with a "
                    "batch interface)")


@dataclass
class BatchStats:
    """What a batched backend did in this process (the report and tests read it)."""

    batches: int = 0
    """Batches created."""
    submitted: int = 0
    """Requests sent in them."""
    polls: int = 0
    """Status requests."""
    resumed: int = 0
    """Batches of an earlier process followed here."""
    resent: int = 0
    """Requests sent again because an expired or cancelled batch did not process them."""
    waves: list[int] = field(default_factory=list)
    """Requests per wave (a wave may be split into several batches by the size limits)."""


def describe(row: Mapping[str, Any], batch: ProviderBatch | None = None, now: float | None = None) -> str:
    """A batch's state for a progress line: the provider's word, its counts, elapsed, the provider's deadline."""
    now = time.time() if now is None else now
    status = batch.status if batch else (row.get("status") or row["state"])
    counts = dict(batch.counts) if batch else dict(row.get("counts") or {})
    done = counts.get("completed", counts.get("succeeded", 0))
    failed = counts.get("failed", counts.get("errored", 0))
    total = counts.get("total") or row["requests"]
    parts = [status, f"{done + failed}/{total} done" + (f" ({failed} failed)" if failed else "")]
    since = row.get("submitted") or row["created"]
    parts.append(f"{(now - since) / 60:.0f} min" if now - since >= 60 else f"{now - since:.0f} s")
    deadline = batch.deadline if batch else row.get("deadline")
    if deadline:
        parts.append(f"deadline {datetime.fromtimestamp(deadline).strftime('%Y-%m-%d %H:%M')}")
    return " ".join(parts[:1]) + " " + ", ".join(parts[1:])


class BatchBackend(BaseBackend):
    """A live backend's calls sent through its provider's batch interface (module docstring)."""

    batched = True

    def __init__(self, inner: Backend, settings: BatchSettings = BatchSettings(), api: BatchAPI | None = None):
        self.inner = inner
        self.api = api or batch_api(inner)
        self.settings = settings
        self.spec = inner.spec
        self.capabilities = replace(inner.capabilities, max_concurrency=MAX_WAITING)
        self.stats = BatchStats()
        self._store: RunStore | None = None
        self._identity_hash: str | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._reset()

    def _reset(self) -> None:
        self._pending: dict[str, GenerateRequest] = {}
        """Calls asked and not yet in a batch, by content key."""
        self._requests: dict[str, GenerateRequest] = {}
        """Every call asked in this loop, by content key (to parse its result)."""
        self._waiters: dict[str, list[asyncio.Future[GenerateResponse]]] = {}
        self._watchers: dict[str, asyncio.Task[None]] = {}
        self._flusher: asyncio.Task[None] | None = None
        self._arrivals = 0
        self._adopted = False

    # -- what the model handle sees: the live backend's --------------------------------------------------------
    def identity(self) -> Mapping[str, Any]:
        return self.inner.identity()

    def count_tokens(self, text: str) -> int | None:
        return self.inner.count_tokens(text)

    def preflight(self) -> str | None:
        return self.inner.preflight()

    def completion_limits(self, params: Any) -> Any:
        return self.inner.completion_limits(params)  # type: ignore[attr-defined]

    def prompt_cache(self) -> Any:
        return self.inner.prompt_cache()  # type: ignore[attr-defined]

    def cache_blocks(self, request: GenerateRequest) -> Any:
        return self.inner.cache_blocks(request)  # type: ignore[attr-defined]

    def bind_store(self, store: RunStore) -> None:
        """The run store the batches are recorded in (CachedModel calls this)."""
        if self._store is not None and self._store is not store and self._store.path != store.path:
            raise ValueError(f"{self.spec}: a batched model records its batches in one store ({self._store.path}), "
                             f"not also in {store.path}")
        self._store = store

    @property
    def identity_hash(self) -> str:
        if self._identity_hash is None:
            self._identity_hash = content_key(dict(self.identity()))
        return self._identity_hash

    def call_key(self, request: GenerateRequest) -> tuple[str, str]:
        """(the content key the model handle stores this call under, the request's canonical JSON)."""
        req_text = canonical_json(to_jsonable(request))
        return content_key_of_canonical(canonical_json(dict(self.identity())), canonical_json("generate"),
                                        req_text), req_text

    async def loglikelihood(self, request: Any) -> Any:
        return await self.inner.loglikelihood(request)

    async def aclose(self) -> None:
        for task in list(self._watchers.values()) + ([self._flusher] if self._flusher else []):
            task.cancel()
        await self.inner.aclose()

    def join(self, key: str) -> "asyncio.Future[GenerateResponse] | None":
        """A future of the reply to the call `key` when it is already waiting here (asked by another sample), else
        None; its reply is stored before the future is resolved (CachedModel then serves it from the store)."""
        loop = asyncio.get_running_loop()
        waiting = self._waiters.get(key) if self._loop is loop else None
        if not waiting or all(f.done() for f in waiting):
            return None
        future: asyncio.Future[GenerateResponse] = loop.create_future()
        waiting.append(future)

        def leave(done: asyncio.Future[GenerateResponse]) -> None:
            if done in waiting:
                waiting.remove(done)

        future.add_done_callback(leave)
        return future

    async def generate(self, request: GenerateRequest) -> GenerateResponse:
        store = self._store
        if store is None:
            raise BackendError(f"{self.spec}: batch mode needs a run store (the model handle binds one)",
                               kind="unsupported")
        loop = asyncio.get_running_loop()
        if self._loop is not loop:  # a new asyncio.run: what the old loop held is gone with it
            self._loop = loop
            self._reset()
        if not self._adopted:
            self._adopted = True
            self._adopt(store)
        key, req_text = self.call_key(request)
        future: asyncio.Future[GenerateResponse] = loop.create_future()
        waiting = self._waiters.setdefault(key, [])
        waiting.append(future)
        self._requests[key] = request
        if len(waiting) == 1 and key not in self._pending:
            held = store.batch_of_call(key, self.identity_hash)
            if held is not None:
                self._watch(held)
            else:
                self._ask(key, request)
        try:
            return await future
        finally:
            if future in waiting:
                waiting.remove(future)

    # -- waves --------------------------------------------------------------------------------------------------
    def _ask(self, key: str, request: GenerateRequest) -> None:
        self._pending[key] = request
        self._arrivals += 1
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.get_running_loop().create_task(self._gather_and_send())

    async def _gather_and_send(self) -> None:
        while True:
            seen = self._arrivals
            await asyncio.sleep(self.settings.gather_s)
            if self._arrivals == seen:
                break
        wave, self._pending = self._pending, {}
        if wave:
            self.stats.waves.append(len(wave))
        for chunk in self._chunks(wave):
            try:
                await self._send(chunk)
            except Exception as err:  # the store failed (a full disk...): the calls fail, not hang
                for key, _, _ in chunk:
                    self._fail(key, err)
        if self._pending:  # asked while this wave was being sent: the next wave
            self._flusher = asyncio.get_running_loop().create_task(self._gather_and_send())

    def _chunks(self, wave: Mapping[str, GenerateRequest]) -> Iterable[list[tuple[str, dict[str, Any], bytes]]]:
        """The wave in batches within the provider's (and the settings') request and byte limits; a request too
        large for any batch fails alone."""
        most = min(self.settings.max_requests or self.api.max_requests, self.api.max_requests)
        most_bytes = min(self.settings.max_bytes or self.api.max_bytes, self.api.max_bytes)
        chunk: list[tuple[str, dict[str, Any], bytes]] = []
        size = 0
        for key, request in wave.items():
            try:
                line = self.api.line(key, request)
            except BackendError as err:  # the live backend refuses the request (no logprobs on Anthropic...)
                self._fail(key, err)
                continue
            data = (json.dumps(line, ensure_ascii=False) + "\n").encode("utf-8")
            if len(data) > most_bytes:
                self._fail(key, BackendError(f"{self.spec}: a request of {len(data):,} bytes is larger than a batch "
                                             f"may be ({most_bytes:,})", kind="client_error"))
                continue
            if chunk and (len(chunk) >= most or size + len(data) > most_bytes):
                yield chunk
                chunk, size = [], 0
            chunk.append((key, line, data))
            size += len(data)
        if chunk:
            yield chunk

    async def _send(self, chunk: list[tuple[str, dict[str, Any], bytes]]) -> None:
        """Record, upload and create one batch, then follow it."""
        store = self._store
        assert store is not None
        row_id = uuid.uuid4().hex
        data = b"".join(d for _, _, d in chunk)
        calls = [(key, "generate", canonical_json(to_jsonable(self._requests[key]))) for key, _, _ in chunk]
        store.put_batch({"id": row_id, "backend": self.spec, "identity": self.identity_hash,
                         "provider": self.api.provider, "state": "preparing", "requests": len(chunk),
                         "bytes": len(data)}, calls)
        state = "preparing"
        try:
            input_file = await self.api.upload(data)
            if input_file is not None:
                store.update_batch(row_id, input_file=input_file)
            store.update_batch(row_id, state="creating")
            state = "creating"
            made = await self.api.create(row_id, input_file, [line for _, line, _ in chunk])
        except BackendError as err:
            made = None
            if state == "creating" and err.kind in ("timeout", "connection", "server_error", "bad_response"):
                try:  # the create request may have reached the provider
                    made = await self.api.find(store.batch(row_id) or {}, self._taken())
                except BackendError:
                    made = None
                if made is None:  # not known to be there: the row stays `creating`, a later run looks again
                    self._requeue_later(row_id, err)
                    return
            if made is None:
                store.update_batch(row_id, state="abandoned", status=f"not created: {str(err)[:200]}")
                for key, _, _ in chunk:
                    self._fail(key, err)
                return
        store.update_batch(row_id, state="submitted", batch_id=made.batch_id, status=made.status,
                           counts=dict(made.counts), deadline=made.deadline, submitted=time.time())
        self.stats.batches += 1
        self.stats.submitted += len(chunk)
        self._watch(row_id)

    def _requeue_later(self, row_id: str, err: BackendError) -> None:
        """A create whose outcome is unknown: its calls fail for now (retryable), the row stays `creating`; the
        retry finds the row and looks for the batch again."""
        assert self._store is not None
        for key, _, _ in self._store.batch_calls(row_id):
            self._fail(key, BackendError(f"{err} (the batch may have been created: looked for again on retry)",
                                         retryable=True, kind=err.kind))

    def _taken(self) -> set[str]:
        assert self._store is not None
        return {row["batch_id"] for row in self._store.batches(self.identity_hash) if row["batch_id"]}

    # -- following a batch ----------------------------------------------------------------------------------
    def _adopt(self, store: RunStore) -> None:
        """At this loop's first call: follow every batch of this model an earlier process left in flight (their
        results are paid for), and mark as abandoned the ones it never created."""
        for row in store.batches(self.identity_hash, ("preparing",)):
            store.update_batch(row["id"], state="abandoned", status="never created (its process stopped first)")
        for row in store.batches(self.identity_hash, ACTIVE_BATCH_STATES):
            self.stats.resumed += 1
            self._watch(row["id"])

    def _watch(self, row_id: str) -> None:
        task = self._watchers.get(row_id)
        if task is None or task.done():
            self._watchers[row_id] = asyncio.get_running_loop().create_task(self._follow(row_id))

    async def _follow(self, row_id: str) -> None:
        store = self._store
        assert store is not None
        try:
            row = store.batch(row_id)
            if row is None:
                return
            if row["state"] == "creating":
                made = await self._retrying(lambda: self.api.find(row, self._taken()))
                if made is None:
                    store.update_batch(row_id, state="abandoned", status="not found at the provider")
                    self._resend(row_id)
                    return
                store.update_batch(row_id, state="submitted", batch_id=made.batch_id, status=made.status,
                                   counts=dict(made.counts), deadline=made.deadline, submitted=time.time())
                row = store.batch(row_id) or row
            if row["state"] == "submitted":
                batch = await self._poll(row)
                if batch.refused is not None:
                    store.update_batch(row_id, state="failed", status=f"refused: {batch.refused[:300]}")
                    error = BackendError(f"{self.spec}: the provider refused batch {batch.batch_id}: {batch.refused}",
                                         kind="client_error")
                    for key, _, _ in store.batch_calls(row_id):
                        self._fail(key, error)
                    return
                store.update_batch(row_id, state="ended", status=batch.status, counts=dict(batch.counts),
                                   output_file=batch.output_file, error_file=batch.error_file, ended=time.time())
                row = store.batch(row_id) or row
            if row["state"] == "ended":
                await self._collect(row)
        except BackendError as err:  # the provider cannot be asked now: the batch stays recorded for a rerun
            for key, _, _ in store.batch_calls(row_id):
                self._fail(key, BackendError(f"{err} (batch {row_id[:8]} is still recorded: the same command "
                                             "follows it again)", retryable=False, kind=err.kind))
        finally:
            self._watchers.pop(row_id, None)

    async def _retrying(self, ask: Any, attempts: int = 5) -> Any:
        """`ask()` again after a transient failure (a status request is free and changes nothing)."""
        for attempt in range(attempts):
            try:
                return await ask()
            except BackendError as err:
                if not err.retryable or attempt == attempts - 1:
                    raise
                await asyncio.sleep(min(self.settings.poll_s, err.retry_after or 2.0 ** attempt))
        raise AssertionError("unreachable")

    async def _poll(self, row: Mapping[str, Any]) -> ProviderBatch:
        store = self._store
        assert store is not None
        with phase(f"batch {row['id'][:8]} of {self.spec}", total=int(row["requests"])) as shown:
            last: tuple[str, str] | None = None
            while True:
                batch = await self._retrying(lambda: self.api.status(row["batch_id"]))
                self.stats.polls += 1
                now = (batch.status, canonical_json(dict(batch.counts)))
                if now != last:
                    store.update_batch(row["id"], status=batch.status, counts=dict(batch.counts),
                                       deadline=batch.deadline)
                    last = now
                shown.say(describe(row, batch))
                if batch.ended:
                    return batch
                await asyncio.sleep(self.settings.poll_s)

    async def _collect(self, row: Mapping[str, Any]) -> None:
        """Store every result of an ended batch, mark it collected, then answer the calls waiting on it."""
        store = self._store
        assert store is not None
        batch = ProviderBatch(row["batch_id"], row.get("status") or "", row.get("counts") or {}, ended=True,
                              output_file=row.get("output_file"), error_file=row.get("error_file"))
        lines = await self._retrying(lambda: self.api.results(batch))
        recorded = {key: text for key, _, text in store.batch_calls(row["id"])}
        latency = max(0.0, float(row.get("ended") or time.time()) - float(row.get("submitted") or row["created"]))
        answers: dict[str, GenerateResponse] = {}
        errors: dict[str, BackendError] = {}
        for line in lines:
            text = recorded.get(line.key)
            if text is None or line.key in answers:
                continue
            if line.error is not None:
                errors[line.key] = line.error
                continue
            if line.body is None:
                continue
            request = self._requests.get(line.key) or request_from_json(json.loads(text))
            try:
                response = self.api.parse(line.body, request)
            except (BackendError, *READ_ERRORS) as err:
                errors[line.key] = err if isinstance(err, BackendError) else BackendError(
                    f"batch result: cannot be read ({type(err).__name__}: {err})", kind="bad_reply", retryable=True)
                continue
            problem, resp_json = check_reply("generate", response)
            if problem is not None:
                errors[line.key] = BackendError(f"batch result: {problem}", kind="bad_reply", retryable=True)
                continue
            store.put_call_json(line.key, self.spec, "generate", text, canonical_json(resp_json), latency)
            answers[line.key] = response
        store.update_batch(row["id"], state="collected")  # commits the calls stored above first
        for key, response in answers.items():
            for future in self._waiters.get(key, ()):
                if not future.done():
                    future.set_result(response)
        for key, err in errors.items():
            self._fail(key, err)
        self._resend(row["id"], skip=set(answers) | set(errors))

    def _resend(self, row_id: str, skip: set[str] | None = None) -> None:
        """Send again, in the next wave, the calls of a batch that did not process them and that someone waits on."""
        assert self._store is not None
        for key, _, text in self._store.batch_calls(row_id):
            if key in (skip or ()) or not any(not f.done() for f in self._waiters.get(key, ())):
                continue
            self.stats.resent += 1
            self._ask(key, self._requests.get(key) or request_from_json(json.loads(text)))

    def _fail(self, key: str, err: BaseException) -> None:
        for future in self._waiters.get(key, ()):
            if not future.done():
                future.set_exception(err)


def batched(backend: Backend, settings: BatchSettings | None = None) -> Backend:
    """`backend` in batch mode (a BatchBackend over it; one already batched is returned as it is)."""
    if getattr(backend, "batched", False):
        return backend
    return BatchBackend(backend, settings or BatchSettings.from_env())


def batch_wanted(choice: bool | Sequence[str], spec: str) -> bool:
    """Whether a run's batch choice (RunOptions.batch: True, or specs and model names) takes in the model `spec`."""
    from ..core.spending import model_name

    if isinstance(choice, bool):
        return choice
    return spec in choice or model_name(spec) in choice


def can_batch(backend: Backend) -> bool:
    """Whether `backend`'s provider may have a batch interface (an openai: or anthropic: backend)."""
    try:
        batch_api(backend)
    except SpecError:
        return False
    return True


# -- a run's batches, for `finharness batch status|cancel` -------------------------------------------------------

def store_of(out: Any) -> Any:
    """The run store of a run or suite folder OUT (OUT/store.sqlite), or OUT itself when it is a store file."""
    from pathlib import Path

    path = Path(out)
    return path if path.is_file() else path / "store.sqlite"


def active_note(store_path: Any, out: Any) -> str | None:
    """What to say on a stop while batches of the store are still at the provider (None: none is)."""
    from pathlib import Path

    if not Path(store_path).is_file():
        return None
    with RunStore(store_path) as store:
        active = store.batches(states=ACTIVE_BATCH_STATES)
    if not active:
        return None
    requests = sum(int(row["requests"]) for row in active)
    return (f"{len(active)} batch(es) ({requests:,} request(s)) are still at the provider and keep running: rerun the "
            f"same command to collect their results (nothing is sent twice); `finharness batch status {out}` shows "
            f"them, `finharness batch cancel {out}` cancels them")
