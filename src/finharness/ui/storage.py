"""The rater app's tables, kept in the run store's SQLite file (WAL) beside the engine's tables.

The tables have their own migration list and version table (`ui_schema`), not entries in
`core.store.MIGRATIONS`: the engine's `PRAGMA user_version` then keeps counting engine changes
only, a store written by the app still opens in a finharness without the app, and the app's
schema can move without touching the engine's. Every table is prefixed `ui_`.

Secrets are never stored: a rater's token and a browser session id are kept as sha256 hashes.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Literal, Mapping, Sequence

from ..core.hashing import canonical_json
from ..core.store import RunStore

Kind = Literal["pair", "rubric"]
Choice = Literal["1", "2", "tie"]

CHOICES: tuple[str, ...] = ("1", "2", "tie")
"""What a rater may answer on a pairwise page: the response shown first, the second, or a tie."""

RUBRIC_DIMENSIONS: tuple[tuple[str, str, str], ...] = (
    ("accuracy", "Factual and numerical accuracy",
     "Facts, figures and calculations are correct and consistent with the question's data."),
    ("completeness", "Completeness", "Every part of the question is answered; nothing needed is left out."),
    ("relevance", "Relevance", "The answer addresses this question and uses the pertinent data, without padding."),
    ("clarity", "Clarity", "The answer is well organised, precise and easy to follow."),
)
"""FinTradeBench's judge rubric: (key, label, what a 5 means), each scored 1–5."""

SESSION_SECONDS = 7 * 24 * 3600
"""How long a browser session lasts after sign-in."""

# Each migration takes the app's schema from version i to i+1: append, never edit.
UI_MIGRATIONS: list[str] = [
    """
    CREATE TABLE ui_raters (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        name TEXT NOT NULL UNIQUE,
        created REAL NOT NULL
    );
    CREATE TABLE ui_tokens (
        token_sha256 TEXT PRIMARY KEY,
        rater_id INTEGER NOT NULL REFERENCES ui_raters(id),
        created REAL NOT NULL,
        revoked REAL
    );
    CREATE TABLE ui_sessions (
        session_sha256 TEXT PRIMARY KEY,
        rater_id INTEGER NOT NULL REFERENCES ui_raters(id),
        csrf TEXT NOT NULL,
        created REAL NOT NULL,
        expires REAL NOT NULL
    );
    CREATE TABLE ui_work_items (
        id TEXT PRIMARY KEY,
        rater_id INTEGER NOT NULL REFERENCES ui_raters(id),
        kind TEXT NOT NULL CHECK (kind IN ('pair', 'rubric')),
        task TEXT NOT NULL,
        item_id TEXT NOT NULL,
        sample_id TEXT NOT NULL,
        model_a TEXT NOT NULL,
        model_b TEXT,
        pair_key TEXT NOT NULL,
        first TEXT NOT NULL CHECK (first IN ('a', 'b')),
        position INTEGER NOT NULL,
        content TEXT NOT NULL,
        source TEXT NOT NULL,
        created REAL NOT NULL,
        UNIQUE (rater_id, kind, task, item_id, pair_key)
    );
    CREATE INDEX ui_work_items_queue ON ui_work_items (rater_id, position);
    CREATE TABLE ui_verdicts (
        work_item_id TEXT PRIMARY KEY REFERENCES ui_work_items(id),
        rater_id INTEGER NOT NULL REFERENCES ui_raters(id),
        choice TEXT NOT NULL CHECK (choice IN ('1', '2', 'tie')),
        winner TEXT NOT NULL CHECK (winner IN ('model_a', 'model_b', 'tie')),
        shown_first TEXT NOT NULL,
        comment TEXT NOT NULL,
        created REAL NOT NULL
    );
    CREATE TABLE ui_rubric_scores (
        work_item_id TEXT PRIMARY KEY REFERENCES ui_work_items(id),
        rater_id INTEGER NOT NULL REFERENCES ui_raters(id),
        scores TEXT NOT NULL,
        comment TEXT NOT NULL,
        created REAL NOT NULL
    );
    """,
]


