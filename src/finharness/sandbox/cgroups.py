"""Memory limited as memory: one memory cgroup per sandbox worker, where this machine lets us make one.

RLIMIT_AS counts address space, not memory: pages of shared memory or a tmpfs that a job fills are not
in it. A memory cgroup counts every page the worker's processes charge (anonymous, shared, tmpfs,
page cache) and the kernel's OOM killer ends the job when they pass the limit. cgroup v2 is used when
its memory controller can be enabled below the harness's own cgroup (the root, or a delegated one); else
cgroup v1's memory hierarchy (hybrid layouts, e.g. Debian with systemd's legacy mode) when it is
writable (as root). Elsewhere `memory_problem()` says why, and the sandbox relies on RLIMIT_AS with
the shared-memory routes closed (memfd refused, no /dev/shm, a sized tmpfs).

The pids controller, found the same way, bounds a worker's processes and threads together (`PidsCgroup`);
where it cannot be had, RLIMIT_NPROC of the worker's own unprivileged uid does.
"""

from __future__ import annotations

import functools
import itertools
import os
import time
from dataclasses import dataclass
from pathlib import Path

_PREFIX = "finharness-sandbox-"
_counter = itertools.count()


@dataclass(frozen=True)
class MemoryControl:
    """Where worker cgroups are made, and in which cgroup version."""

    base: Path
    """The harness's own memory cgroup directory; worker cgroups are its children."""

    version: int
    """1 (memory.limit_in_bytes) or 2 (memory.max)."""


def _mounts() -> list[tuple[str, str, str, str]]:
    """(mount root, mount point, fs type, super options) of every cgroup mount."""
    found = []
    with open("/proc/self/mountinfo") as mountinfo:
        for line in mountinfo:
            before, _, after = line.partition(" - ")
            fields, tail = before.split(), after.split()
            if len(fields) >= 5 and len(tail) >= 3 and tail[0] in ("cgroup", "cgroup2"):
                found.append((fields[3], fields[4], tail[0], tail[2]))
    return found


def _own_cgroups() -> dict[str, str]:
    """Controller list ('' for v2, 'memory' or 'cpu,cpuacct' for v1) -> this process's cgroup path."""
    paths = {}
    with open("/proc/self/cgroup") as cgroups:
        for line in cgroups:
            _, controllers, path = line.rstrip("\n").split(":", 2)
            paths[controllers] = path
    return paths


def _directory(mount_root: str, mount_point: str, path: str) -> Path:
    relative = os.path.relpath(path, mount_root) if path.startswith(mount_root) else path.lstrip("/")
    return Path(mount_point) / ("" if relative == "." else relative)


def _probe(controller: str = "memory") -> tuple[MemoryControl | None, str]:
    try:
        mounts, own = _mounts(), _own_cgroups()
    except OSError as exc:
        return None, f"cannot read this process's cgroups: {exc}"
    reasons = []
    for root, point, kind, options in mounts:
        if kind == "cgroup2" and "" in own:
            base = _directory(root, point, own[""])
            try:
                if controller not in (base / "cgroup.controllers").read_text().split():
                    reasons.append(f"cgroup v2 at {point} has no {controller} controller here")
                    continue
                if controller not in (base / "cgroup.subtree_control").read_text().split():
                    (base / "cgroup.subtree_control").write_text(f"+{controller}")
            except OSError as exc:
                reasons.append(f"cannot enable the v2 {controller} controller below {base}: {exc.strerror}")
                continue
            if _can_make_child(base):
                return MemoryControl(base, 2), ""
            reasons.append(f"cannot create a cgroup below {base}")
        elif kind == "cgroup" and controller in options.split(","):
            path = next((p for names, p in own.items() if controller in names.split(",")), None)
            if path is None:
                continue
            base = _directory(root, point, path)
            if _can_make_child(base):
                return MemoryControl(base, 1), ""
            reasons.append(f"cannot create a cgroup below {base} (needs root or a delegated cgroup)")
    return None, "; ".join(reasons) or f"no cgroup {controller} controller is mounted"


def _can_make_child(base: Path) -> bool:
    probe = base / f"{_PREFIX}probe-{os.getpid()}"
    try:
        probe.mkdir()
        probe.rmdir()
    except OSError:
        return False
    _remove_stale(base)
    return True


