"""The test suite's one fake model, as a task sees it: finharness.backends.fake.FakeBackend behind the real model
handle (finharness.open_model: run store, call cache, retries, trace), one fake per role.

    models = fake_models(tmp_path, model=FakeBackend(reply="答案：A"), judge=FakeBackend(replies=[verdict]))
    prediction = asyncio.run(task.solve(sample, models))
    models.model.trace        # every call and note of the handle; the fake's own `requests` hold what it got

A role given as text is a reply: `fake_models(tmp_path, model="Answer: B")`. `fresh_store(tmp_path)` is a store
of its own each call (fakes that answer differently never share a cache); `prompts(handle)` what a role was asked.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from finharness import open_model
from finharness.backends.fake import FakeBackend
from finharness.core.store import RunStore
from finharness.core.task import Models


def fake_models(store: Path | RunStore, **roles: FakeBackend | str) -> Models:
    """Models for a task's solve(): each role's fake (a FakeBackend, or a reply text) behind a real model handle
    on `store` (a RunStore, or a folder to put one in)."""
    if not isinstance(store, RunStore):
        store = RunStore(Path(store) / "fakes.sqlite")
    handles: dict[str, Any] = {}
    for role, fake in roles.items():
        backend = FakeBackend(reply=fake, name=f"fake-{role}") if isinstance(fake, str) else fake
        handles[role] = open_model(backend, store, role=role)
    return Models(handles)


def fake_backend(models: Models, role: str = "model") -> FakeBackend:
    """The fake behind a role's handle (to read the requests it was sent)."""
    return models[role].backend


def fresh_store(folder: Path) -> RunStore:
    """A run store of its own in a new folder under `folder`."""
    return RunStore(Path(tempfile.mkdtemp(prefix="fakes-", dir=folder)) / "fakes.sqlite")


def prompts(handle: Any) -> list[str]:
    """The last user message of every request the fake behind `handle` (one role of fake_models) received."""
    return [request.messages[-1].content for request in handle.backend.requests]
