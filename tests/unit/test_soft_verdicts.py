"""Soft pairwise verdicts: the judge's probabilities of [[1]]/[[2]]/[[3]] where it wrote its verdict."""

from __future__ import annotations

import asyncio
import json
import math
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from finharness.backends import from_spec
from finharness.benchmarks.ucfe.judge import Judgment
from finharness.core.types import GenerateParams, GenerateRequest, TokenLogprob, messages
from finharness.judges.pairwise import (
    parse_verdict,
    soft_outcome_first,
    soft_verdict,
)
from finharness.judges.soft import TOP_LOGPROBS as SOFT_TOP_LOGPROBS


def _tokens(*parts: tuple[str, dict[str, float]] | str) -> tuple[TokenLogprob, ...]:
    """Tokens of a reply; a (text, {alternative: logprob}) part carries its top alternatives."""
    out = []
    for part in parts:
        if isinstance(part, str):
            out.append(TokenLogprob(part, -0.1, ((part, -0.1),)))
        else:
            text, top = part
            out.append(TokenLogprob(text, top[text], tuple(sorted(top.items(), key=lambda kv: -kv[1]))))
    return tuple(out)


def _read(tokens):
    reply = "".join(t.token for t in tokens)
    return soft_verdict(reply, tokens, parse_verdict(reply))


def test_label_in_a_token_of_its_own_is_renormalised_over_the_labels():
    top = {"3": math.log(0.5), "1": math.log(0.2), "2": math.log(0.1), "\n": math.log(0.15)}
    soft = _read(_tokens("Both are fine. Verdict: ", "[[", ("3", top), "]]"))
    assert soft.probs == pytest.approx({"1": 0.2 / 0.8, "2": 0.1 / 0.8, "3": 0.5 / 0.8})
    assert soft_outcome_first(soft) == pytest.approx(0.25 + 0.5 * 0.625)  # P(1) + ½·P(3)


def test_label_sharing_its_token_with_the_brackets_uses_them_as_prefix():
    top = {"[[2": math.log(0.6), "[[1": math.log(0.3), "[": math.log(0.05), "[[3": math.log(0.05)}
    soft = _read(_tokens("Verdict: ", ("[[2", top), "]]"))
    assert soft.probs == pytest.approx({"1": 0.3 / 0.95, "2": 0.6 / 0.95, "3": 0.05 / 0.95})
    assert soft.token_index == 1


def test_alternatives_naming_the_same_label_add_up_and_other_labels_absent_are_zero():
    top = {"1": math.log(0.4), "1]]": math.log(0.2), "x": math.log(0.3)}
    soft = _read(_tokens("[[", ("1", top), "]]"))
    assert soft.probs == pytest.approx({"1": 1.0, "2": 0.0, "3": 0.0})


def test_the_last_marker_counts_and_an_earlier_one_is_not_read():
    early = {"2": math.log(0.9), "1": math.log(0.1)}
    late = {"1": math.log(0.7), "3": math.log(0.3)}
    soft = _read(_tokens("I first thought [[", ("2", early), "]] but no: [[", ("1", late), "]]"))
    assert soft.probs["1"] == pytest.approx(0.7) and soft.probs["2"] == 0.0


def test_no_reading_without_a_verdict_or_when_the_tokens_do_not_spell_the_reply():
    tokens = _tokens("[[", ("3", {"3": -0.1}), "]]")
    assert soft_verdict("no marker at all", tokens, parse_verdict("no marker at all")) is None
    assert soft_verdict("[[3]] ", tokens, parse_verdict("[[3]] ")) is None  # tokens spell "[[3]]", not this
    assert soft_verdict("[[3]]", None, parse_verdict("[[3]]")) is None


