"""No job runs with uid 0 (issue 34, item 1): under every kind of worker model code runs as an unprivileged
uid and gid with no groups, and reads the interpreter and its packages, however the harness's Python is
made readable to that uid (bound back in a mount namespace, or a root-owned mirror where none can be had)."""

from __future__ import annotations

import os

import pytest

from finharness.sandbox import Limits, Sandbox, access, launch
from tests.conftest import skip_or_fail_without_isolation

KINDS = ["bwrap", "kernel", "bare"]
IDENTITY = "import os\n(os.getresuid(), os.getresgid(), os.getgroups())"
SCIENTIFIC = "import numpy as np, pandas as pd\nfloat(pd.Series(np.arange(5)).sum())"


def _check_identity(box: Sandbox) -> None:
    for code in (IDENTITY, "import numpy\n" + IDENTITY):  # a plain worker, then a numpy+pandas one
        result = box.run(code)
        assert result.ok, result
        uids, gids, groups = result.value
        assert 0 not in uids and 0 not in gids and 0 not in groups, result.value
        if os.geteuid() == 0:
            assert len(set(uids)) == 1 and set(uids) == set(gids) and groups == []  # a uid of its own, no groups
        else:  # the user itself (mapped to itself in a user namespace), with no more groups than it has
            assert set(uids) == {float(os.getuid())} and set(groups) <= set(map(float, os.getgroups()))
    assert box.run(SCIENTIFIC).value == 10.0


@pytest.mark.parametrize("kind", KINDS)
def test_jobs_run_as_an_unprivileged_uid_under_every_kind(kind):
    skip_or_fail_without_isolation(kind)
    with Sandbox(pool_size=1, limits=Limits(), isolation=kind) as box:
        _check_identity(box)
        if os.geteuid() == 0:  # each worker has a uid of its own: two workers, two uids
            uids = {w.launch.uid for w in box._live}
            assert len(uids) == 2 and None not in uids and 0 not in uids


@pytest.mark.skipif(os.geteuid() != 0, reason="the mirror is for a root harness without a mount namespace")
@pytest.mark.parametrize("kind", ["kernel", "bare"])
def test_the_mirrored_python_serves_where_no_mount_namespace_can_be_had(kind, monkeypatch):
    """A container without CAP_SYS_ADMIN: the Python installation mirrored into a root-owned cache."""
    skip_or_fail_without_isolation(kind)
    view = access.python_view("copy")
    assert view.how == "copy" and view.executable.startswith(str(access.COPY_PARENT) + "/")
    assert access.reachable_by_others([view.executable, *view.roots]) and os.stat(view.zygote).st_mode & 0o004
    monkeypatch.setattr(launch, "python_view", lambda: view)
    with Sandbox(pool_size=1, limits=Limits(), isolation=kind) as box:
        _check_identity(box)
        assert box.run("import sys\nsys.executable").value == view.executable


def test_root_refuses_to_run_jobs_when_the_python_cannot_be_made_readable(monkeypatch):
    if os.geteuid() != 0:
        assert launch.uid_problem() is None  # a normal user's jobs run as that user
        return

    def unreadable():
        raise OSError("no way to show the interpreter to another uid")

    monkeypatch.setattr(launch, "python_view", unreadable)
    assert "cannot be made readable" in launch.uid_problem()
    with pytest.raises(launch.SandboxUnavailable, match="no job may run as uid 0"):
        launch.plan_launch(Limits(), isolation="bare", audit=True)


THREADS = ("import threading\nstop = threading.Event()\nanswer = 0\ntry:\n    for _ in range(50):\n"
           "        threading.Thread(target=stop.wait, daemon=True).start()\n        answer += 1\n"
           "except RuntimeError:\n    pass\nstop.set()")


@pytest.mark.parametrize("kind", KINDS)
def test_the_process_limit_counts_the_worker_alone(kind):
    """nproc counts the zygote and the job's own process, as RLIMIT_NPROC does (a pids cgroup alike): a job
    may start nproc - 2 threads, however many processes the harness's uid has; a worker starts even at 1."""
    skip_or_fail_without_isolation(kind)
    if os.geteuid() != 0 and kind != "bwrap" and not launch._user_namespace():
        pytest.skip("no user namespace for this user: RLIMIT_NPROC counts all of its processes")
    for nproc, threads in ((5, 3), (1, 0)):
        with Sandbox(pool_size=1, limits=Limits(nproc=nproc), isolation=kind) as box:
            assert box.run(THREADS, mode="answer_variable").value == threads
            assert box.run("6 * 7").value == 42.0
