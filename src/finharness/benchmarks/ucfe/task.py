"""UCFE (Yang et al. 2024, arXiv 2410.14059): user-centred financial dialogues, judged in pairs.

A run of this task produces dialogues, not scores: an LLM plays the user (analyst, regulator,
member of the public...), the model under test answers over up to 9 rounds. Models are then
compared item by item with `finharness ucfe judge RUN_A RUN_B --judge SPEC`, and the matches it
writes are rated with `finharness rate MATCHES.jsonl`.

Data: UCFE_bench.json (17 tasks, 330 items; keys starting `0_` are zero-shot, one round).
Sample ids: `TASK_KEY/ITEM_ID` (e.g. `Analyst/3`, `0_股价预测/11`).

Options (`-o KEY=VALUE`; `--mode`):
  tasks           comma list of task keys (default: all 17)
  mode            'simulate' (default; official: a user simulator, role 'user' = --user-model, not
                  needed when only zero-shot tasks are selected) |
                  'frozen-user' (ours: replay the user turns of stored dialogues, e.g. the released
                  GPT-4o log or another run's samples.jsonl, so every model faces the same user;
                  needs no --user-model)
  frozen_from     the dialogues to replay in frozen-user mode (official log .json, run dir or .jsonl)
  max_tokens      reply budget of the model under test (default 1024; officially the API default)
  user_max_tokens message budget of the simulator (default 1024)
  max_rounds      rounds before a dialogue the simulator has not ended stops (default 9, official); a
                  smaller value (ours) makes slow local runs affordable and is recorded in the run key
  draw            sample_index of the sampled calls (default 0); another value = another draw
  user_opening    'official' (default: the simulator opens from its system prompt alone) | 'cue' (ours: a
                  user turn asks it for its first message as the user, so a small simulator stops
                  answering the request it should make; prompts.OPENING_CUE)

Official decoding (recorded in the run config): simulator temperature 0.1 on its opening message,
0.7 after; model under test 0.5; seed 123; frequency and presence penalty 0.5 where the backend
honours them (each dialogue records whether it did: prediction.penalties_applied).
"""

from __future__ import annotations

import hashlib
from collections import Counter
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, ClassVar, Mapping, Sequence

from ...core.metrics import mean_metrics
from ...core.options import parse_task_options
from ...core.task import Aggregate, DataNeeds, Models, SampleRecord, Task
from ...core.types import Sample, Score
from ...data.errors import DataError
from .data import ZERO_SHOT_PREFIX, UCFEItem, load_dialogues, load_items, resolve_bench_file
from .dialogue import SimulationSettings, replay_user, simulate, zero_shot
from .prompts import USER_OPENINGS

MODES: tuple[str, ...] = ("simulate", "frozen-user")
JUDGE_HINT = ("UCFE is scored by judging pairs of runs: `finharness ucfe judge RUN_A RUN_B --judge SPEC`, then "
              "`finharness rate MATCHES.jsonl`")
HEADLINE_VALUES: tuple[str, ...] = ("rounds", "ended_by_simulator", "total_tokens", "model_completion_tokens",
                                    "user_completion_tokens")
COUNT_VALUES = frozenset(HEADLINE_VALUES) - {"ended_by_simulator"}
"""Values that are counts: 1 round in every zero-shot dialogue is not a 100 % success rate."""


_OFFICIAL = SimulationSettings()


