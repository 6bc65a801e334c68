"""Method-robust multiple choice (benchmarks/mc_methods.py): letters reading, auto, all, agreement and κ."""

from __future__ import annotations

import asyncio
import json
import math
from dataclasses import replace

import pytest

from finharness.backends.fake import FakeBackend
from finharness.benchmarks.demo.task import DATA, DemoTask
from finharness.benchmarks.mc_methods import (
    NO_POSITION,
    answer_offset,
    methods_to_run,
    read_letters,
    solve_choice,
    supported_methods,
)
from finharness.core.backend import Capabilities
from finharness.core.runner import RunOptions, run_task
from finharness.core.store import RunStore
from finharness.core.types import (
    GenerateParams,
    GenerateRequest,
    GenerateResponse,
    LoglikelihoodRequest,
    LoglikelihoodResponse,
    Message,
    TokenLogprob,
)
from finharness.rating.compare import cohen_kappa

from ..fakes import fake_backend, fake_models, fresh_store

QUESTIONS = [json.loads(line)["question"] for line in DATA.read_text(encoding="utf-8").splitlines() if line.strip()]


def tokens(*parts: tuple[str, float, dict[str, float]]) -> tuple[TokenLogprob, ...]:
    return tuple(TokenLogprob(text, lp, tuple((k, math.log(p)) for k, p in top.items())) for text, lp, top in parts)


# --- reading the letters --------------------------------------------------------------------------

def test_letter_alone_at_the_start():
    logprobs = tokens(("B", math.log(0.6), {"B": 0.6, "A": 0.3, "C": 0.05, "x": 0.05}))
    got = read_letters("B", logprobs, "ABCD")
    assert got["choice"] == "B" and got["offset"] == 0 and got["token"] == 0 and got["rule"] == "letters"
    assert got["probs"]["A"] == pytest.approx(0.3 / 0.95) and got["probs"]["D"] == 0.0


def test_letter_after_answer_prefix_shares_a_token_with_the_space():
    logprobs = tokens(("Answer", -0.01, {}), (":", -0.01, {}),
                      (" C", math.log(0.5), {" C": 0.5, " A": 0.4, " B": 0.1}), (".", -0.1, {}))
    got = read_letters("Answer: C.", logprobs, "ABC")
    assert got["offset"] == 8 and got["token"] == 2 and got["choice"] == "C"
    assert got["probs"] == pytest.approx({"A": 0.4, "B": 0.1, "C": 0.5})
    zh = tokens(("答案", -0.01, {}), ("：", -0.01, {}), ("A", math.log(0.2), {"A": 0.2, "D": 0.7}))
    assert read_letters("答案：A", zh, "ABCD")["choice"] == "D"  # the argmax, not the sampled token


def test_no_position_is_never_guessed():
    for reply in ("I think the answer is B", "According to B", "A bond pays 50", "The balance sheet", ""):
        assert answer_offset(reply, "ABCD") is None, reply
        got = read_letters(reply, tokens((reply, -0.1, {})) if reply else (), "ABCD")
        assert got["choice"] is None and got["rule"] == NO_POSITION
    # a position but no logprobs that spell the reply: unparseable too
    assert read_letters("B", None, "ABCD")["rule"] == NO_POSITION
    for reply, offset in (("[[B]]", 2), ("**Answer:** (C)", 13), ("The answer is D.", 14), ("  答案是 A", 6),
                          ("A.", 0), ("B is right", 0)):
        assert answer_offset(reply, "ABCD") == offset, reply


# --- Cohen's kappa by hand ----------------------------------------------------------------------------

def test_kappa_hand_computed():
    # 2x2: 10 items, table [[4, 1], [2, 3]]: p_o = 0.7, p_e = 0.5*0.6 + 0.5*0.4 = 0.5, κ = 0.4
    a = ["y"] * 5 + ["n"] * 5
    b = ["y"] * 4 + ["n"] + ["y"] * 2 + ["n"] * 3
    assert cohen_kappa(a, b) == pytest.approx(0.4)
    # 3x3 diagonal 2, 2, 2 of 9 with one A->B, one B->C, one C->A: p_o = 6/9, p_e = 1/3, κ = 0.5
    a = list("AAABBBCCC")
    b = list("AABBBCCCA")
    assert cohen_kappa(a, b) == pytest.approx(0.5)


