"""Rate a set of matches overall, per task and per setting (zero-shot / few-shot)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Sequence

from .base import RatingScale, RatingTable
from .bt import BTConfig, bt_table
from .elo import EloConfig, elo_table
from .matches import Match, hard_only, split_by_setting, split_by_task

Method = Literal["elo", "bt"]
METHODS: tuple[str, ...] = ("elo", "bt")


@dataclass(frozen=True)
class RatingOptions:
    """Everything that decides the numbers, echoed in the JSON output."""

    method: Method = "elo"
    """``elo`` (online, order-dependent, UCFE's) or ``bt`` (Bradley–Terry maximum likelihood)."""

    scale: RatingScale = RatingScale()
    """Scale, base and starting/mean rating."""

    k: float = 4.0
    """Elo's K (ignored by ``bt``)."""

    l2: float = BTConfig.l2
    """Bradley–Terry's ridge penalty (ignored by ``elo``)."""

    bootstrap: int = 1000
    """Bootstrap rounds for the 95% intervals; 0 for none."""

    seed: int = 0
    """Seed of the bootstrap; the same seed is used for every table, so tables are reproducible."""

    hard: bool = False
    """Rate by the hard verdicts, dropping the matches' soft outcomes (``rate --hard``)."""

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"scale": self.scale.scale, "base": self.scale.base, "init": self.scale.init,
                               "bootstrap": self.bootstrap, "seed": self.seed, "hard": self.hard}
        out.update({"k": self.k} if self.method == "elo" else {"l2": self.l2})
        return out


def rate_table(matches: Sequence[Match], options: RatingOptions = RatingOptions()) -> RatingTable:
    """One table over `matches` (for Elo every model starts at `init`)."""
    s = options.scale
    if options.method == "elo":
        return elo_table(matches, EloConfig(s.scale, s.base, s.init, options.k), options.bootstrap,
                         options.seed)
    if options.method == "bt":
        return bt_table(matches, BTConfig(s.scale, s.base, s.init, options.l2), options.bootstrap,
                        options.seed)
    raise ValueError(f"unknown rating method {options.method!r}; use one of {', '.join(METHODS)}")


@dataclass(frozen=True)
class RatingReport:
    """Overall ratings and, when asked for, per task and per setting."""

    options: RatingOptions
    overall: RatingTable
    """Over all matches."""

    by_task: dict[str, RatingTable] | None = None
    """Per task, each rated from scratch over that task's matches (None unless requested)."""

    groups: dict[str, RatingTable] | None = None
    """``zero_shot`` (tasks starting ``0_``) and ``few_shot``, each rated over its own matches."""

    notes: list[str] = field(default_factory=list)
    """What the numbers cannot show by themselves."""

    def to_json(self) -> dict[str, Any]:
        def tables(ts: dict[str, RatingTable] | None) -> dict[str, Any] | None:
            return None if ts is None else {name: t.to_json() for name, t in ts.items()}

        return {"method": self.options.method, "options": self.options.to_json(),
                "overall": self.overall.to_json(), "by_task": tables(self.by_task),
                "groups": tables(self.groups), "notes": self.notes}


def rate_matches(matches: Sequence[Match], options: RatingOptions = RatingOptions(),
                 by_task: bool = False) -> RatingReport:
    if not matches:
        raise ValueError("no matches to rate")
    soft = sum(m.outcome is not None for m in matches)
    if options.hard:
        matches = hard_only(matches)
    overall = rate_table(matches, options)
    notes = []
    if all(m.score_a == 0.5 for m in matches):
        notes.append(f"all {len(matches)} matches are ties: every rating equals the start and the bootstrap "
                     "intervals have zero width, which says the matches rank nothing, not that the ratings are certain")
    if soft and options.hard:
        notes.append(f"{soft} of {len(matches)} matches carry a soft outcome; rated by the hard verdicts (--hard)")
    elif soft:
        notes.append(f"{soft} of {len(matches)} matches carry a soft outcome and are rated by it (Elo S = outcome, "
                     "Bradley–Terry fractional wins); W/T/L count the hard verdicts")
    if not by_task:
        return RatingReport(options, overall, notes=notes)
    return RatingReport(
        options, overall,
        by_task={task: rate_table(ms, options) for task, ms in split_by_task(matches).items()},
        groups={name: rate_table(ms, options) for name, ms in split_by_setting(matches).items()}, notes=notes)