@dataclass(frozen=True)
class UCFEOptions:
    """The options of a UCFE run (`-o KEY=VALUE`); the decoding settings not listed here are the official ones."""

    CHOICES: ClassVar[Mapping[str, Sequence[Any]]] = {"mode": MODES, "user_opening": USER_OPENINGS}
    AT_LEAST_ONE: ClassVar[tuple[str, ...]] = ("max_tokens", "user_max_tokens", "max_rounds")

    tasks: tuple[str, ...] = ()
    """Task keys to run (comma-separated); empty = all 17."""
    mode: str = "simulate"
    """'simulate' (official: the simulated user talks with the model) or 'frozen-user' (ours: user turns replayed
    from stored dialogues, so every model answers the same user)."""
    frozen_from: str | None = None
    """frozen-user: the dialogues replayed (a UCFE log .json, a run directory or its samples.jsonl)."""
    max_tokens: int = _OFFICIAL.max_tokens
    """Ours: the model's reply budget (the official calls set none, i.e. the API default)."""
    user_max_tokens: int = _OFFICIAL.user_max_tokens
    """Ours: the simulated user's message budget."""
    max_rounds: int = _OFFICIAL.max_rounds
    """Assistant turns at most (official: 9)."""
    draw: int = _OFFICIAL.draw
    """Ours: which draw of the sampled dialogues (0, 1, ...): another draw gives an independent set."""
    user_opening: str = _OFFICIAL.user_opening
    """How the user's opening message is asked for: 'official' (the system prompt alone) or 'cue' (ours, plus a
    user turn asking for it)."""

    @classmethod
    def parse(cls, options: Mapping[str, Any]) -> "UCFEOptions":
        parsed = parse_task_options(cls, options, "ucfe")
        if parsed.draw < 0:
            raise ValueError(f"ucfe: draw must be >= 0, got {parsed.draw}")
        if (parsed.mode == "frozen-user") != (parsed.frozen_from is not None):
            raise ValueError("ucfe: mode 'frozen-user' needs -o frozen_from=PATH (a UCFE log .json, a run directory "
                             "or its samples.jsonl), and frozen_from only applies to that mode")
        if parsed.frozen_from is not None and not frozen_file(parsed.frozen_from).is_file():
            raise ValueError(f"ucfe: frozen_from {parsed.frozen_from}: file not found")
        return parsed

    @property
    def simulation(self) -> SimulationSettings:
        """The dialogue settings: the official ones with this run's budgets, rounds, draw and opening."""
        return replace(_OFFICIAL, max_tokens=self.max_tokens, user_max_tokens=self.user_max_tokens,
                       max_rounds=self.max_rounds, draw=self.draw, user_opening=self.user_opening)


def frozen_file(frozen_from: str) -> Path:
    """The file a frozen_from value names (a run directory: its samples.jsonl)."""
    path = Path(frozen_from)
    return path / "samples.jsonl" if path.is_dir() else path


