"""Human verdicts out of the store (matches JSONL, rubric CSV), and how well a judge agrees with them.

Agreement has two levels:
- ratings: human and judge Elo (or Bradley–Terry) tables, each from its own matches, compared with
  `rating.compare_ratings` (Pearson, Spearman, mean |difference| in rating points);
- items: the verdicts on the same item, matched by (task, item_id, unordered model pair): Cohen's κ
  on the outcome (which model won, or tie; `stats.agreement.cohen_kappa`) and the mean absolute error of the
  score of the pair's alphabetically first model (1 win, ½ tie, 0 loss).
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from ..rating.compare import RatingAgreement, compare_ratings
from ..rating.matches import Match, MatchFileError, read_matches, write_matches
from ..rating.rate import RatingOptions, rate_table
from ..stats.agreement import cohen_kappa
from ..util import finite_or_none
from .storage import RUBRIC_DIMENSIONS, RaterStore

HUMAN_PREFIX = "human:"
"""Exported matches name their judge `human:NAME`."""

ItemKey = tuple[str, str, tuple[str, str]]


def human_matches(store: RaterStore, raters: Sequence[str] | None = None) -> list[Match]:
    """Every pairwise verdict as a Chatbot-Arena match, in the order the verdicts were given.

    `order` is 'ab' when model_a's response was shown first, 'ba' otherwise."""
    return [Match(task=item.task, model_a=item.model_a, model_b=item.model_b or "",
                  winner=item.verdict["winner"], item_id=item.item_id,  # type: ignore[index]
                  judge=HUMAN_PREFIX + rater.name, order="ab" if item.first == "a" else "ba")
            for rater, item in store.judged_pairs(raters)]


def export_matches(store: RaterStore, out: Path, raters: Sequence[str] | None = None) -> int:
    matches = human_matches(store, raters)
    out.parent.mkdir(parents=True, exist_ok=True)
    write_matches(matches, out)
    return len(matches)


RUBRIC_COLUMNS: tuple[str, ...] = ("rater", "task", "item_id", "sample_id", "model",
                                   *(key for key, _, _ in RUBRIC_DIMENSIONS), "mean", "comment", "created")


def export_rubric(store: RaterStore, out: Path, raters: Sequence[str] | None = None) -> int:
    rows = store.judged_rubrics(raters)
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", encoding="utf-8", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=RUBRIC_COLUMNS)
        writer.writeheader()
        for rater, item in rows:
            scores = item.verdict["scores"]  # type: ignore[index]
            writer.writerow({"rater": rater.name, "task": item.task, "item_id": item.item_id,
                             "sample_id": item.sample_id, "model": item.model_a, **scores,
                             "mean": round(float(np.mean(list(scores.values()))), 4),
                             "comment": item.verdict["comment"],  # type: ignore[index]
                             "created": item.verdict["created"]})  # type: ignore[index]
    return len(rows)


# -- agreement -------------------------------------------------------------------------------

def item_key(m: Match) -> ItemKey:
    first, second = sorted((m.model_a, m.model_b))
    return (m.task, m.item_id or "", (first, second))


def outcome(m: Match) -> str:
    """The winning model's name, or 'tie': comparable whichever way round the pair was recorded."""
    return {"model_a": m.model_a, "model_b": m.model_b, "tie": "tie"}[m.winner]


def first_model_score(m: Match) -> float:
    """What the pair's alphabetically first model scored (1, ½, 0)."""
    return m.score_a if m.model_a < m.model_b else 1.0 - m.score_a


