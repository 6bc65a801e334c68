"""`finharness fintradebench build candidates|audit|judge|scale|run` (and helper 10b's calibrate|metrics).

Every command works on a build directory OUT (files in construction/__init__.py) with a run store in it
(OUT/store.sqlite, or --store / $FINHARNESS_STORE): rerunning a command makes no model call twice.
Heavy imports happen inside the commands.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

import typer

from ....cli_common import LiveProgress, fail, resolve_data_dir, resolve_store

build_app = typer.Typer(no_args_is_help=True, rich_markup_mode=None,
                        help="Build a FinTradeBench-style question set: candidates and self-selection, numerical "
                             "audit, judging, scaling to new tickers and dates.")

DEFAULT_OUT = Path("runs") / "fintradebench-build"

_DATA_DIR_HELP = "Data root holding fintradebench/ and nasdaq100_ohlcv/ (default $FINHARNESS_DATA_DIR)."
_OUT_HELP = "Build directory (questions.jsonl, candidates.jsonl, ...)."
_STORE_HELP = "Run store (default OUT/store.sqlite or $FINHARNESS_STORE)."


def _specs(text: str, what: str) -> list[str]:
    specs = [s.strip() for s in text.split(",") if s.strip()]
    if not specs:
        fail(f"{what}: give at least one model spec (e.g. embedded,embedded:1.5b)")
    if len(set(specs)) != len(specs):
        fail(f"{what}: a model spec is repeated in {text!r}")
    return specs


def _backends(specs: list[str]) -> dict[str, Any]:
    from ....backends import from_spec
    from ....core.backend import SpecError

    try:
        return {spec: from_spec(spec) for spec in specs}
    except SpecError as err:
        fail(str(err))


def _session(out: Path, store: Optional[Path], data_dir: Optional[Path], seed: int, concurrency: Optional[int],
             quiet: bool) -> Any:
    from ....core.store import RunStore
    from ..ideal import MarketData
    from .pipeline import STORE_FILE, BuildSession

    out.mkdir(parents=True, exist_ok=True)
    store_path = resolve_store(store, out / STORE_FILE)

    def progress(label: str) -> Any:
        return LiveProgress(f"build {label}", enabled=not quiet)

    return BuildSession(out=out, store=RunStore(store_path), market=MarketData(resolve_data_dir(data_dir)),
                        concurrency=concurrency, seed=seed, progress=progress)


def _run(session: Any, make: Callable[[], Any]) -> Any:
    """Run one phase coroutine; bad input and bad options end the command with the message."""
    import asyncio

    from ....core.backend import SpecError
    from ....data.errors import DataError

    try:
        return asyncio.run(make())
    except (DataError, SpecError, ValueError) as err:
        fail(str(err))
    finally:
        session.store.close()


def _report(name: str, summary: dict[str, Any], as_json: bool) -> None:
    if as_json:
        typer.echo(json.dumps(summary, indent=2, ensure_ascii=False))
        return
    line = (f"{name}: {summary.get('units', 0)} unit(s), calls {summary.get('calls', 0)}, from store "
            f"{summary.get('cache_hits', 0)}, failures {summary.get('failures', 0)}, {summary.get('wall_s', 0)} s")
    typer.echo(line)
    for stage, t in (summary.get("totals") or {}).items():
        typer.echo(f"  {stage}: {t['answers']} answers, accurate {t['accurate']}; claims supported {t['supported']}, "
                   f"contradicted {t['contradicted']}, not found {t['not_found']} (llm-mapped {t['llm_claims']})")
    for failure in summary.get("failure_examples", []):
        typer.echo(f"  failed: {failure}", err=True)


def _load_questions(data_dir: Optional[Path], question_file: Optional[Path], per_category: Optional[int],
                    total: Optional[int]) -> list[Any]:
    from ....data.errors import DataError
    from ..ideal import MarketData
    from ..questions import SEED_FILE, read_questions
    from .pipeline import select_questions

    root = resolve_data_dir(data_dir)
    for value, name in ((per_category, "--per-category"), (total, "--questions")):
        if value is not None and value < 1:
            fail(f"{name} must be 1 or more")
    try:
        questions = read_questions(question_file or root / SEED_FILE, MarketData(root).tickers_with_prices())
    except DataError as err:
        fail(str(err))
    return select_questions(questions, per_category, total)


_SELECTION_HELP = ("Self-selection prompt: 'official' (the release's: prompt ids, L3's given as the example) or "
                   "'neutral' (ours: shuffled 'Candidate N' labels, all listed, no example).")


def _one_of(option: str, value: str, allowed: Sequence[str]) -> str:
    if value not in allowed:
        fail(f"{option}: {value!r} is not one of {', '.join(allowed)}")
    return value


def _selection(style: str) -> str:
    from .candidates import SELECTION_STYLES

    return _one_of("--selection", style, SELECTION_STYLES)


_JUDGE_SCORES_HELP = ("'official' (the integers the judge wrote) or 'expected' (ours: also each score's expected "
                      "value from the judge's logprobs, for `build calibrate` to compare side by side).")


def _scoring(judge_scores: str) -> str:
    from .calibration import SCORINGS

    return _one_of("--judge-scores", judge_scores, SCORINGS)


def _levels(levels: Optional[str]) -> tuple[str, ...]:
    from .candidates import parse_levels

    try:
        return parse_levels(levels)
    except ValueError as err:
        fail(f"--levels: {err}")


@build_app.command("candidates")
def candidates_command(
    models: str = typer.Option(..., "--models", help="Comma list of model specs (e.g. embedded,embedded:1.5b)."),
    question_file: Optional[Path] = typer.Option(None, "--question-file",
                                                 help="Seed or scaled question CSV (default: the 150 seeds)."),
    per_category: Optional[int] = typer.Option(None, help="First N questions of each category (natural id order)."),
    questions: Optional[int] = typer.Option(None, "--questions", help="At most N questions."),
    levels: Optional[str] = typer.Option(None, help="Comma list of L0..L6 (default L0,L2,L3,L4,L5,L6; L0 = the data "
                                                    "contexts and the question, no instruction)."),
    max_tokens: int = typer.Option(1024, help="Answer budget per candidate."),
    selection: str = typer.Option("official", help=_SELECTION_HELP),
    data_dir: Optional[Path] = typer.Option(None, help=_DATA_DIR_HELP),
    out: Path = typer.Option(DEFAULT_OUT, help=_OUT_HELP),
    store: Optional[Path] = typer.Option(None, help=_STORE_HELP),
    seed: int = typer.Option(0, help="Seed of the self-selection sampling (temperature 0.1, as the release)."),
    concurrency: Optional[int] = typer.Option(None, help="Calls in flight per model."),
    as_json: bool = typer.Option(False, "--json", help="Print the phase summary as JSON."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress display."),
) -> None:
    """Phase 1: N candidates per question and model (one per level), each model picking its own best.

    Writes OUT/questions.jsonl, OUT/candidates.jsonl, OUT/selected.jsonl."""
    from .pipeline import build_questions, candidates_phase

    chosen_levels, style = _levels(levels), _selection(selection)
    specs = _specs(models, "--models")
    selected = _load_questions(data_dir, question_file, per_category, questions)
    backends = _backends(specs)
    session = _session(out, store, data_dir, seed, concurrency, quiet)
    summary = _run(session, lambda: candidates_phase(session, build_questions(selected, session.market), backends,
                                                     chosen_levels, max_tokens, style))
    _report("candidates", summary, as_json)
    if summary["failed_units"]:
        raise typer.Exit(1)


@build_app.command("audit")
def audit_command(
    auditor: Optional[str] = typer.Option(None, help="Model spec of an LLM auditor for claims the deterministic "
                                                     "checker cannot map to a metric (recorded as method 'llm')."),
    data_dir: Optional[Path] = typer.Option(None, help=_DATA_DIR_HELP),
    out: Path = typer.Option(DEFAULT_OUT, help=_OUT_HELP),
    store: Optional[Path] = typer.Option(None, help=_STORE_HELP),
    seed: int = typer.Option(0, help="Recorded; the audit is deterministic."),
    as_json: bool = typer.Option(False, "--json", help="Print the phase summary as JSON."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress display."),
) -> None:
    """Numerical audit of every candidate (stage before) and self-selected answer (stage after): OUT/audit.jsonl.

    A claim is SUPPORTED within max(2% relative, the claim's own rounding) of the data's value for its
    ticker and date, CONTRADICTED otherwise, NOT_FOUND when no metric, ticker or value is found."""
    from .pipeline import audit_phase

    backends = _backends(_specs(auditor, "--auditor")) if auditor else None
    session = _session(out, store, data_dir, seed, None, quiet)
    _report("audit", _run(session, lambda: audit_phase(session, backends)), as_json)


@build_app.command("judge")
def judge_command(
    judge: str = typer.Option(..., help="Model spec of the rubric judge."),
    all_candidates: bool = typer.Option(False, "--all-candidates", help="Judge every candidate too (stage before)."),
    judge_scores: str = typer.Option("official", "--judge-scores", help=_JUDGE_SCORES_HELP),
    data_dir: Optional[Path] = typer.Option(None, help=_DATA_DIR_HELP),
    out: Path = typer.Option(DEFAULT_OUT, help=_OUT_HELP),
    store: Optional[Path] = typer.Option(None, help=_STORE_HELP),
    seed: int = typer.Option(0, help="Recorded; the judge is greedy."),
    concurrency: Optional[int] = typer.Option(None, help="Judge calls in flight."),
    as_json: bool = typer.Option(False, "--json", help="Print the phase summary as JSON."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress display."),
) -> None:
    """The release's rubric judge on the self-selected answers (and, optionally, all candidates): OUT/judged.jsonl."""
    from .pipeline import judge_phase

    backends = _backends(_specs(judge, "--judge")[:1])
    session = _session(out, store, data_dir, seed, concurrency, quiet)
    _report("judge", _run(session, lambda: judge_phase(session, backends, all_candidates, _scoring(judge_scores))),
            as_json)


def _scale(seeds: list[Any], data_dir: Optional[Path], out: Path, size: int, seed: int, tickers: Optional[str],
           new_tickers: Optional[int]) -> Any:
    from ....data.errors import DataError
    from .scale import SCALED_FILE, scale_seeds

    if tickers and new_tickers is not None:
        fail("give --tickers or --new-tickers, not both")
    try:
        return scale_seeds(seeds, resolve_data_dir(data_dir), size, out / SCALED_FILE, seed=seed,
                           tickers=tickers.split(",") if tickers else None, new_ticker_count=new_tickers)
    except (DataError, ValueError) as err:
        fail(str(err))


@build_app.command("scale")
def scale_command(
    size: int = typer.Option(..., "--size", help="How many variants to write."),
    tickers: Optional[str] = typer.Option(None, help="Comma list: the tickers single-company variants may use."),
    new_tickers: Optional[int] = typer.Option(None, "--new-tickers",
                                              help="Draw K tickers (with filings and prices) no seed question names."),
    question_file: Optional[Path] = typer.Option(None, "--question-file", help="Seed questions (default: the 150)."),
    per_category: Optional[int] = typer.Option(None, help="Scale only the first N seeds of each category."),
    questions: Optional[int] = typer.Option(None, "--questions", help="Scale at most N seeds."),
    data_dir: Optional[Path] = typer.Option(None, help=_DATA_DIR_HELP),
    out: Path = typer.Option(DEFAULT_OUT, help=_OUT_HELP),
    seed: int = typer.Option(0, help="Random seed (the same seed gives the same file)."),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="Print nothing but errors."),
) -> None:
    """Phase 3: the seed questions rewritten across NASDAQ-100 tickers and dates: OUT/scaled_questions.csv
    (the seed layout plus ticker, as_of, source_id, category; feed it to `build candidates --question-file`)."""
    from .pipeline import update_summary

    seeds = _load_questions(data_dir, question_file, per_category, questions)
    out.mkdir(parents=True, exist_ok=True)
    result = _scale(seeds, data_dir, out, size, seed, tickers, new_tickers)
    update_summary(out, "scale", result.to_json())
    if as_json:
        typer.echo(json.dumps(result.to_json(), indent=2))
    elif not quiet:
        typer.echo(f"wrote {result.report.written} of {size} variants to {result.path} (tickers "
                   f"{', '.join(result.tickers) if result.tickers else 'any'})")
        for note in result.notes:
            typer.echo(f"note: {note}")


