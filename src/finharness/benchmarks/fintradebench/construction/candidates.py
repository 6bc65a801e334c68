"""Phase 1: candidate answers per question and model, and each model's choice of its own best.

Every question is answered in the ideal-context pipeline (prompts.IDEAL_PROMPTS): each level carries the
precomputed trading-signal and fundamental contexts of the question's tickers and window (ideal.py).

Levels:
  L0  "data only" (ours): the two contexts and the question, with no instruction at all -- exactly the
      release's ideal data block ('Trading Signals Context: ...', 'Fundamental Data Context: ...',
      'Question: ...') that every ideal level embeds, without the TELeR header, role, steps or 'Answer:'.
      Its prompt id (what self-selection names) is 'L0_Data_Only'.
  L1..L6  the release's ideal prompts, verbatim (prompts.IDEAL_PROMPTS).
N = 6 candidates per model by default: L0, L2, L3, L4, L5, L6. L1 is left out because in the ideal set it
is L0 plus one directive sentence ('Use the provided Context ... as your primary source of truth'), the
least distinct of the seven; `levels` chooses any others.

Answers are greedy (temperature 0, as the release). Self-selection (intra-model self-filtering): the
model that wrote the candidates gets a selection prompt over *its own* candidates only, sampled at the
release's temperature 0.1 with the build's seed. Two styles:
  official  the release's ideal SELF_SELECTION_PROMPT_TEMPLATE, candidates in level order under their
            prompt ids, read with the release's rule (prompts.parse_selection; 'fallback-first' when no
            prompt id is named). Its instruction gives one candidate's id, L3's, as the example, and small
            models answer with it whatever the candidates say (metrics.self_selection counts this).
  neutral   (ours) the same prompt but the candidates are labelled 'Candidate 1..N' in a seeded random
            order per (question, model), and the instruction lists every label instead of giving one as
            the example: nothing in the prompt favours a level. Read by `parse_label`.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from ....core.types import GenerateParams, Message
from ..indicators import named_indicators
from ..prompts import (
    IDEAL_CONTEXTS,
    IDEAL_PROMPT_IDS,
    IDEAL_SELECTION_TEMPERATURE,
    LEVELS,
    SELECTION_STYLES,
    Candidate,
    read_selection,
    render,
    selection_turn,
    shuffled_order,
)
from ..task import SELECTION_MAX_TOKENS

L0 = "L0"
"""The data-only level."""

L0_PROMPT = IDEAL_CONTEXTS
"""L0's template: the release's ideal data block itself (prompts.py), nothing else."""

L0_PROMPT_ID = "L0_Data_Only"

BUILD_LEVELS: tuple[str, ...] = (L0, *LEVELS)
"""Every level a build may generate."""

DEFAULT_BUILD_LEVELS: tuple[str, ...] = (L0, "L2", "L3", "L4", "L5", "L6")
"""N = 6: L0 and L2-L6 (module docstring)."""

BUILD_PROMPT_IDS: Mapping[str, str] = {L0: L0_PROMPT_ID, **{lvl: IDEAL_PROMPT_IDS[lvl] for lvl in LEVELS}}
"""Prompt id of each level, as the self-selection prompt shows it."""


def parse_levels(text: str | Sequence[str] | None) -> tuple[str, ...]:
    """'L0,L2,L3' -> levels (default DEFAULT_BUILD_LEVELS); ValueError names the unknown ones."""
    if text is None or text == "" or text == ():
        return DEFAULT_BUILD_LEVELS
    items = [x.strip().upper() for x in (text.split(",") if isinstance(text, str) else text) if x.strip()]
    bad = [x for x in items if x not in BUILD_LEVELS]
    if bad:
        raise ValueError(f"unknown level(s) {bad}; choose from {', '.join(BUILD_LEVELS)}")
    if len(set(items)) != len(items):
        raise ValueError(f"levels {items} repeat a level")
    return tuple(items)


def render_level(level: str, question: str, trading: str, fundamental: str) -> str:
    """The prompt of one level (L0 defined here, L1-L6 the release's ideal prompts)."""
    if level == L0:
        return L0_PROMPT.format(query_str=question, trading_context_str=trading, fundamental_context_str=fundamental)
    return render("ideal", level, question, trading_context=trading, fundamental_context=fundamental)


@dataclass(frozen=True)
class CandidateAnswer:
    """One line of candidates.jsonl."""

    question_id: str
    model: str
    """The model spec."""
    level: str
    """'L0'..'L6'."""
    candidate_index: int
    """Position in the model's candidate list for the question (0-based, in level order)."""
    text: str
    indicators_named: tuple[str, ...]
    """Canonical indicators the text names (indicators.named_indicators)."""
    truncated: bool = False
    """The answer hit max_tokens."""

    def to_json(self) -> dict[str, Any]:
        return {"question_id": self.question_id, "model": self.model, "level": self.level,
                "candidate_index": self.candidate_index, "text": self.text,
                "indicators_named": list(self.indicators_named), "truncated": self.truncated}


@dataclass(frozen=True)
class SelectedAnswer:
    """One line of selected.jsonl."""

    question_id: str
    model: str
    candidate_index: int
    level: str
    text: str
    rule: str
    """How the self-selection reply was read (prompts.parse_selection: exact, contains, starts-with,
    last-mentioned, fallback-first; 'single-candidate' when there was nothing to choose)."""
    reply: str | None
    """The model's self-selection reply."""
    style: str = "official"
    """The selection prompt's style (SELECTION_STYLES)."""
    shown: tuple[str, ...] = ()
    """The candidates' levels in the order the selection prompt showed them."""

    def to_json(self) -> dict[str, Any]:
        return {"question_id": self.question_id, "model": self.model, "candidate_index": self.candidate_index,
                "level": self.level, "text": self.text, "rule": self.rule, "reply": self.reply, "style": self.style,
                "shown": list(self.shown)}


async def generate_candidates(handle: Any, question_id: str, question: str, trading: str, fundamental: str,
                              levels: Sequence[str], params: GenerateParams) -> list[CandidateAnswer]:
    """One answer per level from one model (calls go through the handle: cached, retried, counted)."""

    async def one(index: int, level: str) -> CandidateAnswer:
        prompt = render_level(level, question, trading, fundamental)
        response = await handle.chat((Message("user", prompt),), params)
        return CandidateAnswer(question_id, handle.spec, level, index, response.text, named_indicators(response.text),
                               bool(getattr(response, "truncated", False)))

    return list(await asyncio.gather(*(one(i, level) for i, level in enumerate(levels))))


def _order_key(candidates: Sequence[CandidateAnswer], seed: int) -> str:
    return f"{seed}|{candidates[0].question_id}|{candidates[0].model}"


def neutral_order(candidates: Sequence[CandidateAnswer], seed: int) -> list[int]:
    """Candidate positions in the order the neutral prompt shows them: seeded per (seed, question, model)."""
    return shuffled_order(len(candidates), _order_key(candidates, seed))


async def self_select(handle: Any, question: str, candidates: Sequence[CandidateAnswer],
                      seed: int = 0, style: str = "official") -> SelectedAnswer:
    """The model's pick among its own candidates (module docstring). The candidates must all be its own."""
    if style not in SELECTION_STYLES:
        raise ValueError(f"unknown selection style {style!r}; choose one of {', '.join(SELECTION_STYLES)}")
    foreign = {c.model for c in candidates} - {handle.spec}
    if foreign:  # intra-model self-filtering: a model never sees another model's answers
        raise ValueError(f"self-selection by {handle.spec} was given candidates of {sorted(foreign)}")
    first = candidates[0]
    if len(candidates) == 1:
        return SelectedAnswer(first.question_id, first.model, first.candidate_index, first.level, first.text,
                              "single-candidate", None, style, (first.level,))
    params = GenerateParams(max_tokens=SELECTION_MAX_TOKENS, temperature=IDEAL_SELECTION_TEMPERATURE, seed=seed)
    shown = [Candidate(c.level, BUILD_PROMPT_IDS[c.level], c.text) for c in candidates]
    prompt, order = selection_turn("ideal", question, shown, style, _order_key(candidates, seed))
    reply = await handle.chat((Message("user", prompt),), params)
    index, rule = read_selection("ideal", reply.text, shown, style, order)
    picked = candidates[index]
    return SelectedAnswer(picked.question_id, picked.model, picked.candidate_index, picked.level, picked.text, rule,
                          reply.text, style, tuple(candidates[i].level for i in order))
