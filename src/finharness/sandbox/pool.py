"""A pool of warm sandbox workers and the `Sandbox` API that runs programs on them."""

from __future__ import annotations

import ast
import asyncio
import json
import keyword
import os
import queue
import select
import shlex
import signal
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import suppress
from typing import Any

from finharness.sandbox import _zygote
from finharness.sandbox.cgroups import PidsCgroup, WorkerCgroup, memory_control, pids_control
from finharness.sandbox.launch import (
    PLAIN_PRELOAD,
    SCIENTIFIC_PRELOAD,
    UNSAFE_WARNING,
    IsolationChoice,
    Launch,
    isolation_kind,
    isolation_label,
    missing_layers,
    plan_launch,
    remove_scratch,
)
from finharness.sandbox.result import ExecResult, Limits, Mode, SandboxStartError

_REPLY_GRACE_S = 10.0
"""Seconds a worker may take beyond the wall limit to answer (fork, sweep, cleanup) before it is replaced."""
_BWRAP_PROCESSES = 2
"""bubblewrap's own processes in a worker's pids cgroup (the outer one and its pid-namespace init)."""
_WORKER_TASKS = 2
"""Tasks of a worker that always exist besides a job's threads: the zygote and its job child."""
_START_TASKS = 4
"""Tasks a worker may need while it starts (the bind script's shell and a command it runs; the zygote and
its trial child), whatever Limits.nproc is: the job limit is set before each job."""

TIERS = {"plain": PLAIN_PRELOAD, "scientific": SCIENTIFIC_PRELOAD}
"""Kinds of worker, by what they preload. Most BizBench programs use plain arithmetic (the official
prompts forbid imports) and go to plain workers, whose forks are several times cheaper."""
_SCIENTIFIC_HINTS = ("numpy", "pandas", "np.", "pd.", "__import__", "importlib")
_STDLIB = frozenset(sys.stdlib_module_names)


def needs_scientific(code: str, job_text: str) -> bool:
    """Whether a job should run on a worker with numpy and pandas loaded (a plain one would import
    them itself, correctly but slowly): third-party imports, hints of dynamic imports, table inputs."""
    if _zygote.TABLE_TAG in job_text or any(hint in code for hint in _SCIENTIFIC_HINTS):
        return True
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return False  # fails the same way on any worker
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            modules = [node.module]
        else:
            continue
        if any(module.split(".")[0] not in _STDLIB for module in modules):
            return True
    return False


class _WorkerLost(Exception):
    """The worker stopped answering: it died, or it broke the protocol."""


