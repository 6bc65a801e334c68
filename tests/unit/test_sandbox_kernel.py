"""The sandbox's kernel layers: the seccomp allow-list, Landlock's ruleset, the memory cgroup, and which
kind of worker each isolation choice gets (no silent downgrade)."""

from __future__ import annotations

import pytest

from finharness.sandbox import Limits, Sandbox, SandboxUnavailable, launch, resolve_kind, seccomp
from finharness.sandbox.cgroups import memory_problem
from tests.conftest import skip_or_fail, skip_or_fail_without_isolation


def test_the_allow_list_never_allows_what_it_names_as_refused():
    pyseccomp = pytest.importorskip("pyseccomp")
    allowed = set(seccomp.ALLOWED) | {name for name, _ in seccomp.conditional_rules(pyseccomp)}
    assert not allowed & set(seccomp.NAMED_REFUSALS)
    assert {"execve", "memfd_create", "pidfd_open", "pidfd_send_signal", "ptrace", "process_vm_readv", "mount",
            "unshare", "setns", "bpf", "keyctl", "io_uring_setup", "userfaultfd", "personality"} <= set(
        seccomp.NAMED_REFUSALS)
    program = seccomp.filter_program()
    assert len(program) % 8 == 0 and 50 < len(program) // 8 < 4096  # struct sock_filter[]: 8 bytes each


def test_a_job_holds_only_its_pipes_and_standard_streams():
    """The Landlock ruleset (shared by the zygote's jobs) and the zygote's other descriptors stay out of a job."""
    skip_or_fail_without_isolation("kernel")
    with Sandbox(pool_size=1, isolation="kernel", audit=False) as box:
        result = box.run("import os\nopen_fds = []\nfor fd in range(256):\n    try:\n        os.fstat(fd)\n"
                         "        open_fds.append(fd)\n    except OSError:\n        pass\nopen_fds")
    assert result.ok and len(result.value) == 5, result  # stdin, stdout, stderr (/dev/null), job and result pipes


def test_landlock_is_probed_and_named():
    skip_or_fail_without_isolation("kernel")
    assert launch.landlock_abi() >= 1
    assert launch.isolation_label("kernel", True).startswith("seccomp+landlock")
    fs, net, scopes = launch._zygote.landlock_rights(6)
    assert net and scopes and fs & (1 << 14)  # TCP, signal scoping and truncation handled from ABI 6


def test_memory_is_limited_as_memory_files_in_memory_included():
    """A tmpfs bigger than the memory limit: what a job writes there is memory, and the cgroup stops it."""
    skip_or_fail("MEMCG", memory_problem())
    skip_or_fail_without_isolation("bwrap")
    limits = Limits(memory_mb=400, tmpfs_mb=4096, file_mb=64, wall_s=20, cpu_s=10)
    with Sandbox(pool_size=1, limits=limits, isolation="bwrap", audit=False) as box:
        assert "memcg" in box.isolation
        result = box.run("chunk = b'x' * 2**25\nfor i in range(40):\n    with open(f'/tmp/f{i}', 'wb') as f:\n"
                         "        f.write(chunk)\nanswer = i", mode="answer_variable")
        assert (result.status, result.error_class) == ("memory", "MemoryLimit"), result
        assert "400 MB" in result.message
        assert box.run("6 * 7").value == 42.0  # the worker cleaned up (or was replaced) and runs again


def _pretend(monkeypatch, bwrap: str | None, kernel: str | None) -> None:
    monkeypatch.setattr(launch, "bwrap_problem", lambda: bwrap)
    monkeypatch.setattr(launch, "kernel_problem", lambda: kernel)
    monkeypatch.setattr(launch, "seccomp_problem", lambda: None)


def test_each_choice_gets_its_kind_or_a_refusal_naming_what_is_missing(monkeypatch):
    _pretend(monkeypatch, None, None)
    assert [resolve_kind(c) for c in ("auto", "bwrap", "kernel", "rlimits", "unsafe", "bare")] == [
        "bwrap", "bwrap", "kernel", "kernel", "bwrap", "bare"]
    _pretend(monkeypatch, "bwrap is not installed (Debian: apt-get install bubblewrap)", None)
    assert [resolve_kind(c) for c in ("auto", "kernel", "unsafe")] == ["kernel", "kernel", "kernel"]
    with pytest.raises(SandboxUnavailable, match="apt-get install bubblewrap"):
        resolve_kind("bwrap")
    _pretend(monkeypatch, "bwrap is not installed (Debian: apt-get install bubblewrap)", "the kernel has no Landlock")
    for choice in ("auto", "kernel"):
        with pytest.raises(SandboxUnavailable, match="no kernel-enforced isolation") as refused:
            resolve_kind(choice)
        assert "Landlock" in str(refused.value) and "'unsafe'" in str(refused.value)
    assert resolve_kind("unsafe") == "bare"
    with pytest.raises(ValueError, match="isolation must be one of"):
        resolve_kind("none")


def test_unsafe_falls_back_to_bare_only_with_its_warning(monkeypatch):
    _pretend(monkeypatch, "bwrap is not installed (Debian: apt-get install bubblewrap)", "the kernel has no Landlock")
    with pytest.raises(SandboxUnavailable):
        Sandbox(pool_size=1)
    with Sandbox(pool_size=1, isolation="unsafe") as box:
        assert box.kind == "bare" and box.isolation.startswith("unsafe+rlimits")
        assert "NO kernel-enforced isolation" in box.warning and "apt-get install bubblewrap" in box.warning
        assert box.run("1 + 1").value == 2.0
    with pytest.raises(ValueError, match="audit guard"):
        Sandbox(pool_size=1, isolation="bare", audit=False)


@pytest.mark.parametrize("version", [1, 2])
def test_worker_cgroup_files_in_both_versions(tmp_path, monkeypatch, version):
    """The files a worker cgroup writes and reads, on a stand-in directory (this machine has only one layout;
    the kernel makes these files when the cgroup directory is made, the stand-in's mkdir does here)."""
    from pathlib import Path

    from finharness.sandbox.cgroups import MemoryControl, WorkerCgroup

    names = (("memory.max", "memory.swap.max", "memory.events") if version == 2 else
             ("memory.limit_in_bytes", "memory.memsw.limit_in_bytes", "memory.oom_control"))
    real_mkdir = Path.mkdir

    def mkdir_like_the_kernel(path, *args, **kwargs):
        real_mkdir(path, *args, **kwargs)
        for name in names:
            (path / name).write_text("oom 0\noom_kill 0\n" if name.endswith(("events", "control")) else "max\n")

    monkeypatch.setattr(Path, "mkdir", mkdir_like_the_kernel)
    group = WorkerCgroup(MemoryControl(tmp_path, version), 512)
    monkeypatch.undo()
    limit, swap, events = (group.path / name for name in names)
    assert limit.read_text() == str(512 * 2**20)
    assert swap.read_text() == ("0" if version == 2 else str(512 * 2**20))  # no swapping instead of the limit
    group.set_limit(1024)
    assert limit.read_text() == str(1024 * 2**20)
    assert not group.oom_killed_since_last_asked()
    events.write_text("oom 1\noom_kill 1\n")
    assert group.oom_killed_since_last_asked() and not group.oom_killed_since_last_asked()
    assert group.procs_file == str(group.path / "cgroup.procs")
    for name in names:
        (group.path / name).unlink()
    group.remove()
    assert not group.path.exists()
