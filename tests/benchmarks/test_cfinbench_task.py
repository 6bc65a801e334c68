"""CFinBench task: loading (and its errors), solve() with a fake model, score and aggregate."""

from __future__ import annotations

import asyncio
import json
import tempfile
from pathlib import Path

import pytest

from finharness import open_model
from finharness.backends.fake import FakeBackend
from finharness.benchmarks.cfinbench.categories import OFFICIAL_CATEGORIES
from finharness.benchmarks.cfinbench.task import CFinBenchTask
from finharness.core.store import RunStore
from finharness.core.task import Models, SampleRecord
from finharness.core.types import GenerateRequest, LoglikelihoodRequest
from finharness.data.errors import DataError

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
EXAM = json.loads((GOLDEN / "cfinbench_tiny_exam.json").read_text(encoding="utf-8"))["files"]
PROMPTS = {(c["id"], c["method"], c["shots"]): c["prompt"]
           for c in json.loads((GOLDEN / "cfinbench_prompts.json").read_text(encoding="utf-8"))["cases"]}


def write_exam(root: Path, files: dict | None = None) -> Path:
    """Write the tiny exam (or `files`: {'SPLIT/TYPE/CAT': [objects]}) in the CFinBench layout where a data root
    holds CFinBench's questions (ROOT/cfinbench/); returns the data root (what --data-dir names)."""
    for name, objects in (files or EXAM).items():
        path = root / "cfinbench" / f"{name}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(json.dumps(o, ensure_ascii=False) + "\n" for o in objects), encoding="utf-8")
    return root


def fake_model(reply=lambda prompt: "答案：A", logprobs=None, count_tokens=len) -> FakeBackend:
    """The suite's one fake model (backends/fake.py): `reply` of the last user message, `logprobs(context,
    continuation)`, tokens counted as characters unless `count_tokens` says otherwise."""
    return FakeBackend(reply=reply, logprob=logprobs, count_tokens=count_tokens)


def chats(backend: FakeBackend) -> list[tuple[tuple, object]]:
    """(messages, params) of every generation the fake was sent, in order."""
    return [(r.messages, r.params) for r in backend.requests if isinstance(r, GenerateRequest)]


def truncations(records) -> list[str]:
    """The truncation policies the task applied, as the handle recorded them in the samples' traces."""
    return [t["policy"] for r in records for t in r.trace if t.get("event") == "truncation"]


def run(task, samples, backend: FakeBackend):
    """solve + score every sample through the real model handle on a store of its own, as the runner does (each
    sample's trace kept on its record)."""
    handle = open_model(backend, RunStore(Path(tempfile.mkdtemp(prefix="cfin-store-")) / "store.sqlite"))

    async def go():
        solved = []
        for s in samples:
            trace: list = []
            solved.append((await task.solve(s, Models({"model": handle.bind(trace)})), tuple(trace)))
        return solved

    return [SampleRecord(s.id, p, task.score(s, p), trace=trace) for s, (p, trace) in zip(samples, asyncio.run(go()))]


# --- loading ----------------------------------------------------------------------------------

def test_load_ids_order_and_names(tmp_path):
    samples = CFinBenchTask().load(write_exam(tmp_path))
    assert [s.id for s in samples] == [
        "val/single_choice/1-1/0", "val/single_choice/1-1/1", "val/single_choice/2-8/0",
        "val/multi_choice/1-1/0", "val/multi_choice/1-1/1", "val/judgment/4-11/0", "val/judgment/4-11/1"]
    first = samples[0]
    assert first.target == "B"
    assert first.input["category_name"] == "政治经济学"
    assert first.metadata["group"] == "1" and first.metadata["group_name"] == "Financial Subject"
    assert first.metadata["source"].endswith("val/single_choice/1-1.jsonl:1")
    assert "examples" not in first.input


def test_categories_match_the_official_mapping(shared_data):
    mapping = json.loads((shared_data / "cfinbench" / "category_mapping.json").read_text(encoding="utf-8"))
    assert {k: v[0] for k, v in OFFICIAL_CATEGORIES.items()} == mapping["zh"]
    assert {k: v[1] for k, v in OFFICIAL_CATEGORIES.items()} == mapping["en"]


def test_unknown_category_takes_categories_json_or_the_stem(tmp_path):
    write_exam(tmp_path, {"val/single_choice/accounting": EXAM["val/single_choice/1-1"],
                          "val/single_choice/zz_other": EXAM["val/single_choice/2-8"]})
    (tmp_path / "cfinbench" / "categories.json").write_text(json.dumps({"accounting": {"zh": "会计", "group": "CPA"}}),
                                              encoding="utf-8")
    task = CFinBenchTask()
    by_category = {s.input["category"]: s for s in task.load(tmp_path)}
    assert by_category["accounting"].input["category_name"] == "会计"
    assert by_category["accounting"].metadata["group"] == "CPA"
    assert by_category["zz_other"].input["category_name"] == "zz_other"
    assert task.prompt(by_category["accounting"]).startswith("请你做一道关于会计的单项选择题")


