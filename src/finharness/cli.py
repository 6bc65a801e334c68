"""The `finharness` command line (typer + rich). Heavy imports happen inside commands: start-up stays fast."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Optional, Sequence

import typer

from .cli_common import LiveProgress, check_endpoints, fail, parse_options, resolve_data_dir, resolve_store
from .cli_plugins import plugin_app
from .commands.spending import (
    BUDGET_TOKENS_OPTION,
    MAX_COST_OPTION,
    PRICE_OPTION,
    make_spending,
    stop_if_budget_reached,
)
from .util import output_console

app = plugin_app(add_completion=False, no_args_is_help=True, rich_markup_mode=None,
                 help="finharness: measure how well language models do real financial work.")
"""cli.py's own commands below; every other command is a plug-in, mounted when named (cli_plugins.py)."""


def _package_version() -> str:
    from . import __version__

    return __version__


def _version(value: bool) -> None:
    if value:
        typer.echo(f"finharness {_package_version()}")
        raise typer.Exit()


@app.callback()
def _main(version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                       help="Print the version and exit.")) -> None:
    pass


def versions() -> dict[str, Any]:
    """What a run records of the software it ran on (api.run_versions)."""
    from .api import run_versions

    return run_versions()


def _resolve_task(spec: str):
    """The TaskRef of a task spec (a name, an entry point, FILE.py:Class); an unknown or broken one is a usage error."""
    from .benchmarks.registry import resolve_task

    try:
        return resolve_task(spec)
    except (KeyError, ValueError) as err:
        fail(str(err.args[0] if isinstance(err, KeyError) else err))


def _make_task(ref: Any, options: dict[str, Any]):
    try:
        return ref.make(options)
    except (ValueError, TypeError) as err:
        fail(str(err))


def _options_per_task(refs: list[Any], options: dict[str, Any]) -> list[dict[str, Any]]:
    """A pooled run's task options, each given to the tasks that declare it (api.options_per_task); an option no
    task of the pool takes is a usage error naming the closest one."""
    from .api import options_per_task

    try:
        return options_per_task(refs, options)
    except ValueError as err:
        fail(str(err))


def _task_options(split, shots, method, extract, mode, options) -> dict[str, Any]:
    opts = {"split": split, "shots": shots, "method": method, "extract": extract, "mode": mode}
    opts.update(parse_options(options or []))
    return {k: v for k, v in opts.items() if v is not None}


# Options `run` and `suite` share, declared once (the budget ones with contamination: commands/spending.py).
SANDBOX_OPTION = typer.Option(None, help="Isolation of model-written programs (the tasks that run model-written code): auto | bwrap "
                              "| kernel | unsafe (docs/sandbox.md; recorded in results).")
NO_PULL_OPTION = typer.Option(False, "--no-pull", help="Never download a dataset the data root lacks (tasks that "
                              "pull on first use fail instead); same as FINHARNESS_NO_PULL=1.")
JSON_PLAN_OPTION = typer.Option(False, "--json", help="With --dry-run: print the plan as JSON.")
BATCH_OPTION = typer.Option(False, "--batch", help="Send the calls of every openai: or anthropic: model through the "
                            "provider's batch interface (about half price, results within 24 h; docs/backends.md); "
                            "a rerun or `finharness batch status OUT` follows the batches.")