class _Worker:
    """One warm zygote process and its pipes (used by one thread at a time)."""

    def __init__(self, launch: Launch, tier: str, memory_mb: int, nproc: int):
        self.launch = launch
        self.tier = tier
        self.stderr = tempfile.TemporaryFile()
        self.cgroup = self.pids = None
        argv = launch.argv
        try:
            if launch.memory_cgroup:
                self.cgroup = WorkerCgroup(memory_control(), memory_mb)
            if launch.pids_cgroup:
                control = pids_control()
                # cgroup v2: one cgroup per process, so the pids limit goes into the memory cgroup when both are v2.
                same = self.cgroup is not None and control.version == 2 and self.cgroup.control == control
                self.pids = PidsCgroup(control, self.pids_limit(max(nproc, _START_TASKS)),
                                       self.cgroup.path if same else None)
            procs = sorted({group.procs_file for group in (self.cgroup, self.pids) if group is not None})
            if procs:
                # The shell joins the cgroups, then becomes the worker: everything it starts is counted.
                joins = " && ".join(f"echo $$ > {shlex.quote(path)}" for path in procs)
                argv = ("/bin/sh", "-c", f'{joins} && exec "$@"', "finharness-sandbox", *argv)
            self.process = subprocess.Popen(
                argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr,
                env=launch.env, cwd=launch.scratch_dir or "/", start_new_session=True, close_fds=True)
        except BaseException:
            self._remove_cgroups()
            remove_scratch(launch.scratch_dir)
            raise
        self.jobs_done = 0
        self.cleanup_pending = False
        """True after an answer, until the worker's {"clean": true} has been read."""
        self.info: dict = {}
        self._buffer = b""

    def pids_limit(self, nproc: int) -> int:
        """pids.max for a job limit of `nproc` tasks of the worker's uid (its zygote and the job's own process
        included, as RLIMIT_NPROC counts them: the job may start nproc - 2 threads)."""
        return max(nproc, _WORKER_TASKS) + (_BWRAP_PROCESSES if self.launch.kind == "bwrap" else 0)

    def wait_ready(self, timeout_s: float) -> None:
        try:
            reply = self._receive(time.monotonic() + timeout_s)
        except (_WorkerLost, TimeoutError) as exc:
            tail = self.stderr_tail()  # before stop() closes it
            self.stop()
            raise SandboxStartError(f"sandbox worker failed to start ({exc}); its stderr:\n{tail}") from exc
        if not reply.get("ready"):
            self.stop()
            raise SandboxStartError(f"sandbox worker sent {reply!r} instead of a ready message")
        if reply.get("landlock_abi", 0) != self.launch.landlock_abi or reply.get("seccomp") != (
                self.launch.kind != "bare"):
            self.stop()
            raise SandboxStartError(f"sandbox worker did not set up the layers of {self.launch.isolation}: {reply!r}")
        expected_uid = os.getuid() if self.launch.uid is None else self.launch.uid
        if reply.get("uid") != expected_uid or expected_uid == 0:
            self.stop()
            raise SandboxStartError(f"sandbox worker runs as uid {reply.get('uid')}, not an unprivileged uid "
                                    f"({expected_uid}): no job may run as root")
        self.info = reply

    def request(self, job: dict, timeout_s: float) -> dict:
        try:
            _zygote.write_frame(self.process.stdin.fileno(), job)
        except OSError as exc:
            raise _WorkerLost(f"could not send the job: {exc}") from exc
        reply = self._receive(time.monotonic() + timeout_s)
        self.jobs_done += 1
        self.cleanup_pending = True
        return reply

    def is_clean(self, timeout_s: float) -> bool:
        """Wait for the worker to finish cleaning up after its last job; False if it cannot be reused."""
        if not self.cleanup_pending:
            return self.process.poll() is None
        try:
            clean = self._receive(time.monotonic() + timeout_s).get("clean") is True
        except (TimeoutError, _WorkerLost):
            return False
        self.cleanup_pending = False
        return clean

    def _receive(self, deadline: float) -> dict:
        fd = self.process.stdout.fileno()
        header_size = _zygote.FRAME_HEADER.size
        while True:
            if len(self._buffer) >= header_size:
                (size,) = _zygote.FRAME_HEADER.unpack(self._buffer[:header_size])
                if size > _zygote.MAX_FRAME_BYTES:
                    raise _WorkerLost(f"frame of {size} bytes")
                if len(self._buffer) >= header_size + size:
                    body = self._buffer[header_size:header_size + size]
                    self._buffer = self._buffer[header_size + size:]
                    try:
                        return json.loads(body)
                    except ValueError as exc:
                        raise _WorkerLost(f"malformed frame: {exc}") from exc
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError("no answer in time")
            ready, _, _ = select.select([fd], [], [], remaining)
            if ready:
                chunk = os.read(fd, 1 << 20)
                if not chunk:
                    code = self.process.poll()
                    raise _WorkerLost("worker closed its pipe" if code is None else f"worker exited (status {code})")
                self._buffer += chunk

    def stderr_tail(self, limit: int = 2000) -> str:
        self.stderr.seek(0)
        return self.stderr.read().decode(errors="replace")[-limit:]

    def stop(self) -> None:
        """Kill the worker and remove what it had on the host; never raises (a slot must not be lost to it)."""
        try:
            if self.process.poll() is None:
                with suppress(ProcessLookupError):  # the whole group: bwrap, or the fallback zygote and its jobs
                    os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
        except Exception:
            pass
        for stream in (self.process.stdin, self.process.stdout, self.stderr):
            with suppress(Exception):
                stream.close()
        remove_scratch(self.launch.scratch_dir)
        self._remove_cgroups()

    def _remove_cgroups(self) -> None:
        for group in (self.pids, self.cgroup):
            if group is not None:
                with suppress(Exception):
                    group.remove()