@build_app.command("run")
def run_command(
    models: str = typer.Option(..., "--models", help="Comma list of candidate model specs."),
    judge: str = typer.Option(..., help="Model spec of the rubric judge."),
    questions: Optional[int] = typer.Option(None, "--questions", help="Seed questions, at most N."),
    per_category: Optional[int] = typer.Option(None, help="First N seed questions of each category."),
    scale_tickers: Optional[int] = typer.Option(None, "--scale-tickers",
                                                help="Scale to K new tickers (drawn among those with filings and "
                                                     "prices that no chosen seed names)."),
    tickers: Optional[str] = typer.Option(None, help="Scale to these tickers instead (comma list)."),
    scale_size: Optional[int] = typer.Option(None, "--scale-size",
                                             help="Variants to make (default: as many as seed questions when "
                                                  "scaling is asked for; 0 = no scaling)."),
    question_file: Optional[Path] = typer.Option(None, "--question-file", help="Seed questions (default: the 150)."),
    levels: Optional[str] = typer.Option(None, help="Comma list of L0..L6 (default L0,L2,L3,L4,L5,L6)."),
    max_tokens: int = typer.Option(1024, help="Answer budget per candidate."),
    selection: str = typer.Option("official", help=_SELECTION_HELP),
    auditor: Optional[str] = typer.Option(None, help="Model spec of an LLM auditor for unmapped claims."),
    all_candidates: bool = typer.Option(False, "--all-candidates", help="Judge every candidate too."),
    judge_scores: str = typer.Option("official", "--judge-scores", help=_JUDGE_SCORES_HELP),
    data_dir: Optional[Path] = typer.Option(None, help=_DATA_DIR_HELP),
    out: Path = typer.Option(DEFAULT_OUT, help=_OUT_HELP),
    store: Optional[Path] = typer.Option(None, help=_STORE_HELP),
    seed: int = typer.Option(0, help="Seed of scaling and of self-selection sampling."),
    concurrency: Optional[int] = typer.Option(None, help="Calls in flight per model."),
    as_json: bool = typer.Option(False, "--json", help="Print the build summary as JSON."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress display."),
) -> None:
    """Every phase: seed subset -> scale -> candidates and self-selection -> audit -> judge.

    Rerunning the same command resumes: completed calls come from the run store."""
    import asyncio

    from ....data.errors import DataError
    from ..questions import read_questions
    from .pipeline import audit_phase, build_questions, candidates_phase, judge_phase, update_summary
    from .scale import SCALED_FILE

    chosen_levels, style, scoring = _levels(levels), _selection(selection), _scoring(judge_scores)
    specs = _specs(models, "--models")
    seeds = _load_questions(data_dir, question_file, per_category, questions)
    candidate_backends, judge_backends = _backends(specs), _backends(_specs(judge, "--judge")[:1])
    auditor_backends = _backends(_specs(auditor, "--auditor")) if auditor else None
    out.mkdir(parents=True, exist_ok=True)
    scaling = scale_size if scale_size is not None else (len(seeds) if (scale_tickers or tickers) else 0)
    variants: list[Any] = []
    if scaling:
        result = _scale(seeds, data_dir, out, scaling, seed, tickers, scale_tickers)
        update_summary(out, "scale", result.to_json())
        for note in result.notes:
            typer.echo(f"note: {note}", err=True)
        if result.variants:
            try:
                variants = read_questions(out / SCALED_FILE)
            except DataError as err:
                fail(str(err))
    session = _session(out, store, data_dir, seed, concurrency, quiet)
    all_questions = build_questions(seeds, session.market) + build_questions(variants, session.market, scaled=True)

    async def phases() -> dict[str, Any]:
        return {"candidates": await candidates_phase(session, all_questions, candidate_backends, chosen_levels,
                                                     max_tokens, style),
                "audit": await audit_phase(session, auditor_backends),
                "judge": await judge_phase(session, judge_backends, all_candidates, scoring)}

    try:
        summaries = asyncio.run(phases())
    except (DataError, ValueError) as err:
        fail(str(err))
    finally:
        session.store.close()
    if as_json:
        typer.echo(json.dumps(summaries, indent=2, ensure_ascii=False))
    else:
        typer.echo(f"questions: {len(seeds)} seed + {len(variants)} scaled -> {out}")
        for name, summary in summaries.items():
            _report(name, summary, False)
    if any(s.get("failed_units") for s in summaries.values()):
        raise typer.Exit(1)


try:  # helper 10b's phase-2 and metrics commands
    from .cli_analysis import register as register_analysis
except ModuleNotFoundError as err:
    if err.name != __name__.rsplit(".", 1)[0] + ".cli_analysis":
        raise
else:
    register_analysis(build_app)
