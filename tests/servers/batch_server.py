"""A local stand-in for the OpenAI and Anthropic batch interfaces (and their live routes), on 127.0.0.1.

    with batch_server() as server:
        backend = from_spec(f"openai:m@{server.base_url}?batch=1&batch_poll=0.02&batch_gather=0.05")
        ...
        server.submitted      # Counter of custom_id over every batch created (a call sent twice shows as 2)

Routes, as the providers have them:

- OpenAI: POST /v1/files (multipart, purpose=batch; larger than `max_file_bytes`: 400), GET /v1/files/ID/content,
  POST /v1/batches (input_file_id, endpoint, completion_window, metadata), GET /v1/batches/ID, GET /v1/batches
  (listing, newest first), POST /v1/batches/ID/cancel; POST /v1/chat/completions (live).
- Anthropic: POST /v1/messages/batches ({"requests": [{custom_id, params}]}; more than `max_requests`: 413),
  GET /v1/messages/batches/ID, GET /v1/messages/batches/ID/results, GET /v1/messages/batches,
  POST /v1/messages/batches/ID/cancel; POST /v1/messages (live).
- GET /v1/models.

A batch moves one step per status request: OpenAI validating -> in_progress -> (half the requests processed per
poll) -> finalizing -> completed; Anthropic in_progress -> ... -> ended. A batch whose input is not valid (a line
that is not JSON, a custom_id twice, a url other than the endpoint, more than `max_requests`) fails in validation.
While `hold` is set nothing is processed. `expire_after_polls`: a batch still in progress after that many polls
expires (the next `expire_batches` batches only, where set), its unprocessed requests in the error file (`batch_expired`; Anthropic: `expired` results); a cancel does
the same with `batch_cancelled` / `canceled`. `fail(body)` -> (status, message) or None makes a request fail (in the
error file; Anthropic: an `errored` result), `fail_once` only the first time its custom_id is seen. Results come out
of order (shuffled, seeded).

Replies are deterministic functions of the request (`responder(body)`, default a letter from a hash of the last user
message), and so is usage: a word is a token; OpenAI reports as `prompt_tokens_details.cached_tokens` the tokens
of every message before the last when they reach `cache_min` (a dialogue's history, as a provider's cache would
have it from the turn before); Anthropic reports the prompt up to its last `cache_control` mark but one as
`cache_read_input_tokens` and the rest up to the last mark as `cache_creation_input_tokens`. The same request gets the same reply live and in a batch.

Moments a test can stop the client at (threading.Events in `reached`): "created" (a batch exists at the server),
"polled" (a status request answered in_progress), "results" (a results file was asked for). `pause_create` /
`pause_results`: the reply waits until `release` is set (the client can be killed while it waits).
"""

from __future__ import annotations

import collections
import contextlib
import hashlib
import json
import random
import threading
import time
import uuid
from dataclasses import dataclass, field
from http.server import ThreadingHTTPServer
from typing import Any, Callable, Iterator
from urllib.parse import urlparse

from .local_http import JSONHandler, serving


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return " ".join(str(b.get("text", "")) for b in content or () if isinstance(b, dict))


def default_answer(body: dict) -> str:
    users = [m for m in body.get("messages", []) if m.get("role") == "user"]
    last = _text(users[-1]["content"]) if users else ""
    return "答案：" + "ABCD"[hashlib.sha256(last.encode()).digest()[0] % 4]


def _tokens(text: str) -> int:
    return len(text.split())


@dataclass
class Job:
    """One batch at the server."""

    id: str
    provider: str
    requests: list[tuple[str, dict]]
    metadata: dict
    input_file: str | None
    created_at: float
    status: str
    polls: int = 0
    done: dict[str, dict] = field(default_factory=dict)
    """custom_id -> its result line (processed)."""
    cancel_asked: bool = False
    refused: str | None = None
    output_file: str | None = None
    error_file: str | None = None
    order: list[int] = field(default_factory=list)
    expire_after: int | None = None


