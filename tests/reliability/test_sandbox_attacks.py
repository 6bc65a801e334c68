"""Hostile programs (tests/reliability/sandbox_attacks.py) under every isolation the project offers: each
must be contained or refused, leave no trace on the host, and be recorded with its reason; with the audit
guard off, the errno of each refusal must name the kernel layer that stopped it.

Configurations (sandbox_attacks.CONFIGS): ``bwrap+audit`` (the default), ``bwrap`` (its kernel layers
alone: namespaces, seccomp, Landlock, memory cgroup), ``kernel+audit`` and ``kernel`` (seccomp and
Landlock without namespaces: what runs where bubblewrap cannot), and ``bare`` (rlimits + the audit guard:
what only sandbox 'unsafe' ever falls back to). For ``bare`` the suite also checks the known escapes
(`Attack.leaks`): if one stops escaping, the documentation of 'unsafe' is out of date.

After every attack the host is checked: no marker file in /tmp or the repository, no connection to the
listening socket, no planted secret in anything the program returned, the victim process (a real host
process whose environment holds the secret) still alive, no process left under the worker, and the
sandbox still runs a normal program correctly. Where bubblewrap or the kernel layers cannot run (and
FINHARNESS_REQUIRE_BWRAP / _KERNEL / _ALL is not set) those configurations are left to ``-m slow``.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
import uuid
from pathlib import Path

import pytest

from finharness.sandbox import Limits, Sandbox, bwrap_problem, kernel_problem
from finharness.sandbox.launch import python_roots
from tests.conftest import required, skip_or_fail_without_isolation
from tests.reliability.sandbox_attacks import (
    ATTACKS,
    CONFIGS,
    NPROC,
    READER,
    refusal_errno,
    stopped_by,
    value_errnos,
)

REPO = Path(__file__).resolve().parents[2]
SECRET = f"fake-secret-{uuid.uuid4().hex}"
MARK = uuid.uuid4().hex[:12]
LIMITS = Limits(cpu_s=1, wall_s=2, memory_mb=512, file_mb=1, nproc=NPROC, tmpfs_mb=16)
WATCHED = (os.__file__, "/usr/share/zoneinfo/Etc/UTC", "/usr/bin/env")
"""Host files whose mode, owner and times no job may change (the planted secret file is watched too)."""


class Listener:
    """A TCP server on 127.0.0.1 that counts connections (there must be none)."""

    def __init__(self):
        self.server = socket.create_server(("127.0.0.1", 0))
        self.server.settimeout(0.2)
        self.port = self.server.getsockname()[1]
        self.connections = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self):
        while not self._stop.is_set():
            try:
                conn, _ = self.server.accept()
            except (TimeoutError, OSError):
                continue
            self.connections += 1
            conn.close()

    def close(self):
        self._stop.set()
        self._thread.join()
        self.server.close()


class Victim:
    """A real host process (same uid as the harness) whose environment holds the secret."""

    def __init__(self):
        self.process = None
        self.restart()

    def restart(self) -> None:
        self.stop()
        self.process = subprocess.Popen(["sleep", "600"], env={"FINHARNESS_VICTIM_SECRET": SECRET})

    @property
    def pid(self) -> int:
        return self.process.pid

    def alive(self) -> bool:
        """Running, and no kill on its way: a signal sent just before a job ended may not be delivered yet."""
        if self.process.poll() is not None:
            return False
        try:
            with open(f"/proc/{self.pid}/status") as status:
                fields = dict(line.split(":", 1) for line in status if ":" in line)
        except OSError:
            return False
        pending = int(fields.get("SigPnd", "0"), 16) | int(fields.get("ShdPnd", "0"), 16)
        return not pending & (1 << (signal.SIGKILL - 1)) and fields.get("State", "R").split()[0] not in "ZX"

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()


def attributes(paths) -> dict[str, tuple]:
    """Mode, owner, modification and change times of each file (a symlink's target): ctime moves with any
    chmod, chown or utime, even one that sets the old values again."""
    found = {}
    for path in paths:
        info = os.stat(path)
        found[str(path)] = (info.st_mode, info.st_uid, info.st_gid, info.st_mtime_ns, info.st_ctime_ns)
    return found


@contextlib.contextmanager
def host_world(directory: Path):
    """What the attacks aim at: a secret file in `directory`, a listener, a victim process, watched files."""
    os.environ["FINHARNESS_TEST_SECRET"] = SECRET  # set before any sandbox exists
    secret_file = directory / "api_key.txt"
    secret_file.write_text(SECRET)
    listener, victim = Listener(), Victim()
    watched = (*WATCHED, str(secret_file))
    try:
        yield {"listener": listener, "secret_file": secret_file, "victim": victim, "watched": watched,
               "attributes": attributes(watched)}
    finally:
        listener.close()
        victim.stop()
        os.environ.pop("FINHARNESS_TEST_SECRET", None)


@pytest.fixture(scope="module")
def host(tmp_path_factory):
    with host_world(tmp_path_factory.mktemp("secret")) as world:
        yield world


def _runs_here(kind: str) -> bool:
    if kind == "bwrap":
        return bwrap_problem() is None or required("BWRAP")
    if kind == "kernel":
        return kernel_problem() is None or required("KERNEL")
    return True


_PARAMS = [pytest.param(name, marks=() if _runs_here(kind) else pytest.mark.slow)
           for name, (kind, _) in CONFIGS.items()]


@pytest.fixture(scope="module", params=_PARAMS)
def sandbox(request, host):
    kind, audit = CONFIGS[request.param]
    skip_or_fail_without_isolation(kind)
    with Sandbox(pool_size=1, limits=LIMITS, isolation=kind, audit=audit) as box:
        assert box.kind == kind and box.isolation.endswith("audit") == audit
        box.config_name = request.param
        yield box


def _descendants(root: int) -> set[int]:
    parents = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as stat:
                    parents[int(entry)] = int(stat.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    found, frontier = set(), {root}
    while frontier:
        frontier = {pid for pid, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def _host_traces() -> list[Path]:
    candidates = [*Path("/tmp").glob(f"{MARK}*"), *REPO.glob(f"{MARK}*"), Path(f"/{MARK}-cd")]
    return [path for path in candidates if path.exists()]


def _expected_process_count(box: Sandbox) -> int:
    # bwrap: memory-cgroup shell (exec'd away) -> outer bwrap -> init bwrap -> zygote -> pre-forked child;
    # without bwrap the zygote is the root and has its pre-forked child.
    return 3 if box.kind == "bwrap" else 1


def host_leaks(result, host, attack, connections_before: int) -> list[str]:
    """What of the attack reached the host (cleaning up what it left there)."""
    leaks = []
    traces = _host_traces()
    if traces:
        leaks.append("marker file")
        for path in traces:
            path.unlink()
    if host["listener"].connections > connections_before:
        leaks.append("connection")
    if any(SECRET in text for text in (repr(result.value), result.stdout, result.message or "")):
        leaks.append("secret in output")
    if attack.victim and not host["victim"].alive():
        leaks.append("victim killed")
        host["victim"].restart()
    if attack.leak_if is not None and (leak := attack.leak_if(result)):
        leaks.append(leak)
    if "watched" in host and (now := attributes(host["watched"])) != host["attributes"]:
        leaks.append("host file changed")
        for path, (mode, uid, gid, mtime, _) in host["attributes"].items():  # put them back
            if now[path] != host["attributes"][path]:
                os.chown(path, uid, gid)
                os.chmod(path, mode & 0o7777)
                os.utime(path, ns=(mtime, mtime))
        host["attributes"] = attributes(host["watched"])
    return leaks


def read_what_was_left(box: Sandbox) -> list:
    """What a later, different program on the same worker finds of what the last one left."""
    result = box.run(READER.format(mark=MARK), mode="answer_variable")
    assert result.ok, result
    return result.value


def run_attack(box: Sandbox, host, attack):
    """Run one attack; (result, leaks)."""
    code = attack.code.format(port=host["listener"].port, mark=MARK, repo=REPO, secret_file=host["secret_file"],
                              victim=host["victim"].pid)
    connections = host["listener"].connections
    result = box.run(code, mode="answer_variable")
    return result, host_leaks(result, host, attack, connections)


@pytest.mark.parametrize("attack", ATTACKS, ids=[attack.name for attack in ATTACKS])
def test_attack_is_contained_and_leaves_no_trace(sandbox, host, attack):
    config = sandbox.config_name
    result, leaks = run_attack(sandbox, host, attack)
    outcome = (result.status, result.error_class)
    expected = attack.expected(config)
    if expected is not None:
        assert any(outcome[0] == status and (cls is None or outcome[1] == cls) for status, cls in expected), (
            f"{attack.name}: got {outcome} ({result.message}), expected one of {expected}")
    if result.status != "ok":
        assert result.error_class and result.message, "every failure is recorded with its reason"
    assert result.isolation == sandbox.isolation
    kind, audit = CONFIGS[config]
    if not audit and kind in attack.errno:
        # The layer that refused: the errno of the failure, or of each operation the program reported.
        seen = value_errnos(result.value) if result.ok else {refusal_errno(result.message)}
        assert seen and seen <= set(attack.errno[kind]), (
            f"{attack.name}: refused with errno {seen} ({stopped_by(result)}), expected {attack.errno[kind]}; "
            f"{result.message or result.value}")

    if attack.name == "patch_the_harness_through_sys_modules":
        assert result.value == 42.0  # the program's own patches cannot forge its result
    if attack.name == "read_ssh_keys" and result.ok:
        # Only the way to the Python installation may show under /root, nothing else of the host's.
        visible = {Path(root).relative_to("/root").parts[0] for root in python_roots() if root.startswith("/root/")}
        assert set(result.value) <= visible, result.value
    if attack.name == "raw_system_calls_through_ctypes" and result.ok:
        assert all(ret == -1 for ret, _ in result.value.values()), result.value
    assert leaks == list(attack.leaks.get(config, ())), f"{attack.name} under {config}: reached the host: {leaks}"
    if attack.plants:
        assert read_what_was_left(sandbox) == [], f"{attack.name} under {config}: the next job found it"
    # The sandbox still works, and nothing the attack started survives in it.
    follow_up = sandbox.run("import os\n(6 * 7, os.getcwd() == os.path.realpath('.'), sorted(os.listdir('.')))")
    assert follow_up.value == [42.0, True, []], follow_up
    expected_count = _expected_process_count(sandbox)
    deadline = time.monotonic() + 5
    counts = []
    while time.monotonic() < deadline:
        counts = [len(_descendants(pid)) for pid in sandbox.worker_pids()]
        if counts and set(counts) == {expected_count}:
            break
        time.sleep(0.05)
    assert counts and set(counts) == {expected_count}, f"processes under each worker: {counts}"


def test_the_suite_is_broad_enough():
    assert len(ATTACKS) >= 50
    assert len({attack.name for attack in ATTACKS}) == len(ATTACKS)


def test_victims_are_real_host_processes_holding_the_secret(host):
    # What the environ attacks would read if nothing stopped them.
    victim = host["victim"]
    with open(f"/proc/{victim.pid}/environ", "rb") as environ:
        assert SECRET.encode() in environ.read()
    assert shutil.which("sleep") and victim.alive()
