"""The system-call filter of every sandbox job: an allow-list, compiled once by libseccomp, loaded by each job.

Compiled here, in the harness (pyseccomp over Debian's libseccomp2: it resolves syscall names per
architecture, checks the architecture of every call and emits the BPF), and handed to the worker as
bytes, so a job installs it with one prctl and no library of its own. Model code only computes: it may
read, write and map memory, use its own files and threads, and look at the clock. Everything else is
refused, chiefly: starting programs (execve), new processes (fork; clone only for threads),
signals to anything but its own process group, other processes' memory (ptrace, process_vm_*),
pidfds, anonymous shared memory (memfd_create), sockets, namespaces and mounts, bpf, keyrings,
io_uring, userfaultfd, perf events and personality changes, changing modes, owners or times of files,
file locks (flock, fcntl F_SETLK*), POSIX timers and SysV IPC. A refused call fails with EPERM
("Operation not permitted"); a call of another architecture (int 0x80, x32) kills the job.
"""

from __future__ import annotations

import errno
import functools
import tempfile

ALLOWED = (
    # descriptors and files: which paths exist and may be opened is the mount namespace's and Landlock's say
    "read", "write", "readv", "writev", "pread64", "pwrite64", "preadv", "pwritev", "preadv2", "pwritev2",
    "open", "openat", "close", "close_range", "lseek", "dup", "dup2", "dup3", "pipe", "pipe2",
    "fstat", "stat", "lstat", "newfstatat", "statx", "statfs", "fstatfs", "access", "faccessat", "faccessat2",
    "readlink", "readlinkat", "getdents", "getdents64", "getcwd", "chdir", "fchdir",
    "mkdir", "mkdirat", "rmdir", "unlink", "unlinkat", "rename", "renameat", "renameat2",
    "link", "linkat", "symlink", "symlinkat", "umask", "truncate", "ftruncate", "fsync", "fdatasync",
    "sendfile", "copy_file_range", "getxattr", "lgetxattr", "fgetxattr", "listxattr", "llistxattr", "flistxattr",
    # memory (counted by RLIMIT_AS and the memory cgroup); NUMA hints that BLAS libraries give
    "brk", "mmap", "munmap", "mremap", "mprotect", "madvise", "msync", "mbind", "get_mempolicy", "set_mempolicy",
    # threads, its own signal handling, clocks, interval timers (one per process: no kernel objects to pile up)
    "futex", "set_robust_list", "set_tid_address", "rseq", "sched_yield",
    "rt_sigaction", "rt_sigprocmask", "rt_sigreturn", "rt_sigpending", "rt_sigsuspend", "rt_sigtimedwait",
    "sigaltstack", "clock_gettime", "clock_getres", "clock_nanosleep", "nanosleep", "gettimeofday", "time",
    "getitimer", "setitimer", "alarm", "exit", "exit_group", "wait4", "waitid",
    "select", "pselect6", "poll", "ppoll", "epoll_create", "epoll_create1", "epoll_ctl", "epoll_wait",
    "epoll_pwait", "eventfd", "eventfd2",
    # who and where it is, read only
    "getpid", "gettid", "getppid", "getuid", "geteuid", "getgid", "getegid", "getgroups", "getresuid",
    "getresgid", "getpgrp", "uname", "sysinfo", "getrusage", "times", "getrandom", "getcpu",
)

_CLONE_THREAD = 0x00010000
_CLONE_NAMESPACES = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000
_IOCTLS = (0x5401, 0x5413, 0x541B, 0x5421, 0x5450, 0x5451)  # TCGETS TIOCGWINSZ FIONREAD FIONBIO FIONCLEX FIOCLEX
# fcntl: descriptor flags, status flags, asking about locks (F_GETLK, F_OFD_GETLK), pipe size. Not taking locks
# (F_SETLK[W], F_OFD_SETLK[W]): a descriptor of a host file is enough to lock it, and a host process that
# locks it waits; not F_SETOWN/F_SETSIG (SIGIO to another process).
_FCNTLS = (0, 1, 2, 3, 4, 5, 36, 1030, 1032)

ENOSYS_CALLS = ("clone3",)
"""Refused with ENOSYS instead of EPERM: the C library then falls back to an allowed call (clone)."""

NAMED_REFUSALS = (
    "execve", "execveat", "fork", "vfork", "memfd_create", "memfd_secret", "pidfd_open", "pidfd_send_signal",
    "pidfd_getfd", "ptrace", "process_vm_readv", "process_vm_writev", "process_madvise", "kcmp",
    "tkill", "tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo",
    "mount", "umount2", "unshare", "setns", "pivot_root", "chroot", "fsopen", "fsmount", "fspick", "move_mount",
    "open_tree", "mount_setattr", "open_by_handle_at", "name_to_handle_at",
    "bpf", "keyctl", "add_key", "request_key", "socket", "socketpair", "connect", "bind", "listen", "accept", "accept4",
    "io_uring_setup", "io_uring_enter", "io_uring_register", "io_setup", "userfaultfd", "perf_event_open",
    "personality", "prctl", "seccomp", "setrlimit", "mknod", "mknodat", "setsid", "setpgid", "setpriority",
    "setuid", "setgid", "setreuid", "setregid", "setresuid", "setresgid", "setgroups", "capset",
    "mlock", "mlock2", "mlockall", "mincore", "splice", "tee", "vmsplice", "fanotify_init", "inotify_init1",
    # Owners: a job has no need to; modes and times: see ATTRIBUTE_CALLS.
    "chown", "fchown", "fchownat", "lchown",
    # Kernel objects a job could pile up or use to block the host: locks on any readable file (flock needs
    # no write access), POSIX timers (kernel memory per timer), SysV IPC (outlives the process).
    "flock", "timer_create", "shmget", "msgget", "semget", "mq_open",
)
"""Calls refused by the default action anyway, listed for the reader (and checked by a test)."""

