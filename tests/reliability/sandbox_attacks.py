"""The hostile programs of the sandbox attack suite, and how an outcome is read: contained or not, and by
which layer. Used by tests/reliability/test_sandbox_attacks.py and by bench/sandbox_attack_matrix.py.

A program is run whole in answer_variable mode; {port}, {mark}, {repo}, {secret_file}, {victim} are
filled in (a TCP listener on 127.0.0.1, the marker of files it must not leave, the repository, a host
file holding a planted secret, the pid of a host process whose environment holds it too).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Any, Callable

from finharness.sandbox.launch import _user_namespace

Outcome = tuple[str, "str | None"]
"""(status, error_class); error_class None: any."""

CONFIGS = {"bwrap+audit": ("bwrap", True), "bwrap": ("bwrap", False), "kernel+audit": ("kernel", True),
           "kernel": ("kernel", False), "bare": ("bare", True)}
"""Every isolation the project offers (Sandbox(isolation=..., audit=...)): the default (bubblewrap), the
kernel layers alone under it and without it, and the bare fallback that only `unsafe` ever picks."""


@dataclass(frozen=True)
class Attack:
    """One hostile program and what must be true after it ran."""

    name: str
    """Test id."""

    code: str
    """The program."""

    guarded: tuple[Outcome, ...] = (("error", "SandboxViolation"),)
    """Acceptable outcomes with the audit guard on."""

    os_layer: tuple[Outcome, ...] | None = None
    """Acceptable outcomes with the audit guard off (kernel layers only); None: any, containment is checked."""

    bare: tuple[Outcome, ...] | None = None
    """Acceptable outcomes of the bare fallback (rlimits + audit guard), when they differ from `guarded`."""

    errno: dict[str, tuple[int, ...]] = field(default_factory=dict)
    """Kind ('bwrap', 'kernel') -> the errnos that refused calls must fail with, audit off (in the message,
    or per operation in the value): they name the kernel layer that stopped each (see LAYER_BY_ERRNO)."""

    leaks: dict[str, tuple[str, ...]] = field(default_factory=dict)
    """Config -> what is known to reach the host there (see the test's host_leaks); elsewhere: nothing."""

    victim: bool = False
    """The program targets the victim process (restarted afterwards if it died)."""

    leak_if: Callable[[Any], str | None] | None = None
    """What the result itself shows reached the host (a leak name), beyond the generic checks."""

    plants: bool = False
    """The program leaves things in every place it may write: the next job on the worker must see none."""

    layers: dict[str, dict[int, str]] = field(default_factory=dict)
    """Kind -> errno -> the layer it names for this attack, where the default (LAYER_BY_ERRNO) would misname
    it (an EPERM of the uid's ownership check, not of seccomp)."""

    describe: Callable[[Any], str | None] | None = None
    """The matrix cell for a result that ran to its end, when the result itself tells (a count held by a limit)."""

    def expected(self, config: str) -> tuple[Outcome, ...] | None:
        """Acceptable outcomes under a configuration of CONFIGS."""
        kind, audit = CONFIGS[config]
        if kind == "bare" and self.bare is not None:
            return self.bare
        return self.guarded if audit else self.os_layer


AS_ROOT = os.geteuid() == 0
"""How the harness runs. As root every worker drops to a uid of its own, so what the bare kind (no kernel
layers) leaks to a program that fools the guard shrinks to what that uid may reach; as a normal user the
job is that user, and reaches what it owns."""
USER_NAMESPACE = bool(_user_namespace())
"""As a normal user, kernel and bare workers run in a user namespace of their own where the kernel allows it."""
NPROC = 8
"""Limits.nproc of the attack suite: processes and threads of the worker's uid, the zygote and the job's
main thread included, so a job may start at most NPROC - 2 threads."""

TIMEOUT = (("timeout", "CPUTimeLimit"), ("timeout", "WallTimeout"))
REFUSED = (("error", "PermissionError"), ("error", "OSError"), ("error", "FileNotFoundError"))
SECCOMP = {"bwrap": (1,), "kernel": (1,)}
LANDLOCK = {"bwrap": (13,), "kernel": (13,)}
# Under bubblewrap the path is usually absent too, but Landlock is asked first.
NAMESPACE_OR_LANDLOCK = {"bwrap": (2, 13), "kernel": (13,)}


def _paths_seen(result) -> str | None:
    return "host paths seen" if result.ok and any(result.value) else None


def _host_disk_filled(result) -> str | None:
    return "host disk filled (24 MB)" if result.ok else None

# Every system call below is refused by the seccomp filter (EPERM), whatever the other layers are.
_RAW_SYSCALLS = {
    "execve": "59, b'/bin/sh', None, None", "fork": "57", "vfork": "58", "ptrace_attach_parent": "101, 16, os.getppid(), 0, 0",
    "process_vm_readv": "310, os.getppid(), 0, 0, 0, 0, 0", "memfd_create": "319, b'x', 0",
    "pidfd_open": "434, os.getppid(), 0", "pidfd_getfd": "438, 0, 0, 0", "unshare_user": "272, 0x10000000",
    "unshare_net": "272, 0x40000000", "setns": "308, 0, 0", "mount": "165, b'none', b'/tmp', b'tmpfs', 0, None",
    "bpf": "321, 0, None, 0", "keyctl": "250, 0, -3, 0", "add_key": "248, b'user', b'k', b'v', 1, -3",
    "io_uring_setup": "425, 8, ctypes.create_string_buffer(120)", "userfaultfd": "323, 0",
    "perf_event_open": "298, ctypes.create_string_buffer(128), 0, -1, -1, 0", "personality": "135, 0x0400000",
    "open_by_handle_at": "304, 0, None, 0", "kill_parent": "62, os.getppid(), 0", "kill_all": "62, -1, 0",
    "tgkill_parent": "234, os.getppid(), os.getppid(), 0", "socket": "41, 2, 1, 0",
    "clone_newns": "56, 0x00020000 | 17, 0, 0, 0, 0", "setrlimit_as": "160, 9, ctypes.create_string_buffer(16)",
    "prctl_dumpable": "157, 4, 1, 0, 0", "chroot": "161, b'/'", "mknod": "133, b'n', 0o20666, 0x103",
}
RAW_SYSCALLS_CODE = (
    "import ctypes, os\nlibc = ctypes.CDLL(None, use_errno=True)\nanswer = {{}}\n"
    + "".join(f"answer[{name!r}] = (libc.syscall({args}), ctypes.get_errno())\n"
              for name, args in _RAW_SYSCALLS.items()))

# A sub-interpreter has no audit hooks of the one that made it; channels bring its findings back.
_SUBINTERPRETER = (
    "import _xxsubinterpreters as interpreters\nchannel = interpreters.channel_create()\n"
    "interp = interpreters.create()\n"
    "interpreters.run_string(interp, INNER, shared={{'channel': channel}})\n"
    "answer = interpreters.channel_recv(channel)")
_INNER_REPORT = ("import _xxsubinterpreters as interpreters\nfound = {{}}\n"
                 "def attempt(name, action):\n    try:\n        found[name] = str(action())[:200]\n"
                 "    except OSError as exc:\n        found[name] = exc.errno\nBODY"
                 "interpreters.channel_send(channel, repr(found))\n")


def _subinterpreter(body: str) -> str:
    """A program whose `body` (attempt(name, action) lines) runs in a sub-interpreter (templates keep the
    doubled braces of the {port}/{mark}... placeholders)."""
    return _SUBINTERPRETER.replace("INNER", repr(_INNER_REPORT.replace("BODY", body)))


# The guard resolves paths with posixpath helpers looked up at call time: make every path look like the
# job directory's, then do what the guard would have refused.
_PATCH_GUARD = ("import os, posixpath\njob = os.getcwd()\n"
                "posixpath._joinrealpath = lambda path, rest, strict, seen: (job, True)\n")


# Each refusal is recorded by errno and the program goes on; the guard's own refusal ends it (its outcome).
_ATTEMPT = ("import os\nanswer = {{}}\n"
            "def attempt(name, action):\n    try:\n        action()\n        answer[name] = 'done'\n"
            "    except OSError as exc:\n        if type(exc).__name__ == 'SandboxViolation':\n            raise\n"
            "        answer[name] = exc.errno\n")


def _done(leak: str, keys: tuple[str, ...] | None = None) -> Callable[[Any], str | None]:
    """A leak when an operation the program reports (in `keys`, or any) went through."""
    def check(result) -> str | None:
        if result.ok and isinstance(result.value, dict):
            if any(v == "done" for k, v in result.value.items() if keys is None or k.split(":")[-1] in keys):
                return leak
        return None
    return check


def _over(limit: int, leak: str) -> Callable[[Any], str | None]:
    return lambda result: leak if result.ok and isinstance(result.value, (int, float)) and result.value > limit else None


def _created(result) -> str | None:
    """A SysV object or message queue was made: it would outlive the job."""
    if result.ok and isinstance(result.value, dict) and any(v[0] != -1 for v in result.value.values()):
        return "kernel object outlived the job"
    return None


def _timers(result) -> str | None:
    made = result.value.get("timer_create", (-1, 0))[0] if result.ok and isinstance(result.value, dict) else -1
    return "timers piled up" if made > 64 else None


_PLANT_ONE = (
    "def deep(top):\n    fd = os.open(top, os.O_RDONLY)\n    os.mkdir('{mark}-deep', dir_fd=fd)\n"
    "    name = '{mark}-deep'\n    for _ in range(1500):\n        inner = os.open(name, os.O_RDONLY, dir_fd=fd)\n"
    "        os.close(fd)\n        fd, name = inner, 'd'\n        os.mkdir(name, dir_fd=fd)\n"
    "    os.close(os.open('{mark}-message', os.O_WRONLY | os.O_CREAT, 0o600, dir_fd=fd))\n    os.close(fd)\n"
    "def zero(top):\n    os.mkdir(f'{{top}}/{mark}-zero')\n    open(f'{{top}}/{mark}-zero/msg', 'w').write('{mark}-message')\n"
    "    old = os.umask(0o777)\n    os.mkdir(f'{{top}}/{mark}-zero/inner')\n    os.umask(old)\n"
    "    os.chmod(f'{{top}}/{mark}-zero', 0)\n"
    "def hold(path):\n    f = open(path, 'w')\n    while True:\n        f.write('x')\n        f.flush()\n"
    "        time.sleep(0.01)\n"
    "def plant(top):\n"
    "    attempt(f'{{top}}:wx', lambda: (os.mkdir(f'{{top}}/{mark}-wx', 0o300),\n"
    "                                 open(f'{{top}}/{mark}-wx/msg', 'w').write('{mark}-message')))\n"
    "    attempt(f'{{top}}:zero', lambda: zero(top))\n    attempt(f'{{top}}:deep', lambda: deep(top))\n"
    "    attempt(f'{{top}}:fifo', lambda: os.mkfifo(f'{{top}}/{mark}-fifo'))\n"
    "    attempt(f'{{top}}:held', lambda: open(f'{{top}}/{mark}-held', 'w').close())\n"
    "    if answer[f'{{top}}:held'] == 'done':\n"
    "        threading.Thread(target=hold, args=(f'{{top}}/{mark}-held',), daemon=True).start()\n")
PLANT = (_ATTEMPT + "import threading, time\n" + _PLANT_ONE + "plant('.')\n"
         "attempt('.:link_out', lambda: os.symlink('/etc/passwd', '{mark}-link'))\n"
         "attempt('.:dir_link_out', lambda: os.symlink('/usr', '{mark}-dirlink'))\n"
         "plant('..')\ntime.sleep(0.05)\n")
"""Leaves, in the job directory and its parent (bubblewrap's whole /tmp), a 0300 directory and a 0000 one
with a message, a 1,500-deep tree, a FIFO, symlinks out, a file a thread keeps writing."""

READER = (_PATCH_GUARD + "found = []\n"
          "for top in ('.', '..', '/tmp'):\n    try:\n        names = os.listdir(top)\n    except OSError:\n"
          "        names = []\n    found += [f'{{top}}/{{name}}' for name in names if '{mark}' in name]\n"
          "    for path in ('{mark}-wx/msg', '{mark}-zero/msg', '{mark}-held'):\n        try:\n"
          "            found.append(f'{{top}}/{{path}}: ' + open(f'{{top}}/{{path}}').read()[:40])\n"
          "        except OSError:\n            pass\nanswer = sorted(set(found))")
"""A later, different program on the same worker, with the guard's path checks fooled: what does it find?"""

ATTACKS = [
    Attack("socket_connect_to_host_listener",
           "import socket\ns = socket.create_connection(('127.0.0.1', {port}), timeout=1)\n"
           "s.sendall(b'pwned')\nanswer = 1",
           os_layer=(("error", "PermissionError"),), errno=SECCOMP),
    Attack("urllib_to_host_listener",
           "import urllib.request\nanswer = urllib.request.urlopen('http://127.0.0.1:{port}/', timeout=1).read()",
           os_layer=(("error", None),)),
    Attack("dns_lookup", "import socket\nanswer = socket.getaddrinfo('example.com', 80)", os_layer=(("error", None),)),
    Attack("subprocess_writes_tmp",
           "import subprocess\nsubprocess.run(['sh', '-c', 'echo x > /tmp/{mark}-sub'])\nanswer = 1",
           os_layer=(("error", "PermissionError"),), errno=SECCOMP),
    Attack("os_system_writes_repo",
           "import os\nanswer = os.system('echo x > {repo}/{mark}-sys; echo x > /tmp/{mark}-sys')",
           os_layer=(("ok", None),)),  # system() reports 127: the shell could not be started (no fork, no exec)
    Attack("os_fork_bomb", "import os\nwhile True:\n    os.fork()", os_layer=(("error", "PermissionError"),),
           errno=SECCOMP),
    Attack("write_host_tmp", "answer = open('/tmp/{mark}-w', 'w').write('x')",
           os_layer=(("ok", None), ("error", "PermissionError")), errno={"kernel": (13,)}),  # bwrap: its own /tmp
    Attack("write_into_repo", "answer = open('{repo}/{mark}-repo', 'w').write('x')", os_layer=REFUSED,
           errno=NAMESPACE_OR_LANDLOCK),
    Attack("read_ssh_keys",
           "import os\nanswer = [open(os.path.join(d, f)).read() for d in (os.path.expanduser('~/.ssh'), '/root/.ssh')"
           " if os.path.isdir(d) for f in os.listdir(d)] + os.listdir('/root')", os_layer=(("ok", None),) + REFUSED),
    Attack("read_etc_shadow", "answer = open('/etc/shadow').read()", os_layer=REFUSED, errno=NAMESPACE_OR_LANDLOCK),
    Attack("read_a_host_secret_file", "answer = open('{secret_file}').read()", os_layer=REFUSED,
           errno=NAMESPACE_OR_LANDLOCK),
    Attack("env_secrets", "import os\nanswer = str(dict(os.environ))", guarded=(("ok", None),),
           os_layer=(("ok", None),)),
    Attack("proc_environ_of_every_process",
           "import os\nfound = []\nfor pid in os.listdir('/proc'):\n"
           "    try:\n        found.append(open(f'/proc/{{pid}}/environ', 'rb').read().decode())\n"
           "    except Exception:\n        pass\nanswer = '\\n'.join(found)", os_layer=REFUSED, errno=LANDLOCK),
    Attack("proc_of_the_parent",
           "import os\nparent = f'/proc/{{os.getppid()}}'\n"
           "answer = open(parent + '/cmdline').read() + open(parent + '/environ').read()",
           os_layer=REFUSED, errno=LANDLOCK),
    Attack("ctypes_system", "import ctypes\nanswer = ctypes.CDLL(None).system(b'echo x > /tmp/{mark}-ct')",
           guarded=(("error", "SandboxViolation"), ("error", "ImportError")), os_layer=(("ok", None),)),
    # Modules that survive in other modules' globals: the unaudited fork_exec, ctypes' own libraries.
    Attack("fork_exec_through_a_module_reference",
           "import pandas\nimport os\nfork_exec = pandas._config.localization.subprocess._fork_exec\n"
           "r, w = os.pipe()\n"
           "answer = fork_exec([b'/bin/sh', b'-c', b'echo x > /tmp/{mark}-fe'], [b'/bin/sh'], True, (w,), None, None,"
           " -1, -1, -1, -1, -1, -1, r, w, False, False, -1, None, None, None, -1, None, False)",
           guarded=(("error", "TypeError"), ("error", "SandboxViolation")),
           os_layer=(("error", "PermissionError"), ("error", "TypeError"))),
    Attack("ctypes_through_a_module_reference",
           "import numpy\nctypes = numpy._core._internal.ctypes\n"
           "answer = ctypes.pythonapi.Py_GetVersion() or ctypes.CDLL(None).system(b'echo x > /tmp/{mark}-ctr')"),
    Attack("reload_a_blocked_extension_module",
           "import _imp, glob, importlib.machinery as machinery\n"
           "path = glob.glob(machinery.__file__.rsplit('/', 2)[0] + '/lib-dynload/_posixsubprocess*')\n"
           "answer = _imp.create_dynamic(machinery.ModuleSpec('_posixsubprocess', None, origin=path[0]))",
           guarded=(("error", "SandboxViolation"), ("error", "IndexError"))),
    Attack("allocate_50_gb", "answer = bytearray(50 * 2**30)", guarded=(("memory", "MemoryError"),),
           os_layer=(("memory", "MemoryError"),)),
    Attack("numpy_allocate_50_gb", "import numpy as np\nanswer = np.ones(50 * 2**30 // 8).sum()",
           guarded=(("memory", None),), os_layer=(("memory", None),)),
    Attack("infinite_loop", "while True:\n    pass", guarded=TIMEOUT, os_layer=TIMEOUT),
    Attack("sleep_forever", "import time\nanswer = time.sleep(3600)", guarded=(("timeout", "WallTimeout"),),
           os_layer=(("timeout", "WallTimeout"),)),
    Attack("deep_recursion", "def f(n):\n    return f(n + 1)\nanswer = f(0)", guarded=(("error", "RecursionError"),),
           os_layer=(("error", "RecursionError"),)),
    # Python 3.11 frames live on the heap: the run ends at a crash, the memory or the CPU limit.
    Attack("stack_overflow", "import sys\nsys.setrecursionlimit(10**8)\ndef f(n):\n    return f(n + 1)\nanswer = f(0)",
           guarded=(("error", "Crashed"), ("memory", None)) + TIMEOUT,
           os_layer=(("error", "Crashed"), ("memory", None)) + TIMEOUT),
    Attack("import_tricks", "answer = __import__('o' + 's').system('echo x > /tmp/{mark}-imp')",
           os_layer=(("ok", None),)),
    Attack("importlib_tricks",
           "import importlib\nanswer = importlib.import_module('sub' + 'process').check_output(['id'])",
           os_layer=(("error", "PermissionError"),), errno=SECCOMP),
    Attack("ignore_signals_to_outlive_timeout",
           "import signal\nfor s in (signal.SIGALRM, signal.SIGTERM, signal.SIGXCPU, signal.SIGINT):\n"
           "    signal.signal(s, signal.SIG_IGN)\nwhile True:\n    pass",
           guarded=TIMEOUT, os_layer=TIMEOUT),
    Attack("kill_the_parent", "import os\nos.kill(os.getppid(), 9)\nimport time\ntime.sleep(2)\nanswer = 1",
           os_layer=(("error", "PermissionError"),), errno=SECCOMP),
    Attack("change_directory_then_write", "import os\nos.chdir('/')\nanswer = open('{mark}-cd', 'w').write('x')",
           os_layer=REFUSED, errno={"bwrap": (13, 30), "kernel": (13,)}),
    Attack("patch_the_harness_through_sys_modules",
           "import sys, json\njson.dumps = lambda *a, **k: '{{\"status\": \"ok\", \"value\": 666}}'\n"
           "sys.modules['json'] = None\nsys.modules['os'] = None\nanswer = 41 + 1",
           guarded=(("ok", None),), os_layer=(("ok", None),)),
    Attack("setsid_double_fork_escape",
           "import os, time\nif os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n        time.sleep(60)\n"
           "    os._exit(0)\nanswer = 7",
           os_layer=(("error", "PermissionError"),), errno=SECCOMP),
    Attack("huge_file", "answer = open('big.bin', 'wb').write(b'x' * 20 * 2**20)", guarded=(("error", None),),
           os_layer=(("error", None),)),
    Attack("threads_spinning",
           "import threading\ndef spin():\n    while True:\n        pass\n"
           "for _ in range(4):\n    threading.Thread(target=spin, daemon=True).start()\nspin()",
           guarded=TIMEOUT, os_layer=TIMEOUT),
    Attack("scribble_on_inherited_descriptors",
           "import os\nfor fd in range(0, 64):\n    try:\n        os.write(fd, b'\\x00\\x00\\x00\\x05junk!')\n"
           "    except OSError:\n        pass\nanswer = 5", guarded=(("ok", None), ("error", None)), os_layer=None),
    Attack("exit_without_result", "import os\nos._exit(0)", guarded=(("error", "ExitedWithoutResult"),),
           os_layer=(("error", "ExitedWithoutResult"),)),
    Attack("raise_system_exit", "raise SystemExit(3)", guarded=(("error", "SystemExit"),),
           os_layer=(("error", "SystemExit"),)),

    # ---- issue 26: ways around the audit guard, and what the kernel layers must hold -----------------
    Attack("subinterpreter_runs_shell_and_spawn",
           _subinterpreter("import os\nattempt('system', lambda: os.system('echo x > /tmp/{mark}-si'))\n"
                           "attempt('posix_spawn', lambda: os.posix_spawn('/bin/sh', ['sh', '-c', "
                           "'echo x > /tmp/{mark}-sp'], {{}}))\n"),
           os_layer=(("ok", None),), errno=SECCOMP),
    Attack("subinterpreter_reads_host_files_and_proc",
           _subinterpreter("attempt('secret_file', lambda: open('{secret_file}').read())\n"
                           "attempt('victim_environ', lambda: open('/proc/{victim}/environ').read())\n"
                           "attempt('parent_environ', lambda: open(f'/proc/{{__import__(\"os\").getppid()}}/environ')"
                           ".read())\n"
                           "attempt('write_tmp', lambda: open('/tmp/{mark}-sw', 'w').write('x'))\n"),
           os_layer=(("ok", None),), errno={"bwrap": (2, 13), "kernel": (13,)}, victim=True),
    # As root the bare kind's uid cannot read root's files or processes; as a normal user it is their owner.
    Attack("patched_guard_helper_reads_secret", _PATCH_GUARD + "answer = open('{secret_file}').read()",
           guarded=REFUSED, os_layer=REFUSED, bare=REFUSED if AS_ROOT else (("ok", None),),
           errno=NAMESPACE_OR_LANDLOCK, leaks={} if AS_ROOT else {"bare": ("secret in output",)}),
    # A normal user's bare worker in a user namespace of its own reads no /proc/PID/environ of the host's.
    Attack("patched_guard_helper_reads_victim_environ",
           _PATCH_GUARD + "answer = open('/proc/{victim}/environ').read()",
           guarded=REFUSED, os_layer=REFUSED, bare=REFUSED if AS_ROOT or USER_NAMESPACE else (("ok", None),),
           errno=NAMESPACE_OR_LANDLOCK, leaks={} if AS_ROOT or USER_NAMESPACE else {"bare": ("secret in output",)},
           victim=True, layers={"bare": {13: "uid" if AS_ROOT else "user namespace"}}),
    Attack("patched_guard_helper_fills_host_tmp",
           _PATCH_GUARD + "for i in range(20):\n    open(f'/tmp/{mark}-fill-{{i}}', 'wb').write(b'x' * 2**20)\n"
           "answer = 20", guarded=REFUSED, os_layer=REFUSED, bare=(("ok", None),),
           errno={"bwrap": (28,), "kernel": (13,)}, leaks={"bare": ("marker file",)}),
    # The guard's own module is reachable through a frame: empty its rule sets, break a builtin it could use.
    Attack("patch_the_guard_module_through_a_frame",
           "import sys, builtins, __main__\nrules = sys._getframe(1).f_globals\n"
           "for name in ('_BLOCKED_EVENTS', '_BLOCKED_MODULES', '_WRITE_PATH_EVENTS', '_LIST_EVENTS'):\n"
           "    rules[name] = frozenset()\n    setattr(__main__, name, frozenset())\n"
           "rules['_BLOCKED_PREFIXES'] = ('never',)\nbuiltins.any = lambda items: True\nimport os\n"
           "answer = os.system('echo x > /tmp/{mark}-frame')", os_layer=(("ok", None),)),
    Attack("pidfd_signal_kills_host_victim",
           "import os, signal\nfd = os.pidfd_open({victim})\nsignal.pidfd_send_signal(fd, signal.SIGKILL)\nanswer = 1",
           guarded=(("error", "PermissionError"),), os_layer=(("error", "PermissionError"),),
           bare=(("error", "PermissionError"),) if AS_ROOT else (("ok", None),), errno=SECCOMP,
           leaks={} if AS_ROOT else {"bare": ("victim killed",)}, victim=True),
    Attack("kill_host_victim", "import os\nos.kill({victim}, 9)\nanswer = 1", os_layer=(("error", "PermissionError"),),
           errno=SECCOMP, victim=True),
    Attack("kill_every_process_of_the_uid", "import os\nos.kill(-1, 9)\nanswer = 1",
           os_layer=(("error", "PermissionError"),), errno=SECCOMP, victim=True),
    Attack("stat_host_path_oracle",
           "import os\nanswer = [os.path.exists(p) for p in ('{secret_file}', '{repo}/pyproject.toml', '/etc/shadow')]",
           guarded=(("ok", None),), os_layer=(("ok", None),), leak_if=_paths_seen,
           # Landlock does not mediate stat(): without a mount namespace, existence is visible (contents are not).
           leaks={"kernel+audit": ("host paths seen",), "kernel": ("host paths seen",), "bare": ("host paths seen",)}),
    Attack("memfd_memory_outside_the_address_space_limit",
           "import os\nfds = []\nfor _ in range(200):\n    fd = os.memfd_create('hold')\n"
           "    os.write(fd, b'x' * 2**20)\n    fds.append(fd)\nanswer = len(fds)",
           guarded=(("error", "PermissionError"), ("error", "OSError")), os_layer=(("error", "PermissionError"),),
           errno=SECCOMP),  # bare: at most RLIMIT_NOFILE (64) x RLIMIT_FSIZE (1 MB) before EMFILE
    Attack("shared_memory_in_dev_shm",
           "from multiprocessing import shared_memory\nblock = shared_memory.SharedMemory(create=True, size=2**30)\n"
           "block.buf[:2**30:4096] = b'x' * (2**30 // 4096)\nanswer = block.size", os_layer=REFUSED,
           errno={"bwrap": (30,), "kernel": (13,)}),
    # 24 MB: past the 16 MB scratch tmpfs, and small enough that under bare (the host's disk) the page-cache
    # throttling a busy disk charges to the writer stays far below the 1 s CPU limit (100 MB took 0.6-1.3 s of
    # system time while another process wrote 3 GB, and failed the CPU limit in full test runs).
    Attack("fill_the_scratch_file_system",
           "for i in range(24):\n    open(f'f{{i}}', 'wb').write(b'x' * 2**20)\nanswer = i",
           guarded=REFUSED, os_layer=REFUSED, bare=(("ok", None),), errno={"bwrap": (28,), "kernel": (13,)},
           leak_if=_host_disk_filled, leaks={"bare": ("host disk filled (24 MB)",)}),
    Attack("raw_system_calls_through_ctypes", RAW_SYSCALLS_CODE, os_layer=(("ok", None),), errno=SECCOMP),
    Attack("i386_system_call_through_int_0x80",
           "import ctypes, mmap\ncode = b'\\xb8\\x14\\x00\\x00\\x00\\xcd\\x80\\xc3'\n"  # mov eax, 20; int 0x80; ret
           "page = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)\npage.write(code)\n"
           "address = ctypes.addressof(ctypes.c_char.from_buffer(page))\n"
           "answer = ctypes.CFUNCTYPE(ctypes.c_long)(address)()",
           os_layer=(("error", "Crashed"),)),
    Attack("proc_self_mem_write", "f = open('/proc/self/mem', 'r+b')\nanswer = 1", os_layer=REFUSED, errno=LANDLOCK),
    Attack("o_path_descriptor_walk",
           "import os\nroot = os.open('/', os.O_PATH)\nanswer = os.read(os.open('proc/1/environ', os.O_RDONLY, "
           "dir_fd=root), 100)", os_layer=REFUSED, errno=LANDLOCK),
    Attack("symlink_out_of_the_job_directory",
           "import os\nos.symlink('/proc/1/environ', 'link')\nanswer = open('link').read()",
           os_layer=REFUSED, errno=LANDLOCK),
    Attack("raise_own_limits",
           "import resource\nresource.setrlimit(resource.RLIMIT_AS, (resource.RLIM_INFINITY,) * 2)\n"
           "answer = bytearray(3 * 2**30)", os_layer=(("error", "ValueError"),)),  # EPERM, as Python words it
    Attack("thread_kept_alive_past_the_result",
           "import threading, time\nthreading.Thread(target=time.sleep, args=(60,)).start()\nanswer = 3",
           guarded=(("ok", None),), os_layer=(("ok", None),)),
    # ---- issue 34: modes, owners and times; the process limit; kernel objects; what a job leaves behind ----
    # (the test also compares the mode, owner and times of host files before and after every attack)
    Attack("setuid_bit_on_host_files_by_descriptor",
           _ATTEMPT + "for path in (os.__file__, '/usr/share/zoneinfo/Etc/UTC', '/usr/bin/env', '{secret_file}'):\n"
           "    try:\n        fd = os.open(path, os.O_RDONLY)\n    except OSError as exc:\n"
           "        if type(exc).__name__ == 'SandboxViolation':\n            raise\n"
           "        answer[path] = exc.errno\n        continue\n"
           "    attempt(path, lambda: os.fchmod(fd, 0o4777))\n",
           os_layer=(("ok", None),), errno={"bwrap": (2, 30), "kernel": (1, 13)}, leak_if=_done("host file mode changed")),
    Attack("mode_and_times_of_host_files_through_a_patched_guard",
           _PATCH_GUARD + _ATTEMPT + "attempt('chmod_module', lambda: os.chmod(os.__file__, 0o4777))\n"
           "attempt('chmod_secret', lambda: os.chmod('{secret_file}', 0o777))\n"
           "attempt('utime_zoneinfo', lambda: os.utime('/usr/share/zoneinfo/Etc/UTC', (0, 0)))\n"
           "attempt('utime_secret', lambda: os.utime('{secret_file}', (0, 0)))\n",
           guarded=(("ok", None),), os_layer=(("ok", None),), errno={"bwrap": (2, 30), "kernel": (1,)},
           leaks={} if AS_ROOT else {"bare": ("host file changed",)}, layers={"bare": {1: "uid", 13: "uid"}}),
    Attack("times_and_owner_of_host_files_by_descriptor",
           _ATTEMPT + "for path in (os.__file__, '/usr/share/zoneinfo/Etc/UTC'):\n    fd = os.open(path, os.O_RDONLY)\n"
           "    attempt(path + ':utime', lambda: os.utime(fd, (0, 0)))\n"
           "    attempt(path + ':chown', lambda: os.fchown(fd, os.getuid(), os.getgid()))\n",
           os_layer=(("ok", None),), errno={"bwrap": (1, 30), "kernel": (1,)}, leak_if=_done("host file changed")),
    # bubblewrap allows mode changes (its host is read-only and other uids'): /tmp is root's there, the job's
    # own directory is its own (the cleanup removes it whatever its mode). As a normal user /tmp is theirs too.
    Attack("mode_of_the_job_and_scratch_directories",
           _ATTEMPT + "attempt('scratch', lambda: os.chmod('..', 0o777))\nattempt('job', lambda: os.chmod('.', 0))\n",
           os_layer=(("ok", None),), errno={"bwrap": (1,), "kernel": (1,)} if AS_ROOT else {"kernel": (1,)},
           layers={"bwrap": {1: "uid"}}),
    # A hard link is a second name of the same inode: changing the link's mode changes the host file's.
    Attack("hard_link_to_a_host_file_then_change_it",
           _ATTEMPT + "attempt('link', lambda: os.link(os.__file__, 'linked'))\n"
           "attempt('chmod', lambda: os.chmod('linked', 0o4777))\nattempt('utime', lambda: os.utime('linked', (0, 0)))\n",
           # kernel: EXDEV where the scratch directory is on another file system, else protected_hardlinks
           # (EPERM) or Landlock (EACCES); the mode and time changes: seccomp.
           os_layer=(("ok", None),), errno={"bwrap": (2, 18), "kernel": (1, 13, 18)},
           layers={"kernel": {18: "other file system"}}, leak_if=_done("host file changed", ("chmod", "utime"))),
    Attack("thread_bomb_past_the_process_limit",
           "import threading\nstop = threading.Event()\nanswer = 0\ntry:\n    for _ in range(150):\n"
           "        threading.Thread(target=stop.wait, daemon=True).start()\n        answer += 1\n"
           "except RuntimeError:\n    pass\nstop.set()",
           guarded=(("ok", None),), os_layer=(("ok", None),),
           leak_if=_over(NPROC - 2, "process limit crossed"),
           describe=lambda r: (f"{'pids cgroup+' if 'pids' in r.isolation else ''}RLIMIT_NPROC ({r.value:.0f} threads)"
                               if r.ok else None)),
    Attack("lock_a_host_file",
           "import fcntl, struct\n" + _ATTEMPT + "fd = os.open(os.__file__, os.O_RDONLY)\n"
           "attempt('flock', lambda: fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB))\n"
           "attempt('posix', lambda: fcntl.lockf(fd, fcntl.LOCK_SH | fcntl.LOCK_NB))\n"
           "attempt('ofd', lambda: fcntl.fcntl(fd, 37, struct.pack('hhqqi4x', fcntl.F_RDLCK, 0, 0, 0, 0)))\n",
           os_layer=(("ok", None),), errno=SECCOMP, leak_if=_done("host file locked")),
    Attack("posix_timers_pile_up",
           "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\ntimer = ctypes.c_void_p()\nmade = 0\n"
           "while made < 1000 and libc.timer_create(1, None, ctypes.byref(timer)) == 0:\n    made += 1\n"
           "answer = {{'timer_create': (made or -1, ctypes.get_errno())}}",
           os_layer=(("ok", None),), errno=SECCOMP, leak_if=_timers),
    Attack("sysv_ipc_and_message_queues_outlive_the_job",
           "import ctypes, os\nlibc = ctypes.CDLL(None, use_errno=True)\nanswer = {{}}\n"
           "for name, call in (('shmget', lambda: libc.shmget(0, 2**20, 0o1600)),\n"
           "                   ('msgget', lambda: libc.msgget(0, 0o1600)), ('semget', lambda: libc.semget(0, 1, 0o1600)),\n"
           "                   ('mq_open', lambda: libc.mq_open(b'/{mark}', os.O_CREAT | os.O_RDWR, 0o600, None))):\n"
           "    answer[name] = (call(), ctypes.get_errno())",
           os_layer=(("ok", None),), errno=SECCOMP, leak_if=_created),
    Attack("leave_files_for_the_next_job", PLANT, os_layer=(("ok", None),),  # mkfifo: seccomp (mknod)
           errno={"bwrap": (1, 13), "kernel": (1, 13)}, plants=True),
    Attack("deep_tree_of_long_names_for_the_cleanup",
           _ATTEMPT + "def tree():\n    fd = os.open('.', os.O_RDONLY)\n    for i in range(300):\n"
           "        name = f'{mark}-{{i}}-' + 'n' * 200\n        os.mkdir(name, dir_fd=fd)\n"
           "        inner = os.open(name, os.O_RDONLY, dir_fd=fd)\n        os.close(fd)\n        fd = inner\n"
           "    old = os.umask(0o777)\n    os.mkdir('{mark}-closed', dir_fd=fd)\n    os.umask(old)\n"
           "attempt('tree', tree)\n",  # 60,000 characters of path: past PATH_MAX
           guarded=(("ok", None),), os_layer=(("ok", None),), errno={"kernel": (13,)}, plants=True),

]

_ERRNO = re.compile(r"\[Errno (\d+)\]")
LAYER_BY_ERRNO = {1: "seccomp", 13: "Landlock", 2: "mount namespace", 30: "read-only mount", 28: "sized tmpfs",
                  24: "RLIMIT_NOFILE", 27: "RLIMIT_FSIZE", 38: "seccomp", 11: "RLIMIT_NPROC/pids cgroup",
                  18: "mount namespace"}


def refusal_errno(message: str | None) -> int | None:
    """The errno in a failure message ('[Errno 13] Permission denied: ...'), if any."""
    match = _ERRNO.search(message or "")
    return int(match.group(1)) if match else None


def stopped_by(result, kind: str | None = None, attack: Attack | None = None) -> str:
    """Which layer ended or refused the program, read from its result (for the matrix). `kind` ('bwrap',
    'kernel', 'bare') names an errno where the kinds differ: without kernel layers, EPERM and EACCES come
    from the unprivileged uid's permission checks."""
    names = dict(LAYER_BY_ERRNO)
    if kind == "bare":
        names.update({1: "uid", 13: "uid"})
    if attack is not None:
        names.update(attack.layers.get(kind or "", {}))
    if attack is not None and attack.describe is not None and (cell := attack.describe(result)):
        return cell
    if result.error_class == "SandboxViolation":
        return "audit guard"
    if result.error_class == "MemoryLimit":
        return "memory cgroup"
    if result.status == "memory":
        return "RLIMIT_AS"
    if result.error_class == "CPUTimeLimit":
        return "RLIMIT_CPU"
    if result.error_class == "WallTimeout":
        return "wall clock"
    if result.error_class == "Crashed" and "SIGSYS" in (result.message or ""):
        return "seccomp (architecture check)"
    if result.error_class == "FileSizeLimit":
        return "RLIMIT_FSIZE"
    if result.status == "ok" and isinstance(result.value, (dict, str)):
        codes = value_errnos(result.value)
        if codes:
            return "+".join(sorted({names.get(code, f"errno {code}") for code in codes}))
    code = refusal_errno(result.message)
    if code is not None:
        return names.get(code, f"errno {code}")
    return "ran (contained)" if result.status == "ok" else f"{result.status} ({result.error_class})"


def value_errnos(value) -> set[int]:
    """Errnos a program reported for each operation it tried (a dict, or a sub-interpreter's repr of one)."""
    if isinstance(value, str):
        if not value.startswith("{"):
            return set()
        import ast

        try:
            value = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            return set()
    if not isinstance(value, dict):
        return set()
    codes = set()
    for item in value.values():
        if isinstance(item, (list, tuple)) and len(item) == 2 and item[0] == -1:
            codes.add(int(item[1]))  # (syscall return, errno)
        elif isinstance(item, (int, float)) and not isinstance(item, bool) and 0 < item < 200:
            codes.add(int(item))
    return codes