# --- auto: the best method the backend offers ----------------------------------------------------

@pytest.mark.parametrize("caps, auto, everything", [
    (Capabilities(loglikelihood=True, next_token_logprobs=False), "ll", ("ll", "gen")),  # fake, llamacpp w/o logprobs
    (Capabilities(loglikelihood=False, next_token_logprobs=True), "letters", ("letters", "gen")),  # openai:
    (Capabilities(loglikelihood=False, next_token_logprobs=False), "gen", ("gen",)),  # anthropic:
    (Capabilities(loglikelihood=True, next_token_logprobs=True), "ll", ("ll", "letters", "gen")),  # llamacpp, vllm
])
def test_auto_and_all_per_capabilities(caps, auto, everything):
    assert methods_to_run("auto", caps) == (auto,)
    assert methods_to_run("all", caps) == everything == supported_methods(caps)
    assert methods_to_run("gen", caps) == ("gen",)


# --- the demo task end to end ---------------------------------------------------------------------

class Scripted(FakeBackend):
    """Per demo question: the letter ll prefers and the letter the reply gives ('?': no letter)."""

    def __init__(self, ll: str, gen: str, *, loglikelihood: bool = True, logprobs: bool = False):
        super().__init__(name=f"scripted-{ll}-{gen}-{loglikelihood}-{logprobs}")
        self.ll, self.gen = ll, gen
        self.capabilities = replace(self.capabilities, loglikelihood=loglikelihood, next_token_logprobs=logprobs)

    @staticmethod
    def item(text: str) -> int:
        return next(i for i, q in enumerate(QUESTIONS) if q in text)

    async def generate(self, request):
        letter = self.gen[self.item(request.messages[-1].content)]
        text = "I am not sure" if letter == "?" else f"Answer: {letter}"
        logprobs = None
        if request.params.top_logprobs:
            parts = ("I", " am", " not", " sure") if letter == "?" else ("Answer", ":", " " + letter)
            logprobs = tuple(TokenLogprob(p, -0.1, ((p, -0.1), (" A", -3.0))) for p in parts)
        return GenerateResponse(text=text, finish_reason="stop", logprobs=logprobs)

    async def loglikelihood(self, request):
        letter = self.ll[self.item(request.context)]
        lps = tuple(-1.0 if c.strip() == letter else -5.0 for c in request.continuations)
        return LoglikelihoodResponse(lps, tuple(lp == -1.0 for lp in lps), (1,) * len(lps))


def run_demo(tmp_path, backend, method, limit=4):
    store = RunStore(tmp_path / f"{method}.sqlite")
    return asyncio.run(run_task(DemoTask(method=method), {"model": backend}, store, RunOptions(limit=limit), out_dir=None))


def test_all_on_demo_with_ll_and_gen(tmp_path):
    # gold B C B C; ll chooses B C A D (2/4), gen B C B A (3/4); they agree on 2 of 4 items.
    # κ: p_o = 0.5; ll marginals A B C D = 1/4 each, gen A 1/4 B 1/2 C 1/4: p_e = 1/4, κ = (0.5-0.25)/0.75 = 1/3
    result = run_demo(tmp_path, Scripted(ll="BCAD", gen="BCBA"), "all")
    metrics = result.results["metrics"]
    assert metrics["accuracy"]["value"] == 0.5  # the headline is ll
    assert metrics["ll.accuracy"]["value"] == 0.5 and metrics["gen.accuracy"]["value"] == 0.75
    assert metrics["agreement.ll~gen"]["value"] == 0.5 and metrics["agreement.ll~gen"]["n"] == 4
    low, high = metrics["agreement.ll~gen"]["ci95"]
    assert low < 0.5 < high
    assert metrics["kappa.ll~gen"]["value"] == pytest.approx(1 / 3) and metrics["kappa.ll~gen"]["n"] == 4
    assert metrics["kappa.ll~gen"]["ci95"] is None
    assert not any(k.startswith("letters.") for k in metrics)
    assert result.results["extra"]["methods"]["ran"] == ["ll", "gen"]