@app.command()
def run(
    task: list[str] = typer.Argument(..., metavar="TASK", help="Task name(s) (see `finharness list`) or "
                                     "path/to/file.py:Class; several tasks run as one pool of requests sharing "
                                     "each model's slots."),
    model: str = typer.Option("embedded", "--model", "-m", help="Model spec of the model under test."),
    judge: Optional[str] = typer.Option(None, help="Model spec of the judge (tasks that judge)."),
    user_model: Optional[str] = typer.Option(None, "--user-model", help="Model spec of the simulated user."),
    limit: Optional[int] = typer.Option(None, help="Only the first N samples."),
    subset: Optional[int] = typer.Option(None, "--sample", help="A random subset of N samples (seeded by --seed)."),
    data_dir: Optional[Path] = typer.Option(None, help="Data root (default $FINHARNESS_DATA_DIR or the cache)."),
    out: Optional[Path] = typer.Option(None, help="Run directory (default runs/TASK__MODEL; with several tasks "
                                       "runs/TASK_TASK...__MODEL holding one folder per task)."),
    store: Optional[Path] = typer.Option(None, help="Run store (default OUT/store.sqlite or $FINHARNESS_STORE); "
                                         "the tasks of a pooled run share it."),
    concurrency: Optional[int] = typer.Option(None, help="Calls in flight per model."),
    seed: int = typer.Option(0, help="Seed recorded in the run and passed to tasks that sample."),
    split: Optional[str] = typer.Option(None, help="Data split (task-specific)."),
    shots: Optional[int] = typer.Option(None, help="Few-shot examples (task-specific)."),
    method: Optional[str] = typer.Option(None, help="gen | ll | letters | auto | all (task-specific; "
                                         "docs/methods.md)."),
    extract: Optional[str] = typer.Option(None, help="Extraction mode: official | robust."),
    mode: Optional[str] = typer.Option(None, help="Task mode (e.g. norag | rag | ideal)."),
    truncate: str = typer.Option("error", help="Prompt budget policy: error | left | right."),
    max_prompt_tokens: Optional[int] = typer.Option(None, help="Prompt budget below the context length."),
    option: list[str] = typer.Option([], "--option", "-o", help="Further task options KEY=VALUE."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress display."),
    executor: str = typer.Option("local", help="Where samples are solved: local | ray (shards over a Ray "
                                 "cluster, one backend per worker; pip install 'finharness[ray]')."),
    address: Optional[str] = typer.Option(None, help="Ray cluster for --executor ray: auto, ray://HOST:10001... "
                                          "(default $RAY_ADDRESS, else a new local cluster)."),
    shards: Optional[int] = typer.Option(None, min=1, help="Shards (Ray tasks) for --executor ray "
                                         "(default one per CPU of the cluster)."),
    temperature: Optional[float] = typer.Option(None, min=0, help="Sampling temperature of the model under test "
                                                "instead of each task's (in the run key)."),
    max_tokens: Optional[int] = typer.Option(None, "--max-tokens", min=1, help="Answer budget of the model under "
                                             "test instead of each task's (in the run key)."),
    system: Optional[str] = typer.Option(None, help="System message of the model under test instead of the task's "
                                         "(in the run key)."),
    thinking_budget: Optional[int] = typer.Option(None, "--thinking-budget", min=1, help="Thinking tokens a model "
                                                  "that thinks may spend on top of each answer's budget, instead "
                                                  "of the task's (in the run key)."),
    draws: int = typer.Option(1, min=1, help="Answers per item (sampled: with --temperature > 0): metrics get the "
                              "item-clustered interval and the share of variance from sampling."),
    sandbox: Optional[str] = SANDBOX_OPTION,
    price: list[str] = PRICE_OPTION,
    max_cost: Optional[float] = MAX_COST_OPTION,
    budget_tokens: Optional[int] = BUDGET_TOKENS_OPTION,
    no_pull: bool = NO_PULL_OPTION,
    dry_run: bool = typer.Option(False, "--dry-run", help="Call no model: print per task and role the items, calls, "
                                 "prompt and completion tokens, what is stored, the cost at --price and the "
                                 "smallest difference the items detect (docs/plan.md)."),
    as_json: bool = JSON_PLAN_OPTION,
    batch: bool = BATCH_OPTION,
) -> None:
    """Run TASK on a model; writes OUT/results.json, OUT/samples.jsonl and OUT/manifest.json.

    Several tasks (`run demo my_exam.toml`) are one pool of requests: one backend per model spec and
    one run store for all, each model's slots shared by every task; each task writes OUT/TASK/ as a
    run of it alone would (same run key: either resumes the other), and a summary table ends the
    run. Each task option goes to the tasks that declare it. Rerunning the same command resumes: completed calls come
    from the run store."""
    from .api import check_data_before_work, execute, prepare
    from .core.pool import INPUT_ERRORS, run_dir_name
    from .suite.data_check import no_pulls, pull_command, report_lines

    if no_pull:
        import os

        from .data.pull import NO_PULL_ENV

        os.environ[NO_PULL_ENV] = "1"  # read where a task pulls on first use (data/pull.py)
    spending = make_spending(price, max_cost, budget_tokens)
    try:
        prepared = prepare(task, model, judge=judge, user=user_model,
                           options=_task_options(split, shots, method, extract, mode, option), limit=limit,
                           sample=subset, seed=seed, data_dir=data_dir, out=out, store=resolve_store(store),
                           concurrency=concurrency, spending=spending, temperature=temperature, max_tokens=max_tokens,
                           system=system, thinking_budget=thinking_budget, draws=draws, truncate=truncate,
                           max_prompt_tokens=max_prompt_tokens, sandbox=sandbox, versions=versions(), batch=batch,
                           executor=executor, address=address, shards=shards)
    except (KeyError, ValueError, TypeError) as err:  # a task, option, model spec or executor that cannot be used
        fail(str(err.args[0] if isinstance(err, KeyError) else err))
    out, store_path = prepared.out, prepared.store_path
    if executor == "local" and not dry_run:  # Ray workers reach their own node's servers; a dry run calls none
        check_endpoints(prepared.backends.values())
    started = time.time()
    check = check_data_before_work(prepared)
    if not check.ready:
        typer.echo("\n".join(report_lines(check, pull=pull_command(check, data_dir=data_dir), skip_hint=False,
                                           or_else="")), err=True)
    if dry_run:
        from .suite.plan import plan_run

        with no_pulls():  # a dry run writes nothing: no first-use pull into the data root
            _show_plan(lambda: plan_run(prepared.names, prepared.refs, prepared.tasks, prepared.backends, store_path,
                                        prepared.options, spending.prices if spending else {}), as_json)
        if not check.ready:
            raise typer.Exit(2)
        return
    if not check.ready:
        root = prepared.options.data_dir
        pullable = f": run `{pull_command(check, data_dir=root)}`" if check.of("missing") else ""
        fail(f"the data of {len(check.blocked_rows())} task(s) is not in {root} (listed above){pullable}; "
             "nothing was run")
    out.mkdir(parents=True, exist_ok=True)
    (out / "partial.json").unlink(missing_ok=True)  # an earlier stop's record: this invocation writes its own
    tasks = prepared.names
    folders = {name: out / run_dir_name(name) for name in tasks} if len(tasks) > 1 else {tasks[0]: out}

    def stopped(how: str) -> None:
        path = write_partial(out, seen.seen, folders, how, store_path)
        typer.echo(f"what is stored: {path} (`finharness report {out}` shows it)", err=True)

    seen = interrupted_says(store_path, on_stop=stopped)
    if len(tasks) > 1:
        with seen, LiveProgress(f"{len(tasks)} tasks on {model}", enabled=not quiet) as live:
            evaluation = execute(prepared, started=started,
                                 progress_for=lambda name: seen.watch(live.row(f"{name} on {model}"), name))
        _print_pool(evaluation.pool, model, spending)
        return
    task_name = tasks[0]
    try:
        with seen, LiveProgress(f"{task_name} on {model}", enabled=not quiet) as progress:
            evaluation = execute(prepared, started=started, progress_for=lambda name: seen.watch(progress, task_name))
    except INPUT_ERRORS as err:
        fail(str(err))
    result = evaluation[task_name]
    _print_results(result.results)
    if draws > 1:
        warn_identical_draws(store_path, result.results["run_key"], draws)
    typer.echo(f"results: {out / 'results.json'}  samples: {out / 'samples.jsonl'}")
    stop_if_budget_reached(spending)
    if result.results["status"] != "complete":
        raise typer.Exit(1)


def warn_identical_draws(store_path: Path, run_key: str, draws: int) -> bool:
    """Say so when every item's draws gave the same prediction (the calls decoded greedily: the task's default
    temperature, no --temperature): the draws' interval then shows no sampling spread because there was none."""
    from .core.hashing import canonical_json
    from .core.store import RunStore

    with RunStore(store_path) as run_store:
        stored = run_store.get_samples(run_key)
    per_item: dict[str, set[str]] = {}
    counts: dict[str, int] = {}
    for sid, record in stored.items():
        base = sid.split("#draw", 1)[0]
        per_item.setdefault(base, set()).add(canonical_json(record.get("prediction")))
        counts[base] = counts.get(base, 0) + 1
    full = [base for base, n in counts.items() if n == draws]
    if not full or any(len(per_item[base]) > 1 for base in full):
        return False
    typer.secho(f"warning: identical draws: each of {len(full)} item(s) got the same answer in all {draws} draws "
                "(greedy decoding); give --temperature above 0 (e.g. 0.7) for draws that differ", fg="yellow",
                err=True)
    return True


def _show_plan(make: Any, as_json: bool) -> None:
    """A dry run's plan (suite/plan.py), printed as tables or JSON; bad input is an error: line."""
    from .core.pool import INPUT_ERRORS
    from .suite.plan import plan_json, print_plan

    try:
        plan = make()
    except INPUT_ERRORS as err:
        fail(str(err))
    if as_json:
        typer.echo(json.dumps(plan_json(plan), ensure_ascii=False, indent=2))
    else:
        print_plan(plan)


def resume_command() -> str:
    """The command line that goes on from where this one stopped: the same command (a rerun resumes)."""
    import shlex
    import sys

    from .cli_common import INVOKED_ARGS

    return f"finharness {shlex.join(INVOKED_ARGS or sys.argv[1:])}"


SIGTERM_EXIT = 143
"""Exit status of a run a SIGTERM stopped (128 + 15, what a scheduler expects), after it said what it kept."""


def _raise_interrupt() -> None:
    raise KeyboardInterrupt


class interrupted_says:  # noqa: N801 (a context manager read as a sentence)
    """On Ctrl-C or SIGTERM: say what is stored (samples done per task, the store) and the command that resumes, then
    exit 130 (Ctrl-C) or 143 (SIGTERM).

    A SIGTERM (what a scheduler or `kill` sends) is turned into the Ctrl-C path for the block: the run stops the same
    way, committing what it made. `watch(progress, name)` wraps a progress callback so the last counters of each task
    are known; `on_stop(signal_name)` runs before the message (the suite writes its partial scorecard there, a run
    OUT/partial.json)."""

    def __init__(self, store_path: Path, on_stop: Any = None):
        self.store_path = store_path
        self.seen: dict[str, Any] = {}
        self.on_stop = on_stop
        self.signal: str | None = None
        """'SIGTERM' once one arrived; None for a Ctrl-C (or nothing)."""
        self._previous: Any = None

    def watch(self, progress: Any, name: str) -> Any:
        def update(counters: Any) -> None:
            self.seen[name] = counters
            if progress is not None:
                progress(counters)

        return update

    def stop_reason(self) -> str:
        """'terminated' after a SIGTERM, else 'interrupted' (suite.json's status)."""
        return "terminated" if self.signal == "SIGTERM" else "interrupted"

    def _on_sigterm(self, signum: int, frame: Any) -> None:
        import asyncio
        import signal

        self.signal = "SIGTERM"
        handler = signal.getsignal(signal.SIGINT)
        if callable(handler) and handler is not signal.default_int_handler:
            handler(signal.SIGINT, frame)  # asyncio's own: cancels the running main task, which stops cleanly
            return
        try:  # Python's handler, or SIGINT ignored (a background job): stop all the same
            loop = asyncio.get_running_loop()
        except RuntimeError:
            raise KeyboardInterrupt from None
        # raised here it could land inside a task's step: that task would keep the KeyboardInterrupt and asyncio
        # log it with a traceback ("exception was never retrieved"); from a callback of its own the loop stops
        # between steps and cancels its tasks on the way out
        loop.call_soon_threadsafe(_raise_interrupt)

    def __enter__(self) -> "interrupted_says":
        import signal
        import threading

        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGTERM, self._on_sigterm)
        return self

    def __exit__(self, kind: Any, err: Any, tb: Any) -> bool:
        import signal

        if self._previous is not None:
            signal.signal(signal.SIGTERM, self._previous)
        if kind is None or not issubclass(kind, KeyboardInterrupt):
            return False
        how = "terminated (SIGTERM)" if self.signal == "SIGTERM" else "interrupted"
        if self.on_stop is not None:
            try:
                self.on_stop(self.stop_reason())
            except Exception as stop_err:  # what was stored stays stored: the message and the resume still come
                typer.secho(f"could not write what the stopped run holds: {type(stop_err).__name__}: {stop_err}",
                            fg="yellow", err=True)
        done = ", ".join(f"{name} {c.samples_done}/{c.samples_total}" for name, c in self.seen.items()) or "nothing"
        typer.secho(f"\n{how}: samples finished and stored: {done} (store {self.store_path}); "
                    "every call made is kept", fg="yellow", err=True)
        typer.echo(f"resume with: {resume_command()}", err=True)
        from .backends.batch import active_note

        batches = active_note(self.store_path, self.store_path.parent)  # batches keep running at the provider
        if batches:
            typer.echo(batches, err=True)
        raise typer.Exit(SIGTERM_EXIT if self.signal == "SIGTERM" else 130)


