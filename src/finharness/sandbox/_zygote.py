"""The fork server that runs inside the sandbox: one warm Python per pool slot.

This file is executed *inside* the isolation (bubblewrap or the rlimit
fallback) as a script, so it imports nothing from finharness: only the
standard library, numpy and pandas. The parent imports it too, for the wire
format (`write_frame` / `read_frame`) and the tag of encoded tables, so that
both sides share one definition.

Life of a worker:

1. start, import its preload list once (numpy and pandas for a
   "scientific" worker, only small stdlib modules for a "plain" one), make itself
   non-dumpable (a job process of the same uid can then neither ptrace it nor
   read its memory) and a child subreaper (orphans of a job come back to it),
   and close its own file system with Landlock (when asked): every job it
   forks is born inside that domain;
2. announce itself with a ``ready`` frame;
3. keep one child forked ahead of time, waiting for its job on a pipe. Before
   it reads its job, that child enters its own process group and the fresh
   private job directory and loads the seccomp filter (compiled by the harness). For every job frame, set that
   child's resource limits (prlimit) and hand it the job; it installs the audit
   guard (when asked), runs the program and writes one framed JSON result; answer
   as soon as the result is in, or when the child dies, or at the wall limit;
4. then clean up: kill every process the job left behind (all processes of
   the pid namespace when the worker has its own, else the job's process
   group and the orphans it inherited), empty the scratch directory whatever
   modes, depths and links the job left there (iteratively, `remove_contents`),
   fork the next child, and say ``{"clean": true}``; when a process or a file
   survived, or the cleanup itself failed, say ``{"clean": false}`` and exit:
   the harness starts a fresh worker in the slot.

The zygote itself never runs model code, so a job cannot change what the next
job sees; a job can only kill the zygote (same uid), which the parent sees as
a lost worker and replaces.
"""

from __future__ import annotations

import errno
import io
import json
import math
import os
import resource
import select
import signal
import stat
import struct
import sys
import time
from contextlib import suppress

FRAME_HEADER = struct.Struct(">I")
MAX_FRAME_BYTES = 256 * 2**20
TABLE_TAG = "__finharness_table__"
"""Key of an encoded pandas DataFrame/Series among the job inputs (see `decode_value`)."""

PROGRAM_FILENAME = "<program>"
RESULT_STATUSES = ("ok", "timeout", "memory", "error")

# Events refused outright by the audit guard: network, new processes, signals
# to other processes, foreign code, and raising our own limits.
_BLOCKED_EVENTS = frozenset({
    "subprocess.Popen", "os.system", "os.exec", "os.posix_spawn", "os.spawn",
    "os.fork", "os.forkpty", "os.kill", "os.killpg", "signal.pthread_kill",
    "cpython.PyInterpreterState_New",  # a sub-interpreter runs without this interpreter's audit hooks
    "resource.setrlimit", "resource.prlimit", "fcntl.ioctl", "pty.spawn",
    "gc.get_objects", "gc.get_referrers", "gc.get_referents",
    "sys._current_frames", "webbrowser.open", "os.startfile",
})
_BLOCKED_PREFIXES = ("socket.", "ctypes.", "_ssl.", "urllib.", "http.", "ftplib.",
                     "smtplib.", "telnetlib.", "poplib.", "imaplib.", "nntplib.")
# Modules a job may not import fresh (the zygote drops them before the guard).
_BLOCKED_MODULES = ("_posixsubprocess", "_ctypes", "ctypes", "_socket", "socket",
                    "subprocess", "multiprocessing", "pty", "_xxsubinterpreters", "_xxinterpchannels",
                    "_interpreters", "_interpchannels", "_interpqueues")
# Events whose string arguments are paths that get created, changed or removed.
_WRITE_PATH_EVENTS = frozenset({
    "os.mkdir", "os.rmdir", "os.remove", "os.rename", "os.link", "os.symlink",
    "os.truncate", "os.chmod", "os.chown", "os.utime", "os.chflags", "os.lchflags",
    "os.setxattr", "os.removexattr", "os.mkfifo", "os.mknod", "shutil.rmtree",
    "shutil.copyfile", "shutil.copymode", "shutil.copystat", "shutil.move",
    "shutil.chown", "shutil.make_archive", "shutil.unpack_archive",
})
# Mode, owner and time changes also take a descriptor (os.fchmod(fd) is "os.chmod" with an int) or a dir_fd
# (the last argument): a descriptor of any readable file would otherwise reach past every path check.
_DESCRIPTOR_EVENTS = frozenset({"os.chmod", "os.chown", "os.utime"})
# Locks on a file a job may read make a host process that locks it wait (flock needs no write access).
_LOCK_EVENTS = frozenset({"fcntl.flock", "fcntl.lockf"})
_LOCK_COMMANDS = frozenset({6, 7, 37, 38})  # F_SETLK, F_SETLKW, F_OFD_SETLK, F_OFD_SETLKW
_LIST_EVENTS = frozenset({"os.listdir", "os.scandir"})
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC
_DEVICES_READABLE = ("/dev/null", "/dev/zero", "/dev/urandom", "/dev/random")


# --------------------------------------------------------------------------- wire format

def write_frame(fd: int, message: dict) -> None:
    """Send one length-prefixed JSON message (NaN/inf allowed, as Python's json does)."""
    data = json.dumps(message, allow_nan=True).encode("utf-8")
    view = memoryview(FRAME_HEADER.pack(len(data)) + data)
    while view:
        view = view[os.write(fd, view):]