def test_all_with_letters_counts_no_position(tmp_path):
    result = run_demo(tmp_path, Scripted(ll="BCAD", gen="BC?C", logprobs=True), "all")
    metrics = result.results["metrics"]
    assert metrics["letters.accuracy"]["value"] == 0.75 and metrics["gen.accuracy"]["value"] == 0.75
    assert metrics["letters.no_position"]["value"] == 0.25
    assert metrics["agreement.letters~gen"]["value"] == 1.0 and metrics["agreement.letters~gen"]["n"] == 3
    assert metrics["agreement.ll~letters"]["n"] == 3 and metrics["agreement.ll~letters"]["value"] == pytest.approx(2 / 3)
    extra = result.results["extra"]["methods"]
    assert extra["letters"]["no_position"] == 1 and extra["letters"]["items"] == 4
    assert any("no answer position" in n for n in result.results["notes"])
    record = next(r for r in result.records if r.id == "demo/2")
    assert record.score.extracted["choices"] == {"ll": "A", "letters": None, "gen": None}


@pytest.mark.parametrize("ll, logprobs, chosen", [(True, False, "ll"), (False, True, "letters"), (False, False, "gen")])
def test_auto_on_demo_records_its_choice(tmp_path, ll, logprobs, chosen):
    result = run_demo(tmp_path, Scripted(ll="BCAD", gen="BCBA", loglikelihood=ll, logprobs=logprobs), "auto")
    assert result.results["extra"]["methods"]["auto"] == chosen
    assert any(f"chose '{chosen}'" in n for n in result.results["notes"])
    expected = {"ll": 0.5, "letters": 0.75, "gen": 0.75}[chosen]
    assert result.results["metrics"]["accuracy"]["value"] == expected
    assert not any(k.startswith(("agreement.", "kappa.")) for k in result.results["metrics"])
    kinds = {t.get("kind") for r in result.records for t in r.trace if "kind" in t}
    assert kinds == {"loglikelihood" if chosen == "ll" else "generate"}


def test_all_on_demo_with_the_fake_backend(tmp_path):
    result = run_demo(tmp_path, FakeBackend(), "all", limit=None)
    metrics = result.results["metrics"]
    assert {"ll.accuracy", "gen.accuracy", "agreement.ll~gen", "kappa.ll~gen"} <= set(metrics)
    choices = [r.score.extracted["choices"] for r in result.records]
    both = [c for c in choices if c["ll"] and c["gen"]]
    assert metrics["agreement.ll~gen"]["n"] == len(both)
    assert metrics["agreement.ll~gen"]["value"] == pytest.approx(sum(c["ll"] == c["gen"] for c in both) / len(both))


def test_plain_gen_and_ll_keep_their_requests(tmp_path):
    gen = run_demo(tmp_path, FakeBackend(), "gen")
    assert all(isinstance(r.prediction, str) for r in gen.records)
    assert DemoTask().config() == {"max_tokens": 64}  # the default run key did not change
    ll = run_demo(tmp_path, FakeBackend(), "ll")
    assert all(set(r.prediction) == {"choice", "logprobs"} for r in ll.records)
    with pytest.raises(ValueError, match="is not one of"):
        DemoTask(method="ppl")


# --- CFinBench and FinKnow through a scripted handle ------------------------------------------------

