"""UCFE's items (UCFE_bench.json) and stored dialogues (official logs, finharness runs).

UCFE_bench.json: `{TASK_KEY: [{role_prompt, model_prompt, information, needs, evaluation_prompt,
evaluation_hints, id}, ...]}`; keys starting `0_` are the four zero-shot (single-turn) tasks.
Official logs (`log/DATE_TIME_MODEL_eng.json`) have the same shape plus `dialogue` (turns with
roles `用户` / `AI助手`), `dialogue_round`, `model`, `total_tokens`. A finharness run of task `ucfe`
stores each dialogue in samples.jsonl as `prediction.dialogue` (roles `user` / `assistant`).
Sample ids are `TASK_KEY/ITEM_ID`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

from ...backends import model_name
from ...data.errors import DataError
from ...data.hints import pull_hint
from ...data.io import iter_jsonl, read_json
from ...data.registry import resolve_data_dir

BENCH_FILE = "UCFE_bench.json"
DATA_HINT = "or pass --data-dir pointing at a data root that holds ucfe/UCFE_bench.json (or at the ucfe folder itself)"
ZERO_SHOT_PREFIX = "0_"
"""Task keys of the single-turn tasks start with this (run_ckpt.py: `task_name.startswith("0_")`)."""

ITEM_FIELDS: tuple[str, ...] = ("role_prompt", "model_prompt", "information", "needs", "evaluation_prompt",
                                "evaluation_hints")
OFFICIAL_ROLES: Mapping[str, str] = {"用户": "user", "AI助手": "assistant", "user": "user",
                                     "assistant": "assistant"}
"""Official log roles (and our own) to Message roles."""


@dataclass(frozen=True)
class UCFEItem:
    """One UCFE item."""

    task: str
    """Task key, e.g. `Analyst` or `0_股价预测`."""
    item_id: int
    """The item's `id` (unique across the file; its parity sets the official judging order)."""
    role_prompt: str
    """The user simulator's system prompt (with `{information}` / `{needs}` placeholders)."""
    model_prompt: str
    """The model's system prompt; for zero-shot tasks also the user message, once formatted."""
    information: str
    """Background the user has."""
    needs: str
    """What the user wants."""
    evaluation_prompt: str
    """The judge template (`{needs}`, `{evaluation_hints}`, `{dialogue1}`, `{dialogue2}`)."""
    evaluation_hints: str
    """What a good answer contains, for the judge."""

    @property
    def zero_shot(self) -> bool:
        return self.task.startswith(ZERO_SHOT_PREFIX)

    @property
    def sample_id(self) -> str:
        return sample_id(self.task, self.item_id)


def sample_id(task: str, item_id: int | str) -> str:
    return f"{task}/{item_id}"


def resolve_bench_file(data_dir: Path | None) -> Path:
    """DATA_ROOT/ucfe/UCFE_bench.json, or DIR/UCFE_bench.json when DIR is the ucfe folder itself."""
    data_dir = resolve_data_dir(data_dir)
    for candidate in (Path(data_dir) / "ucfe" / BENCH_FILE, Path(data_dir) / BENCH_FILE):
        if candidate.is_file():
            return candidate
    path = Path(data_dir) / "ucfe" / BENCH_FILE
    raise DataError("UCFE_bench.json not found", path=path, hint=f"{pull_hint(path)}, {DATA_HINT}")


def _task_lists(raw: Any, path: Path) -> Mapping[str, list]:
    if not isinstance(raw, dict) or not all(isinstance(v, list) for v in raw.values()):
        raise DataError("expected a JSON object mapping each task key to a list of items", path=path)
    if not any(raw.values()):  # `{}` or only empty lists: a run of it would be "complete" with n = 0
        raise DataError("holds no items (no task key with a non-empty list)", path=path,
                        hint="is it the right file, or was it cut short? `finharness data pull ucfe` fetches it again")
    return raw


def _item(task: str, index: int, obj: Any, path: Path) -> UCFEItem:
    where = f"task {task!r}, item {index}"
    if not isinstance(obj, dict):
        raise DataError(f"{where}: expected a JSON object", path=path)
    missing = [f for f in ITEM_FIELDS + ("id",) if f not in obj]
    if missing:
        raise DataError(f"{where}: missing field(s) {missing}", path=path, hint=f"every item needs {list(ITEM_FIELDS)} and id")
    bad = [f for f in ITEM_FIELDS if not isinstance(obj[f], str)]
    if bad or not isinstance(obj["id"], int):
        raise DataError(f"{where}: fields {bad or ['id']} have the wrong type (strings, and an integer id)", path=path)
    return UCFEItem(task=task, item_id=obj["id"], **{f: obj[f] for f in ITEM_FIELDS})