def test_missing_dev_file_for_three_shots_names_it(tmp_path):
    files = dict(EXAM)
    del files["dev/judgment/4-11"]
    with pytest.raises(DataError) as err:
        CFinBenchTask(shots=3).load(write_exam(tmp_path, files))
    assert str(tmp_path / "cfinbench" / "dev" / "judgment" / "4-11.jsonl") in str(err.value)
    assert "shots=0" in str(err.value)


def test_malformed_line_names_file_and_line(tmp_path):
    write_exam(tmp_path, {"val/single_choice/1-1": EXAM["val/single_choice/1-1"]})
    path = tmp_path / "cfinbench" / "val" / "single_choice" / "1-1.jsonl"
    path.write_text(path.read_text(encoding="utf-8") + '{"text": "broken", \n', encoding="utf-8")
    with pytest.raises(DataError) as err:
        CFinBenchTask().load(tmp_path)
    assert err.value.path == str(path) and err.value.line == 3
    assert "malformed JSON" in str(err.value)


def test_missing_answer_in_val_names_file_and_line(tmp_path):
    objects = [dict(o) for o in EXAM["val/judgment/4-11"]]
    del objects[1]["Answer"]
    write_exam(tmp_path, {"val/judgment/4-11": objects})
    with pytest.raises(DataError) as err:
        CFinBenchTask().load(tmp_path)
    assert err.value.path.endswith("val/judgment/4-11.jsonl") and err.value.line == 2
    assert "'Answer'" in str(err.value)


@pytest.mark.parametrize("bad, message", [
    ({"text": "Q", "OptionList": ["A. x", "B. y"], "Answer": "D"}, "OptionList lacks"),
    ({"text": "Q", "Answer": "B"}, "OptionList"),
    ({"OptionList": ["A. x"], "Answer": "A"}, "'text'"),
])
def test_bad_items_are_rejected(tmp_path, bad, message):
    write_exam(tmp_path, {"val/single_choice/1-1": [EXAM["val/single_choice/1-1"][0], bad]})
    with pytest.raises(DataError, match=message) as err:
        CFinBenchTask().load(tmp_path)
    assert err.value.line == 2


def test_missing_split_folder(tmp_path):
    with pytest.raises(DataError, match="no 'val' split folder"):
        CFinBenchTask().load(tmp_path)


def test_options_are_validated():
    with pytest.raises(ValueError, match="shots"):
        CFinBenchTask(shots=5)
    with pytest.raises(ValueError, match="single choice only"):
        CFinBenchTask(method="ll", types="single_choice,judgment")
    with pytest.raises(ValueError, match="unknown option"):
        CFinBenchTask(temperature=1.0)
    task = CFinBenchTask(shots="3", types="judgment")
    assert task.config()["shots"] == 3 and task.config()["types"] == ("judgment",)
    assert CFinBenchTask(method="ll").config()["types"] == ("single_choice",)


# --- solve with a fake model ------------------------------------------------------------------

# Scripted replies for the tiny exam's val split (hand-checked outcomes in the comments:
# official / robust extraction).
SCRIPT = {
    "剩余价值率": "答案：B",            # gold B: 1 / 1
    "资本有机构成": "The answer is D",   # gold D: 'T' 0 / 1
    "手续费": "答案：C",                 # gold C: 1 / 1
    "不变资本的有": "答案：A、C",        # gold ACD: AC -> strict 0, paper 2/3, opencompass 1/2
    "影响利润率": "答案: D B",           # gold BD: official 'DB' (oc 1/2), robust 'BD' (oc 1); strict 1, paper 1
    "完全民事行为能力人": "不正确",       # gold 错误: official '正确' 0 / robust 错误 1
    "诚信原则": "答案：正确",            # gold 正确: 1 / 1
}


def scripted(prompt: str) -> str:
    """The scripted reply for the question asked last (its stem, not its options or examples)."""
    question = prompt.rsplit("\n答案：", 1)[0].rsplit("题目如下：", 1)[-1].rsplit("\n\n", 1)[-1]
    stem = question.strip().split("\n")[0]
    return next(reply for key, reply in SCRIPT.items() if key in stem)


