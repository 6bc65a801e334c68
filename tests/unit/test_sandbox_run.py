"""Normal programs run in the sandbox and give the values the official BizBench pipeline would."""

from __future__ import annotations

import asyncio
import json
import math
import os
import subprocess
import sys
import time

import numpy as np
import pandas as pd
import pytest

from finharness.sandbox import Limits, Sandbox, bwrap_problem
from tests.conftest import skip_or_fail_without_bwrap

LIMITS = Limits(cpu_s=2, wall_s=10, memory_mb=1024, file_mb=5, nproc=16, stdout_chars=50)


@pytest.fixture(scope="module", params=["bwrap", "rlimits"])
def sandbox(request):
    if request.param == "bwrap":
        skip_or_fail_without_bwrap(bwrap_problem())
    with Sandbox(pool_size=2, limits=LIMITS, isolation=request.param) as box:
        yield box


def test_last_expression_is_the_value(sandbox):
    result = sandbox.run("strike = 100\nprice = 110\ncost = 2\n(price - strike - cost) * 100")
    assert (result.status, result.value, result.error_class) == ("ok", 800.0, None)
    assert result.isolation == sandbox.isolation and result.isolation.startswith(
        "bwrap" if sandbox.isolation.startswith("bwrap") else "rlimits")
    assert 0 < result.duration_s < LIMITS.wall_s


def test_last_assignment_returns_its_right_hand_side_like_the_official_pipeline(sandbox):
    assert sandbox.run("a = 34.8 - 1.2\nanswer = a / 34.8 * 100").value == pytest.approx(96.55172413793103)
    # `x += 5`: the official pipeline evaluates only the popped statement's value, i.e. 5.
    assert sandbox.run("x = 1\nx += 5").value == 5.0


@pytest.mark.parametrize("code", ["for i in range(3):\n    pass", "", "import math"])
def test_a_last_statement_without_value_is_recorded(sandbox, code):
    result = sandbox.run(code)
    assert (result.status, result.error_class) == ("error", "NoLastExpression")


def test_answer_variable_mode(sandbox):
    assert sandbox.run("answer = 2 ** 10", mode="answer_variable").value == 1024.0
    missing = sandbox.run("result = 1", mode="answer_variable")
    assert (missing.status, missing.error_class) == ("error", "NoAnswer")


def test_exceptions_and_syntax_errors_name_class_and_line(sandbox):
    failed = sandbox.run("a = 1\nb = 0\na / b")
    assert (failed.status, failed.error_class) == ("error", "ZeroDivisionError")
    assert "[line 3]" in failed.message
    syntax = sandbox.run("x = (1 +\n")
    assert (syntax.status, syntax.error_class) == ("error", "SyntaxError")


def test_numpy_and_pandas_work_inside(sandbox):
    code = ("import numpy as np\nimport pandas as pd\n"
            "df = pd.DataFrame({'revenue': [100.0, 120.0, 150.0]})\n"
            "growth = df['revenue'].pct_change().dropna()\n"
            "float(np.mean(growth))")
    assert sandbox.run(code).value == pytest.approx(np.mean([0.2, 0.25]))


def test_inputs_inject_dataframes_and_plain_values(sandbox):
    frame = pd.DataFrame({"year": [2022, 2023], "net_income": [50.0, 65.0]})
    result = sandbox.run("df.loc[df.year == 2023, 'net_income'].iloc[0] / shares",
                         inputs={"df": frame, "shares": np.int64(13)})
    assert result.value == pytest.approx(5.0)
    with pytest.raises(ValueError, match="not a valid Python variable name"):
        sandbox.run("1", inputs={"class": 1})
    with pytest.raises(ValueError, match="JSON-like"):
        sandbox.run("1", inputs={"x": object()})


def test_call_mode_evaluates_a_function_on_100_inputs_in_one_job(sandbox):
    rng = np.random.default_rng(0)
    arguments = [[float(p), float(r), int(n)] for p, r, n in zip(rng.uniform(100, 1000, 100),
                                                                 rng.uniform(0.01, 0.1, 100),
                                                                 rng.integers(1, 30, 100), strict=True)]
    code = "def future_value(principal, rate, years):\n    return principal * (1 + rate) ** years\n"
    result = sandbox.run(code, call=("future_value", arguments))
    assert result.ok and len(result.value) == 100 and result.call_errors == (None,) * 100
    assert result.value == pytest.approx([p * (1 + r) ** n for p, r, n in arguments])


