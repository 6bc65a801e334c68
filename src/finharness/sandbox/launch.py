"""How a sandbox worker process is started, and under which kernel-enforced layers.

`plan_launch` builds the command line of a worker for one of three kinds (`resolve_kind` decides which
a choice gets here, once per process), and `Launch.isolation` names the layers in force:

- ``bwrap``: bubblewrap's namespaces, plus the seccomp filter, Landlock (where the kernel has it) and a
  memory cgroup (where one can be had);
- ``kernel``: no namespaces (bubblewrap cannot run here), but the seccomp filter and Landlock, both
  required, a network namespace when permitted, a memory cgroup where one can be had, no capabilities;
- ``bare``: rlimits and the audit guard only, nothing the kernel enforces. Only chosen explicitly
  (``isolation="bare"``), or by ``"unsafe"`` on a machine where neither of the others can run.
"""

from __future__ import annotations

import functools
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from finharness.sandbox import _zygote
from finharness.sandbox.access import ZYGOTE_SOURCE, PythonView, bind_script, python_roots, python_view
from finharness.sandbox.access import reachable_by_others as _reachable_by_others
from finharness.sandbox.cgroups import memory_control, pids_control
from finharness.sandbox.result import Limits, SandboxUnavailable
from finharness.sandbox.seccomp import filter_program, seccomp_problem, seccomp_syscall_number

ZYGOTE_INSIDE = "/opt/finharness-sandbox/zygote.py"
SCRATCH_INSIDE = "/tmp"
SANDBOX_UID_RANGE = (2_000_000, 3_000_000)
"""Kernel uids with no account; each worker started by root gets one at random, under every kind, so no
job runs as uid 0, RLIMIT_NPROC counts that worker alone (it binds once the uid is not 0), and its files
and signals reach nothing else."""

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
_DEVICES = ("/dev/null", "/dev/zero", "/dev/urandom", "/dev/random")

IsolationChoice = Literal["auto", "bwrap", "kernel", "rlimits", "unsafe", "bare"]
CHOICES = ("auto", "bwrap", "kernel", "rlimits", "unsafe", "bare")
"""auto: bwrap, else kernel, else refuse (SandboxUnavailable); bwrap / kernel: that kind or refuse;
rlimits: the former name of the fallback without bubblewrap, now `kernel`; unsafe: the strongest kind
available, down to bare; bare: rlimits and the audit guard only (for tests and measurements)."""

UNSAFE_WARNING = ("warning: model-written code runs with NO kernel-enforced isolation (sandbox 'unsafe'): only "
                  "rlimits and an in-process audit guard, which a program can walk around (a sub-interpreter, "
                  "a patched helper, an unaudited system call) to run commands, read and write your files, and "
                  "signal your processes. Missing here: {missing}")


@dataclass(frozen=True)
class Launch:
    """Everything needed to start one worker."""

    argv: tuple[str, ...]
    """The command line (bwrap ... python zygote.py CONFIG, or [unshare] setpriv ... python zygote.py CONFIG)."""

    isolation: str
    """Layers in force, recorded in every ExecResult: "bwrap+seccomp+landlock+memcg+audit"..."""

    kind: str = "bwrap"
    """'bwrap', 'kernel' or 'bare'."""

    scratch_dir: str | None = None
    """Host temp dir that the worker uses as scratch (kernel and bare only; removed when the worker stops)."""

    env: dict[str, str] = field(default_factory=dict)
    """The complete environment of the worker process."""

    memory_cgroup: bool = False
    """Start the worker in a memory cgroup of its own (see finharness.sandbox.cgroups)."""

    pids_cgroup: bool = False
    """Start the worker in a pids cgroup of its own: its processes and threads together are bounded."""

    uid: int | None = None
    """The unprivileged uid (and gid) the worker runs as, when the harness is root; None: the harness's own."""

    landlock_abi: int = 0
    """The Landlock ABI version the worker must report enforcing (0: none)."""


def _read_roots(roots: tuple[str, ...] | None = None) -> list[str]:
    """What the audit guard lets a job read (besides its own directory)."""
    return [*(python_roots() if roots is None else roots), "/usr/share/zoneinfo"]