def _stop_all(workers: set) -> None:
    for worker in list(workers):
        worker.stop()
    workers.clear()


def _encode_default(value: Any) -> Any:
    import numpy as np
    import pandas as pd

    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, (pd.Timestamp, pd.Timedelta)):
        return value.isoformat()
    raise TypeError(f"{type(value).__name__} is not JSON-serialisable")


def encode_input(value: Any) -> Any:
    """A job input as JSON: DataFrames/Series travel as tagged records (rebuilt by the worker)."""
    import pandas as pd

    if isinstance(value, pd.DataFrame):
        split = value.to_dict(orient="split")
        return {_zygote.TABLE_TAG: {"kind": "frame", "columns": split["columns"], "index": split["index"],
                                    "data": split["data"]}}
    if isinstance(value, pd.Series):
        return {_zygote.TABLE_TAG: {"kind": "series", "index": value.index.tolist(), "data": value.tolist(),
                                    "name": value.name}}
    if isinstance(value, Mapping):
        return {str(key): encode_input(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [encode_input(item) for item in value]
    return value


class Sandbox:
    """Run model-written Python in isolated, resource-limited, pre-warmed worker processes.

    Each job is a fresh fork of a warm zygote (numpy and pandas already
    imported), so jobs cannot see each other and a run costs a fork, not an
    interpreter start. There are two kinds of worker, `pool_size` of each:
    "scientific" ones hold numpy and pandas, "plain" ones only small stdlib
    modules and fork much faster; a job goes to the kind it needs (see
    `needs_scientific`). A worker that crashes, stops answering or is left
    unclean by a job is replaced. Thread-safe; `run` blocks while every worker
    of the kind is busy. Use as a context manager, or call `close()`.
    """

    def __init__(self, pool_size: int = 2, limits: Limits | None = None, *, isolation: IsolationChoice = "auto",
                 audit: bool = True, startup_timeout_s: float = 120.0, max_jobs_per_worker: int = 5000):
        """pool_size: workers of each kind (plain, scientific), i.e. runs at once per kind.
        limits: default limits of every run (Limits() when None).
        isolation: "auto" (bubblewrap + seccomp + Landlock when bubblewrap works here, else seccomp +
        Landlock without namespaces, else SandboxUnavailable naming what is missing), "bwrap" or
        "kernel" (that, or SandboxUnavailable; "rlimits" is kernel's former name), "unsafe" (the
        strongest available, down to "bare"; see `warning`), "bare" (rlimits + audit guard only).
        audit: install the audit guard in every job (required by bare workers).
        max_jobs_per_worker: a worker is retired after this many jobs, as hygiene.
        """
        if pool_size < 1:
            raise ValueError(f"pool_size must be >= 1, got {pool_size}")
        self.limits = limits = limits or Limits()
        self.audit = audit
        self._isolation_choice = isolation
        self._startup_timeout_s = startup_timeout_s
        self._max_jobs = max_jobs_per_worker
        # Workers are forked from this one long-lived thread: their die-with-parent
        # signal follows the thread that started them, which must outlive them.
        self._spawner = ThreadPoolExecutor(1, thread_name_prefix="finharness-sandbox-spawn")
        self._idle: dict[str, queue.Queue[_Worker | None]] = {tier: queue.Queue() for tier in TIERS}
        self._live: set[_Worker] = set()
        self._lock = threading.Lock()
        self._closed = False
        self._finalizer = weakref.finalize(self, _stop_all, self._live)
        self.isolation = isolation_label(isolation, audit)
        """The layers in force (recorded in every result too)."""
        self.kind = isolation_kind(self.isolation)
        """'bwrap', 'kernel' or 'bare' (no kernel-enforced isolation)."""
        self.warning = UNSAFE_WARNING.format(missing=missing_layers()) if self.kind == "bare" else None
        """What a user must be told before model code runs here (bare workers only), else None."""
        try:
            workers = [self._spawn(tier) for tier in TIERS for _ in range(pool_size)]
            for worker in workers:  # started together, awaited together
                worker.wait_ready(startup_timeout_s)
                self._check_headroom(worker)
                self._idle[worker.tier].put(worker)
        except BaseException:
            self.close()
            raise

    # ------------------------------------------------------------------ public API

    def run(self, code: str, *, mode: Mode = "last_expression", inputs: Mapping[str, Any] | None = None,
            call: tuple[str, Sequence[Sequence[Any] | Mapping[str, Any]]] | None = None,
            limits: Limits | None = None) -> ExecResult:
        """Execute `code` in a sandbox and return what happened.

        mode: "last_expression" (the value of the last statement, as BizBench's
        official pipeline), "answer_variable" (the variable `answer`), or
        "call" (implied by `call`).
        inputs: variables set before the program runs (plain JSON values,
        numpy arrays, pandas DataFrames/Series).
        call: (function name, argument lists): define the function from the
        program, then call it on each list (positional) or dict (keywords) in
        this one job; `value` is the list of results.
        limits: overrides the sandbox's limits for this run.
        """
        job = self._job(code, mode, inputs, call, limits or self.limits)
        worker = self._acquire("scientific" if needs_scientific(code, json.dumps(job)) else "plain")
        replace, reply = True, {}
        try:
            if worker.cgroup is not None:
                worker.cgroup.set_limit(max(self.limits.memory_mb, job["limits"]["memory_mb"]))
            if worker.pids is not None:
                worker.pids.set_limit(worker.pids_limit(max(self.limits.nproc, job["limits"]["nproc"])))
            reply = worker.request(job, job["limits"]["wall_s"] + _REPLY_GRACE_S)
            replace = worker.jobs_done >= self._max_jobs
        except TimeoutError:
            reply = {"status": "timeout", "error_class": "WorkerUnresponsive",
                     "message": "the sandbox worker did not answer in time; it was replaced"}
        except _WorkerLost as exc:
            reply = {"status": "error", "error_class": "WorkerCrashed",
                     "message": f"the sandbox worker died during the run ({exc}); it was replaced"}
        finally:
            if worker.cgroup is not None and reply.get("error_class") in ("Crashed", "WorkerCrashed") and (
                    worker.cgroup.oom_killed_since_last_asked()):
                reply = {**reply, "status": "memory", "error_class": "MemoryLimit",
                         "message": f"the program's processes used more than {worker.cgroup.limit_mb} MB of "
                                    "memory (shared memory and files in memory included) and were killed"}
            self._release(worker, replace)
        return self._result(reply, worker.launch.isolation)

    async def run_async(self, code: str, **options: Any) -> ExecResult:
        """`run` without blocking the event loop (same keyword options)."""
        return await asyncio.to_thread(self.run, code, **options)

    def worker_pids(self) -> list[int]:
        """Host pids of the live workers' root processes (for diagnostics and tests)."""
        with self._lock:
            return [worker.process.pid for worker in self._live]

    def close(self) -> None:
        """Stop every worker; jobs still running are killed."""
        with self._lock:
            self._closed = True
        self._finalizer()
        self._spawner.shutdown(wait=False)

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # ------------------------------------------------------------------ internals

    def _spawn(self, tier: str) -> _Worker:
        launch = plan_launch(self.limits, isolation=self._isolation_choice, audit=self.audit, preload=TIERS[tier])
        worker = self._spawner.submit(_Worker, launch, tier, self.limits.memory_mb, self.limits.nproc).result()
        with self._lock:
            if self._closed:
                worker.stop()
                raise RuntimeError("the sandbox is closed")
            self._live.add(worker)
        return worker

    def _check_headroom(self, worker: _Worker) -> None:
        preloaded = worker.info.get("address_space_mb", 0)
        if self.limits.memory_mb < preloaded + 64:
            raise ValueError(f"Limits.memory_mb={self.limits.memory_mb} leaves no room: the warm worker already "
                             f"maps {preloaded:.0f} MB (numpy, pandas); use at least {preloaded + 256:.0f}")

    def _acquire(self, tier: str) -> _Worker:
        if self._closed:
            raise RuntimeError("the sandbox is closed")
        worker = self._idle[tier].get()
        try:
            if worker is not None:
                if worker.is_clean(_REPLY_GRACE_S):
                    return worker
                # Something of the last job survived, its cleanup failed, or the job killed the worker.
                self._retire(worker)
            # A slot whose worker was retired: start its successor now.
            worker = self._spawn(tier)
            worker.wait_ready(self._startup_timeout_s)
            return worker
        except BaseException:
            self._idle[tier].put(None)  # the slot stays: the next run starts a worker in it
            raise

    def _retire(self, worker: _Worker) -> None:
        with self._lock:
            self._live.discard(worker)
        worker.stop()

    def _release(self, worker: _Worker, replace: bool) -> None:
        try:
            if replace:
                self._retire(worker)
        finally:
            self._idle[worker.tier].put(None if replace else worker)

    def _job(self, code: str, mode: str, inputs: Mapping[str, Any] | None, call: Any, limits: Limits) -> dict:
        if not isinstance(code, str):
            raise TypeError(f"code must be a str, got {type(code).__name__}")
        if call is not None:
            mode = "call"
        if mode not in ("last_expression", "answer_variable", "call"):
            raise ValueError(f"mode must be 'last_expression', 'answer_variable' or 'call', got {mode!r}")
        job: dict[str, Any] = {"code": code, "mode": mode, "audit": self.audit,
                               "limits": {"cpu_s": limits.cpu_s, "wall_s": limits.wall_s,
                                          "memory_mb": limits.memory_mb, "file_mb": limits.file_mb,
                                          "nproc": limits.nproc, "stdout_chars": limits.stdout_chars}}
        if mode == "call":
            if call is None:
                raise ValueError("mode='call' needs call=(function_name, list_of_argument_lists)")
            name, argument_lists = call
            if not isinstance(name, str) or not name.isidentifier():
                raise ValueError(f"call: {name!r} is not a function name")
            job["call"] = {"name": name, "args": [encode_input(arguments) for arguments in argument_lists]}
        for name in inputs or {}:
            if not isinstance(name, str) or not name.isidentifier() or keyword.iskeyword(name):
                raise ValueError(f"inputs: {name!r} is not a valid Python variable name")
        job["inputs"] = {name: encode_input(value) for name, value in (inputs or {}).items()}
        try:  # fail here, in the caller, not in the worker; numpy scalars become plain numbers
            return json.loads(json.dumps(job, default=_encode_default))
        except (TypeError, ValueError) as exc:
            raise ValueError(f"inputs/call arguments must be JSON-like values, numpy arrays or pandas "
                             f"objects: {exc}") from exc

    @staticmethod
    def _result(reply: dict, isolation: str) -> ExecResult:
        call_errors = reply.get("call_errors")
        return ExecResult(
            status=reply.get("status", "error"),
            value=reply.get("value"),
            error_class=reply.get("error_class"),
            message=reply.get("message"),
            stdout=reply.get("stdout") or "",
            duration_s=float(reply.get("duration_s") or 0.0),
            isolation=isolation,
            call_errors=tuple(call_errors) if call_errors is not None else None,
        )
