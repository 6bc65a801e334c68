"""A real HTTP server on 127.0.0.1 that speaks the OpenAI and Anthropic shapes and injects faults.

    with fault_server(script=["429", "ok"]) as server:
        backend = from_spec(f"openai:fault-model@{server.base_url}")
        ...
        assert server.counters.by_kind["429"] == 1

Routes: POST /v1/chat/completions (OpenAI), POST /v1/messages (Anthropic),
GET /v1/models. Answers are deterministic: "echo <sha256 of the last user
message>" unless a `responder(body) -> str` is given. Each POST draws one
fault: `plan(body)` when a plan is set and names a kind (a fault bound to
a request, whatever order requests arrive in), else the next entry of
`script`, then, once the script is used up, a random kind from `kinds`
with probability `rate` (seeded), else "ok". The draw happens in arrival
order, so a seed fixes the sequence of faults. `server.rescript(...)`
starts a new case on a running server (new script or plan, fresh counters).
Only loopback is used; the server runs in a daemon thread.

What the server did is logged per request (`counters.log`): the kind it drew and how the request
ended (`Served.outcome`: the reply was sent, the client had gone before it could be, ...), so a test
can reconcile what it served with what the client counted whatever the timing (tests/servers/
reconcile.py). Slowness is never a fixed sleep shorter or longer than the client's timeout: a
'timeout' fault, and a 'slow_ok' reply (a healthy answer that comes too late: not an injected
fault, so never drawn at random and outside FAULT_KINDS; name it in a script or plan), hold the
request until the client hangs up, `timeout_sleep` seconds at most. Call `server.wait_settled()`
before reading outcomes: a request the client gave up on may still be ending in its thread.
"""

from __future__ import annotations

import collections
import contextlib
import email.utils
import hashlib
import json
import random
import select
import socket
import struct
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Iterator, Sequence

FAULT_KINDS = (
    "ok",                     # a normal answer
    "429",                    # rate limited, no Retry-After
    "429_retry_after",        # rate limited, Retry-After: <seconds>
    "429_retry_after_date",   # rate limited, Retry-After: <HTTP date>
    "500", "502", "503",      # server errors
    "529",                    # Anthropic 'overloaded'
    "400",                    # a bad request: never worth retrying
    "reset",                  # the socket is reset without any response
    "timeout",                # no answer for `timeout_sleep` seconds (past the client's timeout), then a close
    "truncated_json",         # 200 with half a JSON body
    "empty_choices",          # 200 with no choices (OpenAI) / no content and no stop_reason (Anthropic)
    "never_stops",            # a model that runs to max_tokens: finish_reason 'length' (a valid answer)
)

SLOW_OK = "slow_ok"
"""A healthy answer held until the client has given up on it (or `timeout_sleep` has passed): a slow
but healthy server, deterministically slower than any client timeout. Not a fault (a client should
retry it as a timeout); never drawn at random, so it is named only in a script or a plan."""

SERVABLE_KINDS = (*FAULT_KINDS, SLOW_OK)
"""What a script or plan may name."""

HEALTHY = frozenset({"ok", "never_stops"})
"""Kinds whose reply is an answer the client can accept (when it arrives in time)."""

OUTCOMES = ("sent", "client_gone", "reset", "unanswered", "error")
"""How a logged request ended: 'sent' -- its whole reply was written (the client may still have
given up on it just before); 'client_gone' -- the client had hung up before the reply could go out
(a 'timeout' fault and a 'slow_ok' reply end so unless the client never gives up); 'reset' -- the
'reset' fault; 'unanswered' -- a 'timeout' fault whose client was still waiting after
`timeout_sleep` s (the connection was closed without an answer); 'error' -- the server itself
failed (a bug in a responder or plan)."""

RETRYABLE_FAULTS = frozenset({"429", "429_retry_after", "429_retry_after_date", "500", "502", "503",
                              "529", "reset", "timeout", "truncated_json", "empty_choices"})
"""Faults a client should retry; '400' should fail at once and 'never_stops' is an answer."""

MODEL_ID = "fault-model"
MODEL_ROOT = "fault-server/rev-1"


@dataclass
class Served:
    """One generation request as the server handled it."""

    kind: str
    """What was drawn for it (a fault kind, 'ok', or 'slow_ok')."""

    body: dict
    """Its decoded JSON body."""

    outcome: str | None = None
    """How it ended (one of OUTCOMES); None while its handler is still at work."""


