"""The scorecard end to end: a real suite folder (tasks run on fake models into OUT/<model>/<row>/, suite.json
written by hand as /work/coord/SUITE.md and docs/report.md#scorecard say `finharness suite` writes it, UCFE matches
through rating.write_matches and judge summaries through the UCFE judge's own summary()), then every number of the
scorecard checked against values computed here from the run files, the four files, the terminal table at 80 and
200 columns, `finharness report` on the suite and on run folders, and the HTML in headless Chromium.

Two models: 'alpha' knows the demo's and BizBench's answers, 'beta' answers A (demo) and only the even BizBench
items; the FinTradeBench judge grades alpha's No-RAG answers 5/5 and copies the rubric's example for the rest.
"""

from __future__ import annotations

import asyncio
import csv
import io
import json
import math
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from finharness.backends.fake import FakeBackend
from finharness.benchmarks.bizbench.data import BizBenchItem, write_items_jsonl
from finharness.benchmarks.demo.task import DATA as DEMO_DATA
from finharness.benchmarks.registry import make_task, task_class
from finharness.benchmarks.ucfe.judge import JudgeReport, JudgeSettings, summary
from finharness.cli import app
from finharness.core.pool import run_dir_name
from finharness.core.runner import RunOptions, run_task
from finharness.core.store import RunStore
from finharness.judges.pairwise import JudgeStats
from finharness.rating import Match, RatingOptions, rate_table, write_matches
from finharness.report.runs import load_run
from finharness.stats import mean_ci, paired_test, proportion_ci, weighted_mean_ci
from finharness.suite.scorecard import build_scorecard, scorecard_from_runs
from finharness.suite.scorecard_views import FILES, print_scorecard, render_csv, write_scorecard

from ..benchmarks.test_cfinbench_task import write_exam
from .test_report_html import CHROMIUM, chromium, needs_chromium, parse

ALPHA, BETA, JUDGE = "fake?name=alpha", "fake?name=beta", "fake?name=judge"
REFERENCE = "gpt-4o (released)"
DEMO_GOLD = {obj["question"]: obj["answer"] for obj in map(json.loads, DEMO_DATA.read_text(encoding="utf-8").splitlines())}
YEARS = range(2001, 2011)
FTB_FILINGS = ("10-Q_2025-08-01_0000320193-25-000073.htm", "10-Q_2025-05-02_0000320193-25-000057.htm")


def demo_reply(model: str):
    def reply(text: str) -> str:
        if model == "beta":
            return "Answer: A"
        return "Answer: " + next((gold for question, gold in DEMO_GOLD.items() if question in text), "A")
    return reply


def bizbench_reply(model: str):
    def reply(text: str) -> str:
        years = [int(y) for y in re.findall(r"in (\d{4})\?", text)]
        if not years:
            return "[[0]]"
        year = years[-1]
        right = model == "alpha" or year % 2 == 0
        return f"[[{year - 1900 if right else 1}]]"
    return reply


def ftb_reply(model: str):
    def reply(text: str) -> str:
        return f"{model}-{'rag' if 'MARKET DATA' in text else 'norag'}: ROE is strong and RSI is 55."
    return reply


def verdict(correctness: int, reasoning: int, signals: int, fundamentals: int) -> str:
    return json.dumps({"evaluations": [{
        "indicator_analysis": {"found_indicators": ["ROE"], "total_golden_indicators": 3, "indicators_found_count": 1},
        "bias_analysis": {"trading_signals_score": signals, "fundamental_score": fundamentals},
        "overall_quality": {"correctness_score": correctness, "reasoning_score": reasoning}}]})


def judge_reply(text: str) -> str:
    """alpha's No-RAG answers 5/4/3/4; everything else the rubric's own example scores (4/5/4/5)."""
    return verdict(5, 4, 3, 4) if "alpha-norag:" in text else verdict(4, 5, 4, 5)


def write_bizbench_items(path: Path, task: str) -> Path:
    items = [BizBenchItem(id=f"{task}-{year}", question=f"What was the revenue in {year}?", answer=str(year - 1900),
                          task=task, context=f"Revenue in {year} was {year - 1900} million dollars.",
                          context_type="string") for year in YEARS]
    write_items_jsonl(items, path)
    return path


