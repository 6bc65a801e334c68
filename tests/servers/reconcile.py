"""Reconcile what a client did with what the fault server served, question by question.

`retries == faults injected` holds only while every healthy reply beats the client's timeout: on a
loaded machine a slow but healthy reply becomes one more retry (a timeout), and the count is off by
one for no fault of the harness. What holds whatever the timing, and what `reconcile` checks:

- every attempt the client made reached the server and every request the server saw came from an
  attempt: per question, as many requests as attempts (so the retries are the requests the server
  saw minus the questions: `Reconciled.retries`);
- a question ends with at most one accepted reply, and that attempt is its last;
- each failed attempt is explained by what the server served that question: an injected fault
  fails as its own kind (CLIENT_KIND: a 429 as rate_limit, a reset as connection, ...) unless its
  reply came too late, and a timeout may stand for anything that came too late, a healthy reply
  included -- but nothing else stands for a healthy reply. So a healthy reply the client did not
  accept was a timeout retry, never a lost answer (`Reconciled.late_healthy` counts them);
- an accepted reply is a healthy one the server did send.

The client side is recorded by `ClientAttempts.wrap` around a backend's `generate`; the server side
is `FaultCounters.log` (read it after `server.wait_settled()`). Questions are told apart by their
last user message, so each question of a case must have its own.
"""

from __future__ import annotations

import collections
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Iterable, Mapping

from finharness.core.backend import BackendError
from finharness.core.retry import error_kind
from finharness.core.types import GenerateRequest, GenerateResponse

from .fault_server import HEALTHY, RETRYABLE_FAULTS, SLOW_OK, Served

ACCEPTED = "ok"
"""What ClientAttempts records for an attempt whose reply the client accepted."""

TIMEOUT = "timeout"
"""The error kind of an attempt whose reply came too late (whatever the reply would have been)."""

CLIENT_KIND = {
    "429": "rate_limit", "429_retry_after": "rate_limit", "429_retry_after_date": "rate_limit",
    "500": "server_error", "502": "server_error", "503": "server_error", "529": "server_error",
    "400": "client_error",
    "reset": "connection",
    "timeout": TIMEOUT,
    "truncated_json": "bad_response", "empty_choices": "bad_response",
}
"""The error kind a remote backend gives each fault whose reply it gets in time."""


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(b.get("text", "") for b in content if isinstance(b, dict))  # Anthropic content blocks


def body_key(body: Mapping[str, Any]) -> str:
    """The question a request body asks: its last user message."""
    users = [m for m in body.get("messages", []) if m.get("role") == "user"]
    return _text(users[-1]["content"]) if users else ""


def request_key(request: GenerateRequest) -> str:
    """The question a GenerateRequest asks (the same text as body_key of the body it is sent as)."""
    users = [m for m in request.messages if m.role == "user"]
    return users[-1].content if users else ""


class ClientAttempts:
    """Every attempt a client made, per question, in order: ACCEPTED, or the kind of its BackendError."""

    def __init__(self) -> None:
        self.by_key: dict[str, list[str]] = collections.defaultdict(list)
        self.in_flight = 0
        self.max_in_flight = 0
        """Most attempts outstanding at once, as the client counts them (the server's own count
        also holds replies the client has given up on: see Reconciled.abandoned)."""

    def wrap(self, generate: Callable[[GenerateRequest], Awaitable[GenerateResponse]]
             ) -> Callable[[GenerateRequest], Awaitable[GenerateResponse]]:
        """`generate`, recording each call's outcome (one call is one attempt of the retry layer)."""
        async def recording(request: GenerateRequest) -> GenerateResponse:
            key = request_key(request)
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            try:
                response = await generate(request)
            except BackendError as error:
                self.by_key[key].append(error_kind(error))
                raise
            finally:
                self.in_flight -= 1
            self.by_key[key].append(ACCEPTED)
            return response
        return recording


