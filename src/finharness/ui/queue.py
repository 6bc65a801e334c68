"""Work items from run directories: pairs of two runs' answers (blind), or one run's answers (rubric).

A run directory holds `samples.jsonl` (one line per item: id, prompt, response, prediction,
metadata...) and `results.json` (its `model` names the model). What a rater reads:

- a UCFE run: the prediction is a dialogue (`{"dialogue": [{"role", "content"}...]}`), shown whole;
- any other run: the prompt (the messages sent, or the prompt text) once as context, then the
  model's response (or its prediction when the run stored no text, e.g. log-likelihood tasks).

In a pair, the leading user turns both sides share (a zero-shot prompt, a frozen user's opening) are
shown once, as the context above the two responses.

Items are matched across runs by sample id. Matches name an item by (task, item_id): the line's
`metadata.task` / `metadata.item_id` when present (UCFE: `Analyst`, `3`, as `ucfe judge` writes
them), else the run's task and the sample id.

The order in which a pair is shown is drawn from a hash of (seed, rater, task, item, models): it
is stable across reloads and reruns, and independent between raters and items.
"""

from __future__ import annotations

import hashlib
import json
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Mapping, Sequence

from ..core.hashing import canonical_json
from ..data.errors import DataError
from ..data.io import iter_jsonl, read_json
from .storage import NewWorkItem, Rater, RaterStore

Turn = Mapping[str, str]


@dataclass(frozen=True)
class RunItem:
    """One item of a run, ready to show."""

    sample_id: str
    """The samples.jsonl id."""
    task: str
    """Task as matches name it."""
    item_id: str
    """Item id as matches name it."""
    context: tuple[Turn, ...]
    """What the model was asked (empty for dialogues: the user's turns are part of each dialogue)."""
    answer: tuple[Turn, ...]
    """The model's side: a whole dialogue, or one assistant turn."""


@dataclass(frozen=True)
class LoadedRun:
    """The showable items of one run directory."""

    model: str
    """The model's name as exports will call it."""
    path: Path
    """The samples.jsonl read."""
    items: Mapping[str, RunItem]
    """By sample id, in file order."""
    skipped: tuple[str, ...] = ()
    """Sample ids with no answer to show (failed samples)."""


@dataclass(frozen=True)
class LoadReport:
    """What a load-pairs / load-rubric did."""

    added: int
    """Work items created."""
    already_queued: int
    """Items a rater already had (not added twice)."""
    per_rater: Mapping[str, int]
    """Work items offered per rater (before de-duplication)."""
    notes: tuple[str, ...] = field(default_factory=tuple)
    """Items skipped and why."""


def _samples_path(run: Path) -> Path:
    path = run / "samples.jsonl" if run.is_dir() else run
    if not path.is_file():
        raise DataError("no samples.jsonl here (did `finharness run` finish?)", path=path)
    return path


def _prompt_turns(prompt: Any) -> tuple[Turn, ...]:
    """The prompt of a trace as turns: a list of messages as sent, or one block of prompt text."""
    if isinstance(prompt, list):
        return tuple({"role": str(m.get("role", "user")), "content": str(m.get("content", ""))}
                     for m in prompt if isinstance(m, Mapping))
    if isinstance(prompt, str) and prompt:
        return ({"role": "user", "content": prompt},)
    return ()


def _dialogue_turns(raw: list, where: str, path: Path, line: int) -> tuple[Turn, ...]:
    turns = []
    for turn in raw:
        if not isinstance(turn, Mapping) or not isinstance(turn.get("content"), str) \
                or turn.get("role") not in ("user", "assistant", "system"):
            raise DataError(f"{where}: bad dialogue turn {str(turn)[:80]!r}; expected "
                            "{'role': 'user'|'assistant'|'system', 'content': text}", path=path, line=line)
        turns.append({"role": turn["role"], "content": turn["content"]})
    return tuple(turns)


def load_run(run: str | Path, name: str | None = None) -> LoadedRun:
    """A run directory (or its samples.jsonl); the model's name comes from results.json unless given."""
    path = _samples_path(Path(run))
    results_path = path.with_name("results.json")
    results = read_json(results_path) if results_path.is_file() else {}
    task = str(results.get("task") or path.parent.name)
    model = name or results.get("model") or path.parent.name
    items: dict[str, RunItem] = {}
    skipped = []
    for line, obj in iter_jsonl(path):
        if "id" not in obj:
            raise DataError("each line needs an 'id'", path=path, line=line)
        sid = str(obj["id"])
        if sid in items:
            raise DataError(f"duplicate sample id {sid!r}", path=path, line=line)
        prediction, response = obj.get("prediction"), obj.get("response")
        meta = obj.get("metadata") if isinstance(obj.get("metadata"), Mapping) else {}
        if obj.get("failed") or (prediction is None and not isinstance(response, str)):
            skipped.append(sid)
            continue
        if isinstance(prediction, Mapping) and isinstance(prediction.get("dialogue"), list):
            context: tuple[Turn, ...] = ()
            answer = _dialogue_turns(prediction["dialogue"], f"sample {sid}", path, line)
        else:
            context = _prompt_turns(obj.get("prompt"))
            text = response if isinstance(response, str) else (
                prediction if isinstance(prediction, str) else json.dumps(prediction, ensure_ascii=False))
            answer = ({"role": "assistant", "content": text},)
        items[sid] = RunItem(sid, str(meta.get("task") or task), str(meta.get("item_id", sid)), context, answer)
    return LoadedRun(str(model), path, items, tuple(skipped))


