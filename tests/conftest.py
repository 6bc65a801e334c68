"""Shared fixtures, and the one rule for tests that need something the machine may lack.

A test that needs an outside requirement (shared data, bubblewrap, the browser, Ray) calls
`skip_or_fail(NAME, problem)` or carries `requires(NAME, problem)`: it skips with the problem as
its reason, and fails instead under `FINHARNESS_REQUIRE_<NAME>=1`. `FINHARNESS_REQUIRE_ALL=1`
(set by `.ci/run`) requires every NAME and also fails any other skip, so a CI run shows 0 skipped.
Names: SHARED, BWRAP, KERNEL (seccomp + Landlock), MEMCG (a memory cgroup), BROWSER, RAY.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
REQUIRE_ALL = "FINHARNESS_REQUIRE_ALL"


def required(name: str) -> bool:
    """Whether FINHARNESS_REQUIRE_<NAME>=1 (or FINHARNESS_REQUIRE_ALL=1) turns a missing NAME into a failure."""
    return os.environ.get(f"FINHARNESS_REQUIRE_{name}") == "1" or os.environ.get(REQUIRE_ALL) == "1"


def skip_or_fail(name: str, problem: str | None) -> None:
    """Nothing when `problem` is None; otherwise skip the test with it as the reason, or fail under
    FINHARNESS_REQUIRE_<NAME>=1 / FINHARNESS_REQUIRE_ALL=1 (CI), so a broken set-up cannot hide behind a skip."""
    if problem is None:
        return
    switch = f"FINHARNESS_REQUIRE_{name}"
    if required(name):
        pytest.fail(f"{problem} ({switch if os.environ.get(switch) == '1' else REQUIRE_ALL}=1)", pytrace=False)
    pytest.skip(f"{problem} (set {switch}=1 to fail instead)")


def requires(name: str, problem: str | None) -> pytest.MarkDecorator:
    """`skip_or_fail(name, problem)` as a mark, checked when each marked test is set up."""
    return pytest.mark.requirement(name, problem)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "requirement(name, problem): skip_or_fail(name, problem) at set-up "
                                       "(tests/conftest.py)")


@pytest.hookimpl(tryfirst=True)  # before any fixture of the test is set up
def pytest_runtest_setup(item: pytest.Item) -> None:
    for mark in item.iter_markers("requirement"):
        skip_or_fail(*mark.args)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    """A skip from skip_or_fail is reported at the test, not here. Under FINHARNESS_REQUIRE_ALL=1 a skip
    from anywhere (a skipif, an importorskip, a pytest.skip outside skip_or_fail) is a failure with its reason."""
    outcome = yield
    report = outcome.get_result()
    if not report.skipped or hasattr(report, "wasxfail"):
        return
    reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
    if os.environ.get(REQUIRE_ALL) == "1":
        report.outcome = "failed"
        report.longrepr = f"skipped under {REQUIRE_ALL}=1: {reason}"
    elif isinstance(report.longrepr, tuple) and Path(report.longrepr[0]).resolve() == Path(__file__).resolve():
        path, line = item.reportinfo()[:2]
        report.longrepr = (str(path), (line or 0) + 1, reason)


def _skips_left(config: pytest.Config) -> int:
    """Skips the hook above cannot turn into failures (a module skipped while it is collected), counted
    under FINHARNESS_REQUIRE_ALL=1 (else 0)."""
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if os.environ.get(REQUIRE_ALL) != "1" or reporter is None:
        return 0
    return len(reporter.stats.get("skipped", []))


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if exitstatus == pytest.ExitCode.OK and _skips_left(session.config):
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    if skipped := _skips_left(config):
        terminalreporter.write_sep("!", f"{skipped} skipped under {REQUIRE_ALL}=1: the run fails", red=True)


def _shared_data_dir() -> Path:
    env = os.environ.get("FINHARNESS_DATA_DIR")
    return Path(env) if env else REPO.parent / "shared" / "data"


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """../shared/data (or $FINHARNESS_DATA_DIR). Skips when absent, fails under FINHARNESS_REQUIRE_SHARED=1."""
    path = _shared_data_dir()
    skip_or_fail("SHARED", None if path.is_dir() else f"shared benchmark data not found at {path}")
    return path


def skip_or_fail_without_bwrap(problem: str | None) -> None:
    """Skip a bubblewrap test where bwrap cannot run; fail instead under FINHARNESS_REQUIRE_BWRAP=1 (CI)."""
    skip_or_fail("BWRAP", None if problem is None else f"bubblewrap unavailable: {problem}")


def skip_or_fail_without_kernel_layers(problem: str | None) -> None:
    """Skip a test of the sandbox's `kernel` kind (seccomp + Landlock, no namespaces) where this kernel or
    libseccomp cannot give it; fail instead under FINHARNESS_REQUIRE_KERNEL=1 (CI)."""
    skip_or_fail("KERNEL", None if problem is None else f"seccomp + Landlock unavailable: {problem}")


def skip_or_fail_without_isolation(isolation: str) -> None:
    """`Sandbox(isolation=...)` tests: skip (or fail in CI) where that kind cannot run here."""
    from finharness.sandbox import bwrap_problem, kernel_problem
    from finharness.sandbox.seccomp import seccomp_problem

    if isolation == "bwrap":
        skip_or_fail_without_bwrap(bwrap_problem() or seccomp_problem())
    elif isolation in ("kernel", "rlimits"):
        skip_or_fail_without_kernel_layers(kernel_problem())