def write_partial(out: Path, seen: dict[str, Any], folders: dict[str, Path], how: str, store_path: Path) -> Path:
    """OUT/partial.json of a run stopped before its end (no results.json is written): how it stopped, how far each
    task got, the store and the command that resumes; `finharness report OUT` reads it."""
    from .data.io import atomic_write_text
    from .redact import redact

    tasks = {name: {"samples_done": c.samples_done, "samples_total": c.samples_total,
                    "folder": str(folders.get(name, out)), "finished": (folders.get(name, out) / "results.json").is_file()}
             for name, c in seen.items()}
    partial = {"status": how, "stopped": time.time(), "resume": resume_command(), "store": str(store_path.resolve()),
               "tasks": tasks}
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out / "partial.json", redact(json.dumps(partial, ensure_ascii=False, indent=2) + "\n"))
    return out / "partial.json"


def _print_pool(pool: Any, model: str, spending: Any = None) -> None:
    """The outcome of a pooled run (core/pool.py run_pool): one summary table, each task's notes and files,
    the errors; re-raises a task's bug; exit 1 when a task is incomplete or could not run."""
    from rich import box
    from rich.table import Table

    from .report.runs import run_flags

    table = Table(title=f"{len(pool.tasks)} tasks on {model}  (pooled, {pool.wall_s:.1f} s)", box=box.SIMPLE_HEAD)
    for col in ("task", "status", "headline", "value", "95% CI", "n", "calls", "cache hits", "wall s"):
        table.add_column(col, no_wrap=col not in ("task", "headline"))
    for outcome in pool.tasks:
        if outcome.result is None:
            table.add_row(outcome.name, "error", *["—"] * 7)
            continue
        res = outcome.result.results
        metric = res["metrics"].get(res["headline"]) if res["headline"] else None
        value = "—" if not metric or metric["value"] is None else f"{metric['value']:.4f}"
        ci = "—" if not metric or not metric["ci95"] else f"[{metric['ci95'][0]:.4f}, {metric['ci95'][1]:.4f}]"
        counts = res["counts"]
        n = "—" if not metric else f"{metric['n']} !" if metric.get("warning") else str(metric["n"])
        table.add_row(outcome.name, res["status"] + (", flagged" if run_flags(res) else ""),
                      str(res["headline"] or "—"), value, ci,
                      n, str(counts["calls"]), str(counts["cache_hits"]),
                      f"{res['timing']['wall_s']:.1f}")
    console = output_console()
    console.print(table)
    for outcome in pool.tasks:  # a headline whose n is too small for its interval, said out loud
        res = outcome.result.results if outcome.result is not None else {}
        warning = (res.get("metrics", {}).get(res.get("headline") or "") or {}).get("warning")
        if warning:
            console.print(f"! {outcome.name} {res['headline']}: {warning}", highlight=False, soft_wrap=True)
    for outcome in pool.tasks:
        if outcome.result is not None:
            for note in outcome.result.results.get("notes", []):
                console.print(f"note ({outcome.name}): {note}", highlight=False)
            for flag in run_flags(outcome.result.results):
                console.print(f"! flagged ({outcome.name}): {flag}", highlight=False, soft_wrap=True)
            typer.echo(f"{outcome.name}: {outcome.out_dir / 'results.json'}  "
                       f"samples: {outcome.out_dir / 'samples.jsonl'}")
    for outcome in pool.tasks:
        if outcome.error is not None:
            typer.echo(f"error: {outcome.name}: {outcome.error}", err=True)
    if pool.bugs:
        raise pool.bugs[0]  # a bug, not bad input: its traceback says more than a table row
    stop_if_budget_reached(spending)
    if not pool.complete:
        raise typer.Exit(1)


