"""How a worker started by root without bubblewrap reads the Python installation as an unprivileged uid.

No job runs as uid 0: a worker started by root drops to a uid of its own before Python starts. That uid
must read the interpreter, its standard library, the venv's site-packages and the zygote's script, which
often sit under a home that only root may enter (pyenv under /root, mode 0700). `python_view()` decides
once per harness, in this order:

- ``readable``: every one of them is readable by others already; nothing to do.
- ``bind``: a private mount namespace can be had (root with CAP_SYS_ADMIN: `unshare --mount`); a 0755
  tmpfs covers each closed directory and the needed directories are bound back under it (`bind_script`).
  Nothing is copied, nothing goes stale, and the rest of the closed home stays hidden. Preferred.
- ``copy``: no mount namespace (a container without CAP_SYS_ADMIN): the needed directories are mirrored
  into a root-owned cache (/var/cache/finharness), hard-linked where they share a file system with the
  cache (no data copied; the inodes stay root's and read-only to the job's uid), copied elsewhere; the
  interpreter is started from the mirror with -S and the site directories added by the zygote. The mirror
  is keyed by what it holds (paths, version, directory times), so an upgraded venv gets a new one.
  Without a venv's site-packages bloat: the base installation's own site-packages and test suite are left
  out unless they are on sys.path.

bubblewrap needs none of this: it binds the Python roots into its own mount namespace.
"""

from __future__ import annotations

import functools
import hashlib
import os
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

ZYGOTE_SOURCE = Path(__file__).with_name("_zygote.py")
COPY_PARENT = Path("/var/cache/finharness")


@dataclass(frozen=True)
class PythonView:
    """What a worker's unprivileged uid runs and reads."""

    how: str
    """'readable', 'bind' or 'copy'."""

    executable: str
    """The interpreter to start."""

    zygote: str
    """The zygote script."""

    roots: tuple[str, ...]
    """Directories of the Python installation that jobs read (Landlock's and the audit guard's read roots)."""

    site_dirs: tuple[str, ...] = ()
    """copy: site directories the zygote adds (the mirrored interpreter starts with -S)."""

    hidden: tuple[str, ...] = ()
    """bind: closed directories covered by a 0755 tmpfs."""

    rebind: tuple[str, ...] = ()
    """bind: directories bound back under them."""

    env: dict[str, str] = field(default_factory=dict)
    """Variables the interpreter needs (copy: LD_LIBRARY_PATH to the mirrored libpython)."""

    @property
    def interpreter_flags(self) -> tuple[str, ...]:
        return ("-I", "-S", "-B") if self.how == "copy" else ("-I", "-B")


def python_roots() -> tuple[str, ...]:
    """Directories of the running Python that a worker must read: installation, venv, site-packages."""
    roots = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix)}
    roots |= {os.path.realpath(entry) for entry in _site_dirs()}
    # Drop roots nested in other roots: binding the outer one covers them.
    ordered = sorted(roots)
    return tuple(r for r in ordered if not any(r != o and r.startswith(o + "/") for o in ordered))


def _site_dirs() -> list[str]:
    return [entry for entry in sys.path if entry and "site-packages" in entry and os.path.isdir(entry)]


def reachable_by_others(paths) -> bool:
    """Whether a uid with no groups can read `paths` (directories: every parent searchable, itself listable)."""
    for path in paths:
        for part in (Path(path), *Path(path).parents):
            try:
                mode = part.stat().st_mode
            except OSError:
                return False
            if not mode & 0o001 or (part == Path(path) and part.is_dir() and not mode & 0o004):
                return False
    return True


def closed_ancestor(path: str) -> str | None:
    """The highest directory above `path` that others cannot enter, if any."""
    for parent in reversed(Path(path).parents):
        if str(parent) != "/" and not reachable_by_others([str(parent)]):
            return str(parent)
    return None


def _needed() -> list[str]:
    return [*python_roots(), str(ZYGOTE_SOURCE.parent)]


