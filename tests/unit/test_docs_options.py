"""The docs' option tables are the tasks' own declarations (issue 28 item 2): every built-in task has one, and each
equals what `finharness list TASK --markdown` prints from the Options the task parses (tools/docs_options.py writes
them; rerun it after changing an option)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from finharness.benchmarks.registry import TASKS, task_class
from finharness.core.options import describe_options

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
import docs_options  # noqa: E402  (a script, not a package)


def test_every_built_in_task_has_an_options_table():
    documented = {task for _, task, _ in docs_options.blocks()}
    assert set(TASKS) - documented - set(docs_options.SHARED) == set()


@pytest.mark.parametrize("page,task,body", docs_options.blocks(), ids=lambda v: str(v)[:40])
def test_each_table_is_the_declaration(page, task, body):
    assert body == docs_options.generated(task), f"{page}: run `python tools/docs_options.py`"


def test_list_task_prints_the_declared_options_and_a_typo_is_named():
    from finharness.cli import app

    listed = CliRunner().invoke(app, ["list", "cfinbench", "--json"])
    assert listed.exit_code == 0, listed.output
    import json

    names = [o["name"] for o in json.loads(listed.output)["options"]]
    assert names == [o.name for o in describe_options(task_class("cfinbench").Options)]
    typo = CliRunner().invoke(app, ["run", "cfinbench", "--model", "fake", "-o", "shot=3"])
    assert typo.exit_code == 2 and "did you mean 'shots'" in typo.output


@pytest.mark.parametrize("name", sorted(TASKS))
def test_every_built_in_task_says_what_its_metrics_are(name: str):
    cls = task_class(name)
    assert cls.metric_docs, f"{name} declares no metric_docs"
    headline = cls.headline or "accuracy"
    assert any(headline in key for key in cls.metric_docs) or name == "ucfe", (name, list(cls.metric_docs))
    from finharness.cli import app

    listed = CliRunner().invoke(app, ["list", name, "--json"])
    import json

    metrics = json.loads(listed.output)["metrics"]
    assert [m["name"] for m in metrics] == list(cls.metric_docs)
    assert all(m["direction"] in ("higher", "lower", "info") and m["meaning"] for m in metrics)
