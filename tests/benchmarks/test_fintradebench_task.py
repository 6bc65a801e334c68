"""FinTradeBench task: solve() in each mode with fake models, point-in-time retrieval, scoring, statistics."""

from __future__ import annotations

import asyncio
import datetime as dt
import itertools
import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from finharness.backends.fake import FakeBackend
from finharness.benchmarks.fintradebench.analysis import compare_modes, format_comparison, judge_agreement
from finharness.benchmarks.fintradebench.task import FinTradeBenchTask
from finharness.core.model import CallFailed
from finharness.core.task import SampleRecord

from ..fakes import fake_backend, fake_models, fresh_store, prompts

ANSWER = "Apple's ROE is high and the RSI of 70 signals strength; the P/E is elevated."


def verdict(correctness=4):
    return json.dumps({"evaluations": [{
        "indicator_analysis": {"found_indicators": ["ROE"], "total_golden_indicators": 4, "indicators_found_count": 1},
        "bias_analysis": {"trading_signals_score": 3, "fundamental_score": 4},
        "overall_quality": {"correctness_score": correctness, "reasoning_score": 5}}]})


def answers(choice="TELER_L2_Strict_Focus", label="Candidate 2"):
    """What the fake model says: a prompt id when asked to select one, a label when asked for one, else the
    answer, numbered by the call."""
    calls = itertools.count(1)

    def reply(text):
        n = next(calls)
        if "Prompt ID only" in text:
            return choice
        if "label only" in text:
            return label
        return f"{ANSWER} [{n}]"
    return reply


def models(tmp_path, judge_replies=None, choice="TELER_L2_Strict_Focus", window_chars=None, max_tokens=None):
    """The shared fake (tests/fakes.py) as model and judge, each call on a fresh store. `window_chars`: the model's
    window in characters (a user prompt of up to that many characters fits a call of `max_tokens`)."""
    window = {} if window_chars is None else {"count_tokens": len, "context_length": window_chars + 4 + max_tokens}
    return fake_models(fresh_store(tmp_path),
                       model=FakeBackend(name="fake-model", reply=answers(choice), **window),
                       judge=FakeBackend(name="fake-judge", replies=judge_replies or [verdict()], reply=answers()))


def load(shared_data, **options):
    task = FinTradeBenchTask(**options)
    samples = {s.id: s for s in task.load(shared_data)}
    return task, samples


def test_options_are_validated():
    assert FinTradeBenchTask().settings.levels == ("L1", "L2", "L3", "L4")
    assert FinTradeBenchTask(mode="rag").settings.levels == ("L1", "L2", "L3", "L4", "L5", "L6")
    assert FinTradeBenchTask(mode="ideal").settings.levels[-1] == "bare"
    with pytest.raises(ValueError, match="norag takes L1-L4"):
        FinTradeBenchTask(mode="norag", levels="L1,L5")
    with pytest.raises(ValueError, match="exactly one level"):
        FinTradeBenchTask(select="false", levels="L1,L2")
    with pytest.raises(ValueError, match="unknown option"):
        FinTradeBenchTask(nonsense=1)
    with pytest.raises(ValueError, match="selection"):
        FinTradeBenchTask(selection="random")


def test_per_category_picks_first_n_in_natural_order(shared_data):
    task, samples = load(shared_data, per_category=10)
    ids = list(samples)
    assert len(ids) == 30
    assert ids[:10] == [f"F{i}" for i in range(1, 11)] and ids[10:20] == [f"T{i}" for i in range(1, 11)]
    assert ids[20:] == [f"FT{i}" for i in range(1, 11)]
    assert samples["FT3"].metadata["question_type"] == "FT"


