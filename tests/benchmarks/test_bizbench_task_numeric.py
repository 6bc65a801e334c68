"""BizBench numeric tasks: loading, reading and matching modes, programs in the sandbox, gold answers
through the same path, aggregation, solve() with a fake model, and `finharness score`."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from finharness.backends.fake import FakeBackend
from finharness.benchmarks.bizbench import task as numeric
from finharness.benchmarks.bizbench.data import BizBenchItem, write_items_jsonl
from finharness.benchmarks.bizbench.tatqa import build_codetatqa, tatqa_file
from finharness.core.task import SampleRecord
from finharness.data.errors import DataError
from tests.fakes import fake_models


def score_all(task, samples, predictions):
    records = [SampleRecord(s.id, p, task.score(s, p), metadata=s.metadata) for s, p in zip(samples, predictions)]
    return records, task.aggregate(samples, records)


@pytest.fixture(scope="module")
def codetatqa_items(shared_data, tmp_path_factory) -> Path:
    """The first 40 CodeTAT-QA test items (built from TAT-QA test_gold), as an items file."""
    build = build_codetatqa(tatqa_file(shared_data / "tatqa", "test"), "test")
    path = tmp_path_factory.mktemp("codetatqa") / "codetatqa.jsonl"
    write_items_jsonl(build.items[:40], path)
    return path


@pytest.fixture(scope="module")
def codetatqa(codetatqa_items, shared_data):
    task = numeric.CodeTatqaTask(items=str(codetatqa_items), pool_size=1)
    samples = task.load(shared_data)
    yield task, samples
    task.close()


# --- gold answers through the same path -----------------------------------------------------------------

def test_codetatqa_gold_programs_run_in_the_sandbox_and_score(codetatqa):
    task, samples = codetatqa
    records, agg = score_all(task, samples, [task.gold_prediction(s) for s in samples])
    # a gold kept 'at_precision' (TAT-QA rounds to 2 places) can miss the 1% rule; nothing else may fail
    failing = {r.id for r in records if r.score.value != 1.0}
    assert failing == {s.id for s in samples if s.metadata["matched_by"] == "at_precision"}
    assert agg.metrics["accuracy"].n == len(samples)
    assert agg.extra["failure_classes"]["official"]["ok"] == len(samples) - len(failing)
    assert agg.extra["sandbox"]["isolation"] and agg.extra["sandbox"]["executions"] <= len(samples)
    assert all(r.score.extracted["official_rule"] == "program:official_fenced" for r in records)


def test_tatqa_e_gold_answers_score_everywhere(shared_data):
    task = numeric.TatqaETask()
    samples = task.load(shared_data)
    assert len(samples) > 200 and all(len(s.id) == 32 for s in samples)  # TAT-QA uids
    records, agg = score_all(task, samples, [task.gold_prediction(s) for s in samples])
    assert {k: m.value for k, m in agg.metrics.items()} == {k: 1.0 for k in agg.metrics}
    assert set(agg.metrics) == {"accuracy", *numeric.VALUE_KEYS}
    assert set(agg.groups) == {"scale", "answer_from"}


def test_secnum_builds_once_caches_and_scores_gold(shared_data, tmp_path, monkeypatch):
    source = sorted((shared_data / "fintradebench" / "SEC_Filings" / "AAPL").glob("*.htm"))[0]
    filings = tmp_path / "data" / "fintradebench" / "SEC_Filings" / "AAPL"
    filings.mkdir(parents=True)
    (filings / source.name).symlink_to(source)
    monkeypatch.setenv("FINHARNESS_CACHE", str(tmp_path / "cache"))
    task = numeric.SecNumTask(split="train")
    samples = task.load(tmp_path / "data")
    cached = list((tmp_path / "cache" / "bizbench").glob("secnum-*.jsonl"))
    assert len(cached) == 1 and samples and all(s.id.startswith("secnum/AAPL/") for s in samples)
    import finharness.benchmarks.bizbench.secnum as secnum

    monkeypatch.setattr(secnum, "build_secnum_detailed", lambda *a, **k: pytest.fail("rebuilt despite the cache"))
    assert [s.id for s in numeric.SecNumTask(split="train").load(tmp_path / "data")] == [s.id for s in samples]
    _, agg = score_all(task, samples, [task.gold_prediction(s) for s in samples])
    assert agg.metrics["accuracy"].value == 1.0
    scaled = next(s for s in samples if s.metadata["scale"] == 6)
    assert scaled.metadata["gold_scale"] == "million"
    units = float(scaled.target) * 1e6
    values = task.score(scaled, f"[[{units:.0f}]]").values
    assert values["official"] == 0.0 and values["robust"] == 1.0


# --- reading and matching modes -------------------------------------------------------------------------

def tatqa_sample(scale: str, answer: str = "1496.5"):
    from finharness.core.types import Sample

    return Sample("uid", {"question": f"What is X? ({scale})", "context": "c"}, answer,
                  {"gold_scale": scale, "scale": scale})


def test_answer_in_units_for_a_gold_in_millions_is_wrong_officially_right_robustly():
    task = numeric.TatqaETask()
    score = task.score(tatqa_sample("million"), "It is 1,496,500,000 dollars, so [[1496500000]].")
    assert score.values == {"official": 0.0, "round5": 0.0, "scale_aware": 1.0, "robust": 1.0,
                            "robust_unscaled": 0.0, "robust_round5": 0.0}
    assert score.value == 0.0
    assert numeric.TatqaETask(extract="robust").score(tatqa_sample("million"), "[[1496500000]]").value == 1.0


def test_one_percent_and_round5_rules():
    task = numeric.TatqaETask()
    near = task.score(tatqa_sample("", "100"), "[[100.9]]").values
    assert near["official"] == 1.0 and near["round5"] == 0.0
    assert task.score(tatqa_sample("", "100"), "[[101.5]]").values["official"] == 0.0
    exact = task.score(tatqa_sample("", "0.123456"), "[[0.1234561]]").values
    assert exact["round5"] == 1.0


def test_official_needs_exactly_one_bracket_robust_reads_more():
    task = numeric.TatqaETask()
    score = task.score(tatqa_sample("", "12"), "The answer is 12.")
    assert score.values["official"] == 0.0 and score.values["robust"] == 1.0
    assert score.rule == "unparseable" and not score.parsed
    assert score.extracted["robust_rule"] == "answer_cue"
    two = task.score(tatqa_sample("", "12"), "[[12]] and also [[12]]")
    assert two.values["official"] == 0.0 and two.values["robust"] == 1.0


# --- programs ---------------------------------------------------------------------------------------------

def test_program_outcomes_are_classified(codetatqa):
    task, samples = codetatqa
    sample = samples[0]
    block = "Steps.\n```python\n{}\n```"
    cases = {
        "timeout": block.format("while True:\n    pass\n1"),
        "error:ZeroDivisionError": block.format("x = 1 / 0\nx"),
        "wrong": block.format("123456789.0"),
        "unparseable": "```python\na = 1\n```\n```python\nb = 2\n```",
        "number": f"[[{sample.target}]]",
    }
    outcomes = {}
    for expected, reply in cases.items():
        score = task.score(sample, reply)
        outcomes[expected] = score.extracted["official_outcome"]
        if expected != "number":
            assert score.values["official"] == 0.0
    assert outcomes == {k: k for k in cases}
    assert "ZeroDivisionError" in task.score(sample, cases["error:ZeroDivisionError"]).explanation
    # a non-number value is 'wrong' (the pipeline needs float(value))
    assert task.score(sample, block.format("'abc'")).extracted["official_outcome"] == "wrong"
    # robust: several python blocks are joined; official refuses them
    joined = task.score(sample, cases["unparseable"])
    assert joined.extracted["robust_rule"] == "program:fenced_joined"


def test_robust_reads_a_bare_program_and_the_answer_variable(codetatqa):
    task, samples = codetatqa
    sample = samples[1]
    program = sample.metadata["program"]
    bare = task.score(sample, program)
    assert bare.values["official"] == 0.0 and bare.values["robust"] == 1.0
    assert bare.extracted["robust_rule"] == "program:bare_program"
    lines = program.rstrip().splitlines()
    with_answer = "\n".join(lines[:-1] + [f"answer = {lines[-1]}", "print(answer)"])
    assert task.score(sample, f"```python\n{with_answer}\n```").values["robust"] == 1.0


def test_failure_classes_are_aggregated(codetatqa):
    task, samples = codetatqa
    replies = ["```python\n1/0\n```", "no answer", "```python\n" + samples[2].metadata["program"] + "```"]
    _, agg = score_all(task, samples[:3], replies)
    assert agg.extra["failure_classes"]["official"] == {"error:ZeroDivisionError": 1, "unparseable": 1, "ok": 1}
    assert agg.extra["unparseable"]["official"] == 1
    assert "scale" in agg.groups


# --- solve with a fake model ------------------------------------------------------------------------------

def test_solve_sends_the_official_prompt_and_runs_the_program_once(codetatqa, tmp_path):
    task, samples = codetatqa
    sample = samples[3]
    model = FakeBackend(reply="Compute.\n```python\n" + sample.metadata["program"] + "```")
    before = task.runner.executions
    reply = asyncio.run(task.solve(sample, fake_models(tmp_path, model=model)))
    messages, params = model.requests[0].messages, model.requests[0].params
    assert [m.role for m in messages] == ["system", "user", "assistant", "user"]
    assert messages[-1].content == f"Context:\n{sample.input['context']}\n\nQuestion: {sample.input['question']}\n"
    assert params.temperature == 0.0 and params.max_tokens == 512
    executed = task.runner.executions - before
    assert task.score(sample, reply).value == 1.0
    assert task.runner.executions - before == executed  # score() reused the run made while solving


# --- data sources and options -----------------------------------------------------------------------------

def write_parquet(path: Path, rows: list[dict]) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    columns = ("question", "answer", "task", "context", "context_type", "options", "program")
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({c: [r.get(c) for r in rows] for c in columns}), path)
    return path


OFFICIAL_ROWS = [
    {"question": "A call option: strike 100, price 110, premium 2, 100 shares. Profit?", "answer": "800",
     "task": "FinCode", "program": "strike = 100\nprice = 110\n(price - strike - 2) * 100\n"},
    {"question": "What is the percent change?", "answer": "96.55", "task": "CodeFinQA",
     "context": "| | 2011 | 2012 |\n| a | 34.8 | 1.2 |", "context_type": "string",
     "program": "change = 34.8 - 1.2\nchange / 34.8 * 100\n"},
    {"question": "What was a in 2011? (million)", "answer": "34.8", "task": "ConvFinQA",
     "context": "| | 2011 | 2012 |\n| a | 34.8 | 1.2 |", "context_type": "string"},
    {"question": "Bond yields and prices?", "answer": "A", "task": "FinKnow",
     "options": ["Inversely", "Directly", "Unrelated"]},
]


@pytest.mark.parametrize("cls, short", [(numeric.FinCodeTask, "fincode"), (numeric.CodeFinQATask, "codefinqa"),
                                        (numeric.ConvFinQAETask, "convfinqa-e")])
def test_official_parquet_tasks_load_and_score_gold(tmp_path, cls, short):
    write_parquet(tmp_path / "bizbench" / "data" / "test-00000-of-00001-x.parquet", OFFICIAL_ROWS)
    task = cls(pool_size=1)
    try:
        samples = task.load(tmp_path)  # found under DATA_DIR/bizbench
        assert [s.id for s in samples] == [f"bizbench/test/{short}/0"]
        assert task.score(samples[0], task.gold_prediction(samples[0])).value == 1.0
        by_option = cls(parquet=str(tmp_path / "bizbench")).load(None)
        assert [s.id for s in by_option] == [s.id for s in samples]
        assert cls(split="train").load_items(tmp_path) == []
    finally:
        task.close()


def test_official_tasks_without_data_pull_unless_pulling_is_off(tmp_path, monkeypatch):
    """A data root without the parquet is filled on first use (tests/unit/test_data_pull_hosts.py runs that
    against a local Hub); with FINHARNESS_NO_PULL=1 the task says how to get the data instead."""
    monkeypatch.setenv("FINHARNESS_NO_PULL", "1")
    with pytest.raises(DataError) as info:
        numeric.FinCodeTask().load(tmp_path)
    message = str(info.value)
    assert "bizbench/fincode needs dataset bizbench (kensho/bizbench@" in message and "--no-pull" in message
    assert f"finharness data pull bizbench --data-dir {tmp_path}" in message
    assert not (tmp_path / "bizbench").exists()


def test_items_file_filters_task_and_split(tmp_path, shared_data):
    items = [BizBenchItem(id=f"u{i}", question="Q? (million)", answer="5", task="tatqa-e", context="5",
                          split="dev" if i % 2 else "test", metadata={"scale": "million"}) for i in range(4)]
    items.append(BizBenchItem(id="other", question="Q", answer="1", task="secnum", context="1"))
    path = tmp_path / "items.jsonl"
    write_items_jsonl(items, path)
    assert [s.id for s in numeric.TatqaETask(items=str(path)).load(shared_data)] == ["u0", "u2"]
    assert [s.id for s in numeric.TatqaETask(items=str(path), split="dev").load(shared_data)] == ["u1", "u3"]
    with pytest.raises(DataError, match="no bizbench/secnum items"):
        numeric.SecNumTask(items=str(path), split="train").load(shared_data)


@pytest.mark.parametrize("cls, options, message", [
    (numeric.TatqaETask, {"style": "code"}, "unknown option"),
    (numeric.SecNumTask, {"split": "dev"}, "split='dev'"),
    (numeric.CodeTatqaTask, {"style": "python"}, "style='python'"),
    (numeric.CodeTatqaTask, {"extract": "lenient"}, "extract='lenient'"),
])
def test_bad_options_name_the_allowed_values(cls, options, message):
    with pytest.raises(ValueError, match=message):
        cls(**options)


def test_config_is_the_run_key_without_pool_size():
    config = numeric.CodeTatqaTask(style="cot", pool_size=4).config()
    assert config["style"] == "cot" and "pool_size" not in config
    assert "style" not in numeric.TatqaETask().config()


# --- the CLI ---------------------------------------------------------------------------------------------

def test_finharness_score_on_predictions(shared_data, tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from finharness import cli
    from finharness.benchmarks import registry

    monkeypatch.setitem(registry.TASKS, "bizbench/tatqa-e", "finharness.benchmarks.bizbench.task:TatqaETask")
    samples = numeric.TatqaETask().load(shared_data)[:5]
    predictions = tmp_path / "p.jsonl"
    replies = [f"[[{s.target}]]" for s in samples[:4]] + ["I do not know"]
    predictions.write_text("".join(json.dumps({"id": s.id, "prediction": r}) + "\n" for s, r in zip(samples, replies)))
    result = CliRunner().invoke(cli.app, ["score", "bizbench/tatqa-e", "--data-dir", str(shared_data), "--predictions",
                                          str(predictions), "--out", str(tmp_path / "out"), "--json"])
    assert result.exit_code == 0, result.output
    results = json.loads(result.stdout)
    assert results["metrics"]["accuracy"]["value"] == pytest.approx(0.8) and results["metrics"]["accuracy"]["n"] == 5
    assert results["extra"]["failure_classes"]["official"] == {"number": 4, "unparseable": 1}
    assert (tmp_path / "out" / "samples.jsonl").exists()


# --- full gold checks (slow) ----------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("cls, split", [(numeric.CodeTatqaTask, "test"), (numeric.CodeTatqaTask, "dev"),
                                        (numeric.TatqaETask, "dev"), (numeric.SecNumTask, "test")])
def test_every_gold_answer_through_the_same_path(shared_data, cls, split, tmp_path, monkeypatch):
    monkeypatch.setenv("FINHARNESS_CACHE", str(tmp_path))  # SEC-Num's build cache
    task = cls(split=split)
    try:
        samples = task.load(shared_data)
        records, agg = score_all(task, samples, [task.gold_prediction(s) for s in samples])
        failing = {r.id for r in records if r.score.value != 1.0}
        # only golds that the builder kept 'at_precision' (TAT-QA rounds to 2 places) may miss the 1% rule
        assert failing <= {s.id for s in samples if s.metadata.get("matched_by") == "at_precision"}
        assert agg.metrics["accuracy"].n == len(samples)
    finally:
        task.close()


def test_engine_run_with_the_fake_backend_writes_failure_classes(codetatqa_items, shared_data, tmp_path):
    """The whole path: runner -> solve (official prompt) -> sandbox -> score -> results.json."""
    from finharness.backends.fake import FakeBackend
    from finharness.core.runner import RunOptions, run_task
    from finharness.core.store import RunStore

    task = numeric.CodeTatqaTask(items=str(codetatqa_items), pool_size=1)
    store = RunStore(tmp_path / "store.sqlite")
    try:
        result = asyncio.run(run_task(task, {"model": FakeBackend(reply="```python\n1/0\n```")}, store, RunOptions(data_dir=shared_data, limit=3), out_dir=tmp_path / "run"))
    finally:
        store.close()
        task.close()
    results = json.loads((tmp_path / "run" / "results.json").read_text())
    assert results["metrics"]["accuracy"]["value"] == 0.0 and results["metrics"]["accuracy"]["n"] == 3
    assert results["extra"]["failure_classes"]["official"] == {"error:ZeroDivisionError": 3}
    assert results["extra"]["prompt_file"] == "context_code.json"
    assert result.results["counts"]["unparseable"] == 0
