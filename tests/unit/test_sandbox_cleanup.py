"""A worker is clean or it is replaced (issue 34, item 2).

The zygote empties its scratch directory after every job with `remove_contents`: whatever modes, depth,
links or special files the job left, iteratively (no recursion limit, no PATH_MAX), never following a link
out. When anything survives, or the cleanup raises, the worker says so and exits, and the pool starts a
fresh one in its slot; the slot is kept even when that fresh one fails to start.

The removal tests run in a forked child that, as root, first drops to a fresh uid: a worker's cleanup runs
as such a uid, and root would walk through every mode barrier the tests build.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from finharness.sandbox import Limits, Sandbox, _zygote, launch, pool
from tests.conftest import skip_or_fail_without_isolation

AS_ROOT = os.geteuid() == 0
UID = random.randrange(3_100_000, 3_200_000) if AS_ROOT else os.getuid()
KINDS = ["bwrap", "kernel", "bare"]
LIMITS = Limits(cpu_s=2, wall_s=5, memory_mb=1024, nproc=16)


def in_child(function, *args):
    """function(*args) in a forked child (as UID when root); its JSON result, or RuntimeError with its error."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(read)
            if AS_ROOT:
                os.setgroups([])
                os.setgid(UID)
                os.setuid(UID)
            outcome = {"value": function(*args)}
        except BaseException as exc:  # noqa: BLE001 - everything goes back to the test
            outcome = {"error": f"{type(exc).__name__}: {exc}"}
        os.write(write, json.dumps(outcome).encode())
        os._exit(0)
    os.close(write)
    chunks = []
    while chunk := os.read(read, 1 << 16):
        chunks.append(chunk)
    os.close(read)
    os.waitpid(pid, 0)
    outcome = json.loads(b"".join(chunks))
    if "error" in outcome:
        raise RuntimeError(outcome["error"])
    return outcome["value"]


@pytest.fixture
def place():
    """A directory UID owns, in a parent it can enter: (top, outside) with `outside` beside `top`."""
    parent = tempfile.mkdtemp(prefix="finharness-cleanup-test-", dir="/tmp")
    top, outside = Path(parent, "scratch"), Path(parent, "outside")
    for path in (top, outside):
        path.mkdir()
    (outside / "keep.txt").write_text("kept")
    for path in (parent, top, outside, outside / "keep.txt"):
        os.chown(path, UID, UID)
    os.chmod(parent, 0o755)
    yield top, outside
    shutil.rmtree(parent)  # as root or the owner: nothing the test left can stop it


def plant_everything(top: str, outside: str) -> None:
    """What a job may leave: closed modes, a deep tree, names past PATH_MAX, links out, special files."""
    os.chdir(top)
    os.mkdir("write_only", 0o300)
    with open("write_only/message", "w") as note:
        note.write("for the next job")
    os.mkdir("closed")
    open("closed/message", "w").close()
    os.mkdir("closed/inner", 0)
    os.chmod("closed", 0)
    os.mkdir("read_only")
    open("read_only/message", "w").close()
    os.chmod("read_only", 0o500)
    fd = os.open(".", os.O_RDONLY)
    for i in range(3000):  # deeper than Python's recursion limit, longer than PATH_MAX
        name = f"{i}-" + "n" * 100 if i < 200 else "d"
        os.mkdir(name, dir_fd=fd)
        inner = os.open(name, os.O_RDONLY, dir_fd=fd)
        os.close(fd)
        fd = inner
    os.close(os.open("bottom", os.O_WRONLY | os.O_CREAT, 0, dir_fd=fd))
    os.mkdir("bottom_closed", 0, dir_fd=fd)
    os.close(fd)
    os.symlink(outside, "link_to_outside_directory")
    os.symlink(os.path.join(outside, "keep.txt"), "link_to_outside_file")
    os.symlink("loop", "loop")
    os.link(os.path.join(outside, "keep.txt"), "hard_link_to_outside")
    os.mkfifo("fifo")
    open("no_mode", "w").close()
    os.chmod("no_mode", 0)
    os.chmod(".", 0o500)  # the directory itself left unwritable by its owner


def plant_and_remove(top: str, outside: str):
    plant_everything(top, outside)
    os.chdir("/")
    left = _zygote.remove_contents(top)
    return left, os.listdir(top)


def test_remove_contents_empties_whatever_a_job_left_and_follows_no_link(place):
    top, outside = place
    left, remaining = in_child(plant_and_remove, str(top), str(outside))
    assert (left, remaining) == ([], [])
    assert (outside / "keep.txt").read_text() == "kept" and os.listdir(outside) == ["keep.txt"]