def test_gen_zero_shot_end_to_end(tmp_path):
    task = CFinBenchTask()
    samples = task.load(write_exam(tmp_path))
    model = fake_model(scripted)
    records = run(task, samples, model)
    sent = {s.id: messages[-1].content for s, (messages, _) in zip(samples, chats(model))}
    for key in [("val/single_choice/1-1/0", "gen", 0), ("val/multi_choice/1-1/0", "gen", 0),
                ("val/judgment/4-11/0", "gen", 0)]:
        assert sent[key[0]] == PROMPTS[key]
    params = chats(model)[0][1]
    assert (params.temperature, params.top_p, params.max_tokens) == (0.0, 1.0, 256)
    assert [len(messages) for messages, _ in chats(model)] == [1] * 7 and chats(model)[0][0][0].role == "user"
    assert truncations(records) == []

    by_id = {r.id: r for r in records}
    first_d = by_id["val/single_choice/1-1/1"].score
    assert first_d.extracted == {"official": "T", "robust": "D", "robust_rule": "english_cue"}
    assert first_d.value == 0.0 and first_d.values["robust.strict"] == 1.0 and first_d.rule == "official"

    agg = task.aggregate(samples, records)
    m = {k: v.value for k, v in agg.metrics.items()}
    # official: single macro (1/2 + 1)/2 = .75; multiple strict .5, paper 5/6, oc .5; judgment .5
    assert m["strict.single"] == pytest.approx(0.75) and m["strict.multiple"] == pytest.approx(0.5)
    assert m["strict.judgment"] == pytest.approx(0.5)
    assert m["strict.score"] == pytest.approx(0.4 * 0.75 + 0.4 * 0.5 + 0.2 * 0.5)
    assert m["paper.multiple"] == pytest.approx(5 / 6)
    assert m["paper.score"] == pytest.approx(0.4 * 0.75 + 0.4 * 5 / 6 + 0.2 * 0.5)
    assert m["opencompass.score"] == pytest.approx(0.4 * 0.75 + 0.4 * 0.5 + 0.2 * 0.5)
    assert m["micro"] == pytest.approx(4 / 7)
    # robust beside it: single 1, multiple strict .5 / paper 5/6 / oc .75, judgment 1
    assert m["robust.strict.score"] == pytest.approx(0.4 + 0.2 + 0.2)
    assert m["robust.paper.score"] == pytest.approx(0.4 + 0.4 * 5 / 6 + 0.2)
    assert m["robust.opencompass.score"] == pytest.approx(0.4 + 0.4 * 0.75 + 0.2)
    assert m["robust.micro"] == pytest.approx(6 / 7)
    assert m["unparseable_rate"] == 0.0 and m["robust.unparseable_rate"] == 0.0
    assert agg.metrics["strict.score"].n == 7 and agg.metrics["strict.single"].n == 3

    assert agg.groups["category"]["1-1"]["strict.single"].value == pytest.approx(0.5)
    assert agg.groups["type"]["judgment"]["robust.strict.judgment"].value == pytest.approx(1.0)
    assert set(agg.groups["group"]) == {"1", "2", "4"}
    assert agg.groups["group"]["2"]["strict.score"].value == pytest.approx(1.0)  # single only, renormalised
    assert agg.extra["robust_rules"]["answer_cue"] == 5
    assert agg.notes == []


def test_gen_three_shot_sends_the_golden_prompt(tmp_path):
    task = CFinBenchTask(shots=3)
    samples = task.load(write_exam(tmp_path))
    model = fake_model(scripted)
    run(task, samples, model)
    sent = {s.id: messages[-1].content for s, (messages, _) in zip(samples, chats(model))}
    for question_type, category in [("single_choice", "1-1"), ("multi_choice", "1-1"), ("judgment", "4-11")]:
        sample_id = f"val/{question_type}/{category}/0"
        assert sent[sample_id] == PROMPTS[(sample_id, "gen", 3)]
    # the fourth dev item is never shown
    assert all("本题不会出现" not in prompt for prompt in sent.values())


def test_loglikelihood_picks_the_most_likely_option(tmp_path):
    task = CFinBenchTask(method="ll")
    samples = task.load(write_exam(tmp_path))
    assert {s.input["type"] for s in samples} == {"single_choice"}
    gold = {"剩余价值率": " B", "资本有机构成": " A", "手续费": " C"}  # the second is made wrong on purpose

    def logprobs(context, continuation):
        question = context.rsplit("题目如下：\\n", 1)[1]  # the official PPL string: a literal backslash-n
        return -0.5 if gold[next(k for k in gold if k in question)] == continuation else -3.0

    model = fake_model(logprobs=logprobs)
    records = run(task, samples, model)
    first = [r for r in model.requests if isinstance(r, LoglikelihoodRequest)][0]
    assert first.context == PROMPTS[("val/single_choice/1-1/0", "ll", 0)]
    assert first.continuations == (" A", " B", " C", " D")
    assert chats(model) == []
    assert [r.prediction["choice"] for r in records] == ["B", "A", "C"]
    assert records[0].prediction["logprobs"]["B"] == -0.5
    assert [r.score.value for r in records] == [1.0, 0.0, 1.0]
    assert records[0].score.rule == "loglikelihood"
    agg = task.aggregate(samples, records)
    assert agg.metrics["strict.single"].value == pytest.approx((0.5 + 1.0) / 2)
    assert agg.metrics["strict.score"].value == pytest.approx(0.75)  # single only: weight renormalised to 1
    assert any("renormalised" in note for note in agg.notes)
    assert any("method 'll'" in note for note in agg.notes)
    # a bare letter from `finharness score` reads the same way
    assert task.score(samples[0], "B").value == 1.0


