"""An item's text as a probe reads it: the question, its options and the reference answer where the benchmark
publishes one, taken from the Sample the task loaded.

A task may say itself what its item's text is (a method `membership_text(sample) -> str`); otherwise the text is
read from the sample's input by field name (QUESTION_KEYS, then OPTION_KEYS as lettered lines, then
CONTEXT_KEYS) and its target (an option letter becomes that option's text; a string answer is appended as
"Answer: ..."). The options and the letter of the answer also feed the option-order probe.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from ..core.types import Sample

QUESTION_KEYS: tuple[str, ...] = ("question", "query", "text", "prompt", "stub", "instruction")
OPTION_KEYS: tuple[str, ...] = ("options", "choices", "OptionList")
CONTEXT_KEYS: tuple[str, ...] = ("context", "passage", "information")
ANSWER_KEYS: tuple[str, ...] = ("gold_answer", "answer")
LETTERS = "ABCDEFGHIJ"


@dataclass(frozen=True)
class ItemText:
    """What the probes read of one item."""

    id: str
    """The sample's id."""

    text: str
    """Question, options, context and reference answer, as one text."""

    question: str = ""
    """The question (or stub) alone."""

    options: tuple[str, ...] = ()
    """The answer options as published, in order (multiple-choice items)."""

    answer: str | None = None
    """The letter of the correct option, for multiple-choice items with one answer."""

    parts: Mapping[str, str] = field(default_factory=dict)
    """Which fields went into `text` (field -> text), for the reader."""


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, (list, tuple)):
        return "\n".join(_text(v) for v in value if v is not None)
    if isinstance(value, Mapping):
        return "\n".join(_text(v) for v in value.values() if v is not None)
    return "" if value is None else str(value)


def _options(value: Any) -> tuple[str, ...]:
    if isinstance(value, Mapping):
        return tuple(_text(value[k]) for k in sorted(value))
    if isinstance(value, (list, tuple)):
        return tuple(_text(v) for v in value)
    return ()


def lettered(options: Sequence[str]) -> str:
    """Options as 'A. text' lines."""
    return "\n".join(f"{LETTERS[i]}. {text}" for i, text in enumerate(options))


def item_text(sample: Sample, task: Any = None) -> ItemText:
    """The item's text (module docstring); `task` is asked first where it has `membership_text`."""
    own = getattr(task, "membership_text", None)
    if callable(own):
        return ItemText(sample.id, str(own(sample)), parts={"task": "membership_text"})
    data = sample.input if isinstance(sample.input, Mapping) else {"question": sample.input}
    parts: dict[str, str] = {}
    question = next((_text(data[k]) for k in QUESTION_KEYS if data.get(k)), "")
    if question:
        parts["question"] = question
    options = next((_options(data[k]) for k in OPTION_KEYS if data.get(k)), ())
    if options:
        parts["options"] = lettered(options)
    context = next((_text(data[k]) for k in CONTEXT_KEYS if data.get(k)), "")
    if context:
        parts["context"] = context
    target = sample.target
    answer_letter = None
    if options and isinstance(target, str) and len(target.strip()) == 1 and target.strip().upper() in LETTERS:
        answer_letter = target.strip().upper()
        index = LETTERS.index(answer_letter)
        if index < len(options):
            parts["answer"] = f"Answer: {options[index]}"
    elif isinstance(target, str) and target.strip():
        parts["answer"] = f"Answer: {target.strip()}"
    else:
        published = next((_text(data[k]) for k in ANSWER_KEYS if data.get(k)), "")
        if published:
            parts["answer"] = f"Answer: {published}"
    if not parts:  # an input of another shape: every string in it
        parts["input"] = _text(sample.input)
    return ItemText(sample.id, "\n".join(parts.values()).strip(), question or parts.get("input", ""), options,
                    answer_letter, parts)
