"""Pairwise matches in the Chatbot-Arena convention, read from JSONL.

One JSON object a line::

    {"task": "Analyst", "model_a": "gpt-4o", "model_b": "qwen", "winner": "model_a",
     "item_id": "3", "judge": "glm-4-plus", "order": "ab"}

`task`, `model_a`, `model_b` and `winner` are required; blank lines are skipped; other keys are
ignored. An optional `outcome` in [0, 1] is a soft verdict: what `model_a` is expected to score (e.g.
P(a better) + ½·P(tie) read from a judge's label probabilities); ratings then use it instead of the
hard `winner`, which the W/T/L counts keep using. UCFE names its four single-turn (zero-shot) tasks with a leading ``0_``; every other task
is few-shot (multi-turn).

Judge behaviour (judge_behaviour), per judge: the tie rate over matches; the first-position win rate over decided
matches with order 'ab' or 'ba' (0.5 = no position bias); the flip rate over items judged in both orders as two
separate matches (a tie against a win counts as a flip); each with its Wilson 95% interval.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Iterable, Literal, Mapping, Sequence

from ..data.io import atomic_write_text
from ..stats import Estimate, proportion_ci

Winner = Literal["model_a", "model_b", "tie"]

WINNERS: tuple[str, ...] = ("model_a", "model_b", "tie")
"""The values `winner` may take."""

REQUIRED_KEYS: tuple[str, ...] = ("task", "model_a", "model_b", "winner")

ZERO_SHOT_PREFIX = "0_"
"""UCFE's zero-shot task keys start with this; the other tasks are few-shot."""

ZERO_SHOT, FEW_SHOT = "zero_shot", "few_shot"


class MatchFileError(ValueError):
    """A matches file that cannot be read; the message names the file and line."""


@dataclass(frozen=True)
class Match:
    """One judged comparison of two models' answers to the same item."""

    task: str
    """Task the item belongs to (a UCFE task key such as ``Analyst`` or ``0_股价预测``)."""

    model_a: str
    """The model in the first slot of the record (not necessarily shown first to the judge)."""

    model_b: str
    """The other model; never equal to `model_a`."""

    winner: Winner
    """``model_a``, ``model_b`` or ``tie``."""

    item_id: str | None = None
    """Benchmark item both answers respond to (ints in the file are kept as their decimal text)."""

    judge: str | None = None
    """Who gave the verdict: a judge model spec or a human rater id."""

    order: str | None = None
    """Which answer the judge saw first (e.g. ``ab`` or ``ba``), to study position bias."""

    outcome: float | None = None
    """A soft verdict in [0, 1]: `model_a`'s expected score; None for a hard verdict only."""
    label_probs: Mapping[str, Mapping[str, float]] | None = None
    """(soft verdicts) Per judging order ('ab': model_a shown first; 'ba'), the judge's renormalised
    probabilities of its verdict labels; an order read hard is absent. Recorded, not rated."""

    @property
    def hard_score_a(self) -> float:
        """What `model_a` scores by the hard verdict: 1 for a win, ½ for a tie, 0 for a loss."""
        return {"model_a": 1.0, "tie": 0.5, "model_b": 0.0}[self.winner]

    @property
    def score_a(self) -> float:
        """What the ratings use for `model_a`: the soft outcome where there is one, else the hard score."""
        return self.hard_score_a if self.outcome is None else self.outcome

    @property
    def zero_shot(self) -> bool:
        return is_zero_shot(self.task)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"task": self.task, "model_a": self.model_a, "model_b": self.model_b,
                               "winner": self.winner}
        for key in ("item_id", "judge", "order", "outcome", "label_probs"):
            if getattr(self, key) is not None:
                out[key] = getattr(self, key)
        return out


def is_zero_shot(task: str) -> bool:
    return task.startswith(ZERO_SHOT_PREFIX)


def _optional_text(value: Any) -> str | None:
    return None if value is None else str(value)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)  # JSON true is no probability


def _is_label_probs(value: Any) -> bool:
    """{order: {label: number}}."""
    return isinstance(value, Mapping) and all(
        isinstance(dist, Mapping) and all(_is_number(p) for p in dist.values()) for dist in value.values())


