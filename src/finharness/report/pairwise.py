"""Pairwise ratings (Elo, Bradley–Terry) with CIs, the win-count matrix, per-task results, judge behaviour.

What `finharness report --matches/--ratings` shows, inside the section of the benchmark whose runs are
compared in pairs (a ReportSection with `pairwise`) or, without one, in a section of its own.

Inputs (any of them):
- matches: JSONL lines {"task", "item_id", "model_a", "model_b", "winner": "model_a"|"model_b"|"tie",
  "judge", "order"} (finharness.rating.matches). `order` says which answer the judge saw first:
  'ab' (model_a first) or 'ba'; 'both' (each order judged, combined into one match) carries no
  position information.
- ratings: outputs of `finharness rate --json` ({"method", "options", "overall": {"ratings": {MODEL:
  {"rating", "ci95", "wins", "ties", "losses"}}, "n_matches"}, "by_task", "groups"}).
With matches but no ratings, the report rates them itself (Elo and Bradley–Terry, per task too,
RATING_BOOTSTRAP rounds).

Judge behaviour, per judge, from the matches:
- tie rate: ties over matches;
- first-position win rate: over decided matches with order 'ab' or 'ba', the share won by the
  answer shown first (0.5 = no position bias);
- flip rate: over items judged in both orders as two separate matches (same judge, task, item,
  models), the share whose two verdicts differ (a tie against a win counts as a flip).
Rates carry Wilson 95% intervals.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from pathlib import Path
from typing import Any, Mapping, Sequence

from markupsafe import Markup

from ..data.errors import DataError
from ..data.io import read_json
from ..rating.matches import judge_behaviour
from ..stats import Estimate
from .leaderboard import Entry, rank_entries, rank_labels
from .markup import figure, fmt_ci, fmt_metric, fmt_num, note, subsection, table
from .svg import Bar, BarGroup, Cell, bar_chart, heatmap

RATING_BOOTSTRAP = 200
"""Bootstrap rounds when the report rates matches itself (`finharness rate` defaults to 1000)."""

RATING_KEYS = ("method", "overall")


def load_ratings(path: str | Path) -> dict[str, Any]:
    """A `finharness rate --json` output; a wrong shape raises DataError naming the file."""
    data = read_json(path)
    if not isinstance(data, dict) or any(k not in data for k in RATING_KEYS) \
            or not isinstance((data.get("overall") or {}).get("ratings"), dict):
        raise DataError('not a `finharness rate --json` output (needs "method" and "overall": {"ratings": ...})',
                        path=path, hint="create it with `finharness rate MATCHES.jsonl --method elo --by task --json`")
    return data


def rate_for_report(matches: Sequence[Any]) -> list[dict[str, Any]]:
    """Elo and Bradley–Terry tables (overall, per task, per setting) computed from the matches."""
    from ..rating import RatingOptions, rate_matches

    return [rate_matches(matches, RatingOptions(method=method, bootstrap=RATING_BOOTSTRAP), by_task=True).to_json()
            for method in ("elo", "bt")]


def win_counts(matches: Sequence[Any]) -> tuple[list[str], dict[tuple[str, str], int], Counter[frozenset]]:
    """Models (most wins first), wins[(winner, loser)] and ties per unordered pair."""
    wins: dict[tuple[str, str], int] = Counter()
    ties: Counter[frozenset] = Counter()
    total: Counter[str] = Counter()
    for m in matches:
        total[m.model_a] += 0
        total[m.model_b] += 0
        if m.winner == "tie":
            ties[frozenset((m.model_a, m.model_b))] += 1
            continue
        winner, loser = (m.model_a, m.model_b) if m.winner == "model_a" else (m.model_b, m.model_a)
        wins[(winner, loser)] += 1
        total[winner] += 1
    models = sorted(total, key=lambda x: (-total[x], x))
    return models, wins, ties


def _rate_text(e: Estimate) -> Markup:
    if e.n == 0:
        return Markup("—")
    return Markup('{v}<span class="ci">{ci} n={n}</span>').format(v=fmt_metric(e.value), ci=fmt_ci(e.ci95), n=e.n)


def ratings_block(data: Mapping[str, Any], source: str, label: str) -> Markup:
    method = str(data.get("method", "?"))
    title = {"elo": "Elo", "bt": "Bradley–Terry"}.get(method, method)
    overall = data["overall"]
    ratings = overall["ratings"]
    init = float((data.get("options") or {}).get("init", 1000.0))
    entries = [Entry(name, r.get("rating"), tuple(r["ci95"]) if r.get("ci95") and None not in r["ci95"] else None,
                     (r.get("wins") or 0) + (r.get("ties") or 0) + (r.get("losses") or 0))
               for name, r in ratings.items()]
    standings, _ = rank_entries(entries)
    chart = bar_chart(f"{label} {title} ratings with 95% bootstrap intervals",
                      [BarGroup(s.entry.label, (Bar(s.entry.value, s.entry.ci95, s.entry.n),)) for s in standings],
                      percent=False, baseline=init,
                      desc=f"{title} rating per model from {overall.get('n_matches', '?')} matches; bars start at {init:g}")
    rows = [[label, s.entry.label, fmt_num(s.entry.value, 1),
             "—" if not s.entry.ci95 else f"{s.entry.ci95[0]:.1f} – {s.entry.ci95[1]:.1f}",
             fmt_num(ratings[s.entry.label].get("wins")), fmt_num(ratings[s.entry.label].get("ties")),
             fmt_num(ratings[s.entry.label].get("losses"))]
            for label, s in zip(rank_labels(standings), standings)]
    per_task = _per_task_ratings(data)
    return subsection(f"{title} ratings",
                      note(f"From {source}: {overall.get('n_matches', '?')} matches, "
                           f"{overall.get('bootstrap_rounds', 0)} bootstrap rounds. Ranks: '=k' when 95% "
                           "intervals overlap."),
                      figure(chart),
                      table(["rank", "model", "rating", "95% CI", "W", "T", "L"], rows, numeric_from=2),
                      per_task)


def _per_task_ratings(data: Mapping[str, Any]) -> Markup:
    tables = {**(data.get("groups") or {}), **(data.get("by_task") or {})}
    if not tables:
        return Markup("")
    models = list(data["overall"]["ratings"])
    rows = []
    for name, t in tables.items():
        rs = t.get("ratings") or {}
        rows.append([name, fmt_num(t.get("n_matches")),
                     *[fmt_num((rs.get(m) or {}).get("rating"), 0) if m in rs else "—" for m in models]])
    return table(["task / setting", "matches", *models], rows, caption="Ratings per task (each rated on its own)")


def pairwise_body(matches: Sequence[Any] | None, ratings: Sequence[tuple[str, Mapping[str, Any]]],
                  label: str = "Pairwise") -> Markup:
    """Ratings, win counts, per-task scores and judge behaviour; `label` (the benchmark) heads the chart titles."""
    sources = ", ".join(dict.fromkeys(source for source, _ in ratings)) or "the matches"
    parts = [note(f"Ratings from {sources}.")] + [ratings_block(data, source, label) for source, data in ratings]
    if matches:
        parts.append(_win_matrix(matches, label))
        parts.append(_per_task_matches(matches))
        parts.append(_judges(matches))
    return Markup("").join(parts)


def _win_matrix(matches: Sequence[Any], label: str) -> Markup:
    models, wins, ties = win_counts(matches)
    top = max(wins.values(), default=1)
    cells = []
    for a in models:
        row = []
        for b in models:
            if a == b:
                row.append(None)
                continue
            won, lost, tied = wins.get((a, b), 0), wins.get((b, a), 0), ties[frozenset((a, b))]
            row.append(Cell(won, text=str(won), tooltip=f"{a} beat {b} {won}×, lost {lost}×, tied {tied}×"))
        cells.append(row)
    return subsection("Win counts",
                      figure(heatmap(f"{label} win counts: row model beat column model", models, models, cells,
                                     domain=(0, top), percent=False, legend_label="wins", row_header="winner",
                                     column_header="loser", integer=True),
                             "Cell = how often the row model beat the column model; ties are in the tooltips."))


def _per_task_matches(matches: Sequence[Any]) -> Markup:
    tasks: dict[str, list[Any]] = defaultdict(list)
    for m in matches:
        tasks[m.task].append(m)
    models, _, _ = win_counts(matches)
    rows = []
    for task, ms in tasks.items():
        scores: dict[str, list[float]] = defaultdict(list)
        for m in ms:
            scores[m.model_a].append(m.score_a)
            scores[m.model_b].append(1 - m.score_a)
        rows.append([task, fmt_num(len(ms)), fmt_metric(sum(m.winner == "tie" for m in ms) / len(ms)),
                     *[fmt_metric(sum(scores[x]) / len(scores[x])) if scores.get(x) else "—" for x in models]])
    return subsection("Per task",
                      table(["task", "matches", "ties", *[f"{x} score" for x in models]], rows,
                            caption="Score = (wins + ½ ties) / matches played in the task"))


def _judges(matches: Sequence[Any]) -> Markup:
    rows = [[j.judge, fmt_num(j.matches), _rate_text(j.tie), _rate_text(j.first_position_win), _rate_text(j.flip)]
            for j in judge_behaviour(matches)]
    return subsection("Judge behaviour",
                      note("tie: ties over matches. first-position win: among decided matches judged in one order "
                           "('ab'/'ba'), the share won by the answer shown first (0.5 = no position bias). flip: "
                           "among items judged in both orders as separate matches, the share whose verdicts "
                           "differ. Matches with order 'both' already fold flips into ties."),
                      table(["judge", "matches", "tie", "first-position win", "flip"], rows))