def test_remove_contents_opens_a_top_directory_its_owner_closed(place):
    top, outside = place

    def close_and_remove(top: str):
        os.mkdir(os.path.join(top, "inner"), 0)
        os.chmod(top, 0)
        return _zygote.remove_contents(top), os.listdir(top)

    assert in_child(close_and_remove, str(top)) == [[], []]


@pytest.mark.skipif(not AS_ROOT, reason="only another uid's file survives its owner's cleanup")
def test_remove_contents_names_what_it_cannot_remove(place):
    top, _ = place
    foreign = top / "a" / "foreign"
    foreign.parent.mkdir()
    os.chown(foreign.parent, UID, UID)
    foreign.mkdir()  # root's, in a directory of UID's: UID cannot empty it
    (foreign / "file").write_text("x")
    (top / "a" / "mine").write_text("x")
    os.chown(top / "a" / "mine", UID, UID)
    assert in_child(_zygote.remove_contents, str(top)) == ["a/foreign/file", "a/foreign", "a"]
    assert sorted(p.name for p in (top / "a").iterdir()) == ["foreign"]


def _prepared_config(scratch: str) -> dict:
    return {"scratch_dir": scratch, "scratch_mode": 0o700, "protocol_fds": [], "pid_namespace": False,
            "keep": []}


def prepare_and_clean(scratch: str, sabotage: str):
    """A real pre-forked job child, then the zygote's cleanup after it; what clean_up says."""
    config = _prepared_config(scratch)
    child = _zygote._Prepared(config)
    if sabotage == "mode":  # the job closed its scratch directory: set back, then emptied
        os.chmod(scratch, 0)
    elif sabotage == "swapped":  # the scratch directory replaced by a link: cleanup cannot go on
        os.rename(scratch, scratch + ".moved")
        os.symlink(scratch + ".moved", scratch)
    clean = _zygote.clean_up(child, config)
    return clean, oct(os.lstat(scratch).st_mode & 0o7777), os.path.islink(scratch)


@pytest.mark.parametrize("sabotage, expected", [("none", [True, "0o700", False]),
                                                ("mode", [True, "0o700", False]),
                                                ("swapped", [False, "0o777", True])])
def test_clean_up_says_clean_only_when_it_could_finish(place, sabotage, expected):
    top, _ = place
    os.chmod(top, 0o700)
    assert in_child(prepare_and_clean, str(top), sabotage) == expected
    if sabotage == "none":
        assert os.listdir(top) == []


@pytest.mark.skipif(not AS_ROOT, reason="only another uid's file survives its owner's cleanup")
def test_clean_up_says_unclean_when_something_survives(place):
    top, _ = place
    os.chmod(top, 0o700)
    (top / "foreign").mkdir()
    (top / "foreign" / "file").write_text("x")
    assert in_child(prepare_and_clean, str(top), "none")[0] is False


def test_the_harness_removes_a_swapped_in_link_without_following_it(place):
    top, outside = place
    shutil.rmtree(top)
    top.symlink_to(outside)
    launch.remove_scratch(str(top))
    assert not os.path.lexists(top) and (outside / "keep.txt").read_text() == "kept"


# ------------------------------------------------------------------ the pool: replaced, slot kept


def _plain_worker(box: Sandbox) -> pool._Worker:
    (worker,) = [w for w in box._live if w.tier == "plain"]
    assert worker.is_clean(10)  # the cleanup after the last job is over before anything is planted
    return worker


def _zygote_host_pid(worker: pool._Worker) -> int:
    """The zygote's pid on the host: the process below the bubblewrap worker's root whose parent is
    bubblewrap itself (its pid-namespace init)."""
    parents, commands = {}, {}
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            commands[int(entry)] = Path(f"/proc/{entry}/cmdline").read_bytes()
            parents[int(entry)] = int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
    below, frontier = set(), {worker.process.pid}
    while frontier:
        frontier = {pid for pid, parent in parents.items() if parent in frontier} - below
        below |= frontier
    def program(pid: int) -> bytes:
        return os.path.basename(commands.get(pid, b"").split(b"\0")[0])

    (zygote,) = [pid for pid in below if program(pid) != b"bwrap" and program(parents[pid]) == b"bwrap"]
    return zygote


