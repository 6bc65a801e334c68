"""Shared fixtures: where the real benchmark data lives, and a fast fail in CI when it is missing."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def _shared_data_dir() -> Path:
    env = os.environ.get("FINHARNESS_DATA_DIR")
    return Path(env) if env else REPO.parent / "shared" / "data"


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """../shared/data (or $FINHARNESS_DATA_DIR). Skips when absent, fails under FINHARNESS_REQUIRE_SHARED=1."""
    path = _shared_data_dir()
    if not path.is_dir():
        msg = f"shared benchmark data not found at {path}"
        if os.environ.get("FINHARNESS_REQUIRE_SHARED") == "1":
            pytest.fail(msg + " (FINHARNESS_REQUIRE_SHARED=1)")
        pytest.skip(msg)
    return path


def skip_or_fail_without_bwrap(problem: str | None) -> None:
    """Skip a bubblewrap test where bwrap cannot run; fail instead under FINHARNESS_REQUIRE_BWRAP=1 (CI),
    so a broken sandbox set-up cannot hide behind a skip."""
    if problem is None:
        return
    msg = f"bubblewrap unavailable: {problem}"
    if os.environ.get("FINHARNESS_REQUIRE_BWRAP") == "1":
        pytest.fail(msg + " (FINHARNESS_REQUIRE_BWRAP=1)")
    pytest.skip(msg)
