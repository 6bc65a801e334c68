"""Pairwise LLM judging: reading a verdict from the judge's reply, and judging a pair in both orders.

Rules (shared by every benchmark that judges pairs):
- A verdict is read from the judge's reply only, never from the prompt (which quotes the answers).
- `last marker`: the last verdict marker of the reply counts (UCFE's eval_elo.py takes the last
  `[[n]]`); a marker that maps to no outcome (e.g. `[[4]]`) or no marker at all is *no verdict*,
  which is counted and never turned into a tie.
- Robust reading (ours, `quoted=`): before the markers are searched, every line of the quoted
  answers that carries a marker and some text besides it is cut out of the reply wherever the judge
  copied it verbatim, so an answer that writes `[[2]]` cannot cast the vote by being quoted at the
  end of the review. A quoted line that is nothing but markers is not cut: it cannot be told apart
  from the judge's own verdict, and cutting it would let the answer veto that verdict (turn every
  judge `[[2]]` into no verdict); if the judge echoes it last it counts, but a marker names a
  position, so a judge that echoes it in both orders disagrees with itself: a flip, a tie.
- Both orders (ours): a pair is judged with each answer first once; the outcomes are mapped back
  to the answers; agreement decides, disagreement is a tie; if either order has no verdict the pair
  has none. Flip rate, first-position win rate, tie and no-verdict rates measure the judge.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Literal, Mapping, Sequence

from .soft import label_distribution

Outcome = Literal["first", "second", "tie"]
"""What one judgment says, by position shown to the judge."""

Winner = Literal["a", "b", "tie"]
"""What a judged pair says, by answer (a, b as the caller names them)."""


@dataclass(frozen=True)
class VerdictFormat:
    """How a judge writes its verdict."""

    pattern: str
    """Regular expression of one marker; group 1 is the label."""
    labels: Mapping[str, Outcome]
    """Label -> outcome; any other label is no verdict."""


UCFE_FORMAT = VerdictFormat(pattern=r"\[\[(\d)\]\]", labels={"1": "first", "2": "second", "3": "tie"})
"""UCFE: `[[1]]` first better, `[[2]]` second better, `[[3]]` tie (eval_elo.py: re.findall(r"\\[\\[(\\d)\\]\\]"))."""


@dataclass(frozen=True)
class Verdict:
    """One judgment read from one reply."""

    outcome: Outcome | None
    """None: no verdict (no marker, or the last marker's label maps to nothing)."""
    label: str | None
    """The label of the marker that counted (None when there was no marker)."""
    rule: str
    """'last-marker', 'no-marker' or 'unknown-label' -- which rule decided (auditable)."""
    markers: tuple[str, ...] = ()
    """Every label found, in order (after quoted lines were cut, in robust reading)."""
    quoted_markers_ignored: int = 0
    """Markers cut because they sat in a line copied from a quoted answer."""
    offset: int | None = None
    """Character offset in the reply of the counted label (None when no marker counted)."""

    @property
    def decided(self) -> bool:
        return self.outcome is not None


def _cut_quoted(reply: str, quoted: Sequence[str], marker: re.Pattern[str]) -> tuple[str, int]:
    """The reply with the marker-bearing lines of the quoted answers blanked out (as many spaces, so offsets into
    it are offsets into the reply), and how many markers went."""
    lines = {line.strip() for text in quoted for line in text.splitlines()
             if marker.search(line) and re.search(r"\w", marker.sub("", line))}  # not a bare marker line
    ignored = 0
    for line in sorted(lines, key=len, reverse=True):  # longest first: a line may contain a shorter one
        count = reply.count(line)
        if count:
            ignored += count * len(marker.findall(line))
            reply = reply.replace(line, " " * len(line))
    return reply, ignored


def parse_verdict(reply: str, fmt: VerdictFormat = UCFE_FORMAT, *, quoted: Sequence[str] = ()) -> Verdict:
    """The verdict of one reply: its last marker (after cutting quoted marker lines when `quoted`)."""
    marker = re.compile(fmt.pattern)
    text, ignored = _cut_quoted(reply or "", quoted, marker) if quoted else (reply or "", 0)
    found = list(marker.finditer(text))
    if not found:
        return Verdict(None, None, "no-marker", (), ignored)
    label = found[-1].group(1)
    outcome = fmt.labels.get(label)
    return Verdict(outcome, label, "last-marker" if outcome else "unknown-label",
                   tuple(m.group(1) for m in found), ignored, found[-1].start(1))


def winner_of(outcome: Outcome | None, first: Winner) -> Winner | None:
    """Map a positional outcome to the answer that won, given which answer was shown first."""
    if outcome is None or outcome == "tie":
        return outcome
    second: Winner = "b" if first == "a" else "a"
    return first if outcome == "first" else second


@dataclass(frozen=True)
class BothOrders:
    """A pair judged twice: a first (ab), then b first (ba)."""

    ab: Verdict
    ba: Verdict

    @property
    def winners(self) -> tuple[Winner | None, Winner | None]:
        return winner_of(self.ab.outcome, "a"), winner_of(self.ba.outcome, "b")

    @property
    def decided(self) -> bool:
        return self.ab.decided and self.ba.decided

    @property
    def flipped(self) -> bool:
        """Both orders decided and they disagree about the answers (the position changed the verdict)."""
        x, y = self.winners
        return self.decided and x != y

    @property
    def winner(self) -> Winner | None:
        """Agreement decides; disagreement is a tie; a missing verdict in either order is None."""
        if not self.decided:
            return None
        x, y = self.winners
        return x if x == y else "tie"


@dataclass
class JudgeStats:
    """Counts that show how a pairwise judge behaved; `to_json` gives rates with their n."""

    judgments: int = 0
    """Judge replies read (each order of a pair counts once)."""
    no_verdict: int = 0
    """Replies with no usable verdict."""
    failed_calls: int = 0
    """Judge calls that failed for good (not replies; retried on the next run)."""
    first_wins: int = 0
    second_wins: int = 0
    position_ties: int = 0
    """Replies that said tie ([[3]] in UCFE)."""
    quoted_markers_ignored: int = 0
    pairs_both_decided: int = 0
    flips: int = 0
    comparisons: int = 0
    """Decided comparisons written as matches."""
    winners: dict[str, int] = field(default_factory=lambda: {"a": 0, "b": 0, "tie": 0})

    def add_judgment(self, verdict: Verdict) -> None:
        self.judgments += 1
        self.quoted_markers_ignored += verdict.quoted_markers_ignored
        if verdict.outcome is None:
            self.no_verdict += 1
        elif verdict.outcome == "first":
            self.first_wins += 1
        elif verdict.outcome == "second":
            self.second_wins += 1
        else:
            self.position_ties += 1

    def add_pair(self, pair: BothOrders) -> None:
        for verdict in (pair.ab, pair.ba):
            self.add_judgment(verdict)
        if pair.decided:
            self.pairs_both_decided += 1
            self.flips += pair.flipped

    def add_comparison(self, winner: Winner) -> None:
        self.comparisons += 1
        self.winners[winner] += 1

    def to_json(self, *, both_orders: bool) -> dict[str, Any]:
        """Counts, and rates as {value, ci95, n}: no_verdict over judgments; first_position_win over
        replies that chose a side; tie over decided comparisons; flip (both orders) over pairs whose
        two orders were both decided."""
        from ..core.metrics import Metric
        from ..stats import proportion_ci

        def rate(hits: int, n: int) -> dict[str, Any]:
            return Metric.of(proportion_ci(hits, n)).to_json()

        rates = {"no_verdict": rate(self.no_verdict, self.judgments),
                 "first_position_win": rate(self.first_wins, self.first_wins + self.second_wins),
                 "tie": rate(self.winners["tie"], self.comparisons)}
        out: dict[str, Any] = {
            "judgments": self.judgments, "no_verdict": self.no_verdict, "failed_calls": self.failed_calls,
            "first_position_wins": self.first_wins, "second_position_wins": self.second_wins,
            "judge_ties": self.position_ties, "comparisons": self.comparisons, "winners": dict(self.winners),
            "quoted_markers_ignored": self.quoted_markers_ignored, "rates": rates,
        }
        if both_orders:
            out.update(pairs_both_decided=self.pairs_both_decided, flips=self.flips)
            rates["flip"] = rate(self.flips, self.pairs_both_decided)
        return out


# --- soft verdicts (ours) -------------------------------------------------------------------------


@dataclass(frozen=True)
class SoftVerdict:
    """The judge's distribution over the verdict labels at the token where it wrote the counted one."""

    probs: Mapping[str, float]
    """Label -> probability, renormalised over the format's labels (labels absent from the top list: 0)."""

    token_index: int
    """Which generated token carries the label."""


def soft_verdict(reply: str, logprobs: Sequence[Any] | None, verdict: Verdict,
                 fmt: VerdictFormat = UCFE_FORMAT) -> SoftVerdict | None:
    """Read the label distribution where the judge wrote its counted verdict; None when it cannot be read.

    The label is read where parse_verdict found the counted marker (`verdict.offset`: a marker copied from a
    quoted answer is never the one read), with `soft.label_distribution`."""
    if not verdict.decided or verdict.offset is None:
        return None
    read = label_distribution(reply, logprobs, verdict.offset, fmt.labels)
    return None if read is None else SoftVerdict(*read)


FIRST_SCORE: Mapping[Outcome, float] = {"first": 1.0, "tie": 0.5, "second": 0.0}
"""What the dialogue shown first scores for each outcome."""


def soft_outcome_first(soft: SoftVerdict, fmt: VerdictFormat = UCFE_FORMAT) -> float:
    """Expected score of the dialogue shown first: P(first better) + ½·P(tie)."""
    return sum(p * FIRST_SCORE[fmt.labels[label]] for label, p in soft.probs.items())


def hard_outcome_first(verdict: Verdict) -> float | None:
    """The hard verdict as the first-shown dialogue's score (None: no verdict)."""
    return None if verdict.outcome is None else FIRST_SCORE[verdict.outcome]
