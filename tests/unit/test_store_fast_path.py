"""The run store's fast path: cache keys pinned byte for byte, JSON encoders equal to json.dumps,
to_jsonable's fast dispatch equal to the full rules, and the group commit's guarantees (a sample is
counted done only once it and its calls are committed; outside an event loop every write commits)."""

from __future__ import annotations

import asyncio
import enum
import json
import math
import random
import sqlite3
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Mapping, NamedTuple

import pytest

import finharness.core.store as store_module
from finharness.backends.fake import FakeBackend
from finharness.core.hashing import canonical_json, content_key, content_key_of_canonical
from finharness.core.model import CachedModel, RunCounters
from finharness.core.runner import RunOptions, run_task
from finharness.core.store import RunStore, StoreError
from finharness.core.types import (
    GenerateParams,
    GenerateRequest,
    LoglikelihoodRequest,
    Message,
    Sample,
    Score,
    to_jsonable,
)

from .asking_task import AskingTask

# -- keys ------------------------------------------------------------------------------------------

PINNED_REQUEST = GenerateRequest(
    (Message("system", "Réponds en une lettre."), Message("user", '问题 1: which letter? "A"\n')),
    GenerateParams(max_tokens=8, stop=("\n",), seed=3, temperature=0.7), sample_index=2)
PINNED_REQUEST_JSON = (
    '{"kind":"generate","messages":[{"content":"Réponds en une lettre.","role":"system"},'
    '{"content":"问题 1: which letter? \\"A\\"\\n","role":"user"}],"params":{"frequency_penalty":0.0,'
    '"max_tokens":8,"presence_penalty":0.0,"seed":3,"stop":["\\n"],"temperature":0.7,"top_logprobs":0,'
    '"top_p":1.0},"sample_index":2}')
PINNED_GENERATE_KEY = "bb7cba0d22a9ad51f3760d3facf143e8b91e16f1d91d7eaa74c7cd545db4b5bd"
PINNED_LOGLIKELIHOOD_KEY = "a798fd850e57eee5bdefaf624970f4813535b3075c1e599afa3825b96783472f"
"""Keys written by finharness before the fast path (commit b7bc907): existing stores must still hit."""


def test_known_requests_keep_their_keys_and_stored_text():
    identity = dict(FakeBackend().identity())
    assert canonical_json(to_jsonable(PINNED_REQUEST)) == PINNED_REQUEST_JSON
    assert content_key(identity, "generate", to_jsonable(PINNED_REQUEST)) == PINNED_GENERATE_KEY
    ll = LoglikelihoodRequest("Context: 1.5 < 2", (" yes", " no"))
    assert content_key(identity, "loglikelihood", to_jsonable(ll)) == PINNED_LOGLIKELIHOOD_KEY


def test_the_engine_stores_a_call_under_its_pinned_key_and_a_stored_call_still_hits(tmp_path: Path):
    store = RunStore(tmp_path / "s.sqlite")
    backend = FakeBackend()
    model = CachedModel(backend, store, RunCounters())
    first = asyncio.run(model.generate(PINNED_REQUEST))
    calls = list(store.iter_calls())
    assert [c["key"] for c in calls] == [PINNED_GENERATE_KEY]
    with sqlite3.connect(store.path) as conn:
        assert conn.execute("SELECT request FROM calls").fetchone()[0] == PINNED_REQUEST_JSON
    counters = RunCounters()
    again = asyncio.run(CachedModel(backend, store, counters).generate(PINNED_REQUEST))
    assert again == first and counters.cache_hits == 1 and backend.calls == 1
    store.close()


def random_json_value(rng: random.Random, depth: int = 0) -> Any:
    """A nested value of the kinds requests hold: unicode and escapes, odd floats, big ints, tuples."""
    leaves = [lambda: "".join(rng.choice('aé问"\\\n\t\x00\u2028😀 <>&') for _ in range(rng.randrange(8))),
              lambda: rng.choice([0.0, -0.0, 1e16, 1e-7, 0.1, math.inf, -math.inf, math.nan, 2.5e300]),
              lambda: rng.uniform(-1e6, 1e6), lambda: rng.randrange(-2**70, 2**70), lambda: rng.random() < 0.5,
              lambda: None]
    if depth >= 3 or rng.random() < 0.4:
        return rng.choice(leaves)()
    if rng.random() < 0.5:
        return {"".join(rng.choice("kéy_Z") for _ in range(rng.randrange(1, 5))): random_json_value(rng, depth + 1)
                for _ in range(rng.randrange(4))}
    items = [random_json_value(rng, depth + 1) for _ in range(rng.randrange(4))]
    return tuple(items) if rng.random() < 0.5 else items


