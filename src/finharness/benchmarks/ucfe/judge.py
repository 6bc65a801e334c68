"""UCFE pairwise judging: two sets of dialogues, one LLM judge, matches for `finharness rate`.

Modes:
- `official` (eval_elo.py): each dialogue rendered as its turns' contents joined by spaces (no
  role labels); one judgment per item; the position follows the item id's parity. eval_elo.py calls
  the compared run the *target* and the reference the *base*; here target = RUN_A, base = RUN_B.
  What eval_elo.py actually sends: its task tuple packs (base, target) but unpacks it as (target,
  base), so for an even id the judge sees the target (RUN_A) as Assistant 1, for an odd id the base
  (RUN_B) -- this module reproduces those prompts. The same swap makes eval_elo.py credit the
  target when the judge prefers the base (and vice versa); that attribution is not reproduced: a
  match always goes to the dialogue the judge picked. Verdict: the last `[[n]]` of the reply.
- `both-orders` (ours, default): role-labelled dialogues, each item judged with either dialogue
  first; agreement decides, disagreement is a tie (judges/pairwise.py); markers copied from the
  dialogues into the reply are ignored.

Judge calls go through the run store (CachedModel), so an interrupted judging resumes for free;
decoding is greedy (ours; the official judge, glm-4-plus, ran with the API's default temperature).
"""

from __future__ import annotations

import asyncio
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Mapping, Sequence

from ...core.backend import CallFailed
from ...core.metrics import Metric
from ...core.model import CachedModel, RunCounters
from ...core.types import GenerateParams, Message
from ...judges.pairwise import (
    UCFE_FORMAT,
    BothOrders,
    JudgeStats,
    SoftVerdict,
    Verdict,
    Winner,
    hard_outcome_first,
    parse_verdict,
    soft_outcome_first,
    soft_verdict,
    winner_of,
)
from ...judges.soft import TOP_LOGPROBS
from ...rating.matches import Match
from ...stats.ci import mean_ci, proportion_ci
from .data import DialogueSource, StoredDialogue, UCFEItem
from .prompts import judge_prompt, render_labelled, render_official

JUDGE_MODES: tuple[str, ...] = ("both-orders", "official")
VERDICTS: tuple[str, ...] = ("hard", "soft")
"""How a verdict is read: the label written (official), or the judge's label probabilities (ours)."""
MATCH_WINNER: Mapping[str, str] = {"a": "model_a", "b": "model_b", "tie": "tie"}


@dataclass(frozen=True)
class JudgeSettings:
    """How the judge is asked."""

    mode: str = "both-orders"
    """'both-orders' (ours) or 'official'."""
    max_tokens: int = 1024
    """The judge's reply budget (ours; the official call sets none)."""
    temperature: float = 0.0
    """Greedy (ours), so a rerun reads the same verdicts."""
    verdict: str = "hard"
    """'hard' (the official reading: the label written) or 'soft' (ours: the label probabilities where the
    judge wrote it; needs a backend with next-token logprobs, else hard and said so)."""

    @property
    def params(self) -> GenerateParams:
        return GenerateParams(max_tokens=self.max_tokens, temperature=self.temperature,
                              top_logprobs=TOP_LOGPROBS if self.verdict == "soft" else 0)


@dataclass(frozen=True)
class Judgment:
    """One judge call, for the audit file."""

    sample_id: str
    order: str
    """'ab': RUN_A's dialogue shown first; 'ba': RUN_B's first."""
    verdict: Verdict | None
    """None when the call failed for good."""
    reply: str | None
    failed: str | None = None
    soft: SoftVerdict | None = None
    """The label probabilities where the judge wrote its verdict (soft verdicts only; None: not read)."""

    @property
    def first_score(self) -> float | None:
        """Expected score of the dialogue shown first: soft where read, else the hard verdict's (None: none)."""
        if self.soft is not None:
            return soft_outcome_first(self.soft)
        return None if self.verdict is None else hard_outcome_first(self.verdict)

    @property
    def a_score(self) -> float | None:
        """Model A's expected score in this call: the first-shown score when A was shown first, else its
        complement (None: no verdict)."""
        first = self.first_score
        return None if first is None else first if self.order[0] == "a" else 1.0 - first

    def to_json(self) -> dict[str, Any]:
        v = self.verdict
        return {"id": self.sample_id, "order": self.order, "failed": self.failed, "reply": self.reply,
                "outcome": None if v is None else v.outcome, "label": None if v is None else v.label,
                "rule": None if v is None else v.rule, "markers": [] if v is None else list(v.markers),
                "quoted_markers_ignored": 0 if v is None else v.quoted_markers_ignored,
                "label_probs": None if self.soft is None else dict(self.soft.probs),
                "first_score": self.first_score}


