"""A benchmark plugs itself in (issue 28, item 5): its task, its commands and its report section come from one
installed distribution's entry points (`finharness.tasks`, `finharness.commands`, `finharness.report_sections`),
and neither cli.py nor report/ names it. The built-in benchmarks come through the same tables
(benchmarks/extensions.py), and a command plug-in is imported only when it is named.

The distribution is a temporary folder on sys.path with a `*.dist-info` (test_plugins.fake_distribution)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from finharness.cli import app
from finharness.report import write_html_report

from .test_plugins import fake_distribution, forget_modules  # noqa: F401  (forget_modules: a fixture)

pytestmark = pytest.mark.usefixtures("forget_modules")

ACME = '''\
import typer

from finharness.core.task import Task
from finharness.core.types import Message, Sample, Score


class AcmeTask(Task):
    name = "acme"
    description = "three acme questions"

    def load(self, data_dir):
        return [Sample(id=f"acme/{i}", input={"q": f"question {i}"}, target="A") for i in range(3)]

    async def solve(self, sample, models):
        return (await models.model.chat([Message("user", sample.input["q"])])).text

    def score(self, sample, prediction):
        return Score(value=float("A" in prediction))


acme_app = typer.Typer(no_args_is_help=True, help="Acme: tools of the acme benchmark.")


@acme_app.command("hello")
def hello(name: str = typer.Option("world", "--name")) -> None:
    """Greet from the acme benchmark."""
    typer.echo(f"hello {name} from acme")


def convert_command(src: str) -> None:
    """Convert acme exam files into the acme layout."""
    typer.echo(f"converted {src}")
'''

ACME_REPORT = '''\
from markupsafe import Markup

from finharness.report.sections import ReportSection


def render(runs):
    return Markup('<p class="acme-count">{} acme run(s) drawn by the acme section</p>').format(len(runs))


SECTION = ReportSection("Acme Bench", applies=lambda task: task == "acme", render=render)
'''


def acme_distribution(root: Path, monkeypatch, commands: dict[str, str] | None = None,
                      sections: dict[str, str] | None = None, modules: dict[str, str] | None = None) -> Path:
    """acme-bench 0.3: a task, a command group, a command in `data convert`, a report section (and `commands`,
    `sections`, `modules` besides)."""
    fake_distribution(root, "acme-bench", "0.3", {
        "finharness.tasks": {"acme": "acme_bench:AcmeTask"},
        "finharness.commands": {"acme": "acme_bench:acme_app", "data.convert.acme": "acme_bench:convert_command",
                                **(commands or {})},
        "finharness.report_sections": {"acme": "acme_report:SECTION", **(sections or {})},
    }, {"acme_bench": ACME, "acme_report": ACME_REPORT, **(modules or {})})
    monkeypatch.syspath_prepend(str(root))
    return root


def invoke(*args: str):
    return CliRunner().invoke(app, list(args))


def test_an_installed_benchmark_adds_its_commands(tmp_path, monkeypatch):
    acme_distribution(tmp_path, monkeypatch)
    help_text = invoke("--help").output
    assert "acme " in help_text and "Acme: tools of the acme benchmark." in help_text
    assert "ucfe " in help_text and "data " in help_text  # the built-ins, through the same door
    greeted = invoke("acme", "hello", "--name", "Ada")
    assert greeted.exit_code == 0 and greeted.output == "hello Ada from acme\n"
    # a dotted name mounts into an existing group, beside the built-in benchmark's command there
    convert_help = invoke("data", "convert", "--help").output
    assert "acme " in convert_help and "ideafinbench " in convert_help
    converted = invoke("data", "convert", "acme", "exam.csv")
    assert converted.exit_code == 0 and converted.output == "converted exam.csv\n"


def test_without_the_distribution_the_command_is_unknown():
    result = invoke("acme", "hello")
    assert result.exit_code == 2 and "No such command 'acme'" in result.output


def test_an_installed_benchmark_adds_its_report_section(tmp_path, monkeypatch):
    acme_distribution(tmp_path / "dist", monkeypatch)
    run = invoke("run", "acme", "--model", "fake?reply=Answer: A", "--out", str(tmp_path / "acme_run"), "-q")
    assert run.exit_code == 0, run.output
    html = write_html_report([tmp_path / "acme_run"], tmp_path / "report.html").read_text(encoding="utf-8")
    assert '<section id="acme-bench"><h2>Acme Bench</h2>' in html
    assert '<a href="#acme-bench">Acme Bench</a>' in html
    assert "1 acme run(s) drawn by the acme section" in html
    assert 'id="task-acme"' not in html  # the generic section did not take the run as well
    assert json.loads((tmp_path / "acme_run" / "results.json").read_text())["metrics"]["accuracy"]["value"] == 1.0


def test_broken_plug_ins_are_named_and_fail_alone(tmp_path, monkeypatch):
    acme_distribution(tmp_path / "dist", monkeypatch, commands={"acme-broken": "acme_broken:app"},
                      sections={"acme-wrong": "acme_wrong:SECTION"},
                      modules={"acme_broken": "raise RuntimeError('acme is broken')\n",
                               "acme_wrong": "SECTION = 'not a section'\n"})
    listed = invoke("--help")
    assert listed.exit_code == 0 and "acme-broken" in listed.output and "cannot be loaded" in listed.output
    broken = invoke("acme-broken")
    assert broken.exit_code == 2
    assert "acme-broken" in broken.output and "RuntimeError: acme is broken" in broken.output
    assert invoke("acme", "hello").exit_code == 0  # the rest of the distribution still works
    run = invoke("run", "acme", "--model", "fake?reply=A", "--out", str(tmp_path / "run"), "-q")
    assert run.exit_code == 0, run.output
    html = write_html_report([tmp_path / "run"], tmp_path / "report.html").read_text(encoding="utf-8")
    assert "report section &#39;acme-wrong&#39; (entry point (acme-bench 0.3), acme_wrong:SECTION) is a str" in html
    assert 'id="acme-bench"' in html


def test_a_built_in_name_wins_over_an_entry_point(tmp_path, monkeypatch):
    fake_distribution(tmp_path, "acme-clash", "1.0", {"finharness.commands": {"ucfe": "acme_clash:app"}},
                      {"acme_clash": "raise RuntimeError('never imported')\n"})
    monkeypatch.syspath_prepend(str(tmp_path))
    result = invoke("ucfe", "--help")
    assert result.exit_code == 0 and "judge" in result.output


def test_importing_the_command_line_imports_no_command_group():
    code = ("import sys, finharness.cli; "
            "print(sorted(m for m in sys.modules if m.endswith('.cli') or m == 'importlib.metadata'))")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert loaded == "['finharness.cli']"


ACME_DECLARED = ACME + ACME_REPORT.replace("from markupsafe import Markup\n", "from markupsafe import Markup\n") + '''

from finharness.benchmarks.declaration import Benchmark

BENCHMARK = Benchmark(name="acme", display="Acme Bench", tasks={"acme": "acme_declared:AcmeTask"},
                      commands={"acme": "acme_declared:acme_app", "data.convert.acme": "acme_declared:convert_command"},
                      report_section="acme_declared:SECTION")
'''


def test_a_benchmark_declared_once_brings_its_task_commands_and_section(tmp_path, monkeypatch):
    fake_distribution(tmp_path / "dist", "acme-declared", "1.0",
                      {"finharness.benchmarks": {"acme": "acme_declared:BENCHMARK"}}, {"acme_declared": ACME_DECLARED})
    monkeypatch.syspath_prepend(str(tmp_path / "dist"))
    from finharness.benchmarks.declaration import display_name, every_benchmark

    assert "acme" in {b.name for b in every_benchmark()} and display_name("acme") == "Acme Bench"
    greeted = invoke("acme", "hello", "--name", "Ada")
    assert greeted.exit_code == 0 and greeted.output == "hello Ada from acme\n"
    assert "acme " in invoke("data", "convert", "--help").output
    run = invoke("run", "acme", "--model", "fake?reply=Answer: A", "--out", str(tmp_path / "run"), "-q")
    assert run.exit_code == 0, run.output
    html = write_html_report([tmp_path / "run"], tmp_path / "report.html").read_text(encoding="utf-8")
    assert '<section id="acme-bench"><h2>Acme Bench</h2>' in html
    listed = invoke("list")
    assert "acme" in listed.output and "acme-declared 1.0" in listed.output


ACME_HOOKS = '''

from finharness.benchmarks.declaration import SuiteHooks


class AcmeHooks(SuiteHooks):
    def item_weights(self, samples):
        return [3.0 if s.id.endswith("/0") else 1.0 for s in samples]  # the first question counts three times


HOOKS = AcmeHooks()
'''


def test_a_declared_benchmarks_suite_row_is_planned_with_its_own_item_weights(tmp_path, monkeypatch):
    source = ACME_DECLARED.replace('report_section="acme_declared:SECTION")',
                                   'report_section="acme_declared:SECTION", hooks="acme_declared:HOOKS")') + ACME_HOOKS
    fake_distribution(tmp_path / "dist", "acme-declared", "1.0",
                      {"finharness.benchmarks": {"acme": "acme_declared:BENCHMARK"}}, {"acme_declared": source})
    monkeypatch.syspath_prepend(str(tmp_path / "dist"))
    suite = tmp_path / "acme-suite.toml"
    suite.write_text('name = "acme-suite"\nseed = 0\n\n[[task]]\nid = "acme"\nbenchmark = "Acme Bench"\n'
                     'task = "acme"\nlabel = "Acme (3 questions)"\n', encoding="utf-8")
    out = tmp_path / "runs"
    planned = invoke("suite", str(suite), "--model", "fake?reply=Answer: A", "--out", str(out), "--dry-run", "--json")
    assert planned.exit_code == 0, planned.output
    cell = json.loads(planned.output[planned.output.index("{"):])["tasks"][0]
    power = cell["detectable"]
    assert power["n"] == 3 and power["effective_n"] == pytest.approx(25 / 11)  # (3+1+1)^2 / (9+1+1)
    ran = invoke("suite", str(suite), "--model", "fake?reply=Answer: A", "--out", str(out), "-q")
    assert ran.exit_code == 0, ran.output
    manifest = json.loads((out / "suite.json").read_text(encoding="utf-8"))
    assert manifest["rows"][0]["benchmark"] == "Acme Bench" and manifest["status"] == "complete"
    assert "| Acme (3 questions) | accuracy | 100.0%" in (out / "scorecard.md").read_text(encoding="utf-8")


ACME_SCORED = '''
from dataclasses import dataclass

from finharness.benchmarks.declaration import Benchmark, Health, HealthRate, MeanOfTasks, PairedDelta, SuiteHooks
from finharness.core.task import Task
from finharness.core.types import Message, Sample, Score


@dataclass(frozen=True)
class AcmeOptions:
    variant: str = "plain"
    """plain: the first question is never credited; hinted: every one is."""


class AcmeTask(Task):
    name = "acme"
    description = "three acme questions"
    Options = AcmeOptions

    def load(self, data_dir):
        return [Sample(id=f"acme/{i}", input={"q": f"question {i}"}, target="A") for i in range(3)]

    async def solve(self, sample, models):
        return (await models.model.chat([Message("user", sample.input["q"])])).text

    def score(self, sample, prediction):
        credited = self.settings.variant == "hinted" or not sample.id.endswith("/0")
        return Score(value=float(credited and "A" in prediction))


class AcmeHooks(SuiteHooks):
    composites = (MeanOfTasks("mean of the acme rows (acme's rule)"),
                  PairedDelta("variant", "plain", "hinted", "hint_delta", "hint Δ (hinted − plain)",
                              "what the hint adds, paired per question"))

    def headline_note(self, metric):
        return "acme's accuracy, as the acme paper counts it" if metric == "accuracy" else ""

    def judge_health(self, results):
        return Health((HealthRate("acme echo", 1, len(results) * 3, "replies that echo the question"),),
                      ("the acme judge is a stand-in",))


HOOKS = AcmeHooks()

BENCHMARK = Benchmark(name="acme", display="Acme Bench", tasks={"acme": "acme_scored:AcmeTask"},
                      hooks="acme_scored:HOOKS")
'''


def test_a_declared_benchmarks_composites_notes_and_judge_health_reach_the_scorecard(tmp_path, monkeypatch):
    fake_distribution(tmp_path / "dist", "acme-scored", "1.0",
                      {"finharness.benchmarks": {"acme": "acme_scored:BENCHMARK"}}, {"acme_scored": ACME_SCORED})
    monkeypatch.syspath_prepend(str(tmp_path / "dist"))
    suite = tmp_path / "acme-suite.toml"
    suite.write_text('name = "acme-suite"\nseed = 0\n\n'
                     '[[task]]\nid = "plain"\nbenchmark = "Acme Bench"\ntask = "acme"\noptions = {variant = "plain"}\n\n'
                     '[[task]]\nid = "hinted"\nbenchmark = "Acme Bench"\ntask = "acme"\n'
                     'options = {variant = "hinted"}\n', encoding="utf-8")
    out = tmp_path / "runs"
    models = ("fake?reply=Answer: A&name=a", "fake?reply=Answer: A&name=b")
    ran = invoke("suite", str(suite), *(x for m in models for x in ("--model", m)), "--out", str(out), "-q")
    assert ran.exit_code == 0, ran.output
    from finharness.suite.scorecard import build_scorecard

    card = build_scorecard(out)
    rows = {r.id: r for r in card.rows}
    assert list(rows) == ["plain", "hinted", "acme_bench_mean", "acme_bench_hint_delta"]
    assert rows["plain"].about == "acme's accuracy, as the acme paper counts it"
    assert rows["plain"].judge is not None and rows["plain"].judge.rates[0].name == "acme echo"
    assert (rows["plain"].judge.rates[0].hits, rows["plain"].judge.rates[0].n) == (1, 6)  # both models' runs
    assert rows["plain"].judge.notes == ("the acme judge is a stand-in",)
    mean = card.cell("acme_bench_mean", models[0])
    assert mean.value == pytest.approx((2 / 3 + 1) / 2) and rows["acme_bench_mean"].about.startswith("mean of the acme")
    delta = card.cell("acme_bench_hint_delta", models[1])
    assert delta.value == pytest.approx(1 / 3) and delta.n == 3
    assert rows["acme_bench_hint_delta"].label == "Acme Bench hint Δ (hinted − plain)"


def test_an_installed_benchmarks_sources_register_its_datasets(tmp_path, monkeypatch):
    """A sources.json beside an installed benchmark's declaration puts its datasets in the registry: listed, got by
    name and verified like a built-in's."""
    import hashlib
    import json

    from finharness.data import registry

    dist = tmp_path / "dist"
    fake_distribution(dist, "acme-declared", "1.0",
                      {"finharness.benchmarks": {"acme": "acme_declared:BENCHMARK"}}, {"acme_declared": ACME_DECLARED})
    exam = b'{"q": "2+2?", "a": "4"}\n'
    (dist / "sources.json").write_text(json.dumps({"schema": 1, "datasets": [{
        "name": "acme-exam", "description": "Acme's private exam.", "available_here": True, "repository": None,
        "commit": None, "licence": "internal", "layout": "exam.jsonl: {q, a}", "local_dir": "acme/",
        "homepage": None, "notes": [], "files": [{"path": "exam.jsonl", "size": len(exam),
                                                  "sha256": hashlib.sha256(exam).hexdigest(), "upstream_path": None,
                                                  "url": None}]}]}), encoding="utf-8")
    monkeypatch.syspath_prepend(str(dist))
    registry.load_registry.cache_clear()
    try:
        assert ("entry point 'acme'", dist / "sources.json") in registry.source_files()
        assert registry.get("acme-exam").licence == "internal" and "ucfe" in registry.names()
        (tmp_path / "data" / "acme").mkdir(parents=True)
        (tmp_path / "data" / "acme" / "exam.jsonl").write_bytes(exam)
        assert registry.verify("acme-exam", tmp_path / "data").status == "present"
        listed = invoke("data", "list")
        assert listed.exit_code == 0 and "acme-exam" in listed.output
    finally:
        registry.load_registry.cache_clear()