def test_canonical_encoding_is_json_dumps_and_the_key_of_parts_is_the_key_of_the_list():
    rng = random.Random(8)
    for _ in range(400):
        parts = [random_json_value(rng) for _ in range(rng.randrange(1, 4))]
        expected = json.dumps(list(parts), sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
        assert canonical_json(list(parts)) == expected
        assert content_key_of_canonical(*(canonical_json(p) for p in parts)) == content_key(*parts)


# -- to_jsonable ---------------------------------------------------------------------------------

def reference_to_jsonable(obj: Any) -> Any:
    """to_jsonable as it was before its fast dispatch (the rules the fast path must keep)."""
    if obj is None or isinstance(obj, (str, int, float)):
        return obj
    if isinstance(obj, (list, tuple)):
        return [reference_to_jsonable(v) for v in obj]
    if isinstance(obj, dict):
        return {str(k): reference_to_jsonable(v) for k, v in obj.items()}
    if hasattr(obj, "__dataclass_fields__"):
        from dataclasses import fields
        return {f.name: reference_to_jsonable(getattr(obj, f.name)) for f in fields(obj)
                if not (f.metadata.get("omit_at_default") and getattr(obj, f.name) == f.default)}
    if isinstance(obj, Mapping):
        return {str(k): reference_to_jsonable(v) for k, v in obj.items()}
    return obj


class Colour(str, enum.Enum):
    RED = "red"


class Level(enum.IntEnum):
    HIGH = 3


class Point(NamedTuple):
    x: int
    y: float


class Tagged(dict):
    pass


@dataclass(frozen=True)
class Nested:
    name: str
    colour: Colour = Colour.RED
    level: Level = Level.HIGH
    point: Point = Point(1, 2.0)
    extra: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({"a": (1, Tagged(b=[True]))}))
    inner: Any = None


def test_fast_dispatch_gives_what_the_full_rules_give():
    values = [PINNED_REQUEST, LoglikelihoodRequest("c", ("x", "y")), Sample("s1", {"q": ("a", 1.5)}, "A", {"k": 2}),
              Score(0.5, {"f1": 1.0}, extracted=Colour.RED), Nested("n", inner=Nested("m", inner=[Level.HIGH])),
              {1: "int key", "t": (None, False)}, Tagged(z=Point(3, 4.0)), [Colour.RED, Level.HIGH, b"raw"],
              "text", 3, 2.5, True, None]
    for value in values:
        for _ in range(2):  # the second pass takes the fast path for dataclasses seen once
            converted = to_jsonable(value)
            assert converted == reference_to_jsonable(value)
            assert canonical_json(converted) == canonical_json(reference_to_jsonable(value))


# -- group commit ----------------------------------------------------------------------------------

def committed_keys(path: Path) -> set[str]:
    """Call keys another process would see now."""
    with sqlite3.connect(path) as conn:
        return {row[0] for row in conn.execute("SELECT key FROM calls")}


def put(store: RunStore, key: str) -> None:
    store.put_call(key, "fake", "generate", {"q": key}, {"text": key.upper()}, 0.01)


class StoreClock:
    """The store's `time` module, with a monotonic clock that moves only when the test moves it: the
    commit-age rule sees the gaps the test makes, never a pause of a loaded machine (time.time and
    anything else are the real ones)."""

    def __init__(self) -> None:
        self.now = 0.0

    def monotonic(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)

    @classmethod
    def install(cls, monkeypatch) -> "StoreClock":
        """Give the store module this clock (call it once the store is open: opening keeps real time)."""
        fake = cls()
        monkeypatch.setattr(store_module, "time", fake)
        return fake


class Transactions:
    """The transactions a store commits, each as the tables of the rows it writes (from SQLite's own
    trace of the statements the store's connection runs)."""

    def __init__(self, store: RunStore) -> None:
        self.statements: list[str] = []
        store._conn.set_trace_callback(self.statements.append)

    def committed(self) -> list[list[str]]:
        done: list[list[str]] = []
        current: list[str] | None = None
        for sql in self.statements:
            word = sql.split(None, 1)[0].upper() if sql.strip() else ""
            if word == "BEGIN":
                current = []
            elif word == "COMMIT" and current is not None:
                done.append(current)
                current = None
            elif word == "ROLLBACK":
                current = None
            elif word == "INSERT":
                table = sql.split(" INTO ", 1)[1].split(None, 1)[0]
                if current is None:
                    done.append([table])  # autocommit: a transaction of its own
                else:
                    current.append(table)
        return done


def test_outside_an_event_loop_every_write_commits_at_once(tmp_path: Path):
    store = RunStore(tmp_path / "s.sqlite")
    commits = Transactions(store)
    put(store, "k1")
    store.put_sample("run", "s1", {"prediction": "K1"})
    assert committed_keys(store.path) == {"k1"}
    assert commits.committed() == [["calls"], ["samples"]]
    store.close()