def _name_groups(names: list[str], listed: int = 6) -> str:
    """A few names as they are; more as counts per last dotted part (`.multiple` x24 ...)."""
    if len(names) <= listed:
        return ", ".join(names)
    counts: dict[str, int] = {}
    for name in names:
        last = name.rsplit(".", 1)[-1]
        counts[last] = counts.get(last, 0) + 1
    return f"{len(names)} metrics, " + ", ".join(f"*.{last} ({n})" for last, n in counts.items())


def _print_results(results: dict[str, Any]) -> None:
    from rich.table import Table

    from .core.metrics import SMALL_N_MARK, small_n_lines
    from .report.runs import run_flags

    flags = run_flags(results)
    status = results.get("status", "") + (", flagged" if flags else "")
    from rich.markup import escape

    # escaped: rich read the bracketed status as a style tag and printed nothing of it
    table = Table(title=escape(f"{results['task']}  {results.get('model', '')}  [{status}]"))
    for col in ("metric", "value", "95% CI", "n"):
        table.add_column(col)
    empty = []
    for name, m in results["metrics"].items():
        if m["value"] is None and not m["n"]:  # e.g. a question type the exam lacks
            empty.append(name)
            continue
        value = "—" if m["value"] is None else f"{m['value']:.4f}"
        ci = "—" if not m["ci95"] else f"[{m['ci95'][0]:.4f}, {m['ci95'][1]:.4f}]"
        table.add_row(name, value, ci, f"{m['n']} {SMALL_N_MARK}" if m.get("warning") else str(m["n"]))
    console = output_console()
    console.print(table)
    for line in small_n_lines(results["metrics"]):  # n too small for the interval's method, said out loud
        console.print(line, highlight=False, soft_wrap=True)
    if empty:
        console.print(f"no items (n 0, null in results.json): {_name_groups(empty)}", highlight=False, soft_wrap=True)
    c = results.get("counts", {})
    if c:
        console.print(f"samples {c.get('samples')}  scored {c.get('scored')}  failed {c.get('failed_samples')}  "
                      f"unparseable {c.get('unparseable')}  truncated {c.get('truncated_samples')}  "
                      f"calls {c.get('calls')}  cache hits {c.get('cache_hits')}  retries {c.get('retries')}  "
                      f"failures {c.get('failures')}", highlight=False)
        if c.get("thinking_replies") or c.get("reasoning_tokens"):
            console.print(f"thinking replies {c.get('thinking_replies')}  reasoning tokens {c.get('reasoning_tokens')} "
                          f"of {c.get('completion_tokens')} completion tokens  cut while thinking "
                          f"{c.get('thinking_truncations')}", highlight=False)
        # the distinct reasons calls failed for good, so a crash or a refusal is read here, not looked for
        for message in dict.fromkeys(c.get("failure_examples") or []):
            console.print(f"failed call: {message}", highlight=False, soft_wrap=True)
    draws = results.get("draws")
    if draws:
        for name, m in draws["metrics"].items():
            share = m["variance"].get("sampling_share")
            console.print(f"{name} over {draws['k']} draws per item: {m['value']:.4f} [{m['ci95'][0]:.4f}, "
                          f"{m['ci95'][1]:.4f}] items {m['n']}{' !' if m.get('warning') else ''} ({m['method']}); "
                          "share of its variance from sampling " + ("—" if share is None else f"{share:.2f}"),
                          highlight=False)
            if m.get("warning"):
                console.print(f"! {name} over draws: {m['warning']}", highlight=False)
        for key, label in (("majority", "majority vote"), ("pass_at_k", f"pass@{draws['k']}")):
            if draws.get(key):
                console.print(f"{label}: {draws[key]['value']:.4f} [{draws[key]['ci95'][0]:.4f}, "
                              f"{draws[key]['ci95'][1]:.4f}] n {draws[key]['n']}", highlight=False)
    for note in results.get("notes", []):
        console.print(f"note: {note}", highlight=False)
    for flag in flags:  # last, where the eye lands: the number above may mislead
        console.print(f"! flagged: {flag}", highlight=False, soft_wrap=True)


