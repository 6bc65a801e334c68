"""Running one UCFE dialogue through model handles: simulated user, zero-shot, or a frozen user.

Every turn is one call through the run store, so an interrupted dialogue resumes where it stopped:
the calls it already made are served from the store, in the same order, with the same answers.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Mapping, Sequence

from ...core.task import ModelHandle
from ...core.types import GenerateParams, Message
from .data import UCFEItem
from .prompts import OPENING_CUE, ends_dialogue, fill_placeholders, follow_up_message


@dataclass(frozen=True)
class SimulationSettings:
    """How dialogues are generated; the defaults are the official settings. Recorded in the run."""

    model_temperature: float = 0.5
    """Model under test (GPTTest: temperature 0.5)."""
    user_first_temperature: float = 0.1
    """Simulator's opening message (GPTPerson.initial_response: temperature 0.1)."""
    user_temperature: float = 0.7
    """Simulator's later messages (GPTPerson: 0.7)."""
    seed: int = 123
    """Sampling seed of every call (both classes: seed 123)."""
    frequency_penalty: float = 0.5
    """Both classes; sent only to backends that honour penalties (recorded per dialogue)."""
    presence_penalty: float = 0.5
    """Both classes; sent only to backends that honour penalties (recorded per dialogue)."""
    max_rounds: int = 9
    """run_ckpt.py: `for round in range(1, 10)`."""
    max_tokens: int = 1024
    """Ours: the model's reply budget (the official calls set none, i.e. the API default)."""
    user_max_tokens: int = 1024
    """Ours: the simulator's message budget (idem)."""
    draw: int = 0
    """Ours: sample_index of every sampled call; another draw gives an independent set of dialogues."""
    user_opening: str = "official"
    """How the opening message is asked for (prompts.USER_OPENINGS): 'official', the system prompt alone;
    'cue' (ours), plus prompts.OPENING_CUE as a user turn."""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class DialogueResult:
    """One finished dialogue: the prediction of a UCFE sample."""

    dialogue: tuple[Mapping[str, str], ...]
    """`{"role": "user"|"assistant", "content": ...}`, starting with the user."""
    rounds: int
    """Assistant turns (the official `dialogue_round`)."""
    ended_by_simulator: bool | None
    """The last user message holds `Consultation Ended`; None for zero-shot items (one round by design)."""
    total_tokens: int
    """Official meaning: prompt + completion tokens of the dialogue's last call (run_ckpt.py keeps the
    last response's usage.total_tokens); see `tokens` for sums."""
    tokens: Mapping[str, Mapping[str, int]]
    """Per role ('model', 'user'): summed prompt and completion tokens over the dialogue."""
    penalties_applied: Mapping[str, bool]
    """Per role: whether the official frequency/presence penalties were sent (backend honours them)."""
    user_source: str = "simulated"
    """'simulated', 'zero-shot' (the item's prompt is the user turn) or 'frozen' (replayed user turns)."""

    def to_json(self) -> dict[str, Any]:
        return {"dialogue": [dict(t) for t in self.dialogue], "rounds": self.rounds,
                "ended_by_simulator": self.ended_by_simulator, "total_tokens": self.total_tokens,
                "tokens": {k: dict(v) for k, v in self.tokens.items()},
                "penalties_applied": dict(self.penalties_applied), "user_source": self.user_source}


@dataclass
class _Speaker:
    """One side of the dialogue: a handle, its decoding settings, and its token counts."""

    handle: ModelHandle
    settings: SimulationSettings
    max_tokens: int
    prompt_tokens: int = 0
    completion_tokens: int = 0
    last_total: int = 0
    history: list[Message] = field(default_factory=list)

    @property
    def penalties(self) -> bool:
        return bool(getattr(self.handle.capabilities, "penalties", False))

    def params(self, temperature: float) -> GenerateParams:
        s = self.settings
        return GenerateParams(max_tokens=self.max_tokens, temperature=temperature, seed=s.seed,
                              frequency_penalty=s.frequency_penalty if self.penalties else 0.0,
                              presence_penalty=s.presence_penalty if self.penalties else 0.0)

    async def speak(self, temperature: float) -> str:
        """Generate the next message from `history`, append it as this side's (assistant) turn."""
        reply = await self.handle.chat(self.history, self.params(temperature), sample_index=self.settings.draw)
        self.prompt_tokens += reply.prompt_tokens
        self.completion_tokens += reply.completion_tokens
        self.last_total = reply.prompt_tokens + reply.completion_tokens
        text = reply.text.strip()  # both official classes strip the API's message content
        self.history.append(Message("assistant", text))
        return text

    def hear(self, text: str) -> None:
        self.history.append(Message("user", text))

    def usage(self) -> dict[str, int]:
        return {"prompt": self.prompt_tokens, "completion": self.completion_tokens}


