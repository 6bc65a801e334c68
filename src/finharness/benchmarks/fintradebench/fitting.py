"""Fitting a FinTradeBench prompt into a model's context window: which fields are cut, and how.

The release runs its judge and its self-selection on hosted models with long contexts; a local model
(4,096 tokens by default) cannot hold every judge prompt: the judge's fixed text (system turn and rubric)
is about 670 Qwen tokens, the seed file's gold answers 1,450 at the median and up to 4,100, the answer
up to ~1,000 (4,000 characters), our ideal contexts up to a few thousand, and the judge keeps 1,024
tokens for its verdict. Six candidate answers of up to 1,024 tokens each overflow self-selection too.
The policy:

1. The prompt is rendered exactly as the release writes it. When it fits the model's window (minus the
   call's max_tokens, and under --max-prompt-tokens), it is sent unchanged; so is any prompt for a model
   whose tokens cannot be counted.
2. Otherwise named fields are cut, stage by stage, each stage only as far as needed: within a stage every
   field gets the same number of characters (a field shorter than that keeps all of its text), the largest
   number that makes the prompt fit, found by bisection with the model's own tokenizer. A cut field ends in
   the release's own marker, ``...[TRUNCATED]`` (what it appends to an answer over 4,000 characters). When a
   stage cut to nothing still does not fit, the next stage is cut.
3. A prompt that still does not fit once every stage is empty (the fixed text alone is too long) is sent
   as it is and fails as prompt-too-long, counted as a failed sample.

Every cut is returned (field -> characters before and after), written in the sample's record and counted
in the run's notes. The judge's stages: first the ideal contexts (ours: `judge_context=ideal`; empty in
the release's `none`), then the candidate's answer and the gold answer together. Self-selection's single
stage: the candidate answers.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from ...core.types import Message

TRUNCATED = "...[TRUNCATED]"
"""The release's marker for a cut answer (evaluate_rag_pipeline.py), used for every cut field."""


def cut_text(text: str, limit: int | None) -> str:
    """`text` when it has at most `limit` characters (or no limit), else its first `limit` and the marker."""
    return text if limit is None or len(text) <= limit else text[:limit] + TRUNCATED


Render = Callable[[Mapping[str, int | None]], Sequence[Message]]
"""Renders the prompt with each named field cut to the given characters (None: whole)."""


def fit_prompt(render: Render, sizes: Mapping[str, int], stages: Sequence[Sequence[str]],
               fits: Callable[[Sequence[Message]], bool | None]) -> tuple[tuple[Message, ...], dict[str, list[int]]]:
    """(messages, cuts): the prompt as sent and, per field cut, [characters before, characters kept].

    `sizes`: each field's full length in characters; `stages`: the fields cut together, in order (module
    docstring); `fits`: the model's verdict on a prompt (None: cannot tell, taken as fitting)."""
    limits: dict[str, int | None] = {name: None for name in sizes}
    messages = tuple(render(limits))
    if fits(messages) is not False:
        return messages, {}
    for stage in stages:
        fields = [name for name in stage if sizes.get(name)]
        if not fields:
            continue

        def attempt(share: int) -> tuple[tuple[Message, ...], bool]:
            trial = {**limits, **{name: min(share, sizes[name]) for name in fields}}
            rendered = tuple(render(trial))
            return rendered, fits(rendered) is not False

        low, high = 0, max(sizes[name] for name in fields)
        messages, ok = attempt(low)
        if ok:  # bisect for the largest share that fits (share `high` is the uncut text, known not to fit)
            while high - low > 1:
                middle = (low + high) // 2
                if attempt(middle)[1]:
                    low = middle
                else:
                    high = middle
            messages, _ = attempt(low)
        limits.update({name: min(low, sizes[name]) for name in fields})
        if ok:
            break
    cuts = {name: [sizes[name], limit] for name, limit in limits.items() if limit is not None and limit < sizes[name]}
    return messages, cuts