def ftb_data_root(root: Path, shared: Path) -> Path:
    """A FinTradeBench data root of two Apple questions (F1, FT1), two filings and Apple's prices: RAG in seconds."""
    src, dst = shared / "fintradebench", root / "fintradebench"
    (dst / "SEC_Filings" / "AAPL").mkdir(parents=True)
    (dst / "history_xlsx").mkdir()
    for name in FTB_FILINGS:
        (dst / "SEC_Filings" / "AAPL" / name).symlink_to(src / "SEC_Filings" / "AAPL" / name)
    (dst / "history_xlsx" / "AAPL-history.xlsx").symlink_to(src / "history_xlsx" / "AAPL-history.xlsx")
    (dst / "fundamentals").symlink_to(src / "fundamentals")
    lines = (src / "FinTradeBench_Golden_Seed_150.csv").read_text(encoding="utf-8")
    rows = list(csv.DictReader(io.StringIO(lines)))
    with (dst / "FinTradeBench_Golden_Seed_150.csv").open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(r for r in rows if r["question_id"] in ("F1", "FT1"))
    return root


FTB = {"select": False, "judge_context": "none"}
ROWS = [  # id, benchmark, label, task, options, data root key, judged, models that run it
    ("demo", "demo", "demo", "demo", {}, None, False, (ALPHA, BETA)),
    ("demo_ll", "demo", "demo (log-likelihood)", "demo", {"method": "ll"}, None, False, (ALPHA,)),
    ("cfinbench", "CFinBench", "CFinBench", "cfinbench", {}, "exam", False, (ALPHA, BETA)),
    ("bizbench_tatqa-e", "BizBench", "BizBench TAT-QA(E)", "bizbench/tatqa-e", {"items": "tatqa-e"}, "shared", False,
     (ALPHA, BETA)),
    ("bizbench_secnum", "BizBench", "BizBench SEC-Num", "bizbench/secnum", {"items": "secnum"}, "shared", False,
     (ALPHA, BETA)),
    ("ucfe", "UCFE", "UCFE", "ucfe", {"tasks": "0_股价预测"}, "shared", True, (ALPHA, BETA)),
    ("fintradebench_norag", "FinTradeBench", "FinTradeBench No-RAG", "fintradebench",
     {**FTB, "mode": "norag", "levels": "L1"}, "ftb", True, (ALPHA, BETA)),
    ("fintradebench_rag", "FinTradeBench", "FinTradeBench RAG", "fintradebench",
     {**FTB, "mode": "rag", "levels": "L5", "dense": "off"}, "ftb", True, (ALPHA, BETA)),
]

# UCFE matches: (a, b) -> (a wins, ties, b wins), each item judged in both orders
MATCH_PLAN = {(REFERENCE, ALPHA): (24, 3, 3), (REFERENCE, BETA): (27, 3, 0), (ALPHA, BETA): (20, 6, 4)}


def write_ucfe(out: Path) -> None:
    (out / "ucfe").mkdir(parents=True, exist_ok=True)
    matches = []
    for (a, b), (wins, ties, losses) in MATCH_PLAN.items():
        winners = ["model_a"] * wins + ["tie"] * ties + ["model_b"] * losses
        matches += [Match("0_股价预测", a, b, w, item_id=str(i), judge=JUDGE, order="both")  # type: ignore[arg-type]
                    for i, w in enumerate(winners)]
        n = wins + ties + losses
        # both orders read per item: the first-shown dialogue won 60% of the replies that chose a side
        stats = JudgeStats(judgments=2 * n, first_wins=36, second_wins=24, position_ties=2 * n - 60,
                           pairs_both_decided=n, flips=ties, comparisons=n,
                           winners={"a": wins, "b": losses, "tie": ties})
        result = summary(JudgeReport(stats=stats), JudgeSettings(), judge=JUDGE, name_a=a, name_b=b)
        name = f"{run_dir_name(a)}__{run_dir_name(b)}"
        (out / "ucfe" / f"{name}.summary.json").write_text(json.dumps(result, ensure_ascii=False), encoding="utf-8")
    write_matches(matches, out / "ucfe" / "matches.jsonl")