def plant_a_survivor(kind: str, worker: pool._Worker) -> str | None:
    """Something the worker's cleanup cannot remove, put into its scratch directory from the host; None where
    this harness can make nothing of the kind (a normal user owns everything its workers can touch)."""
    if kind == "kernel":
        target = Path(worker.launch.scratch_dir)  # read-only to the worker itself (Landlock)
    elif not AS_ROOT:
        return None
    elif kind == "bare":
        target = Path(worker.launch.scratch_dir)
    else:  # bubblewrap's private /tmp, reached through the zygote's root
        target = Path(f"/proc/{_zygote_host_pid(worker)}/root/tmp")
    (target / "survivor").mkdir()  # root's (or, as a normal user, in a directory the worker may only read)
    (target / "survivor" / "file").write_text("x")
    return str(target / "survivor")


@pytest.mark.parametrize("kind", KINDS)
def test_a_worker_whose_cleanup_leaves_something_is_replaced_in_its_slot(kind):
    skip_or_fail_without_isolation(kind)
    with Sandbox(pool_size=1, limits=LIMITS, isolation=kind) as box:
        assert box.run("6 * 7").value == 42.0
        worker = _plain_worker(box)
        if plant_a_survivor(kind, worker) is None:
            pytest.skip("a normal user's bubblewrap or bare worker owns everything the harness could plant")
        pids = set(box.worker_pids())
        assert box.run("1 + 1").value == 2.0  # runs; its cleanup then finds the survivor and the worker exits
        assert box.run("2 + 2").value == 4.0  # on a fresh worker in the same slot
        assert worker.process.poll() is not None and worker not in box._live
        now = set(box.worker_pids())
        assert len(now) == 2 and len(now & pids) == 1  # the scientific worker stayed, the plain one is new
        if worker.launch.scratch_dir:
            assert not os.path.lexists(worker.launch.scratch_dir)  # removed from the host with the worker


@pytest.mark.parametrize("kind", ["kernel", "bare"])
def test_a_worker_whose_cleanup_raises_is_replaced_and_the_link_removed(kind):
    skip_or_fail_without_isolation(kind)
    with Sandbox(pool_size=1, limits=LIMITS, isolation=kind) as box:
        assert box.run("6 * 7").value == 42.0
        worker = _plain_worker(box)
        scratch = worker.launch.scratch_dir
        os.rename(scratch, scratch + ".moved")
        os.symlink(scratch + ".moved", scratch)
        try:
            assert box.run("1 + 1").value == 2.0
            assert box.run("2 + 2").value == 4.0
            assert worker.process.poll() is not None and len(box.worker_pids()) == 2
            assert not os.path.lexists(scratch)
        finally:
            shutil.rmtree(scratch + ".moved", ignore_errors=True)


def test_the_slot_is_kept_when_the_replacement_cannot_start(monkeypatch):
    skip_or_fail_without_isolation("bwrap")
    with Sandbox(pool_size=1, limits=LIMITS, isolation="bwrap") as box:
        assert box.run("6 * 7").value == 42.0
        worker = _plain_worker(box)
        worker.process.kill()  # the worker is lost; its successor is started at the next run
        worker.process.wait()
        real = pool.plan_launch

        def cannot_start(*args, **kwargs):
            raise OSError("no start")

        monkeypatch.setattr(pool, "plan_launch", cannot_start)
        with pytest.raises(OSError, match="no start"):
            box.run("1 + 1")
        monkeypatch.setattr(pool, "plan_launch", real)
        assert box.run("2 + 2").value == 4.0  # the slot was kept: a worker started in it
        assert len(box.worker_pids()) == 2


@pytest.mark.parametrize("kind", ["kernel", "bare"])
def test_a_killed_harness_leaves_no_scratch_directory_behind_the_next_one(kind):
    """SIGKILL leaves the harness no close(): the next harness's first worker removes what it left on the host."""
    skip_or_fail_without_isolation(kind)
    script = ("import json, time\nfrom finharness.sandbox import Sandbox\n"
              f"box = Sandbox(pool_size=1, isolation={kind!r})\n"
              "print(json.dumps([w.launch.scratch_dir for w in box._live]), flush=True)\ntime.sleep(120)\n")
    harness = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        left = json.loads(harness.stdout.readline())
    finally:
        harness.kill()
        harness.wait()
    assert len(left) == 2 and all(os.path.isdir(path) and f"-{harness.pid}-" in path for path in left)
    launch._remove_stale_scratch.cache_clear()  # as in a harness that starts now
    with Sandbox(pool_size=1, limits=LIMITS, isolation=kind) as box:
        assert box.run("6 * 7").value == 42.0
    assert not any(os.path.lexists(path) for path in left)