@dataclass
class FaultCounters:
    """What the server saw; read it after the calls have finished."""

    requests: int = 0
    """POSTs to a generation route."""

    by_kind: collections.Counter = field(default_factory=collections.Counter)
    """POSTs per fault kind served (including 'ok')."""

    served: list[str] = field(default_factory=list)
    """Fault kinds in arrival order."""

    log: list[Served] = field(default_factory=list)
    """Every generation request in arrival order, with how it ended (see Served)."""

    in_flight: int = 0
    max_in_flight: int = 0
    """Most generation requests being handled at the same time (a stalled 'timeout' request or
    'slow_ok' reply is left out while it stalls: its client is giving up on it). A request leaves the count
    just before its answer (or reset) goes out, so a client that sends its next request as
    soon as it has an answer is never counted twice."""

    bodies: list[dict] = field(default_factory=list)
    """Decoded JSON request bodies, in arrival order."""

    headers: list[dict] = field(default_factory=list)
    """Request headers (lower-cased names), in arrival order."""

    model_listings: int = 0
    """GET /v1/models calls."""

    def retryable_faults(self) -> int:
        return sum(n for kind, n in self.by_kind.items() if kind in RETRYABLE_FAULTS)

    def outcomes(self) -> collections.Counter:
        """(kind, outcome) -> requests."""
        return collections.Counter((s.kind, s.outcome) for s in self.log)


class FaultServer(ThreadingHTTPServer):
    daemon_threads = True  # a handler still holding a 'timeout' fault must not block shutdown

    def __init__(self, *, script: Sequence[str], rate: float, seed: int, kinds: Sequence[str],
                 retry_after: int, timeout_sleep: float, latency: float,
                 responder: Callable[[dict], str] | None, plan: Callable[[dict], str | None] | None = None,
                 usage: Callable[[dict, str], dict] | None = None):
        _check_kinds([*script, *kinds])
        super().__init__(("127.0.0.1", 0), _Handler)
        self.script = list(script)
        self.plan = plan
        self.rate = rate
        self.rng = random.Random(seed)
        self.kinds = list(kinds)
        self.retry_after = retry_after
        self.timeout_sleep = timeout_sleep
        self.latency = latency
        self.responder = responder
        self.usage = usage
        """(body, reply text) -> the token counts a reply reports ({"prompt_tokens", "completion_tokens"}, also for
        the Anthropic shape); None: words of the prompt and of the text."""
        self.counters = FaultCounters()
        self.lock = threading.Lock()
        self.settled = threading.Condition(self.lock)
        """Notified whenever a logged request gets its outcome."""
        self.unsettled = 0
        """Logged requests (of any case) whose outcome is not known yet."""
        self.closing = threading.Event()
        """Set at shutdown: requests being held let go."""

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"

    def rescript(self, script: Sequence[str] = (), *, plan: Callable[[dict], str | None] | None = None) -> None:
        """Start a new case: a new script and plan, fresh counters (rate, kinds and the seeded draw are kept).
        Call it between runs, when no request is in flight."""
        _check_kinds(script)
        with self.lock:
            self.script, self.plan, self.counters = list(script), plan, FaultCounters()

    def begin(self, body: dict, headers: dict) -> Served:
        """Draw the fault for one POST, count it in and log it."""
        with self.lock:
            c = self.counters
            planned = self.plan(body) if self.plan is not None else None
            if planned is not None:
                _check_kinds([planned])
                kind = planned
            elif c.requests < len(self.script):
                kind = self.script[c.requests]
            elif self.rate > 0 and self.rng.random() < self.rate:
                kind = self.rng.choice(self.kinds)
            else:
                kind = "ok"
            c.requests += 1
            c.by_kind[kind] += 1
            c.served.append(kind)
            entry = Served(kind, body)
            c.log.append(entry)
            self.unsettled += 1
            c.bodies.append(body)
            c.headers.append(headers)
            c.in_flight += 1
            c.max_in_flight = max(c.max_in_flight, c.in_flight)
            return entry

    def end(self) -> None:
        with self.lock:
            self.counters.in_flight -= 1

    def settle(self, entry: Served, outcome: str) -> None:
        """Record how a logged request ended (the first outcome recorded stands)."""
        with self.lock:
            if entry.outcome is None:
                entry.outcome = outcome
                self.unsettled -= 1
                self.settled.notify_all()

    def wait_settled(self, timeout: float = 30.0) -> None:
        """Wait until every logged request has its outcome (a request the client gave up on may still
        be ending in its own thread when the client's calls have all returned). `timeout` only bounds
        a broken case: it raises then, naming what is still pending."""
        with self.lock:
            if not self.settled.wait_for(lambda: self.unsettled == 0, timeout):
                pending = [s.kind for s in self.counters.log if s.outcome is None]
                raise AssertionError(f"fault server: {self.unsettled} request(s) still unsettled after "
                                     f"{timeout} s (this case: {pending})")

    def handle_error(self, request, client_address) -> None:
        pass  # resets and timeouts break sockets on purpose; no tracebacks on stderr