@app.command("suite")
def suite_cmd(
    suite_name: str = typer.Argument("quick", metavar="[SUITE]", help="quick | standard | full (they ship with "
                                     "finharness), or a suite file of your own (.toml; docs/suite.md)."),
    model: list[str] = typer.Option(["embedded"], "--model", "-m", help="Model spec under test (repeatable: "
                                    "every model runs every row)."),
    judge: Optional[str] = typer.Option(None, help="Model spec of the judge (the rows that judge)."),
    user_model: Optional[str] = typer.Option(None, "--user-model", help="Model spec of the simulated user (the rows that simulate one)."),
    out: Optional[Path] = typer.Option(None, help="Suite folder (default runs/suite-SUITE): one store, one folder "
                                       "per model and row, suite.json and the scorecard."),
    data_dir: Optional[Path] = typer.Option(None, help="Data root (default $FINHARNESS_DATA_DIR or the cache)."),
    concurrency: Optional[int] = typer.Option(None, help="Calls in flight per model."),
    price: list[str] = PRICE_OPTION,
    max_cost: Optional[float] = MAX_COST_OPTION,
    budget_tokens: Optional[int] = BUDGET_TOKENS_OPTION,
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress display."),
    no_pull: bool = NO_PULL_OPTION,
    pull: bool = typer.Option(False, "--pull", help="Before the first call, pull every dataset the rows read that "
                              "the data root lacks (one line per dataset); without it a suite with data missing stops "
                              "and names the one command that fetches it."),
    skip_missing: bool = typer.Option(False, "--skip-missing", help="Run without the rows whose data is not in the "
                                      "data root (not pulled yet, e.g. offline, or never to be had here: no public "
                                      "copy, files only a mirror holds); the scorecard says why each is missing."),
    sandbox: Optional[str] = SANDBOX_OPTION,
    dry_run: bool = typer.Option(False, "--dry-run", help="Call no model: print per row, model and role the items, "
                                 "calls, tokens, what is stored, the cost at the prices and the smallest difference "
                                 "each row detects (docs/plan.md)."),
    as_json: bool = JSON_PLAN_OPTION,
    batch: bool = BATCH_OPTION,
    contamination: bool = typer.Option(False, "--contamination", help="Also probe every row's items for membership "
                                       "evidence, as the suite file's `contamination = true` (docs/contamination.md)."),
    as_toml: bool = typer.Option(False, "--toml", help="Print the bundled suite as one suite file of your own (its "
                                 "rows from every benchmark's declaration), a copy to edit, and exit."),
) -> None:
    """Run a suite of tasks for one or more models and write one scorecard.

    Every row of the suite runs for every model, the rows of a model pooled on its slots, all in one run store
    (OUT/store.sqlite), each row in OUT/MODEL/ROW/ as `finharness run` would write it. Rerunning the command
    resumes; adding a --model later reuses everything stored. Where a row's official data is absent and the
    suite names a fallback (a stand-in exam), the fallback runs and is named a stand-in."""
    from .suite.evaluate import prepare_suite
    from .suite.run import run_suite
    from .suite.spec import SuiteError, bundled_suite_toml

    if as_toml:
        try:
            typer.echo(bundled_suite_toml(suite_name), nl=False)
        except SuiteError as err:
            fail(str(err))
        return
    if no_pull:
        import os

        from .data.pull import NO_PULL_ENV

        os.environ[NO_PULL_ENV] = "1"
    try:  # the suite read, its rows resolved, the spending and run options: what the Python API does too
        prepared = prepare_suite(suite_name, data_dir=data_dir, sandbox=sandbox,
                                 contamination=True if contamination else None, prices=price, max_cost=max_cost,
                                 budget_tokens=budget_tokens, concurrency=concurrency, batch=True if batch else None)
    except ValueError as err:  # SuiteError included
        fail(str(err))
    spec, root, options, spending = prepared.spec, prepared.root, prepared.options, prepared.spending
    models = list(dict.fromkeys(model))
    out = out or Path("runs") / f"suite-{spec.name}"
    if no_pull and pull:
        fail("--pull and --no-pull say the opposite; give one")
    rows, leave_out, missing = _data_before_work(prepared, judged=judge is not None, pull=pull and not dry_run,
                                                 skip_missing=skip_missing, data_dir=data_dir)
    for row in rows:
        if row.standin:
            typer.echo(f"note: {row.spec.id}: the official data is absent from {root}; running {row.label}", err=True)
    if dry_run:
        from .suite.data_check import no_pulls
        from .suite.plan import plan_suite

        with no_pulls():  # a dry run writes nothing: no first-use pull into the data root
            _show_plan(lambda: plan_suite(spec, [r for r in rows if r.spec.id not in leave_out], models=models,
                                          judge=judge, user=user_model, out=out, options=options,
                                          prices=spending.prices if spending else {}), as_json)
        if missing:
            typer.secho(f"error: the data of {len(leave_out)} row(s) is missing (listed above): the plan leaves them "
                        "out", fg="red", err=True)
            raise typer.Exit(2)
        return
    if missing:
        fail(f"the data of {len(leave_out)} row(s) is not in {root} (listed above); nothing was run")
    from .core.pool import INPUT_ERRORS

    def stopped(how: str) -> None:  # Ctrl-C or SIGTERM: run_suite wrote suite.json; the partial scorecard beside it
        if (out / "suite.json").is_file():
            _print_suite(out, json.loads((out / "suite.json").read_text(encoding="utf-8")))

    seen = interrupted_says(out / "store.sqlite", on_stop=stopped)
    runnable = [r for r in rows if r.spec.id not in leave_out]
    skipped_note = f" ({len(rows) - len(runnable)} skipped: data not here)" if len(runnable) < len(rows) else ""
    try:
        with seen:  # a stop while the ETA is planned says so too (nothing stored yet) and how to start again
            suite_view = None if quiet else _suite_progress(spec, runnable, models, judge, user_model, out, options,
                                                             spending)
            with LiveProgress(f"suite {spec.name}: {len(runnable)} rows{skipped_note} x {len(models)} model(s)",
                              enabled=not quiet, suite=suite_view) as live:
                outcome = run_suite(spec, rows, models=models, judge=judge, user=user_model, out=out, options=options,
                                    progress_for=lambda m, row: seen.watch(live.row(f"{row} on {m}"),
                                                                           f"{row} on {m}"),
                                    judge_progress=lambda label: seen.watch(live.row(label), label),
                                    resume=resume_command(), stop_reason=seen.stop_reason,
                                    skipped={m: leave_out for m in models})
    except INPUT_ERRORS as err:
        fail(str(err))
    _print_suite(out, outcome.manifest)
    if outcome.bugs:  # a row's bug: the partial scorecard is written and shown; its traceback says the rest
        typer.echo(f"resume with: {resume_command()} (after the fix: finished rows are not run again)", err=True)
        raise outcome.bugs[0]
    if spending is not None and spending.reached is not None:
        typer.echo(f"resume with: {resume_command()} (with a higher budget)", err=True)
    stop_if_budget_reached(spending)
    if not outcome.complete:
        raise typer.Exit(1)


def _suite_progress(spec: Any, rows: list[Any], models: list[str], judge: str | None, user: str | None, out: Path,
                    options: Any, spending: Any) -> Any:
    """The suite-wide progress (suite/progress.py): every row x model to run, each with the work the dry run's plan
    gives it in tokens, so the suite's ETA is the work left over the rate measured. The plan calls nothing and
    writes nothing; where it cannot be made, the ETA counts items instead."""
    from .benchmarks.declaration import hooks_of
    from .suite.data_check import no_pulls
    from .suite.plan import plan_suite
    from .suite.progress import SuiteProgress, planned_work
    from .util import phase

    labels: dict[str, float | None] = {f"{r.spec.id} on {m}": None for m in models for r in rows}
    steps = {r.ref.name: hooks_of(r.ref.name) for r in rows}  # the steps after the rows (pairwise judging)
    pairs = sum(h.steps_after_rows(models) for h in steps.values() if h.judged_by_suite) if judge is not None else 0
    judging: float | None = None
    started = time.monotonic()
    typer.echo("planning the suite's work for its ETA (the dry run's plan; nothing is stored) ...", err=True)
    try:
        with phase("planning the suite (for its ETA)"), no_pulls():
            plan = plan_suite(spec, rows, models=models, judge=judge, user=user, out=out, options=options,
                              prices=spending.prices if spending else {})
        typer.echo(f"planned in {time.monotonic() - started:.0f} s", err=True)
        work, judged = planned_work(plan)
        labels = dict(work)
        judging = None if judged is None or not pairs else judged / pairs
    except Exception as err:  # the ETA is a help, never a reason not to run: it counts items instead
        typer.echo(f"note: no plan for the suite's ETA ({type(err).__name__}: {err}); it counts items instead",
                   err=True)
    return SuiteProgress(labels, extra=(pairs, judging))


def _data_before_work(prepared: Any, *, judged: bool, pull: bool, skip_missing: bool,
                      data_dir: Path | None) -> tuple[list[Any], dict[str, str], bool]:
    """Every row's data checked before the first call (suite.evaluate.check_suite_data_before_work, as the Python
    API checks it), said on the terminal: with --pull what is missing is pulled first; else missing data gives one
    list (what is missing, the one command that fetches it, what cannot be had here). --skip-missing goes on
    without every row whose data is not here. Returns the rows (their fallbacks decided again after a pull), the
    rows to leave out with why, and whether data is missing (the suite stops; a dry run plans the rest and then
    exits 2)."""
    from .suite.data_check import report_lines
    from .suite.evaluate import check_suite_data_before_work

    ready = check_suite_data_before_work(prepared, judged=judged, pull=pull, data_dir=data_dir,
                                         progress=lambda line: typer.echo(f"pulled {line}", err=True))
    for line in ready.pull_failures:
        typer.secho(f"error: {line}", fg="red", err=True)
    if ready.pull_failures:
        fail(f"{len(ready.pull_failures)} dataset(s) could not be pulled (above); nothing was run")
    lines = report_lines(ready.check, pull=ready.pull_command, skip_hint=not skip_missing)
    blocked = ready.check.blocked_rows()
    missing = bool(blocked) and not skip_missing
    if lines:
        typer.echo("\n".join(lines), err=True)
    leave_out = blocked if missing else {row: f"skipped (--skip-missing): {why}" for row, why in blocked.items()}
    if leave_out and not missing:
        typer.echo(f"note: without {len(leave_out)} row(s) whose data is not here: {', '.join(leave_out)}",
                   err=True)
    return ready.rows, leave_out, missing


