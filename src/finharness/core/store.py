"""The run store: every model call and every finished sample, in SQLite (WAL).

Calls are content-addressed: key = sha256 of the backend's identity and the
exact request (and, for sampled generations, the seed and sample index, which
are fields of the request). A rerun finds every completed call here, so it
computes nothing twice.

Durability (group commit). Outside an event loop every write commits at once. Inside one, writes
are queued in order and committed together, in one transaction, at the end of the event-loop
iteration in which they were made (and at once, by the next write, when the oldest queued row is
MAX_COMMIT_DELAY_S old); the runner awaits `synced()` after storing a sample, so a sample is counted
done only once it and every call it made are committed, and a sample row is never committed before
its calls (one ordered queue). A `kill -9` therefore loses only the calls in flight and those
answered within the current loop iteration (at most MAX_COMMIT_DELAY_S earlier while writes keep
coming); a rerun makes those again. `PRAGMA synchronous=NORMAL` under WAL keeps every committed
transaction through a process crash (what `kill -9` is); only a power loss or OS crash can take
back the last commits.

Every text a row holds passes redact() first (finharness/redact.py): a reply or an error body echoing an
API key stores the key's name, never the key.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import itertools
import json
import os
import shutil
import sqlite3
import struct
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence, TypeVar

from ..data.errors import DataError
from ..redact import redact, redact_args
from .hashing import canonical_json

try:
    import fcntl
except ImportError:  # no flock (Windows): opens are not serialised there (see _opening)
    fcntl = None  # type: ignore[assignment]

SCHEMA_VERSION = 1

MAX_COMMIT_DELAY_S = 0.005
"""Longest a queued row waits for its commit while further writes keep coming (seconds)."""

MAX_QUEUED_ROWS = 1024
"""Queued rows committed at once whatever their age (bounds the memory and one transaction)."""

# Each migration takes the store from version i to i+1 (simonw/llm style): append, never edit.
MIGRATIONS: list[str] = [
    """
    CREATE TABLE calls (
        key TEXT PRIMARY KEY,
        backend TEXT NOT NULL,
        kind TEXT NOT NULL,
        request TEXT NOT NULL,
        response TEXT NOT NULL,
        latency_s REAL NOT NULL,
        created REAL NOT NULL
    );
    CREATE TABLE failures (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        key TEXT NOT NULL,
        backend TEXT NOT NULL,
        kind TEXT NOT NULL,
        request TEXT NOT NULL,
        error TEXT NOT NULL,
        attempts INTEGER NOT NULL,
        created REAL NOT NULL
    );
    CREATE TABLE samples (
        run_key TEXT NOT NULL,
        sample_id TEXT NOT NULL,
        record TEXT NOT NULL,
        created REAL NOT NULL,
        PRIMARY KEY (run_key, sample_id)
    );
    CREATE TABLE runs (
        run_key TEXT PRIMARY KEY,
        config TEXT NOT NULL,
        created REAL NOT NULL
    );
    """,
    # v2: what each invocation of a run spent, so a resumed run reports its cumulative tokens, calls and wall time
    """
    CREATE TABLE invocations (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        run_key TEXT NOT NULL,
        started REAL NOT NULL,
        wall_s REAL NOT NULL,
        counts TEXT NOT NULL,
        outcome TEXT NOT NULL
    );
    CREATE INDEX invocations_by_run ON invocations (run_key);
    """,
    # v3: provider batches (backends/batch.py): each batch, and each call in it by its content key, recorded before
    # the batch is uploaded, so a process killed at any moment resumes by polling the same batch
    """
    CREATE TABLE batches (
        id TEXT PRIMARY KEY,
        backend TEXT NOT NULL,
        identity TEXT NOT NULL,
        provider TEXT NOT NULL,
        state TEXT NOT NULL,
        requests INTEGER NOT NULL,
        bytes INTEGER NOT NULL,
        input_file TEXT,
        batch_id TEXT,
        status TEXT,
        counts TEXT,
        output_file TEXT,
        error_file TEXT,
        deadline REAL,
        created REAL NOT NULL,
        submitted REAL,
        ended REAL,
        updated REAL NOT NULL
    );
    CREATE TABLE batch_calls (
        batch TEXT NOT NULL,
        key TEXT NOT NULL,
        kind TEXT NOT NULL,
        request TEXT NOT NULL,
        PRIMARY KEY (batch, key)
    );
    CREATE INDEX batch_calls_by_key ON batch_calls (key);
    """,
]


TABLES = frozenset({"calls", "failures", "samples", "runs"})
"""The tables every finharness store has, from v1 on (a SQLite file without them is not one)."""

CUMULATIVE_COUNTS: tuple[str, ...] = ("calls", "cache_hits", "failures", "prompt_tokens", "completion_tokens",
                                      "reasoning_tokens", "tokens_evaluated", "cached_tokens", "cache_write_tokens")
"""The counters an invocation row keeps and `cumulative` sums (besides wall time, cost and `billed`: the calls made by
role and mode, RunCounters.billed)."""

BATCH_STATES = ("preparing", "creating", "submitted", "ended", "collected", "abandoned", "failed")
"""A batch row's `state` (backends/batch.py): preparing (its calls recorded, not yet created at the provider; an
input file may be uploaded), creating (the create request may have reached the provider: a resume looks for it),
submitted (the provider has it: poll), ended (its results can be read: read them), collected (every result stored or
failed), abandoned (never created, or lost at the provider: its calls go in a new batch), failed (the provider
refused it whole)."""

ACTIVE_BATCH_STATES = ("creating", "submitted", "ended")
"""Batch states whose calls are paid for or may be: a call recorded in one is awaited there, never sent again."""

_BATCH_FIELDS = ("id", "backend", "identity", "provider", "state", "requests", "bytes", "input_file", "batch_id",
                 "status", "counts", "output_file", "error_file", "deadline", "created", "submitted", "ended",
                 "updated")

BILLED_FIGURES = ("calls", "prompt_tokens", "cached_tokens", "cache_write_tokens", "completion_tokens")
"""The counts of a RunCounters.billed entry (besides cost_usd)."""


def merge_billed(into: dict[str, dict[str, Any]], more: Mapping[str, Mapping[str, Any]]) -> None:
    """Add `more`'s billed figures (role/mode -> counts and cost) to `into`; a cost stays None until one is priced."""
    for where, figures in more.items():
        mine = into.setdefault(where, {**{k: 0 for k in BILLED_FIGURES}, "cost_usd": None})
        for k in BILLED_FIGURES:
            mine[k] += int(figures.get(k) or 0)
        if figures.get("cost_usd") is not None:
            mine["cost_usd"] = (mine["cost_usd"] or 0.0) + float(figures["cost_usd"])