def _landlock_read_roots(roots: tuple[str, ...] | None = None) -> list[str]:
    """What Landlock lets a job read: the Python installation, the system's libraries, a few devices."""
    return [*(python_roots() if roots is None else roots), *(f"/{name}" for name in _HOST_ROOT_ENTRIES),
            *_HOST_ETC_FILES, *_DEVICES]


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
             # bwrap's /dev is an unsized tmpfs: no shared-memory directory on it, and read-only.
             "--remount-ro", "/dev",
             "--chdir", SCRATCH_INSIDE, "--"]
    if uid is not None:
        # Root outside: Python never runs privileged, not even its startup.
        argv += ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups",
                 "--inh-caps=-all", "--bounding-set=-all", "--"]
    return argv + [sys.executable, "-I", "-B", *python_args]


def _config(scratch_dir: str, pid_namespace: bool, preload: tuple[str, ...], *,
            landlock: dict | None = None, seccomp: bytes | None = None, keep: list[str] | None = None,
            view: PythonView | None = None, nproc_uncounted: int = 0) -> str:
    return json.dumps({"scratch_dir": scratch_dir, "pid_namespace": pid_namespace,
                       "read_roots": _read_roots(view.roots if view else None), "preload": list(preload),
                       "max_result_bytes": 16 * 2**20, "landlock": landlock,
                       "seccomp": None if seccomp is None else seccomp.hex(),
                       "seccomp_nr": None if seccomp is None else seccomp_syscall_number(),
                       "keep": keep or [], "site_dirs": list(view.site_dirs) if view else [],
                       # A normal user's bubblewrap: its pid-namespace init runs as the job's uid too.
                       "nproc_uncounted": nproc_uncounted})


def _kept_in_scratch(roots: tuple[str, ...]) -> list[str]:
    """Paths below bubblewrap's scratch tmpfs that are not the job's: a Python or venv under /tmp (a CI
    clone) is bound there, with the directories bubblewrap made above it."""
    kept = set()
    for root in roots:
        if root.startswith(SCRATCH_INSIDE + "/"):
            parts = Path(root).relative_to(SCRATCH_INSIDE).parts
            kept |= {"/".join(parts[:i]) for i in range(1, len(parts) + 1)}
    return sorted(kept)


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
        return (f"bwrap exited {done.returncode}: {done.stderr.decode(errors='replace').strip()[-300:]} "
                "(user namespaces disabled? sysctl kernel.unprivileged_userns_clone=1, or run as root)")
    return None


@functools.cache
def landlock_abi() -> int:
    """The running kernel's Landlock ABI version (0: none)."""
    try:
        return _zygote.landlock_abi()
    except OSError:
        return 0


def landlock_problem() -> str | None:
    """None when the kernel has Landlock, else what is missing."""
    if landlock_abi() >= 1:
        return None
    return ("the kernel has no Landlock (Linux >= 5.13 built with CONFIG_SECURITY_LANDLOCK=y, and 'landlock' "
            "in the lsm= boot parameter)")


def uid_problem() -> str | None:
    """None when a worker started here can run its jobs as an unprivileged uid, else why not (root only:
    a normal user's jobs run as that user)."""
    if os.geteuid() != 0:
        return None
    if shutil.which("setpriv") is None:
        return "running as root, and setpriv (util-linux) is missing to drop to an unprivileged uid"
    try:
        python_view()
    except OSError as exc:
        return f"running as root, and the Python installation cannot be made readable to an unprivileged uid: {exc}"
    return None


def kernel_problem() -> str | None:
    """None when the `kernel` kind (seccomp + Landlock, no namespaces) can run here, else what is missing."""
    problems = [p for p in (seccomp_problem(), landlock_problem(), uid_problem()) if p]
    return "; ".join(problems) or None


def _unavailable(choice: str) -> str:
    bwrap, kernel = bwrap_problem() or seccomp_problem(), kernel_problem()
    lines = [f"no kernel-enforced isolation for model-written code on this machine (sandbox '{choice}'):"]
    if choice in ("auto", "bwrap") and bwrap:
        lines.append(f"  - bubblewrap + seccomp: {bwrap}")
    if choice in ("auto", "kernel") and kernel:
        lines.append(f"  - seccomp + Landlock without namespaces: {kernel}")
    lines.append("  Fix one of these (apt-get install bubblewrap; a kernel with Landlock), or accept the risk "
                 "with sandbox 'unsafe' (rlimits and an in-process audit guard only).")
    return "\n".join(lines)