@dataclass
class Reconciled:
    """A case whose server log and client attempts agree (see the module docstring)."""

    questions: int
    requests: int
    accepted: int
    """Questions that ended with an accepted reply."""
    retries: int
    """Requests the server saw minus the questions: each is an attempt that failed and was tried again
    (or, for a question that failed for good, every attempt but its last)."""
    injected: int
    """Retryable faults served."""
    late_healthy: int
    """Healthy replies ('ok', 'never_stops', 'slow_ok') the client did not accept: each was a timeout."""
    abandoned: int
    """Timed-out attempts beyond the requests the server held on purpose ('timeout', 'slow_ok'): replies
    the server was still making when the client gave up. Each may have stayed in the server's
    in-flight count after the client moved on, so the server can see up to this many requests more
    at once than the client ever had outstanding."""
    client_kinds: collections.Counter = field(default_factory=collections.Counter)
    """Outcomes of all the client's attempts (ACCEPTED or an error kind)."""
    served: dict[str, list[Served]] = field(default_factory=dict)
    """The server's log per question."""

    def healthy_sent(self, key: str) -> set[str]:
        """Healthy kinds the server sent in full for one question (what its accepted reply was one of)."""
        return {s.kind for s in self.served[key] if s.kind in HEALTHY and s.outcome == "sent"}


def reconcile(log: Iterable[Served], attempts: ClientAttempts) -> Reconciled:
    """Check that the server's log explains the client's attempts, question by question (raises
    AssertionError saying where it does not); return the counts."""
    served: dict[str, list[Served]] = collections.defaultdict(list)
    for entry in log:
        assert entry.outcome is not None, f"call server.wait_settled() first ({entry.kind} still running)"
        served[body_key(entry.body)].append(entry)
    tried = attempts.by_key
    assert set(served) == set(tried), (f"questions only the server saw: {sorted(set(served) - set(tried))}; "
                                       f"only the client tried: {sorted(set(tried) - set(served))}")
    problems = []
    for key, entries in served.items():
        outcomes, kinds = tried[key], [s.kind for s in entries]
        where = f"{key[:60]!r}: server served {[(s.kind, s.outcome) for s in entries]}, client saw {outcomes}"
        if len(outcomes) != len(entries):
            problems.append(f"{where}: {len(entries)} requests for {len(outcomes)} attempts")
            continue
        if ACCEPTED in outcomes[:-1]:
            problems.append(f"{where}: tried again after an accepted reply")
        errors = collections.Counter(o for o in outcomes if o not in (ACCEPTED, TIMEOUT))
        for kind, n in errors.items():
            explained = sum(1 for k in kinds if CLIENT_KIND.get(k) == kind)
            if n > explained:
                problems.append(f"{where}: {n} '{kind}' error(s), but only {explained} fault(s) that give one")
        accepted = outcomes.count(ACCEPTED)
        sent = sum(1 for s in entries if s.kind in HEALTHY and s.outcome == "sent")
        if accepted > sent:
            problems.append(f"{where}: {accepted} accepted repl(ies) but {sent} healthy one(s) sent")
        for s in entries:
            if s.kind == SLOW_OK and s.outcome != "client_gone":
                problems.append(f"{where}: a slow reply was not held until the client gave up")
    assert not problems, "the server's log does not explain the client's attempts:\n" + "\n".join(problems)
    entries = [s for ss in served.values() for s in ss]
    accepted = sum(1 for key in served if tried[key][-1] == ACCEPTED)
    client_kinds = collections.Counter(o for os in tried.values() for o in os)
    held = sum(1 for s in entries if s.kind in ("timeout", SLOW_OK))
    return Reconciled(
        questions=len(served), requests=len(entries), accepted=accepted,
        retries=len(entries) - len(served),
        injected=sum(1 for s in entries if s.kind in RETRYABLE_FAULTS),
        late_healthy=sum(1 for s in entries if s.kind in HEALTHY | {SLOW_OK}) - accepted,
        abandoned=client_kinds[TIMEOUT] - held,
        client_kinds=client_kinds, served=dict(served))