def sum_counts(parts: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Figures of several invocations (or runs) summed: {"invocations", "wall_s", each of CUMULATIVE_COUNTS,
    "cost_usd" (None unless a part was priced), "billed"}; a figure a part lacks counts 0."""
    total: dict[str, Any] = {"invocations": 0, "wall_s": 0.0, **{k: 0 for k in CUMULATIVE_COUNTS}, "cost_usd": None,
                             "billed": {}}
    for part in parts:
        for key in ("invocations", "wall_s", *CUMULATIVE_COUNTS):
            total[key] += part.get(key) or 0
        merge_billed(total["billed"], part.get("billed") or {})
        if part.get("cost_usd") is not None:
            total["cost_usd"] = (total["cost_usd"] or 0.0) + float(part["cost_usd"])
    total["wall_s"] = round(total["wall_s"], 3)
    return total


_CALL_COLUMNS = "key, backend, kind, request, response, latency_s, created"
_FAILURE_COLUMNS = "key, backend, kind, request, error, attempts, created"


@dataclass(frozen=True)
class StoreRows:
    """Rows of one store as they are stored (JSON text), to be added to another (RunStore.import_rows)."""

    calls: list[tuple[Any, ...]]
    """(key, backend, kind, request, response, latency_s, created)."""

    failures: list[tuple[Any, ...]]
    """(key, backend, kind, request, error, attempts, created): calls that failed for good."""

    runs: list[tuple[Any, ...]]
    """(run_key, config, created)."""

    samples: list[tuple[Any, ...]]
    """(run_key, sample_id, record, created): finished samples."""


class StoreError(DataError):
    """The run store cannot be used: not a finharness store or a damaged one, newer than this finharness, not
    writable, its disk full, or a row that cannot be read. str(err) names the store (and the row) and what to do."""


MOVE_ASIDE = "move it aside or give another --store: a new store starts empty, and this file is left as it is"
RERUN = "then rerun the same command: what was committed is kept, the rest is asked again"


def store_error(path: Path, err: sqlite3.Error) -> StoreError:
    """The StoreError saying what SQLite's `err` on the store at `path` means for the user."""
    name = getattr(err, "sqlite_errorname", "") or ""
    said = f"(SQLite: {err})"
    if name in ("SQLITE_NOTADB", "SQLITE_CORRUPT") or "no such table" in str(err):
        return StoreError(f"not a finharness run store, or a damaged one {said}", path=path, hint=MOVE_ASIDE)
    if name == "SQLITE_FULL" or (name.startswith("SQLITE_IOERR") and disk_is_full(path)):
        # SQLite words ENOSPC as an I/O error when a WAL or journal write (not the main file's) meets it
        return StoreError(f"no space left on the device holding the store {said}", path=path,
                          hint=f"free some space, or give --store a FILE on another disk; {RERUN}")
    if name.startswith("SQLITE_IOERR"):
        limit = file_size_limit()
        cause = (f"the file-size limit (`ulimit -f`, {limit} bytes) reached? Raise it" if limit is not None else
                 "is the disk full? Free some space")
        return StoreError(f"the store cannot be written {said}", path=path, hint=f"{cause}, {RERUN}")
    if name.startswith(("SQLITE_READONLY", "SQLITE_CANTOPEN", "SQLITE_PERM", "SQLITE_AUTH")):
        if path.is_dir():
            return StoreError("is a folder, not a run store file", path=path, hint="give --store a FILE")
        return StoreError(f"the store cannot be opened for writing: no permission, or a read-only or immutable "
                          f"folder {said}", path=path,
                          hint="give --store (or --out) a place you can write, or fix the folder's permissions")
    if name.startswith(("SQLITE_BUSY", "SQLITE_LOCKED")):
        return StoreError(f"locked by another process for over a minute {said}", path=path,
                          hint="wait for the other run to finish")
    return StoreError(f"the store cannot be used {said}", path=path, hint=MOVE_ASIDE)


FULL_BELOW_BYTES = 1 << 20
"""Free space under which the store's disk counts as full (SQLite writes pages of up to 64 KiB, WAL frames more)."""


def disk_is_full(path: Path) -> bool:
    """Whether the file system holding `path` (or its nearest existing folder) has almost no space left."""
    place = path
    while not place.exists() and place != place.parent:
        place = place.parent
    try:
        return shutil.disk_usage(place).free < FULL_BELOW_BYTES
    except OSError:
        return False


def file_size_limit() -> int | None:
    """This process's limit on the size of a file it writes (RLIMIT_FSIZE, bytes), None when there is none."""
    try:
        import resource
    except ImportError:  # not on a POSIX system
        return None
    soft = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
    return None if soft == resource.RLIM_INFINITY else soft


_Method = TypeVar("_Method", bound=Callable[..., Any])


def _reported(method: _Method) -> _Method:
    """A RunStore method whose SQLite errors are raised as the StoreError saying what they mean."""
    @functools.wraps(method)
    def wrapper(self: "RunStore", *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, *args, **kwargs)
        except sqlite3.Error as err:
            raise store_error(self.path, err) from err

    return wrapper  # type: ignore[return-value]


def _row_json(path: Path, text: str, what: str, delete: str) -> Any:
    """A stored row's JSON; a row that is not JSON is a StoreError naming the store, the row and the fix."""
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as err:
        raise broken_row(path, what, err, delete) from None


def _sql(text: str) -> str:
    """`text` as an SQL string literal (in the DELETE a message suggests)."""
    return "'" + text.replace("'", "''") + "'"


def broken_row(path: Path, what: str, err: BaseException, delete: str) -> StoreError:
    """The StoreError of a row that cannot be read: `what` names it, `delete` is the SQL that removes it."""
    return StoreError(f"{what} cannot be read ({type(err).__name__}: {str(err)[:200]})", path=path,
                      hint=f"delete it and rerun to make it again: sqlite3 {path} \"{delete}\"")


@contextlib.contextmanager
def _opening(path: Path) -> Iterator[None]:
    """Hold an exclusive flock on the sidecar `<store>.lock` while a store is switched into WAL and migrated.

    The busy timeout cannot cover the WAL switch: it reads the header, then asks for the write lock,
    and SQLite answers SQLITE_BUSY at once, without waiting, to a connection that holds a read lock
    while asking (two such waiters would deadlock). So processes opening a new store together failed
    with 'database is locked'; one at a time, each finds the work done or does it alone. A sidecar
    file, not the database: closing any descriptor of the database drops this process's SQLite locks
    on it. The kernel drops a flock with its holder's last descriptor, so a killed opener leaves none.
    """
    if fcntl is None:
        yield
        return
    fd = os.open(path.with_name(path.name + ".lock"), os.O_RDWR | os.O_CREAT, 0o666)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # released by the close
        yield
    finally:
        os.close(fd)


OFD_SETLK = getattr(fcntl, "F_OFD_SETLK", None) if fcntl is not None else None
"""Linux's open-file-description record lock (None elsewhere: calls are not claimed across processes there)."""


class CallClaims:
    """Which process makes a call that no store holds yet, when several processes share one store (two suites on
    one out folder, two runs on one --store): an exclusive record lock on one byte of the sidecar `<store>.lock` per
    content key (the offset a hash of the key), taken before the call is made and dropped once its answer is
    committed, or when it failed. Another process finding the byte locked waits for the answer instead of making
    the call again. Open-file-description locks: closing another descriptor of the file (the opening flock's) does
    not drop them, and the kernel drops them with the descriptor, so a process killed mid-call blocks no one.
    Without them (not Linux, or the sidecar cannot be opened) every claim is granted: two processes may then both
    make a call neither has stored, as before; nothing is lost either way."""

    def __init__(self, store: Path):
        self._fd: int | None = None
        self._held: set[str] = set()
        if OFD_SETLK is None:
            return
        try:
            self._fd = os.open(store.with_name(store.name + ".lock"), os.O_RDWR | os.O_CREAT, 0o666)
        except OSError:
            self._fd = None

    def _set(self, key: str, kind: int) -> bool:
        offset = int.from_bytes(hashlib.sha256(key.encode()).digest()[:7], "big")
        flock = struct.pack("hhqqi4x", kind, os.SEEK_SET, offset, 1, 0)  # struct flock; l_pid 0 for OFD locks
        try:
            fcntl.fcntl(self._fd, OFD_SETLK, flock)  # type: ignore[union-attr,arg-type]
        except OSError:  # EAGAIN / EACCES: another open description holds it
            return False
        return True

    def take(self, key: str) -> bool:
        """Claim `key` (never blocks): False when another process holds it; True when this store does now."""
        if self._fd is None or key in self._held:
            return True
        if not self._set(key, fcntl.F_WRLCK):  # type: ignore[union-attr]
            return False
        self._held.add(key)
        return True

    def drop(self, keys: Iterable[str]) -> None:
        for key in keys:
            if key in self._held:
                self._held.discard(key)
                self._set(key, fcntl.F_UNLCK)  # type: ignore[union-attr]

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # drops every claim still held
            self._fd = None
            self._held.clear()


class RunStore:
    """A SQLite file shared by any number of runs (and processes: WAL + busy timeout). Any number of
    processes may create or open one store at once (the WAL switch and the migration are serialised)."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        try:
            self._conn = sqlite3.connect(self.path, timeout=60.0, check_same_thread=False,
                                         isolation_level=None)
        except sqlite3.Error as err:
            raise store_error(self.path, err) from err
        self._queued: list[tuple[str, tuple]] = []
        """Writes made inside an event loop and not committed yet, in order (see the module docstring)."""
        self._queued_calls: dict[str, tuple[str, float]] = {}
        """key -> (response JSON, latency) of the queued calls: get_call reads its own writes."""
        self._oldest_queued = 0.0
        self._batch: asyncio.Future[None] | None = None
        """Resolved when the loop-iteration commit of the queued rows is done (None: none scheduled)."""
        self._batch_loop: asyncio.AbstractEventLoop | None = None
        self._claims = CallClaims(self.path)
        try:
            with _opening(self.path):
                self._schema_version()  # a foreign or newer file is refused before anything is written to it
                self._conn.execute("PRAGMA journal_mode=WAL")
                self._conn.execute("PRAGMA synchronous=NORMAL")
                self._migrate()
        except BaseException as err:
            self._conn.close()
            self._claims.close()
            if isinstance(err, sqlite3.Error):
                raise store_error(self.path, err) from err
            raise

    def _schema_version(self) -> int:
        version = self._conn.execute("PRAGMA user_version").fetchone()[0]
        if version > len(MIGRATIONS):
            raise StoreError(f"store schema v{version} is newer than this finharness (v{len(MIGRATIONS)})",
                             path=self.path, hint="upgrade finharness (pip install -U finharness), or give another "
                             "--store")
        tables = {row[0] for row in self._conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if (version == 0 and tables - {"sqlite_sequence"}) or (version > 0 and not TABLES <= tables):
            raise StoreError(f"a SQLite file that is not a finharness run store (schema v{version}, tables: "
                             f"{', '.join(sorted(tables)) or 'none'})", path=self.path, hint=MOVE_ASIDE)
        return version

    def _migrate(self) -> None:
        """Bring the schema up to date. A store already current needs no write lock (opening it never
        waits for another run's commit); otherwise the version is read again inside the write
        transaction, so a migration another opener committed meanwhile is not applied twice."""
        with self._lock:
            if self._schema_version() == len(MIGRATIONS):
                return
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                version = self._schema_version()
                for i in range(version, len(MIGRATIONS)):
                    for statement in MIGRATIONS[i].split(";"):
                        if statement.strip():
                            self._conn.execute(statement)
                    self._conn.execute(f"PRAGMA user_version={i + 1}")
                self._conn.execute("COMMIT")
            except BaseException:
                if self._conn.in_transaction:  # SQLite has rolled back already after a full disk or an I/O error
                    self._conn.execute("ROLLBACK")
                raise

    # -- group commit -----------------------------------------------------------
    def _write(self, sql: str, args: tuple, call: tuple[str, str, float] | None = None) -> None:
        """Commit `sql` now (no event loop running here) or queue it for the group commit; `call`:
        (key, response JSON, latency) of a call row, which get_call must find while it is queued."""
        try:
            loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        with self._lock:
            if loop is not None and self._batch_loop is not None and self._batch_loop.is_closed():
                self._commit_queued()  # an earlier loop ended before its commit ran
                self._batch = self._batch_loop = None
            if loop is None or (self._batch_loop is not None and self._batch_loop is not loop):
                self._commit_queued()  # keep the order: what was queued before commits first
                self._conn.execute(sql, args)
                return
            now = time.monotonic()
            if not self._queued:
                self._oldest_queued = now
            self._queued.append((sql, args))
            if call is not None:
                self._queued_calls[call[0]] = call[1:]
            if self._batch is None:
                self._batch, self._batch_loop = loop.create_future(), loop
                loop.call_soon(self._commit_batch)
            if now - self._oldest_queued >= MAX_COMMIT_DELAY_S or len(self._queued) >= MAX_QUEUED_ROWS:
                self._commit_queued()

    def _commit_queued(self) -> None:
        """Commit the queued rows in one transaction (the lock is held). On error they stay queued to be
        retried, except rows SQLite can never bind (dropped: they would fail every retry)."""
        if not self._queued:
            return
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            for sql, rows in itertools.groupby(self._queued, key=lambda write: write[0]):
                self._conn.executemany(sql, [args for _, args in rows])
            self._conn.execute("COMMIT")
        except BaseException as err:
            if self._conn.in_transaction:
                self._conn.execute("ROLLBACK")
            if isinstance(err, (ValueError, OverflowError, sqlite3.InterfaceError)):
                self._drop_unstorable()  # a row SQLite cannot bind would fail every later commit too
            raise
        self._queued.clear()
        committed = list(self._queued_calls)
        self._queued_calls.clear()
        self._claims.drop(committed)

    def _drop_unstorable(self) -> None:
        """Drop the queued rows SQLite can never bind (a reply holding half a surrogate pair, an
        integer over 64 bits); the others stay queued for the next commit."""
        def storable(args: tuple) -> bool:
            try:
                self._conn.execute("SELECT " + ",".join("?" * len(args)), args)
            except (ValueError, OverflowError, sqlite3.InterfaceError):
                return False
            return True

        dropped = [write for write in self._queued if not storable(write[1])]
        self._queued = [write for write in self._queued if write not in dropped]
        for sql, args in dropped:
            if sql.startswith("INSERT OR REPLACE INTO calls"):
                self._queued_calls.pop(args[0], None)
                self._claims.drop([args[0]])

    def _commit_batch(self) -> None:
        """The end-of-iteration commit scheduled by the first queued write; wakes `synced()`."""
        with self._lock:
            batch, self._batch, self._batch_loop = self._batch, None, None
            try:
                self._commit_queued()
            except BaseException as err:  # the samples waiting for it fail; the rows stay queued
                if batch is not None and not batch.done():
                    batch.set_exception(err)
                    batch.exception()  # seen: a run stopped before awaiting it is told by the next commit instead
                return
        if batch is not None and not batch.done():
            batch.set_result(None)

    @_reported
    def flush(self) -> None:
        """Commit every queued write now."""
        with self._lock:
            self._commit_queued()

    async def synced(self) -> None:
        """Return once every write made so far is committed (at the end of this loop iteration:
        the samples finishing in one iteration share one transaction)."""
        batch = self._batch
        if batch is None or not self._queued:  # nothing waits for a commit (rows leave the queue only committed)
            return
        if self._batch_loop is not asyncio.get_running_loop():
            self.flush()
            return
        try:
            await asyncio.shield(batch)  # shared by every waiter: a cancelled waiter must not cancel it
        except sqlite3.Error as err:
            raise store_error(self.path, err) from err

    # -- calls ---------------------------------------------------------------
    @_reported
    def get_call(self, key: str) -> dict[str, Any] | None:
        with self._lock:
            queued = self._queued_calls.get(key)
            if queued is not None:
                return {"response": json.loads(queued[0]), "latency_s": queued[1]}
            row = self._conn.execute("SELECT response, latency_s FROM calls WHERE key=?", (key,)).fetchone()
        if row is None:
            return None
        return {"response": self.call_json(key, row[0]), "latency_s": row[1]}

    def call_json(self, key: str, text: str) -> Any:
        """A call row's stored JSON; one that cannot be read is a StoreError naming the store and the key."""
        return _row_json(self.path, text, f"the call row {key}", f"DELETE FROM calls WHERE key={_sql(key)}")

    def broken_call(self, key: str, err: BaseException) -> StoreError:
        """The StoreError of a call row whose JSON is not a response (wrong fields or types)."""
        return broken_row(self.path, f"the call row {key}", err, f"DELETE FROM calls WHERE key={_sql(key)}")

    def put_call(self, key: str, backend: str, kind: str, request: Mapping[str, Any],
                 response: Mapping[str, Any], latency_s: float) -> None:
        self.put_call_json(key, backend, kind, canonical_json(request), canonical_json(response), latency_s)

    @_reported
    def put_call_json(self, key: str, backend: str, kind: str, request_json: str, response_json: str,
                      latency_s: float) -> None:
        """put_call with the request and response already in canonical JSON."""
        response_json = redact(response_json)  # a reply may echo a key: the row is what get_call serves
        self._write("INSERT OR REPLACE INTO calls VALUES (?,?,?,?,?,?,?)",
                    (key, redact(backend), kind, redact(request_json), response_json, latency_s, time.time()),
                    call=(key, response_json, latency_s))
        with self._lock:
            if key not in self._queued_calls:  # committed already (no event loop): its claim goes
                self._claims.drop([key])

    @_reported
    def claim_call(self, key: str) -> bool:
        """Claim the making of call `key` for this process (CallClaims): False when another process sharing the
        store is making it now (wait, and look in the store again). The claim goes when the call's row is
        committed, or with release_call."""
        with self._lock:
            return self._claims.take(key)

    def release_call(self, key: str) -> None:
        """Drop the claim on a call that will not be stored (it failed, or was cancelled)."""
        with self._lock:
            if key not in self._queued_calls:
                self._claims.drop([key])

    @_reported
    def put_failure(self, key: str, backend: str, kind: str, request: Mapping[str, Any], error: str,
                    attempts: int) -> None:
        self._write("INSERT INTO failures (key, backend, kind, request, error, attempts, created) "
                    "VALUES (?,?,?,?,?,?,?)",
                    redact_args((key, backend, kind, canonical_json(request), error, attempts, time.time())))

    @_reported
    def count_calls(self) -> int:
        with self._lock:
            self._commit_queued()
            return self._conn.execute("SELECT COUNT(*) FROM calls").fetchone()[0]

    @_reported
    def iter_calls(self) -> Iterator[dict[str, Any]]:
        with self._lock:
            self._commit_queued()
            rows = self._conn.execute("SELECT key, backend, kind, request, response FROM calls").fetchall()
        for key, backend, kind, request, response in rows:
            yield {"key": key, "backend": backend, "kind": kind, "request": self.call_json(key, request),
                   "response": self.call_json(key, response)}

    # -- samples ---------------------------------------------------------------
    @_reported
    def put_run(self, run_key: str, config: Mapping[str, Any]) -> None:
        self._write("INSERT OR IGNORE INTO runs VALUES (?,?,?)", (run_key, redact(canonical_json(config)), time.time()))

    @_reported
    def get_samples(self, run_key: str) -> dict[str, dict[str, Any]]:
        with self._lock:
            self._commit_queued()
            rows = self._conn.execute("SELECT sample_id, record FROM samples WHERE run_key=?", (run_key,)).fetchall()
        return {sid: _row_json(self.path, rec, f"the sample row {sid!r} of run {run_key}",
                               f"DELETE FROM samples WHERE run_key={_sql(run_key)} AND sample_id={_sql(sid)}")
                for sid, rec in rows}

    @_reported
    def put_sample(self, run_key: str, sample_id: str, record: Mapping[str, Any]) -> None:
        self._write("INSERT OR REPLACE INTO samples VALUES (?,?,?,?)",
                    (run_key, sample_id, redact(canonical_json(record)), time.time()))

    @_reported
    def put_invocation(self, run_key: str, *, started: float, wall_s: float, counts: Mapping[str, Any],
                       outcome: str) -> None:
        """What one invocation of a run spent (its counters, cost when priced) and how it ended; committed at once."""
        kept = {k: counts[k] for k in (*CUMULATIVE_COUNTS, "cost_usd") if counts.get(k) is not None}
        if counts.get("billed"):
            kept["billed"] = counts["billed"]
        self._write("INSERT INTO invocations (run_key, started, wall_s, counts, outcome) VALUES (?,?,?,?,?)",
                    (run_key, started, wall_s, canonical_json(kept), outcome))
        self.flush()

    @_reported
    def cumulative(self, run_key: str) -> dict[str, Any]:
        """Every invocation of a run summed: {"invocations", "wall_s", each of CUMULATIVE_COUNTS, "cost_usd" (None
        unless an invocation was priced)}. A store from before v2 knows no invocations: zeros."""
        with self._lock:
            self._commit_queued()
            rows = self._conn.execute("SELECT wall_s, counts FROM invocations WHERE run_key=? ORDER BY id",
                                      (run_key,)).fetchall()
        parts = []
        for wall, text in rows:
            counts = _row_json(self.path, text, f"an invocation row of run {run_key}",
                               f"DELETE FROM invocations WHERE run_key={_sql(run_key)}")
            parts.append({**counts, "invocations": 1, "wall_s": wall})
        return sum_counts(parts)

    # -- provider batches (backends/batch.py) ---------------------------------------------------------------
    def _commit_now(self, statements: list[tuple[str, tuple]]) -> None:
        """Commit `statements` at once, in one transaction after every queued write (a batch's record must be
        durable before the step it records is taken)."""
        with self._lock:
            self._commit_queued()
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                for sql, args in statements:
                    self._conn.execute(sql, args)
                self._conn.execute("COMMIT")
            except BaseException:
                if self._conn.in_transaction:
                    self._conn.execute("ROLLBACK")
                raise

    @_reported
    def put_batch(self, batch: Mapping[str, Any], calls: list[tuple[str, str, str]]) -> None:
        """Record a batch (BATCH_STATES; `id`, `backend`, `identity`, `provider`, `state`, `requests`, `bytes`) and
        its calls ((content key, kind, request JSON)), committed before this returns."""
        now = time.time()
        row = {**{k: None for k in _BATCH_FIELDS}, "created": now, "updated": now, **batch}
        self._commit_now([(f"INSERT INTO batches ({', '.join(_BATCH_FIELDS)}) VALUES ({','.join('?' * len(_BATCH_FIELDS))})",
                           tuple(row[k] for k in _BATCH_FIELDS))]
                         + [("INSERT OR REPLACE INTO batch_calls VALUES (?,?,?,?)", (batch["id"], key, kind, redact(text)))
                            for key, kind, text in calls])

    @_reported
    def update_batch(self, row_id: str, /, **fields: Any) -> None:
        """Change a batch row's fields (state, batch_id, status, counts...), committed before this returns."""
        unknown = set(fields) - set(_BATCH_FIELDS)
        if unknown:
            raise ValueError(f"no batch field(s) {sorted(unknown)}")
        fields["updated"] = time.time()
        if isinstance(fields.get("counts"), Mapping):
            fields["counts"] = canonical_json(fields["counts"])
        names = sorted(fields)
        self._commit_now([(f"UPDATE batches SET {', '.join(f'{n}=?' for n in names)} WHERE id=?",
                           (*(fields[n] for n in names), row_id))])

    def _batch_rows(self, where: str, args: tuple) -> list[dict[str, Any]]:
        with self._lock:
            self._commit_queued()
            rows = self._conn.execute(f"SELECT {', '.join(_BATCH_FIELDS)} FROM batches {where} ORDER BY created, id",
                                      args).fetchall()
        out = []
        for row in rows:
            entry = dict(zip(_BATCH_FIELDS, row))
            entry["counts"] = json.loads(entry["counts"]) if entry["counts"] else {}
            out.append(entry)
        return out

    @_reported
    def batch(self, batch_id: str) -> dict[str, Any] | None:
        """One batch row (None: no such batch)."""
        found = self._batch_rows("WHERE id=?", (batch_id,))
        return found[0] if found else None

    @_reported
    def batches(self, identity: str | None = None, states: tuple[str, ...] | None = None) -> list[dict[str, Any]]:
        """The batch rows, oldest first: of one backend identity (its hash) and in `states` where given."""
        clauses, args = [], []
        if identity is not None:
            clauses.append("identity=?")
            args.append(identity)
        if states is not None:
            clauses.append(f"state IN ({','.join('?' * len(states))})")
            args.extend(states)
        return self._batch_rows(("WHERE " + " AND ".join(clauses)) if clauses else "", tuple(args))

    @_reported
    def batch_calls(self, batch_id: str) -> list[tuple[str, str, str]]:
        """(content key, kind, request JSON) of every call recorded in a batch."""
        with self._lock:
            self._commit_queued()
            return [tuple(r) for r in self._conn.execute(  # type: ignore[misc]
                "SELECT key, kind, request FROM batch_calls WHERE batch=? ORDER BY rowid", (batch_id,)).fetchall()]

    @_reported
    def batch_of_call(self, key: str, identity: str) -> str | None:
        """The batch (of this backend identity) in ACTIVE_BATCH_STATES that holds the call `key`, newest first; None:
        no batch holds it, or only batches that never reached the provider or are done with it."""
        with self._lock:
            self._commit_queued()
            row = self._conn.execute(
                f"SELECT b.id FROM batch_calls c JOIN batches b ON b.id = c.batch WHERE c.key=? AND b.identity=? "
                f"AND b.state IN ({','.join('?' * len(ACTIVE_BATCH_STATES))}) ORDER BY b.created DESC LIMIT 1",
                (key, identity, *ACTIVE_BATCH_STATES)).fetchone()
        return None if row is None else row[0]

    @_reported
    def stored_keys(self, keys: list[str]) -> set[str]:
        """Which of `keys` the calls table holds (queued writes included)."""
        found: set[str] = set()
        with self._lock:
            found.update(k for k in keys if k in self._queued_calls)
            rest = [k for k in keys if k not in found]
            for i in range(0, len(rest), 500):
                chunk = rest[i:i + 500]
                found.update(r[0] for r in self._conn.execute(
                    f"SELECT key FROM calls WHERE key IN ({','.join('?' * len(chunk))})", chunk).fetchall())
        return found

    @_reported
    def get_run(self, run_key: str) -> dict[str, Any] | None:
        """The config a run key was made from (None: no such run here)."""
        with self._lock:
            self._commit_queued()
            row = self._conn.execute("SELECT config FROM runs WHERE run_key=?", (run_key,)).fetchone()
        return None if row is None else _row_json(self.path, row[0], f"the run row {run_key}",
                                                  f"DELETE FROM runs WHERE run_key={_sql(run_key)}")

    @_reported
    def run_configs(self) -> dict[str, dict[str, Any]]:
        """Every run's config by run key (get_run for all of them: which runs of a task and model a store holds)."""
        with self._lock:
            self._commit_queued()
            rows = self._conn.execute("SELECT run_key, config FROM runs").fetchall()
        return {key: _row_json(self.path, config, f"the run row {key}", f"DELETE FROM runs WHERE run_key={_sql(key)}")
                for key, config in rows}

    # -- moving rows between stores (a Ray worker's store into the driver's) --------------------
    @_reported
    def export_rows(self, run_key: str) -> StoreRows:
        """Every call and failure in this store, and the run's row and finished samples."""
        with self._lock:
            self._commit_queued()
            return StoreRows(
                calls=self._conn.execute(f"SELECT {_CALL_COLUMNS} FROM calls").fetchall(),
                failures=self._conn.execute(f"SELECT {_FAILURE_COLUMNS} FROM failures").fetchall(),
                runs=self._conn.execute("SELECT run_key, config, created FROM runs WHERE run_key=?",
                                        (run_key,)).fetchall(),
                samples=self._conn.execute("SELECT run_key, sample_id, record, created FROM samples "
                                           "WHERE run_key=?", (run_key,)).fetchall())

    @_reported
    def import_rows(self, rows: StoreRows) -> None:
        """Add rows exported from another store, in one transaction. Calls, runs and samples already
        here are kept (calls are content-addressed, so importing the same rows twice changes nothing);
        failures are a log and are appended."""
        with self._lock:
            self._commit_queued()
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                self._conn.executemany(f"INSERT OR IGNORE INTO calls ({_CALL_COLUMNS}) VALUES (?,?,?,?,?,?,?)",
                                       rows.calls)
                self._conn.executemany(f"INSERT INTO failures ({_FAILURE_COLUMNS}) VALUES (?,?,?,?,?,?,?)",
                                       rows.failures)
                self._conn.executemany("INSERT OR IGNORE INTO runs VALUES (?,?,?)", rows.runs)
                self._conn.executemany("INSERT OR IGNORE INTO samples VALUES (?,?,?,?)", rows.samples)
                self._conn.execute("COMMIT")
            except BaseException:
                if self._conn.in_transaction:  # SQLite has rolled back already after a full disk or an I/O error
                    self._conn.execute("ROLLBACK")
                raise

    @_reported
    def close(self) -> None:
        with self._lock:
            try:
                self._commit_queued()
            finally:  # a failed last commit still closes the connection (and its error is the one raised)
                self._conn.close()
                self._claims.close()

    def __enter__(self) -> "RunStore":
        return self

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        """Close; when the block raised, a failing last commit (the same full disk, most often) does not hide
        that first error."""
        try:
            self.close()
        except Exception:
            if exc is None:
                raise