def test_inside_a_loop_writes_commit_at_the_end_of_the_iteration_and_are_read_back_before(tmp_path: Path,
                                                                                         monkeypatch):
    store = RunStore(tmp_path / "s.sqlite")
    commits = Transactions(store)
    # the store's clock stands still here: however long the machine pauses between the two writes,
    # the commit-age rule (tested below) cannot commit the first before the iteration ends
    StoreClock.install(monkeypatch)

    async def scenario() -> None:
        put(store, "k1")
        store.put_sample("run", "s1", {"prediction": "K1"})
        assert committed_keys(store.path) == set(), "queued until this loop iteration ends"
        assert commits.committed() == []
        assert store.get_call("k1") == {"response": {"text": "K1"}, "latency_s": 0.01}, "read your own writes"
        await store.synced()
        assert committed_keys(store.path) == {"k1"}
        assert commits.committed() == [["calls", "samples"]], "both rows in one transaction"
        put(store, "k2")
        await asyncio.sleep(0)  # one loop iteration, nobody waiting: still committed
        assert committed_keys(store.path) == {"k1", "k2"}
        assert commits.committed() == [["calls", "samples"], ["calls"]]

    asyncio.run(scenario())
    assert store.get_samples("run") == {"s1": {"prediction": "K1"}}
    store.close()


def test_a_write_commits_the_queue_once_its_oldest_row_is_too_old(tmp_path: Path, monkeypatch):
    store = RunStore(tmp_path / "s.sqlite")
    commits = Transactions(store)
    clock = StoreClock.install(monkeypatch)  # the rows' ages are the gaps made here, nothing else

    async def scenario() -> None:
        put(store, "k1")  # the first row of a queue is never older than itself
        clock.advance(0.6 * store_module.MAX_COMMIT_DELAY_S)
        put(store, "k2")  # the oldest row is still young enough
        assert committed_keys(store.path) == set() and commits.committed() == []
        clock.advance(0.6 * store_module.MAX_COMMIT_DELAY_S)
        put(store, "k3")  # the oldest row (not the newest) is too old now: the whole queue commits, k3 too
        assert committed_keys(store.path) == {"k1", "k2", "k3"}
        assert commits.committed() == [["calls"] * 3]
        await asyncio.sleep(0)  # the end-of-iteration commit k1 scheduled runs, and finds nothing left
        assert commits.committed() == [["calls"] * 3]

    asyncio.run(scenario())
    store.close()


def test_a_failed_group_commit_fails_its_waiters_and_keeps_the_rows_to_retry(tmp_path: Path):
    store = RunStore(tmp_path / "s.sqlite")
    other = sqlite3.connect(store.path, isolation_level=None)
    other.execute("ALTER TABLE calls RENAME TO calls_away")  # the commit's INSERT finds no table

    async def scenario() -> None:
        put(store, "k1")
        with pytest.raises(StoreError, match="no such table") as raised:
            await store.synced()
        assert isinstance(raised.value.__cause__, sqlite3.OperationalError)
        assert store.get_call("k1") is not None, "still queued"

    asyncio.run(scenario())
    other.execute("ALTER TABLE calls_away RENAME TO calls")
    other.close()
    assert store.count_calls() == 1  # a read commits the queue first
    assert committed_keys(store.path) == {"k1"}
    store.close()


def test_a_sample_is_counted_done_only_once_it_and_its_calls_are_committed(tmp_path: Path):
    db = tmp_path / "s.sqlite"
    store = RunStore(db)
    seen: list[tuple[int, int, int]] = []

    def progress(counters: RunCounters) -> None:
        with sqlite3.connect(db) as conn:  # what a process killed now would leave
            calls = conn.execute("SELECT COUNT(*) FROM calls").fetchone()[0]
            samples = conn.execute("SELECT COUNT(*) FROM samples").fetchone()[0]
        seen.append((counters.samples_done, samples, calls))

    backend = FakeBackend(latency=0.001)
    for out in ("a", "b"):  # twice in one store, each in its own event loop (as the P1 benchmark does)
        result = asyncio.run(run_task(AskingTask(n=40, asks=2), {"model": backend}, store, RunOptions(concurrency=8), out_dir=tmp_path / out, progress=progress))
        assert result.results["status"] == "complete"
    assert backend.calls == 80
    assert all(samples >= done and calls >= 2 * min(done, 40) for done, samples, calls in seen), seen
    store.close()


# -- a row SQLite can never store (moved here from the engine review's findings) ------------------------------

UNSTORABLE = "\ud83d"
"""Half a surrogate pair: a str Python holds (a JSON reply may carry the escape "\\ud83d") that SQLite
cannot store (UTF-8 has no encoding for it)."""



def test_a_row_that_can_never_be_stored_does_not_wedge_the_queue(tmp_path: Path):
    """One unstorable row fails its own group commit, but the rows queued with it and every later
    write still commit, and the store still closes (before: every later commit failed the same way,
    so one bad reply failed every sample of every pooled task, and close() raised)."""
    store = RunStore(tmp_path / "s.sqlite")

    async def scenario() -> None:
        store.put_call("good-1", "fake", "generate", {"q": 1}, {"text": "fine"}, 0.01)
        store.put_call("bad", "fake", "generate", {"q": 2}, {"text": UNSTORABLE}, 0.01)
        with pytest.raises(UnicodeEncodeError):
            await store.synced()
        store.put_call("good-2", "fake", "generate", {"q": 3}, {"text": "fine too"}, 0.01)
        await store.synced()
        assert store.get_call("bad") is None, "a call that was not stored is not served either"

    asyncio.run(scenario())
    assert committed_keys(store.path) == {"good-1", "good-2"}
    store.close()