@dataclass
class JudgeReport:
    """Everything a judging produced."""

    matches: list[Match] = field(default_factory=list)
    judgments: list[Judgment] = field(default_factory=list)
    stats: JudgeStats = field(default_factory=JudgeStats)
    by_task: dict[str, dict[str, int]] = field(default_factory=dict)
    """Winners per task: {'a': n, 'b': n, 'tie': n, 'undecided': n}."""
    coverage: dict[str, int] = field(default_factory=dict)
    """items, judged, missing_in_a, missing_in_b."""
    notes: list[str] = field(default_factory=list)
    """What the judging itself has to say (e.g. soft verdicts asked of a judge without logprobs)."""


def official_first(item: UCFEItem) -> Winner:
    """Which run eval_elo.py shows as Assistant 1: RUN_A (target) for even ids, RUN_B (base) for odd."""
    return "a" if item.item_id % 2 == 0 else "b"


def _prompt(item: UCFEItem, first: str, second: str) -> str:
    return judge_prompt(item.evaluation_prompt, information=item.information, needs=item.needs,
                        evaluation_hints=item.evaluation_hints, dialogue1=first, dialogue2=second)


class PairJudge:
    """Judges the dialogues of two runs item by item."""

    def __init__(self, judge: CachedModel, settings: JudgeSettings, *, name_a: str, name_b: str):
        if settings.mode not in JUDGE_MODES:
            raise ValueError(f"judge mode {settings.mode!r} is not one of {list(JUDGE_MODES)}")
        if settings.verdict not in VERDICTS:
            raise ValueError(f"verdict {settings.verdict!r} is not one of {list(VERDICTS)}")
        if name_a == name_b:
            raise ValueError(f"both runs are named {name_a!r}; give them distinct names (--name-a / --name-b)")
        self.judge = judge
        self.settings = settings
        self.names = {"a": name_a, "b": name_b}
        self.notes: list[str] = []
        if settings.verdict == "soft" and not judge.capabilities.next_token_logprobs:
            # e.g. Anthropic, whose API returns no logprobs: asking would fail every call
            self.settings = replace(settings, verdict="hard")
            self.notes.append(f"{judge.spec} returns no next-token logprobs: judged with hard verdicts")

    async def _ask(self, sample_id: str, order: str, prompt: str, quoted: Sequence[str]) -> Judgment:
        try:
            reply = await self.judge.chat([Message("user", prompt)], self.settings.params)
        except CallFailed as err:
            return Judgment(sample_id, order, None, None, f"{err.kind}: {err}")
        # the verdict is read from the reply only; `quoted` lets the robust reading ignore copied markers
        verdict = parse_verdict(reply.text, UCFE_FORMAT, quoted=quoted)
        soft = soft_verdict(reply.text, reply.logprobs, verdict) if self.settings.verdict == "soft" else None
        return Judgment(sample_id, order, verdict, reply.text, soft=soft)

    async def judge_item(self, item: UCFEItem, a: StoredDialogue, b: StoredDialogue) -> tuple[list[Judgment], Winner | None, str]:
        """The judge calls of one item, its winner (None: undecided) and the order recorded."""
        sid = item.sample_id
        if self.settings.mode == "official":
            rendered = {"a": render_official(a.turns), "b": render_official(b.turns)}
            first = official_first(item)
            second = "b" if first == "a" else "a"
            judgment = await self._ask(sid, first + second, _prompt(item, rendered[first], rendered[second]), ())
            outcome = judgment.verdict.outcome if judgment.verdict else None
            return [judgment], winner_of(outcome, first), first + second
        rendered = {"a": render_labelled(a.turns), "b": render_labelled(b.turns)}
        quoted = (rendered["a"], rendered["b"])
        ab, ba = await asyncio.gather(self._ask(sid, "ab", _prompt(item, rendered["a"], rendered["b"]), quoted),
                                      self._ask(sid, "ba", _prompt(item, rendered["b"], rendered["a"]), quoted))
        if ab.verdict is None or ba.verdict is None:
            return [ab, ba], None, "both"
        return [ab, ba], BothOrders(ab.verdict, ba.verdict).winner, "both"

    async def run(self, items: Sequence[UCFEItem], side_a: DialogueSource, side_b: DialogueSource,
                  progress: Callable[[], None] | None = None) -> JudgeReport:
        report = JudgeReport(notes=list(self.notes))
        present = [i for i in items if i.sample_id in side_a.dialogues and i.sample_id in side_b.dialogues]
        report.coverage = {"items": len(items), "judged": len(present),
                           "missing_in_a": sum(i.sample_id not in side_a.dialogues for i in items),
                           "missing_in_b": sum(i.sample_id not in side_b.dialogues for i in items)}

        async def one(item: UCFEItem) -> tuple[UCFEItem, list[Judgment], Winner | None, str]:
            result = await self.judge_item(item, side_a.dialogues[item.sample_id], side_b.dialogues[item.sample_id])
            if progress:
                progress()
            return (item, *result)

        for item, judgments, winner, order in await asyncio.gather(*(one(i) for i in present)):
            self._record(report, item, judgments, winner, order)
        return report

    def _record(self, report: JudgeReport, item: UCFEItem, judgments: list[Judgment], winner: Winner | None,
                order: str) -> None:
        report.judgments.extend(judgments)
        failed = [j for j in judgments if j.verdict is None]
        report.stats.failed_calls += len(failed)
        verdicts = [j.verdict for j in judgments if j.verdict is not None]
        if len(verdicts) == 2:
            report.stats.add_pair(BothOrders(verdicts[0], verdicts[1]))
        else:
            for verdict in verdicts:
                report.stats.add_judgment(verdict)
        task_counts = report.by_task.setdefault(item.task, {"a": 0, "b": 0, "tie": 0, "undecided": 0})
        if winner is None:
            task_counts["undecided"] += 1
            return
        task_counts[winner] += 1
        report.stats.add_comparison(winner)
        outcome, probs = None, None
        if self.settings.verdict == "soft":
            scores = [j.a_score for j in judgments if j.a_score is not None]
            outcome = sum(scores) / len(scores)
            probs = {j.order: dict(j.soft.probs) for j in judgments if j.soft is not None} or None
        report.matches.append(Match(task=item.task, model_a=self.names["a"], model_b=self.names["b"],
                                    winner=MATCH_WINNER[winner], item_id=str(item.item_id),  # type: ignore[arg-type]
                                    judge=self.judge.spec, order=order, outcome=outcome, label_probs=probs))


