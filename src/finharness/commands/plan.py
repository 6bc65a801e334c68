"""`finharness plan`: how small a difference between two models a paired test on n items would detect.

The per-item spread comes from stored runs where there are any (samples.jsonl): two runs on the same
items give the spread of their per-item differences; one run gives its scores' spread, with a second
model assumed to correlate with it (--correlation). Without runs, --accuracy (0/1 scores) or --sd says
it. --pairwise reads the scores as one model's outcome against the other (1 / ½ / 0; --matches reads
them from a matches file) and adds the difference in rating points. A run whose benchmark weighs its items
unequally (CFinBench's 0.4/0.4/0.2 score) counts them by their weight (effective n).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

import typer

from ..cli_common import fail
from ..stats.power import (
    ALPHA,
    DEFAULT_CORRELATION,
    POWER,
    TIE_SHARE,
    PowerPlan,
    binary_difference_sd,
    difference_sd,
    difference_sd_from_one,
    effective_n,
    pairwise_outcome_sd,
    plan_comparison,
)

DEFAULT_ACCURACY = 0.5
"""The planned accuracy of 0/1 scores when nothing says the spread: p(1 - p) is largest there (no score in [0, 1]
varies more), so the detectable difference is on the safe side."""



def _read_run(run: Path, value: str | None) -> tuple[str, dict[str, float], dict[str, dict[str, Any]]]:
    """(task, per-item score, per-item metadata) of a stored run."""
    from ..data.errors import DataError
    from ..data.io import iter_jsonl, read_json

    try:
        task = str((read_json(run / "results.json") if (run / "results.json").exists() else {}).get("task", ""))
        scores, cells = {}, {}
        for _, line in iter_jsonl(run / "samples.jsonl"):
            score = line.get("score") or {}
            v = score.get("value") if value is None else (score.get("values") or {}).get(value)
            if v is None:
                continue
            scores[str(line["id"])] = float(v)
            cells[str(line["id"])] = dict(line.get("metadata") or {})
    except DataError as err:
        fail(str(err))
    if len(scores) < 2:
        fail(f"{run / 'samples.jsonl'}: {len(scores)} scored item(s)" + (f" with value {value!r}" if value else "")
             + "; the spread needs at least 2 (run more items, or give --sd / --accuracy)")
    return task, scores, cells


def _weight_ratio(task: str, ids: list[str], metadata: dict[str, dict[str, Any]]) -> float:
    """effective n / n of a run's items under their weights in its benchmark's headline (SuiteHooks.item_weights:
    CFinBench's 0.4/0.4/0.2 of macro means); 1 where they weigh alike."""
    from types import SimpleNamespace

    from ..benchmarks.declaration import hooks_of

    if not ids:
        return 1.0
    weights = hooks_of(task).item_weights([SimpleNamespace(metadata=metadata.get(i, {})) for i in ids])
    return 1.0 if not weights else effective_n(list(weights)) / len(ids)


def _matches_sd(path: Path) -> float:
    from ..rating.matches import MatchFileError, read_matches

    try:
        matches = read_matches(path)
    except MatchFileError as err:
        fail(str(err))
    pairs = {tuple(sorted((m.model_a, m.model_b))) for m in matches}
    if len(pairs) != 1:
        fail(f"{path}: matches of {len(pairs)} model pairs; plan reads one pair (split the file by pair)")
    first = sorted(next(iter(pairs)))[0]
    outcomes = [m.score_a if m.model_a == first else 1 - m.score_a for m in matches]
    if len(outcomes) < 2:
        fail(f"{path}: {len(outcomes)} match(es); the spread needs at least 2")
    mean = sum(outcomes) / len(outcomes)
    return (sum((o - mean) ** 2 for o in outcomes) / (len(outcomes) - 1)) ** 0.5


def _parts(text: str) -> tuple[int, float]:
    """`W=N,...` -> (items, effective n / items): each part's items share its (renormalised) weight alike."""
    try:
        pairs = [(float(w), int(k)) for w, _, k in (p.strip().partition("=") for p in text.split(",") if p.strip())]
    except ValueError:
        fail(f"--parts {text!r}: expected WEIGHT=ITEMS,..., e.g. --parts 0.4=2000,0.4=1500,0.2=800")
    if not pairs or any(w <= 0 or k < 1 for w, k in pairs):
        fail(f"--parts {text!r}: each part needs a weight > 0 and at least 1 item")
    total_weight, items = sum(w for w, _ in pairs), sum(k for _, k in pairs)
    weights = [w / total_weight / k for w, k in pairs for _ in range(k)]
    return items, effective_n(weights) / items


def _print(plan: PowerPlan, pairwise: bool) -> None:
    unit = " (win share − ½)" if pairwise else ""
    lines = [f"items {plan.n}" + (f" (effective {plan.effective_n:.0f}: weighted score)"
                                  if abs(plan.effective_n - plan.n) > 0.5 else ""),
             f"per-item sd of the difference {plan.sd:.4f}  ({plan.source})"]
    if plan.target is not None:
        lines.append(f"to detect {plan.target:.4f}{unit}: {plan.n} items")
    lines.append(f"smallest difference detected at {plan.power:.0%} power (two-sided, alpha {plan.alpha:g}): "
                 f"{plan.detectable:.4f}{unit}" + (f" = {plan.rating_points:.1f} rating points"
                                                  if plan.rating_points is not None else ""))
    for line in lines:
        typer.echo(line)


def plan_command(
    runs: list[Path] = typer.Argument(None, help="0, 1 or 2 run directories (samples.jsonl): the spread comes "
                                                  "from them."),
    n: list[int] = typer.Option([], "--n", help="Planned items (repeatable). Default: the items of the run(s)."),
    difference: Optional[float] = typer.Option(None, "--diff", help="A difference to detect: prints the items "
                                                                      "needed instead."),
    sd: Optional[float] = typer.Option(None, "--sd", help="Per-item standard deviation of the difference."),
    accuracy: Optional[float] = typer.Option(None, "--accuracy", help="Planned accuracy of 0/1 scores."),
    correlation: float = typer.Option(DEFAULT_CORRELATION, "--correlation", help="Assumed correlation of the two "
                                      "models' per-item scores (one run, or --accuracy)."),
    pairwise: bool = typer.Option(False, "--pairwise", help="Scores are outcomes of one model against the other "
                                  "(1, ½, 0): the difference is the win share's distance from ½, also in points."),
    matches: Optional[Path] = typer.Option(None, "--matches", help="Matches file of one model pair (implies "
                                           "--pairwise): the outcomes' spread."),
    value: Optional[str] = typer.Option(None, "--value", help="A per-sample score value instead of the headline."),
    parts: Optional[str] = typer.Option(None, "--parts", help="A weighted score of parts, WEIGHT=ITEMS,... (e.g. "
                                        "0.4=SINGLE,0.4=MULTI,0.2=JUDGMENT): n is their items, counted by weight."),
    alpha: float = typer.Option(ALPHA, "--alpha"),
    power: float = typer.Option(POWER, "--power"),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """How many items a comparison needs: the smallest difference a paired test detects at 80% power."""
    runs = list(runs or [])
    pairwise = pairwise or matches is not None
    ratio, items = 1.0, None
    if len(runs) > 2:
        fail(f"plan reads at most 2 runs; got {len(runs)}")
    if matches is not None:
        spread, source = _matches_sd(matches), f"outcomes in {matches}"
    elif len(runs) == 2:
        (task, a, cells), (_, b, _) = _read_run(runs[0], value), _read_run(runs[1], value)
        shared = sorted(set(a) & set(b))
        if len(shared) < 2:
            fail(f"{runs[0]} and {runs[1]} share {len(shared)} scored item(s); the spread needs at least 2")
        spread, source = difference_sd(a, b), f"differences of {runs[0]} and {runs[1]} on {len(shared)} items"
        ratio, items = _weight_ratio(task, shared, cells), len(shared)
    elif len(runs) == 1:
        task, scores, cells = _read_run(runs[0], value)
        spread = difference_sd_from_one(list(scores.values()), correlation)
        source = f"scores of {runs[0]} ({len(scores)} items), correlation {correlation:g} assumed"
        ratio, items = _weight_ratio(task, sorted(scores), cells), len(scores)
    elif sd is not None:
        spread, source = sd, "given"
    elif accuracy is not None:
        spread, source = binary_difference_sd(accuracy, correlation), \
            f"0/1 scores at accuracy {accuracy:g}, correlation {correlation:g}"
    elif pairwise:
        spread, source = pairwise_outcome_sd(TIE_SHARE), f"even models, {TIE_SHARE:.0%} ties assumed"
    else:  # nothing says the spread: the largest a score in [0, 1] can have, said in the output
        spread = binary_difference_sd(DEFAULT_ACCURACY, correlation)
        source = (f"default: 0/1 scores at accuracy {DEFAULT_ACCURACY:g}, correlation {correlation:g} (give runs, "
                  "--matches, --sd or --accuracy to say otherwise)")
    if parts is not None:
        if n or runs:
            fail("--parts says the items and their weights: give it without --n or runs")
        items, ratio = _parts(parts)
    sizes = n or ([items] if items else [])
    if difference is None and not sizes:
        fail("give --n (planned items) or --diff (a difference to detect)")
    scale = (400.0, 10.0) if pairwise else None
    try:
        plans = [plan_comparison(spread, difference=difference, weight_ratio=ratio, alpha=alpha, power=power,
                                 source=source, pairwise_scale=scale)] if difference is not None else \
            [plan_comparison(spread, n=size, weight_ratio=ratio, alpha=alpha, power=power, source=source,
                             pairwise_scale=scale) for size in sizes]
    except ValueError as err:
        fail(str(err))
    if as_json:
        out: Any = [p.to_json() for p in plans]
        typer.echo(json.dumps(out if len(out) > 1 else out[0], indent=2))
        return
    for p in plans:
        _print(p, pairwise)
