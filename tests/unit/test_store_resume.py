"""The run store's resume path (core/store.py): what a rerun reads back (the call's request and response, the
run's config, the finished samples) is what was written. Written against mutants `make mutation` found alive."""

from __future__ import annotations

import sqlite3

from finharness.core.store import RunStore


def test_a_stored_call_keeps_its_request_and_response(tmp_path):
    store = RunStore(tmp_path / "store.sqlite")
    try:
        store.put_call("k1", "fake:echo", "generate", {"prompt": "hi", "n": 1}, {"text": "ok"}, 0.25)
        assert store.get_call("k1") == {"response": {"text": "ok"}, "latency_s": 0.25}
        assert store.get_call("k2") is None
        assert list(store.iter_calls()) == [{"key": "k1", "backend": "fake:echo", "kind": "generate",
                                             "request": {"n": 1, "prompt": "hi"}, "response": {"text": "ok"}}]
    finally:
        store.close()


def test_a_run_keeps_the_config_it_was_made_from(tmp_path):
    store = RunStore(tmp_path / "store.sqlite")
    try:
        assert store.get_run("r1") is None
        store.put_run("r1", {"task": "cfinbench", "limit": 3})
        store.put_run("r1", {"task": "other"})  # a run key's config is written once
        assert store.get_run("r1") == {"task": "cfinbench", "limit": 3}
        assert store.get_run("r2") is None
        store.put_sample("r1", "s1", {"score": 1.0})
        assert store.get_samples("r1") == {"s1": {"score": 1.0}}
        assert store.get_samples("r2") == {}
    finally:
        store.close()
    reopened = RunStore(tmp_path / "store.sqlite")  # and a rerun finds both
    try:
        assert reopened.get_run("r1") == {"task": "cfinbench", "limit": 3}
        assert reopened.get_samples("r1") == {"s1": {"score": 1.0}}
    finally:
        reopened.close()


def test_an_io_error_on_a_full_disk_says_the_disk_is_full(tmp_path, monkeypatch):
    """SQLite reports ENOSPC met by a WAL or journal write as a disk I/O error, not SQLITE_FULL: the error still
    names the full disk when the store's file system has no space left, and only then."""
    from collections import namedtuple

    from finharness.core import store as store_module
    err = sqlite3.OperationalError("disk I/O error")
    err.sqlite_errorname = "SQLITE_IOERR_WRITE"
    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(store_module, "file_size_limit", lambda: None)
    path = tmp_path / "out" / "store.sqlite"  # not made yet: its nearest folder's disk is the one asked

    monkeypatch.setattr(store_module.shutil, "disk_usage", lambda place: usage(10 << 20, 10 << 20, 4096))
    full = str(store_module.store_error(path, err))
    assert "no space left on the device holding the store" in full and "rerun" in full, full

    monkeypatch.setattr(store_module.shutil, "disk_usage", lambda place: usage(10 << 30, 1 << 30, 9 << 30))
    other = str(store_module.store_error(path, err))
    assert "no space left" not in other and "cannot be written" in other and "is the disk full?" in other, other
