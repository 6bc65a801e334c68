"""`finharness financebench documents|grade-check`.

Mounted as `finharness financebench` (its BENCHMARK declaration); heavy imports happen inside the commands.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from ...cli_common import fail, resolve_data_dir

financebench_app = typer.Typer(no_args_is_help=True, rich_markup_mode=None,
                               help="FinanceBench: the filings a data root holds, and the grader measured against "
                                    "the released human labels.")


@financebench_app.command("documents")
def documents_command(
    data_dir: Optional[Path] = typer.Option(None, help="Data root holding financebench/."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """The filings the open sample cites: which the data root holds, which are absent, and the questions on each."""
    from collections import Counter

    from ...data.errors import DataError
    from .data import absent_documents, cited_documents, read_questions

    root = resolve_data_dir(data_dir)
    try:
        questions = read_questions(root)
    except DataError as err:
        fail(str(err))
    cited = cited_documents(questions)
    absent = absent_documents(root, questions)
    asked = Counter(q.doc_name for q in questions)
    out = {"data_root": str(root), "cited": len(cited), "present": len(cited) - len(absent), "absent": absent,
           "questions_on_absent": sum(asked[name] for name in absent)}
    if as_json:
        typer.echo(json.dumps(out, indent=2))
        return
    typer.echo(f"{out['present']} of {len(cited)} cited filings are in {root}/financebench/pdfs")
    if absent:
        typer.echo(f"absent ({len(absent)}; {out['questions_on_absent']} questions are asked about them): "
                   + ", ".join(absent))
        typer.echo(f"`finharness data pull financebench --data-dir {root}` fetches them")


@financebench_app.command("grade-check")
def grade_check_command(
    results: list[Path] = typer.Option([], "--results", help="Labelled answer files (the release's results layout); "
                                       "default: every DATA/financebench/results/*.jsonl."),
    grader: Optional[str] = typer.Option(None, help="rules | judge (default: judge with --judge, else rules)."),
    judge: Optional[str] = typer.Option(None, help="Model spec of the judge (the judge grader)."),
    data_dir: Optional[Path] = typer.Option(None, help="Data root holding financebench/."),
    out: Optional[Path] = typer.Option(None, help="Where the judge's calls are stored (default: a folder of the "
                                       "cache named by the judge): a rerun makes none."),
    concurrency: Optional[int] = typer.Option(None, help="Judge calls in flight."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Grade every human-labelled answer as `finharness score financebench` does and print the agreement with the
    labels: per file (with the paper's accuracy from the labels beside the grader's), per label, per question type."""
    from ...data.errors import DataError
    from .grade_check import format_report, graded_rows, report

    grader = grader or ("judge" if judge else "rules")
    if grader not in ("rules", "judge"):
        fail("--grader must be rules or judge")
    if grader == "judge" and judge is None:
        fail("--grader judge needs --judge SPEC")
    root = resolve_data_dir(data_dir)
    files = list(results) or sorted((root / "financebench" / "results").glob("*.jsonl"))
    if not files:
        fail(f"no labelled files: {root}/financebench/results/ holds none (`finharness data pull financebench-results "
             f"--data-dir {root}`), and no --results FILE was given")
    backend = None
    if grader == "judge":
        from ...backends import from_spec
        from ...cli_common import check_endpoints
        from ...core.backend import SpecError

        try:
            backend = from_spec(judge)
        except SpecError as err:
            fail(str(err))
        check_endpoints([backend])
    try:
        rows = graded_rows(files, root, judge=backend, out=out, concurrency=concurrency)
    except DataError as err:
        fail(str(err))
    finally:
        if backend is not None:
            getattr(backend, "close", lambda: None)()
    figures = report(rows, grader, judge)
    typer.echo(json.dumps(figures, indent=1) if as_json else format_report(figures))