class UCFETask(Task):
    """UCFE dialogues: the simulated (or frozen) user talks with the model under test."""

    name: ClassVar[str] = "ucfe"
    description: ClassVar[str] = ("UCFE (arXiv 2410.14059): 17 user-centred financial tasks, 330 dialogues with a "
                                  "simulated user; compared in pairs by an LLM judge (`finharness ucfe judge`)")
    roles: ClassVar[tuple[str, ...]] = ("model", "user")
    metric_directions: ClassVar[Mapping[str, str]] = {"*": "info"}
    metric_docs: ClassVar[Mapping[str, str]] = {
        "rounds": "assistant turns per dialogue (zero-shot tasks: 1)",
        "ended_by_simulator": "share of multi-turn dialogues the user ended ('Consultation Ended')",
        "total_tokens": "prompt + completion tokens of each dialogue's last call (the official meaning)",
        "model_completion_tokens / user_completion_tokens": "tokens each side wrote",
        "(the score)": "UCFE is scored by judging pairs of runs: `finharness ucfe judge`, then `finharness rate` "
                       "(Elo / Bradley-Terry); `finharness suite` does both",
    }
    """Rounds, tokens, who ended the dialogue: they describe the dialogues, and rank nothing (judging does)."""

    Options = UCFEOptions

    @classmethod
    def data_needs(cls, settings: Any) -> DataNeeds:
        return DataNeeds(("ucfe",))

    def __init__(self, settings: UCFEOptions | None = None, /, **options: Any) -> None:
        super().__init__(settings, **options)
        self.simulation = self.settings.simulation
        zero_shot_only = bool(self.settings.tasks) and all(t.startswith(ZERO_SHOT_PREFIX) for t in self.settings.tasks)
        if self.settings.mode == "frozen-user" or zero_shot_only:
            self.roles = ("model",)  # user turns come from stored dialogues, or from the items themselves
        self._frozen_missing = 0

    def load(self, data_dir: Path | None) -> list[Sample]:
        items = load_items(resolve_bench_file(data_dir), self.settings.tasks or None)
        frozen = None
        if self.settings.frozen_from is not None:
            frozen = load_dialogues(self.settings.frozen_from)
            kept = [item for item in items if item.sample_id in frozen.dialogues]
            self._frozen_missing = len(items) - len(kept)
            if not kept:
                raise DataError("holds no dialogue for any selected UCFE item", path=frozen.path,
                                hint="check -o tasks=... and that the file is a UCFE log or run")
            items = kept
        samples = []
        for item in items:
            inputs: dict[str, Any] = {"item": asdict(item)}
            if frozen is not None:
                turns = frozen.dialogues[item.sample_id].turns
                if turns[0]["role"] != "user":
                    raise DataError(f"dialogue {item.sample_id} starts with the assistant; a frozen user needs the "
                                    "user's turn first", path=frozen.path)
                inputs["frozen_turns"] = [dict(t) for t in turns]
            samples.append(Sample(id=item.sample_id, input=inputs, target=None,
                                  metadata={"task": item.task, "item_id": item.item_id,
                                            "setting": "zero_shot" if item.zero_shot else "multi_turn"}))
        return samples

    def key_options(self, settings: UCFEOptions) -> dict[str, Any]:
        """The run key's shape since the first release: the simulation settings nested, the frozen file's sha256
        beside its path (a changed file never reuses a run)."""
        sha = None
        if settings.frozen_from is not None:
            sha = hashlib.sha256(frozen_file(settings.frozen_from).read_bytes()).hexdigest()
        return {"tasks": list(settings.tasks), "mode": settings.mode, "frozen_from": settings.frozen_from,
                "frozen_sha256": sha, "settings": asdict(settings.simulation)}

    async def solve(self, sample: Sample, models: Models) -> dict[str, Any]:
        item = UCFEItem(**sample.input["item"])
        settings = self.simulation
        if "frozen_turns" in sample.input:
            result = await replay_user(item, sample.input["frozen_turns"], models.model, settings)
        elif item.zero_shot:
            result = await zero_shot(item, models.model, settings)
        else:
            result = await simulate(item, models.model, models["user"], settings)
        return result.to_json()

    def score(self, sample: Sample, prediction: Any) -> Score:
        """No gold: the dialogue's shape only (rounds, tokens, who ended it)."""
        if not isinstance(prediction, Mapping) or not isinstance(prediction.get("dialogue"), list):
            return Score(None, {}, None, "unparseable", False, "prediction is not a UCFE dialogue")
        values: dict[str, float] = {"rounds": float(prediction.get("rounds") or 0),
                                    "total_tokens": float(prediction.get("total_tokens") or 0)}
        tokens = prediction.get("tokens") or {}
        for role in ("model", "user"):
            if role in tokens:
                values[f"{role}_completion_tokens"] = float(tokens[role].get("completion", 0))
        if prediction.get("ended_by_simulator") is not None:
            values["ended_by_simulator"] = float(bool(prediction["ended_by_simulator"]))
        return Score(None, values, None, "dialogue", True, JUDGE_HINT)

    def aggregate(self, samples: Sequence[Sample], records: Sequence[SampleRecord]) -> Aggregate:
        scored = [r for r in records if r.score is not None and r.score.parsed]

        def metrics(scores: list[Score]) -> dict:
            found = mean_metrics(scores, headline="_unused", counts=COUNT_VALUES)
            return {k: found[k] for k in HEADLINE_VALUES if k in found}

        groups = {grouping: {key: metrics([r.score for r in scored if r.metadata.get(grouping) == key])
                             for key in sorted({r.metadata.get(grouping) for r in scored})}
                  for grouping in ("task", "setting")}
        penalties_off: Counter[str] = Counter()
        for r in scored:
            for role, applied in (r.prediction.get("penalties_applied") or {}).items():
                penalties_off[role] += not applied
        notes = [JUDGE_HINT + "; this run reports the dialogues' shape only (no score)",
                 "rounds: assistant turns per dialogue (zero-shot tasks: 1); ended_by_simulator: share of multi-turn "
                 f"dialogues the user ended with 'Consultation Ended' (the rest ran {self.simulation.max_rounds} "
                 "rounds); total_tokens: prompt + completion tokens of each dialogue's last call (official meaning)"]
        for role, count in sorted(penalties_off.items()):
            if count:
                notes.append(f"{count} dialogue(s): the {role} backend has no frequency/presence penalties, so the "
                             "official 0.5 / 0.5 were not applied (capabilities.penalties is False)")
        if self.simulation.user_opening == "cue" and self.settings.mode == "simulate":
            notes.append("user_opening cue (ours): the simulator was asked for its opening message by a user turn "
                         "(prompts.OPENING_CUE), not by its system prompt alone as officially")
        if self.settings.mode == "frozen-user":
            notes.append(f"frozen-user mode (ours): user turns replayed from {self.settings.frozen_from}; the user "
                         "does not react to this model's answers")
            if self._frozen_missing:
                notes.append(f"{self._frozen_missing} selected item(s) have no dialogue in {self.settings.frozen_from} "
                             "and were skipped")
        unparsed = len(records) - len(scored)
        if unparsed:
            notes.append(f"{unparsed} prediction(s) are not UCFE dialogues and are not counted")
        extra = {"mode": self.settings.mode, "settings": self.simulation.to_json(),
                 "frozen_from": self.settings.frozen_from, "frozen_items_missing": self._frozen_missing,
                 "penalties_not_applied": dict(penalties_off)}
        return Aggregate(metrics=metrics([r.score for r in scored]), groups=groups, notes=notes, extra=extra)
