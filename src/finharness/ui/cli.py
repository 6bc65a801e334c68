"""`finharness ui`: serve the rater app, manage raters and work, export verdicts, measure agreement.

    finharness ui --store S.sqlite [--host 127.0.0.1 --port 8765]     serve the app
    finharness ui add-rater NAME --store S.sqlite                     issue a token (prints it once)
    finharness ui raters --store S.sqlite                             raters and their progress
    finharness ui load-pairs RUN_A RUN_B --store S.sqlite [--raters all|N1,N2] [--per-rater N]
    finharness ui load-rubric RUN --store S.sqlite [--raters ...] [--per-rater N]
    finharness ui export --store S.sqlite --matches H.jsonl [--rubric R.csv]
    finharness ui agreement --human H.jsonl --judge J.jsonl [--method elo|bt] [--all-items] [--json]

`--store` may be given before the sub-command too, or through $FINHARNESS_STORE. Heavy imports
(FastAPI, uvicorn, scipy) happen inside the commands.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Optional

import typer

from ..cli_common import fail, resolve_store
from ..util import format_number

if TYPE_CHECKING:
    from .storage import RaterStore

ui_app = typer.Typer(no_args_is_help=False, invoke_without_command=True, rich_markup_mode=None,
                     help="The web app where human experts judge answers (blind pairs, rubric 1–5).")

STORE_HELP = "Run store (SQLite) holding raters, work and verdicts (default $FINHARNESS_STORE)."


def _store_path(ctx: typer.Context, store: Optional[Path]) -> Path:
    path = resolve_store(store or (ctx.obj or {}).get("store"))
    if path is None:
        fail("give --store PATH (the run store, e.g. runs/store.sqlite) or set FINHARNESS_STORE")
    return path


def _open(ctx: typer.Context, store: Optional[Path]) -> "RaterStore":
    from .storage import RaterStore

    try:
        return RaterStore(_store_path(ctx, store))
    except (RuntimeError, OSError) as err:
        fail(str(err))


@ui_app.callback()
def serve(ctx: typer.Context,
          store: Optional[Path] = typer.Option(None, "--store", help=STORE_HELP),
          host: str = typer.Option("127.0.0.1", help="Interface to listen on (127.0.0.1: this machine only)."),
          port: int = typer.Option(8765, help="Port to listen on."),
          secure_cookie: bool = typer.Option(False, help="Mark the session cookie Secure (when served over HTTPS)."),
          ) -> None:
    """Serve the rater app (without a sub-command), or run one of the sub-commands below."""
    ctx.obj = {"store": store}
    if ctx.invoked_subcommand is not None:
        return
    import uvicorn

    from .app import create_app

    rater_store = _open(ctx, store)
    if not rater_store.raters():
        typer.echo("note: no raters yet; add one with `finharness ui add-rater NAME --store ...`", err=True)
    typer.echo(f"serving {rater_store.path} on http://{host}:{port}/  (Ctrl-C stops)", err=True)
    uvicorn.run(create_app(rater_store, secure_cookie=secure_cookie), host=host, port=port, log_level="warning")


@ui_app.command("add-rater")
def add_rater(ctx: typer.Context, name: str = typer.Argument(..., help="The rater's name (no spaces)."),
              store: Optional[Path] = typer.Option(None, "--store", help=STORE_HELP)) -> None:
    """Issue a sign-in token for NAME (a new token for an existing rater revokes their old one)."""
    rater_store = _open(ctx, store)
    try:
        rater, token, created = rater_store.add_rater(name)
    except ValueError as err:
        fail(str(err))
    finally:
        rater_store.close()
    typer.echo(f"{'added rater' if created else 'new token for'} {rater.name}"
               f"{'' if created else ' (the previous token no longer works)'}; token (shown once):", err=True)
    typer.echo(token)


@ui_app.command("raters")
def raters(ctx: typer.Context, store: Optional[Path] = typer.Option(None, "--store", help=STORE_HELP),
           as_json: bool = typer.Option(False, "--json")) -> None:
    """Raters and how far each has got."""
    rater_store = _open(ctx, store)
    progress = rater_store.progress()
    rater_store.close()
    if as_json:
        typer.echo(json.dumps(progress, indent=2, ensure_ascii=False))
        return
    for name, p in progress.items():
        typer.echo(f"{name:<24} {p['done']:>5} / {p['items']} done")


def _print_load(report) -> None:
    typer.echo(f"added {report.added} work item(s); {report.already_queued} already queued")
    for name, n in report.per_rater.items():
        typer.echo(f"  {name}: {n} offered")
    for note in report.notes:
        typer.echo(f"note: {note}")


@ui_app.command("load-pairs")
def load_pairs(ctx: typer.Context,
               run_a: Path = typer.Argument(..., help="Run directory (or its samples.jsonl) of model A."),
               run_b: Path = typer.Argument(..., help="Run directory (or its samples.jsonl) of model B."),
               store: Optional[Path] = typer.Option(None, "--store", help=STORE_HELP),
               raters: str = typer.Option("all", help="'all' or a comma list of rater names."),
               per_rater: Optional[int] = typer.Option(None, min=1, help="At most N items per rater (a seeded "
                                                                         "random sample; default all)."),
               name_a: Optional[str] = typer.Option(None, help="Model A's name (default: results.json 'model')."),
               name_b: Optional[str] = typer.Option(None, help="Model B's name."),
               seed: int = typer.Option(0, help="Seed of the item sample and of the order shown.")) -> None:
    """Queue blind pairwise comparisons of the items both runs answered."""
    from ..data.errors import DataError
    from .queue import load_pairs as load

    rater_store = _open(ctx, store)
    try:
        _print_load(load(rater_store, run_a, run_b, raters=raters, per_rater=per_rater, name_a=name_a,
                         name_b=name_b, seed=seed))
    except (DataError, ValueError) as err:
        fail(str(err))
    finally:
        rater_store.close()


@ui_app.command("load-rubric")
def load_rubric(ctx: typer.Context,
                run: Path = typer.Argument(..., help="Run directory (or its samples.jsonl)."),
                store: Optional[Path] = typer.Option(None, "--store", help=STORE_HELP),
                raters: str = typer.Option("all", help="'all' or a comma list of rater names."),
                per_rater: Optional[int] = typer.Option(None, min=1, help="At most N items per rater."),
                name: Optional[str] = typer.Option(None, help="The model's name (default: results.json 'model')."),
                seed: int = typer.Option(0, help="Seed of the item sample.")) -> None:
    """Queue one run's answers for rubric scoring (FinTradeBench's four dimensions, 1–5)."""
    from ..data.errors import DataError
    from .queue import load_rubric as load

    rater_store = _open(ctx, store)
    try:
        _print_load(load(rater_store, run, raters=raters, per_rater=per_rater, name=name, seed=seed))
    except (DataError, ValueError) as err:
        fail(str(err))
    finally:
        rater_store.close()


@ui_app.command("export")
def export(ctx: typer.Context, store: Optional[Path] = typer.Option(None, "--store", help=STORE_HELP),
           matches: Optional[Path] = typer.Option(None, help="Write pairwise verdicts here (matches JSONL, "
                                                             "judge = human:NAME; rate with `finharness rate`)."),
           rubric: Optional[Path] = typer.Option(None, help="Write rubric scores here (CSV)."),
           raters: Optional[str] = typer.Option(None, help="Only these raters (comma list; default all).")) -> None:
    """Export the stored human verdicts."""
    from .exports import export_matches, export_rubric

    if matches is None and rubric is None:
        fail("give --matches OUT.jsonl and/or --rubric OUT.csv")
    wanted = [n.strip() for n in raters.split(",") if n.strip()] if raters else None
    rater_store = _open(ctx, store)
    try:
        if matches is not None:
            typer.echo(f"{export_matches(rater_store, matches, wanted)} match(es) -> {matches}")
        if rubric is not None:
            typer.echo(f"{export_rubric(rater_store, rubric, wanted)} rubric score(s) -> {rubric}")
    finally:
        rater_store.close()


@ui_app.command("agreement")
def agreement(human: Path = typer.Option(..., help="Human matches (`ui export --matches`)."),
              judge: Path = typer.Option(..., help="Judge matches (e.g. `finharness ucfe judge` output)."),
              method: str = typer.Option("elo", help="Rating method of both tables: elo | bt."),
              all_items: bool = typer.Option(False, "--all-items", help="Rate the judge on all its matches, not "
                                                                         "only the items humans judged."),
              as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """Human–judge agreement: Pearson/Spearman/MAE of the rating tables, Cohen's κ and MAE per item."""
    from ..rating.matches import MatchFileError
    from ..rating.rate import METHODS
    from .exports import agreement as compute

    if method not in METHODS:
        fail(f"--method must be one of {', '.join(METHODS)}")
    try:
        report = compute(human, judge, method=method, shared_items_only=not all_items)
    except MatchFileError as err:
        fail(str(err))
    if as_json:
        typer.echo(json.dumps(report.to_json(), indent=2, ensure_ascii=False))
        return
    r = report.ratings
    typer.echo(f"ratings ({report.method}; human {report.human_matches} matches, judge {report.judge_matches}; "
               f"{r.n} models in both)")
    for model in r.models:
        typer.echo(f"  {model:<32} human {format_number(report.human_ratings[model], 1):>8}   "
                   f"judge {format_number(report.judge_ratings[model], 1):>8}")
    typer.echo(f"  Pearson r {format_number(r.pearson, 3)} (p {format_number(r.pearson_p, 4)})   "
               f"Spearman ρ {format_number(r.spearman, 3)} (p {format_number(r.spearman_p, 4)})   "
               f"MAE {format_number(r.mae, 1)} points")
    typer.echo(f"items: {report.items_compared} verdicts compared ({report.human_only} human-only)   "
               f"Cohen's κ {format_number(report.kappa, 3)}   MAE {format_number(report.item_mae, 3)}   "
               f"same outcome {format_number(report.exact_agreement, 3)}")