def run_rows(out: Path, roots: dict, items: dict) -> dict:
    store = RunStore(out / "store.sqlite")
    runs: dict[str, dict[str, str]] = {}
    try:
        for row_id, _, _, task_name, options, root, _, models in ROWS:
            options = {k: (str(items[v]) if k == "items" else v) for k, v in options.items()}
            for model in models:
                name = model.split("=")[1]
                reply = {"demo": demo_reply, "fintradebench": ftb_reply}.get(
                    task_name, bizbench_reply if task_name.startswith("bizbench") else lambda m: (lambda t: "答案：A"))
                backends = {"model": FakeBackend(model, name=name, reply=reply(name)),
                            "judge": FakeBackend(JUDGE, name="judge", reply=judge_reply)}
                folder = f"{run_dir_name(model)}/{row_id}"
                task = make_task(task_class(task_name), options)
                limit = 3 if task_name == "ucfe" else None
                try:
                    asyncio.run(run_task(task, backends, store, RunOptions(data_dir=roots.get(root), limit=limit),
                                         out_dir=out / folder))
                finally:
                    close = getattr(task, "close", None)
                    if close:
                        close()
                runs.setdefault(row_id, {})[model] = folder
    finally:
        store.close()
    return runs


def cumulative(out: Path, folders) -> dict:
    total = {"invocations": 1, "calls": 0, "prompt_tokens": 0, "completion_tokens": 0, "reasoning_tokens": 0,
             "tokens_evaluated": 0, "wall_s": 0.0, "cost_usd": None}
    for folder in folders:
        results = json.loads((out / folder / "results.json").read_text(encoding="utf-8"))
        for key in ("calls", "prompt_tokens", "completion_tokens", "reasoning_tokens", "tokens_evaluated"):
            total[key] += results["counts"].get(key) or 0
        total["wall_s"] += results["timing"]["wall_s"]
    return total


@pytest.fixture(scope="module")
def suite_dir(tmp_path_factory, shared_data: Path) -> Path:
    return make_suite(tmp_path_factory.mktemp("scorecard"), shared_data)


def make_suite(root: Path, shared_data: Path) -> Path:
    """ROOT/out: the suite folder (every run, the UCFE matches and summaries, suite.json)."""
    out = root / "out"
    roots = {"exam": write_exam(root / "exam"), "shared": shared_data, "ftb": ftb_data_root(root / "ftb", shared_data)}
    items = {task: write_bizbench_items(root / f"{task}.jsonl", task) for task in ("tatqa-e", "secnum")}
    runs = run_rows(out, roots, items)
    write_ucfe(out)
    by_model = {m: cumulative(out, [r[m] for r in runs.values() if m in r]) for m in (ALPHA, BETA)}
    suite = {
        "suite": "test", "suite_file": str(root / "test.toml"), "description": "two fakes on every benchmark",
        "models": [ALPHA, BETA], "judge": JUDGE, "user": None, "data_dir": str(shared_data), "prices": {},
        "rows": [{"id": row_id, "benchmark": bench, "label": label, "task": task, "options": options,
                  "standin": None, "judged": judged, "paper": None, "runs": runs[row_id]}
                 for row_id, bench, label, task, options, _, judged, _ in ROWS],
        "errors": {BETA: {"demo_ll": "budget: budget reached before this row"}},
        "ucfe": {"row": "ucfe", "matches": "ucfe/matches.jsonl", "reference": REFERENCE, "judge": JUDGE,
                 "summaries": sorted(str(p.relative_to(out)) for p in (out / "ucfe").glob("*.summary.json"))},
        "cumulative": {**cumulative(out, [f for r in runs.values() for f in r.values()])},
        "by_model": by_model, "wall_s": 12.5, "status": "complete",
    }
    (out / "suite.json").write_text(json.dumps(suite, ensure_ascii=False, indent=1), encoding="utf-8")
    return out


@pytest.fixture(scope="module")
def card(suite_dir: Path):
    return build_scorecard(suite_dir)


def run_of(suite_dir: Path, model: str, row: str):
    return load_run(suite_dir / run_dir_name(model) / row)