def _print_suite(out: Path, manifest: dict[str, Any]) -> None:
    """The scorecard on the terminal, and where its files are (a stopped suite's: marked PARTIAL)."""
    from .suite.scorecard import build_scorecard
    from .suite.scorecard_views import print_scorecard, write_scorecard

    built = build_scorecard(out)
    written = write_scorecard(built, out)
    print_scorecard(built)
    for model, errors in manifest.get("errors", {}).items():
        for row, message in errors.items():
            typer.echo(f"error: {row} on {model}: {message}", err=True)
    typer.echo(f"suite: {out / 'suite.json'}  scorecard: " + "  ".join(str(p) for p in written))


@app.command()
def score(
    task: str = typer.Argument(..., help="Task name (see `finharness list`) or path/to/file.py:Class."),
    predictions: Path = typer.Option(..., help='JSONL of {"id": ..., "prediction": ...}.'),
    data_dir: Optional[Path] = typer.Option(None, help="Data root."),
    out: Optional[Path] = typer.Option(None, help="Also write results.json and samples.jsonl here."),
    split: Optional[str] = typer.Option(None),
    shots: Optional[int] = typer.Option(None),
    method: Optional[str] = typer.Option(None),
    extract: Optional[str] = typer.Option(None, help="Extraction mode: official | robust."),
    mode: Optional[str] = typer.Option(None),
    grader: Optional[str] = typer.Option(None, help="Grading mode (task-specific: `finharness list TASK` "
                                         "shows its values)."),
    judge: Optional[str] = typer.Option(None, help="Model spec of the judge, for a task that grades given answers "
                                        "with one (its calls are stored: a rerun makes none)."),
    option: list[str] = typer.Option([], "--option", "-o"),
    as_json: bool = typer.Option(False, "--json", help="Print the results JSON (with a `rows` list: each "
                                 "prediction's id and grade)."),
) -> None:
    """Score predictions produced elsewhere, with the task's own extraction and scoring (and its judge, for a task
    that grades with one)."""
    from .core.hashing import content_key
    from .core.model import RunCounters
    from .core.results import RunConfig, build_results, score_run, write_run
    from .core.runner import check_unique_ids
    from .data.errors import DataError
    from .data.io import iter_jsonl

    ref = _resolve_task(task)
    task_opts = _task_options(split, shots, method, extract, mode, option)
    if grader is not None:
        task_opts["grader"] = grader
    if judge is not None:
        _score_with_judge(ref, task_opts, predictions, judge, data_dir, out, as_json)
        return
    task_obj = _make_task(ref, task_opts)
    task = ref.label
    started = time.perf_counter()
    try:
        samples = task_obj.load(resolve_data_dir(data_dir))
        check_unique_ids(samples, task)
        known = {s.id for s in samples}
        raw: dict[str, dict[str, Any]] = {}
        for line, obj in iter_jsonl(predictions):
            own = task_obj.read_prediction(obj)
            if own is not None:
                obj = {"id": own[0], "prediction": own[1]}
            if "id" not in obj or "prediction" not in obj:
                raise DataError('each line needs "id" and "prediction"', path=predictions, line=line)
            sid = str(obj["id"])
            if sid not in known:
                raise DataError(f"id {sid!r} is not a sample of task {task}", path=predictions, line=line)
            if sid in raw:
                raise DataError(f"duplicate id {sid!r}", path=predictions, line=line)
            if not isinstance(obj["prediction"], (str, dict)):
                raise DataError(f'"prediction" is {json.dumps(obj["prediction"])[:40]} ({type(obj["prediction"]).__name__})',
                                path=predictions, line=line,
                                hint="give the model's reply as a string (or the object a run writes in samples.jsonl "
                                "for a log-likelihood task); leave out a line with no prediction")
            raw[sid] = {"prediction": obj["prediction"], "trace": []}
    except DataError as err:
        fail(str(err))
    try:
        records, agg = score_run(task_obj, samples, raw)
    finally:
        task_obj.close()
    config = RunConfig(task=task, task_config=dict(task_obj.run_config()), models={"model": {"predictions": str(predictions)}})
    counters = RunCounters(samples_total=len(records), samples_done=len(records))
    results = build_results(task_obj, config, agg, records, counters, model=f"predictions:{predictions}",
                            wall_s=time.perf_counter() - started, versions=versions(),
                            run_key=content_key(config.to_json()))
    missing = len(samples) - len(raw)
    if missing:
        results["notes"].append(f"{missing} of {len(samples)} samples have no prediction and are not scored")
        results["counts"]["missing_predictions"] = missing
    results["rows"] = [task_obj.prediction_row(r) for r in records]
    if out is not None:
        write_run(out, records, results)
    if as_json:
        typer.echo(json.dumps(results, ensure_ascii=False, indent=2))
    else:
        _print_results(results)


def _score_with_judge(ref: Any, task_opts: dict[str, Any], predictions: Path, judge: str, data_dir: Path | None,
                      out: Path | None, as_json: bool) -> None:
    """`score --judge`: the task takes the given answers through its predictions option and runs with the judge
    alone; every judge call is stored (OUT/store.sqlite, default a folder of the cache named by the inputs)."""
    import asyncio

    from .backends import from_spec
    from .core.backend import SpecError
    from .core.hashing import content_key
    from .core.pool import INPUT_ERRORS
    from .core.runner import RunOptions, run_task
    from .core.store import RunStore
    from .data.registry import cache_dir

    name = ref.cls.predictions_option
    if name is None:
        fail(f"{ref.label} scores predictions without a judge; leave out --judge")
    if not predictions.is_file():
        fail(f"{predictions}: no such file")
    task_obj = _make_task(ref, {**task_opts, name: str(predictions)})
    if "judge" not in task_obj.roles:
        fail(f"{ref.label} with these options grades without a judge (`finharness list {ref.label}` shows an option that takes one)")
    try:
        backends = {"judge": from_spec(judge)}
    except SpecError as err:
        fail(str(err))
    check_endpoints(backends.values())
    key = content_key(ref.label, dict(task_opts), str(predictions.resolve()), judge)
    out = out or cache_dir() / "score" / key[:16]
    out.mkdir(parents=True, exist_ok=True)
    try:
        with RunStore(out / "store.sqlite") as run_store:
            result = asyncio.run(run_task(task_obj, backends, run_store,
                                          RunOptions(data_dir=resolve_data_dir(data_dir), versions=versions()),
                                          out_dir=out))
    except INPUT_ERRORS as err:
        fail(str(err))
    results = result.results
    results["rows"] = [task_obj.prediction_row(r) for r in result.records]
    if as_json:
        typer.echo(json.dumps(results, ensure_ascii=False, indent=2))
    else:
        _print_results(results)
        typer.echo(f"results: {out / 'results.json'}  (judge calls stored in {out / 'store.sqlite'})")


