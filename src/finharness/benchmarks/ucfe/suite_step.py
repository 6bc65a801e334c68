"""UCFE inside a suite: the dialogues each model had are judged, item by item, against the released GPT-4o
dialogues of the same items (the reference every model meets) and against each other model's, by the suite's
judge in both orders; the matches go to OUT/ucfe/matches.jsonl, one summary per pair beside them, and the
scorecard rates them (Bradley–Terry). Judge calls go through the suite's run store: a rerun judges nothing twice.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import tempfile
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from ...backends import open_model
from ...core.backend import Backend
from ...core.model import RunCounters, model_state
from ...core.plan import DryRun, PlannedModel, TaskPlan
from ...core.pool import run_dir_name
from ...core.spending import Spending
from ...core.store import RunStore
from ...data.errors import DataError
from ...data.io import atomic_write_text, read_json
from ...data.registry import resolve_data_dir
from ...rating.matches import judge_behaviour, write_matches
from ...stats.power import TIE_SHARE, pairwise_outcome_sd, plan_comparison
from ..declaration import Health, HealthRate, SuiteHooks
from .data import DialogueSource, UCFEItem, load_dialogues, load_items, resolve_bench_file
from .judge import JudgeSettings, PairJudge, summary

REFERENCE_NAME = "gpt-4o (released)"
"""The name the released GPT-4o dialogues (DATA_ROOT/ucfe/log/*gpt-4o*.json) play under."""
UCFE_DIR = "ucfe"
REFERENCE_DATASET = "ucfe-gpt4o-dialogues"
"""The registry dataset of the released GPT-4o dialogues: what the judging reads beside the row."""


def reference_log(data_root: Path) -> Path:
    """The released GPT-4o dialogues of UCFE under the data root."""
    found = sorted((data_root / "ucfe" / "log").glob("*gpt-4o*.json"))
    if not found:
        raise DataError("no released GPT-4o dialogues (ucfe/log/*gpt-4o*.json) to judge the models against",
                        path=data_root / "ucfe" / "log", hint="`finharness data pull ucfe` puts them there")
    return found[-1]


SUITE_JUDGING = JudgeSettings(mode="both-orders")
"""How the suite's judge compares two dialogues of an item: in both orders."""


def judging_pairs(models: Sequence[str]) -> list[tuple[str, str]]:
    """The pairs judged, in order: every model against the reference, then every two models."""
    return [(model, REFERENCE_NAME) for model in models] + list(itertools.combinations(models, 2))


def items_to_judge(row: Any, data_root: Path) -> list[UCFEItem]:
    """The UCFE items of the row's tasks (its `tasks` option; all when not given)."""
    task_keys = row.options.get("tasks") or None
    if isinstance(task_keys, str):
        task_keys = [t.strip() for t in task_keys.split(",") if t.strip()]
    return load_items(resolve_bench_file(data_root), task_keys)


def judge_suite_dialogues(row: Any, run_dirs: Mapping[str, Path], *, judge_backend: Backend, judge: str, out: Path,
                          store_path: Path, data_root: Path | None, concurrency: int | None = None,
                          spending: Spending | None = None, progress: Callable[[str], Callable[[RunCounters], None] | None] | None = None
                          ) -> dict[str, Any]:
    """Judge every model's UCFE dialogues against the reference and against each other; returns suite.json's
    `ucfe` entry (matches file, summaries, the judge's cumulative calls and tokens)."""
    root = resolve_data_dir(data_root)
    sides: dict[str, DialogueSource] = {model: load_dialogues(path) for model, path in run_dirs.items()}
    reference = load_dialogues(reference_log(root))
    items = items_to_judge(row, root)
    folder = out / UCFE_DIR
    folder.mkdir(parents=True, exist_ok=True)
    pairs = judging_pairs(list(sides))
    matches, summaries = [], []
    counters = RunCounters()
    settings = SUITE_JUDGING
    with RunStore(store_path) as store:
        handle = open_model(judge_backend, store, role="judge", counters=counters, concurrency=concurrency,
                            spending=spending)
        for a, b in pairs:
            side_a, side_b = sides[a], reference if b == REFERENCE_NAME else sides[b]
            wanted = [i for i in items if i.sample_id in side_a.dialogues and i.sample_id in side_b.dialogues]
            counters.samples_total += len(wanted)
            pair_judge = PairJudge(handle, settings, name_a=a, name_b=b)
            tick = progress(f"ucfe judge: {a} vs {b}") if progress else None

            def on_item() -> None:
                counters.samples_done += 1
                if tick is not None:
                    tick(counters)

            report = asyncio.run(pair_judge.run(wanted, side_a, side_b, progress=on_item))
            matches += report.matches
            name = f"{run_dir_name(a)[:60]}__{run_dir_name(b)[:60]}.summary.json"
            result = summary(report, pair_judge.settings, judge=judge, name_a=a, name_b=b, counters=counters)
            atomic_write_text(folder / name, json.dumps(result, ensure_ascii=False, indent=2) + "\n")
            summaries.append(f"{UCFE_DIR}/{name}")
        cumulative = {"invocations": 1, "calls": counters.calls, "cache_hits": counters.cache_hits,
                      "failures": counters.failures, "prompt_tokens": counters.prompt_tokens,
                      "completion_tokens": counters.completion_tokens, "reasoning_tokens": counters.reasoning_tokens,
                      "tokens_evaluated": counters.tokens_evaluated, "cost_usd": counters.cost_usd,
                      "cached_tokens": counters.cached_tokens, "cache_write_tokens": counters.cache_write_tokens,
                      "billed": counters.billed}
    write_matches(matches, folder / "matches.jsonl")
    return {"row": row.spec.id, "matches": f"{UCFE_DIR}/matches.jsonl", "reference": REFERENCE_NAME,
            "reference_file": str(reference.path), "judge": judge, "mode": settings.mode, "summaries": summaries,
            "failed_calls": counters.failures, "cumulative": cumulative}


async def plan_judging(row: Any, dialogues: Mapping[str, Mapping[str, Any]], judge: Backend, store: RunStore | None,
                       dry: DryRun, data_root: Path | None) -> TaskPlan:
    """The calls of judge_suite_dialogues, on the planned (or stored) dialogues of each model."""
    root = resolve_data_dir(data_root)
    reference = load_dialogues(reference_log(root))
    items = items_to_judge(row, root)
    with tempfile.TemporaryDirectory() as tmp:  # read back as a run's samples.jsonl is: the same turns
        sides = {}
        for i, (model, predictions) in enumerate(dialogues.items()):
            path = Path(tmp) / str(i) / "samples.jsonl"
            path.parent.mkdir()
            path.write_text("".join(json.dumps({"id": sid, "prediction": p}, ensure_ascii=False) + "\n"
                                    for sid, p in predictions.items() if p is not None), encoding="utf-8")
            sides[model] = load_dialogues(path)
    plan = TaskPlan("ucfe judging", "", [])
    handle = PlannedModel(judge, store, RunCounters(), plan=plan, dry=dry, role="judge",
                          _shared=model_state({}, judge, None))
    for a, b in judging_pairs(list(dialogues)):
        side_a, side_b = sides[a], reference if b == REFERENCE_NAME else sides[b]
        wanted = [i for i in items if i.sample_id in side_a.dialogues and i.sample_id in side_b.dialogues]
        plan.items += len(wanted)
        await PairJudge(handle, SUITE_JUDGING, name_a=a, name_b=b).run(wanted, side_a, side_b)
    return plan


RATE_MEANINGS: Mapping[str, str] = {
    "tie": "decided comparisons judged a tie (both orders disagreeing counts as one); all ties: the judge tells "
           "nothing apart",
    "first-position win": "replies that chose a side and chose the dialogue shown first; healthy: near 50%",
    "flip": "items judged in both orders whose two verdicts differ; healthy: near 0",
    "no verdict": "judge replies without a usable [[1]]/[[2]]/[[3]] (not counted as ties)",
}


def judging_health(suite_dir: Path, entry: Mapping[str, Any], matches: Sequence[Any]) -> Health:
    """The pairwise judge's tie, first-position win, flip and no-verdict counts pooled over the judge summaries the
    suite.json entry names (`finharness ucfe judge` writes MATCHES.summary.json); without summaries, from the matches
    themselves (rating.matches.judge_behaviour: the first-position rate only from matches judged in one order)."""
    sums = {"tie": [0, 0], "first-position win": [0, 0], "flip": [0, 0], "no verdict": [0, 0]}
    labels: dict[str, int] = {}
    judge = entry.get("judge") or None
    read = 0
    for name in entry.get("summaries") or ():
        path = suite_dir / str(name)
        if not path.is_file():
            continue
        s = read_json(path)
        if not isinstance(s, dict):
            raise DataError("expected a JSON object (a `finharness ucfe judge` summary)", path=path)
        read += 1
        winners = s.get("winners") or {}
        first, second = int(s.get("first_position_wins") or 0), int(s.get("second_position_wins") or 0)
        for name_, hits, n in (("tie", winners.get("tie"), s.get("comparisons")),
                               ("first-position win", first, first + second),
                               ("flip", s.get("flips"), s.get("pairs_both_decided")),
                               ("no verdict", s.get("no_verdict"), s.get("judgments"))):
            sums[name_][0] += int(hits or 0)
            sums[name_][1] += int(n or 0)
        for label, count in (s.get("verdict_labels") or {}).items():
            labels[label] = labels.get(label, 0) + int(count)
        judge = judge or s.get("judge")
    notes: list[str] = []
    if read:
        rates = tuple(HealthRate(name, hits, n, RATE_MEANINGS[name]) for name, (hits, n) in sums.items() if n)
    else:
        behaviour = [b for b in judge_behaviour(matches) if judge is None or b.judge == judge]
        rates = tuple(HealthRate(name, round(e.value * e.n), e.n, RATE_MEANINGS[name])
                      for b in behaviour[:1]
                      for name, e in (("tie", b.tie), ("first-position win", b.first_position_win), ("flip", b.flip))
                      if e.n)
        notes.append("no judge summaries: rates from the matches (first-position win only where one order was "
                     "judged)")
    if len(labels) == 1 and sum(labels.values()) >= 10:
        (label, count), = labels.items()
        notes.append(f"the judge answered {label} in all {count} replies with a verdict: it does not tell the "
                     "dialogues apart, so the ratings carry no information; use a stronger judge")
    tie = next((r for r in rates if r.name == "tie"), None)
    if tie is not None and tie.n and tie.hits == tie.n:
        notes.append(f"all {tie.n} comparisons are ties: the ratings rank nothing")
    return Health(rates, tuple(notes), judge)


class UCFESuiteHooks(SuiteHooks):
    """UCFE in a suite: its dialogues are judged pairwise after every model has run (judge_suite_dialogues), and
    its row is the Bradley–Terry rating of the matches."""

    judged_by_suite = True
    rating_note = "Bradley–Terry rating (Elo scale, mean 1000) from the suite's judged matches, 95% bootstrap interval"

    def step_health(self, suite_dir: Path, entry: Mapping[str, Any], matches: Sequence[Any]) -> Health | None:
        return judging_health(suite_dir, entry, matches)

    def extra_datasets(self, *, judged: bool) -> tuple[str, ...]:
        return (REFERENCE_DATASET,) if judged else ()

    def comparison(self, items: int) -> Any:
        return plan_comparison(pairwise_outcome_sd(TIE_SHARE), n=items,
                               source=f"default: win/tie/loss of even models, {TIE_SHARE:.0%} ties",
                               pairwise_scale=(400.0, 10.0))

    def steps_after_rows(self, models: Sequence[str]) -> int:
        return len(judging_pairs(list(models)))

    def after_rows(self, row: Any, run_dirs: Mapping[str, Path], **context: Any) -> dict[str, Any] | None:
        return judge_suite_dialogues(row, run_dirs, **context)

    async def plan_after_rows(self, row: Any, predictions: Mapping[str, Mapping[str, Any]], **context: Any) -> Any:
        return await plan_judging(row, predictions, context["judge"], context["store"], context["dry"],
                                  context["data_root"])


HOOKS = UCFESuiteHooks()
"""UCFE's suite hooks (its Benchmark declaration names them)."""
