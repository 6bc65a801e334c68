"""Filling a data root with one dataset: from the upstream URLs, a local mirror, or an HTTP mirror.

Every file is written to a temporary file beside its target, its sha256 is checked against the registry,
and only then is it renamed into place (atomic on one file system): a data root never holds a file with the
wrong bytes under a registered name. Files already present with the right checksum are skipped, so a pull
that stopped half-way resumes where it stopped.
"""

from __future__ import annotations

import hashlib
import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable
from urllib.parse import quote, urlsplit

from .errors import DataError
from .registry import DataFile, get, human_size, resolve_data_dir, sha256_file

CHUNK = 1 << 20
HTTP_TIMEOUT_S = 60.0
NO_NETWORK_HINT = "offline? copy from a mirror laid out like the data root: `finharness data pull NAME --from DIR`"


@dataclass(frozen=True)
class PullReport:
    """What one pull did."""

    name: str
    """Dataset name."""
    dest: Path
    """The data root that was filled."""
    fetched: tuple[str, ...]
    """Files written by this pull (paths relative to the data root)."""
    skipped: tuple[str, ...]
    """Files already present with the right checksum."""
    bytes_fetched: int
    """Bytes written by this pull."""


def _progress_to_stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _is_url(source: str) -> bool:
    return urlsplit(source).scheme in ("http", "https")


def _write_verified(chunks: Iterable[bytes], target: Path, file: DataFile, origin: str) -> int:
    """Stream `chunks` into a temp file beside `target`, check size and sha256, then rename into place."""
    target.parent.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256()
    size = 0
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".part", dir=target.parent)
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as handle:
            for chunk in chunks:
                digest.update(chunk)
                size += len(chunk)
                handle.write(chunk)
        actual = digest.hexdigest()
        if actual != file.sha256:
            raise DataError(f"checksum mismatch for {file.path}: expected sha256 {file.sha256} "
                            f"({file.size} bytes), got {actual} ({size} bytes)", path=origin,
                            hint="the source does not hold the registered file; nothing was written")
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return size


def _read_local(path: Path) -> Iterable[bytes]:
    with path.open("rb") as handle:
        yield from iter(lambda: handle.read(CHUNK), b"")


def _download(client, url: str) -> Iterable[bytes]:
    """The body of `url` in chunks; transport failures become DataErrors that suggest --from."""
    import httpx

    try:
        with client.stream("GET", url) as response:
            if response.status_code != 200:
                raise DataError(f"HTTP {response.status_code} for {url}", path=url,
                                hint="check the mirror URL, or pull from a local copy with --from DIR")
            yield from response.iter_bytes(CHUNK)
    except httpx.TransportError as err:
        host = urlsplit(url).netloc
        what = f"no network: cannot reach {host}" if isinstance(err, httpx.ConnectError) else (
            f"download from {host} failed")
        raise DataError(f"{what} ({type(err).__name__}: {err})", path=url, hint=NO_NETWORK_HINT) from None


def _join_url(base: str, rel: str) -> str:
    return base.rstrip("/") + "/" + quote(rel)


def pull(name: str, dest_root: str | Path | None = None, source: str | Path | None = None, *,
         progress: Callable[[str], None] = _progress_to_stderr, client=None) -> PullReport:
    """Put every file of dataset `name` under `dest_root` (default: the resolved data dir), verified.

    source None: each file's upstream raw URL (unconfirmed paths are tried too; the sha256 decides).
    source a directory: a mirror laid out like a data root (e.g. ../shared/data); files are copied.
    source an http(s) URL: a mirror laid out like a data root; `URL/<local_dir><path>` is downloaded.
    `client` is an httpx.Client to reuse (tests, proxies); one is made when needed.
    """
    dataset = get(name)
    dest = resolve_data_dir(dest_root)
    if not dataset.files:
        raise DataError(f"dataset {name!r} is not available from the registry: {' '.join(dataset.notes)}",
                        hint=f"official layout: {dataset.layout}")
    source_dir = None
    if source is not None and not _is_url(str(source)):
        source_dir = Path(source).expanduser()
        if not source_dir.is_dir():
            raise DataError("mirror directory not found", path=source_dir,
                            hint="--from takes a directory laid out like the data root, or an http(s) URL")

    own_client = None
    fetched: list[str] = []
    skipped: list[str] = []
    no_source: list[str] = []
    total = 0
    try:
        for index, file in enumerate(dataset.files, start=1):
            rel = dataset.local_dir + file.path
            target = dataset.local_path(dest, file)
            if target.is_file() and target.stat().st_size == file.size and sha256_file(target) == file.sha256:
                skipped.append(rel)
                continue
            if source_dir is not None:
                origin = source_dir / rel
                if not origin.is_file():
                    raise DataError("file missing from the mirror", path=origin,
                                    hint=f"the mirror must hold {dataset.local_dir} as in the data root")
                chunks = _read_local(origin)
                origin_text = str(origin)
            else:
                url = _join_url(str(source), rel) if source is not None else dataset.candidate_url(file)
                if url is None:
                    no_source.append(rel)
                    continue
                if client is None:
                    import httpx

                    client = own_client = httpx.Client(follow_redirects=True, timeout=HTTP_TIMEOUT_S)
                chunks = _download(client, url)
                origin_text = url
            try:
                written = _write_verified(chunks, target, file, origin_text)
            except DataError as err:
                if source is None and file.url is None:  # the URL came from an unconfirmed upstream path
                    raise DataError(f"{rel}: its upstream path {file.unconfirmed_path!r} is unconfirmed, and {err}",
                                    hint=f"pull it from a local copy: `finharness data pull {name} --from DIR`"
                                    ) from None
                raise
            total += written
            fetched.append(rel)
            progress(f"[{index}/{len(dataset.files)}] {rel} ({human_size(written)})")
    finally:
        if own_client is not None:
            own_client.close()
    if skipped:
        progress(f"{len(skipped)} file(s) of {name} already present and verified in {dest}")
    if no_source:
        raise DataError(f"{len(no_source)} file(s) of {name} have no upstream download "
                        f"(derived here, no upstream file): {', '.join(no_source[:5])}"
                        + (" ..." if len(no_source) > 5 else ""),
                        hint=f"pull them from a local copy: `finharness data pull {name} --from DIR`")
    return PullReport(name=name, dest=dest, fetched=tuple(fetched), skipped=tuple(skipped), bytes_fetched=total)