@app.command()
def compare(
    run_a: Path = typer.Argument(..., help="Run directory A (holding samples.jsonl)."),
    run_b: Path = typer.Argument(..., help="Run directory B, scored on the same items."),
    value: Optional[str] = typer.Option(None, help="A per-sample score value (a key of score.values); "
                                                   "default: the headline score."),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Paired comparison of two runs on the items both scored: B − A, its 95% CI and p-value (exact McNemar
    for 0/1 scores, else an exact sign-flip test below 30 items and the paired t-test above); 'tied' unless
    the data order the two."""
    from dataclasses import asdict

    from .data.errors import DataError
    from .data.io import iter_jsonl
    from .stats import paired_test

    def per_sample(run: Path) -> dict[str, float]:
        out = {}
        try:
            for _, line in iter_jsonl(run / "samples.jsonl"):
                score = line.get("score")
                if not score:
                    continue
                v = score["value"] if value is None else score.get("values", {}).get(value)
                if v is not None:
                    out[line["id"]] = float(v)
        except DataError as err:
            fail(str(err))
        return out

    def flags_of(run: Path) -> list[str]:
        from .report.runs import read_results, run_flags

        path = run / "results.json"
        return run_flags(read_results(path)) if path.is_file() else []

    a, b = per_sample(run_a), per_sample(run_b)
    flags = {"a": flags_of(run_a), "b": flags_of(run_b)}
    result = paired_test(a, b)
    if result.n < 2:
        fail(f"{run_a} and {run_b} share {'no' if result.n == 0 else 'only 1'} scored item"
             + (f" with value {value!r}" if value else "") + ": a paired comparison needs at least 2")
    report = {"a": str(run_a), "b": str(run_b), "value": value or "headline", **asdict(result),
              "verdict": result.verdict, "only_in_a": len(set(a) - set(b)), "only_in_b": len(set(b) - set(a)),
              "flags_a": flags["a"], "flags_b": flags["b"]}
    if as_json:
        typer.echo(json.dumps(report, indent=2))
        return
    typer.echo(f"n={result.n}  A={result.mean_a:.4f}  B={result.mean_b:.4f}  B−A={result.diff:+.4f} "
               f"[{result.ci95[0]:+.4f}, {result.ci95[1]:+.4f}]  p={result.p_value:.4g} ({result.test})  "
               f"{result.verdict}")
    if result.warning:
        typer.echo(f"! {result.warning}")
    for side, run_dir in (("a", run_a), ("b", run_b)):
        for flag in flags[side]:
            typer.echo(f"! {side.upper()} ({run_dir}) is flagged: {flag}")


def _options_json(infos: Sequence[Any]) -> list[dict[str, Any]]:
    """Declared options (core.options.OptionInfo) as `finharness list --json` gives them."""
    return [{"name": o.name, "type": o.type, "default": o.default,
             "choices": list(o.choices) if o.choices is not None else None, "help": o.help} for o in infos]


def _options_table(title: str, infos: Sequence[Any]) -> Any:
    """Declared options (core.options.OptionInfo) as the rich table `finharness list` prints."""
    from rich.table import Table

    from .core.options import show_default

    table = Table(title=title, title_justify="left")
    for col in ("option", "type", "default", "allowed", "what it does"):
        table.add_column(col, overflow="fold")
    for o in infos:
        table.add_row(o.name, o.type, show_default(o.default),
                      "any" if o.choices is None else ", ".join(map(str, o.choices)), o.help)
    return table


def _describe_task(spec: str, as_json: bool, markdown: bool) -> None:
    """`finharness list TASK`: the task's options (from the declaration its runs parse), roles and headline."""
    from .core.options import options_markdown

    ref = _resolve_task(spec)
    cls = ref.cls
    infos = cls.describe_options()
    from .core.task import metric_direction

    entry = {"name": ref.label, "source": str(ref.source), "description": getattr(cls, "description", ""),
             "roles": list(cls.roles), "headline": cls.headline,
             "metrics": [{"name": name, "direction": metric_direction(name.split(" ")[0], cls.metric_directions),
                          "meaning": meaning} for name, meaning in cls.metric_docs.items()],
             "options": _options_json(infos)}
    if as_json:
        typer.echo(json.dumps(entry, ensure_ascii=False, indent=2, default=str))
        return
    if markdown:
        typer.echo(options_markdown(infos))
        return
    from rich.table import Table

    console = output_console(highlight=False)
    console.print(f"{entry['name']}  ({entry['source']})\n{entry['description']}", markup=False)
    console.print(f"roles: {', '.join(entry['roles'])}  (--judge SPEC / --user-model SPEC for the others)  "
                  f"headline: {cls.headline or 'the first metric'}", markup=False)
    console.print(_options_table(f"options of {entry['name']}  (-o NAME=VALUE)", infos))
    if entry["metrics"]:
        metrics = Table(title=f"metrics of {entry['name']}")
        for col in ("metric", "better", "what it is"):
            metrics.add_column(col, overflow="fold")
        arrows = {"higher": "higher", "lower": "lower", "info": "— (describes the run)"}
        for m in entry["metrics"]:
            metrics.add_row(m["name"], arrows[m["direction"]], m["meaning"])
        console.print(metrics)


def _describe_backends(as_json: bool) -> None:
    """`finharness list --backends`: every backend scheme with the query options its declaration takes."""
    from .backends import available_backends, spec_option_declarations
    from .core.options import describe_options

    listing: dict[str, dict[str, Any]] = {}
    declared: dict[str, list[Any]] = {}
    for plugin, unused in available_backends():
        entry: dict[str, Any] = {"source": str(plugin.source), "target": plugin.target}
        name = plugin.name if plugin.name not in listing else f"{plugin.name} ({plugin.source})"
        try:
            declared[name] = [o for options in spec_option_declarations(plugin) for o in describe_options(options)]
            entry["options"] = _options_json(declared[name])
        except Exception as err:  # a broken plug-in is listed with why, not fatal
            entry["error"] = f"cannot be loaded: {type(err).__name__}: {err}"
        if unused:
            entry["unused"] = unused
        listing[name] = entry
    if as_json:
        typer.echo(json.dumps({"backends": listing}, ensure_ascii=False, indent=2, default=str))
        return
    console = output_console(highlight=False)
    for name, entry in listing.items():
        why = entry.get("error") or entry.get("unused")
        console.print(f"{name}  ({entry['source']}: {entry['target']})" + (f"  ({why})" if why else ""), markup=False)
        if declared.get(name):
            console.print(_options_table(f"options of {name}:  SPEC?NAME=VALUE&...", declared[name]))


@app.command("list")
def list_cmd(task: Optional[str] = typer.Argument(None, metavar="[TASK]", help="A task: list its options."),
             as_json: bool = typer.Option(False, "--json", help="Machine-readable output."),
             markdown: bool = typer.Option(False, "--markdown", help="TASK's options as a markdown table."),
             backends_only: bool = typer.Option(False, "--backends",
                                                help="Every backend scheme with its model-spec options.")) -> None:
    """Benchmarks and tasks, backends, datasets; each task and backend with where it comes from (built-in, or
    an entry point of an installed distribution). A task file (FILE.py:Class) is not listed: run it by path.
    With TASK: that task's options (type, default, allowed values, what each does), roles and headline. With
    --backends: each backend's model-spec options (`embedded?n_ctx=8192`) from its declaration."""
    if backends_only:
        _describe_backends(as_json)
        return
    if task is not None:
        _describe_task(task, as_json, markdown)
        return
    from .backends import available_backends
    from .benchmarks.registry import available_tasks

    tasks = []
    for plugin, unused in available_tasks():
        entry: dict[str, Any] = {"name": plugin.name, "source": str(plugin.source), "target": plugin.target}
        try:
            cls = plugin.load()
            entry.update(description=getattr(cls, "description", ""), roles=list(getattr(cls, "roles", ("model",))))
        except Exception as err:  # a broken plugin is listed, not fatal: the rest of the listing still helps
            entry.update(description="", roles=[], error=f"cannot be loaded: {type(err).__name__}: {err}")
        if unused:
            entry["unused"] = unused
        tasks.append(entry)
    backends: dict[str, dict[str, Any]] = {}
    for plugin, unused in available_backends():
        key = plugin.name if plugin.name not in backends else f"{plugin.name} ({plugin.source})"
        backends[key] = {"source": str(plugin.source), "target": plugin.target, **({"unused": unused} if unused else {})}
    datasets: list[dict[str, Any]] = []
    try:
        from .data.registry import load_registry

        datasets = [{"name": d.name, "licence": d.licence, "available_here": d.available_here}
                    for d in load_registry()]
    except ImportError:
        pass
    listing = {"tasks": tasks, "backends": backends, "datasets": datasets}
    if as_json:
        typer.echo(json.dumps(listing, ensure_ascii=False, indent=2))
        return
    width = max([len(t["source"]) for t in tasks] + [len(b["source"]) for b in backends.values()])
    typer.echo("tasks:")
    for t in tasks:
        why = t.get("error") or t.get("unused")
        typer.echo(f"  {t['name']:<28} {t['source']:<{width}}  {t['description']}" + (f"  ({why})" if why else ""))
    typer.echo("backends:")
    for name, b in backends.items():
        typer.echo(f"  {name:<28} {b['source']:<{width}}  {b['target']}" + (f"  ({b['unused']})" if "unused" in b else ""))
    if datasets:
        typer.echo("datasets: " + ", ".join(d["name"] for d in datasets))
    typer.echo("a task of your own: finharness run path/to/task.py:Class (see docs/write-a-task.md)")


@app.command()
def report(
    run_dirs: Optional[list[Path]] = typer.Argument(None, help="Run directories holding results.json."),
    html: Optional[Path] = typer.Option(None, "--html", help="Write a self-contained HTML report to FILE."),
    matches: list[Path] = typer.Option([], "--matches", help="Pairwise matches JSONL, as a judging command writes them (repeatable)."),
    ratings: list[Path] = typer.Option([], "--ratings", help="`finharness rate --json` output (repeatable)."),
    transcripts: int = typer.Option(2000, "--transcripts", help="Samples per run in the transcript browser (0 = all)."),
    as_json: bool = typer.Option(False, "--json", help="Print the models × tasks view (and every metric) as JSON."),
) -> None:
    """Runs as a models × tasks table (a suite folder: its scorecard), or with --html one self-contained HTML
    report."""
    from .data.errors import DataError
    from .suite.scorecard import build_scorecard, is_suite_dir, scorecard_from_runs
    from .suite.scorecard_views import print_scorecard, render_html, render_json

    suites = [d for d in run_dirs or [] if is_suite_dir(d)]
    if suites:
        if len(run_dirs or []) > 1:
            fail(f"{suites[0]} is a suite folder: report it alone (its scorecard), or give run folders")
        try:
            card = build_scorecard(suites[0])
        except ValueError as err:  # DataError / MatchFileError name the file and line
            fail(str(err))
        if html is not None:
            from .data.io import atomic_write_text

            atomic_write_text(html, render_html(card))
            typer.echo(f"scorecard: {html}")
        elif as_json:
            typer.echo(render_json(card), nl=False)
        else:
            print_scorecard(card)
        return
    if html is not None:
        from .report import write_html_report

        try:
            path = write_html_report(run_dirs or [], html, matches=matches, ratings=ratings,
                                     transcripts_per_run=transcripts or None)
        except ValueError as err:  # DataError / MatchFileError name the file and line
            fail(str(err))
        typer.echo(f"report: {path}")
        return
    if not run_dirs:
        fail("give RUN_DIR... (or --html FILE with --matches/--ratings)")
    from .report.runs import read_results
    from .report.stopped import stopped_json, stopped_lines, stopped_run

    stopped = []
    for d in run_dirs:  # a run stopped before results.json: what its store holds, instead of an error
        if not (d / "results.json").exists():
            found = stopped_run(d)
            if found is None:
                fail(f"{d / 'results.json'}: no results.json and no run store here (is this a run folder?)")
            stopped.append(found)
    run_dirs = [d for d in run_dirs if (d / "results.json").exists()]
    if not run_dirs:
        if as_json:
            typer.echo(json.dumps({"stopped": [stopped_json(r) for r in stopped]}, ensure_ascii=False, indent=2))
        else:
            for found in stopped:
                typer.echo("\n".join(stopped_lines(found)))
        return
    rows = []
    for d in run_dirs:
        path = d / "results.json"
        res = read_results(path)  # a hand-edited or wrong-typed file: DataError, an error: line
        for name, m in res["metrics"].items():
            rows.append({"run": str(d), "task": res["task"], "model": res.get("model"), "metric": name, **m,
                         "status": res.get("status")})
    try:
        view = scorecard_from_runs(run_dirs)
    except DataError as err:
        fail(str(err))
    if as_json:
        typer.echo(json.dumps({"view": view.to_json(), "metrics": rows,
                               **({"stopped": [stopped_json(r) for r in stopped]} if stopped else {})},
                              ensure_ascii=False, indent=2))
        return
    print_scorecard(view)
    for found in stopped:
        typer.echo("\n".join(stopped_lines(found)))


@app.command()
def demo(model: str = typer.Option("embedded", "--model", "-m"),
         out: Path = typer.Option(Path("runs/demo"), help="Run directory.")) -> None:
    """Run the built-in demo exam on the embedded model and say where the results are."""
    run(task=["demo"], model=model, judge=None, user_model=None, limit=None, subset=None, data_dir=None, out=out, store=None,
        concurrency=None, seed=0, split=None, shots=None, method=None, extract=None, mode=None, truncate="error",
        max_prompt_tokens=None, option=[], quiet=False, executor="local", address=None, shards=None,
        temperature=None, max_tokens=None, system=None, thinking_budget=None, draws=1, sandbox=None, price=[], max_cost=None,
        budget_tokens=None, no_pull=False, dry_run=False, as_json=False)


def main() -> None:
    from .redact import redacting_streams

    with redacting_streams():  # a traceback printed after the command too
        app()