ATTRIBUTE_CALLS = ("chmod", "fchmod", "fchmodat", "fchmodat2", "utime", "utimes", "utimensat", "futimesat")
"""Mode and time changes: allowed under bubblewrap only. Landlock does not govern them, so without a mount
namespace every file the job's uid owns is in reach (a normal user's venv and home; as root, the worker's
scratch directory); there the job directory is read-only anyway, so a job has nothing of its own to change.
Under bubblewrap the host is bound read-only and owned by other uids: only the job's own files on its
tmpfs can change (shutil.copy2 works there)."""


def conditional_rules(pyseccomp) -> list[tuple[str, tuple]]:
    """(syscall, argument conditions) allowed only in the shape model code needs."""
    arg, eq, masked = pyseccomp.Arg, pyseccomp.EQ, pyseccomp.MASKED_EQ
    rules = [
        ("kill", (arg(0, eq, 0),)),  # kill(0, sig): its own process group (a job cannot fork)
        ("getpgid", (arg(0, eq, 0),)), ("getsid", (arg(0, eq, 0),)),
        ("sched_getaffinity", (arg(0, eq, 0),)), ("sched_getparam", (arg(0, eq, 0),)),
        ("sched_getscheduler", (arg(0, eq, 0),)),
        ("prlimit64", (arg(0, eq, 0), arg(2, eq, 0))),  # reading its own limits; never setting them
        ("clone", (arg(0, masked, _CLONE_THREAD | _CLONE_NAMESPACES, _CLONE_THREAD),)),  # threads only
    ]
    rules += [("ioctl", (arg(1, eq, request),)) for request in _IOCTLS]
    rules += [("fcntl", (arg(1, eq, command),)) for command in _FCNTLS]
    return rules


@functools.cache
def _compiled(attributes: bool = False) -> tuple[bytes | None, str | None]:
    try:
        import pyseccomp
    except (ImportError, RuntimeError, OSError) as exc:  # RuntimeError: "Unable to find libseccomp"
        return None, f"the seccomp filter cannot be built ({exc}; Debian: apt-get install libseccomp2, " \
                     "and pip install pyseccomp)"
    try:
        policy = pyseccomp.SyscallFilter(pyseccomp.ERRNO(errno.EPERM))
        policy.set_attr(pyseccomp.Attr.ACT_BADARCH, pyseccomp.KILL_PROCESS)
        # A binary tree of syscall numbers instead of a linear list: fewer instructions per call, and the
        # kernel's per-filter action cache (built when a job loads it) is cheaper to compute.
        policy.set_attr(pyseccomp.Attr.CTL_OPTIMIZE, 2)
        for name in ALLOWED + (ATTRIBUTE_CALLS if attributes else ()):
            _add(pyseccomp, policy, pyseccomp.ALLOW, name)
        for name, conditions in conditional_rules(pyseccomp):
            _add(pyseccomp, policy, pyseccomp.ALLOW, name, *conditions)
        for name in ENOSYS_CALLS:
            _add(pyseccomp, policy, pyseccomp.ERRNO(errno.ENOSYS), name)
        with tempfile.TemporaryFile() as out:
            policy.export_bpf(out)
            out.seek(0)
            program = out.read()
    except OSError as exc:
        return None, f"the seccomp filter could not be compiled: {exc}"
    if not program or len(program) % 8:
        return None, f"libseccomp produced a malformed filter ({len(program)} bytes)"
    return program, None


def _add(pyseccomp, policy, action: int, name: str, *conditions) -> None:
    number = pyseccomp.resolve_syscall(pyseccomp.Arch.NATIVE, name)
    if number < 0:  # not a system call of this architecture (e.g. open, fork on arm64)
        return
    policy.add_rule(action, number, *conditions)


def filter_program(kind: str = "kernel") -> bytes:
    """The compiled filter of a kind of worker ('bwrap' also allows ATTRIBUTE_CALLS): struct sock_filter[] as
    raw bytes (8 per instruction). Raises RuntimeError."""
    program, problem = _compiled(kind == "bwrap")
    if program is None:
        raise RuntimeError(problem)
    return program


def seccomp_problem() -> str | None:
    """None when the filter can be built here, else why not and how to get it."""
    return _compiled()[1]


@functools.cache
def seccomp_syscall_number() -> int:
    """The number of seccomp(2) on this architecture (a job loads its filter with it)."""
    import pyseccomp

    return pyseccomp.resolve_syscall(pyseccomp.Arch.NATIVE, "seccomp")
