"""One bad reply never stops a run (issue 26 item 5).

A reply a backend cannot turn into a usable response (a lone surrogate, NaN, infinite, negative or absurd usage,
the wrong type anywhere) fails that call with a reason naming what is wrong; a task raising in `solve` or `score`
fails that sample with its traceback in the record. The run goes on, ends `incomplete`, says whether a rerun can
help, and a rerun retries only what failed. Driven through a real HTTP server speaking the OpenAI shape and
through the CLI.
"""

from __future__ import annotations

import asyncio
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Iterator

import pytest
from typer.testing import CliRunner

from finharness.backends.fake import FakeBackend
from finharness.core.model import check_reply, reply_problem
from finharness.core.runner import RunOptions, run_task
from finharness.core.store import RunStore
from finharness.core.types import GenerateResponse, LoglikelihoodResponse, Score

from .asking_task import AskingTask

GOOD_USAGE = '{"prompt_tokens": 5, "completion_tokens": 2}'
BAD_BODIES = {
    "lone surrogate": '{"choices": [{"message": {"role": "assistant", "content": "A\\ud800"}, "finish_reason": "stop"}], '
                      f'"usage": {GOOD_USAGE}}}',
    "NaN usage": '{"choices": [{"message": {"role": "assistant", "content": "A"}, "finish_reason": "stop"}], '
                 '"usage": {"prompt_tokens": NaN, "completion_tokens": 2}}',
    "Infinity usage": '{"choices": [{"message": {"role": "assistant", "content": "A"}, "finish_reason": "stop"}], '
                      '"usage": {"prompt_tokens": 5, "completion_tokens": Infinity}}',
    "negative usage": '{"choices": [{"message": {"role": "assistant", "content": "A"}, "finish_reason": "stop"}], '
                      '"usage": {"prompt_tokens": -3, "completion_tokens": 2}}',
    "absurd usage": '{"choices": [{"message": {"role": "assistant", "content": "A"}, "finish_reason": "stop"}], '
                    '"usage": {"prompt_tokens": 99999999999, "completion_tokens": 2}}',
    "text of the wrong type": '{"choices": [{"message": {"role": "assistant", "content": {"x": 1}}, '
                              f'"finish_reason": "stop"}}], "usage": {GOOD_USAGE}}}',
}
GOOD_BODY = ('{"choices": [{"message": {"role": "assistant", "content": "Answer: A"}, "finish_reason": "stop"}], '
             f'"usage": {GOOD_USAGE}}}')


class Server:
    """An OpenAI-shaped server on 127.0.0.1 that answers the prompt holding `poison` with `bad_body`."""

    def __init__(self, bad_body: str, poison: str) -> None:
        self.bad_body, self.poison, self.bodies = bad_body, poison, []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.bodies.append(request)
                poisoned = server.poison in json.dumps(request["messages"], ensure_ascii=False)
                body = (server.bad_body if poisoned else GOOD_BODY).encode("utf-8")
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def serve() -> Iterator:
    started: list[Server] = []

    def start(bad_body: str, poison: str) -> Server:
        started.append(Server(bad_body, poison))
        return started[-1]

    yield start
    for server in started:
        server.close()