def test_paper_truncation_cuts_long_prompts_and_records_it(tmp_path):
    long_item = dict(EXAM["val/single_choice/1-1"][0], text="很长的题干。" * 500)
    write_exam(tmp_path, {"val/single_choice/1-1": [long_item, EXAM["val/single_choice/1-1"][1]]})
    task = CFinBenchTask()
    samples = task.load(tmp_path)
    model = fake_model()
    cut = run(task, samples, model)
    long_prompt, short_prompt = (messages[-1].content for messages, _ in chats(model))
    assert len(long_prompt) == 2048 and task.prompt(samples[0]).startswith(long_prompt)
    assert short_prompt == task.prompt(samples[1])
    assert truncations(cut) == ["paper-2048"]

    untruncated = fake_model()
    whole = run(CFinBenchTask(truncate="none"), samples, untruncated)
    assert chats(untruncated)[0][0][-1].content == task.prompt(samples[0]) and truncations(whole) == []

    uncountable_task = CFinBenchTask()
    blind = fake_model(count_tokens=lambda text: None)
    records = run(uncountable_task, uncountable_task.load(tmp_path), blind)
    assert chats(blind)[0][0][-1].content == task.prompt(samples[0])
    agg = uncountable_task.aggregate(uncountable_task.load(tmp_path), records)
    assert any("could not be applied" in note for note in agg.notes)
    # a resumed run aggregates stored records with a task that solved nothing: the note comes from the traces
    fresh = CFinBenchTask()
    assert any("could not be applied" in note for note in fresh.aggregate(fresh.load(tmp_path), records).notes)
    assert not any("could not be applied" in note for note in fresh.aggregate(
        fresh.load(tmp_path), run(CFinBenchTask(), fresh.load(tmp_path), fake_model())).notes)


def test_truncation_flag_from_the_runner_is_counted(tmp_path):
    task = CFinBenchTask()
    samples = task.load(write_exam(tmp_path))
    records = run(task, samples, fake_model(scripted))
    cut = {"role": "model", "event": "truncation", "policy": "paper-2048", "detail": ""}
    flagged = [SampleRecord(r.id, r.prediction, r.score, trace=[cut]) if i == 0 else r
               for i, r in enumerate(records)]
    agg = task.aggregate(samples, flagged)
    assert agg.extra["counts"]["truncated"] == 1
    assert any("1 prompts right-truncated" in note for note in agg.notes)


def test_unparseable_replies_are_counted_never_guessed(tmp_path):
    task = CFinBenchTask(extract="robust")
    samples = task.load(write_exam(tmp_path))
    records = run(task, samples, fake_model(lambda prompt: "我不知道。"))
    assert all(r.score.parsed is False and r.score.rule == "unparseable" for r in records)
    agg = task.aggregate(samples, records)
    assert agg.metrics["unparseable_rate"].value == 1.0
    assert agg.metrics["official.unparseable_rate"].value == 1.0
    assert agg.metrics["strict.score"].value == 0.0
    # the opencompass quirk: an empty multiple-choice prediction earns 1 of 2 points
    assert agg.metrics["opencompass.multiple"].value == pytest.approx(0.5)
    assert agg.extra["counts"]["unparseable"] == {"official": 7, "robust": 7}


def test_failed_records_are_not_scored(tmp_path):
    task = CFinBenchTask()
    samples = task.load(write_exam(tmp_path))
    records = run(task, samples, fake_model(scripted))
    records[0] = SampleRecord(records[0].id, None, None, failed="CallFailed: timeout")
    agg = task.aggregate(samples, records)
    assert agg.metrics["micro"].n == 6 and agg.extra["counts"]["failed"] == 1
    assert any("1 samples failed" in note for note in agg.notes)


def test_test_split_without_answers_is_not_scored(tmp_path):
    task = CFinBenchTask(split="test")
    samples = task.load(write_exam(tmp_path))
    assert [s.target for s in samples] == [None, None]
    records = run(task, samples, fake_model(lambda prompt: "答案：A"))
    assert all(r.score.value is None and r.score.extracted["official"] == "A" for r in records)
    agg = task.aggregate(samples, records)
    assert agg.metrics["strict.score"].value is None and agg.metrics["strict.score"].n == 0
    assert any("no gold answers" in note for note in agg.notes)