def shown_first(seed: int, rater: str, task: str, item_id: str, models: Sequence[str]) -> Literal["a", "b"]:
    """'a' or 'b' with equal chance, fixed by (seed, rater, item, models): a reload shows the same order."""
    digest = hashlib.sha256(canonical_json([seed, rater, task, item_id, list(models)]).encode("utf-8")).digest()
    return "a" if digest[0] % 2 == 0 else "b"


def pick_raters(store: RaterStore, raters: str) -> list[Rater]:
    """'all' or a comma list of names; every name must exist."""
    known = {r.name: r for r in store.raters()}
    if not known:
        raise ValueError(f"{store.path}: no raters yet; add one with `finharness ui add-rater NAME`")
    if raters.strip() == "all":
        return list(known.values())
    names = [n.strip() for n in raters.split(",") if n.strip()]
    unknown = [n for n in names if n not in known]
    if unknown or not names:
        raise ValueError(f"unknown rater(s) {unknown or [raters]}; known: {sorted(known)}")
    return [known[n] for n in names]


def _per_rater_sample(ids: Sequence[str], rater: Rater, per_rater: int | None, seed: int) -> list[str]:
    """The rater's share, in a rater-specific shuffled order (so raters do not all start on the same item)."""
    rng = random.Random(canonical_json([seed, rater.name]))
    chosen = rng.sample(list(ids), k=min(per_rater, len(ids))) if per_rater is not None else list(ids)
    rng.shuffle(chosen)
    return chosen


def shared_opening(a: Sequence[Turn], b: Sequence[Turn]) -> int:
    """How many leading non-assistant turns two dialogues share (the same request, e.g. a zero-shot prompt or a
    frozen user's opening): the page shows them once, above both responses."""
    n = 0
    while n < min(len(a), len(b)) - 1 and a[n]["role"] != "assistant" and a[n] == b[n]:
        n += 1
    return n


def load_pairs(store: RaterStore, run_a: str | Path, run_b: str | Path, *, raters: str = "all",
               per_rater: int | None = None, name_a: str | None = None, name_b: str | None = None,
               seed: int = 0) -> LoadReport:
    """Queue blind pairwise comparisons of the items both runs answered."""
    a, b = load_run(run_a, name_a), load_run(run_b, name_b)
    if a.model == b.model:
        raise ValueError(f"both runs are named {a.model!r}; tell them apart with --name-a / --name-b")
    shared = [sid for sid in a.items if sid in b.items]
    if not shared:
        raise ValueError(f"{a.path} and {b.path} have no answered item in common (sample ids differ?)")
    notes = []
    for run, other in ((a, b), (b, a)):
        missing = [sid for sid in run.items if sid not in other.items]
        if missing:
            notes.append(f"{len(missing)} item(s) of {run.path} are not answered in {other.path}; skipped")
    differing = [sid for sid in shared if a.items[sid].context != b.items[sid].context]
    if differing:
        notes.append(f"{len(differing)} item(s) were sent with different prompts in the two runs; the page shows "
                     f"{a.path}'s prompt as context")
    chosen = pick_raters(store, raters)
    items, offered = [], {}
    for rater in chosen:
        mine = _per_rater_sample(shared, rater, per_rater, seed)
        offered[rater.name] = len(mine)
        for sid in mine:
            ia, ib = a.items[sid], b.items[sid]
            opening = shared_opening(ia.answer, ib.answer)
            items.append(NewWorkItem(
                rater=rater, kind="pair", task=ia.task, item_id=ia.item_id, sample_id=sid, model_a=a.model,
                model_b=b.model, first=shown_first(seed, rater.name, ia.task, ia.item_id, [a.model, b.model]),
                content={"context": [*ia.context, *ia.answer[:opening]], "a": list(ia.answer[opening:]),
                         "b": list(ib.answer[opening:])},
                source={"run_a": str(a.path), "run_b": str(b.path), "seed": seed}))
    added = store.add_work_items(items)
    return LoadReport(added, len(items) - added, offered, tuple(notes))


def load_rubric(store: RaterStore, run: str | Path, *, raters: str = "all", per_rater: int | None = None,
                name: str | None = None, seed: int = 0) -> LoadReport:
    """Queue one run's answers for rubric scoring (1–5 per FinTradeBench dimension)."""
    loaded = load_run(run, name)
    if not loaded.items:
        raise ValueError(f"{loaded.path}: no answered item to score")
    notes = [f"{len(loaded.skipped)} failed sample(s) of {loaded.path} skipped"] if loaded.skipped else []
    chosen = pick_raters(store, raters)
    items, offered = [], {}
    for rater in chosen:
        mine = _per_rater_sample(list(loaded.items), rater, per_rater, seed)
        offered[rater.name] = len(mine)
        for sid in mine:
            it = loaded.items[sid]
            items.append(NewWorkItem(rater=rater, kind="rubric", task=it.task, item_id=it.item_id, sample_id=sid,
                                     model_a=loaded.model, model_b=None, first="a",
                                     content={"context": list(it.context), "a": list(it.answer)},
                                     source={"run": str(loaded.path), "seed": seed}))
    added = store.add_work_items(items)
    return LoadReport(added, len(items) - added, offered, tuple(notes))