def per_sample(suite_dir: Path, model: str, row: str) -> dict[str, float]:
    out = {}
    for line in (suite_dir / run_dir_name(model) / row / "samples.jsonl").read_text(encoding="utf-8").splitlines():
        obj = json.loads(line)
        if obj.get("score") and isinstance(obj["score"].get("value"), (int, float)):
            out[obj["id"]] = float(obj["score"]["value"])
    return out


# --- the numbers -------------------------------------------------------------------------------------------------

def test_cells_are_each_runs_headline_with_ci_n_and_status(card, suite_dir):
    assert card.models == (ALPHA, BETA)
    for row_id in ("demo", "cfinbench", "bizbench_tatqa-e", "bizbench_secnum", "fintradebench_norag"):
        for model in (ALPHA, BETA):
            results = json.loads((suite_dir / run_dir_name(model) / row_id / "results.json").read_text("utf-8"))
            metric = results["metrics"][results["headline"]]
            cell = card.cell(row_id, model)
            assert (cell.value, list(cell.ci95), cell.n) == (metric["value"], metric["ci95"], metric["n"])
            assert cell.status == "complete" and cell.run == f"{run_dir_name(model)}/{row_id}"
    assert card.row("cfinbench").metric == "strict.score" and "0.4·single" in card.row("cfinbench").about
    # alpha knows every demo answer; beta answers A, right where the gold is A
    golds = list(DEMO_GOLD.values())
    assert card.cell("demo", ALPHA).value == 1.0
    assert card.cell("demo", BETA).value == pytest.approx(golds.count("A") / len(golds))


def test_a_row_without_a_run_is_missing_with_the_suites_reason(card):
    cell = card.cell("demo_ll", BETA)
    assert cell.status == "missing" and cell.value is None and "budget reached" in cell.why
    assert card.cell("demo_ll", ALPHA).status == "complete"
    # two rows of one task are told apart by the option that differs
    assert card.row("demo").run_label == "method=gen" and card.row("demo_ll").run_label == "method=ll"
    assert any("budget reached" in n for n in card.notes)


def test_pairwise_differences_are_the_paired_tests_of_the_shared_items(card, suite_dir):
    for row_id in ("demo", "bizbench_tatqa-e", "fintradebench_norag"):
        a, b = per_sample(suite_dir, ALPHA, row_id), per_sample(suite_dir, BETA, row_id)
        expected = paired_test(b, a)  # alpha − beta
        d = next(d for d in card.differences if d.row == row_id)
        assert (d.ahead, d.behind) == (ALPHA, BETA)
        assert d.diff == pytest.approx(expected.diff) and d.n == expected.n == len(set(a) & set(b))
        assert list(d.ci95) == pytest.approx(list(expected.ci95)) and d.p_value == pytest.approx(expected.p_value)
        assert d.test == expected.test
        assert d.separable == (expected.p_value < 0.05 and expected.diff > 0)
    demo = next(d for d in card.differences if d.row == "demo")
    assert demo.test == "mcnemar-score" and demo.separable  # alpha right on every item beta missed
    assert card.cell("demo", ALPHA).rank == "1" and card.cell("demo", BETA).rank == "2"
    assert card.row("demo").ranking == f"{ALPHA} > {BETA}"
    ftb = next(d for d in card.differences if d.row == "fintradebench_norag")
    assert ftb.n == 2 and not ftb.separable and card.row("fintradebench_norag").ranking.startswith("tied")