def match_from_json(obj: Any, where: str) -> Match:
    """Validate one decoded line; `where` (``file:line``) goes into every error."""
    if not isinstance(obj, Mapping):
        raise MatchFileError(f"{where}: expected a JSON object, got {type(obj).__name__}")
    missing = [k for k in REQUIRED_KEYS if k not in obj]
    if missing:
        raise MatchFileError(f"{where}: missing key(s) {', '.join(missing)}; "
                             f"every line needs {', '.join(REQUIRED_KEYS)}")
    for key in ("task", "model_a", "model_b"):
        if not isinstance(obj[key], str) or not obj[key].strip():
            raise MatchFileError(f"{where}: {key!r} must be a non-empty string, got {obj[key]!r}")
    if obj["winner"] not in WINNERS:
        raise MatchFileError(f"{where}: winner {obj['winner']!r} is not one of "
                             f"{', '.join(WINNERS)}")
    if obj["model_a"] == obj["model_b"]:
        raise MatchFileError(f"{where}: model_a and model_b are both {obj['model_a']!r}; "
                             "a match needs two different models (drop self-comparisons)")
    outcome = obj.get("outcome")
    if outcome is not None and not (_is_number(outcome) and 0.0 <= outcome <= 1.0):
        raise MatchFileError(f"{where}: outcome {outcome!r} must be a number from 0 to 1 "
                             "(model_a's expected score), or left out")
    probs = obj.get("label_probs")
    if probs is not None and not _is_label_probs(probs):
        raise MatchFileError(f"{where}: label_probs must map each order to {{label: probability}}, got {probs!r}")
    return Match(task=obj["task"], model_a=obj["model_a"], model_b=obj["model_b"],
                 winner=obj["winner"], item_id=_optional_text(obj.get("item_id")),
                 judge=_optional_text(obj.get("judge")), order=_optional_text(obj.get("order")),
                 outcome=None if outcome is None else float(outcome),
                 label_probs=None if probs is None else {o: dict(d) for o, d in probs.items()})


def hard_only(matches: Sequence[Match]) -> list[Match]:
    """The same matches with their soft outcomes dropped (rated by the hard verdicts)."""
    return [replace(m, outcome=None) for m in matches]


def read_matches(path: str | Path) -> list[Match]:
    """All matches of a JSONL file, in file order (Elo depends on it)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise MatchFileError(f"{path}: cannot read matches file ({err.strerror or err})") from err
    matches = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{path}:{lineno}"
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as err:
            raise MatchFileError(f"{where}: not valid JSON ({err.msg} at column {err.colno}); "
                                 "write one JSON object per line") from err
        except RecursionError:
            raise MatchFileError(f"{where}: JSON nested deeper than the reader can follow; a match is one flat "
                                 "object per line") from None
        matches.append(match_from_json(obj, where))
    return matches


def write_matches(matches: Iterable[Match], path: str | Path) -> None:
    """One match a line, written atomically: a full disk leaves the earlier file whole (a suite's suite.json and
    scorecard go with it), and a scorecard read while another suite writes the file never sees half of it."""
    atomic_write_text(path, "".join(json.dumps(m.to_json(), ensure_ascii=False) + "\n" for m in matches))


def split_by_task(matches: Sequence[Match]) -> dict[str, list[Match]]:
    """Matches per task, tasks in order of first appearance, file order kept inside each."""
    out: dict[str, list[Match]] = {}
    for m in matches:
        out.setdefault(m.task, []).append(m)
    return out


def split_by_setting(matches: Sequence[Match]) -> dict[str, list[Match]]:
    """``zero_shot`` (tasks starting ``0_``) and ``few_shot`` (the others); empty groups left out."""
    groups: dict[str, list[Match]] = {ZERO_SHOT: [], FEW_SHOT: []}
    for m in matches:
        groups[ZERO_SHOT if m.zero_shot else FEW_SHOT].append(m)
    return {name: ms for name, ms in groups.items() if ms}


@dataclass(frozen=True)
class JudgeBehaviour:
    """How one judge decided."""

    judge: str
    matches: int
    tie: Estimate
    """Share of matches judged a tie."""

    first_position_win: Estimate
    """Share of decided, ordered matches won by the answer shown first."""

    flip: Estimate
    """Share of items judged in both orders whose two verdicts differ."""


def judge_behaviour(matches: Sequence[Any]) -> list[JudgeBehaviour]:
    by_judge: dict[str, list[Any]] = defaultdict(list)
    for m in matches:
        by_judge[m.judge or "(unnamed judge)"].append(m)
    out = []
    for judge, ms in by_judge.items():
        ties = sum(m.winner == "tie" for m in ms)
        ordered = [m for m in ms if m.order in ("ab", "ba") and m.winner != "tie"]
        first_wins = sum((m.order == "ab") == (m.winner == "model_a") for m in ordered)
        verdicts: dict[tuple, dict[str, str]] = defaultdict(dict)
        for m in ms:
            if m.order not in ("ab", "ba"):
                continue
            shown_first = m.model_a if m.order == "ab" else m.model_b
            winner = "tie" if m.winner == "tie" else (m.model_a if m.winner == "model_a" else m.model_b)
            verdicts[(m.task, m.item_id, frozenset((m.model_a, m.model_b)))][shown_first] = winner
        both = [v for v in verdicts.values() if len(v) == 2]
        flips = sum(len(set(v.values())) > 1 for v in both)
        out.append(JudgeBehaviour(judge, len(ms), proportion_ci(ties, len(ms)),
                                  proportion_ci(first_wins, len(ordered)), proportion_ci(flips, len(both))))
    return out
