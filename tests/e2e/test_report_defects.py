"""The HTML report's defects of issue 28 (item 8), each checked on a rendered page of real runs: UCFE dialogues
(fake model and user) in two settings, a pairwise matches file, the IDEAFinBench CPA exam in CFinBench's
layout, and a task of our own whose headline is lower-is-better.

- a headline the task declares informational (UCFE's `rounds`) ranks nothing; a lower-is-better one ranks
  the lowest first;
- the settings that differ between runs are a readable list (folded when long), and the run column is one
  line in the browser;
- one navigation entry per benchmark (UCFE's runs and ratings in one section);
- chart axes and colour scales have distinct ticks, whole numbers for counts;
- a group label names its group once (`CPA (IDEAFinBench)`, not `CPA CPA (IDEAFinBench)`);
- run health shows the tokens and wall time of every invocation of a resumed run.

Browser checks use Debian's chromium and chromedriver through selenium, as tests/e2e/test_report_html.py."""

from __future__ import annotations

import json
import re
from html import unescape
from html.parser import HTMLParser
from pathlib import Path

import pytest
from typer.testing import CliRunner

from finharness.benchmarks.cfinbench.convert import convert_ideafinbench
from finharness.cli import app
from finharness.report import write_html_report

from .test_report_html import open_in_chromium

ERRORS_TASK = '''\
from finharness.core.task import Task
from finharness.core.types import Message, Sample, Score


class ErrorsTask(Task):
    """Thirty questions; the headline counts errors, so lower is better."""

    name = "errors"
    headline = "errors"
    metric_directions = {"errors": "lower"}

    def load(self, data_dir):
        return [Sample(id=f"e/{i}", input={"q": f"question {i}"}, target="A") for i in range(30)]

    async def solve(self, sample, models):
        return (await models.model.chat([Message("user", sample.input["q"])])).text

    def score(self, sample, prediction):
        return Score(value=float("A" not in prediction), values={"errors": float("A" not in prediction)})
'''

UCFE_OPTIONS = ("-o", "tasks=Analyst", "--limit", "3")
USER = "fake?name=user&reply=Please explain that again."
CUMULATIVE = {"invocations": 2, "calls": 9, "prompt_tokens": 4321, "completion_tokens": 87, "reasoning_tokens": 0,
              "tokens_evaluated": 0, "wall_s": 12.5, "cost_usd": None}


def cli(*args: str) -> None:
    result = CliRunner().invoke(app, list(args))
    assert result.exit_code == 0, result.output


@pytest.fixture(scope="module")
def page(shared_data, tmp_path_factory) -> tuple[Path, str]:
    root = tmp_path_factory.mktemp("defects")
    data = str(shared_data)
    cli("run", "ucfe", "--model", "fake?name=alpha", "--user-model", USER, *UCFE_OPTIONS, "-o", "max_rounds=2",
        "--data-dir", data, "--out", str(root / "ucfe-a"), "-q")
    cli("run", "ucfe", "--model", "fake?name=alpha", "--user-model", USER, *UCFE_OPTIONS, "-o", "max_rounds=2",
        "--data-dir", data, "--out", str(root / "ucfe-a"), "-q")  # the same again: every call from the store
    rerun = json.loads((root / "ucfe-a" / "results.json").read_text(encoding="utf-8"))
    assert rerun["counts"]["calls"] == 0 and rerun["counts"]["prompt_tokens"] == 0
    rerun["cumulative"] = CUMULATIVE  # what results.json says of a run invoked twice
    (root / "ucfe-a" / "results.json").write_text(json.dumps(rerun), encoding="utf-8")
    cli("run", "ucfe", "--model", "fake?name=beta", "--user-model", USER, *UCFE_OPTIONS, "-o", "max_rounds=1",
        "-o", "draw=1", "-o", "user_opening=cue", "--data-dir", data, "--out", str(root / "ucfe-b"), "-q")
    exam = root / "cpa"
    convert_ideafinbench(shared_data / "cfa_cpa" / "IDEAFinBench", exam)
    cli("run", "cfinbench", "--model", "fake?reply=答案：A", "-o", f"exam={exam}", "--limit", "30",
        "--out", str(root / "cpa-a"), "-q")
    cli("run", "cfinbench", "--model", "fake?name=b&reply=答案：B", "-o", f"exam={exam}", "--limit", "30",
        "--extract", "robust", "--out", str(root / "cpa-b"), "-q")
    task_file = root / "errors_task.py"
    task_file.write_text(ERRORS_TASK, encoding="utf-8")
    cli("run", f"{task_file}:ErrorsTask", "--model", "fake?name=careless&reply=B", "--out", str(root / "err-b"), "-q")
    cli("run", f"{task_file}:ErrorsTask", "--model", "fake?name=careful&reply=A", "--out", str(root / "err-a"), "-q")
    matches = root / "matches.jsonl"
    matches.write_text("".join(json.dumps({"task": "Analyst", "item_id": str(i), "model_a": "fake?name=alpha",
                                           "model_b": "fake?name=beta", "winner": winner, "judge": "judge-x",
                                           "order": "ab"}) + "\n"
                               for i, winner in enumerate(["model_a", "tie", "model_b"])), encoding="utf-8")
    runs = [root / name for name in ("ucfe-a", "ucfe-b", "cpa-a", "cpa-b", "err-b", "err-a")]
    report = write_html_report(runs, root / "report.html", matches=matches)
    return report, report.read_text(encoding="utf-8")