UNIFORM_VERDICTS_MIN = 10
"""Replies with a verdict from which one label for all of them is flagged (fewer could be chance)."""


def summary(report: JudgeReport, settings: JudgeSettings, *, judge: str, name_a: str, name_b: str,
            counters: RunCounters | None = None) -> dict[str, Any]:
    """The JSON summary printed by `finharness ucfe judge --json`."""
    stats = report.stats.to_json(both_orders=settings.mode == "both-orders")
    out: dict[str, Any] = {"mode": settings.mode, "judge": judge, "model_a": name_a, "model_b": name_b,
                           "params": {"max_tokens": settings.max_tokens, "temperature": settings.temperature},
                           "coverage": report.coverage, **stats,
                           "by_task": {task: {name_a: c["a"], name_b: c["b"], "tie": c["tie"], "undecided": c["undecided"]}
                                       for task, c in report.by_task.items()}}
    out["winners"] = {name_a: stats["winners"]["a"], name_b: stats["winners"]["b"], "tie": stats["winners"]["tie"]}
    if counters is not None:
        out["calls"] = {"made": counters.calls, "cache_hits": counters.cache_hits, "retries": counters.retries,
                        "failures": counters.failures}
    if settings.verdict == "soft":
        decided = [j for j in report.judgments if j.verdict is not None and j.verdict.decided]
        read = sum(j.soft is not None for j in decided)
        out["verdict"] = "soft"
        out["soft_coverage"] = {"soft": read, "hard_fallback": len(decided) - read,
                                **Metric.of(proportion_ci(read, len(decided))).to_json()}
        # outcomes lie in [0, 1]: the bounded interval (0/1-looking ones get the binomial one, which bounds them)
        outcomes = [m.outcome for m in report.matches if m.outcome is not None]
        out["soft_outcome_a"] = Metric.of(mean_ci(outcomes, bounds=(0.0, 1.0))).to_json()
        out["soft_items_above_half"] = Metric.of(proportion_ci(sum(o > 0.5 for o in outcomes),
                                                               len(outcomes))).to_json()
    labels = Counter(j.verdict.label for j in report.judgments if j.verdict is not None and j.verdict.label)
    out["verdict_labels"] = {f"[[{label}]]": n for label, n in sorted(labels.items())}
    out["notes"] = [
        "no_verdict: replies without a usable [[1]]/[[2]]/[[3]] (never counted as ties); "
        "first_position_win: share of decided replies ([[1]] or [[2]]) that chose the dialogue shown first",
        "official mode: Assistant 1 is RUN_A for even item ids and RUN_B for odd ones (as eval_elo.py sends it); "
        "the last [[n]] of the reply counts" if settings.mode == "official" else
        "both-orders mode (ours): each item judged with either dialogue first; a disagreement is a tie (flip); "
        "an item with no verdict in either order is undecided",
    ]
    out["notes"] += report.notes
    if len(labels) == 1 and sum(labels.values()) >= UNIFORM_VERDICTS_MIN:
        (label, n), = labels.items()
        out["notes"].append(f"the judge answered [[{label}]] in all {n} replies with a verdict: it does not tell the "
                            "dialogues apart (a small judge does this), so the ratings carry no information; use a "
                            "stronger judge")
    return out
