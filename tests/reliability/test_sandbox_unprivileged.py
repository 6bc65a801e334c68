"""The sandbox started by an unprivileged user, without bubblewrap (the `kernel` kind: seccomp + Landlock,
no mount or pid namespace, no cgroup; a user and network namespace where the kernel lets that user have
one): still no network, no host paths, no host processes.

The harness runs as a uid of its own. What it attacks belongs to that same uid, so the ordinary permission
checks would let every attack through: a TCP listener on 127.0.0.1, a secret file it owns, a victim
process of that uid whose environment holds the secret, a directory it may write. A baseline run outside
the sandbox shows each is reachable; inside, each must be refused. As root the test drops to a fresh uid
(setpriv) in a private mount namespace where a Python installation under a closed directory (/root) is
bound back readable; as a normal user it runs as itself. Where bubblewrap runs for that user too, the
same attacks are made under it.
"""

from __future__ import annotations

import json
import os
import random
import shlex
import shutil
import subprocess
import sys
import tempfile
import textwrap
import uuid
from pathlib import Path

import pytest

import finharness
from finharness.sandbox import kernel_problem
from finharness.sandbox.launch import _reachable_by_others, python_roots
from tests.conftest import skip_or_fail_without_kernel_layers
from tests.reliability.test_sandbox_attacks import Listener

SECRET = f"unprivileged-secret-{uuid.uuid4().hex}"

HARNESS = textwrap.dedent('''
    import json, os, socket, sys
    from finharness.sandbox import Limits, Sandbox, resolve_kind, SandboxUnavailable
    port, victim, secret_file, writable = json.loads(sys.argv[1])
    report = {"uid": os.getuid(), "baseline": {}, "runs": {}}
    # Outside the sandbox this uid reaches everything below.
    report["baseline"]["secret_file"] = open(secret_file).read()
    report["baseline"]["victim_environ"] = open(f"/proc/{victim}/environ").read()
    os.kill(victim, 0)
    report["baseline"]["signal_victim"] = "allowed"
    socket.create_connection(("127.0.0.1", port), timeout=2).close()
    report["baseline"]["connect"] = "connected"
    report["baseline"]["list_root"] = sorted(os.listdir("/"))[:3]
    attacks = {
        "connect": f"import socket\\nsocket.create_connection(('127.0.0.1', {port}), timeout=1)\\nanswer = 1",
        "read_secret_file": f"answer = open({secret_file!r}).read()",
        "read_victim_environ": f"answer = open('/proc/{victim}/environ').read()",
        "kill_victim": f"import os\\nos.kill({victim}, 9)\\nanswer = 1",
        "pidfd_kill_victim": f"import os, signal\\nsignal.pidfd_send_signal(os.pidfd_open({victim}), 9)\\nanswer = 1",
        "list_host_root": "import os\\nanswer = os.listdir('/')",
        "write_outside": f"answer = open({writable + '/escaped'!r}, 'w').write('x')",
        "run_a_shell": f"import os\\nanswer = os.system('touch {writable}/shell')",
    }
    inner = (f"import _xxsubinterpreters as i\\ntry:\\n    v = open({secret_file!r}).read()\\n"
             "except OSError as e:\\n    v = str(e)\\ni.channel_send(c, v)")
    attacks["subinterpreter_reads_secret"] = ("import _xxsubinterpreters as i\\nc = i.channel_create()\\n"
                                              f"sub = i.create()\\ni.run_string(sub, {inner!r}, shared={{'c': c}})\\n"
                                              "answer = i.channel_recv(c)")
    for kind in ("kernel", "bwrap"):
        try:
            resolve_kind(kind)
        except SandboxUnavailable as exc:
            report["runs"][kind] = str(exc)
            continue
        for audit in (True, False):
            with Sandbox(pool_size=1, isolation=kind, audit=audit, limits=Limits(memory_mb=512)) as box:
                results = {name: box.run(code, mode="answer_variable") for name, code in attacks.items()}
                report["runs"][box.isolation] = {name: [r.status, r.error_class, r.message, repr(r.value)]
                                                 for name, r in results.items()}
    print(json.dumps(report))
''')


