"""How a sandbox worker process is started: bubblewrap when it works here, rlimits otherwise.

`plan_launch` decides once per process which isolation is available and builds
the command line of a worker; the layers in force are named by `Launch.isolation`.
"""

from __future__ import annotations

import functools
import os
import random
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from finharness.sandbox.result import Limits

ZYGOTE_SOURCE = Path(__file__).with_name("_zygote.py")
ZYGOTE_INSIDE = "/opt/finharness-sandbox/zygote.py"
SCRATCH_INSIDE = "/tmp"
SANDBOX_UID_RANGE = (2_000_000, 3_000_000)
"""Kernel uids with no account; each bubblewrap worker started by root gets one at random, so
RLIMIT_NPROC counts that worker alone and its files and signals reach nothing else."""

PLAIN_PRELOAD = ("ast", "json", "math", "decimal", "fractions", "datetime", "statistics")
SCIENTIFIC_PRELOAD = (*PLAIN_PRELOAD, "numpy", "pandas")
"""What a worker imports before its first fork. A fork copies the page tables of everything loaded,
so a plain worker forks several times faster than one holding numpy and pandas."""
# Only these variables reach a worker: no secrets, no proxies, one BLAS thread (fork safety).
WORKER_ENV = {
    "PATH": "/usr/bin:/bin",
    "LANG": "C.UTF-8",
    "OPENBLAS_NUM_THREADS": "1",
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
}
_HOST_ROOT_ENTRIES = ("usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32")
_HOST_ETC_FILES = ("/etc/ld.so.cache", "/etc/localtime")

IsolationChoice = Literal["auto", "bwrap", "rlimits"]


@dataclass(frozen=True)
class Launch:
    """Everything needed to start one worker."""

    argv: tuple[str, ...]
    """The command line (bwrap ... python zygote.py CONFIG, or python zygote.py CONFIG)."""

    isolation: str
    """Layers in force, recorded in every ExecResult: "bwrap+audit", "bwrap", "rlimits+netns+audit"..."""

    scratch_dir: str | None = None
    """Host temp dir that the worker uses as scratch (fallback only; removed when the worker stops)."""

    env: dict[str, str] = field(default_factory=dict)
    """The complete environment of the worker process."""


def python_roots() -> tuple[str, ...]:
    """Directories of the running Python that a worker must read: installation, venv, site-packages."""
    roots = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix)}
    for entry in sys.path:
        if entry and "site-packages" in entry and os.path.isdir(entry):
            real = os.path.realpath(entry)
            if not any(real.startswith(root + "/") for root in roots):
                roots.add(real)
    # Drop roots nested in other roots: binding the outer one covers them.
    ordered = sorted(roots)
    return tuple(r for r in ordered if not any(r != o and r.startswith(o + "/") for o in ordered))


def _read_roots() -> list[str]:
    return [*python_roots(), "/usr/share/zoneinfo"]


def _bwrap_argv(python_args: list[str], limits: Limits, uid: int | None) -> list[str]:
    argv = ["bwrap", "--unshare-net", "--unshare-pid", "--unshare-ipc", "--unshare-uts",
            "--unshare-cgroup-try", "--die-with-parent", "--new-session", "--clearenv"]
    if uid is None:  # not root: an unprivileged user namespace does the uid switch
        argv += ["--unshare-user", "--cap-drop", "ALL"]
    for name, value in WORKER_ENV.items():
        argv += ["--setenv", name, value]
    argv += ["--setenv", "HOME", SCRATCH_INSIDE, "--setenv", "TMPDIR", SCRATCH_INSIDE]
    for name in _HOST_ROOT_ENTRIES:
        host = f"/{name}"
        if os.path.islink(host):
            argv += ["--symlink", os.readlink(host), host]
        elif os.path.isdir(host):
            argv += ["--ro-bind", host, host]
    for path in _HOST_ETC_FILES:
        argv += ["--ro-bind-try", path, path]
    # The private scratch tmpfs goes first: a Python or venv that lives under /tmp (a CI clone)
    # is then bound on top of it instead of being hidden by it.
    argv += ["--size", str(limits.tmpfs_mb * 2**20), "--perms", "1777", "--tmpfs", SCRATCH_INSIDE]
    made = {"/", "/usr", SCRATCH_INSIDE, "/proc", "/dev"}
    for root in python_roots():
        # bwrap creates missing parents with mode 0700, unreadable after the uid switch.
        for parent in reversed(Path(root).parents):
            if str(parent) not in made and not str(parent).startswith("/usr/"):
                argv += ["--perms", "0755", "--dir", str(parent)]
                made.add(str(parent))
        if not root.startswith("/usr/"):
            argv += ["--ro-bind", root, root]
    argv += ["--perms", "0755", "--dir", os.path.dirname(ZYGOTE_INSIDE),
             "--ro-bind", str(ZYGOTE_SOURCE), ZYGOTE_INSIDE,
             "--proc", "/proc", "--dev", "/dev",
             "--chdir", SCRATCH_INSIDE, "--"]
    if uid is not None:
        # Root outside: Python never runs privileged, not even its startup.
        argv += ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups",
                 "--inh-caps=-all", "--bounding-set=-all", "--"]
    return argv + [sys.executable, "-I", "-B", *python_args]