def scripted(tmp_path, ll, reply, top=None, capabilities=None):
    """The shared fake (tests/fakes.py) behind a real model handle: ll prefers `ll(context)`, the reply is
    `reply(text)`, spelled one character a token, with the top alternatives `top` (letter -> probability) at
    every token when logprobs are asked; each call on a fresh store."""
    alternatives = tuple((k, math.log(p)) for k, p in (top or {}).items())

    def logprobs(text):
        return tuple(TokenLogprob(ch, -0.1, alternatives if ch in "ABCD" else ()) for ch in text)

    backend = FakeBackend(name="scripted", reply=reply, logprobs=logprobs, count_tokens=len,
                          logprob=lambda context, continuation: -1.0 if continuation.strip() == ll(context) else -4.0,
                          capabilities=capabilities)
    return fake_models(fresh_store(tmp_path), model=backend)


def solve_all(task, samples, models):
    from finharness.core.task import SampleRecord

    async def go():
        return [await task.solve(s, models) for s in samples]

    predictions = asyncio.run(go())
    records = [SampleRecord(s.id, p, task.score(s, p), metadata=s.metadata) for s, p in zip(samples, predictions)]
    return records, task.aggregate(samples, records)


def test_cfinbench_all_keeps_the_official_requests_and_prefixes_metrics(tmp_path):
    from finharness.benchmarks.cfinbench.task import CFinBenchTask
    from tests.benchmarks.test_cfinbench_task import PROMPTS, write_exam

    task = CFinBenchTask(method="all")
    samples = task.load(write_exam(tmp_path))
    assert [s.input["type"] for s in samples] == ["single_choice"] * 3 and task.config()["method"] == "all"
    # gold B D C; ll says B B C; the reply says 答案：B for all, letters read A ≫ B at that position
    models = scripted(tmp_path, ll=lambda text: "B" if "手续费" not in text else "C", reply=lambda text: "答案：B",
                      top={"A": 0.7, "B": 0.2})
    records, agg = solve_all(task, samples, models)
    first_ll, first_letters, first_gen = fake_backend(models).requests[:3]
    assert first_ll.context == PROMPTS[("val/single_choice/1-1/0", "ll", 0)]
    assert (first_gen.messages[0].content == PROMPTS[("val/single_choice/1-1/0", "gen", 0)]
            == first_letters.messages[0].content)
    assert first_gen.params == task.generate_params and first_letters.params.top_logprobs == 20
    assert first_letters.params.max_tokens == 16
    m = agg.metrics
    assert m["strict.score"].value == pytest.approx((0.5 + 1.0) / 2)  # headline = ll, macro over categories
    assert m["ll.strict.score"].value == m["strict.score"].value
    assert m["gen.strict.score"].value == pytest.approx((0.5 + 0.0) / 2)
    assert m["letters.strict.score"].value == 0.0
    assert m["agreement.ll~gen"].value == pytest.approx(2 / 3) and m["agreement.ll~gen"].n == 3
    assert m["agreement.letters~gen"].value == 0.0
    assert m["letters.no_position"].value == 0.0
    assert agg.extra["methods"]["ran"] == ["ll", "letters", "gen"]
    assert records[0].score.extracted["choices"] == {"ll": "B", "letters": "A", "gen": "B"}
    with pytest.raises(ValueError, match="single choice only"):
        CFinBenchTask(method="letters", types="judgment")


def test_cfinbench_plain_methods_are_unchanged(tmp_path):
    from finharness.benchmarks.cfinbench.task import CFinBenchTask
    from tests.benchmarks.test_cfinbench_task import write_exam

    for method in ("gen", "ll"):
        task = CFinBenchTask(method=method)
        samples = task.load(write_exam(tmp_path))
        models = scripted(tmp_path, ll=lambda text: "B", reply=lambda text: "答案：B")
        records, _ = solve_all(task, samples, models)
        sent = fake_backend(models).requests
        assert not any(isinstance(r.prediction, dict) and "methods" in r.prediction for r in records)
        assert len(sent) == len(samples)
        assert all(isinstance(r, LoglikelihoodRequest if method == "ll" else GenerateRequest) for r in sent)
        if method == "gen":
            assert all(r.params == task.generate_params and r.params.top_logprobs == 0 for r in sent)