def test_bizbench_composite_is_the_mean_of_its_tasks_with_their_variances_combined(card, suite_dir):
    row = card.row("bizbench_mean")
    assert row.kind == "composite" and row.label == "BizBench mean of 2 tasks" and "ours" in row.about
    rows = [r.id for r in card.rows]
    assert rows.index("bizbench_mean") == rows.index("bizbench_secnum") + 1
    for model in (ALPHA, BETA):
        parts = [mean_ci(list(per_sample(suite_dir, model, t).values())) for t in ("bizbench_tatqa-e", "bizbench_secnum")]
        expected = weighted_mean_ci([(0.5, p) for p in parts])
        cell = card.cell("bizbench_mean", model)
        heads = [card.cell(t, model).value for t in ("bizbench_tatqa-e", "bizbench_secnum")]
        assert cell.value == pytest.approx(sum(heads) / 2) == pytest.approx(expected.value)
        assert list(cell.ci95) == pytest.approx(list(expected.ci95)) and cell.n == 2 * len(YEARS)
    assert card.cell("bizbench_mean", ALPHA).value == 1.0 and card.cell("bizbench_mean", BETA).value == 0.5
    # the difference: per task the paired differences of the shared items (in [-1, 1]), combined with the values'
    # weights into the difference's own normal interval and p
    d = next(d for d in card.differences if d.row == "bizbench_mean")
    diffs = []
    for t in ("bizbench_tatqa-e", "bizbench_secnum"):
        a, b = per_sample(suite_dir, ALPHA, t), per_sample(suite_dir, BETA, t)
        diffs.append(mean_ci([a[i] - b[i] for i in sorted(a)], bounds=(-1.0, 1.0)))
    value = sum(0.5 * e.value for e in diffs)
    se = math.sqrt(sum(0.25 * e.variance for e in diffs))
    assert (d.ahead, d.behind, d.test) == (ALPHA, BETA, "weighted-paired")
    assert d.diff == pytest.approx(0.5) == pytest.approx(value)
    assert list(d.ci95) == pytest.approx([max(-1.0, value - 1.959964 * se), min(1.0, value + 1.959964 * se)])
    assert d.p_value == pytest.approx(math.erfc(value / se / math.sqrt(2))) and d.separable == (d.ci95[0] > 0)


def test_fintradebench_rag_delta_and_its_judges_copy_rate(card, suite_dir):
    row = card.row("fintradebench_rag_delta")
    assert row.direction == "info" and not row.ranking
    for model in (ALPHA, BETA):
        expected = paired_test(per_sample(suite_dir, model, "fintradebench_norag"),
                               per_sample(suite_dir, model, "fintradebench_rag"))
        cell = card.cell("fintradebench_rag_delta", model)
        assert cell.value == pytest.approx(expected.diff) and cell.n == expected.n == 2
    assert card.cell("fintradebench_rag_delta", ALPHA).value == pytest.approx(-0.2)  # 5/5 without, example with
    assert card.cell("fintradebench_rag_delta", BETA).value == pytest.approx(0.0)
    norag, rag = card.row("fintradebench_norag"), card.row("fintradebench_rag")
    assert norag.judged and norag.judge.judge == JUDGE
    copy = norag.judge.rates[0]
    assert (copy.name, copy.hits, copy.n) == ("rubric-example copy", 2, 4)  # beta's two answers of the four
    assert rag.judge.rates[0].hits == rag.judge.rates[0].n == 4
    assert any("rubric's example" in n for n in rag.judge.notes) and not norag.judge.notes
    assert norag.run_label == "dense=auto, levels=L1, mode=norag" and rag.run_label == "dense=off, levels=L5, mode=rag"


def test_ucfe_row_is_the_bradley_terry_rating_with_the_reference_and_judge_health(card, suite_dir):
    from finharness.rating import read_matches

    table = rate_table(read_matches(suite_dir / "ucfe" / "matches.jsonl"), RatingOptions(method="bt", bootstrap=1000))
    row = card.row("ucfe")
    assert row.kind == "rating" and row.metric == "bt_rating" and row.judged
    for model in (ALPHA, BETA):
        cell, expected = card.cell("ucfe", model), table.ratings[model]
        assert cell.value == pytest.approx(expected.rating) and tuple(cell.ci95) == pytest.approx(expected.ci95)
        assert cell.n == expected.matches == 60
    players = {p.name: p for p in card.ratings.players}
    assert players[REFERENCE].reference and players[REFERENCE].model is None
    assert [p.name for p in card.ratings.players] == [REFERENCE, ALPHA, BETA]
    gap = next(d for d in card.differences if d.row == "ucfe")
    expected_gap = next(g for g in table.gaps if g.higher == ALPHA)
    assert (gap.ahead, gap.behind) == (ALPHA, BETA) and gap.diff == pytest.approx(expected_gap.gap)
    assert tuple(gap.ci95) == pytest.approx(expected_gap.ci95)
    assert gap.separable == (expected_gap.ci95[0] > 0)
    rates = {r.name: r for r in row.judge.rates}
    ties = sum(t for _, t, _ in MATCH_PLAN.values())
    comparisons = sum(sum(v) for v in MATCH_PLAN.values())
    assert (rates["tie"].hits, rates["tie"].n) == (ties, comparisons)
    assert rates["tie"].value == pytest.approx(proportion_ci(ties, comparisons).value)
    assert (rates["first-position win"].hits, rates["first-position win"].n) == (3 * 36, 3 * 60)
    assert row.judge.judge == JUDGE