def _config(scratch_dir: str, pid_namespace: bool, audit_read_roots: list[str], preload: tuple[str, ...]) -> str:
    import json

    return json.dumps({"scratch_dir": scratch_dir, "pid_namespace": pid_namespace,
                       "read_roots": audit_read_roots, "preload": list(preload),
                       "max_result_bytes": 16 * 2**20})


@functools.cache
def bwrap_problem() -> str | None:
    """None when bubblewrap can start a worker-shaped sandbox here, else why not."""
    if shutil.which("bwrap") is None:
        return "bwrap is not installed (Debian: apt-get install bubblewrap)"
    if os.geteuid() == 0 and shutil.which("setpriv") is None:
        return "running as root, and setpriv (util-linux) is missing to drop to an unprivileged uid"
    uid = SANDBOX_UID_RANGE[0] if os.geteuid() == 0 else None
    # Same mounts, namespaces and uid switch as a worker; only check that Python starts.
    argv = _bwrap_argv(["-c", "pass"], Limits(), uid)
    try:
        done = subprocess.run(argv, env={}, capture_output=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bwrap failed to start: {exc}"
    if done.returncode != 0:
        return f"bwrap exited {done.returncode}: {done.stderr.decode(errors='replace').strip()[-300:]}"
    return None


@functools.cache
def _can_unshare_net() -> bool:
    unshare = shutil.which("unshare")
    if unshare is None:
        return False
    return subprocess.run([unshare, "--net", "--", "true"], env={}, capture_output=True).returncode == 0


def isolation_label(isolation: IsolationChoice, audit: bool) -> str:
    """The layers a worker planned with these choices runs under (raises when they cannot be had)."""
    if isolation == "bwrap" and bwrap_problem() is not None:
        raise RuntimeError(f"isolation='bwrap' requested but {bwrap_problem()}")
    if isolation == "bwrap" or (isolation == "auto" and bwrap_problem() is None):
        return "bwrap+audit" if audit else "bwrap"
    if not audit:
        raise ValueError("the rlimits fallback needs the audit guard: it is the only file and network "
                         "barrier there (install bubblewrap to run with audit=False)")
    return "rlimits+netns+audit" if _can_unshare_net() else "rlimits+audit"


def plan_launch(limits: Limits, *, isolation: IsolationChoice, audit: bool,
                preload: tuple[str, ...] = SCIENTIFIC_PRELOAD) -> Launch:
    """The command line of one new worker, with the strongest isolation allowed by `isolation`.

    The fallback creates the worker's host scratch directory (the worker removes it when stopped).
    """
    label = isolation_label(isolation, audit)
    if label.startswith("bwrap"):
        uid = random.randrange(*SANDBOX_UID_RANGE) if os.geteuid() == 0 else None
        config = _config(SCRATCH_INSIDE, True, _read_roots(), preload)
        return Launch(tuple(_bwrap_argv([ZYGOTE_INSIDE, config], limits, uid)), label, env={})
    scratch = tempfile.mkdtemp(prefix="finharness-sandbox-")
    env = {**WORKER_ENV, "HOME": scratch, "TMPDIR": scratch}
    prefix = ["unshare", "--net", "--"] if "netns" in label else []
    if shutil.which("setpriv") is not None:
        prefix += ["setpriv", "--pdeathsig", "KILL", "--"]  # the worker dies with the harness
    config = _config(scratch, False, _read_roots(), preload)
    argv = [*prefix, sys.executable, "-I", "-B", str(ZYGOTE_SOURCE), config]
    return Launch(tuple(argv), label, scratch_dir=scratch, env=env)