def resolve_kind(choice: IsolationChoice) -> str:
    """The kind of worker a choice gets here: 'bwrap', 'kernel' or 'bare'. Raises SandboxUnavailable."""
    if choice not in CHOICES:
        raise ValueError(f"isolation must be one of {', '.join(CHOICES)}; got {choice!r}")
    if choice == "bare":
        return "bare"
    choice = "kernel" if choice == "rlimits" else choice
    if choice in ("auto", "bwrap", "unsafe") and bwrap_problem() is None and seccomp_problem() is None:
        return "bwrap"
    if choice in ("auto", "kernel", "unsafe") and kernel_problem() is None:
        return "kernel"
    if choice == "unsafe":
        return "bare"
    raise SandboxUnavailable(_unavailable(choice))


def missing_layers() -> str:
    """What this machine lacks for kernel-enforced isolation (the unsafe warning's last part)."""
    return "; ".join(p for p in (bwrap_problem(), kernel_problem()) if p) or "nothing"


def _unshare_works(*flags: str) -> bool:
    unshare = shutil.which("unshare")
    if unshare is None:
        return False
    return subprocess.run([unshare, *flags, "--", "true"], env={}, capture_output=True).returncode == 0


@functools.cache
def _user_namespace() -> tuple[str, ...]:
    """unshare flags that give a worker started by a normal user a user namespace of its own (its uid mapped
    to itself), or () where none may be had or the harness is root (it drops to a uid of its own instead).

    Why: RLIMIT_NPROC counts every task of a real uid in its user namespace. Without one, a normal user's
    job shares the count with all of that user's processes (a desktop's hundreds: no thread could start,
    while the limit bounds nothing of the job's own); inside one, it counts the worker's tasks alone. It also
    lets a normal user have the network namespace."""
    if os.geteuid() == 0:
        return ()
    flags = ("--user", "--map-current-user")
    return flags if _unshare_works(*flags) else ()


@functools.cache
def _can_unshare_net() -> bool:
    return _unshare_works(*_user_namespace(), "--net")


def isolation_label(isolation: IsolationChoice, audit: bool) -> str:
    """The layers a worker planned with these choices runs under (raises when they cannot be had)."""
    kind = resolve_kind(isolation)
    if kind == "bare" and not audit:
        raise ValueError("the bare fallback needs the audit guard: it is the only file and network "
                         "barrier there (use isolation 'bwrap' or 'kernel' to run with audit=False)")
    layers = {"bwrap": ["bwrap", "seccomp"] + (["landlock"] if landlock_abi() else []),
              "kernel": ["seccomp", "landlock"], "bare": ["unsafe", "rlimits"]}[kind]
    if kind != "bwrap" and _can_unshare_net():
        layers.append("netns")
    if kind != "bare" and memory_control() is not None:
        layers.append("memcg")
    if kind != "bare" and pids_control() is not None:
        layers.append("pids")
    return "+".join(layers + (["audit"] if audit else []))


def isolation_kind(label: str) -> str:
    """'bwrap', 'kernel' or 'bare', from an isolation label."""
    return "bwrap" if label.startswith("bwrap") else "bare" if label.startswith("unsafe") else "kernel"


def _privileges(uid: int | None) -> list[str]:
    """setpriv arguments: death with the harness, no new privileges, no capabilities, and as root a uid and
    gid of the worker's own with no groups."""
    args = ["setpriv", "--pdeathsig", "KILL", "--no-new-privs", "--inh-caps=-all", "--bounding-set=-all"]
    if uid is not None:
        args += [f"--reuid={uid}", f"--regid={uid}", "--clear-groups"]
    return [*args, "--"]


def _scratch_parent() -> str | None:
    """Where a host scratch directory is made: the temp dir, unless the worker's uid could not enter it."""
    if os.geteuid() == 0 and not _reachable_by_others([tempfile.gettempdir()]):
        return "/tmp"
    return None


_REMOVE_TIMEOUT_S = 60.0
"""Seconds the removal of a stopped worker's host scratch directory may take (in a process of its own)."""
_SCRATCH_PREFIX = "finharness-sandbox-"


