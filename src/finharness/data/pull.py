"""Filling a data root with one dataset: from its upstream host, a local mirror, or an HTTP mirror.

Every file is written to a partial file beside its target (`.NAME.part`), checked, and only then renamed into
place (atomic on one file system): a data root never holds a file with the wrong bytes under a registered name.
The check is the registered sha256; for a file registered without one (see registry.py), the git blob id in the
tree of the pinned commit (GitHub) or the LFS sha256 the Hub sends for the pinned commit, after which its size
and sha256 are recorded in the registry lock and checked by every later pull and `verify`. Files already present
and verified are skipped. A download cut off mid-file keeps its partial file and continues it with an HTTP
Range request, at once and on the next pull. An archive registered with `unpack` is unpacked beside itself.

Hugging Face Hub datasets go through huggingface_hub and its cache, which honour HF_ENDPOINT, HF_TOKEN,
HF_HOME / HF_HUB_CACHE and HF_HUB_OFFLINE (read here at each pull, not when huggingface_hub was imported).
$FINHARNESS_GITHUB_RAW replaces https://raw.githubusercontent.com in registered URLs (a mirror of that host).

Tasks that need a dataset the data root lacks call `pull_on_first_use`, which says so on stderr and pulls;
$FINHARNESS_NO_PULL=1 (`finharness run --no-pull`) forbids it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import sys
import threading
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Callable, Iterable, Iterator
from urllib.parse import quote, urlsplit

from .errors import DataError
from .registry import (
    FULL_COMMIT,
    GITHUB_RAW,
    DataFile,
    DatasetSource,
    check_file,
    get,
    human_size,
    lock_path,
    locked_entry,
    record,
    resolve_data_dir,
    resolved,
    sha256_file,
)

CHUNK = 1 << 20
HTTP_TIMEOUT_S = 60.0
RESUME_ATTEMPTS = 5
"""Tries per file when a download is cut off (each continues where the last one stopped)."""
NO_NETWORK_HINT = "offline? copy from a mirror laid out like the data root: `finharness data pull NAME --from DIR`"
NO_PULL_ENV = "FINHARNESS_NO_PULL"
GITHUB_RAW_ENV = "FINHARNESS_GITHUB_RAW"
_TRUE = ("1", "true", "yes", "on")


@dataclass(frozen=True)
class PullReport:
    """What one pull did."""

    name: str
    """Dataset name."""
    dest: Path
    """The data root that was filled."""
    fetched: tuple[str, ...]
    """Files written by this pull (paths relative to the data root), unpacked members included."""
    skipped: tuple[str, ...]
    """Files already present with the right checksum."""
    bytes_fetched: int
    """Bytes written by this pull."""
    recorded: tuple[str, ...] = ()
    """Files whose size and sha256 this pull recorded in the registry lock (first verified download)."""


def _progress_to_stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _is_url(source: str) -> bool:
    return urlsplit(source).scheme in ("http", "https")


def _env_true(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in _TRUE


def _part_path(target: Path) -> Path:
    return target.with_name(f".{target.name}.part")


def _place(part: Path, target: Path, file: DataFile, origin: str, *,
           dataset: DatasetSource) -> tuple[DataFile, bool]:
    """Check `part` against `file`, then rename it to `target`. Returns the file with its size and sha256, and
    whether the bytes were checked against something the registry pins (False: an unpinned copy from a mirror)."""
    size = part.stat().st_size
    problem = check_file(part, file)
    if problem is not None and problem[0] != "unrecorded":
        if file.sha256 is not None:
            registered = any(f.path == file.path and f.sha256 for f in get(dataset.name).files)
            recorded = "" if registered else " (recorded at its first verified download)"
            message = (f"checksum mismatch for {file.path}: expected sha256 {file.sha256} ({file.size} bytes)"
                       f"{recorded}, got {sha256_file(part)} ({size} bytes)")
        else:
            message = (f"{file.path} is not the file at {dataset.repository}@{dataset.commit}: expected git blob "
                       f"{file.git_blob}, got {problem[2]} ({size} bytes)")
        part.unlink(missing_ok=True)
        raise DataError(message, path=origin, hint="the source does not hold the registered file; nothing was written")
    sha256 = file.sha256 or sha256_file(part)
    os.replace(part, target)
    return dataclasses.replace(file, size=size, sha256=sha256), problem is None


def _write_part(chunks: Iterable[bytes], part: Path) -> None:
    with part.open("wb") as handle:
        for chunk in chunks:
            handle.write(chunk)


def _read_local(path: Path) -> Iterable[bytes]:
    with path.open("rb") as handle:
        yield from iter(lambda: handle.read(CHUNK), b"")


def _resumes_at(response, offset: int) -> bool:
    match = re.match(r"bytes (\d+)-", response.headers.get("Content-Range", ""))
    return bool(match) and int(match.group(1)) == offset


def _download(client, url: str, part: Path) -> None:
    """Download `url` into `part`, continuing a partial `part` with a Range request; a transfer cut off
    mid-file is continued up to RESUME_ATTEMPTS times, and its partial file kept when it still fails."""
    import httpx

    host = urlsplit(url).netloc
    last: Exception | None = None
    for _ in range(RESUME_ATTEMPTS):
        have = part.stat().st_size if part.is_file() else 0
        # identity: a Range counts the bytes as sent, so they must be the file's bytes, not a compressed form
        headers = {"Accept-Encoding": "identity"} | ({"Range": f"bytes={have}-"} if have else {})
        try:
            with client.stream("GET", url, headers=headers) as response:
                if have and response.status_code == 416:
                    return  # nothing left to send: the checksum decides
                if response.status_code not in (200, 206):
                    part.unlink(missing_ok=True)
                    error = NotAtSource if response.status_code in (404, 410) else DataError
                    raise error(f"HTTP {response.status_code} for {url}", path=url,
                                    hint="check the mirror URL, or pull from a local copy with --from DIR")
                resumed = response.status_code == 206 and have > 0 and _resumes_at(response, have)
                with part.open("ab" if resumed else "wb") as handle:
                    for chunk in response.iter_bytes():  # as received: what arrived before a cut is kept
                        handle.write(chunk)
            return
        except httpx.ConnectError as err:
            raise DataError(f"no network: cannot reach {host} ({type(err).__name__}: {err})", path=url,
                            hint=NO_NETWORK_HINT) from None
        except httpx.TransportError as err:
            last = err
    kept = part.stat().st_size if part.is_file() else 0
    raise DataError(f"download from {host} was cut off {RESUME_ATTEMPTS} times ({type(last).__name__}: {last}); "
                    f"{kept} bytes are kept in {part}", path=url,
                    hint="run the same pull again to continue it, or " + NO_NETWORK_HINT)


def _join_url(base: str, rel: str) -> str:
    return base.rstrip("/") + "/" + quote(rel)


def _github_url(url: str) -> str:
    base = os.environ.get(GITHUB_RAW_ENV)
    return base.rstrip("/") + url[len(GITHUB_RAW):] if base and url.startswith(GITHUB_RAW) else url


# --- the Hugging Face Hub ----------------------------------------------------------------------------------

def hub_cache_dir() -> str | None:
    """$HF_HUB_CACHE, else $HF_HOME/hub, else None (huggingface_hub's own default)."""
    if cache := os.environ.get("HF_HUB_CACHE"):
        return cache
    if home := os.environ.get("HF_HOME"):
        return str(Path(home).expanduser() / "hub")
    return None


def hub_commit(dataset: DatasetSource, progress: Callable[[str], None]) -> str:
    """The commit to download every file of a Hub dataset at: the registered one when it is a full id; else the
    one a first pull resolved its revision (a branch such as 'main') to, as recorded in the lock; else the
    revision resolved now, once for all files, so that a branch moving during the pull cannot mix commits."""
    if dataset.pinned:
        return dataset.commit  # type: ignore[return-value]
    revision = dataset.commit or "main"
    if recorded := locked_entry(dataset).get("resolved_commit"):
        return recorded
    if _env_true("HF_HUB_OFFLINE"):
        return revision  # huggingface_hub resolves a branch from its cache's refs/
    from huggingface_hub import HfApi

    try:
        commit = HfApi(endpoint=os.environ.get("HF_ENDPOINT") or None).dataset_info(
            dataset.repository, revision=revision).sha
    except Exception as err:  # HTTP errors and transport errors alike: nothing can be pulled without it
        raise DataError(f"cannot resolve revision {revision!r} of {dataset.repository} ({type(err).__name__}: "
                        f"{str(err).splitlines()[0] if str(err) else ''})", hint=NO_NETWORK_HINT) from None
    progress(f"{dataset.name}: revision {revision!r} is not a commit id; it is {commit} now, which this pull "
             "records in the registry lock and later pulls keep to")
    return commit


@contextlib.contextmanager
def _quiet_hub() -> Iterator[None]:
    """huggingface_hub's own log lines (`Retrying in 8s [Retry 3/5]`) kept off the terminal for our calls: a failure
    comes back as one DataError that says what failed, not as its retries."""
    import logging

    logger = logging.getLogger("huggingface_hub")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


def _hub_download(dataset: DatasetSource, file: DataFile, revision: str) -> tuple[Path, str, str | None]:
    """(cached file, commit it was resolved at, its etag) from huggingface_hub, errors as DataErrors."""
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import HfHubHTTPError, LocalEntryNotFoundError

    offline = _env_true("HF_HUB_OFFLINE")
    where = f"{dataset.repository}@{revision[:12]}: {file.upstream_path}"
    try:
        with _quiet_hub():
            cached = Path(hf_hub_download(dataset.repository, file.upstream_path, repo_type="dataset",
                                          revision=revision, endpoint=os.environ.get("HF_ENDPOINT") or None,
                                          cache_dir=hub_cache_dir(), local_files_only=offline))
    except LocalEntryNotFoundError:
        what = "offline (HF_HUB_OFFLINE=1)" if offline else "the Hub cannot be reached"
        raise DataError(f"{what}, and {where} is not in the Hub cache ({hub_cache_dir() or 'default'})",
                        hint="unset HF_HUB_OFFLINE and connect, or " + NO_NETWORK_HINT) from None
    except HfHubHTTPError as err:
        raise DataError(f"the Hub refused {where}: {str(err).splitlines()[0]}",
                        hint="check HF_ENDPOINT and HF_TOKEN, or " + NO_NETWORK_HINT) from None
    except Exception as err:  # httpx2 transport errors, huggingface_hub's size consistency check (OSError)
        raise DataError(f"download of {where} failed ({type(err).__name__}: {err})",
                        hint="run the same pull again, or " + NO_NETWORK_HINT) from None
    commit = cached.parts[-len(PurePosixPath(file.upstream_path).parts) - 1]
    blob = cached.resolve()
    etag = blob.name if blob.parent.name == "blobs" else None
    return cached, commit, etag


def _forget_cached(cached: Path) -> None:
    """Drop a refused file from the Hub cache (its blob and the snapshot's link), so no later pull reuses it."""
    blob = cached.resolve()
    cached.unlink(missing_ok=True)
    if blob != cached:
        blob.unlink(missing_ok=True)


def _expected_from_hub(file: DataFile, etag: str | None) -> DataFile:
    """What the Hub's bytes must match: the recorded sha256, else the etag (an LFS file's sha256, or a
    regular file's git blob id)."""
    if file.sha256 is not None or etag is None:
        return file
    if re.fullmatch(r"[0-9a-f]{64}", etag):
        return dataclasses.replace(file, sha256=etag)
    if FULL_COMMIT.fullmatch(etag):
        return dataclasses.replace(file, git_blob=etag)
    return file


# --- unpacking ---------------------------------------------------------------------------------------------

def _unpack_zip(archive: Path, folder: Path, archive_path: str, origin: str) -> list[DataFile]:
    """Unpack every member of a verified zip into `folder`; each member lands atomically (CRCs checked)."""
    members = []
    try:
        with zipfile.ZipFile(archive) as zipped:
            for info in zipped.infolist():
                name = PurePosixPath(info.filename)
                if info.is_dir() or name.parts[:1] == ("__MACOSX",):
                    continue
                if name.is_absolute() or ".." in name.parts:
                    raise DataError(f"archive member {info.filename!r} would land outside the dataset", path=origin)
                target = folder / name
                target.parent.mkdir(parents=True, exist_ok=True)
                part = _part_path(target)
                with zipped.open(info) as stream:
                    _write_part(iter(lambda: stream.read(CHUNK), b""), part)
                os.replace(part, target)
                members.append(DataFile(path=str(name), size=info.file_size, sha256=sha256_file(target),
                                        unpacked_from=archive_path))
    except zipfile.BadZipFile as err:
        raise DataError(f"not a readable zip archive: {err}", path=origin) from None
    return members


def _members_ok(dataset: DatasetSource, dest: Path, archive: DataFile) -> bool:
    members = [f for f in dataset.files if f.unpacked_from == archive.path]
    return bool(members) and all(dataset.local_path(dest, f).is_file()
                                 and check_file(dataset.local_path(dest, f), f) is None for f in members)


# --- reachability ------------------------------------------------------------------------------------------

REACH_TIMEOUT_S = 5.0
"""How long a host may take to accept a connection before a pull calls it unreachable."""

_PROXY_ENV = ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy", "HTTP_PROXY", "http_proxy")


def host_url(host: str) -> str:
    """Where a pull from `host` ('huggingface' or 'github') connects: the mirror set in the environment, else the
    host itself."""
    if host == "huggingface":
        return os.environ.get("HF_ENDPOINT") or "https://huggingface.co"
    return os.environ.get(GITHUB_RAW_ENV) or GITHUB_RAW


def unreachable(host: str) -> str | None:
    """Why `host` cannot be reached now (one TCP connection, REACH_TIMEOUT_S at most), or None: it can, or the check
    cannot tell (a proxy is set, or HF_HUB_OFFLINE reads the Hub's cache alone). Asked once before a pull, so an
    offline pull fails at once instead of waiting out a library's retries."""
    import socket

    if any(os.environ.get(name) for name in _PROXY_ENV) or host == "huggingface" and _env_true("HF_HUB_OFFLINE"):
        return None
    parts = urlsplit(host_url(host))
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        socket.create_connection((parts.hostname or "", port), timeout=REACH_TIMEOUT_S).close()
    except OSError as err:
        return (f"no network: cannot reach {parts.hostname}:{port} ({type(err).__name__}: {err}); "
                f"{NO_NETWORK_HINT}")
    return None


# --- pull --------------------------------------------------------------------------------------------------

def _make_folder(folder: Path, made: list[Path]) -> None:
    """mkdir -p, noting each folder it created (outermost first) in `made`."""
    missing = []
    for parent in (folder, *folder.parents):
        if parent.is_dir():
            break
        missing.append(parent)
    folder.mkdir(parents=True, exist_ok=True)
    made.extend(p for p in reversed(missing) if p not in made)


def _remove_empty(made: list[Path]) -> None:
    for folder in reversed(made):
        try:
            folder.rmdir()
        except OSError:  # holds something (a partial download kept to continue): stays
            pass


class NotAtSource(DataError):
    """The source does not hold this one file (a mirror without it, an HTTP 404): the pull goes on with the others
    and names every such file at the end."""


@dataclass
class _Source:
    """Where one pull takes files from: a mirror folder, a mirror URL, or the dataset's host."""

    dataset: DatasetSource
    folder: Path | None
    url: str | None
    progress: Callable[[str], None]
    client: object | None = None
    own_client: object | None = None
    commit: str | None = None
    """The Hub commit this pull downloads at (resolved once, see hub_commit)."""
    cached: Path | None = None
    """The Hub cache's copy of the file being fetched, dropped when its bytes are refused."""

    @property
    def from_hub(self) -> bool:
        return self.folder is None and self.url is None and self.dataset.host == "huggingface"

    def fetch(self, file: DataFile, rel: str, part: Path) -> tuple[DataFile, str] | None:
        """Write `file` into `part`; returns what its bytes must match and where they came from, or None when
        there is no source for it (a derived file)."""
        self.cached = None
        if self.folder is not None:
            origin = self.folder / rel
            if not origin.is_file():
                raise NotAtSource("file missing from the mirror", path=origin,
                                hint=f"the mirror must hold {self.dataset.local_dir} as in the data root")
            _write_part(_read_local(origin), part)
            return file, str(origin)
        if self.from_hub:
            revision = self.commit or hub_commit(self.dataset, self.progress)
            self.cached, commit, etag = _hub_download(self.dataset, file, revision)
            origin = f"{os.environ.get('HF_ENDPOINT') or 'the Hub'}: {self.dataset.repository}@{commit}"
            if FULL_COMMIT.fullmatch(revision) and commit != revision:
                raise DataError(f"asked for {file.path} at commit {revision}, the Hub answered with commit "
                                f"{commit}", path=origin, hint="nothing was written")
            self.commit = commit
            _write_part(_read_local(self.cached), part)
            return _expected_from_hub(file, etag), origin
        url = _join_url(self.url, rel) if self.url is not None else self.dataset.candidate_url(file)
        if url is None:
            return None
        url = _github_url(url) if self.url is None else url
        if self.client is None:
            import httpx

            self.client = self.own_client = httpx.Client(follow_redirects=True, timeout=HTTP_TIMEOUT_S)
        _download(self.client, url, part)
        return file, url

    def close(self) -> None:
        if self.own_client is not None:
            self.own_client.close()  # type: ignore[attr-defined]


def pull(name: str, dest_root: str | Path | None = None, source: str | Path | None = None, *,
         progress: Callable[[str], None] = _progress_to_stderr, client=None) -> PullReport:
    """Put every file of dataset `name` under `dest_root` (default: the resolved data dir), verified.

    source None: the dataset's host (GitHub raw URLs, unconfirmed paths tried too, the sha256 decides; the
    Hugging Face Hub through huggingface_hub at the pinned commit).
    source a directory: a mirror laid out like a data root (e.g. ../shared/data); files are copied.
    source an http(s) URL: a mirror laid out like a data root; `URL/<local_dir><path>` is downloaded.
    `client` is an httpx.Client to reuse (tests, proxies); one is made when needed.
    """
    dataset = resolved(name)
    dest = resolve_data_dir(dest_root)
    if not dataset.files:
        raise DataError(f"dataset {name!r} is not available from the registry: {' '.join(dataset.notes)}",
                        hint=f"official layout: {dataset.layout}")
    folder = None
    if source is not None and not _is_url(str(source)):
        folder = Path(source).expanduser()
        if not folder.is_dir():
            raise DataError("mirror directory not found", path=folder,
                            hint="--from takes a directory laid out like the data root, or an http(s) URL")
    if source is None and client is None:  # offline: one line now, not a library's retries (tests pass a client)
        why = unreachable("huggingface" if dataset.host == "huggingface" else "github")
        if why is not None:
            raise DataError(f"{name} cannot be pulled: {why}")
    origin = _Source(dataset, folder, str(source) if source is not None and folder is None else None, progress,
                     client=client)
    made: list[Path] = []
    """Folders this pull created: removed again when they are still empty after a failure."""
    downloads = [f for f in dataset.files if f.unpacked_from is None]
    fetched: list[str] = []
    skipped: list[str] = []
    no_source: list[str] = []
    not_there: list[str] = []
    first_absence: NotAtSource | None = None
    recorded: list[str] = []
    total = 0

    def keep(files: list[DataFile]) -> None:
        """Record verified files in the lock at once: a pull stopped later keeps what it verified."""
        if files:
            record(dataset, files, resolved_commit=origin.commit)
            recorded.extend(dataset.local_dir + f.path for f in files)

    def unpack(archive: DataFile, path: Path) -> None:
        members = _unpack_zip(path, path.parent, archive.path, str(path))
        keep(members)
        fetched.extend(dataset.local_dir + m.path for m in members)
        progress(f"    unpacked {len(members)} file(s) from {archive.path}")

    try:
        for index, file in enumerate(downloads, start=1):
            rel = dataset.local_dir + file.path
            target = dataset.local_path(dest, file)
            if target.is_file() and check_file(target, file) is None:
                skipped.append(rel)
                if file.sha256 is None:  # verified by its git blob id: record size and sha256 now
                    keep([dataclasses.replace(file, size=target.stat().st_size, sha256=sha256_file(target))])
                if file.unpack and not _members_ok(dataset, dest, file):
                    unpack(file, target)
                continue
            try:
                _make_folder(target.parent, made)
            except OSError as err:
                raise DataError(f"cannot write to the data root: {err}", path=dest,
                                hint="pass --data-dir DIR with a folder you can write") from None
            part = _part_path(target)
            try:
                got = origin.fetch(file, rel, part)
                if got is None:
                    no_source.append(rel)
                    continue
                placed, pinned = _place(part, target, *got, dataset=dataset)
            except NotAtSource as err:  # this file only: the others are still worth having
                if source is not None or file.url is not None:
                    not_there.append(rel)
                    first_absence = first_absence or err
                    progress(f"[{index}/{len(downloads)}] {rel}: not at the source ({err})")
                    continue
                raise DataError(f"{rel}: its upstream path {file.unconfirmed_path!r} is unconfirmed, and {err}",
                                hint=f"pull it from a local copy: `finharness data pull {name} --from DIR`"
                                ) from None
            except DataError as err:
                if origin.from_hub and origin.cached is not None:
                    _forget_cached(origin.cached)
                if source is None and file.url is None:  # the URL came from an unconfirmed upstream path
                    raise DataError(f"{rel}: its upstream path {file.unconfirmed_path!r} is unconfirmed, and {err}",
                                    hint=f"pull it from a local copy: `finharness data pull {name} --from DIR`"
                                    ) from None
                raise
            total += placed.size or 0
            fetched.append(rel)
            progress(f"[{index}/{len(downloads)}] {rel} ({human_size(placed.size or 0)})"
                     + ("" if pinned else ": no checksum is recorded for it yet, so it is unverified"))
            if file.sha256 is None and pinned:
                keep([placed])
                progress(f"    size and sha256 recorded in {lock_path()} (checked by every later pull)")
            if file.unpack:
                unpack(file, target)
    except BaseException:
        _remove_empty(made)  # a failed pull leaves no empty folder behind (doctor would read it as data)
        raise
    finally:
        origin.close()
    if skipped:
        progress(f"{len(skipped)} file(s) of {name} already present and verified in {dest}")
    if not_there:
        shown = ", ".join(not_there[:10]) + (" ..." if len(not_there) > 10 else "")
        raise DataError(f"{len(not_there)} file(s) of {name} are not at the source ({source or 'its host'}): "
                        f"{shown} (the first: {first_absence}); the other {len(fetched) + len(skipped)} are in "
                        f"{dest}",
                        hint="pull again from the dataset's host (without --from), or from a copy that holds them")
    if no_source:
        raise DataError(f"{len(no_source)} file(s) of {name} have no upstream download "
                        f"(derived here, no upstream file): {', '.join(no_source[:5])}"
                        + (" ..." if len(no_source) > 5 else ""),
                        hint=f"pull them from a local copy: `finharness data pull {name} --from DIR`")
    return PullReport(name=name, dest=dest, fetched=tuple(fetched), skipped=tuple(skipped), bytes_fetched=total,
                      recorded=tuple(recorded))


FAILED_PULL_MEMORY_S = 600.0
"""How long a first-use pull that failed is not tried again in this process: the other tasks of a run that
need the same dataset fail at once with its error instead of each waiting out the host's retries."""

_failed_pulls: dict[tuple[str, str], tuple[float, DataError]] = {}
_pull_locks: dict[tuple[str, str], threading.Lock] = {}
_pull_locks_guard = threading.Lock()


def pull_on_first_use(name: str, root: str | Path, *, needed_by: str,
                      progress: Callable[[str], None] = _progress_to_stderr) -> PullReport:
    """Pull dataset `name` into `root` for `needed_by` (a task), saying so; a DataError when
    $FINHARNESS_NO_PULL forbids it (`finharness run --no-pull`). Tasks that need the same dataset at once
    wait for one pull; one that failed within FAILED_PULL_MEMORY_S fails again with the same error, not retried."""
    dataset = resolved(name)
    source = f"{dataset.repository}@{(dataset.commit or '')[:7]}" if dataset.repository else name
    if _env_true(NO_PULL_ENV):
        raise DataError(f"{needed_by} needs dataset {name} ({source}), which is not in {root}, and pulling is "
                        f"off (--no-pull / {NO_PULL_ENV}=1)",
                        hint=f"`finharness data pull {name} --data-dir {root}`, or run without --no-pull")
    key = (name, str(Path(root).resolve()))
    with _pull_locks_guard:
        lock = _pull_locks.setdefault(key, threading.Lock())
    with lock:
        failed = _failed_pulls.get(key)
        if failed is not None and time.monotonic() - failed[0] < FAILED_PULL_MEMORY_S:
            raise DataError(str(failed[1])) from failed[1]  # the same words: one reason, said once by the scorecard
        progress(f"{needed_by}: dataset {name} is not in {root}; pulling it from {source} now "
                 f"(first use; --no-pull forbids this)")
        try:
            report = pull(name, root, progress=progress)
        except DataError as error:
            _failed_pulls[key] = (time.monotonic(), error)
            raise
        _failed_pulls.pop(key, None)
        return report
