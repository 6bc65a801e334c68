"""`--sandbox CHOICE` reaches the tasks that run model-written code, as their `sandbox` option, and no other: a pool
of the demo and CodeTAT-QA runs, CodeTAT-QA records the choice, the demo takes no such option."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner


def test_the_sandbox_flag_goes_to_the_program_tasks_only(tmp_path: Path, shared_data: Path):
    from finharness.cli import app

    out = tmp_path / "pool"
    result = CliRunner().invoke(app, ["run", "demo", "bizbench/codetatqa", "--model", "fake", "--sandbox", "unsafe",
                                      "--data-dir", str(shared_data), "--limit", "2", "--out", str(out), "-q"])
    assert result.exit_code in (0, 1), result.output
    program = json.loads((out / "bizbench_codetatqa" / "results.json").read_text(encoding="utf-8"))
    assert program["extra"]["sandbox"]["choice"] == "unsafe"
    demo = json.loads((out / "demo" / "results.json").read_text(encoding="utf-8"))
    assert "sandbox" not in demo["config"]["task_config"]
    alone = CliRunner().invoke(app, ["run", "demo", "--model", "fake", "--sandbox", "kernel", "--out",
                                     str(tmp_path / "demo"), "-q"])
    assert alone.exit_code == 0, alone.output  # a task without programs ignores it