def board(html: str, task: str) -> str:
    """The leaderboard block of one task."""
    start = html.index(f"<b>{task}</b>")
    return html[html.rindex('<div class="board">', 0, start):html.index("</table>", start)]


def rows(block: str) -> list[list[str]]:
    """The body rows of a table block, each cell's text."""
    body = block[block.index("<tbody>"):]
    return [[unescape(re.sub(r"<[^>]+>", " ", cell)).strip()
             for cell in re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", row, re.S)]
            for row in re.findall(r"<tr>(.*?)</tr>", body, re.S)]


def test_an_informational_headline_ranks_nothing(page):
    _, html = page
    ucfe = board(html, "ucfe")
    assert "describes the runs and ranks nothing" in ucfe
    assert [row[0] for row in rows(ucfe)] == ["—", "—"]  # no rank, in run order
    assert [row[1] for row in rows(ucfe)] == ["fake?name=alpha", "fake?name=beta"]
    assert "Pairwise comparisons" not in html[html.index("<b>ucfe</b>"):html.index("<b>cfinbench</b>")]


def test_a_lower_is_better_headline_ranks_the_lowest_first(page):
    _, html = page
    errors = board(html, "errors")
    assert "lower is better (↓)" in errors and "errors ↓" in errors
    ranked = rows(errors)
    assert [(row[0], row[1]) for row in ranked] == [("1", "fake?name=careful&reply=A"),
                                                     ("2", "fake?name=careless&reply=B")]
    assert ranked[0][4] == "0.0%" and ranked[1][4] == "100.0%"


def test_differing_settings_are_a_readable_list(page):
    _, html = page
    ucfe = board(html, "ucfe")
    assert "{'" not in ucfe and "model_temperature" not in ucfe  # only what differs, never the dict
    assert ucfe.count('<details class="config"><summary>3 options differ</summary>') == 2
    for key in ("settings.max_rounds", "settings.draw", "settings.user_opening"):
        assert ucfe.count(f"<li><code>{key}</code>") == 2
    assert "<li><code>settings.user_opening</code> cue</li>" in ucfe
    cpa = board(html, "cfinbench")
    assert cpa.count('<ul class="config"><li><code>extract</code>') == 2 and "<details" not in cpa


@pytest.fixture(scope="module")
def browser(page, tmp_path_factory):
    """The report open in headless chromium driven by selenium, at a laptop's width."""
    driver = open_in_chromium(page[0], tmp_path_factory.mktemp("selenium-profile"), window="1280,1000")
    yield driver
    driver.quit()


def test_the_run_column_is_one_line_in_the_browser(browser):
    lines = browser.execute_script(
        "return Array.prototype.map.call(document.querySelectorAll('table.leaderboard span.run'), function (s) {"
        "  var h = parseFloat(getComputedStyle(s).lineHeight) || 20;"
        "  return [s.textContent, Math.round(s.getBoundingClientRect().height / h)]; });")
    assert sorted(name for name, _ in lines) == ["cpa-a", "cpa-b", "err-a", "err-b", "ucfe-a", "ucfe-b"]
    assert all(count == 1 for _, count in lines), lines


def test_one_navigation_entry_per_benchmark(browser):
    entries = browser.execute_script(
        "return Array.prototype.map.call(document.querySelectorAll('nav a'), function (a) {"
        "  return [a.textContent, a.getAttribute('href')]; });")
    names = [text.casefold() for text, _ in entries]
    assert len(names) == len(set(names)), entries
    assert ("UCFE", "#ucfe") in [tuple(e) for e in entries]
    ucfe = browser.execute_script("var s = document.getElementById('ucfe'); return s ? s.textContent : '';")
    assert "Elo ratings" in ucfe and "Win counts" in ucfe and "rounds by task" in ucfe  # ratings and runs


class ChartTicks(HTMLParser):
    """Per chart (svg.chart): its title, its axis tick labels and its colour-scale tick labels."""

    def __init__(self) -> None:
        super().__init__()
        self.charts: list[dict] = []
        self.open: list[tuple[str, dict]] = []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "svg" and attrs.get("class") == "chart":
            self.charts.append({"title": "", "axis": [], "legend": []})
        self.open.append((tag, attrs))

    def handle_endtag(self, tag):
        while self.open and self.open.pop()[0] != tag:
            pass

    def handle_data(self, data):
        if not self.charts or not self.open:
            return
        tag, attrs = self.open[-1]
        chart = self.charts[-1]
        if tag == "title" and not chart["title"]:
            chart["title"] = data
        elif tag == "text" and attrs.get("text-anchor") == "middle" and attrs.get("fill") == "#555":
            in_legend = any(t == "g" and a.get("class") == "legend" for t, a in self.open)
            chart["legend" if in_legend else "axis"].append(data)


def test_axes_have_distinct_ticks_and_counts_whole_numbers(page):
    parser = ChartTicks()
    parser.feed(page[1])
    charts = {c["title"]: c for c in parser.charts}
    assert len(charts) >= 8
    for chart in charts.values():
        for kind in ("axis", "legend"):
            assert len(chart[kind]) == len(set(chart[kind])), f"{chart['title']}: {kind} ticks {chart[kind]}"
    rounds = next(c for t, c in charts.items() if t.startswith("ucfe: rounds by"))
    wins = charts["UCFE win counts: row model beat column model"]
    assert wins["legend"] == ["0", "1"]  # one win at most: whole numbers, not 0 0 0 1 1
    assert len(rounds["axis"]) >= 2 and all(re.fullmatch(r"\d+", t) for t in rounds["axis"]), rounds["axis"]


def test_a_group_label_names_its_group_once(page):
    _, html = page
    assert "CPA (IDEAFinBench)" in html and "CPA CPA" not in html


def test_run_health_counts_every_invocation(page):
    _, html = page
    health = html[html.index('id="runs"'):html.index('id="transcripts"')]
    row = next(r for r in rows(health) if r[0].startswith("fake?name=alpha"))
    tokens, wall = row[-3], row[-2]
    assert tokens.startswith("4.3k / 87") and "2 invocations" in tokens and "last: 0 / 0" in tokens
    assert wall.startswith("12.5") and "last:" in wall
    assert row[-1] == "7.0"  # out tokens/s over all invocations: 87 / 12.5


def test_a_long_list_of_runs_not_separable_never_squeezes_the_model_column(tmp_path: Path):
    """Four tied runs with long model names (as a suite's `model · row` labels are): each one's "not separable
    from" cell lists the other three a line each, and the model column keeps its names whole (it was squeezed
    to a character a line beside one wide line of names)."""
    names = [f"fake?name=a-model-under-test-with-a-long-name-{i}&reply=Answer: B" for i in range(4)]
    for i, name in enumerate(names):
        cli("run", "demo", "--model", name, "--out", str(tmp_path / f"run-{i}"), "-q")
    report = write_html_report([tmp_path / f"run-{i}" for i in range(4)], tmp_path / "report.html")
    assert len(rows(board(report.read_text(encoding="utf-8"), "demo"))) == 4
    driver = open_in_chromium(report, tmp_path / "profile", window="1280,1000")
    try:
        cells = driver.execute_script(
            "function lines(cell) {"  # the text's own height (a cell is as tall as its row), in lines
            "  var range = document.createRange(); range.selectNodeContents(cell);"
            "  return Math.round(range.getBoundingClientRect().height / (parseFloat(getComputedStyle(cell).lineHeight)"
            "                    || 20)); }"
            "return Array.prototype.map.call(document.querySelectorAll('table.leaderboard tbody tr'), function (r) {"
            "  var peers = r.cells[r.cells.length - 1];"
            "  return [r.cells[1].getBoundingClientRect().width / parseFloat(getComputedStyle(r.cells[1]).fontSize),"
            "          lines(peers), peers.querySelectorAll('br').length]; });")
    finally:
        driver.quit()
    assert len(cells) == 4 and all(breaks == 2 and peer_lines >= 3 for _, peer_lines, breaks in cells), cells
    assert all(model_em >= 9 for model_em, _, _ in cells), cells  # a long name wraps in words, not a letter a line