def test_usage_is_the_suites_cumulative_per_model(card, suite_dir):
    suite = json.loads((suite_dir / "suite.json").read_text(encoding="utf-8"))
    usage = {u.model: u for u in card.usage}
    for model in (ALPHA, BETA):
        assert usage[model].calls == suite["by_model"][model]["calls"] > 0
        assert usage[model].prompt_tokens == suite["by_model"][model]["prompt_tokens"]
    assert usage["all"].calls == suite["cumulative"]["calls"]


def test_a_standin_row_is_named_as_one(suite_dir, tmp_path):
    suite = json.loads((suite_dir / "suite.json").read_text(encoding="utf-8"))
    next(r for r in suite["rows"] if r["id"] == "cfinbench")["standin"] = "cpa"
    (suite_dir / "suite.json").rename(tmp_path / "saved.json")
    try:
        (suite_dir / "suite.json").write_text(json.dumps(suite), encoding="utf-8")
        row = build_scorecard(suite_dir).row("cfinbench")
    finally:
        (tmp_path / "saved.json").replace(suite_dir / "suite.json")
    assert row.standin == "cpa" and row.label == "CFinBench (stand-in: cpa)"


# --- the files and the table -------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def written(card, suite_dir) -> dict[str, Path]:
    return {p.name: p for p in write_scorecard(card, suite_dir)}


def test_the_four_files(written, card):
    assert sorted(written) == sorted(FILES)
    data = json.loads(written["scorecard.json"].read_text(encoding="utf-8"))
    assert data["models"] == [ALPHA, BETA] and len(data["cells"]) == len(card.rows) * 2
    cells = list(csv.DictReader(io.StringIO(written["scorecard.csv"].read_text(encoding="utf-8"))))
    assert len(cells) == len(card.rows) * 2
    demo = next(c for c in cells if c["row"] == "demo" and c["model"] == BETA)
    assert float(demo["value"]) == card.cell("demo", BETA).value and demo["rank"] == "2"
    assert written["scorecard.csv"].read_text(encoding="utf-8") == render_csv(card)
    md = written["scorecard.md"].read_text(encoding="utf-8")
    assert "| row | number | fake?name=alpha | fake?name=beta | ranking |" in md
    assert "## Pairwise differences" in md and "## Judge health" in md and REFERENCE in md


def table_text(card, width: int) -> str:
    buffer = io.StringIO()
    print_scorecard(card, file=buffer, width=width)
    return buffer.getvalue()


def table_cells(text: str) -> list[str]:
    """Every cell of every rich table in `text`, its wrapped lines joined and all whitespace removed."""
    cells: list[str] = []
    block: list[list[str]] = []
    for line in text.splitlines() + [""]:
        if line.startswith(("│", "┃")):
            block.append(re.split(r"[│┃]", line)[1:-1])
            continue
        if block:
            cells += ["".join(re.sub(r"\s+", "", part[i]) for part in block) for i in range(len(block[0]))]
            block = []
    return cells


@pytest.mark.parametrize("width", [80, 200])
def test_the_terminal_table_fits_and_cuts_nothing(card, width):
    text = table_text(card, width)
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= width
    assert "…" not in text
    cells = table_cells(text)
    for cell in card.cells:  # every reason is there whole: wrapping only moves it to the next line
        if cell.why:
            assert any(re.sub(r"\s+", "", cell.why) in c for c in cells), cell.why
    for row in card.rows:
        assert any(c.startswith(re.sub(r"\s+", "", row.label + row.run_label)) for c in cells), row.label
    for model in card.models:
        assert model in cells
    demo = next(c for c in cells if c.startswith("100.0%(1)[73.5%"))  # alpha's demo cell, rank and CI
    assert demo.endswith("n=12[1]")
    if width == 200:  # wide enough: each cell's value line stays whole
        assert any("100.0% (1)" in line and "8.3% (2)" in line for line in lines)


