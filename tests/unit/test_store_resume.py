"""The run store's resume path (core/store.py): what a rerun reads back (the call's request and response, the
run's config, the finished samples) is what was written. Written against mutants `make mutation` found alive."""

from __future__ import annotations

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