def _zygote_readable() -> bool:
    return bool(ZYGOTE_SOURCE.stat().st_mode & 0o004)


@functools.cache
def can_mount_namespace() -> bool:
    """Whether this process may make a private mount namespace and mount in it (root with CAP_SYS_ADMIN)."""
    unshare = shutil.which("unshare")
    if unshare is None or os.geteuid() != 0:
        return False
    target = tempfile.mkdtemp(prefix="finharness-mount-probe-")
    try:
        done = subprocess.run([unshare, "--mount", "--propagation", "private", "--", "mount", "-t", "tmpfs", "-o",
                               "size=16k", "finharness-probe", target], env={"PATH": "/usr/bin:/bin:/usr/sbin:/sbin"},
                              capture_output=True, timeout=30)
        return done.returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False
    finally:
        os.rmdir(target)


def bind_script(view: PythonView, stash: str) -> str:
    """Shell lines run as root in the worker's fresh mount namespace, before the uid drop: each needed
    directory is bound aside, the closed directories covered, the needed ones moved back in place."""
    quote = shlex.quote
    lines = ["set -e", f"mkdir -m 0700 {quote(stash)}"]
    for i, root in enumerate(view.rebind):
        lines += [f"mkdir {quote(stash)}/{i}", f"mount --rbind {quote(root)} {quote(stash)}/{i}"]
    lines += [f"mount -t tmpfs -o mode=0755,size=1m,nosuid,nodev finharness-python {quote(h)}" for h in view.hidden]
    for i, root in enumerate(view.rebind):
        lines += [f"mkdir -p {quote(root)}", f"mount --move {quote(stash)}/{i} {quote(root)}", f"rmdir {quote(stash)}/{i}"]
    return "\n".join([*lines, f"rmdir {quote(stash)}", 'exec "$@"'])


@functools.cache
def python_view(force: str | None = None) -> PythonView:
    """How workers started by root read the Python installation here (probed once). Raises OSError when no
    way works (then the harness refuses to run jobs as root rather than run them as uid 0)."""
    plain = PythonView("readable", sys.executable, str(ZYGOTE_SOURCE), python_roots())
    needed = _needed()
    if force is None and reachable_by_others(needed) and _zygote_readable():
        return plain
    # Binding helps only when what is closed is a parent, not the directories themselves.
    own_modes_open = all(os.stat(root).st_mode & 0o005 == 0o005 for root in needed) and _zygote_readable()
    if force in (None, "bind") and own_modes_open and can_mount_namespace():
        hidden = sorted({h for h in map(closed_ancestor, needed) if h})
        # A hidden directory nested in another is covered by the outer tmpfs.
        hidden = [h for h in hidden if not any(h != o and h.startswith(o + "/") for o in hidden)]
        rebind = [root for root in needed if any(root.startswith(h + "/") for h in hidden)]
        return PythonView("bind", sys.executable, str(ZYGOTE_SOURCE), python_roots(), hidden=tuple(hidden),
                          rebind=tuple(rebind))
    return _copy_view()


def _copy_key() -> str:
    base = os.path.realpath(sys.base_prefix)
    parts = [sys.version, os.path.realpath(sys.executable), base, *_site_dirs(), str(ZYGOTE_SOURCE)]
    for path in (base, sysconfig.get_paths()["stdlib"], *_site_dirs()):
        try:
            parts.append(str(os.stat(path).st_mtime_ns))
        except OSError:
            parts.append("-")
    parts.append(hashlib.sha256(ZYGOTE_SOURCE.read_bytes()).hexdigest())
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16]


def _check_private(directory: Path) -> None:
    """A directory root alone may change (else another user could plant the interpreter jobs run)."""
    info = directory.lstat()
    if not directory.is_dir() or directory.is_symlink() or info.st_uid != 0 or info.st_mode & 0o022:
        raise OSError(f"{directory} is not a directory that only root can write")