def _unprivileged(uid: int, argv: list[str]) -> list[str]:
    """argv run as `uid` with no capabilities; as root, in a private mount namespace where every Python
    directory hidden behind a closed parent (e.g. /root, mode 0700) is bound back under a 0755 tmpfs."""
    if os.geteuid() != 0:
        return argv
    exposed = [*python_roots(), str(Path(finharness.__file__).resolve().parents[1])]
    hidden = sorted({_closed_ancestor(root) for root in exposed} - {None})
    stash = tempfile.mkdtemp(prefix="finharness-stash-")
    lines = ["set -e", "mount --make-rprivate /"]
    rebind = [root for root in exposed if any(root.startswith(h + "/") for h in hidden)]
    for i, root in enumerate(rebind):
        lines += [f"mkdir -p {stash}/{i}", f"mount --rbind {shlex.quote(root)} {stash}/{i}"]
    lines += [f"mount -t tmpfs -o mode=755 tmpfs {shlex.quote(h)}" for h in hidden]
    for i, root in enumerate(rebind):
        lines += [f"mkdir -p {shlex.quote(root)}", f"mount --rbind {stash}/{i} {shlex.quote(root)}"]
    lines.append(f"exec setpriv --reuid={uid} --regid={uid} --clear-groups --inh-caps=-all --bounding-set=-all -- "
                 + " ".join(shlex.quote(a) for a in argv))
    return ["unshare", "--mount", "--", "sh", "-c", "\n".join(lines)]


def _closed_ancestor(path: str) -> str | None:
    """The highest directory above `path` that others cannot search, if any."""
    for parent in reversed(Path(path).parents):
        if str(parent) != "/" and not _reachable_by_others([str(parent)]):
            return str(parent)
    return None


@pytest.fixture
def unprivileged_world(tmp_path_factory):
    """A uid, and what it owns: a private directory with a secret file, a victim process, a listener."""
    uid = os.getuid() if os.geteuid() != 0 else random.randrange(1_500_000, 1_900_000)
    home = tempfile.mkdtemp(prefix="finharness-unprivileged-")
    secret_file = Path(home) / "api_key.txt"
    secret_file.write_text(SECRET)
    script = Path(home) / "harness.py"
    script.write_text(HARNESS)
    for path in (home, secret_file, script):
        os.chown(path, uid, uid)
    os.chmod(home, 0o700)
    victim_argv = ["env", "-i", f"FINHARNESS_VICTIM_SECRET={SECRET}", "sleep", "600"]
    if os.geteuid() == 0:
        victim_argv = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--", *victim_argv]
    victim = subprocess.Popen(victim_argv)
    listener = Listener()
    yield {"uid": uid, "home": home, "secret_file": str(secret_file), "script": str(script), "victim": victim,
           "listener": listener}
    listener.close()
    victim.kill()
    victim.wait()
    shutil.rmtree(home, ignore_errors=True)


def test_an_unprivileged_harness_without_namespaces_reaches_no_network_path_or_process(unprivileged_world):
    skip_or_fail_without_kernel_layers(kernel_problem())
    world = unprivileged_world
    args = json.dumps([world["listener"].port, world["victim"].pid, world["secret_file"], world["home"]])
    argv = _unprivileged(world["uid"], [sys.executable, "-I", "-B", world["script"], args])
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300,
                          env={"PATH": "/usr/bin:/bin", "TMPDIR": "/tmp"})
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])

    assert report["uid"] == world["uid"] and (world["uid"] != 0)
    # Without the sandbox, this uid reaches every target.
    assert report["baseline"]["secret_file"] == SECRET and SECRET in report["baseline"]["victim_environ"]
    assert report["baseline"]["connect"] == "connected" and world["listener"].connections == 1
    kernel_runs = {label: runs for label, runs in report["runs"].items() if label.startswith("seccomp+landlock")}
    assert len(kernel_runs) == 2, report["runs"]  # with and without the audit guard
    for label, runs in report["runs"].items():
        if isinstance(runs, str):
            continue  # bubblewrap not available to this user: said why
        assert "memcg" not in label and "pids" not in label, label  # no cgroup of its own for this uid
        for name, (status, error_class, message, value) in runs.items():
            assert SECRET not in f"{message} {value}", (label, name)
            if name == "run_a_shell":  # refused by the guard, or system() could not start a shell (status 127)
                assert status == "error" or (status == "ok" and value != "0.0"), (label, status, value)
            elif name == "subinterpreter_reads_secret":  # refused by the guard, or the kernel refused the read
                assert (error_class == "SandboxViolation" if label.endswith("audit") else
                        status == "ok" and ("Permission denied" in value or "No such file" in value and
                                            label.startswith("bwrap"))), (label, status, value)
            else:
                assert status == "error" and error_class, (label, name, status, value)
                if not label.endswith("audit"):  # the kernel's own answer: seccomp EPERM, Landlock EACCES,
                    codes = ("[Errno 1]", "[Errno 13]") + (("[Errno 2]",) if label.startswith("bwrap") else ())
                    assert any(code in message for code in codes), (label, name, message)  # or no such path
    assert world["victim"].poll() is None, "the victim process was killed"
    assert world["listener"].connections == 1, "a sandboxed program connected to the host"
    assert not any((Path(world["home"]) / name).exists() for name in ("escaped", "shell"))