class BatchStandIn(ThreadingHTTPServer):
    def __init__(self, responder: Callable[[dict], str] = default_answer, *, max_requests: int = 50_000,
                 max_file_bytes: int = 200 * 1024 * 1024, cache_min: int = 8, seed: int = 0):
        super().__init__(("127.0.0.1", 0), _Handler)
        self.responder = responder
        self.max_requests = max_requests
        self.max_file_bytes = max_file_bytes
        self.cache_min = cache_min
        self.rng = random.Random(seed)
        self.lock = threading.Lock()
        self.files: dict[str, bytes] = {}
        self.garble_results = False
        """While set, every results file is served with a line that is not JSON before its own."""
        self.jobs: dict[str, Job] = {}
        self.submitted: collections.Counter[str] = collections.Counter()
        """custom_id -> how many batches it was sent in."""
        self.live_calls = 0
        self.polls = 0
        self.hold = threading.Event()
        self.release = threading.Event()
        self.pause_create = False
        self.pause_results = False
        self.expire_after_polls: int | None = None
        self.expire_batches: int | None = None
        """How many of the next batches expire (None: every one while expire_after_polls is set)."""
        self.fail: Callable[[dict], tuple[int, str] | None] | None = None
        self.fail_once = False
        self._failed_once: set[str] = set()
        self.reached = {name: threading.Event() for name in ("created", "polled", "results")}

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"

    # -- replies --------------------------------------------------------------------------------------------
    def openai_reply(self, body: dict) -> dict:
        messages = body.get("messages", [])
        counts = [_tokens(_text(m.get("content"))) + 1 for m in messages]
        prompt = sum(counts)
        history = sum(counts[:-1])
        cached = history if history >= self.cache_min else 0
        text = self.responder(body)
        usage: dict[str, Any] = {"prompt_tokens": prompt, "completion_tokens": _tokens(text) or 1,
                                 "total_tokens": prompt + (_tokens(text) or 1)}
        if cached:
            usage["prompt_tokens_details"] = {"cached_tokens": cached}
        return {"id": "chatcmpl-" + uuid.uuid4().hex[:8], "object": "chat.completion", "model": body.get("model"),
                "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
                "usage": usage}

    def anthropic_reply(self, body: dict) -> dict:
        blocks: list[tuple[int, bool]] = []
        system = body.get("system")
        if isinstance(system, list):
            blocks += [(_tokens(_text([b])), "cache_control" in b) for b in system]
        elif system:
            blocks.append((_tokens(system), False))
        for m in body.get("messages", []):
            content = m.get("content")
            marked = isinstance(content, list) and any("cache_control" in b for b in content if isinstance(b, dict))
            blocks.append((_tokens(_text(content)) + 1, marked))
        marks = [i for i, (_, marked) in enumerate(blocks) if marked]
        # the prefix up to the mark before the last was cached by an earlier request; the rest up to the last is written
        read = sum(n for n, _ in blocks[:marks[-2] + 1]) if len(marks) > 1 else 0
        written = sum(n for n, _ in blocks[:marks[-1] + 1]) - read if marks else 0
        total = sum(n for n, _ in blocks)
        text = self.responder(body)
        return {"id": "msg_" + uuid.uuid4().hex[:8], "type": "message", "role": "assistant", "model": body.get("model"),
                "content": [{"type": "text", "text": text}], "stop_reason": "end_turn",
                "usage": {"input_tokens": total - read - written, "output_tokens": _tokens(text) or 1,
                          "cache_read_input_tokens": read, "cache_creation_input_tokens": written}}

    # -- batches ----------------------------------------------------------------------------------------------
    def create(self, provider: str, requests: list[tuple[str, dict]], metadata: dict, input_file: str | None,
               refused: str | None = None) -> Job:
        with self.lock:
            job = Job(("batch_" if provider == "openai" else "msgbatch_") + uuid.uuid4().hex[:12], provider,
                      requests, metadata, input_file, time.time(),
                      "validating" if provider == "openai" else "in_progress", refused=refused)
            if self.expire_batches is None or self.expire_batches > 0:
                job.expire_after = self.expire_after_polls
                if self.expire_batches:
                    self.expire_batches -= 1
            job.order = list(range(len(requests)))
            self.rng.shuffle(job.order)
            if refused is None:
                self.submitted.update(cid for cid, _ in requests)
            self.jobs[job.id] = job
        self.reached["created"].set()
        return job

    def _result(self, job: Job, custom_id: str, body: dict) -> dict:
        failure = self.fail(body) if self.fail else None
        if failure is not None and self.fail_once:
            if custom_id in self._failed_once:
                failure = None
            else:
                self._failed_once.add(custom_id)
        if job.provider == "openai":
            if failure is not None:
                status, message = failure
                return {"id": "req_" + uuid.uuid4().hex[:8], "custom_id": custom_id, "error": None,
                        "response": {"status_code": status, "body": {"error": {"message": message}}}}
            return {"id": "req_" + uuid.uuid4().hex[:8], "custom_id": custom_id, "error": None,
                    "response": {"status_code": 200, "body": self.openai_reply(body)}}
        if failure is not None:
            status, message = failure
            kind = "invalid_request_error" if status < 500 else "api_error"
            return {"custom_id": custom_id, "result": {"type": "errored", "error": {
                "type": "error", "error": {"type": kind, "message": message}}}}
        return {"custom_id": custom_id, "result": {"type": "succeeded", "message": self.anthropic_reply(body)}}

    def _unprocessed(self, job: Job, custom_id: str, why: str) -> dict:
        if job.provider == "openai":
            code = "batch_expired" if why == "expired" else "batch_cancelled"
            return {"id": "req_" + uuid.uuid4().hex[:8], "custom_id": custom_id, "response": None,
                    "error": {"code": code, "message": f"This request could not be executed before the batch {why}."}}
        return {"custom_id": custom_id, "result": {"type": "expired" if why == "expired" else "canceled"}}

    def _finish(self, job: Job, status: str, why: str | None = None) -> None:
        lines_ok, lines_bad = [], []
        for i in job.order:
            cid, _ = job.requests[i]
            line = job.done.get(cid) or self._unprocessed(job, cid, why or "expired")
            failed = (job.provider == "openai" and (line.get("response") or {}).get("status_code") != 200)
            (lines_bad if failed else lines_ok).append(line)
        if job.provider == "openai":
            for lines, attr in ((lines_ok, "output_file"), (lines_bad, "error_file")):
                if lines:
                    file_id = "file-" + uuid.uuid4().hex[:12]
                    self.files[file_id] = "".join(json.dumps(x, ensure_ascii=False) + "\n" for x in lines).encode()
                    setattr(job, attr, file_id)
        else:
            file_id = "results-" + job.id
            self.files[file_id] = "".join(json.dumps(x, ensure_ascii=False) + "\n" for x in lines_ok).encode()
            job.output_file = file_id
        job.status = status

    def advance(self, job: Job) -> None:
        """One status request's worth of progress."""
        with self.lock:
            job.polls += 1
            self.polls += 1
            openai = job.provider == "openai"
            if job.status == "validating":
                job.status = "failed" if job.refused else "in_progress"
                return
            if job.status in ("cancelling", "canceling"):
                self._finish(job, "cancelled" if openai else "ended", "cancelled")
                return
            if job.status == "finalizing":
                self._finish(job, "completed")
                return
            if job.status != "in_progress":
                return
            if job.expire_after is not None and job.polls > job.expire_after:
                self._finish(job, "expired" if openai else "ended", "expired")
                return
            if not self.hold.is_set():
                todo = [i for i in job.order if job.requests[i][0] not in job.done]
                for i in todo[:max(1, (len(todo) + 1) // 2)]:
                    cid, body = job.requests[i]
                    job.done[cid] = self._result(job, cid, body)
                if len(job.done) == len(job.requests):
                    if openai:
                        job.status = "finalizing"
                    else:
                        self._finish(job, "ended")

    def describe(self, job: Job) -> dict:
        total = len(job.requests)
        if job.provider == "openai":
            failed = sum(1 for x in job.done.values() if (x.get("response") or {}).get("status_code") != 200)
            return {"id": job.id, "object": "batch", "endpoint": "/v1/chat/completions", "status": job.status,
                    "input_file_id": job.input_file, "completion_window": "24h", "created_at": int(job.created_at),
                    "expires_at": int(job.created_at) + 86_400, "output_file_id": job.output_file,
                    "error_file_id": job.error_file, "metadata": job.metadata,
                    "errors": {"object": "list", "data": [{"code": "invalid", "message": job.refused}]}
                    if job.refused else None,
                    "request_counts": {"total": total, "completed": len(job.done) - failed, "failed": failed}}
        ended = job.status == "ended"
        kinds = collections.Counter(x["result"]["type"] for x in job.done.values())
        counts = {"processing": 0 if ended else total - len(job.done), "succeeded": kinds["succeeded"],
                  "errored": kinds["errored"], "canceled": (total - len(job.done)) if ended and job.cancel_asked else 0,
                  "expired": (total - len(job.done)) if ended and not job.cancel_asked else 0}
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(job.created_at))
        return {"id": job.id, "type": "message_batch", "processing_status": job.status, "request_counts": counts,
                "created_at": stamp, "expires_at": time.strftime("%Y-%m-%dT%H:%M:%SZ",
                                                                  time.gmtime(job.created_at + 86_400)),
                "ended_at": stamp if ended else None,
                "results_url": f"{self.base_url}/messages/batches/{job.id}/results" if ended else None}


class _Handler(JSONHandler):
    server: BatchStandIn

    def send_bytes(self, status: int, data: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _wait_release(self) -> None:
        self.server.release.wait(timeout=30)

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        server = self.server
        path = urlparse(self.path).path.rstrip("/")
        parts = path.split("/")[1:]  # v1, ...
        if path == "/v1/models":
            return self.model_listing({"id": "stand-in", "owned_by": "batch-stand-in"})
        if parts[1:2] == ["files"] and len(parts) == 4 and parts[3] == "content":
            return self._file(parts[2])
        if parts[1:2] == ["batches"]:
            if len(parts) == 2:
                jobs = [j for j in server.jobs.values() if j.provider == "openai"]
                return self.send_json(200, {"object": "list", "data": [server.describe(j) for j in jobs[::-1]]})
            return self._status(parts[2], "openai")
        if parts[1:3] == ["messages", "batches"]:
            if len(parts) == 3:
                jobs = [j for j in server.jobs.values() if j.provider == "anthropic"]
                return self.send_json(200, {"data": [server.describe(j) for j in jobs[::-1]], "has_more": False})
            if len(parts) == 5 and parts[4] == "results":
                job = server.jobs.get(parts[3])
                if job is None or job.output_file is None:
                    return self.send_json(404, {"type": "error", "error": {"type": "not_found_error",
                                                                           "message": "no results yet"}})
                return self._file(job.output_file)
            return self._status(parts[3], "anthropic")
        return self.no_route()

    def _file(self, file_id: str) -> None:
        server = self.server
        data = server.files.get(file_id)
        if data is None:
            return self.send_json(404, {"error": {"message": f"no file {file_id}"}})
        server.reached["results"].set()
        if server.pause_results:
            self._wait_release()
        self.send_bytes(200, (b'{"custom_id": "cut off mid-line\n' + data) if server.garble_results else data)

    def _status(self, job_id: str, provider: str) -> None:
        server = self.server
        job = server.jobs.get(job_id)
        if job is None or job.provider != provider:
            return self.send_json(404, {"error": {"message": f"no batch {job_id}"}})
        server.advance(job)
        described = server.describe(job)
        if job.status == "in_progress":
            server.reached["polled"].set()
        self.send_json(200, described)

    def do_POST(self) -> None:  # noqa: N802
        server = self.server
        path = urlparse(self.path).path.rstrip("/")
        parts = path.split("/")[1:]
        if path == "/v1/chat/completions":
            server.live_calls += 1
            return self.send_json(200, server.openai_reply(self.read_json()))
        if path == "/v1/messages":
            server.live_calls += 1
            return self.send_json(200, server.anthropic_reply(self.read_json()))
        if path == "/v1/files":
            return self._upload()
        if path == "/v1/batches":
            return self._create_openai(self.read_json())
        if path == "/v1/messages/batches":
            return self._create_anthropic(self.read_json())
        if parts[-1:] == ["cancel"]:
            job = server.jobs.get(parts[-2])
            if job is None:
                return self.send_json(404, {"error": {"message": "no such batch"}})
            with server.lock:
                job.cancel_asked = True
                if job.status in ("validating", "in_progress", "finalizing"):
                    job.status = "cancelling" if job.provider == "openai" else "canceling"
            return self.send_json(200, server.describe(job))
        return self.no_route()

    def _upload(self) -> None:
        server = self.server
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        boundary = self.headers.get("Content-Type", "").split("boundary=")[-1].encode()
        content, purpose = b"", b""
        for part in raw.split(b"--" + boundary):
            head, _, value = part.partition(b"\r\n\r\n")
            value = value[:-2] if value.endswith(b"\r\n") else value
            if b'name="file"' in head:
                content = value
            elif b'name="purpose"' in head:
                purpose = value
        if purpose != b"batch":
            return self.send_json(400, {"error": {"message": "purpose must be batch"}})
        if len(content) > server.max_file_bytes:
            return self.send_json(400, {"error": {"message": f"file too large: {len(content)} bytes, the limit is "
                                                             f"{server.max_file_bytes}"}})
        file_id = "file-" + uuid.uuid4().hex[:12]
        server.files[file_id] = content
        self.send_json(200, {"id": file_id, "object": "file", "bytes": len(content), "purpose": "batch",
                             "filename": "input.jsonl"})

    def _create_openai(self, body: dict) -> None:
        server = self.server
        data = server.files.get(str(body.get("input_file_id")))
        if data is None:
            return self.send_json(400, {"error": {"message": "no such input file"}})
        requests, refused, seen = [], None, set()
        for raw in data.decode().splitlines():
            try:
                line = json.loads(raw)
            except ValueError:
                refused = "a line of the input file is not JSON"
                break
            if line.get("custom_id") in seen:
                refused = f"custom_id {line.get('custom_id')} is not unique"
                break
            if line.get("url") != body.get("endpoint") or line.get("method") != "POST":
                refused = f"line url {line.get('url')} is not the batch's endpoint"
                break
            seen.add(line["custom_id"])
            requests.append((line["custom_id"], line["body"]))
        if refused is None and len(requests) > server.max_requests:
            refused = f"{len(requests)} requests, the limit is {server.max_requests}"
        job = server.create("openai", requests, dict(body.get("metadata") or {}), body.get("input_file_id"), refused)
        if server.pause_create:
            self._wait_release()
        self.send_json(200, server.describe(job))

    def _create_anthropic(self, body: dict) -> None:
        server = self.server
        given = body.get("requests") or []
        if len(given) > server.max_requests:
            return self.send_json(413, {"type": "error", "error": {"type": "request_too_large", "message":
                                        f"{len(given)} requests, the limit is {server.max_requests}"}})
        ids = [r.get("custom_id") for r in given]
        if len(set(ids)) < len(ids):
            return self.send_json(400, {"type": "error", "error": {"type": "invalid_request_error",
                                                                   "message": "custom_id values must be unique"}})
        job = server.create("anthropic", [(r["custom_id"], r["params"]) for r in given], {}, None)
        if server.pause_create:
            self._wait_release()
        self.send_json(200, server.describe(job))


@contextlib.contextmanager
def batch_server(responder: Callable[[dict], str] = default_answer, **options: Any) -> Iterator[BatchStandIn]:
    with serving(BatchStandIn(responder, **options)) as server:
        yield server
