"""Membership evidence per item: the probes of probes.py computed through model handles.

Every model call goes through a handle (`finharness.open_model`, or a run's CachedModel): it is looked up in the
run store by its content key before it is made and stored once made, so each item's probes are computed once per
item and model and a rerun (or a resumed run after a kill) makes no call twice. A log-likelihood probe is one
`LoglikelihoodRequest(context="", continuations=(text,), per_token=True)`: the whole text scored after the
model's document start (BOS, or EOS for models without one, as the local engines do for an empty context).
"""

from __future__ import annotations

import asyncio
import math
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

from ..core.backend import BackendError, CallFailed
from ..core.types import GenerateParams, LoglikelihoodRequest, Message
from ..extract.choices import extract_choice
from .items import LETTERS, ItemText, lettered
from .probes import CHAT_PROBES, LL_PROBES, ll_scores, order_sensitivity, rouge_l, split_for_guided
from .windows import cut_to_tokens

MAX_TOKENS = 256
"""Tokens of an item's text the probes read at most (the start of a longer text)."""

GUIDED_MAX_TOKENS = 128
"""Most tokens a guided completion may generate."""

IN_FLIGHT = 8
"""Items probed at once (each handle's own limiter still bounds its calls)."""

GUIDED_PROMPT = (
    "Below is the first part of an item from the {split} of {source}. Continue it with the rest of the item, "
    "word for word as it appears there. Write only the continuation.\n\nFirst part:\n{first}\n\nContinuation:")
"""The guided-completion instruction (after Golchin & Surdeanu 2024's guided instruction): it names where the
item comes from, which is what a memorising model can use."""

ORDER_PROMPT = "{question}\n{options}\n\nAnswer with the letter of the correct option only."


@dataclass(frozen=True)
class ItemEvidence:
    """One item's probe scores."""

    id: str
    """The sample's id."""

    tokens: int
    """Tokens of the text the log-likelihood probes read (0 when none ran)."""

    scores: Mapping[str, float | None]
    """Probe -> score (higher: more likely seen); None where the probe does not apply or its call failed."""

    truncated: bool = False
    """The item's text was longer than the probes read (its first MAX_TOKENS tokens were read)."""

    errors: Mapping[str, str] = field(default_factory=dict)
    """Probe -> why it has no score (a failed call)."""

    detail: Mapping[str, Any] = field(default_factory=dict)
    """What a reader may check: the guided continuation, the answers under each option order."""


def _finite(value: float | None) -> float | None:
    return None if value is None or not math.isfinite(value) else float(value)


async def ll_probe(model: Any, text: str) -> tuple[list[float] | None, float, int, list[float] | None,
                                                   list[float] | None]:
    """(token log-probabilities or None, their sum, the token count, E[log p] per token, sd of log p per token)
    of `text` under `model` (a handle), from one stored per-token call."""
    response = await model.loglikelihood(LoglikelihoodRequest("", (text,), per_token=True))
    per_token = response.token_logprobs[0] if response.token_logprobs else None
    means = response.token_means[0] if response.token_means else None
    stds = response.token_stds[0] if response.token_stds else None
    return (list(per_token) if per_token else None, float(response.logprobs[0]), int(response.continuation_tokens[0]),
            list(means) if means else None, list(stds) if stds else None)