def _copy_view() -> PythonView:
    base = os.path.realpath(sys.base_prefix)
    executable = os.path.realpath(sys.executable)
    if not executable.startswith(base + "/"):
        raise OSError(f"the interpreter {executable} is not inside its installation {base}")
    COPY_PARENT.mkdir(mode=0o755, parents=True, exist_ok=True)
    for directory in (*reversed(COPY_PARENT.parents), COPY_PARENT):
        if str(directory) != "/":
            _check_private(directory)
    mirror = COPY_PARENT / f"sandbox-python-{_copy_key()}"
    stdlib = os.path.realpath(sysconfig.get_paths()["stdlib"])
    site_dirs = [os.path.realpath(entry) for entry in _site_dirs()]
    # The base installation without what jobs never import from it (its own site-packages, unless on
    # sys.path, and its test suite), then every site directory others cannot read.
    skip = {os.path.join(stdlib, "site-packages"), os.path.join(stdlib, "test")} - set(site_dirs)

    def in_base(path: str) -> bool:
        return path == base or path.startswith(base + "/")

    copied = [d for d in site_dirs if not in_base(d) and not reachable_by_others([d])]
    if not mirror.exists():
        building = Path(tempfile.mkdtemp(prefix=f"{mirror.name}.", dir=COPY_PARENT))
        try:
            for source in (base, *copied):
                _mirror(source, building, skip if source == base else set())
            shutil.copyfile(ZYGOTE_SOURCE, building / "zygote.py")
            for path in (building / "zygote.py", building):
                os.chmod(path, 0o644 if path.is_file() else 0o755)
            try:
                os.rename(building, mirror)
            except OSError:  # another harness made it first
                if not mirror.is_dir():
                    raise
        finally:
            if building.exists():
                shutil.rmtree(building, ignore_errors=True)
    _check_private(mirror)
    mapped = [str(mirror) + d if in_base(d) or d in copied else d for d in site_dirs]
    lib = str(mirror) + os.path.join(base, "lib")
    roots = (str(mirror) + base, *(m for m, d in zip(mapped, site_dirs) if not in_base(d)))
    return PythonView("copy", str(mirror) + executable, str(mirror / "zygote.py"), roots, site_dirs=tuple(mapped),
                      env={"LD_LIBRARY_PATH": lib} if os.path.isdir(lib) else {})


def _mirror(source: str, into: Path, skip: set[str]) -> None:
    """`source` rebuilt at into/<source>: directories 0755, files hard-linked (same file system, readable by
    others) or copied 0644/0755, symlinks kept (absolute ones into `source` pointed at the mirror)."""
    top = Path(str(into) + source)
    top.mkdir(mode=0o755, parents=True, exist_ok=True)
    for parent in (top, *top.parents):
        if parent == into:
            break
        os.chmod(parent, 0o755)
    same_device = os.stat(source).st_dev == os.stat(into).st_dev
    for directory, subdirectories, files in os.walk(source):
        subdirectories[:] = [d for d in subdirectories if os.path.join(directory, d) not in skip]
        target = Path(str(into) + directory)
        for name in subdirectories:
            path = os.path.join(directory, name)
            if os.path.islink(path):
                _link(path, target / name, source, into)
            else:
                (target / name).mkdir(mode=0o755, exist_ok=True)
                os.chmod(target / name, 0o755)
        for name in files:
            path = os.path.join(directory, name)
            if os.path.islink(path):
                _link(path, target / name, source, into)
                continue
            mode = os.stat(path).st_mode
            if same_device and mode & 0o004:
                try:
                    os.link(path, target / name)
                    continue
                except OSError:
                    pass
            shutil.copyfile(path, target / name)
            os.chmod(target / name, 0o755 if mode & 0o111 else 0o644)


def _link(path: str, target: Path, source: str, into: Path) -> None:
    destination = os.readlink(path)
    if destination.startswith(source + "/") or destination == source:
        destination = str(into) + destination
    os.symlink(destination, target)