def remove_scratch(path: str | None) -> None:
    """Remove a host scratch directory, whatever a job left in it (modes, depth, links), in a process of its
    own with a timeout: a tree that would take long, or a bug, cannot hang or crash the harness."""
    if not path or not os.path.lexists(path):
        return
    try:
        subprocess.run([sys.executable, "-I", "-S", "-B", str(_zygote.__file__), "--remove", path],
                       env={"PATH": "/usr/bin:/bin"}, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, timeout=_REMOVE_TIMEOUT_S, close_fds=True)
    except (OSError, subprocess.SubprocessError):
        pass


@functools.cache
def _remove_stale_scratch(parent: str) -> None:
    """Once per harness: the scratch directories of harnesses that were killed (SIGKILL: no close(), no
    finaliser), named by their pid, removed from `parent` (only this uid's, unless root)."""
    for entry in Path(parent).glob(f"{_SCRATCH_PREFIX}*-*"):
        pid = entry.name[len(_SCRATCH_PREFIX):].split("-", 1)[0]
        try:
            owned = os.geteuid() == 0 or entry.lstat().st_uid == os.geteuid()
        except OSError:
            continue
        if pid.isdigit() and owned and not os.path.exists(f"/proc/{pid}"):
            remove_scratch(str(entry))


def plan_launch(limits: Limits, *, isolation: IsolationChoice, audit: bool,
                preload: tuple[str, ...] = SCIENTIFIC_PRELOAD) -> Launch:
    """The command line of one new worker, with the strongest isolation allowed by `isolation`.

    Without bubblewrap this creates the worker's host scratch directory (removed when it stops).
    """
    label = isolation_label(isolation, audit)
    kind = isolation_kind(label)
    abi = landlock_abi() if "landlock" in label else 0
    seccomp = filter_program(kind) if kind != "bare" else None
    uid = random.randrange(*SANDBOX_UID_RANGE) if os.geteuid() == 0 else None
    cgroups = {"memory_cgroup": "memcg" in label, "pids_cgroup": "pids" in label}
    if kind == "bwrap":
        landlock = {"abi": abi, "read": _landlock_read_roots(), "write": [SCRATCH_INSIDE]} if abi else None
        config = _config(SCRATCH_INSIDE, True, preload, landlock=landlock, seccomp=seccomp,
                         keep=_kept_in_scratch(python_roots()), nproc_uncounted=0 if uid is not None else 1)
        return Launch(tuple(_bwrap_argv([ZYGOTE_INSIDE, config], limits, uid)), label, kind, env={},
                      landlock_abi=abi, uid=uid, **cgroups)
    problem = uid_problem()
    if problem:
        raise SandboxUnavailable(f"no job may run as uid 0: {problem}")
    view = python_view() if uid is not None else PythonView("readable", sys.executable, str(ZYGOTE_SOURCE),
                                                           python_roots())
    parent = _scratch_parent() or tempfile.gettempdir()
    _remove_stale_scratch(parent)
    scratch = tempfile.mkdtemp(prefix=f"{_SCRATCH_PREFIX}{os.getpid()}-", dir=parent)
    if uid is not None:
        os.chown(scratch, uid, uid)
    env = {**WORKER_ENV, "HOME": scratch, "TMPDIR": scratch, **view.env}
    namespaces = [*_user_namespace(), *(["--net"] if "netns" in label else []),
                  *(["--mount"] if view.how == "bind" else [])]
    prefix = ["unshare", *namespaces, "--"] if namespaces else []
    if view.how == "bind":
        # Root, in the worker's own mount namespace: the Python installation made visible, then the uid drop.
        prefix += ["/bin/sh", "-c", bind_script(view, os.path.join(scratch, ".python")), "finharness-sandbox-bind"]
    prefix += _privileges(uid)
    if kind == "kernel":
        # No mount namespace for the job, so no sized private file system: the job directory is read-only.
        landlock = {"abi": abi, "read": [*_landlock_read_roots(view.roots), scratch], "write": []}
        config = _config(scratch, False, preload, landlock=landlock, seccomp=seccomp, keep=["job"], view=view)
    else:
        config = _config(scratch, False, preload, view=view)
    argv = [*prefix, view.executable, *view.interpreter_flags, view.zygote, config]
    return Launch(tuple(argv), label, kind, scratch_dir=scratch, env=env, landlock_abi=abi, uid=uid, **cgroups)
