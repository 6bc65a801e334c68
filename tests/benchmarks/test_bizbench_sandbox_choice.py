"""BizBench's `sandbox` option: no silent downgrade. Where no kernel-enforced isolation can be set up the
program tasks refuse to start (an `error:` line naming what is missing and how to get it) unless the user
says 'unsafe'; the choice and the layers are recorded in extra.sandbox; the run key does not change."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from finharness.benchmarks.bizbench import task as numeric
from finharness.benchmarks.bizbench.formulaeval.task import FormulaEvalTask
from finharness.benchmarks.bizbench.scoring import ProgramJob
from finharness.cli import app
from finharness.sandbox import launch

NO_BWRAP = "bwrap is not installed (Debian: apt-get install bubblewrap)"
NO_LANDLOCK = "the kernel has no Landlock (Linux >= 5.13 built with CONFIG_SECURITY_LANDLOCK=y, and 'landlock' in the lsm= boot parameter)"


@pytest.fixture
def no_kernel_isolation(monkeypatch):
    """This machine as one without bubblewrap and without Landlock."""
    monkeypatch.setattr(launch, "bwrap_problem", lambda: NO_BWRAP)
    monkeypatch.setattr(launch, "kernel_problem", lambda: NO_LANDLOCK)


@pytest.mark.parametrize("make", [lambda **o: numeric.CodeTatqaTask(**o), lambda **o: numeric.FinCodeTask(**o),
                                  lambda **o: FormulaEvalTask(**o)], ids=["codetatqa", "fincode", "formulaeval"])
def test_program_tasks_refuse_without_kernel_isolation(no_kernel_isolation, make):
    with pytest.raises(ValueError) as refused:
        make(sandbox="auto")
    message = str(refused.value)
    assert "no kernel-enforced isolation" in message and "apt-get install bubblewrap" in message
    assert "Landlock" in message and "'unsafe'" in message
    with pytest.raises(ValueError, match="no kernel-enforced isolation"):
        make(sandbox="bwrap")


def test_the_cli_says_error_and_exits_2(no_kernel_isolation, tmp_path):
    result = CliRunner().invoke(app, ["run", "bizbench/codetatqa", "--model", "fake", "-o", "sandbox=auto",
                                      "--out", str(tmp_path / "run")])
    assert result.exit_code == 2, result.output
    assert "error:" in result.output and "apt-get install bubblewrap" in result.output
    assert not (tmp_path / "run" / "results.json").exists()


def test_unsafe_runs_bare_with_a_warning_and_records_it(no_kernel_isolation, capsys):
    task = numeric.CodeTatqaTask(sandbox="unsafe", pool_size=1)
    try:
        warning = capsys.readouterr().err
        assert "NO kernel-enforced isolation" in warning and NO_BWRAP in warning and NO_LANDLOCK in warning
        result = task.runner.run(ProgramJob(code="6 * 7", value_mode="last_expression", cache_key="x"))
        assert (result.status, result.value) == ("ok", 42.0)
        assert result.isolation.startswith("unsafe+rlimits")
        assert task.runner.record() == {"choice": "unsafe", "isolation": result.isolation, "executions": 1}
    finally:
        task.close()


def test_extraction_tasks_meet_a_refusal_per_program_not_a_crash(no_kernel_isolation):
    task = numeric.TatqaETask()  # runs a program only when a reply holds one
    result = task.runner.run(ProgramJob(code="1", value_mode="last_expression", cache_key="y"))
    assert (result.status, result.error_class) == ("error", "SandboxUnavailable")
    assert "apt-get install bubblewrap" in result.message


def test_the_choice_is_not_in_the_run_key_and_is_validated():
    assert numeric.TatqaETask(sandbox="kernel").config() == numeric.TatqaETask().config()
    with pytest.raises(ValueError, match="sandbox"):
        numeric.TatqaETask(sandbox="none")


def test_auto_records_the_kernel_layers_where_they_run():
    from tests.conftest import skip_or_fail_without_isolation

    skip_or_fail_without_isolation("bwrap")
    task = numeric.CodeTatqaTask(pool_size=1)
    try:
        assert task.runner.record()["isolation"].startswith("bwrap+seccomp")
        result = task.runner.run(ProgramJob(code="import os\nos.system('true')", value_mode="last_expression",
                                            cache_key="z"))
        assert result.error_class == "SandboxViolation"
        assert task.runner.record() == {"choice": "auto", "isolation": result.isolation, "executions": 1}
    finally:
        task.close()


def test_report_rows_show_the_isolation(tmp_path):
    from pathlib import Path

    from finharness.benchmarks.bizbench.report import bizbench_section
    from finharness.report.runs import RunData

    def run(name: str, sandbox: dict | None) -> RunData:
        results = {"task": "bizbench/codetatqa", "model": name, "metrics": {"accuracy": {"value": 0.5, "n": 2}},
                   "extra": {} if sandbox is None else {"sandbox": sandbox}}
        return RunData(Path(tmp_path / name), results, ())

    html = str(bizbench_section([run("a", {"choice": "unsafe", "isolation": "unsafe+rlimits+audit"}),
                                 run("b", {"choice": "auto", "isolation": "bwrap+seccomp+landlock+audit"}),
                                 run("c", None)]))
    assert '<th scope="col">isolation</th>' in html
    assert "<td>unsafe+rlimits+audit</td>" in html and "<td>bwrap+seccomp+landlock+audit</td>" in html
    assert "<td>—</td>" in html  # a run that ran no program