async def guided_probe(model: Any, text: str, source: str, split: str) -> tuple[float, str]:
    """(ROUGE-L F1 of the model's continuation against the true rest, the continuation) for one text."""
    first, rest = split_for_guided(text)
    if not rest:
        return math.nan, ""
    counted = model.count_tokens(rest)
    limit = min(GUIDED_MAX_TOKENS, (counted if counted else len(rest) // 3) + 8)
    prompt = GUIDED_PROMPT.format(split=split, source=source, first=first)
    reply = await model.chat([Message("user", prompt)], GenerateParams(max_tokens=limit, temperature=0.0))
    return rouge_l(reply.text, rest), reply.text


def permutations(n: int) -> list[list[int]]:
    """The option orders the order probe asks besides the published one: rotated by one, and reversed."""
    rotated = [*range(1, n), 0]
    reversed_ = list(range(n - 1, -1, -1))
    return [order for order in (rotated, reversed_) if order != list(range(n))]


async def order_probe(model: Any, item: ItemText) -> tuple[float, dict[str, Any]]:
    """(`order` score, the answers under each order) of a multiple-choice item with one answer."""
    correct_index = LETTERS.index(item.answer) if item.answer else -1
    answers: dict[str, Any] = {}
    outcomes = []
    for name, order in [("published", list(range(len(item.options)))),
                        *[(f"order {''.join(LETTERS[i] for i in o)}", o) for o in permutations(len(item.options))]]:
        shown = [item.options[i] for i in order]
        prompt = ORDER_PROMPT.format(question=item.question, options=lettered(shown))
        reply = await model.chat([Message("user", prompt)], GenerateParams(max_tokens=8, temperature=0.0))
        chosen = extract_choice(reply.text, {LETTERS[i]: text for i, text in enumerate(shown)}).answer
        right = LETTERS[order.index(correct_index)]
        answers[name] = {"answer": chosen, "correct": right}
        outcomes.append(chosen == right)
    return order_sensitivity(outcomes[0], outcomes[1:]), answers


def _failure(err: BaseException) -> str:
    return f"{type(err).__name__}: {err}"


async def probe_item(item: ItemText, model: Any, *, reference: Any = None, probes: Sequence[str] = LL_PROBES,
                     source: str = "", split: str = "", max_tokens: int = MAX_TOKENS) -> ItemEvidence:
    """Every asked probe of one item through `model` (and `reference` for the reference probe). A failed call
    leaves its probes without a score, said in `errors`; the other probes still run."""
    scores: dict[str, float | None] = {p: None for p in probes}
    errors: dict[str, str] = {}
    detail: dict[str, Any] = {}
    text = item.text
    counted = model.count_tokens(text)
    truncated = False
    if counted is not None and counted > max_tokens:
        text, _ = cut_to_tokens(text, max_tokens, model.count_tokens)
        truncated = True
    elif counted is None and len(text) > 4 * max_tokens:  # no tokenizer (a hosted API): about 4 characters a token
        text, truncated = text[:4 * max_tokens], True
    tokens = 0
    if any(p in LL_PROBES for p in probes) and text:
        try:
            logprobs, total, tokens, means, stds = await ll_probe(model, text)
            reference_mean = None
            if "reference" in probes and reference is not None:
                try:
                    _, ref_total, ref_tokens, _, _ = await ll_probe(reference, text)
                    reference_mean = ref_total / ref_tokens if ref_tokens else None
                except (CallFailed, BackendError) as err:
                    errors["reference"] = _failure(err)
            values = ll_scores(logprobs, total, tokens, text, means, stds, reference_mean)
            scores.update({p: _finite(values[p]) for p in probes if p in values})
        except (CallFailed, BackendError) as err:
            errors.update({p: _failure(err) for p in probes if p in LL_PROBES})
    if "guided" in probes and text:
        try:
            value, continuation = await guided_probe(model, text, source, split)
            scores["guided"] = _finite(value)
            detail["guided_continuation"] = continuation[:500]
        except (CallFailed, BackendError) as err:
            errors["guided"] = _failure(err)
    if "order" in probes and item.options and item.answer and len(item.options) >= 2:
        try:
            value, answers = await order_probe(model, item)
            scores["order"] = _finite(value)
            detail["order_answers"] = answers
        except (CallFailed, BackendError) as err:
            errors["order"] = _failure(err)
    return ItemEvidence(item.id, tokens, scores, truncated, errors, detail)


async def probe_items(items: Sequence[ItemText], model: Any, *, reference: Any = None,
                      probes: Sequence[str] = LL_PROBES, source: str = "", split: str = "",
                      max_tokens: int = MAX_TOKENS, on_item: Callable[[int, int], None] | None = None
                      ) -> list[ItemEvidence]:
    """probe_item over every item, IN_FLIGHT at a time, in the items' order; `on_item(done, total)` after each."""
    results: list[ItemEvidence | None] = [None] * len(items)
    gate = asyncio.Semaphore(IN_FLIGHT)
    done = 0

    async def one(index: int, item: ItemText) -> None:
        nonlocal done
        async with gate:
            results[index] = await probe_item(item, model, reference=reference, probes=probes, source=source,
                                              split=split, max_tokens=max_tokens)
        done += 1
        if on_item is not None:
            on_item(done, len(items))

    await asyncio.gather(*(one(i, item) for i, item in enumerate(items)))
    return [r for r in results if r is not None]


def default_probes(capabilities: Any, asked: str = "auto") -> tuple[str, ...]:
    """The probes a backend runs: `auto` the log-likelihood probes where it computes log-likelihoods, else the chat
    probes; `ll`, `chat`, `all`, or a comma-separated list of probe names."""
    if asked == "auto":
        return LL_PROBES if getattr(capabilities, "loglikelihood", False) else CHAT_PROBES
    if asked == "ll":
        return LL_PROBES
    if asked == "chat":
        return CHAT_PROBES
    if asked == "all":
        return LL_PROBES + CHAT_PROBES
    names = tuple(p.strip() for p in asked.split(",") if p.strip())
    unknown = [p for p in names if p not in LL_PROBES + CHAT_PROBES]
    if unknown:
        raise ValueError(f"unknown probe(s) {unknown}; known: {', '.join(LL_PROBES + CHAT_PROBES)}, or auto, ll, "
                         "chat, all")
    return names