def _read_exact(fd: int, size: int) -> bytes | None:
    chunks, left = [], size
    while left:
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def read_frame(fd: int) -> dict | None:
    """Receive one message; None at end of stream. Raises ValueError on a malformed frame."""
    header = _read_exact(fd, FRAME_HEADER.size)
    if header is None:
        return None
    (size,) = FRAME_HEADER.unpack(header)
    if size > MAX_FRAME_BYTES:
        raise ValueError(f"frame of {size} bytes exceeds {MAX_FRAME_BYTES}")
    body = _read_exact(fd, size)
    if body is None:
        return None
    return json.loads(body)


# --------------------------------------------------------------------------- values

def decode_value(value):
    """Rebuild a job input: tagged tables become pandas objects, the rest is plain JSON."""
    if isinstance(value, dict) and TABLE_TAG in value:
        import pandas as pd

        table = value[TABLE_TAG]
        if table["kind"] == "series":
            return pd.Series(table["data"], index=table["index"], name=table.get("name"))
        return pd.DataFrame(table["data"], index=table["index"], columns=table["columns"])
    if isinstance(value, list):
        return [decode_value(item) for item in value]
    if isinstance(value, dict):
        return {key: decode_value(item) for key, item in value.items()}
    return value


def to_jsonable(value, _depth: int = 0):
    """What a program produced, as JSON: every number a float, containers as lists/dicts.

    Unknown objects become their ``repr`` so that a result never fails to travel.
    """
    if _depth > 50:
        return repr(value)
    if value is None or isinstance(value, (bool, str)):
        return value
    # Only when loaded: a value cannot be a numpy/pandas object otherwise, and
    # importing them here would cost a plain worker a second per job.
    np, pd = sys.modules.get("numpy"), sys.modules.get("pandas")
    if np is not None:
        if isinstance(value, np.bool_):
            return bool(value)
        if pd is not None and isinstance(value, pd.DataFrame):
            return [to_jsonable(row, _depth + 1) for row in value.to_dict(orient="records")]
        if isinstance(value, np.ndarray) or pd is not None and isinstance(value, (pd.Series, pd.Index)):
            return [to_jsonable(item, _depth + 1) for item in value.tolist()]
        if isinstance(value, np.generic):
            value = value.item()
            if isinstance(value, (bool, str)) or value is None:
                return value
    if isinstance(value, complex):
        return repr(value)
    if isinstance(value, (int, float)) or hasattr(value, "__float__") and not isinstance(value, (bytes,)):
        try:
            return float(value)
        except (OverflowError, TypeError, ValueError):
            return repr(value)
    if isinstance(value, dict):
        return {str(key): to_jsonable(item, _depth + 1) for key, item in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        items = sorted(value, key=repr) if isinstance(value, (set, frozenset)) else value
        return [to_jsonable(item, _depth + 1) for item in items]
    return repr(value)


# --------------------------------------------------------------------------- the job process

class SandboxViolation(PermissionError):
    """Raised inside a job when the audit guard refuses an operation."""


class _CappedText(io.TextIOBase):
    """sys.stdout of a job: keeps the first `cap` characters, counts the rest."""

    def __init__(self, cap: int):
        self._cap, self._parts, self._kept, self.dropped = cap, [], 0, 0

    def writable(self) -> bool:
        return True

    def write(self, text) -> int:
        text = str(text)
        room = self._cap - self._kept
        if room > 0:
            self._parts.append(text[:room])
            self._kept += min(room, len(text))
        self.dropped += max(0, len(text) - max(room, 0))
        return len(text)

    def getvalue(self) -> str:
        tail = f"\n[... {self.dropped} more characters dropped]" if self.dropped else ""
        return "".join(self._parts) + tail


def _install_guard(job_dir: str, read_roots) -> None:
    """Refuse, by audit hook, what a program must never do even if the OS layer would allow it.

    Writes (and creating, renaming, removing) are allowed inside `job_dir`
    only; reads inside `job_dir`, `read_roots` (the Python installation,
    timezone data) and a few devices; mode, owner and time changes (by path or
    descriptor) inside `job_dir` only; file locks nowhere. Relative paths are resolved against the
    current directory at the time of the call, symlinks followed. Everything the
    hook uses is bound here, so a program that patches this module (reachable as
    __main__ through a frame), the builtins or os cannot change its rules; it can
    still fool the path resolution (posixpath's helpers), which is why the kernel
    layers, not this guard, are the boundary.
    """
    write_roots = (os.path.realpath(job_dir),)
    readable = write_roots + tuple(os.path.realpath(root) for root in read_roots)
    realpath, isdir, fspath, fsdecode = os.path.realpath, os.path.isdir, os.fspath, os.fsdecode
    blocked_events, blocked_prefixes, blocked_modules = _BLOCKED_EVENTS, _BLOCKED_PREFIXES, _BLOCKED_MODULES
    write_path_events, list_events, write_flags = _WRITE_PATH_EVENTS, _LIST_EVENTS, _WRITE_FLAGS
    descriptor_events, lock_events, lock_commands = _DESCRIPTOR_EVENTS, _LOCK_EVENTS, _LOCK_COMMANDS
    readlink, join = os.readlink, os.path.join
    devices, violation, is_a, text, path_types = _DEVICES_READABLE, SandboxViolation, isinstance, str, (
        str, bytes, os.PathLike)

    def inside(path, roots) -> bool:
        for root in roots:
            if path == root or path.startswith(root.rstrip("/") + "/"):
                return True
        return False

    def as_path(arg):
        return realpath(fsdecode(fspath(arg)))

    def descriptor_path(fd: int) -> str:
        try:
            return readlink(f"/proc/self/fd/{fd}")
        except OSError:  # no /proc, or not open: nothing to check it against
            raise violation(f"sandbox: changing descriptor {fd} is not allowed") from None

    def guard(event: str, args: tuple) -> None:
        if event in blocked_events or event.startswith(blocked_prefixes):
            raise violation(f"sandbox: {event} is not allowed")
        if event == "import" and args and args[0] in blocked_modules:
            raise violation(f"sandbox: importing {args[0]} is not allowed")
        if event in lock_events or event == "fcntl.fcntl" and len(args) > 1 and args[1] in lock_commands:
            raise violation(f"sandbox: {event} (file locks) is not allowed")
        if event == "open":
            path, mode, flags = args
            if is_a(path, int):
                return
            target = as_path(path)
            writing = (mode is not None and ("w" in text(mode) or "a" in text(mode) or "x" in text(mode) or
                                             "+" in text(mode))) or (is_a(flags, int) and flags & write_flags)
            if writing:
                if not inside(target, write_roots):
                    raise violation(f"sandbox: writing {target} is not allowed")
            elif not (inside(target, readable) or target in devices) or (
                    isdir(target) and not inside(target, write_roots)):
                # Audit events do not show dir_fd, so a descriptor of an outside
                # directory would let dir_fd-relative calls escape every path
                # check: only the job directory's own may be opened.
                raise violation(f"sandbox: reading {target} is not allowed")
        elif event in write_path_events:
            if event in descriptor_events and args:
                path, dir_fd = args[0], args[-1]
                if is_a(path, int):
                    path = descriptor_path(path)
                elif is_a(dir_fd, int) and dir_fd >= 0 and is_a(path, path_types):  # -1: no dir_fd
                    path = join(descriptor_path(dir_fd), fsdecode(fspath(path)))
                if not is_a(path, path_types) or not inside(as_path(path), write_roots):
                    raise violation(f"sandbox: {event} on {path} is not allowed")
            for arg in args:
                if is_a(arg, path_types) and not inside(as_path(arg), write_roots):
                    raise violation(f"sandbox: {event} on {fsdecode(fspath(arg))} is not allowed")
        elif (event in list_events and args and is_a(args[0], path_types)
              and not inside(as_path(args[0]), readable)):
            raise violation(f"sandbox: listing {fsdecode(fspath(args[0]))} is not allowed")

    # Forget the preloaded dangerous modules so that a fresh import goes through
    # the guard, and cut subprocess's private, unaudited fork_exec (other
    # modules, e.g. pandas, keep references to the subprocess module).
    subprocess_module = sys.modules.get("subprocess")
    if subprocess_module is not None:
        subprocess_module._fork_exec = None
    for name in _BLOCKED_MODULES:
        sys.modules.pop(name, None)
    sys.addaudithook(guard)


def _program_line(traceback) -> int | None:
    line = None
    while traceback is not None:  # walking frames reads no source files (unlike traceback.extract_tb)
        if traceback.tb_frame.f_code.co_filename == PROGRAM_FILENAME:
            line = traceback.tb_lineno
        traceback = traceback.tb_next
    return line


def _describe(exc: BaseException) -> dict:
    status = "memory" if isinstance(exc, MemoryError) else "error"
    if isinstance(exc, SyntaxError):
        message, line = exc.msg, exc.lineno
    else:
        message, line = str(exc), _program_line(exc.__traceback__)
    if line is not None:
        message = f"{message} [line {line}]"
    return {"status": status, "error_class": type(exc).__name__, "message": message[:2000]}


def _run_program(job: dict, namespace: dict) -> dict:
    """Execute the job's program in `namespace`; return the fields of the result."""
    import ast

    code, mode = job["code"], job["mode"]
    tree = ast.parse(code, filename=PROGRAM_FILENAME, mode="exec")
    if mode == "last_expression":
        # As the official BizBench pipeline: pop the last statement, run the
        # rest, then evaluate the popped statement's `value` expression (for
        # `x = e` that is `e`, evaluated again; for `x += e`, just `e`).
        last = tree.body.pop() if tree.body else None
        value_node = getattr(last, "value", None)
        if not isinstance(value_node, ast.expr):
            kind = type(last).__name__ if last is not None else "empty program"
            return {"status": "error", "error_class": "NoLastExpression",
                    "message": f"the last statement ({kind}) has no value to return"}
        exec(compile(tree, PROGRAM_FILENAME, "exec"), namespace, namespace)
        expression = ast.Expression(value_node)
        return {"status": "ok", "value": eval(compile(expression, PROGRAM_FILENAME, "eval"), namespace, namespace)}
    exec(compile(tree, PROGRAM_FILENAME, "exec"), namespace, namespace)
    if mode == "answer_variable":
        if "answer" not in namespace:
            return {"status": "error", "error_class": "NoAnswer",
                    "message": "the program did not set the variable `answer`"}
        return {"status": "ok", "value": namespace["answer"]}
    # mode == "call": one job evaluates the completed function on every argument list.
    name = job["call"]["name"]
    function = namespace.get(name)
    if not callable(function):
        return {"status": "error", "error_class": "NoFunction",
                "message": f"the program does not define a function named {name!r}"}
    values, errors = [], []
    for arguments in job["call"]["args"]:
        try:
            arguments = decode_value(arguments)
            outcome = function(**arguments) if isinstance(arguments, dict) else function(*arguments)
            values.append(to_jsonable(outcome))
            errors.append(None)
        except Exception as exc:  # one failing input must not hide the others
            values.append(None)
            errors.append(f"{type(exc).__name__}: {exc}"[:500])
    return {"status": "ok", "value": values, "call_errors": errors}


def _confine(job_dir: str) -> None:
    """Before the job is read (off the critical path): its own process group, death with the zygote, the
    job directory as working directory, and the system calls filtered (seccomp). The file system is closed
    already (the zygote's Landlock domain, inherited); the zygote sets the resource limits when the job comes."""
    os.setpgid(0, 0)
    _set_parent_death_signal()
    os.chdir(job_dir)
    if _kernel is not None:
        _kernel.filter_calls()  # last: from here on, no limit can be raised and no program started


def _limit(pid: int, limits: dict, nproc_uncounted: int = 0) -> None:
    """Set a waiting job child's resource limits from the zygote (the child's filter forbids setting them).
    `nproc_uncounted`: tasks of the worker's uid that are not the worker's (bubblewrap's init, as a normal
    user), so that `nproc` means the same under every kind."""
    mb = 2**20
    cpu = max(1, math.ceil(limits["cpu_s"]))
    # CPU: SIGXCPU at the soft limit, SIGKILL one second later if the program ignores it.
    for which, value in ((resource.RLIMIT_CPU, (cpu, cpu + 1)), (resource.RLIMIT_AS, (limits["memory_mb"] * mb,) * 2),
                         (resource.RLIMIT_FSIZE, (limits["file_mb"] * mb,) * 2),
                         (resource.RLIMIT_NPROC, (limits["nproc"] + nproc_uncounted,) * 2),
                         (resource.RLIMIT_NOFILE, (_JOB_OPEN_FILES,) * 2), (resource.RLIMIT_CORE, (0, 0)),
                         (resource.RLIMIT_SIGPENDING, (_JOB_PENDING_SIGNALS,) * 2)):
        resource.prlimit(pid, which, value)


def _job_child(job: dict, result_fd: int, config: dict) -> None:
    """Runs in the forked child, confined and limited before the job arrived; never returns (os._exit)."""
    limits = job["limits"]
    job_dir = os.getcwd()
    captured = sys.stdout = _CappedText(limits["stdout_chars"])
    sys.stderr = _CappedText(0)
    sys.stdin = io.StringIO("")
    dumps = json.dumps  # bound now: the program may patch the json module
    # The program is __main__: `import __main__` gives its own namespace, not this module.
    program = sys.modules["__main__"] = type(sys)("__main__")
    namespace = program.__dict__
    try:
        namespace.update({name: decode_value(value) for name, value in (job.get("inputs") or {}).items()})
        if job["audit"]:
            _install_guard(job_dir, config["read_roots"])
        result = _run_program(job, namespace)
        if "value" in result and job["mode"] != "call":
            result["value"] = to_jsonable(result["value"])
    except BaseException as exc:  # SystemExit, KeyboardInterrupt included: all are the program's failures
        result = _describe(exc)
    try:
        result["stdout"] = captured.getvalue()
        payload = dumps(result, allow_nan=True).encode("utf-8")
    except BaseException as exc:
        payload = dumps({"status": "error", "error_class": "UnserializableResult",
                         "message": f"{type(exc).__name__}: {exc}"[:500]}).encode("utf-8")
    view = memoryview(FRAME_HEADER.pack(len(payload)) + payload)
    while view:
        view = view[os.write(result_fd, view):]
    os._exit(0)


# --------------------------------------------------------------------------- kernel layers

_PR_SET_PDEATHSIG, _PR_SET_DUMPABLE, _PR_SET_CHILD_SUBREAPER, _PR_SET_NO_NEW_PRIVS = 1, 4, 36, 38
_SECCOMP_SET_MODE_FILTER, _SECCOMP_FILTER_FLAG_SPEC_ALLOW = 1, 1 << 2
_JOB_OPEN_FILES = 64
"""RLIMIT_NOFILE of a job: a program needs a handful of descriptors, and each open file is a way to hold
memory or disk that the other limits do not count."""
_JOB_PENDING_SIGNALS = 64
"""RLIMIT_SIGPENDING of a job: queued signals, and POSIX timers (each holds a queued signal), are kernel
memory; a program needs none (the seccomp filter refuses timer_create; this bounds the bare kind)."""
_SYS_LANDLOCK_CREATE_RULESET, _SYS_LANDLOCK_ADD_RULE, _SYS_LANDLOCK_RESTRICT_SELF = 444, 445, 446
_LANDLOCK_CREATE_RULESET_VERSION, _LANDLOCK_RULE_PATH_BENEATH = 1, 1
# Landlock file-system rights (include/uapi/linux/landlock.h), by the ABI version that added them.
_FS_EXECUTE, _FS_WRITE_FILE, _FS_READ_FILE, _FS_READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
_FS_REMOVE_DIR, _FS_REMOVE_FILE, _FS_MAKE_DIR, _FS_MAKE_REG = 1 << 4, 1 << 5, 1 << 7, 1 << 8
_FS_ABI1 = (1 << 13) - 1
_FS_REFER, _FS_TRUNCATE, _FS_IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
_NET_BIND_TCP, _NET_CONNECT_TCP = 1 << 0, 1 << 1  # ABI 4
_SCOPE_ABSTRACT_UNIX_SOCKET, _SCOPE_SIGNAL = 1 << 0, 1 << 1  # ABI 6
_DEVICES_WRITABLE = ("/dev/null",)
_libc = None
"""The C library, loaded by the zygote before any job runs (jobs may not load it)."""
_kernel = None
"""The zygote's `_KernelLayers` when the job is to be confined by Landlock and seccomp."""


def landlock_abi() -> int:
    """The Landlock ABI version of the running kernel, 0 when it has none (or it is disabled)."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    version = libc.syscall(_SYS_LANDLOCK_CREATE_RULESET, None, ctypes.c_size_t(0),
                           ctypes.c_uint32(_LANDLOCK_CREATE_RULESET_VERSION))
    return max(int(version), 0)


def landlock_rights(abi: int) -> tuple[int, int, int]:
    """(file-system rights, network rights, scopes) that an ABI version can handle."""
    fs = _FS_ABI1 | (_FS_REFER if abi >= 2 else 0) | (_FS_TRUNCATE if abi >= 3 else 0) | (
        _FS_IOCTL_DEV if abi >= 5 else 0)
    net = _NET_BIND_TCP | _NET_CONNECT_TCP if abi >= 4 else 0
    scopes = _SCOPE_ABSTRACT_UNIX_SOCKET | _SCOPE_SIGNAL if abi >= 6 else 0
    return fs, net, scopes


class _KernelLayers:
    """Landlock and seccomp for the zygote's jobs. The zygote builds the ruleset and enforces it on itself
    before its first fork (it needs nothing outside: its scratch directory, its pipes, its children), so
    every job is born in that domain; each job child then loads the harness's seccomp filter, which the
    zygote (it forks and signals) cannot have."""

    def __init__(self, libc, landlock: dict | None, seccomp_hex: str | None, seccomp_nr: int | None = None):
        import ctypes

        self._ctypes, self._libc, self._seccomp_nr = ctypes, libc, seccomp_nr
        self.ruleset_fd = -1
        self.landlock_abi = 0
        if landlock is not None:
            self.landlock_abi = landlock["abi"]
            self.ruleset_fd = self._ruleset(landlock)
        self._fprog = None
        if seccomp_hex is not None:
            program = bytes.fromhex(seccomp_hex)

            class SockFprog(ctypes.Structure):
                _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

            self._filter_buffer = ctypes.create_string_buffer(program, len(program))
            self._fprog = SockFprog(len(program) // 8, ctypes.addressof(self._filter_buffer))

    def _call(self, number: int, *args) -> int:
        result = self._libc.syscall(number, *args)
        if result < 0:
            code = self._ctypes.get_errno()
            raise OSError(code, f"{os.strerror(code)} (system call {number})")
        return result

    def _ruleset(self, landlock: dict) -> int:
        ctypes = self._ctypes

        class RulesetAttr(ctypes.Structure):
            _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                        ("scoped", ctypes.c_uint64)]

        class PathBeneathAttr(ctypes.Structure):
            _pack_ = 1
            _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]

        fs, net, scopes = landlock_rights(landlock["abi"])
        attr = RulesetAttr(fs, net, scopes)
        size = ctypes.sizeof(attr) if landlock["abi"] >= 6 else 16 if landlock["abi"] >= 4 else 8
        ruleset = self._call(_SYS_LANDLOCK_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size),
                             ctypes.c_uint32(0))
        read_file = _FS_READ_FILE
        read_dir = _FS_READ_FILE | _FS_READ_DIR
        write_dir = read_dir | _FS_WRITE_FILE | _FS_REMOVE_DIR | _FS_REMOVE_FILE | _FS_MAKE_DIR | _FS_MAKE_REG | (
            fs & (_FS_REFER | _FS_TRUNCATE))
        rules = [(path, read_dir, read_file) for path in landlock["read"]]
        rules += [(path, write_dir, read_file | _FS_WRITE_FILE | (fs & _FS_TRUNCATE)) for path in landlock["write"]]
        rules += [(path, read_dir, read_file | _FS_WRITE_FILE) for path in _DEVICES_WRITABLE]
        for path, on_directory, on_file in rules:
            try:
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue  # not on this machine (e.g. /lib32)
            try:
                beneath = PathBeneathAttr(on_directory if os.path.isdir(path) else on_file, fd)
                self._call(_SYS_LANDLOCK_ADD_RULE, ruleset, _LANDLOCK_RULE_PATH_BENEATH, ctypes.byref(beneath),
                           ctypes.c_uint32(0))
            finally:
                os.close(fd)
        os.set_inheritable(ruleset, False)
        return ruleset

    def check(self) -> None:
        """Confine a throw-away child the way every job will be: a kernel that refuses a layer fails the
        worker's start, not each of its jobs."""
        pid = os.fork()
        if pid == 0:
            try:
                self.restrict_files()
                self.filter_calls()
            except BaseException:
                os._exit(1)
            os._exit(0)
        _, status = os.waitpid(pid, 0)
        if status != 0:
            raise OSError(f"the kernel refused a layer (Landlock ABI {self.landlock_abi}, seccomp filter): "
                          f"a confined child exited with status {status}")

    def restrict_files(self) -> None:
        """Enforce the ruleset on this process (the zygote, before its first job: every job inherits the
        domain, at no cost per job) and drop the descriptor."""
        if self.ruleset_fd < 0:
            return
        _prctl(_PR_SET_NO_NEW_PRIVS, 1)
        self._call(_SYS_LANDLOCK_RESTRICT_SELF, self.ruleset_fd, self._ctypes.c_uint32(0))
        os.close(self.ruleset_fd)
        self.ruleset_fd = -1

    def filter_calls(self) -> None:
        """Load the seccomp filter on this process (a job child); it cannot be removed.

        SPEC_ALLOW: without it the kernel also turns on its speculative-store-bypass mitigation for the
        job, a cost on everything the job runs; that mitigation shields a process's memory from code in
        the same process, and a job's memory holds nothing but its own program and inputs."""
        if self._fprog is None:
            return
        _prctl(_PR_SET_NO_NEW_PRIVS, 1)
        program = self._ctypes.byref(self._fprog)
        for flags in (_SECCOMP_FILTER_FLAG_SPEC_ALLOW, 0):  # the flag is Linux 4.17+
            if self._libc.syscall(self._seccomp_nr, _SECCOMP_SET_MODE_FILTER, flags, program) == 0:
                return
            code = self._ctypes.get_errno()
            if code != errno.EINVAL:
                break
        raise OSError(code, f"seccomp filter refused by the kernel: {os.strerror(code)}")


# --------------------------------------------------------------------------- the zygote


def _prctl(option: int, value: int) -> None:
    if _libc.prctl(option, value, 0, 0, 0) != 0:
        raise OSError(f"prctl({option}, {value}) failed")


def _set_parent_death_signal() -> None:
    """A job dies with the zygote, so that a wall limit can never be outlived."""
    if _libc is not None:
        _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def _direct_children() -> list[int]:
    """The zygote's children (orphans of a job it inherited as subreaper). Under Landlock /proc is closed,
    and then there are none to find: a job's filter lets it start no process."""
    try:
        return _children_from_proc()
    except OSError:
        return []


def _children_from_proc() -> list[int]:
    own = f"/proc/self/task/{os.getpid()}/children"  # the zygote is single-threaded
    if os.path.exists(own):  # CONFIG_PROC_CHILDREN: one read instead of a /proc scan
        with open(own) as listing:
            return [int(pid) for pid in listing.read().split()]
    children = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                with open(f"/proc/{entry.name}/stat") as stat_file:
                    fields = stat_file.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == os.getpid():
                children.append(int(entry.name))
    return children


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _sweep(child_pid: int, pid_namespace: bool) -> bool:
    """Kill whatever the job left running; True when nothing is left."""
    deadline = time.monotonic() + 2.0
    while time.monotonic() < deadline:
        try:
            if pid_namespace:
                # Every process of this uid in our own pid namespace except
                # ourselves: escapes by setsid or double fork included.
                os.kill(-1, signal.SIGKILL)
            else:
                # No namespace: the job's group, then our direct children (as
                # subreaper we inherit any orphan that left the group).
                os.killpg(child_pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        if not pid_namespace:
            for pid in _direct_children():
                with suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        while True:  # reap: as subreaper we also inherit the job's orphans
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return True
            if pid == 0:
                break
        time.sleep(0.001)
    return False


_DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _open_directory(name: str, parent_fd: int | None) -> int:
    """Open a subdirectory the job made, whatever mode it gave it (mkdir's mode needs no chmod: 0300 or 0000
    leave its owner unable to list it). Never follows a symlink."""
    try:
        return os.open(name, _DIRECTORY, dir_fd=parent_fd)
    except PermissionError:
        pass
    # Its owner (this uid, or root) may reset the mode; through an O_PATH descriptor of the entry itself, so
    # that nothing swapped in under the name is changed instead.
    handle = os.open(name, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=parent_fd)
    try:
        os.chmod(f"/proc/self/fd/{handle}", 0o700)
    except FileNotFoundError:  # no /proc mounted: by name (the job's processes are gone by now)
        os.chmod(name, 0o700, dir_fd=parent_fd)
    finally:
        os.close(handle)
    return os.open(name, _DIRECTORY, dir_fd=parent_fd)


def _unlink_entries(fd: int, where: str, left: list) -> list[str]:
    """Remove every non-directory in the directory `fd`; return the names of its subdirectories."""
    if os.fstat(fd).st_mode & 0o700 != 0o700:  # listed but not writable (0500): entries cannot be unlinked
        with suppress(OSError):  # not its owner: what cannot be unlinked is named below
            os.fchmod(fd, 0o700)
    with os.scandir(fd) as listing:
        entries = [(entry.name, entry.is_dir(follow_symlinks=False)) for entry in listing]
    subdirectories = []
    for name, is_directory in entries:
        if is_directory:
            subdirectories.append(name)
            continue
        try:
            os.unlink(name, dir_fd=fd)  # a symlink is removed, never followed
        except FileNotFoundError:
            pass
        except OSError:
            left.append(f"{where}{name}")
    return subdirectories


def remove_contents(top: str) -> list[str]:
    """Empty `top` (not `top` itself) whatever modes, depth or links were left in it, and return the relative
    paths of what remains (what cannot be removed, mount points: never entered, and their parents).

    Iterative, with one open directory at a time and names relative to it: no recursion limit, no PATH_MAX,
    no descriptor per level (a tree 100,000 deep costs a list of names)."""
    left: list[str] = []
    fd = _open_directory(top, None)
    try:
        device = os.fstat(fd).st_dev
        names: list[str] = []  # from top down to the directory `fd`
        pending = [_unlink_entries(fd, "", left)]  # per level: subdirectories still to empty
        while True:
            where = "".join(f"{name}/" for name in names)
            if pending[-1]:
                name = pending[-1].pop()
                try:
                    child = _open_directory(name, fd)
                except FileNotFoundError:
                    continue
                except OSError:
                    left.append(f"{where}{name}")
                    continue
                if os.fstat(child).st_dev != device:  # a mount point (bubblewrap's bind of a Python under /tmp)
                    os.close(child)
                    left.append(f"{where}{name}")
                    continue
                os.close(fd)
                fd = child
                names.append(name)
                pending.append(_unlink_entries(fd, f"{where}{name}/", left))
                continue
            pending.pop()
            if not names:
                return left
            # Back up one level: nothing moves under us, every process of the job is gone.
            parent = os.open("..", _DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = parent
            name = names.pop()
            try:
                os.rmdir(name, dir_fd=fd)
            except FileNotFoundError:
                pass
            except OSError:
                left.append(f"{where[:-len(name) - 1]}{name}")
    finally:
        os.close(fd)


def _classify_exit(status: int, rusage, limits: dict, *, killed_for_wall: bool) -> dict:
    if killed_for_wall:
        return {"status": "timeout", "error_class": "WallTimeout",
                "message": f"the program ran longer than {limits['wall_s']} s (wall clock)"}
    cpu_used = rusage.ru_utime + rusage.ru_stime
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        if number == signal.SIGXCPU or (number == signal.SIGKILL and cpu_used >= math.ceil(limits["cpu_s"])):
            return {"status": "timeout", "error_class": "CPUTimeLimit",
                    "message": f"the program used more than {limits['cpu_s']} s of CPU time"}
        if number == signal.SIGXFSZ:
            return {"status": "error", "error_class": "FileSizeLimit",
                    "message": f"the program wrote a file larger than {limits['file_mb']} MB"}
        return {"status": "error", "error_class": "Crashed",
                "message": f"the program was killed by {_signal_name(number)}"
                           + (" (stack overflow from deep recursion?)" if number == signal.SIGSEGV else "")}
    return {"status": "error", "error_class": "ExitedWithoutResult",
            "message": f"the program exited with status {os.WEXITSTATUS(status)} before returning a value"}


def _validated(raw: bytes) -> dict | None:
    """The child's JSON result, or None if it is not one (a program may write to the pipe itself)."""
    try:
        result = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(result, dict) or result.get("status") not in RESULT_STATUSES:
        return None
    allowed = {"status", "value", "error_class", "message", "stdout", "call_errors"}
    return {key: value for key, value in result.items() if key in allowed}


class _Prepared:
    """A child forked ahead of time, waiting for its job (the fork's cost is paid between jobs)."""

    def __init__(self, config: dict):
        job_dir = os.path.join(config["scratch_dir"], "job")
        os.makedirs(job_dir, 0o700, exist_ok=True)  # kept where the scratch directory is read-only
        job_read, self.job_write = os.pipe()
        self.result_read, result_write = os.pipe()
        self.pid = os.fork()
        if self.pid == 0:
            try:
                for fd in (self.job_write, self.result_read, *config["protocol_fds"]):
                    os.close(fd)
                try:
                    _confine(job_dir)
                except BaseException as exc:  # fail closed: the job is answered with why, never run
                    if read_frame(job_read) is not None:
                        write_frame(result_write, {"status": "error", "error_class": "SandboxError",
                                                   "message": f"the job could not be confined: {exc}"})
                    os._exit(70)
                job = read_frame(job_read)
                if job is not None:
                    _job_child(job, result_write, config)
            finally:
                os._exit(70)
        os.close(job_read)
        os.close(result_write)
        self.pidfd = os.pidfd_open(self.pid)
        self.reaped = False

    def reap(self, block: bool = True):
        """(status, rusage) once the child has exited."""
        _, status, rusage = os.wait4(self.pid, 0 if block else os.WNOHANG)
        self.reaped = True
        return status, rusage

    def close(self) -> None:
        if not self.reaped:
            with suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)
            self.reap()
        for fd in (self.job_write, self.result_read, self.pidfd):
            with suppress(OSError):
                os.close(fd)


def run_job(job: dict, child: _Prepared, config: dict) -> dict:
    """Hand `job` to the waiting child, then wait for its framed result, its exit or the wall limit."""
    limits = job["limits"]
    started = time.monotonic()
    with suppress(BrokenPipeError, ProcessLookupError):  # the child is gone: its exit status tells why
        _limit(child.pid, limits, config.get("nproc_uncounted", 0))
        write_frame(child.job_write, job)
    os.close(child.job_write)
    child.job_write = -1
    deadline = started + limits["wall_s"]
    buffer, watched = b"", [child.result_read, child.pidfd]
    header = FRAME_HEADER.size
    answer = None
    while answer is None:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            os.kill(child.pid, signal.SIGKILL)
            status, rusage = child.reap()
            answer = _classify_exit(status, rusage, limits, killed_for_wall=True)
            break
        ready, _, _ = select.select(watched, [], [], remaining)
        if child.result_read in ready:
            chunk = os.read(child.result_read, 1 << 20)
            if chunk:
                buffer += chunk
                if len(buffer) >= header:
                    (size,) = FRAME_HEADER.unpack(buffer[:header])
                    if size > config["max_result_bytes"]:
                        answer = {"status": "error", "error_class": "ResultTooLarge",
                                  "message": f"the result exceeded {config['max_result_bytes']} bytes"}
                    elif len(buffer) >= header + size:
                        # The whole result is in: answer now, the child's exit is cleanup.
                        answer = _validated(buffer[header:header + size]) or {
                            "status": "error", "error_class": "MalformedResult",
                            "message": "the program wrote something other than a result into the result pipe"}
                continue
            watched.remove(child.result_read)  # end of stream; the child may still be running
        if child.pidfd in ready:
            status, rusage = child.reap()
            answer = _classify_exit(status, rusage, limits, killed_for_wall=False)
    answer["duration_s"] = time.monotonic() - started
    return answer


def clean_up(child: _Prepared, config: dict) -> bool:
    """After a job: kill what is left of it, empty the scratch directory; True only when nothing of it
    survived (no process, nothing in the scratch directory but what the worker itself keeps there). A worker
    that answers False exits, and the harness starts a fresh one in its slot."""
    try:
        child.close()
        if not _sweep(child.pid, config["pid_namespace"]):
            return False  # a process lives on: it could refill the directory behind the cleanup
        scratch, mode = config["scratch_dir"], os.lstat(config["scratch_dir"]).st_mode
        if not stat.S_ISDIR(mode):  # swapped for a link or a file (bare: the job's uid owns its scratch)
            return False
        if mode & 0o7777 != config["scratch_mode"]:  # changed by the job (as its owner): set back
            os.chmod(scratch, config["scratch_mode"])
        left = remove_contents(scratch)
        return set(left) <= set(config["keep"])
    except BaseException:  # RecursionError, MemoryError, a descriptor limit: this worker is not reused
        return False


def _remove_tree_command(path: str) -> int:
    """`zygote.py --remove PATH`: the harness removes a worker's host scratch directory in a process of its
    own (killed at a timeout), never in its own stack. Whatever stands at PATH that is not a directory (a
    symlink swapped in) is removed itself, never followed."""
    try:
        if not os.path.isdir(path) or os.path.islink(path):
            os.unlink(path)
            return 0
        left = remove_contents(path)
        if not left:
            os.rmdir(path)
    except FileNotFoundError:
        return 0
    except BaseException as exc:
        print(f"cannot remove {path}: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    if left:
        print(f"left in {path}: {', '.join(left[:20])}", file=sys.stderr)
    return 1 if left else 0


def main() -> None:
    global _libc, _kernel
    if sys.argv[1] == "--remove":
        sys.exit(_remove_tree_command(sys.argv[2]))
    config = json.loads(sys.argv[1])
    if config.get("site_dirs"):  # a copy of the Python installation started with -S: its packages, .pth files
        import site

        for directory in config["site_dirs"]:
            site.addsitedir(directory)
    # kill(-1) is only safe inside our own pid namespace, as an unprivileged uid.
    config["pid_namespace"] = bool(config["pid_namespace"]) and os.getuid() != 0 and os.getpid() == 2
    # The protocol moves off fds 0/1 so that nothing a library prints can corrupt it.
    proto_in, proto_out = os.dup(0), os.dup(1)
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    os.close(devnull)
    config["protocol_fds"] = [proto_in, proto_out]
    os.makedirs(config["scratch_dir"], exist_ok=True)
    config["scratch_mode"] = os.lstat(config["scratch_dir"]).st_mode & 0o7777  # restored after each job
    for module in config["preload"]:
        __import__(module)
    import ctypes

    _libc = ctypes.CDLL(None, use_errno=True)
    _prctl(_PR_SET_DUMPABLE, 0)
    _prctl(_PR_SET_CHILD_SUBREAPER, 1)
    with open("/proc/self/statm") as statm:
        address_space_mb = int(statm.read().split()[0]) * resource.getpagesize() / 2**20
    if config.get("landlock") or config.get("seccomp"):
        try:
            _kernel = _KernelLayers(_libc, config.get("landlock"), config.get("seccomp"), config.get("seccomp_nr"))
            _kernel.check()
            # Made before the file system closes: without bubblewrap the scratch directory is read-only then.
            os.makedirs(os.path.join(config["scratch_dir"], "job"), 0o700, exist_ok=True)
            _kernel.restrict_files()
        except OSError as exc:  # stderr is /dev/null by now: the parent hears why in the ready frame
            write_frame(proto_out, {"ready": False, "error": f"kernel layers: {exc}"})
            return
    child = _Prepared(config)
    write_frame(proto_out, {"ready": True, "pid": os.getpid(), "uid": os.getuid(),
                            "pid_namespace": config["pid_namespace"], "address_space_mb": address_space_mb,
                            "landlock_abi": 0 if _kernel is None else _kernel.landlock_abi,
                            "seccomp": bool(config.get("seccomp"))})
    # Protocol: job -> answer -> {"clean": bool}. The parent reads "clean"
    # only when it wants this worker again, so cleanup and the next fork
    # overlap with its own work.
    while True:
        job = read_frame(proto_in)
        if job is None:
            child.close()
            return
        try:
            answer = run_job(job, child, config)
        except Exception as exc:  # a zygote failure must reach the parent, not kill the pool silently
            answer = {"status": "error", "error_class": "SandboxError", "message": f"{type(exc).__name__}: {exc}"}
        write_frame(proto_out, answer)
        clean = clean_up(child, config)
        if clean:
            child = _Prepared(config)
        write_frame(proto_out, {"clean": clean})
        if not clean:
            return


if __name__ == "__main__":
    main()