def load_items(path: Path, tasks: Sequence[str] | None = None) -> list[UCFEItem]:
    """Items in file order, only of `tasks` when given (an unknown task key is an error)."""
    by_task = _task_lists(read_json(path), path)
    if tasks:
        unknown = [t for t in tasks if t not in by_task]
        if unknown:
            raise DataError(f"unknown UCFE task(s) {unknown}; known: {list(by_task)}", path=path)
    items = [_item(task, i, obj, path) for task, objs in by_task.items() if not tasks or task in tasks
             for i, obj in enumerate(objs)]
    seen: set[str] = set()
    for item in items:
        if item.sample_id in seen:
            raise DataError(f"duplicate item id {item.item_id} in task {item.task!r}", path=path)
        seen.add(item.sample_id)
    return items


# --- stored dialogues ----------------------------------------------------------------------------

@dataclass(frozen=True)
class StoredDialogue:
    """A finished dialogue read back from a log or a run."""

    turns: tuple[Mapping[str, str], ...]
    """`{"role": "user"|"assistant", "content": ...}` in order."""
    rounds: int | None
    """Assistant turns (the official `dialogue_round` where stored)."""


@dataclass(frozen=True)
class DialogueSource:
    """Every dialogue of one model, from one file."""

    name: str
    """The model's name (official log: its `model` field; run: results.json `model`)."""
    path: Path
    """Where the dialogues were read."""
    dialogues: Mapping[str, StoredDialogue]
    """By sample id `TASK_KEY/ITEM_ID`."""
    failed: tuple[str, ...] = ()
    """Sample ids the run holds without a dialogue (failed samples)."""


def _turns(raw: Any, where: str, path: Path, line: int | None = None) -> tuple[Mapping[str, str], ...]:
    if not isinstance(raw, list) or not raw:
        raise DataError(f"{where}: 'dialogue' must be a non-empty list of turns", path=path, line=line)
    turns = []
    for turn in raw:
        role = OFFICIAL_ROLES.get(turn.get("role")) if isinstance(turn, dict) else None
        if role is None or not isinstance(turn.get("content"), str):
            raise DataError(f"{where}: bad turn {str(turn)[:80]!r}; expected {{'role': one of "
                            f"{sorted(OFFICIAL_ROLES)}, 'content': text}}", path=path, line=line)
        turns.append({"role": role, "content": turn["content"]})
    return tuple(turns)


def _official_log(path: Path) -> DialogueSource:
    by_task = _task_lists(read_json(path), path)
    dialogues: dict[str, StoredDialogue] = {}
    names = set()
    for task, objs in by_task.items():
        for index, obj in enumerate(objs):
            where = f"task {task!r}, item {index}"
            if not isinstance(obj, dict) or "id" not in obj or "dialogue" not in obj:
                raise DataError(f"{where}: an official log item needs 'id' and 'dialogue'", path=path)
            turns = _turns(obj["dialogue"], where, path)
            rounds = obj.get("dialogue_round")
            dialogues[sample_id(task, obj["id"])] = StoredDialogue(
                turns, rounds if isinstance(rounds, int) else sum(t["role"] == "assistant" for t in turns))
            if obj.get("model"):
                names.add(str(obj["model"]))
    # run_ckpt.py names logs DATE_TIME_MODEL_eng.json and eval_elo.py reads the model back as split('_')[2]
    parts = path.stem.split("_")
    name = names.pop() if len(names) == 1 else (parts[2] if len(parts) > 3 else path.stem)
    return DialogueSource(name, path, dialogues)


def _run_samples(path: Path) -> DialogueSource:
    results = path.with_name("results.json")
    name = path.parent.name
    if results.is_file():
        meta = read_json(results)
        if meta.get("task") not in (None, "ucfe"):
            raise DataError(f"this run is of task {meta.get('task')!r}, not 'ucfe'", path=results)
        name = model_name(str(meta["model"])) if meta.get("model") else name
    dialogues: dict[str, StoredDialogue] = {}
    failed = []
    for line, obj in iter_jsonl(path):
        sid = obj.get("id")
        prediction = obj.get("prediction")
        if not isinstance(sid, str):
            raise DataError("each line needs a string 'id' (TASK_KEY/ITEM_ID)", path=path, line=line)
        if obj.get("failed") or prediction is None:
            failed.append(sid)
            continue
        if not isinstance(prediction, dict) or "dialogue" not in prediction:
            raise DataError("'prediction' has no 'dialogue'; is this a run of task ucfe?", path=path, line=line)
        turns = _turns(prediction["dialogue"], f"sample {sid}", path, line)
        dialogues[sid] = StoredDialogue(turns, prediction.get("rounds"))
    return DialogueSource(str(name), path, dialogues, tuple(failed))


def load_dialogues(path: str | Path) -> DialogueSource:
    """A run directory (its samples.jsonl), a samples.jsonl file, or an official log (.json)."""
    path = Path(path)
    if path.is_dir():
        path = path / "samples.jsonl"
        if not path.is_file():
            raise DataError("no samples.jsonl in this run directory (did `finharness run ucfe` finish?)",
                            path=path)
    if path.suffix == ".jsonl":
        return _run_samples(path)
    if path.suffix == ".json":
        return _official_log(path)
    raise DataError("expected a run directory, a samples.jsonl or an official UCFE log (.json)", path=path)


