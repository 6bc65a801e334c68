"""The run store: every model call and every finished sample, in SQLite (WAL).

Calls are content-addressed: key = sha256 of the backend's identity and the
exact request (and, for sampled generations, the seed and sample index, which
are fields of the request). A rerun finds every completed call here, so it
computes nothing twice; a `kill -9` loses at most the call in flight, because
each call is committed as soon as it returns.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Mapping

SCHEMA_VERSION = 1

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
]


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


def canonical_json(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)


def content_key(*parts: Any) -> str:
    return hashlib.sha256(canonical_json(list(parts)).encode("utf-8")).hexdigest()


class RunStore:
    """A SQLite file shared by any number of runs (and processes: WAL + busy timeout)."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._conn = sqlite3.connect(self.path, timeout=60.0, check_same_thread=False,
                                     isolation_level=None)
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("PRAGMA synchronous=NORMAL")
        self._conn.execute("PRAGMA busy_timeout=60000")
        self._migrate()

    def _migrate(self) -> None:
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                version = self._conn.execute("PRAGMA user_version").fetchone()[0]
                if version > len(MIGRATIONS):
                    raise RuntimeError(f"{self.path}: store schema v{version} is newer than this finharness "
                                       f"(v{len(MIGRATIONS)}); upgrade finharness")
                for i in range(version, len(MIGRATIONS)):
                    for statement in MIGRATIONS[i].split(";"):
                        if statement.strip():
                            self._conn.execute(statement)
                    self._conn.execute(f"PRAGMA user_version={i + 1}")
                self._conn.execute("COMMIT")
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise

    def _write(self, sql: str, args: tuple) -> None:
        with self._lock:
            self._conn.execute(sql, args)

    # -- calls ---------------------------------------------------------------
    def get_call(self, key: str) -> dict[str, Any] | None:
        with self._lock:
            row = self._conn.execute("SELECT response, latency_s FROM calls WHERE key=?", (key,)).fetchone()
        if row is None:
            return None
        return {"response": json.loads(row[0]), "latency_s": row[1]}

    def put_call(self, key: str, backend: str, kind: str, request: Mapping[str, Any],
                 response: Mapping[str, Any], latency_s: float) -> None:
        self._write("INSERT OR REPLACE INTO calls VALUES (?,?,?,?,?,?,?)",
                    (key, backend, kind, canonical_json(request), canonical_json(response), latency_s, time.time()))

    def put_failure(self, key: str, backend: str, kind: str, request: Mapping[str, Any], error: str,
                    attempts: int) -> None:
        self._write("INSERT INTO failures (key, backend, kind, request, error, attempts, created) "
                    "VALUES (?,?,?,?,?,?,?)",
                    (key, backend, kind, canonical_json(request), error, attempts, time.time()))

    def count_calls(self) -> int:
        with self._lock:
            return self._conn.execute("SELECT COUNT(*) FROM calls").fetchone()[0]

    def iter_calls(self) -> Iterator[dict[str, Any]]:
        with self._lock:
            rows = self._conn.execute("SELECT key, backend, kind, request, response FROM calls").fetchall()
        for key, backend, kind, request, response in rows:
            yield {"key": key, "backend": backend, "kind": kind, "request": json.loads(request),
                   "response": json.loads(response)}

    # -- samples ---------------------------------------------------------------
    def put_run(self, run_key: str, config: Mapping[str, Any]) -> None:
        self._write("INSERT OR IGNORE INTO runs VALUES (?,?,?)", (run_key, canonical_json(config), time.time()))

    def get_samples(self, run_key: str) -> dict[str, dict[str, Any]]:
        with self._lock:
            rows = self._conn.execute("SELECT sample_id, record FROM samples WHERE run_key=?", (run_key,)).fetchall()
        return {sid: json.loads(rec) for sid, rec in rows}

    def put_sample(self, run_key: str, sample_id: str, record: Mapping[str, Any]) -> None:
        self._write("INSERT OR REPLACE INTO samples VALUES (?,?,?,?)",
                    (run_key, sample_id, canonical_json(record), time.time()))

    def get_run(self, run_key: str) -> dict[str, Any] | None:
        """The config a run key was made from (None: no such run here)."""
        with self._lock:
            row = self._conn.execute("SELECT config FROM runs WHERE run_key=?", (run_key,)).fetchone()
        return None if row is None else json.loads(row[0])

    # -- moving rows between stores (a Ray worker's store into the driver's) --------------------
    def export_rows(self, run_key: str) -> StoreRows:
        """Every call and failure in this store, and the run's row and finished samples."""
        with self._lock:
            return StoreRows(
                calls=self._conn.execute(f"SELECT {_CALL_COLUMNS} FROM calls").fetchall(),
                failures=self._conn.execute(f"SELECT {_FAILURE_COLUMNS} FROM failures").fetchall(),
                runs=self._conn.execute("SELECT run_key, config, created FROM runs WHERE run_key=?",
                                        (run_key,)).fetchall(),
                samples=self._conn.execute("SELECT run_key, sample_id, record, created FROM samples "
                                           "WHERE run_key=?", (run_key,)).fetchall())

    def import_rows(self, rows: StoreRows) -> None:
        """Add rows exported from another store, in one transaction. Calls, runs and samples already
        here are kept (calls are content-addressed, so importing the same rows twice changes nothing);
        failures are a log and are appended."""
        with self._lock:
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
                self._conn.execute("ROLLBACK")
                raise

    def close(self) -> None:
        with self._lock:
            self._conn.close()