def test_report_prints_the_scorecard_of_a_suite_folder(suite_dir):
    result = CliRunner().invoke(app, ["report", str(suite_dir)], env={"COLUMNS": "120"})
    assert result.exit_code == 0, result.output
    assert "scorecard: test (2 models)" in result.output and "UCFE Bradley–Terry ratings" in result.output
    assert max(len(line) for line in result.output.splitlines()) <= 120
    result = CliRunner().invoke(app, ["report", str(suite_dir), "--json"])
    assert json.loads(result.output)["suite"] == "test"


def test_report_on_run_folders_tells_two_runs_of_one_task_apart(suite_dir):
    folders = [suite_dir / run_dir_name(m) / row for m, row in
               ((ALPHA, "fintradebench_norag"), (ALPHA, "fintradebench_rag"), (BETA, "fintradebench_norag"),
                (BETA, "fintradebench_rag"), (ALPHA, "demo"), (ALPHA, "demo_ll"), (BETA, "demo"))]
    view = scorecard_from_runs(folders)
    assert view.models == (ALPHA, BETA)
    labels = {r.id: r.run_label for r in view.rows}
    rag = next(r for r in view.rows if "mode=rag" in r.run_label)
    norag = next(r for r in view.rows if "mode=norag" in r.run_label)
    assert view.cell(rag.id, BETA).value == card_value(suite_dir, BETA, "fintradebench_rag")
    assert view.cell(norag.id, ALPHA).value == card_value(suite_dir, ALPHA, "fintradebench_norag")
    assert any(r.task == "demo" and "method=ll" in r.run_label for r in view.rows), labels
    assert view.cell(next(r.id for r in view.rows if "method=ll" in r.run_label), BETA).status == "missing"
    assert any(r.id == "fintradebench_rag_delta" for r in view.rows)  # the composite, from the runs' own mode
    result = CliRunner().invoke(app, ["report", *map(str, folders), "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["view"]["models"] == [ALPHA, BETA] and data["metrics"][0]["run"] == str(folders[0])
    text = CliRunner().invoke(app, ["report", *map(str, folders)], env={"COLUMNS": "100"}).output
    assert "mode=rag" in text and "method=ll" in text


def card_value(suite_dir: Path, model: str, row: str) -> float:
    run = run_of(suite_dir, model, row)
    return run.metric(run.headline)["value"]


# --- in a browser ------------------------------------------------------------------------------------------------

def test_the_html_is_self_contained(written):
    html = written["scorecard.html"].read_text(encoding="utf-8")
    doc = parse(html)
    assert doc.count("script") == 0 and doc.count("img") == 0 and doc.count("link") == 0
    csp = next(a["content"] for t, a in doc.tags if t == "meta" and a.get("http-equiv") == "Content-Security-Policy")
    assert "default-src 'none'" in csp
    assert not re.search(r"(src|href)=\"(https?:)?//", html)
    for anchor in ("grid", "judges", "ratings", "differences", "usage", "notes"):
        assert f'id="{anchor}"' in html


@needs_chromium
def test_chromium_renders_the_scorecard(written, tmp_path):
    proc = chromium("--dump-dom", written["scorecard.html"].resolve().as_uri(), user_data=tmp_path / "profile")
    assert proc.returncode == 0, proc.stderr[-2000:]
    dom = parse(proc.stdout)
    assert dom.count("table", **{"class": "scorecard"}) == 1
    assert dom.count("svg", **{"class": "chart"}) == 2 and dom.count("svg", **{"class": "strip"}) >= 8
    png = tmp_path / "scorecard.png"
    proc = chromium(f"--screenshot={png}", "--window-size=1280,1800", written["scorecard.html"].resolve().as_uri(),
                    user_data=tmp_path / "profile2")
    assert png.exists(), proc.stderr[-2000:]
    from PIL import Image

    with Image.open(png) as image:
        colours = image.convert("RGB").getcolors(maxcolors=1 << 20)
    assert colours is not None and len(colours) > 100
    assert CHROMIUM
