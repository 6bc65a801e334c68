"""What the end-to-end tests that run documented commands share (test_docs_commands.py, test_error_hints.py): the
stand-ins fixture, and the tally of the docs commands printed after the tests."""

from __future__ import annotations

from typing import Iterator

import pytest

from ..conftest import skip_or_fail

DOCS_SUMMARY = pytest.StashKey[str]()
"""How many documented commands were found, run and passed (test_docs_commands.py), shown after the tests."""


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    summary = config.stash.get(DOCS_SUMMARY, None)
    if summary:
        terminalreporter.write_sep("-", "README.md and docs/ commands")
        terminalreporter.write_line(summary)


@pytest.fixture(autouse=True)
def stand_in_environment(request, monkeypatch):
    """The stand-ins' environment (StandIns.env) for each test that uses them, and only for it."""
    if {"stand_ins", "pages"} & set(request.fixturenames):
        started = request.getfixturevalue("stand_ins")
        for var in started.unset:
            monkeypatch.delenv(var, raising=False)
        for var, value in started.env.items():
            monkeypatch.setenv(var, value)
    yield


@pytest.fixture(scope="session")
def stand_ins(tmp_path_factory) -> Iterator:
    """The local stand-ins of every outside service and the environment commands run in (tests/e2e/stand_ins.py),
    once per session."""
    from .stand_ins import SHARED, running

    skip_or_fail("SHARED", None if SHARED.is_dir() else f"shared benchmark data not found at {SHARED}")
    with running(tmp_path_factory.mktemp("docs-commands")) as started:
        yield started
