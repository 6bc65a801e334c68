"""The two named extraction modes: `official` (the CFinBench evaluator, quirks included) and `robust`.

official — `CFinBenchEvaluator.postprocess` of yanbinwei/CFinBench-Eval, step for step: delete
every character that is neither a word character nor whitespace (`[^\\w\\s]`), then all
whitespace; single choice -> the first character for which `str.isupper()` holds (so "The answer
is B" reads "T"); multiple choice -> the first run of `[A-E]+`; judgment -> the first `正确|错误`
(so "不正确" reads "正确"). Gold answers go through the same steps. Nothing read -> ''.

robust — the cascade in finharness.extract.choices; it records the rule that fired and never
guesses. Answers are canonical: sorted letters for multiple choice.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence

from ...extract.choices import UNPARSEABLE, extract_choice, extract_judgment

EXTRACTION_MODES: tuple[str, ...] = ("official", "robust")
"""Named extraction modes; every sample is read under both."""

_NOT_WORD_OR_SPACE = re.compile(r"[^\w\s]")
_SPACE = re.compile(r"\s+")
_MULTI = re.compile(r"([A-E]+)")
_JUDGMENT = re.compile(r"(正确|错误)")


def official_postprocess(text: str, question_type: str) -> str:
    """The official evaluator's reading of a reply or a gold answer ('' when nothing matches)."""
    content = _SPACE.sub("", _NOT_WORD_OR_SPACE.sub("", text))
    if question_type == "multi_choice":
        match = _MULTI.search(content)
        return match.group(1) if match else ""
    if question_type == "single_choice":
        return next((ch for ch in content if ch.isupper()), "")
    if question_type == "judgment":
        match = _JUDGMENT.search(content)
        return match.group(1) if match else ""
    raise ValueError(f"unknown question type {question_type!r}")


@dataclass(frozen=True)
class Reading:
    """One reply (or gold answer) read under one extraction mode."""

    answer: str
    """'B', 'ACD', '正确', '错误'; '' when nothing could be read (the official convention)."""

    rule: str
    """'official' for the official mode; the robust rule that fired; 'unparseable' when none did."""

    @property
    def parsed(self) -> bool:
        return self.answer != ""


def read_reply(reply: str, question_type: str, options: Sequence[str], mode: str) -> Reading:
    """A model reply under `mode` ('official' or 'robust')."""
    if mode == "official":
        answer = official_postprocess(reply, question_type)
        return Reading(answer, "official" if answer else UNPARSEABLE)
    if mode == "robust":
        if question_type == "judgment":
            extraction = extract_judgment(reply)
        else:
            extraction = extract_choice(reply, options, multiple=question_type == "multi_choice")
        return Reading(extraction.answer or "", extraction.rule)
    raise ValueError(f"unknown extraction mode {mode!r}; choose one of {EXTRACTION_MODES}")


def read_gold(answer: str, question_type: str, mode: str) -> str:
    """The gold answer as each mode compares it: official -> the official postprocess;
    robust -> the same, with multiple-choice letters sorted and deduplicated."""
    official = official_postprocess(answer, question_type)
    if mode == "robust" and question_type == "multi_choice":
        return "".join(sorted(set(official)))
    return official