@dataclass(frozen=True)
class AgreementReport:
    """Human–judge agreement on ratings and on items."""

    method: str
    """Rating method of both tables: 'elo' or 'bt'."""
    ratings: RatingAgreement
    """Pearson, Spearman and MAE (rating points) between the human and the judge tables."""
    human_ratings: Mapping[str, float]
    judge_ratings: Mapping[str, float]
    human_matches: int
    """Matches behind the human table."""
    judge_matches: int
    """Matches behind the judge table (only the items humans judged, unless all items were asked for)."""
    items_compared: int
    """Human verdicts that have a judge verdict on the same item and pair."""
    kappa: float
    """Cohen's κ of the outcomes (winner's name or tie) over the compared verdicts."""
    item_mae: float
    """Mean |human − judge| score of the pair's first model (0 agree … 1 opposite), over compared verdicts."""
    exact_agreement: float
    """Share of compared verdicts with the same outcome."""
    human_only: int
    """Human verdicts without a judge verdict on that item."""

    def to_json(self) -> dict[str, Any]:
        num = finite_or_none
        return {"method": self.method, "ratings": self.ratings.to_json(),
                "human_ratings": dict(self.human_ratings), "judge_ratings": dict(self.judge_ratings),
                "human_matches": self.human_matches, "judge_matches": self.judge_matches,
                "items": {"compared": self.items_compared, "kappa": num(self.kappa), "mae": num(self.item_mae),
                          "exact_agreement": num(self.exact_agreement), "human_only": self.human_only}}


def judge_verdicts(matches: Sequence[Match], path: Path) -> dict[ItemKey, Match]:
    """One verdict per (task, item, pair); a second one is an error naming the file and line."""
    by_key: dict[ItemKey, Match] = {}
    for n, m in enumerate(matches, start=1):
        key = item_key(m)
        if m.item_id is None:
            raise MatchFileError(f"{path}: match {n} (counting non-blank lines) has no item_id; per-item "
                                 "agreement needs the judge's item ids (`finharness ucfe judge` writes them)")
        if key in by_key:
            raise MatchFileError(f"{path}: match {n} (counting non-blank lines) judges {key[0]}/{key[1]} "
                                 f"{key[2][0]} vs {key[2][1]} a second time; keep one judge verdict per item and pair")
        by_key[key] = m
    return by_key


def agreement(human_path: Path, judge_path: Path, *, method: str = "elo", shared_items_only: bool = True,
              options: RatingOptions | None = None) -> AgreementReport:
    """Compare human verdicts with a judge's (both matches JSONL files)."""
    human, judge = read_matches(human_path), read_matches(judge_path)
    if not human:
        raise MatchFileError(f"{human_path}: no matches; export them with `finharness ui export --matches`")
    if not judge:
        raise MatchFileError(f"{judge_path}: no matches")
    judged = judge_verdicts(judge, judge_path)
    paired = [(h, judged[item_key(h)]) for h in human if item_key(h) in judged]
    if shared_items_only:
        keys = {item_key(h) for h in human}
        judge = [m for m in judge if item_key(m) in keys]
        if not judge:
            raise MatchFileError(f"{judge_path}: no judge verdict on any item the humans judged "
                                 "(same task, item_id and model pair); pass --all-items to rate all of them")
    opts = options or RatingOptions(method=method, bootstrap=0)  # type: ignore[arg-type]
    human_table, judge_table = rate_table(human, opts).values(), rate_table(judge, opts).values()
    outcomes_h = [outcome(h) for h, _ in paired]
    outcomes_j = [outcome(j) for _, j in paired]
    scores = np.array([[first_model_score(h), first_model_score(j)] for h, j in paired], dtype=float)
    return AgreementReport(
        method=opts.method, ratings=compare_ratings(human_table, judge_table), human_ratings=human_table,
        judge_ratings=judge_table, human_matches=len(human), judge_matches=len(judge), items_compared=len(paired),
        kappa=cohen_kappa(outcomes_h, outcomes_j),
        item_mae=float(np.mean(np.abs(scores[:, 0] - scores[:, 1]))) if paired else math.nan,
        exact_agreement=float(np.mean([a == b for a, b in zip(outcomes_h, outcomes_j)])) if paired else math.nan,
        human_only=len(human) - len(paired))