def test_norag_solve_selects_and_judges(shared_data, tmp_path):
    task, samples = load(shared_data, mode="norag", judge_context="none")
    fake = models(tmp_path)
    prediction = asyncio.run(task.solve(samples["F1"], fake))
    assert [c["level"] for c in prediction["candidates"]] == ["L1", "L2", "L3", "L4"]
    assert prediction["level"] == "L2" and prediction["selection"]["rule"] == "contains"
    assert "MARKET DATA" not in "".join(prompts(fake.model))
    score = task.score(samples["F1"], prediction)
    assert score.value == pytest.approx(0.8) and score.values["accuracy.F"] == pytest.approx(0.8)
    assert "accuracy.T" not in score.values
    assert score.values["f1.official"] == pytest.approx(2 * 0.25 / 1.25)
    golden = set(samples["F1"].input["golden"])  # ROA, ROE, Earnings/Price: the answer names ROE and P/E (+ RSI)
    assert score.values["precision.proper"] == pytest.approx(2 / 3) and score.values["recall.proper"] == pytest.approx(2 / len(golden))


def test_unparseable_judge_is_counted_not_scored(shared_data, tmp_path):
    task, samples = load(shared_data, mode="norag", judge_context="none", levels="L1", select="false")
    fake = models(tmp_path, judge_replies=["nope", "still nope", "{bad json"])
    prediction = asyncio.run(task.solve(samples["T1"], fake))
    assert [r.sample_index for r in fake_backend(fake, "judge").requests] == [0, 1, 2]
    score = task.score(samples["T1"], prediction)
    assert score.value is None and not score.parsed
    record = SampleRecord("T1", prediction, score, metadata=samples["T1"].metadata)
    agg = task.aggregate(list(samples.values()), [record])
    assert agg.extra["unparseable"] == ["T1"] and any("unscored" in n for n in agg.notes)


@dataclass
class FakeItem:
    track: str
    source: str
    date: str
    text: str
    tokens: int = 10
    truncated: bool = False


class RecordingRetriever:
    """Stands in for the Retriever: records the as-of date it is given, returns one dated item."""

    def __init__(self, item_date=None):
        self.calls = []
        self.budgets = []
        self.item_date = item_date

    async def aretrieve(self, query, ticker, as_of, reranker=None, budget_tokens=None):
        self.calls.append((ticker, as_of))
        self.budgets.append(budget_tokens)

        class Result:  # evidence as long as the budget allows (4 characters a token)
            items = (FakeItem("filings", f"{ticker}/10-Q#Item 2", self.item_date or as_of.isoformat(),
                              f"EVIDENCE for {ticker} up to {as_of} " + "x" * (4 * (budget_tokens or 100))),)
        return Result()


def test_rag_passes_the_as_of_date_and_never_shows_later_evidence(shared_data, tmp_path):
    task, samples = load(shared_data, mode="rag", judge_context="none")
    task._retriever = RecordingRetriever()
    fake = models(tmp_path)
    prediction = asyncio.run(task.solve(samples["FT1"], fake))  # Apple, "As of August 2025"
    assert task._retriever.calls and all(str(as_of) == "2025-08-31" for _, as_of in task._retriever.calls)
    assert all(item["date"] <= "2025-08-31" for item in prediction["context"]["items"])
    l5 = [p for p in prompts(fake.model) if "Level 5" in p][0]
    assert "MARKET DATA:\nEVIDENCE for AAPL" in l5
    assert all("EVIDENCE" not in p for p in prompts(fake.model) if "Level 4" in p)
    task._retriever = RecordingRetriever(item_date="2025-10-01")
    with pytest.raises(RuntimeError, match="point-in-time"):
        asyncio.run(task.solve(samples["FT1"], models(tmp_path)))