def test_finknow_auto_without_ll_reads_letters_after_brackets(shared_data, tmp_path):
    from finharness.benchmarks.bizbench.finknow import FinKnowTask

    task = FinKnowTask(method="auto")
    samples = task.load(shared_data)[:4]
    models = scripted(tmp_path, ll=lambda text: "A", reply=lambda text: "[[B]]", top={"B": 0.5, "C": 0.3},
                      capabilities={"loglikelihood": False})
    records, agg = solve_all(task, samples, models)
    events = [(t["event"], t["detail"]) for t in models.model.trace if "event" in t]
    assert agg.extra["methods"]["auto"] == "letters" and events[0] == ("mc_method", "auto: letters")
    assert [r.score.extracted["choices"]["letters"] for r in records] == ["B"] * 4
    assert agg.metrics["accuracy"].value == pytest.approx(sum(s.target == "B" for s in samples) / 4)
    assert [m.role for m in fake_backend(models).requests[0].messages] == ["system", "user", "assistant", "user"]


def test_finknow_all_gives_agreement(shared_data, tmp_path):
    from finharness.benchmarks.bizbench.finknow import FinKnowTask

    task = FinKnowTask(method="all")
    samples = task.load(shared_data)[:4]
    models = scripted(tmp_path, ll=lambda text: "A", reply=lambda text: "The answer is [[A]]", top={"A": 0.9})
    records, agg = solve_all(task, samples, models)
    m = agg.metrics
    assert m["agreement.ll~gen"].value == 1.0 and m["agreement.ll~letters"].value == 1.0
    assert m["kappa.ll~gen"].value is None  # every item in one category: κ undefined
    assert {"ll.accuracy", "letters.accuracy", "gen.accuracy", "gen.robust"} <= set(m)


# --- the HTML report --------------------------------------------------------------------------------

def test_report_shows_the_agreement_matrix_and_per_method_scores(tmp_path):
    from finharness.report import build_html_report, load_run

    out = tmp_path / "run"
    store = RunStore(tmp_path / "s.sqlite")
    asyncio.run(run_task(DemoTask(method="all"), {"model": Scripted(ll="BCAD", gen="BCBA", logprobs=True)}, store, RunOptions(limit=4), out_dir=out))
    html = build_html_report([load_run(out)])
    assert "Methods compared (ll / letters / gen)" in html and 'id="mc-methods-demo"' in html
    assert "agreement between methods" in html
    assert "ll × gen: 50.0% (κ = 0.333, n = 4)" in html  # the matrix cell's tooltip
    assert "letters ~ gen" in html and "Per-method scores" in html
    plain = run_demo(tmp_path, FakeBackend(), "gen")
    assert plain.results["metrics"] and "agreement" not in "".join(plain.results["metrics"])


class _RecordingModel:
    """Just enough of a model handle for solve_choice: what it was asked, in order."""

    capabilities = Capabilities(loglikelihood=True)

    def __init__(self):
        self.asked: list[str] = []

    def note(self, *_args):
        pass

    async def chat(self, messages, params):
        self.asked.append(f"chat:{messages[-1].content}")
        return type("Reply", (), {"text": "B", "logprobs": None})()


def test_solve_choice_dispatches_each_method_and_builds_the_prompt_only_when_sent():
    model = _RecordingModel()
    built: list[str] = []

    def messages():
        built.append("prompt")
        return (Message("user", "Q?"),)

    async def loglikelihood():
        model.asked.append("ll")
        return {"choice": "A", "rule": "loglikelihood"}

    def solve(method):
        return asyncio.run(solve_choice(method, model, messages=messages, params=GenerateParams(max_tokens=4),
                                        letters="AB", loglikelihood=loglikelihood))

    assert solve("ll") == {"choice": "A", "rule": "loglikelihood"} and built == [] and model.asked == ["ll"]
    assert solve("gen") == "B" and built == ["prompt"] and model.asked[-1] == "chat:Q?"
    both = solve("all")
    assert list(both["methods"]) == ["ll", "gen"] and both["methods"]["gen"] == "B"
    assert model.asked[-2:] == ["ll", "chat:Q?"]