def sha256_hex(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


class AlreadyJudged(Exception):
    """A verdict or rubric score for this work item is stored already; verdicts are final."""


@dataclass(frozen=True)
class Rater:
    """A human expert who judges work items."""

    id: int
    """Row id; never shown to other raters."""
    name: str
    """What exports call them: `human:NAME`."""


@dataclass(frozen=True)
class Session:
    """A signed-in browser."""

    rater: Rater
    """Whose session it is."""
    csrf: str
    """The per-session form token every POST form must echo."""


@dataclass(frozen=True)
class NewWorkItem:
    """A work item to create (see `RaterStore.add_work_items`)."""

    rater: Rater
    """Whose queue it goes into."""
    kind: Kind
    """'pair' (two responses, blind) or 'rubric' (one response, scored 1–5 per dimension)."""
    task: str
    """Task of the item, as matches name it (a UCFE task key such as `Analyst`, or the run's task)."""
    item_id: str
    """Item id within the task, as matches name it."""
    sample_id: str
    """The id of the line in samples.jsonl."""
    model_a: str
    """The (first run's) model; for a rubric item, the model whose answer is scored."""
    model_b: str | None
    """The second run's model; None for rubric items."""
    first: Literal["a", "b"]
    """Which side is shown first ('a': model_a's response is 'Response 1')."""
    content: Mapping[str, Any]
    """What the page shows: {"context": [turns], "a": [turns], "b": [turns] (pairs only)}."""
    source: Mapping[str, Any]
    """Where it came from (run directories), for the audit trail; never shown to raters."""


@dataclass(frozen=True)
class WorkItem:
    """One stored work item in a rater's queue."""

    id: str
    """Opaque random id: the only handle pages and URLs use."""
    rater_id: int
    kind: Kind
    task: str
    item_id: str
    sample_id: str
    model_a: str
    model_b: str | None
    first: Literal["a", "b"]
    position: int
    """Place in the rater's queue (1-based)."""
    content: Mapping[str, Any]
    verdict: Mapping[str, Any] | None
    """The stored verdict or rubric score; None while pending."""

    @property
    def done(self) -> bool:
        return self.verdict is not None

    @property
    def shown_order(self) -> tuple[str, ...]:
        """Sides in the order shown: ('a', 'b') or ('b', 'a'); ('a',) for rubric items."""
        if self.kind == "rubric":
            return ("a",)
        return ("a", "b") if self.first == "a" else ("b", "a")

    def model_of(self, side: str) -> str:
        return self.model_a if side == "a" else self.model_b  # type: ignore[return-value]


class RaterStore:
    """Raters, tokens, sessions, work items and verdicts in a run store file."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        RunStore(self.path).close()  # creates or checks the engine's schema: the file is a real run store
        self._lock = threading.Lock()
        self._conn = sqlite3.connect(self.path, timeout=60.0, check_same_thread=False, isolation_level=None)
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("PRAGMA busy_timeout=60000")
        self._conn.execute("PRAGMA foreign_keys=ON")
        self._migrate()

    def _migrate(self) -> None:
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                self._conn.execute("CREATE TABLE IF NOT EXISTS ui_schema (version INTEGER NOT NULL)")
                row = self._conn.execute("SELECT version FROM ui_schema").fetchone()
                version = row[0] if row else 0
                if row is None:
                    self._conn.execute("INSERT INTO ui_schema VALUES (0)")
                if version > len(UI_MIGRATIONS):
                    raise RuntimeError(f"{self.path}: rater-app schema v{version} is newer than this finharness "
                                       f"(v{len(UI_MIGRATIONS)}); upgrade finharness")
                for i in range(version, len(UI_MIGRATIONS)):
                    for statement in UI_MIGRATIONS[i].split(";"):
                        if statement.strip():
                            self._conn.execute(statement)
                    self._conn.execute("UPDATE ui_schema SET version=?", (i + 1,))
                self._conn.execute("COMMIT")
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise

    def _rows(self, sql: str, args: tuple = ()) -> list[tuple]:
        with self._lock:
            return self._conn.execute(sql, args).fetchall()

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    # -- raters and tokens ------------------------------------------------------
    def add_rater(self, name: str) -> tuple[Rater, str, bool]:
        """Issue a token for NAME, creating the rater if new; an existing rater's old tokens and sessions
        are revoked (a lost token is replaced this way). Returns (rater, token, created)."""
        name = name.strip()
        if not name or any(ch.isspace() or ch == "," for ch in name):
            raise ValueError(f"rater name {name!r} must be non-empty, without spaces or commas")
        token = secrets.token_urlsafe(24)
        now = time.time()
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                row = self._conn.execute("SELECT id FROM ui_raters WHERE name=?", (name,)).fetchone()
                created = row is None
                if created:
                    rater_id = self._conn.execute("INSERT INTO ui_raters (name, created) VALUES (?,?)",
                                                  (name, now)).lastrowid
                else:
                    rater_id = row[0]
                    self._conn.execute("UPDATE ui_tokens SET revoked=? WHERE rater_id=? AND revoked IS NULL",
                                       (now, rater_id))
                    self._conn.execute("DELETE FROM ui_sessions WHERE rater_id=?", (rater_id,))
                self._conn.execute("INSERT INTO ui_tokens VALUES (?,?,?,NULL)", (sha256_hex(token), rater_id, now))
                self._conn.execute("COMMIT")
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
        return Rater(rater_id, name), token, created

    def raters(self) -> list[Rater]:
        return [Rater(i, n) for i, n in self._rows("SELECT id, name FROM ui_raters ORDER BY name")]

    def rater_by_token(self, token: str) -> Rater | None:
        rows = self._rows("SELECT r.id, r.name FROM ui_tokens t JOIN ui_raters r ON r.id = t.rater_id "
                          "WHERE t.token_sha256=? AND t.revoked IS NULL", (sha256_hex(token),))
        return Rater(*rows[0]) if rows else None

    # -- sessions ----------------------------------------------------------------
    def open_session(self, rater: Rater) -> tuple[str, Session]:
        """A new browser session: returns the session id (for the cookie; only its hash is stored)."""
        session_id = secrets.token_urlsafe(32)
        csrf = secrets.token_urlsafe(24)
        now = time.time()
        with self._lock:
            self._conn.execute("DELETE FROM ui_sessions WHERE expires < ?", (now,))
            self._conn.execute("INSERT INTO ui_sessions VALUES (?,?,?,?,?)",
                               (sha256_hex(session_id), rater.id, csrf, now, now + SESSION_SECONDS))
        return session_id, Session(rater, csrf)

    def session(self, session_id: str) -> Session | None:
        rows = self._rows("SELECT r.id, r.name, s.csrf FROM ui_sessions s JOIN ui_raters r ON r.id = s.rater_id "
                          "WHERE s.session_sha256=? AND s.expires >= ?", (sha256_hex(session_id), time.time()))
        return Session(Rater(rows[0][0], rows[0][1]), rows[0][2]) if rows else None

    def close_session(self, session_id: str) -> None:
        with self._lock:
            self._conn.execute("DELETE FROM ui_sessions WHERE session_sha256=?", (sha256_hex(session_id),))

    # -- work items ----------------------------------------------------------------
    def add_work_items(self, items: Iterable[NewWorkItem]) -> int:
        """Append items to their raters' queues; an item a rater already has (same kind, task, item and
        pair of models in either order) is skipped. Returns how many were added."""
        added = 0
        now = time.time()
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                for item in items:
                    pair_key = canonical_json(sorted(m for m in (item.model_a, item.model_b) if m is not None))
                    position = self._conn.execute("SELECT COALESCE(MAX(position), 0) + 1 FROM ui_work_items "
                                                  "WHERE rater_id=?", (item.rater.id,)).fetchone()[0]
                    cursor = self._conn.execute(
                        "INSERT OR IGNORE INTO ui_work_items VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                        (secrets.token_urlsafe(12), item.rater.id, item.kind, item.task, item.item_id,
                         item.sample_id, item.model_a, item.model_b, pair_key, item.first, position,
                         canonical_json(item.content), canonical_json(item.source), now))
                    added += cursor.rowcount
                self._conn.execute("COMMIT")
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
        return added

    _ITEM_COLUMNS = ("w.id, w.rater_id, w.kind, w.task, w.item_id, w.sample_id, w.model_a, w.model_b, w.first, "
                     "w.position, w.content, v.choice, v.winner, v.comment, v.created, s.scores, s.comment, "
                     "s.created")
    _ITEM_JOIN = ("FROM ui_work_items w LEFT JOIN ui_verdicts v ON v.work_item_id = w.id "
                  "LEFT JOIN ui_rubric_scores s ON s.work_item_id = w.id")

    @staticmethod
    def _item(row: tuple) -> WorkItem:
        (wid, rater_id, kind, task, item_id, sample_id, model_a, model_b, first, position, content,
         choice, winner, v_comment, v_created, scores, s_comment, s_created) = row
        verdict: dict[str, Any] | None = None
        if choice is not None:
            verdict = {"choice": choice, "winner": winner, "comment": v_comment, "created": v_created}
        elif scores is not None:
            verdict = {"scores": json.loads(scores), "comment": s_comment, "created": s_created}
        return WorkItem(wid, rater_id, kind, task, item_id, sample_id, model_a, model_b, first, position,
                        json.loads(content), verdict)

    def queue(self, rater: Rater) -> list[WorkItem]:
        rows = self._rows(f"SELECT {self._ITEM_COLUMNS} {self._ITEM_JOIN} WHERE w.rater_id=? ORDER BY w.position",
                          (rater.id,))
        return [self._item(r) for r in rows]

    def work_item(self, rater: Rater, work_item_id: str) -> WorkItem | None:
        """The item if it is in this rater's queue; another rater's item is None, as if it did not exist."""
        rows = self._rows(f"SELECT {self._ITEM_COLUMNS} {self._ITEM_JOIN} WHERE w.id=? AND w.rater_id=?",
                          (work_item_id, rater.id))
        return self._item(rows[0]) if rows else None

    # -- verdicts --------------------------------------------------------------------
    def put_verdict(self, item: WorkItem, choice: Choice, comment: str) -> None:
        """Store a pairwise verdict given as shown ('1', '2', 'tie'); it is translated to the models' sides."""
        if item.kind != "pair":
            raise ValueError(f"work item {item.id} is a rubric item, not a pair")
        if choice not in CHOICES:
            raise ValueError(f"choice {choice!r} is not one of {CHOICES}")
        order = item.shown_order
        winner = "tie" if choice == "tie" else f"model_{order[int(choice) - 1]}"
        self._insert_final("INSERT INTO ui_verdicts VALUES (?,?,?,?,?,?,?)",
                           (item.id, item.rater_id, choice, winner, item.first, comment, time.time()))

    def put_rubric(self, item: WorkItem, scores: Mapping[str, int], comment: str) -> None:
        if item.kind != "rubric":
            raise ValueError(f"work item {item.id} is a pair, not a rubric item")
        keys = [key for key, _, _ in RUBRIC_DIMENSIONS]
        bad = [k for k in keys if not isinstance(scores.get(k), int) or not 1 <= scores[k] <= 5]
        if bad or set(scores) != set(keys):
            raise ValueError(f"rubric scores need an integer 1–5 for each of {keys}; got {dict(scores)}")
        self._insert_final("INSERT INTO ui_rubric_scores VALUES (?,?,?,?,?)",
                           (item.id, item.rater_id, canonical_json({k: scores[k] for k in keys}), comment,
                            time.time()))

    def _insert_final(self, sql: str, args: tuple) -> None:
        try:
            with self._lock:
                self._conn.execute(sql, args)
        except sqlite3.IntegrityError as err:
            if "UNIQUE" in str(err) or "PRIMARY KEY" in str(err):
                raise AlreadyJudged(args[0]) from err
            raise

    def judged_pairs(self, raters: Sequence[str] | None = None) -> list[tuple[Rater, WorkItem]]:
        """Every stored pairwise verdict with its item, in the order the verdicts were given."""
        return self._judged("ui_verdicts", raters)

    def judged_rubrics(self, raters: Sequence[str] | None = None) -> list[tuple[Rater, WorkItem]]:
        return self._judged("ui_rubric_scores", raters)

    def _judged(self, table: str, raters: Sequence[str] | None) -> list[tuple[Rater, WorkItem]]:
        alias = "v" if table == "ui_verdicts" else "s"
        rows = self._rows(f"SELECT r.id, r.name, {self._ITEM_COLUMNS} {self._ITEM_JOIN} "
                          f"JOIN ui_raters r ON r.id = w.rater_id WHERE {alias}.created IS NOT NULL "
                          f"ORDER BY {alias}.created, w.rater_id, w.position")
        wanted = None if raters is None else set(raters)
        return [(Rater(r[0], r[1]), self._item(r[2:])) for r in rows if wanted is None or r[1] in wanted]

    def progress(self) -> dict[str, dict[str, int]]:
        """Per rater: items in the queue and items done."""
        rows = self._rows("SELECT r.name, COUNT(w.id), COUNT(v.work_item_id) + COUNT(s.work_item_id) "
                          "FROM ui_raters r LEFT JOIN ui_work_items w ON w.rater_id = r.id "
                          "LEFT JOIN ui_verdicts v ON v.work_item_id = w.id "
                          "LEFT JOIN ui_rubric_scores s ON s.work_item_id = w.id GROUP BY r.id ORDER BY r.name")
        return {name: {"items": total, "done": done} for name, total, done in rows}