def test_rag_budget_is_split_over_tickers_and_cut_until_the_prompt_fits(shared_data, tmp_path):
    task, samples = load(shared_data, mode="rag", judge_context="none", levels="L5", select="false",
                         budget_tokens=2000)
    multi = next(s for s in samples.values() if len(s.input.get("tickers") or ()) >= 2
                 and all(task._market_data().has_filings(t) for t in s.input["tickers"]))
    task._retriever = RecordingRetriever()
    asyncio.run(task.solve(multi, models(tmp_path)))
    n = len(task._retriever.calls)
    assert n >= 2 and task._retriever.budgets == [2000 // n] * n  # split, not 2,000 each

    task._retriever = RecordingRetriever()
    window = {"window_chars": 5000, "max_tokens": task.settings.max_tokens}
    fake = models(tmp_path, **window)  # ~8,000 characters of evidence at the full budget
    prediction = asyncio.run(task.solve(samples["FT1"], fake))  # one ticker
    assert task._retriever.budgets == [2000, 1333, 888]  # cut by a third until it fits
    assert prediction["context"]["budget_tokens"] == 888 and len(prompts(fake.model)[0]) <= 5000
    assert [t["event"] for t in fake.model.trace if "event" in t] == ["retrieval-budget-cut"] * 2

    task._retriever = RecordingRetriever()
    never = models(tmp_path, window_chars=10, max_tokens=task.settings.max_tokens)
    with pytest.raises(CallFailed, match="does not fit"):  # nothing fits: four retrievals, then the call fails
        asyncio.run(task.solve(samples["FT1"], never))
    assert task._retriever.budgets == [2000, 1333, 888, 592]
    assert not fake_backend(never).requests, "a prompt too long for the window is never sent"


def test_ideal_solve_builds_point_in_time_contexts(shared_data, tmp_path):
    task, samples = load(shared_data, mode="ideal", per_category=1)
    fake = models(tmp_path, judge_replies=[verdict(5)], choice="No RAG")
    prediction = asyncio.run(task.solve(samples["F1"], fake))  # Apple, as of 2025-09-30
    assert prediction["level"] == "bare" and prediction["context"]["tickers"] == ["AAPL"]
    assert prediction["context"]["last_date"] <= "2025-09-30"
    l3 = [p for p in prompts(fake.model) if "Level 3" in p][0]
    assert "[AAPL] Trading/Price Data 2025-09-01 → 2025-09-30" in l3 and "F_Return on Equity" in l3
    assert "Trading/Price Data" in prompts(fake["judge"])[0]  # the judge sees the same contexts (judge_context=ideal)
    assert task.score(samples["F1"], prediction).value == 1.0


def _write_run(directory: Path, mode: str, values: dict[str, float], f1: dict[str, tuple[float, float]] | None = None,
               ) -> Path:
    """A run's samples.jsonl and results.json; f1: id -> (f1.official, f1.proper)."""
    directory.mkdir(parents=True)
    lines = []
    for qid, value in values.items():
        category = "FT" if qid.startswith("FT") else qid[0]
        scores = {f"accuracy.{category}": value}
        if f1 and qid in f1:
            scores |= {"f1.official": f1[qid][0], "f1.proper": f1[qid][1]}
        lines.append(json.dumps({"id": qid, "metadata": {"category": category},
                                 "score": {"value": value, "values": scores}}))
    (directory / "samples.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (directory / "results.json").write_text(json.dumps({"model": "m", "config": {"task_config": {"mode": mode}}}))
    return directory


def test_compare_modes_delta_and_paired_test(tmp_path):
    from scipy import stats

    norag = {f"F{i}": v for i, v in enumerate([0.4, 0.6, 0.4, 0.2, 0.6, 0.4], 1)}
    norag |= {f"T{i}": v for i, v in enumerate([0.6, 0.6, 0.8], 1)}
    rag = {f"F{i}": v for i, v in enumerate([0.8, 0.8, 0.6, 0.6, 0.8, 0.8], 1)}
    rag |= {f"T{i}": v for i, v in enumerate([0.6, 0.4, 0.8], 1)}
    result = compare_modes(_write_run(tmp_path / "a", "norag", norag), _write_run(tmp_path / "b", "rag", rag))
    rows = {r["group"]: r for r in result["rows"]}
    f = rows["F"]
    assert f["n"] == 6 and f["norag"] == pytest.approx(43.3333, abs=1e-3) and f["rag"] == pytest.approx(73.3333, abs=1e-3)
    assert f["delta_pct"] == pytest.approx((73.33333 - 43.33333) / 43.33333 * 100, abs=1e-3)
    # 6 questions: the bounded interval of the differences and the binomial test it inverts (stats.paired_test,
    # issue 36: the verdict and the interval from one test); six differences, all >= 0, do not reach 0.05
    from finharness.stats import paired_test

    expected = paired_test({k: norag[k] for k in norag if k[0] == "F"}, {k: rag[k] for k in rag if k[0] == "F"})
    assert f["test"] == "effective-n binomial" and f["p_value"] == pytest.approx(expected.p_value, abs=1e-4)
    assert f["stars"] == "" and expected.verdict == "tied" and expected.ci95[0] < 0 < expected.ci95[1]
    assert rows["T"]["stars"] == "" and rows["FT"]["n"] == 0 and rows["overall"]["n"] == 9
    assert [w.split(":")[0] for w in result["warnings"]] == ["F", "T", "overall"]  # n < 30 said out loud
    fifty = {f"F{i}": 0.2 * (i % 5) for i in range(1, 51)}
    better = {k: min(1.0, v + 0.2 * (int(k[1:]) % 3 == 0)) for k, v in fifty.items()}
    big = compare_modes(_write_run(tmp_path / "c", "norag", fifty), _write_run(tmp_path / "d", "rag", better))
    row = next(r for r in big["rows"] if r["group"] == "F")
    assert row["test"] == "paired-t" and row["p_value"] == pytest.approx(stats.ttest_rel(
        [better[k] for k in sorted(fifty)], [fifty[k] for k in sorted(fifty)]).pvalue, abs=1e-4)


def test_compare_modes_gives_both_f1s_on_the_paired_questions(tmp_path):
    norag = _write_run(tmp_path / "a", "norag", {"F1": 0.4, "F2": 0.6, "T1": 0.8},
                       f1={"F1": (1.0, 0.0), "F2": (0.5, 0.5), "T1": (1.0, 0.25)})
    rag = _write_run(tmp_path / "b", "rag", {"F1": 0.8, "T1": 0.6, "T2": 0.2},  # F2 unscored, T2 only here
                     f1={"F1": (0.5, 0.5), "T1": (0.0, 0.75), "T2": (1.0, 1.0)})
    rows = {r["group"]: r for r in compare_modes(norag, rag)["rows"]}
    assert rows["F"]["f1_official"] == {"norag": 1.0, "rag": 0.5} and rows["F"]["f1_proper"] == {"norag": 0.0, "rag": 0.5}
    assert rows["overall"]["n"] == 2
    assert rows["overall"]["f1_official"] == {"norag": 1.0, "rag": 0.25}
    assert rows["overall"]["f1_proper"] == {"norag": 0.125, "rag": 0.625}
    assert rows["FT"]["f1_proper"] == {"norag": None, "rag": None}
    assert "1.000 / 0.250" in format_comparison(compare_modes(norag, rag))


def test_judge_agreement_reuses_rating_compare(tmp_path):
    run = _write_run(tmp_path / "run", "rag", {"F1": 0.8, "F2": 0.4, "T1": 1.0, "T2": 0.6})
    human = tmp_path / "human.csv"
    human.write_text("question_id,H_Accuracy (1-5)\nF1,4\nF2,3\nT1,5\nT2,3\nX9,1\n", encoding="utf-8")
    result = judge_agreement(human, run)
    assert result["n"] == 4 and result["only_human"] == ["X9"]
    assert result["mae"] == pytest.approx((0 + 1 + 0 + 0) / 4)  # judge 4,2,5,3 vs human 4,3,5,3
    assert result["spearman"] > 0.9
    # κ on labels: observed 3/4; chance = Σ p_human·p_judge over labels {2,3,4,5} = 0.5·0.25 + 0.25·0.25 + 0.25·0.25
    assert result["cohen_kappa"] == pytest.approx((0.75 - 0.25) / (1 - 0.25), abs=1e-4)


def test_scale_writes_answerable_variants_and_the_task_reads_them(shared_data, tmp_path):
    from typer.testing import CliRunner

    from finharness.benchmarks.fintradebench.questions import read_questions
    from finharness.cli import app
    out = tmp_path / "scaled.csv"
    args = ["fintradebench", "scale", "--n", "8", "--seed", "3", "--out", str(out), "--data-dir", str(shared_data),
            "--json"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["written"] == 8
    first = out.read_text(encoding="utf-8")
    assert CliRunner().invoke(app, args).exit_code == 0 and out.read_text(encoding="utf-8") == first  # seeded
    variants = read_questions(out)
    assert len(variants) == 8 and all(q.date.rule == "stated" and q.source_id for q in variants)
    for q in variants:
        if q.category in ("F", "FT"):  # fundamentals need filings filed by the as-of date
            assert q.tickers.tickers and q.date.as_of >= dt.date(2024, 3, 1)
    task = FinTradeBenchTask(questions=str(out))
    loaded = task.load(shared_data)
    assert {s.id for s in loaded} == {q.id for q in variants}
    assert all(s.input["as_of"] == s.metadata["as_of"] for s in loaded)


def test_engine_run_writes_the_report_metric_names(shared_data, tmp_path):
    from finharness.backends.fake import FakeBackend
    from finharness.core.runner import RunOptions, run_task
    from finharness.core.store import RunStore

    task = FinTradeBenchTask(mode="norag", per_category=2, judge_context="none")
    judge = FakeBackend("fake?name=judge", reply=verdict(3), name="judge")
    model = FakeBackend("fake", script=[{"match": "Prompt ID only", "reply": "L3_Step_By_Step"},
                                        {"match": "", "reply": ANSWER}])
    result = asyncio.run(run_task(task, {"model": model, "judge": judge}, RunStore(tmp_path / "store.sqlite"), RunOptions(data_dir=shared_data), out_dir=tmp_path / "run"))
    metrics = result.results["metrics"]
    assert result.results["headline"] == "accuracy" and metrics["accuracy"]["value"] == pytest.approx(0.6)
    for name in ("accuracy.F", "accuracy.T", "accuracy.FT", "f1.official", "f1.proper"):
        assert metrics[name]["n"] == 2 if "." in name and name.startswith("accuracy") else metrics[name]["n"] == 6
    assert result.results["config"]["task_config"]["mode"] == "norag"
    assert set(result.results["groups"]["category"]) == {"F", "T", "FT"}
    assert result.results["groups"]["level"].keys() == {"L3"}
    compared = compare_modes(tmp_path / "run", tmp_path / "run")
    assert {r["group"]: r["n"] for r in compared["rows"]} == {"F": 2, "T": 2, "FT": 2, "overall": 6}


def test_rag_with_the_real_retriever_shows_nothing_after_as_of(shared_data, tmp_path):
    from finharness.retrieval import RetrievalConfig, Retriever

    task, samples = load(shared_data, mode="rag", judge_context="none", levels="L5", select="false")
    task._retriever = Retriever(shared_data, RetrievalConfig(dense="off"))
    fake = models(tmp_path)
    sample = samples["FT7"]  # Meta, "in August 2025": the 10-Q filed 2025-10-30 must stay invisible
    prediction = asyncio.run(task.solve(sample, fake))
    items = prediction["context"]["items"]
    assert items and all(item["date"] <= "2025-08-31" for item in items)
    assert not any("2025-10-30" in item["source"] for item in items)
    assert "MARKET DATA:" in prompts(fake.model)[0]


def test_compare_cli_json(tmp_path):
    from typer.testing import CliRunner

    from finharness.cli import app
    a = _write_run(tmp_path / "a", "norag", {"F1": 0.4, "F2": 0.6, "T1": 0.2})
    b = _write_run(tmp_path / "b", "rag", {"F1": 0.8, "F2": 0.6, "T1": 0.4})
    result = CliRunner().invoke(app, ["fintradebench", "compare", str(a), str(b), "--json"])
    assert result.exit_code == 0, result.output
    rows = {r["group"]: r for r in json.loads(result.output)["rows"]}
    assert rows["F"]["delta_pct"] == pytest.approx(40.0) and rows["overall"]["n"] == 3
    text = CliRunner().invoke(app, ["fintradebench", "compare", str(a), str(tmp_path / "missing")])
    assert text.exit_code == 2 and "samples.jsonl not found" in text.output


def copied_example(model="m", mode="Non_RAG"):
    """A verdict with the rubric example's scores (4/5/4/5), as a 1.5B judge writes it."""
    return json.dumps({"evaluations": [{"model_name": model, "mode": mode,
        "indicator_analysis": {"found_indicators": ["ROE"], "total_golden_indicators": 1, "indicators_found_count": 1},
        "bias_analysis": {"trading_signals_score": 4, "fundamental_score": 5},
        "overall_quality": {"correctness_score": 4, "reasoning_score": 5}}]})


@pytest.mark.parametrize("replies,warned", [([copied_example()] * 3, True),
                                            ([copied_example(), verdict(2), verdict(3)], False)])
def test_verdicts_that_copy_the_rubric_example_are_counted_and_flagged(shared_data, tmp_path, replies, warned):
    task, samples = load(shared_data, mode="norag", judge_context="none", levels="L1", select="false")
    records = []
    for sid, reply in zip(("F1", "T1", "FT1"), replies):
        fake = models(tmp_path, judge_replies=[reply])
        prediction = asyncio.run(task.solve(samples[sid], fake))
        records.append(SampleRecord(sid, prediction, task.score(samples[sid], prediction),
                                    metadata=samples[sid].metadata))
    agg = task.aggregate(list(samples.values()), records)
    echoed = agg.extra["judge_example_scores"]
    assert echoed["of"] == 3 and echoed["verdicts"] == (3 if warned else 1)
    assert echoed["scores"] == {"correctness": 4, "reasoning": 5, "trading_signals": 4, "fundamentals": 5}
    assert any("copying the example" in n for n in agg.notes) is warned


def test_a_verdict_finding_more_than_its_golden_total_is_named_not_hidden(shared_data, tmp_path):
    task, samples = load(shared_data, mode="norag", judge_context="none", levels="L1", select="false")
    over = json.dumps({"evaluations": [{
        "indicator_analysis": {"found_indicators": ["ROE", "ROA", "P/E"], "total_golden_indicators": 2,
                               "indicators_found_count": 3},
        "bias_analysis": {"trading_signals_score": 2, "fundamental_score": 3},
        "overall_quality": {"correctness_score": 3, "reasoning_score": 2}}]})
    records = []
    for sid, reply in (("F1", over), ("T1", verdict(2))):
        fake = models(tmp_path, judge_replies=[reply])
        prediction = asyncio.run(task.solve(samples[sid], fake))
        records.append(SampleRecord(sid, prediction, task.score(samples[sid], prediction),
                                    metadata=samples[sid].metadata))
    assert records[0].score.values["f1.official"] > 1  # the release's rule, kept
    agg = task.aggregate(list(samples.values()), records)
    assert agg.extra["judge_found_over_total"] == ["F1"]
    assert any("above 1" in n and "F1" in n for n in agg.notes)


@pytest.mark.parametrize("choice,warned", [("L3_Step_By_Step", True), ("TELER_L2_Strict_Focus", False)])
def test_self_selections_that_copy_the_prompts_example_are_flagged(shared_data, tmp_path, choice, warned):
    task, samples = load(shared_data, mode="norag", judge_context="none", levels="L1,L2,L3")
    records = []
    for sid in ("F1", "T1", "FT1"):
        fake = models(tmp_path, choice=choice)
        prediction = asyncio.run(task.solve(samples[sid], fake))
        records.append(SampleRecord(sid, prediction, task.score(samples[sid], prediction),
                                    metadata=samples[sid].metadata))
    agg = task.aggregate(list(samples.values()), records)
    assert agg.extra["selection_example"] == {"prompt_id": "L3_Step_By_Step", "picked": 3 if warned else 0, "of": 3}
    assert any("the id the selection prompt gives as its example" in n for n in agg.notes) is warned


@pytest.mark.parametrize("mode,levels", [("norag", "L1,L2,L3,L4"), ("ideal", "L1,L2,L3,bare")])
def test_neutral_selection_shows_shuffled_labels_and_reads_the_label(shared_data, tmp_path, mode, levels):
    task, samples = load(shared_data, mode=mode, judge_context="none", levels=levels, selection="neutral")
    shown = {}
    for sid in ("F1", "T1", "FT1", "F2"):
        fake = models(tmp_path)
        prediction = asyncio.run(task.solve(samples[sid], fake))
        selection = prediction["selection"]
        prompt = next(p for p in prompts(fake.model) if "label only" in p)
        assert selection["style"] == "neutral" and selection["rule"] == "exact"
        assert sorted(selection["shown"]) == sorted(levels.split(","))
        assert prediction["level"] == selection["shown"][1]  # 'Candidate 2' is the second shown
        assert "one of: Candidate 1, Candidate 2, Candidate 3, Candidate 4." in prompt
        assert "e.g." not in prompt and "Step_By_Step" not in prompt and "Prompt ID" not in prompt
        shown[sid] = selection["shown"]
    again = asyncio.run(task.solve(samples["F1"], models(tmp_path)))
    assert again["selection"]["shown"] == shown["F1"]  # seeded: the same order on a rerun
    assert len({tuple(v) for v in shown.values()}) > 1  # and no one order for every question


def test_neutral_selections_are_not_counted_as_example_copies(shared_data, tmp_path):
    task, samples = load(shared_data, mode="norag", judge_context="none", levels="L1,L2,L3", selection="neutral")
    records = []
    for sid in ("F1", "T1", "FT1"):
        fake = models(tmp_path)
        prediction = asyncio.run(task.solve(samples[sid], fake))
        records.append(SampleRecord(sid, prediction, task.score(samples[sid], prediction),
                                    metadata=samples[sid].metadata))
    agg = task.aggregate(list(samples.values()), records)
    assert agg.extra["selection_example"]["of"] == 0
    assert "self-selection neutral" in agg.notes[0]
    assert not any("gives as its example" in n for n in agg.notes)


@pytest.mark.parametrize("text,sign", [
    ("Should I hold or sell my Amazon shares after the Q2 2025 rally?", 1),
    ("Should I buy Starbucks during this August 2025 dip?", -1),
    ("Has AMD’s momentum turned positive after the July 2025 selloff?", -1),
    ("Should I average down on my Qualcomm position that’s losing money in Q3 2025?", -1),
    ("Is NVIDIA’s pullback in July 2025 a buying opportunity?", -1),
    ("Does Meta’s valuation make sense after its 2025 recovery?", 1),
    ("As of Q3 2025, why is Tesla’s stock price so high compared to its earnings?", None),
    ("Is Tesla financially stable enough to weather an economic downturn?", None),
    ("Is Intel still a profitable investment despite losing market share?", None),
])
def test_price_premise_reads_the_stated_move(text, sign):
    from finharness.benchmarks.fintradebench.scaling import price_premise

    assert price_premise(text) == sign


def test_scaled_variants_keep_a_price_premise_only_where_the_price_moved_that_way(shared_data):
    from finharness.benchmarks.fintradebench.ideal import MarketData
    from finharness.benchmarks.fintradebench.questions import SEED_FILE, read_questions, resolve_date
    from finharness.benchmarks.fintradebench.scaling import scale_questions

    seeds = [q for q in read_questions(Path(shared_data) / SEED_FILE) if q.id in ("FT5", "FT16")]  # 'rally' and 'dip'
    variants, report = scale_questions(seeds, shared_data, 8, seed=1, tickers=["META", "AAPL", "MSFT", "NVDA"])
    market = MarketData(shared_data)
    assert len(variants) == 8 and report.rejected["premise"] > 0
    for v in variants:
        change = market.window_change(v.ticker, resolve_date(v.question).window_start, v.as_of)
        assert change is not None and (change > 0) == (v.source_id == "FT5"), (v.question, change)
