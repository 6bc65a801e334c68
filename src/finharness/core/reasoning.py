"""A model's thinking kept apart from its answer, whatever backend it came through.

Reasoning models write their thinking inline (`<think>…</think>` before the answer: Qwen3, DeepSeek-R1
served without a reasoning parser, any GGUF on the local engine), or the server sends it in a field of
its own (`reasoning_content`, Anthropic thinking blocks; the backend puts that in
`GenerateResponse.reasoning`). The model handle passes every reply through `thinking_apart`, so tasks
extract from the answer alone, and the thinking lands in samples.jsonl beside it, never scored.

A task's `max_tokens` is the answer's budget; a backend whose model thinks sends the limit that
`thinking_limit` gives (the answer's budget plus a thinking budget) and records it as an Adaptation.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any, Callable, Iterable, Mapping, Sequence

from .types import DEFAULT_THINKING_TOKENS, Adaptation, GenerateParams, GenerateResponse, TokenLogprob, to_jsonable

THINK_OPEN = "<think>"
THINK_CLOSE = "</think>"

_LEADING_OPEN = re.compile(r"\s*<think>")
_CLOSED_BLOCK = re.compile(r"<think>(.*?)</think>", re.DOTALL)


def split_thinking(text: str) -> tuple[str, str | None]:
    """(answer, thinking) of a reply; thinking is None when the reply has no thinking in it.

    Recognised: `<think>…</think>` blocks anywhere (their insides joined); an unclosed `<think>` at the
    start (the reply was cut while thinking: all of it is thinking, the answer is empty); and a lone
    `</think>` with no opening tag (templates that open the block in the prompt, as DeepSeek-R1's and
    Qwen3's do): what comes before it is thinking."""
    if THINK_OPEN not in text and THINK_CLOSE not in text:
        return text, None
    if THINK_OPEN not in text:
        thinking, _, answer = text.partition(THINK_CLOSE)
        return answer.lstrip(), thinking.strip()
    parts = [m.group(1).strip() for m in _CLOSED_BLOCK.finditer(text)]
    answer = _CLOSED_BLOCK.sub("", text)
    opened = _LEADING_OPEN.match(answer)
    if opened is not None:  # an unclosed block at the start: cut while thinking
        parts.append(answer[opened.end():].strip())
        answer = ""
    if not parts:  # a '<think>' mentioned mid-answer, never a block: not thinking
        return text, None
    return answer.lstrip(), "\n\n".join(p for p in parts if p)


def thinking_apart(response: GenerateResponse,
                   count_tokens: Callable[[str], int | None] | None = None) -> GenerateResponse:
    """The response with any inline thinking moved from `text` to `reasoning` (after a reasoning field
    the server sent, if any), and its per-token logprobs cut to the answer's (`answer_tokens`). Where the
    server did not count the thinking tokens, `count_tokens` (the backend's tokenizer) counts them: the
    reply's tokens less the answer's. Idempotent."""
    answer, thinking = split_thinking(response.text)
    if thinking is None:
        return response
    reasoning = "\n\n".join(p for p in (response.reasoning, thinking) if p) or None
    tokens = response.reasoning_tokens
    if not tokens and count_tokens is not None:
        whole, kept = count_tokens(response.text), count_tokens(answer)
        tokens = max(0, whole - kept) if whole is not None and kept is not None else 0
    logprobs = None if response.logprobs is None else answer_tokens(response.logprobs, answer)
    return replace(response, text=answer, reasoning=reasoning, reasoning_tokens=tokens, logprobs=logprobs)


def answer_tokens(logprobs: tuple[TokenLogprob, ...], answer: str) -> tuple[TokenLogprob, ...] | None:
    """The generated tokens that spell the answer exactly (the reply's last ones), so what reads a label at a
    character of the answer (judges/soft.py) finds its token; None when no run of whole tokens spells it."""
    tail = ""  # what logprobs[start:] spell
    for start in range(len(logprobs), 0, -1):
        if tail == answer:
            return logprobs[start:]
        if len(tail) >= len(answer):
            return None
        tail = logprobs[start - 1].token + tail
    return logprobs if tail == answer else None


def thinking_limit(params: GenerateParams, spec_budget: int | None, *, limit_name: str = "max_tokens",
                   rule: str = "the limit counts thinking tokens too") -> tuple[int, Adaptation]:
    """The token limit to send for a model that thinks: the answer's `max_tokens` plus a thinking budget
    (the spec's `thinking_budget`, else the task's `thinking_tokens`, else DEFAULT_THINKING_TOKENS), and
    the record that says so. `rule`: why the budget goes into the limit (the API's rule)."""
    if spec_budget is not None:
        budget, whose = spec_budget, "spec thinking_budget"
    elif params.thinking_tokens is not None:
        budget, whose = params.thinking_tokens, "the task's"
    else:
        budget, whose = DEFAULT_THINKING_TOKENS, "default"
    limit = params.max_tokens + budget
    return limit, Adaptation("max_tokens", params.max_tokens, f"{limit_name}={limit}",
                             f"the answer's {params.max_tokens} tokens plus a thinking budget of {budget} "
                             f"({whose}): {rule}")


def thinking_fields(response: GenerateResponse) -> dict[str, Any]:
    """A generation's trace fields about thinking and adapted parameters, only those it has (a reply
    without thinking gets none, so its trace entry is what it always was)."""
    fields: dict[str, Any] = {}
    if response.reasoning is not None:
        fields["reasoning"] = response.reasoning
    if response.reasoning_tokens:
        fields["reasoning_tokens"] = response.reasoning_tokens
    if response.cut_in_thinking:
        fields["cut_in_thinking"] = True
    if response.adaptations:
        fields["adaptations"] = to_jsonable(response.adaptations)
    return fields


def adaptations_of(traces: Iterable[Sequence[Mapping[str, Any]]]) -> list[dict[str, Any]]:
    """Every distinct adaptation in the runs' traces (role, parameter, asked, sent, reason, learned) with the
    calls it applied to, in first-seen order: what results.json['adaptations'] lists."""
    seen: dict[tuple[Any, ...], dict[str, Any]] = {}
    for trace in traces:
        for entry in trace:
            for adapted in entry.get("adaptations", ()):
                row = {"role": entry.get("role", "model"), **adapted}
                if Adaptation(**adapted).greedy_lost:
                    row["greedy_lost"] = True
                key = tuple(sorted((k, str(v)) for k, v in row.items()))
                seen.setdefault(key, {**row, "calls": 0})["calls"] += 1
    return list(seen.values())


def adaptation_notes(adaptations: Sequence[Mapping[str, Any]], *, thinking_replies: int = 0, reasoning_tokens: int = 0,
                     thinking_truncations: int = 0) -> list[str]:
    """The run notes that say what was sent in another form than asked, whether thinking tokens were
    counted, and what was cut while thinking (the counts of RunCounters)."""
    notes = []
    for a in adaptations:
        how = (f"sent as {a['sent']}" if a["sent"] is not None else "left out")
        learned = " (learned from the server's refusal)" if a.get("learned") else ""
        note = f"{a['role']}: {a['parameter']} {a['asked']} {how} on {a['calls']} call(s){learned}: {a['reason']}"
        if a.get("greedy_lost"):
            note += "; those replies were sampled at the model's default temperature, so the run is not greedy"
        notes.append(note)
    if thinking_replies and not reasoning_tokens:
        notes.append(f"{thinking_replies} generation(s) came with thinking whose tokens nobody counted apart (the "
                     "server sent no count, as vLLM's reasoning parsers do not, and the backend has no tokenizer): "
                     "they are inside completion_tokens")
    if thinking_truncations:
        notes.append(f"{thinking_truncations} generation(s) were cut by the token limit while still thinking, "
                     "before any answer: give the model more thinking tokens (spec option thinking_budget=N)")
    return notes


def sample_thinking(entries: Sequence[Mapping[str, Any]]) -> tuple[dict[str, Any], dict[str, int]]:
    """samples.jsonl fields of a sample whose model thought: ({"reasoning": the last reply's thinking}, to
    put beside its answer; {"reasoning": thinking tokens of all its calls}, for its token counts); empty
    for a sample without thinking, so its line is what it always was."""
    text = {"reasoning": entries[-1]["reasoning"]} if entries and entries[-1].get("reasoning") is not None else {}
    tokens = sum(e.get("reasoning_tokens", 0) for e in entries)
    return text, ({"reasoning": tokens} if tokens else {})
