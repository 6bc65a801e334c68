"""Reading a judge's probabilities where it wrote a label (a verdict digit, a rubric score).

Shared by the soft pairwise verdicts (pairwise.py) and FinTradeBench's expected rubric scores."""

from __future__ import annotations

import math
from typing import Any, Iterable, Sequence

TOP_LOGPROBS = 10
"""Alternatives asked for at every generated token when a label is read softly (soft pairwise verdicts,
FinTradeBench's expected scores; OpenAI allows up to 20)."""


def label_distribution(reply: str, logprobs: Sequence[Any] | None, offset: int,
                       labels: Iterable[str]) -> tuple[dict[str, float], int] | None:
    """(label -> probability renormalised over `labels`, token index) for the label the reply has at
    character `offset`; None when it cannot be read.

    The reply's tokens (`logprobs`: one TokenLogprob per generated token) must spell the reply exactly, so
    the offset maps to one token. A label may share its token with text before it (``[[3`` or ``: 4``):
    the part of the chosen token before the label is the prefix every alternative must repeat, and an
    alternative counts for label L when it reads prefix + L (+ anything). Alternatives naming the same
    label add up; labels missing from the alternatives get 0. Labels are single characters."""
    if not logprobs:
        return None
    tokens = [t.token for t in logprobs]
    if "".join(tokens) != reply or not 0 <= offset < len(reply):
        return None
    position = 0
    for index, token in enumerate(tokens):
        if position + len(token) > offset:
            break
        position += len(token)
    chosen = logprobs[index]
    prefix = chosen.token[:offset - position]
    totals = dict.fromkeys(labels, 0.0)
    alternatives = list(chosen.top)
    if all(text != chosen.token for text, _ in alternatives):
        alternatives.append((chosen.token, chosen.logprob))
    for text, logprob in alternatives:
        if text.startswith(prefix) and len(text) > len(prefix) and text[len(prefix)] in totals:
            totals[text[len(prefix)]] += math.exp(logprob)
    total = sum(totals.values())
    if total <= 0:
        return None
    return {label: p / total for label, p in totals.items()}, index