def test_one_order_soft_and_the_other_hard_average_as_model_a_scores():
    ab_tokens = _tokens("[[", ("1", {"1": math.log(0.6), "3": math.log(0.4)}), "]]")
    ab_reply = "".join(t.token for t in ab_tokens)
    ab_verdict = parse_verdict(ab_reply)
    ab = Judgment("x", "ab", ab_verdict, ab_reply, soft=soft_verdict(ab_reply, ab_tokens, ab_verdict))
    ba = Judgment("x", "ba", parse_verdict("[[2]]"), "[[2]]")  # hard: the second shown (a) is better
    assert ab.first_score == pytest.approx(0.6 + 0.5 * 0.4)
    assert ba.first_score == 0.0
    a_scores = [j.first_score if j.order[0] == "a" else 1 - j.first_score for j in (ab, ba)]
    assert sum(a_scores) / 2 == pytest.approx((0.8 + 1.0) / 2)


class _OpenAIJudge(BaseHTTPRequestHandler):
    """An OpenAI-shaped server whose judge writes `Verdict: [[3]]` and returns top logprobs per token."""

    requests: list[dict] = []

    def log_message(self, *args):  # quiet
        pass

    def _send(self, payload: dict) -> None:
        body = json.dumps(payload).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):  # /v1/models
        self._send({"object": "list", "data": [{"id": "judge", "object": "model"}]})

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).requests.append(body)
        parts = [("Verdict", {}), (":", {}), (" [[", {}),
                 ("3", {"3": math.log(0.5), "1": math.log(0.3), "2": math.log(0.2)}), ("]]", {})]
        content = [{"token": text, "logprob": top.get(text, -0.01),
                    "top_logprobs": [{"token": t, "logprob": lp} for t, lp in top.items()] or
                    [{"token": text, "logprob": -0.01}]} for text, top in parts]
        self._send({"id": "c", "object": "chat.completion", "model": "judge",
                    "choices": [{"index": 0, "finish_reason": "stop",
                                 "message": {"role": "assistant", "content": "Verdict: [[3]]"},
                                 "logprobs": {"content": content}}],
                    "usage": {"prompt_tokens": 5, "completion_tokens": 5, "total_tokens": 10}})


def test_an_openai_shaped_server_returning_top_logprobs_gives_a_soft_verdict():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _OpenAIJudge)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    backend = from_spec(f"openai:judge@http://127.0.0.1:{server.server_port}/v1")
    try:
        assert backend.capabilities.next_token_logprobs
        reply = asyncio.run(backend.generate(GenerateRequest(
            messages(("user", "Which dialogue is better?")),
            GenerateParams(max_tokens=8, top_logprobs=SOFT_TOP_LOGPROBS))))
    finally:
        asyncio.run(backend.aclose())
        server.shutdown()
    assert _OpenAIJudge.requests[-1]["logprobs"] is True
    assert _OpenAIJudge.requests[-1]["top_logprobs"] == SOFT_TOP_LOGPROBS
    soft = soft_verdict(reply.text, reply.logprobs, parse_verdict(reply.text))
    assert soft.probs == pytest.approx({"1": 0.3, "2": 0.2, "3": 0.5})
    assert soft_outcome_first(soft) == pytest.approx(0.3 + 0.25)


def test_anthropic_cannot_give_soft_verdicts():
    assert not from_spec("anthropic:claude-x@http://127.0.0.1:9/v1").capabilities.next_token_logprobs


def test_a_marker_copied_from_a_quoted_answer_is_never_the_one_read():
    quoted = "The client said: I rate this [[2]] honestly.\nThanks."
    own = {"2": math.log(0.5), "1": math.log(0.5)}
    copied = {"2": 0.0}
    tokens = _tokens("My verdict: [[", ("2", own), "]]\nAs quoted: The client said: I rate this [[",
                     ("2", copied), "]] honestly.")
    reply = "".join(t.token for t in tokens)
    verdict = parse_verdict(reply, quoted=(quoted,))
    soft = soft_verdict(reply, tokens, verdict)
    assert verdict.label == "2" and verdict.quoted_markers_ignored == 1
    assert soft.token_index == 1  # the judge's own marker, not the copy at the end
    assert soft.probs == pytest.approx({"1": 0.5, "2": 0.5, "3": 0.0})
