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

from finharness.sandbox import Limits, Sandbox
from tests.conftest import skip_or_fail_without_isolation

LIMITS = Limits(cpu_s=2, wall_s=10, memory_mb=1024, file_mb=5, nproc=16, stdout_chars=50)
KINDS = ["bwrap", "kernel", "bare"]
"""Every kind of worker: normal programs must give the same values under each."""


@pytest.fixture(scope="module", params=KINDS)
def sandbox(request):
    skip_or_fail_without_isolation(request.param)
    with Sandbox(pool_size=2, limits=LIMITS, isolation=request.param) as box:
        assert box.kind == request.param
        yield box


def test_last_expression_is_the_value(sandbox):
    result = sandbox.run("strike = 100\nprice = 110\ncost = 2\n(price - strike - cost) * 100")
    assert (result.status, result.value, result.error_class) == ("ok", 800.0, None)
    assert result.isolation == sandbox.isolation
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
            "shutil.copy2('sub/b.txt', 'sub/c.txt')\nshutil.rmtree('sub')\nvalue * 2")
    result = sandbox.run(code)
    if sandbox.kind == "kernel":
        # No mount namespace, so no sized private file system: the job directory is read-only (Landlock).
        assert (result.status, result.error_class) == ("error", "PermissionError"), result
        assert "Errno 13" in result.message
    else:
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
    box = Sandbox(pool_size=1, limits=LIMITS, isolation="bare")
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
        Sandbox(pool_size=1, limits=Limits(memory_mb=100), isolation="bare")


@pytest.mark.parametrize("isolation", KINDS)
def test_workers_die_with_the_harness(isolation):
    skip_or_fail_without_isolation(isolation)
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


# What ordinary programs reach for: each must work under the system-call filter and Landlock, with the
# value a plain interpreter gives. (A call the allow-list forgot shows up here as an error.)
ORDINARY_PROGRAMS = {
    "import random\nrandom.seed(1)\nround(random.random(), 6)": 0.134364,
    "import re\nre.findall(r'\\d+', 'a1b22')": ["1", "22"],
    "import numpy as np\na = np.random.default_rng(0).normal(size=(40, 40))\nround(float(np.linalg.det(a @ a.T)) > 0)": 1.0,
    "import pandas as pd\ndf = pd.DataFrame({'a': [1, 1, 2], 'b': [4.0, 5, 6]})\nfloat(df.groupby('a').b.sum().max())": 9.0,
    "import zoneinfo, datetime\ndatetime.datetime(2020, 1, 1, tzinfo=zoneinfo.ZoneInfo('America/New_York')).utcoffset()"
    ".total_seconds()": -18000.0,
    "import decimal\nfloat(decimal.Decimal('1.1') * 3)": 3.3,
    "import threading\nout = []\nt = threading.Thread(target=lambda: out.append(5))\nt.start()\nt.join()\nout[0]": 5.0,
    "import time\nt0 = time.monotonic()\ntime.sleep(0.01)\ntime.monotonic() - t0 >= 0.01": True,
    "import signal, time\nhits = []\nsignal.signal(signal.SIGALRM, lambda *a: hits.append(1))\n"
    "signal.setitimer(signal.ITIMER_REAL, 0.01)\ntime.sleep(0.2)\nlen(hits)": 1.0,
    "import sqlite3\nsqlite3.connect(':memory:').execute('select 6 * 7').fetchone()[0]": 42.0,
    "import hashlib, uuid, os\n(len(hashlib.sha256(os.urandom(8)).hexdigest()), uuid.uuid4().version)": [64.0, 4.0],
    "import os\n(os.cpu_count() >= 1, os.getpid() > 0, len(os.sched_getaffinity(0)) >= 1)": [True, True, True],
    "import resource\nresource.getrlimit(resource.RLIMIT_AS)[0] > 0": True,
    "import pickle, json, csv, io\nlist(csv.reader(io.StringIO(json.loads(pickle.loads(pickle.dumps('\"a,b\"'))))))":
        [["a", "b"]],
    "import statistics, fractions\nstatistics.NormalDist().cdf(0) + float(fractions.Fraction(1, 4))": 0.75,
}


@pytest.mark.parametrize("code", list(ORDINARY_PROGRAMS), ids=range(len(ORDINARY_PROGRAMS)))
def test_ordinary_library_calls_work_in_every_kind(sandbox, code):
    result = sandbox.run(code)
    assert (result.status, result.error_class) == ("ok", None), result
    assert result.value == pytest.approx(ORDINARY_PROGRAMS[code]) if isinstance(result.value, float) else (
        result.value == ORDINARY_PROGRAMS[code]), result