def _remove_stale(base: Path) -> None:
    """Empty worker cgroups left by harnesses that were killed (their pid is in the name)."""
    for entry in base.glob(f"{_PREFIX}*"):
        pid = entry.name[len(_PREFIX):].split("-", 1)[0]
        if pid.isdigit() and not os.path.exists(f"/proc/{pid}"):
            try:
                entry.rmdir()
            except OSError:
                pass


@functools.cache
def _probed(controller: str = "memory") -> tuple[MemoryControl | None, str]:
    return _probe(controller)


def memory_control() -> MemoryControl | None:
    """Where worker memory cgroups can be made here (probed once), or None."""
    return _probed()[0]


def memory_problem() -> str | None:
    """None when worker memory cgroups can be made here, else why not."""
    return None if memory_control() is not None else _probed()[1]


def pids_control() -> MemoryControl | None:
    """Where worker pids cgroups can be made here (probed once), or None: then RLIMIT_NPROC of the worker's
    unprivileged uid is the process limit."""
    return _probed("pids")[0]


class WorkerCgroup:
    """The memory cgroup of one worker: created before it starts, removed after it stopped."""

    def __init__(self, control: MemoryControl, limit_mb: int):
        self.control = control
        self.path = control.base / f"{_PREFIX}{os.getpid()}-{next(_counter)}"
        self.path.mkdir()
        self.limit_mb = 0
        self._oom_kills_seen = 0
        self.set_limit(limit_mb)

    @property
    def procs_file(self) -> str:
        """Writing a pid here moves that process (and what it starts afterwards) into the cgroup."""
        return str(self.path / "cgroup.procs")

    def set_limit(self, limit_mb: int) -> None:
        """Memory of the worker's processes together, swap excluded (no swapping out instead of failing)."""
        if limit_mb == self.limit_mb:
            return
        size = str(limit_mb * 2**20)
        if self.control.version == 2:
            (self.path / "memory.max").write_text(size)
            swap = self.path / "memory.swap.max"
            if swap.exists():
                swap.write_text("0")
        else:
            memsw = self.path / "memory.memsw.limit_in_bytes"
            # memsw must stay >= the memory limit at every step (both start unlimited).
            if memsw.exists() and limit_mb > self.limit_mb > 0:
                memsw.write_text(size)
            (self.path / "memory.limit_in_bytes").write_text(size)
            if memsw.exists():
                memsw.write_text(size)
        self.limit_mb = limit_mb

    def oom_killed_since_last_asked(self) -> bool:
        """Whether the kernel's OOM killer ended a process here since the previous call."""
        name = "memory.events" if self.control.version == 2 else "memory.oom_control"
        try:
            fields = dict(line.split() for line in (self.path / name).read_text().splitlines() if " " in line)
        except OSError:
            return False
        kills = int(fields.get("oom_kill", 0))
        seen, self._oom_kills_seen = self._oom_kills_seen, kills
        return kills > seen

    def remove(self) -> None:
        """Delete the (now empty) cgroup; its last processes may take a moment to be freed."""
        _remove_cgroup_dir(self.path)


def _remove_cgroup_dir(path: Path) -> None:
    """Delete an emptied cgroup directory; its last processes may take a moment to be freed (2 s at most)."""
    deadline = time.monotonic() + 2.0
    while True:
        try:
            path.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:
            if time.monotonic() > deadline:
                return
            time.sleep(0.01)


class PidsCgroup:
    """The task limit of one worker (the pids controller): its processes and threads together, whatever uid
    they run as. Under cgroup v2 it shares the worker's memory cgroup when there is one (a process belongs to
    one v2 cgroup); under v1 it is a directory of the pids hierarchy."""

    def __init__(self, control: MemoryControl, max_tasks: int, shared: Path | None = None):
        self.owned = shared is None
        self.path = control.base / f"{_PREFIX}{os.getpid()}-{next(_counter)}" if shared is None else shared
        if self.owned:
            self.path.mkdir()
        self.max_tasks = 0
        self.set_limit(max_tasks)

    @property
    def procs_file(self) -> str:
        return str(self.path / "cgroup.procs")

    def set_limit(self, max_tasks: int) -> None:
        if max_tasks != self.max_tasks:
            (self.path / "pids.max").write_text(str(max_tasks))
            self.max_tasks = max_tasks

    def remove(self) -> None:
        if not self.owned:
            return
        _remove_cgroup_dir(self.path)