def test_an_installed_benchmarks_rows_join_the_bundled_suites(tmp_path, monkeypatch):
    """A declaration's suite_rows file adds its `[[quick]]` rows to the bundled quick suite (after the built-ins',
    under its display name); a bad row is an error naming that file and the row."""
    from finharness.suite.spec import SuiteError, load_suite

    dist = tmp_path / "dist"
    init = (ACME_DECLARED.replace("acme_declared:", "acme_pkg:")
            .replace('report_section="acme_pkg:SECTION")', 'report_section="acme_pkg:SECTION", '
                                                           'suite_rows="acme_pkg:suites.toml")'))
    fake_distribution(dist, "acme-pkg", "1.0", {"finharness.benchmarks": {"acme": "acme_pkg:BENCHMARK"}},
                      {"acme_pkg/__init__": init})
    rows = dist / "acme_pkg" / "suites.toml"
    rows.write_text('[[quick]]\nid = "acme"\ntask = "acme"\nlabel = "Acme exam"\nsample = 2\n', encoding="utf-8")
    built_in_quick = [t.id for t in load_suite("quick").tasks]
    monkeypatch.syspath_prepend(str(dist))
    quick = load_suite("quick")
    assert [t.id for t in quick.tasks] == built_in_quick + ["acme"]
    assert (quick.tasks[-1].benchmark, quick.tasks[-1].label, quick.tasks[-1].sample) == ("Acme Bench", "Acme exam", 2)
    assert "acme" not in [t.id for t in load_suite("standard").tasks]
    rows.write_text('[[quick]]\nid = "acme"\ntask = "acme"\nsampel = 2\n', encoding="utf-8")
    with pytest.raises(SuiteError) as info:
        load_suite("quick")
    assert str(rows) in str(info.value) and "[[quick]] number 1" in str(info.value) and "sampel" in str(info.value)


def test_a_bundled_suite_written_out_reads_back_as_the_same_rows(tmp_path):
    """`finharness suite NAME --toml`: the declared rows as one file of the user's own, every row as it was."""
    from finharness.suite.spec import load_suite

    for name in ("quick", "standard", "full"):
        printed = invoke("suite", name, "--toml")
        assert printed.exit_code == 0 and printed.output.count("[[task]]") == len(load_suite(name).tasks)
        (tmp_path / f"{name}.toml").write_text(printed.output, encoding="utf-8")
        assert load_suite(str(tmp_path / f"{name}.toml")).tasks == load_suite(name).tasks
    assert invoke("suite", str(tmp_path / "quick.toml"), "--toml").exit_code == 2  # not a bundled one