def test_call_mode_records_per_input_failures_and_missing_functions(sandbox):
    code = "def ratio(a, b):\n    return a / b\n"
    result = sandbox.run(code, call=("ratio", [[1, 2], [1, 0], {"a": 3, "b": 4}]))
    assert result.value == [0.5, None, 0.75]
    assert result.call_errors[0] is None and result.call_errors[1].startswith("ZeroDivisionError")
    missing = sandbox.run(code, call=("other", [[1, 2]]))
    assert (missing.status, missing.error_class) == ("error", "NoFunction")


def test_stdout_is_captured_and_capped(sandbox):
    result = sandbox.run("print('hello')\nprint('x' * 500)\n1")
    assert result.stdout.startswith("hello\nxxx") and "more characters dropped" in result.stdout
    assert result.value == 1.0


def test_nan_and_non_numeric_values_travel(sandbox):
    assert math.isnan(sandbox.run("float('nan')").value)
    assert sandbox.run("'12.5%'").value == "12.5%"
    assert sandbox.run("[1, 2.5]").value == [1.0, 2.5]


def test_programs_may_use_their_own_directory(sandbox):
    code = ("import os, shutil\nos.mkdir('sub')\nopen('sub/a.txt', 'w').write('12.5')\n"
            "os.rename('sub/a.txt', 'sub/b.txt')\nvalue = float(open('sub/b.txt').read())\n"
            "shutil.rmtree('sub')\nvalue * 2")
    result = sandbox.run(code)
    assert (result.status, result.value) == ("ok", 25.0), result


def test_jobs_do_not_see_each_other(sandbox):
    sandbox.run("import builtins\nbuiltins.leak = 41\nopen('left.txt', 'w').write('x')\n1")
    for _ in range(2 * 2):  # every worker of the pool, twice over
        result = sandbox.run("import builtins, os\n(hasattr(builtins, 'leak'), os.listdir('.'))")
        assert result.value == [False, []]


def test_async_runs_concurrently_over_the_pool(sandbox):
    async def main():
        return await asyncio.gather(*(sandbox.run_async(f"{i} * 3") for i in range(8)))

    results = asyncio.run(main())
    assert [r.value for r in results] == [float(i * 3) for i in range(8)]


def test_close_stops_every_worker():
    box = Sandbox(pool_size=1, limits=LIMITS, isolation="rlimits")
    pids = box.worker_pids()
    assert box.run("1 + 1").value == 2.0
    box.close()
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and any(os.path.exists(f"/proc/{pid}") for pid in pids):
        time.sleep(0.05)
    assert not any(os.path.exists(f"/proc/{pid}") for pid in pids)
    with pytest.raises(RuntimeError, match="closed"):
        box.run("1")


def test_memory_limit_below_the_preloaded_libraries_is_refused():
    with pytest.raises(ValueError, match="memory_mb"):
        Sandbox(pool_size=1, limits=Limits(memory_mb=100), isolation="rlimits")


@pytest.mark.parametrize("isolation", ["bwrap", "rlimits"])
def test_workers_die_with_the_harness(isolation):
    if isolation == "bwrap":
        skip_or_fail_without_bwrap(bwrap_problem())
    script = ("import json, time\nfrom finharness.sandbox import Sandbox\n"
              f"box = Sandbox(pool_size=1, isolation={isolation!r})\n"
              "print(json.dumps(box.worker_pids()), flush=True)\ntime.sleep(120)\n")
    harness = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        pids = json.loads(harness.stdout.readline())
        assert pids and all(os.path.exists(f"/proc/{pid}") for pid in pids)
    finally:
        harness.kill()  # SIGKILL: no finaliser, no close()
        harness.wait()
    deadline = time.monotonic() + 10
    alive = pids
    while alive and time.monotonic() < deadline:
        alive = [pid for pid in pids if _running(pid)]
        time.sleep(0.05)
    assert alive == []


def _running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False
