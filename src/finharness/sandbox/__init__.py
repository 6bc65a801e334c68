"""Executing model-written Python safely: isolated, resource-limited, warm, and accountable.

BizBench scores programs a model wrote by running them. Here they never run in
the harness's process. `Sandbox` keeps a pool of warm workers; each worker is
a zygote that forks one fresh child per job (forked ahead of time, between
jobs), so a run costs a pipe round trip and no job can see another. Workers
come in two kinds: "scientific" ones hold numpy and pandas, "plain" ones only
small stdlib modules and fork about three times faster; a job goes to the
kind it needs (`needs_scientific`: third-party imports, dynamic imports,
DataFrame inputs).

Layers, strongest available first; the ones in force are named in every
`ExecResult.isolation`:

- ``bwrap`` (bubblewrap, preferred): new network, pid, ipc, uts and cgroup
  namespaces (no network at all; only the worker's own processes are
  visible); a read-only view of /usr, the Python installation and the venv,
  nothing else of the host (no $HOME, /root, /etc/shadow, repository); a
  private size-limited tmpfs as the only writable place, emptied after every
  job; an empty environment plus a fixed allow-list; a new session (no
  terminal); dies with the harness. Started as root, the worker drops to a
  random unprivileged uid with no capabilities (``setpriv``) before Python
  starts, so that RLIMIT_NPROC applies and it can signal nothing but its own
  jobs; started as a normal user, an unprivileged user namespace does this.
  After each job the zygote kills every other process in its pid namespace,
  so nothing started by a job (setsid, double fork) outlives it.
- ``rlimits`` (fallback when bwrap cannot run): a plain subprocess with a
  scrubbed environment, a private host temp dir as working directory, a
  network namespace when ``unshare --net`` is permitted (``+netns``), and
  death with the harness. It has no file-system or process isolation of its
  own: the audit guard below is then the barrier, so it cannot be turned off.
  Weaker by design: it runs as the harness's user (as root, RLIMIT_NPROC is
  not enforced by the kernel), and a program that defeats the audit guard
  reaches the host's files.
- ``audit`` (default on, in both): a ``sys.addaudithook`` guard installed in
  each job before the program runs; it refuses sockets, processes (fork,
  exec, subprocess, os.system, posix_spawn), signals to other processes,
  ctypes, raising limits, writes outside the job directory and reads outside
  the job directory, the Python installation and timezone data; it also
  cuts known unaudited paths (subprocess's private ``_fork_exec``, fresh
  imports of ``_posixsubprocess``/``_ctypes``/``_socket``). Audit hooks are a
  tripwire, not a wall (C code can bypass them), hence bwrap first.

Every job process gets RLIMIT_CPU, RLIMIT_AS, RLIMIT_FSIZE, RLIMIT_NPROC and
no core dumps, plus a wall-clock kill. Failures are recorded, never raised:
``status`` (ok / timeout / memory / error) and ``error_class`` say why.
"""

from finharness.sandbox.launch import bwrap_problem, kernel_problem, resolve_kind
from finharness.sandbox.pool import Sandbox, needs_scientific
from finharness.sandbox.result import ExecResult, Limits, SandboxStartError, SandboxUnavailable

__all__ = ["ExecResult", "Limits", "Sandbox", "SandboxStartError", "SandboxUnavailable", "bwrap_problem",
           "kernel_problem", "needs_scientific", "resolve_kind"]