def _check_kinds(kinds: Sequence[str]) -> None:
    unknown = set(kinds) - set(SERVABLE_KINDS)
    if unknown:
        raise ValueError(f"unknown fault kind(s) {sorted(unknown)}; known: {SERVABLE_KINDS}")


def answer_text(body: dict) -> str:
    """The deterministic answer: a hash of the last user message."""
    users = [m for m in body.get("messages", []) if m.get("role") == "user"]
    content = users[-1]["content"] if users else ""
    if not isinstance(content, str):  # Anthropic content blocks
        content = "".join(b.get("text", "") for b in content if isinstance(b, dict))
    return "echo " + hashlib.sha256(content.encode()).hexdigest()[:16]


def _words(body: dict) -> int:
    system = body.get("system") or ""
    return len(str(system).split()) + sum(len(str(m.get("content", "")).split())
                                          for m in body.get("messages", []))


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, like real servers, so the client pool is exercised
    server: FaultServer

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def finish(self) -> None:
        with contextlib.suppress(OSError, ValueError):
            super().finish()

    _counted = False
    """This POST is in the server's in-flight count."""

    _entry: Served | None = None
    """This POST's line in the server's log (None for a GET)."""

    def _settle(self, outcome: str) -> None:
        if self._entry is not None:
            self.server.settle(self._entry, outcome)

    def _client_state(self, wait: float) -> str:
        """'gone' when the client has closed its end of the connection (or it broke), 'data' when it
        sent more, else 'waiting'; waits up to `wait` seconds for something to happen."""
        try:
            readable, _, _ = select.select([self.connection], [], [], wait)
            if not readable:
                return "waiting"
            return "data" if self.connection.recv(1, socket.MSG_PEEK) else "gone"
        except (OSError, ValueError):
            return "gone"

    def _hold_until_the_client_leaves(self) -> bool:
        """Hold this request until the client hangs up (True) or `timeout_sleep` has passed or the
        server is closing (False). No fixed sleep: however slow the machine, the client's timeout
        fires first, since the server does not answer before it has."""
        server = self.server
        deadline = time.monotonic() + server.timeout_sleep
        while not server.closing.is_set():
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            state = self._client_state(min(left, 0.05))
            if state == "gone":
                return True
            if state == "data":  # not expected (no pipelining): do not spin on it
                time.sleep(min(left, 0.05))
        return False

    def _leave(self) -> None:
        """Take this POST out of the in-flight count (once)."""
        if self._counted:
            self._counted = False
            self.server.end()

    def _send(self, status: int, payload: Any, headers: dict[str, str] | None = None,
              raw: bytes | None = None) -> None:
        data = raw if raw is not None else json.dumps(payload).encode()
        self._leave()  # before any byte of the answer: the client may start its next request at once
        if self._entry is not None and self._client_state(0) == "gone":
            self.close_connection = True
            return self._settle("client_gone")  # it timed out while this reply was being made
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)
            self.wfile.flush()
        except OSError:
            self._settle("client_gone")
            raise
        self._settle("sent")

    def do_GET(self) -> None:
        if self.path.rstrip("/") != "/v1/models":
            return self._send(404, {"error": {"message": f"no route {self.path}"}})
        with self.server.lock:
            self.server.counters.model_listings += 1
        self._send(200, {"object": "list", "data": [
            {"id": MODEL_ID, "object": "model", "owned_by": "fault-server", "root": MODEL_ROOT,
             "created": int(time.time())}]})

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        if self.path == "/v1/chat/completions":
            shape = "openai"
        elif self.path == "/v1/messages":
            shape = "anthropic"
        else:
            return self._send(404, {"error": {"message": f"no route {self.path}"}})
        server = self.server
        self._entry = server.begin(body, {k.lower(): v for k, v in self.headers.items()})
        kind = self._entry.kind
        self._counted = True
        try:
            if kind in ("timeout", SLOW_OK):
                # The client gives up on a stalled request, so it leaves the in-flight count now:
                # max_in_flight measures the client's concurrency, not abandoned work.
                self._leave()
                left = self._hold_until_the_client_leaves()
                if kind == "timeout":
                    self.close_connection = True  # never answer
                    return self._settle("client_gone" if left else "unanswered")
                if left:
                    self._settle("client_gone")  # the answer below goes to nobody
                kind = "ok"
            elif server.latency:
                time.sleep(server.latency)
            self._serve(kind, shape, body)
        except OSError:
            self._settle("client_gone")  # the client went away (e.g. after its timeout)
        except BaseException:
            self._settle("error")
            raise
        finally:
            self._leave()

    def _serve(self, kind: str, shape: str, body: dict) -> None:
        server = self.server
        if kind == "reset":
            # SO_LINGER 0 turns close() into a TCP RST: a connection reset with no response.
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self._leave()
            self.connection.close()
            self.close_connection = True
            return self._settle("reset")
        if kind.startswith("429"):
            headers = {}
            if kind == "429_retry_after":
                headers["Retry-After"] = str(server.retry_after)
            elif kind == "429_retry_after_date":
                headers["Retry-After"] = email.utils.formatdate(time.time() + server.retry_after,
                                                                usegmt=True)
            return self._send(429, _error(shape, "rate_limit_error", "slow down"), headers)
        if kind.isdigit():
            error_type = {"400": "invalid_request_error", "529": "overloaded_error"}.get(kind, "api_error")
            return self._send(int(kind), _error(shape, error_type, f"injected HTTP {kind}"))
        max_tokens = int(body.get("max_tokens") or 16)
        if kind == "never_stops":
            text, finished = " ".join(["loop"] * max_tokens), False
        else:
            text = server.responder(body) if server.responder else answer_text(body)
            finished = True
        payload = (_openai_answer if shape == "openai" else _anthropic_answer)(body, text, finished)
        if server.usage is not None:  # a server that counts its own way (e.g. more than max_tokens)
            _report_usage(shape, payload, server.usage(body, text))
        if kind == "empty_choices":
            if shape == "openai":
                payload["choices"] = []
            else:
                payload["content"], payload["stop_reason"] = [], None
        raw = None
        if kind == "truncated_json":
            full = json.dumps(payload).encode()
            raw = full[: len(full) // 2]
        self._send(200, payload, raw=raw)


def _error(shape: str, error_type: str, message: str) -> dict:
    if shape == "anthropic":
        return {"type": "error", "error": {"type": error_type, "message": message}}
    return {"error": {"type": error_type, "message": message, "code": None}}


def _openai_answer(body: dict, text: str, finished: bool) -> dict:
    completion_tokens = len(text.split())
    choice: dict[str, Any] = {"index": 0, "message": {"role": "assistant", "content": text},
                              "finish_reason": "stop" if finished else "length"}
    if body.get("logprobs"):
        top = int(body.get("top_logprobs") or 0)
        choice["logprobs"] = {"content": [
            {"token": tok, "logprob": -0.5, "top_logprobs": [
                {"token": tok, "logprob": -0.5}, *({"token": f"alt{i}", "logprob": -2.0 - i}
                                                   for i in range(top - 1))]}
            for tok in text.split()]}
    return {"id": "chatcmpl-fault", "object": "chat.completion", "model": body.get("model"),
            "choices": [choice],
            "usage": {"prompt_tokens": _words(body), "completion_tokens": completion_tokens,
                      "total_tokens": _words(body) + completion_tokens}}


def _anthropic_answer(body: dict, text: str, finished: bool) -> dict:
    return {"id": "msg_fault", "type": "message", "role": "assistant", "model": body.get("model"),
            "content": [{"type": "text", "text": text}],
            "stop_reason": "end_turn" if finished else "max_tokens",
            "usage": {"input_tokens": _words(body), "output_tokens": len(text.split())}}


def _report_usage(shape: str, payload: dict, usage: dict) -> None:
    prompt, completion = int(usage["prompt_tokens"]), int(usage["completion_tokens"])
    if shape == "anthropic":
        payload["usage"] = {"input_tokens": prompt, "output_tokens": completion}
    else:
        payload["usage"] = {"prompt_tokens": prompt, "completion_tokens": completion,
                            "total_tokens": prompt + completion}


@contextlib.contextmanager
def fault_server(script: Sequence[str] = (), *, rate: float = 0.0, seed: int = 0,
                 kinds: Sequence[str] = tuple(sorted(RETRYABLE_FAULTS)), retry_after: int = 2,
                 timeout_sleep: float = 30.0, latency: float = 0.0,
                 responder: Callable[[dict], str] | None = None,
                 plan: Callable[[dict], str | None] | None = None,
                 usage: Callable[[dict, str], dict] | None = None) -> Iterator[FaultServer]:
    """Run a FaultServer in a background thread; yields it (`.base_url`, `.counters`).

    script: fault kinds for the first POSTs, in order; rate/seed/kinds: the random
    mix after the script; retry_after: seconds sent in Retry-After; timeout_sleep:
    the longest a 'timeout' fault or a 'slow_ok' reply is held waiting for the client
    to give up (only a client that never does waits it out); latency: seconds each
    other POST takes (to make requests overlap); plan: body -> fault kind or None,
    consulted first (binds a fault to a request); usage: (body, text) -> the token counts a
    healthy reply reports (a server that reports more than max_tokens)."""
    server = FaultServer(script=script, rate=rate, seed=seed, kinds=kinds, retry_after=retry_after,
                         timeout_sleep=timeout_sleep, latency=latency, responder=responder, plan=plan,
                         usage=usage)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                              name="fault-server", daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.closing.set()
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