def _result(turns: list[dict[str, str]], rounds: int, ended: bool | None, last: _Speaker,
            speakers: Mapping[str, _Speaker], user_source: str) -> DialogueResult:
    return DialogueResult(tuple(turns), rounds, ended, last.last_total,
                          {role: s.usage() for role, s in speakers.items()},
                          {role: s.penalties for role, s in speakers.items()}, user_source)


def model_system_prompt(item: UCFEItem) -> str:
    return fill_placeholders(item.model_prompt, item.information, item.needs)


def user_system_prompt(item: UCFEItem) -> str:
    return fill_placeholders(item.role_prompt, item.information, item.needs)


async def zero_shot(item: UCFEItem, model: ModelHandle, settings: SimulationSettings) -> DialogueResult:
    """One round: the formatted model_prompt is both the system prompt and the user message."""
    prompt = model_system_prompt(item)
    speaker = _Speaker(model, settings, settings.max_tokens, history=[Message("system", prompt)])
    speaker.hear(prompt)
    reply = await speaker.speak(settings.model_temperature)
    turns = [{"role": "user", "content": prompt}, {"role": "assistant", "content": reply}]
    return _result(turns, 1, None, speaker, {"model": speaker}, "zero-shot")


async def simulate(item: UCFEItem, model: ModelHandle, user: ModelHandle,
                   settings: SimulationSettings) -> DialogueResult:
    """The simulator opens; each reply goes back to it with the follow-up instruction of its round."""
    assistant = _Speaker(model, settings, settings.max_tokens, history=[Message("system", model_system_prompt(item))])
    simulator = _Speaker(user, settings, settings.user_max_tokens,
                         history=[Message("system", user_system_prompt(item))])
    if settings.user_opening == "cue":
        simulator.hear(OPENING_CUE)
    query = await simulator.speak(settings.user_first_temperature)  # officially: the system prompt only
    turns = [{"role": "user", "content": query}]
    ended = False
    rounds = 0
    for rounds in range(1, settings.max_rounds + 1):
        assistant.hear(query)
        reply = await assistant.speak(settings.model_temperature)
        turns.append({"role": "assistant", "content": reply})
        simulator.hear(follow_up_message(reply, rounds))
        query = await simulator.speak(settings.user_temperature)
        turns.append({"role": "user", "content": query})
        if ends_dialogue(query):
            ended = True
            break
    return _result(turns, rounds, ended, simulator, {"model": assistant, "user": simulator}, "simulated")


async def replay_user(item: UCFEItem, stored_turns: Sequence[Mapping[str, str]], model: ModelHandle,
                      settings: SimulationSettings) -> DialogueResult:
    """Frozen user (ours): the stored user turns, verbatim; every stored assistant turn is regenerated.

    The model faces the same user messages as the stored model did, whatever it answers, so every
    model is compared on identical inputs (at the cost of a user who no longer reacts to it)."""
    assistant = _Speaker(model, settings, settings.max_tokens, history=[Message("system", model_system_prompt(item))])
    turns: list[dict[str, str]] = []
    rounds = 0
    for turn in stored_turns:
        if turn["role"] == "user":
            assistant.hear(turn["content"])
            turns.append({"role": "user", "content": turn["content"]})
        else:
            rounds += 1
            turns.append({"role": "assistant", "content": await assistant.speak(settings.model_temperature)})
    last_user = next((t["content"] for t in reversed(turns) if t["role"] == "user"), "")
    ended = None if item.zero_shot else ends_dialogue(last_user)
    return _result(turns, rounds, ended, assistant, {"model": assistant}, "frozen")
