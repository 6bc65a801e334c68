"""Executing model-written Python safely: isolated, resource-limited, warm, and accountable.

BizBench scores programs a model wrote by running them. Here they never run in
the harness's process. `Sandbox` keeps a pool of warm workers; each worker is
a zygote that forks one fresh child per job (forked ahead of time, between
jobs), so a run costs a pipe round trip and no job can see another. Workers
come in two kinds: "scientific" ones hold numpy and pandas, "plain" ones only
small stdlib modules and fork about three times faster; a job goes to the
kind it needs (`needs_scientific`: third-party imports, dynamic imports,
DataFrame inputs).

Isolation is enforced by the kernel in every kind of worker; the layers in force are named in every
`ExecResult.isolation` (e.g. "bwrap+seccomp+landlock+memcg+audit"):

- ``bwrap`` (bubblewrap, preferred): new network, pid, ipc, uts and cgroup
  namespaces (no network at all; only the worker's own processes are
  visible); a read-only view of /usr, the Python installation and the venv,
  nothing else of the host (no $HOME, /root, /etc/shadow, repository); a
  private size-limited tmpfs as the only writable place, emptied after every
  job; a read-only /dev (no /dev/shm); an empty environment plus a fixed
  allow-list; a new session (no terminal); dies with the harness. Started as
  root, the worker drops to a random unprivileged uid with no capabilities
  (``setpriv``) before Python starts; started as a normal user, an
  unprivileged user namespace does this. After each job the zygote kills
  every other process in its pid namespace.
- ``seccomp`` (every job, both kinds; finharness.sandbox.seccomp): an
  allow-list of system calls compiled once by libseccomp in the harness and
  loaded by each job before it reads its program: no execve, no fork (clone
  for threads only), no signals outside its own process group, no ptrace or
  process_vm_*, no pidfds, no memfd_create, no sockets, no mount/unshare/setns
  or new namespaces, no bpf, keyrings, io_uring, userfaultfd, perf events or
  personality changes, no setting of its own limits; a call of another
  architecture (int 0x80) kills the job. Refusals fail with EPERM.
- ``landlock`` (where the kernel has it; probed ABI): the worker closes its
  own file system before its first fork, so every job is born in that
  domain: read-only the Python installation, the venv
  and the system libraries, a few devices; read-write the scratch directory
  (read-only without bubblewrap); nothing else, /proc included. From ABI 4
  TCP connect/bind are refused too, from ABI 6 signals to processes outside
  the job's own domain and abstract unix sockets.
- ``memcg`` (where a memory cgroup can be had: cgroup v2 with the memory
  controller delegated, else cgroup v1's memory hierarchy, e.g. as root;
  finharness.sandbox.cgroups): the worker's memory counted as memory, shared
  memory and tmpfs pages included, capped at Limits.memory_mb; a job the
  kernel kills for it is reported as status "memory", MemoryLimit.
- ``kernel`` workers (no bubblewrap: it is missing or cannot run): seccomp
  and Landlock are then both required, the job directory is read-only (no
  sized file system can be mounted), a network namespace is added where
  ``unshare --net`` is permitted, capabilities are dropped, and the uid is
  never 0: as root each worker gets a uid of its own, the Python installation
  made readable to it (finharness.sandbox.access: bound back in a private
  mount namespace, else mirrored); as a normal user, that user in a user
  namespace of the worker's own where the kernel allows one. What stays
  visible without a mount namespace: the existence and metadata of host paths
  (Landlock does not mediate stat()), never their contents.
- ``pids`` (where a pids cgroup can be had, as memcg): the worker's processes
  and threads together bounded; elsewhere RLIMIT_NPROC of a uid (or user
  namespace) that counts the worker alone.
- ``audit`` (default on): a ``sys.addaudithook`` guard installed in each job
  before the program runs, which refuses sockets, processes, signals to other
  processes, ctypes, sub-interpreters, raising limits, writes outside the job
  directory and reads outside it, the Python installation and timezone data,
  with a clear message. A program can walk around it (e.g. by patching the
  path helpers it calls), so no boundary rests on it.
- ``unsafe+rlimits`` ("bare"): rlimits and the audit guard only. A Sandbox
  never falls back to it silently: isolation "auto" raises SandboxUnavailable
  naming what is missing; only "unsafe" (on a machine with nothing else) or
  "bare" (tests, measurements) run it, and `Sandbox.warning` says so.

Every job process also gets RLIMIT_CPU, RLIMIT_AS, RLIMIT_FSIZE, RLIMIT_NPROC,
RLIMIT_NOFILE (64), RLIMIT_SIGPENDING (64) and no core dumps, plus a wall-clock
kill. After each job the worker empties its scratch directory whatever the job
left there; if anything survives or the cleanup fails, the worker is replaced
in its slot. Failures are recorded, never raised: ``status`` (ok / timeout /
memory / error) and ``error_class`` say why.
"""

from finharness.sandbox.launch import bwrap_problem, kernel_problem, resolve_kind
from finharness.sandbox.pool import Sandbox, needs_scientific
from finharness.sandbox.result import ExecResult, Limits, SandboxStartError, SandboxUnavailable

__all__ = ["ExecResult", "Limits", "Sandbox", "SandboxStartError", "SandboxUnavailable", "bwrap_problem",
           "kernel_problem", "needs_scientific", "resolve_kind"]
