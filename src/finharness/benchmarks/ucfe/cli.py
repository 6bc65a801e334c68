"""`finharness ucfe judge RUN_A RUN_B --judge SPEC`: compare two sets of UCFE dialogues with an LLM judge.

Mounted as `finharness ucfe` (its BENCHMARK declaration); everything heavy is imported inside the
command.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

import typer

from ...cli_common import LiveProgress, fail, resolve_data_dir, resolve_store
from ...util import output_console

ucfe_app = typer.Typer(no_args_is_help=True, rich_markup_mode=None,
                       help="UCFE: judge two runs' dialogues in pairs (then `finharness rate`).")


@ucfe_app.command("judge")
def judge_command(
    run_a: Path = typer.Argument(..., help="Dialogues of model A (the 'target'): a `finharness run ucfe` "
                                            "directory, its samples.jsonl, or an official UCFE log .json."),
    run_b: Path = typer.Argument(..., help="Dialogues of model B (the 'base'), same forms."),
    judge: str = typer.Option(..., "--judge", help="Model spec of the judge."),
    mode: str = typer.Option("both-orders", help="both-orders (ours: each pair judged in both orders) | "
                                                 "official (eval_elo.py: one order by item id parity)."),
    out: Optional[Path] = typer.Option(None, help="Matches JSONL (default runs/ucfe-judge__A__B__MODE/matches.jsonl); "
                                                  "MATCHES.judgments.jsonl and MATCHES.summary.json go beside it."),
    store: Optional[Path] = typer.Option(None, help="Run store of the judge calls (default: beside --out, or "
                                                    "$FINHARNESS_STORE)."),
    data_dir: Optional[Path] = typer.Option(None, help="Data root holding ucfe/UCFE_bench.json."),
    tasks: Optional[str] = typer.Option(None, help="Comma list of UCFE task keys (default: all)."),
    limit: Optional[int] = typer.Option(None, help="Only the first N items (after --tasks)."),
    name_a: Optional[str] = typer.Option(None, help="Name of model A in the matches (default: the run's model "
                                                    "spec less run-only options such as prompt_cache_mb)."),
    name_b: Optional[str] = typer.Option(None, help="Name of model B in the matches."),
    max_tokens: int = typer.Option(1024, help="The judge's reply budget."),
    verdict: str = typer.Option("hard", help="hard (official: the label written) | soft (ours: the judge's "
                                              "probabilities of [[1]]/[[2]]/[[3]] where it wrote the verdict; "
                                              "needs next-token logprobs: embedded, llamacpp:, vllm:, openai:)."),
    concurrency: Optional[int] = typer.Option(None, help="Judge calls in flight."),
    as_json: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress display."),
) -> None:
    """Judge RUN_A against RUN_B item by item; write matches (Chatbot-Arena convention) and a summary."""
    import asyncio

    from ...backends import from_spec, open_model
    from ...core.backend import SpecError
    from ...core.model import RunCounters
    from ...core.pool import run_dir_name
    from ...core.store import RunStore
    from ...data.errors import DataError
    from ...data.io import write_jsonl
    from ...rating.matches import write_matches
    from .data import load_dialogues, load_items, resolve_bench_file
    from .judge import JUDGE_MODES, VERDICTS, JudgeSettings, PairJudge, summary

    if mode not in JUDGE_MODES:
        fail(f"--mode must be one of {', '.join(JUDGE_MODES)}")
    if verdict not in VERDICTS:
        fail(f"--verdict must be one of {', '.join(VERDICTS)}")
    try:
        side_a, side_b = load_dialogues(run_a), load_dialogues(run_b)
        wanted = [t.strip() for t in tasks.split(",") if t.strip()] if tasks else None
        items = load_items(resolve_bench_file(resolve_data_dir(data_dir)), wanted)
        backend = from_spec(judge)
    except (DataError, SpecError) as err:
        fail(str(err))
    items = items[:limit] if limit is not None else items
    names = (name_a or side_a.name, name_b or side_b.name)
    if names[0] == names[1]:
        fail(f"both runs are named {names[0]!r}; tell them apart with --name-a / --name-b")
    if out is None:  # each name cut at 60 characters, not run_dir_name's 80: the folders judge runs already have
        slugs = [run_dir_name(name)[:60] for name in names]
        out = Path("runs") / f"ucfe-judge__{slugs[0]}__{slugs[1]}__{mode}" / "matches.jsonl"
    out.parent.mkdir(parents=True, exist_ok=True)
    store_path = resolve_store(store, out.parent / "store.sqlite")
    settings = JudgeSettings(mode=mode, max_tokens=max_tokens, verdict=verdict)
    run_store = RunStore(store_path)
    counters = RunCounters(samples_total=sum(i.sample_id in side_a.dialogues and i.sample_id in side_b.dialogues
                                             for i in items))
    try:
        handle = open_model(backend, run_store, role="judge", counters=counters, concurrency=concurrency)
        pair_judge = PairJudge(handle, settings, name_a=names[0], name_b=names[1])
        with LiveProgress(f"ucfe judge ({mode}) with {judge}", enabled=not quiet) as live:
            def tick() -> None:
                counters.samples_done += 1
                live(counters)

            report = asyncio.run(pair_judge.run(items, side_a, side_b, progress=tick))
    finally:
        run_store.close()
    write_matches(report.matches, out)
    judgments_path = out.with_name(out.stem + ".judgments.jsonl")
    write_jsonl(judgments_path, (j.to_json() for j in report.judgments))
    result = summary(report, pair_judge.settings, judge=judge, name_a=names[0], name_b=names[1], counters=counters)
    result.update(run_a=str(side_a.path), run_b=str(side_b.path), matches_file=str(out),
                  judgments_file=str(judgments_path),
                  store=str(store_path))
    failed_dialogues = {"a": list(side_a.failed), "b": list(side_b.failed)}
    if any(failed_dialogues.values()):
        result["failed_dialogues"] = failed_dialogues
    out.with_name(out.stem + ".summary.json").write_text(json.dumps(result, ensure_ascii=False, indent=2) + "\n",
                                                         encoding="utf-8")
    if as_json:
        typer.echo(json.dumps(result, ensure_ascii=False, indent=2))
    else:
        _print_summary(result)
    if report.stats.failed_calls:
        raise typer.Exit(1)


def _print_summary(result: dict[str, Any]) -> None:
    from rich.table import Table

    console = output_console(markup=False, highlight=False)  # verdict markers like [[1]] are not markup
    table = Table(title=f"UCFE judge ({result['mode']}, {result['judge']}): {result['model_a']} vs {result['model_b']}")
    for column in ("task", result["model_a"], result["model_b"], "tie", "undecided"):
        table.add_column(column, justify="left" if column == "task" else "right")
    for task, c in result["by_task"].items():
        table.add_row(task, str(c[result["model_a"]]), str(c[result["model_b"]]), str(c["tie"]), str(c["undecided"]))
    console.print(table)
    rates = result["rates"]

    def show(name: str) -> str:
        r = rates[name]
        if r["value"] is None:
            return f"{name} — (n=0)"
        return f"{name} {r['value']:.3f} [{r['ci95'][0]:.3f}, {r['ci95'][1]:.3f}] (n={r['n']})"

    console.print("  ".join(show(name) for name in rates))
    cov = result["coverage"]
    console.print(f"items {cov['items']}  judged {cov['judged']}  missing in A {cov['missing_in_a']}  missing in B "
                  f"{cov['missing_in_b']}  judgments {result['judgments']}  no verdict {result['no_verdict']}  "
                  f"failed calls {result['failed_calls']}  matches {result['comparisons']}")
    for note in result["notes"]:
        console.print(f"note: {note}")
    console.print(f"matches: {result['matches_file']}  (rate them: finharness rate {result['matches_file']} "
                  "--method bt)")
