"""What a sandboxed execution is given (limits) and what it gives back (a result)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

Status = Literal["ok", "timeout", "memory", "error"]
Mode = Literal["last_expression", "answer_variable", "call"]


class SandboxStartError(RuntimeError):
    """A worker could not be started (the message carries its stderr)."""


class SandboxUnavailable(SandboxStartError):
    """No kernel-enforced isolation can be set up here for the requested choice; the message names what is
    missing and how to get it (or to accept the risk with isolation 'unsafe')."""


@dataclass(frozen=True)
class Limits:
    """Resource limits of one program run (each job process gets them afresh)."""

    cpu_s: float = 2.0
    """CPU seconds (rounded up to whole seconds, as RLIMIT_CPU counts); SIGKILL one second later."""

    wall_s: float = 5.0
    """Wall-clock seconds from fork to result; the job and all it started are then killed."""

    memory_mb: int = 1024
    """Address space of the job process (RLIMIT_AS), including the ~150 MB of preloaded numpy/pandas; also
    the memory of the whole worker (its memory cgroup, where one can be had), shared memory and tmpfs included."""

    file_mb: int = 10
    """Largest file the program may write (RLIMIT_FSIZE)."""

    nproc: int = 16
    """Processes and threads the sandbox uid may have (RLIMIT_NPROC), the zygote included."""

    tmpfs_mb: int = 64
    """Size of the private scratch filesystem (bubblewrap only; without it the job directory is read-only)."""

    stdout_chars: int = 10_000
    """Characters of printed output kept; the rest is counted and dropped."""

    def __post_init__(self) -> None:
        for name in ("cpu_s", "wall_s", "memory_mb", "file_mb", "nproc", "tmpfs_mb"):
            if not getattr(self, name) > 0:
                raise ValueError(f"Limits.{name} must be positive, got {getattr(self, name)!r}")
        if self.stdout_chars < 0:
            raise ValueError(f"Limits.stdout_chars must be >= 0, got {self.stdout_chars!r}")


@dataclass(frozen=True)
class ExecResult:
    """The outcome of one sandboxed program."""

    status: Status
    """ok (the program ran to the end), timeout (wall or CPU limit), memory (MemoryError), error (anything else)."""

    value: Any = None
    """The program's value as JSON: numbers are floats, arrays/Series lists, DataFrames lists of records,
    unknown objects their repr. In call mode, one entry per argument list (None where that call raised)."""

    error_class: str | None = None
    """Why it failed: the exception's class name (ZeroDivisionError, SandboxViolation...) or a sandbox
    reason (WallTimeout, CPUTimeLimit, FileSizeLimit, Crashed, NoLastExpression, NoAnswer, WorkerCrashed...)."""

    message: str | None = None
    """Human-readable detail, with the program line when known ("division by zero [line 3]")."""

    stdout: str = ""
    """What the program printed, capped at Limits.stdout_chars."""

    duration_s: float = 0.0
    """Wall seconds from fork to the end of the program (or to its kill)."""

    isolation: str = ""
    """The layers in force for this run, e.g. "bwrap+seccomp+landlock+memcg+audit" (see finharness.sandbox)."""

    call_errors: tuple[str | None, ...] | None = None
    """Call mode only: per argument list, "ExceptionClass: message" or None when the call succeeded."""

    @property
    def ok(self) -> bool:
        return self.status == "ok"