@pytest.mark.parametrize("case", sorted(BAD_BODIES))
def test_a_bad_reply_fails_its_sample_and_a_rerun_asks_only_it(tmp_path: Path, serve, case: str, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    server = serve(BAD_BODIES[case], poison="q3")
    spec = f"openai:m@{server.base_url}"
    out = tmp_path / "out"
    first = CliRunner().invoke(_app(), ["run", f"{_task_file()}:AskingTask", "--model", spec, "--out", str(out),
                                        "--concurrency", "1", "-q"])
    assert first.exit_code == 1, first.output  # incomplete, not a usage error (2) and not a traceback
    results = json.loads((out / "results.json").read_text(encoding="utf-8"))
    assert results["status"] == "incomplete" and results["counts"]["failed_samples"] == 1
    # bad_response: the backend's own check of the reply's shape (retried first); bad_reply: the handle's
    kinds = results["counts"]["failure_kinds"]
    assert sum(kinds.values()) == 1 and set(kinds) <= {"bad_reply", "bad_response"}, kinds
    lines = [json.loads(line) for line in (out / "samples.jsonl").read_text(encoding="utf-8").splitlines()]
    failed = [line for line in lines if line["failed"]]
    assert [line["id"] for line in failed] == ["s3"]
    assert "cannot be used" in failed[0]["failed"] or "bad_response" in failed[0]["failed"], failed[0]["failed"]
    assert sum(line["score"] is not None for line in lines) == 5  # every other sample scored
    assert "failed call" in first.output and "rerun the same command" in first.output
    asked = len(server.bodies)
    server.bad_body = GOOD_BODY  # the server answers properly now: the rerun asks only the failed call
    rerun = CliRunner().invoke(_app(), ["run", f"{_task_file()}:AskingTask", "--model", spec, "--out", str(out),
                                        "--concurrency", "1", "-q"])
    assert rerun.exit_code == 0, rerun.output
    assert len(server.bodies) == asked + 1


def _app():
    from finharness.cli import app

    return app


def _task_file() -> Path:
    return Path(__file__).with_name("asking_task.py")


@pytest.mark.parametrize("response, problem", [
    (GenerateResponse("ok", "stop", 1, 1), None),
    (GenerateResponse("a\udc80", "stop", 1, 1), "reply.text is not valid Unicode"),
    (GenerateResponse("ok", "stop", -1, 1), "reply.prompt_tokens is -1"),
    (GenerateResponse("ok", "stop", 1, float("nan")), "reply.completion_tokens is nan"),
    (GenerateResponse(["a"], "stop", 1, 1), "reply.text is a list"),  # type: ignore[arg-type]
    (LoglikelihoodResponse((-1.5, float("-inf")), (True, False), (1, 1), 4), None),  # a log-probability may be -inf
    (LoglikelihoodResponse((-1.5, float("nan")), (True, False), (1, 1), 4), "reply.logprobs[1] is nan"),
])
def test_check_reply_names_what_is_wrong(response, problem):
    kind = "generate" if isinstance(response, GenerateResponse) else "loglikelihood"
    found, _ = check_reply(kind, response)
    assert (found is None) if problem is None else found.startswith(problem), found


def test_a_prediction_that_cannot_be_stored_is_named():
    assert reply_problem({"choice": "A\ud800"}, "the prediction") == \
        "the prediction.choice is not valid Unicode (character 1: '\\ud800')"


class RaisingTask(AskingTask):
    """solve raises on s1, score raises on s4: bugs of the task, for one sample each."""

    name = "raising"

    async def solve(self, sample, models):
        if sample.id == "s1":
            raise KeyError("no such field")
        return await super().solve(sample, models)

    def score(self, sample, prediction):
        if sample.id == "s4":
            raise ZeroDivisionError("division by zero")
        return Score(value=float("A" in prediction))


def test_a_task_raising_fails_that_sample_with_its_traceback_and_the_run_goes_on(tmp_path: Path):
    store = RunStore(tmp_path / "s.sqlite")
    try:
        result = asyncio.run(run_task(RaisingTask(), {"model": FakeBackend(reply="A")}, store, RunOptions(),
                                      out_dir=tmp_path / "out"))
    finally:
        store.close()
    by_id = {r.id: r for r in result.records}
    assert by_id["s1"].failed.startswith("task_error: raising.solve raised KeyError")
    assert by_id["s4"].failed.startswith("task_error: raising.score raised ZeroDivisionError")
    assert not by_id["s1"].transient and not by_id["s4"].transient
    tracebacks = {r.id: [t["traceback"] for t in r.trace if t.get("event") == "task_error"] for r in result.records}
    assert "raise KeyError" in tracebacks["s1"][0] and "ZeroDivisionError" in tracebacks["s4"][0]
    assert by_id["s4"].prediction is not None  # solved; only its scoring failed
    results = result.results
    assert results["status"] == "incomplete" and results["metrics"]["accuracy"]["n"] == 4
    assert results["counts"]["failure_kinds"] == {"task_error": 2}
    assert any("a rerun will not change them" in note for note in results["notes"])
    assert not any("rerun the same command" in note for note in results["notes"])
    lines = (tmp_path / "out" / "samples.jsonl").read_text(encoding="utf-8")
    assert "ZeroDivisionError" in lines and "raise KeyError" in lines


# -- a reply SQLite could not store (moved here from the engine review's findings) ----------------------------

class HalfSurrogateBackend(FakeBackend):
    """Answers sample q0 with an unstorable reply, the others normally."""

    async def generate(self, request):
        response = await super().generate(request)
        if request.messages[-1].content == "q0":
            return GenerateResponse(text="A" + "\ud83d", finish_reason="stop", prompt_tokens=1,
                                    completion_tokens=1)
        return response


def test_an_unstorable_reply_fails_its_sample_and_the_run_goes_on(tmp_path: Path):
    """Issue 26 item 5: a reply holding half a surrogate pair fails that call with a reason naming it; every other
    sample is solved and stored, the run ends incomplete, and a rerun asks only that call again."""
    store = RunStore(tmp_path / "s.sqlite")
    first = asyncio.run(run_task(AskingTask(), {"model": HalfSurrogateBackend()}, store, RunOptions(concurrency=1)))
    assert first.results["status"] == "incomplete"
    failed = [r for r in first.records if r.failed]
    assert [r.id for r in failed] == ["s0"] and "not valid Unicode" in failed[0].failed and failed[0].transient
    assert first.results["counts"]["failure_kinds"] == {"bad_reply": 1}
    assert first.results["counts"]["calls"] == len(first.records) - 1
    rerun = asyncio.run(run_task(AskingTask(), {"model": FakeBackend()}, store, RunOptions(concurrency=1)))
    assert rerun.results["status"] == "complete" and rerun.results["counts"]["calls"] == 1
    store.close()
