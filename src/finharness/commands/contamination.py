"""`finharness contamination`: membership evidence per item of a benchmark, and the validation of the probes.

    finharness contamination TASK --model SPEC [--reference SPEC] [--probes auto|ll|chat|all|NAME,...]
        [--limit N | --sample N] [--seed N] [--run RUN_DIR] [--out DIR] [--store PATH] [--json]
    finharness contamination --validate --model SPEC [--windows N] [--window-tokens T] [--out DIR] [--json]

The first probes every item of TASK (the same selection `finharness run` makes with the same --limit, --sample
and --seed) and writes OUT/contamination.json: every item with its scores, the model's validations, and, given a
run of TASK (`--run`, or OUT itself when it holds samples.jsonl), the share of items above the validated threshold
and the score on the likely-seen and likely-unseen items. Every call is stored in OUT/store.sqlite (or --store):
a rerun makes none twice. The second measures each probe's AUC on the filings split (contamination/split.py)
for the model and keeps it in the user's validations file (validation.user_file) or --validation FILE.
"""

from __future__ import annotations

import asyncio
import json
import math
import time
from pathlib import Path
from typing import Any, Optional, Sequence

import typer

from ..cli_common import fail, parse_options, resolve_store
from ..contamination.evidence import MAX_TOKENS, ItemEvidence, default_probes, probe_items
from ..contamination.items import ItemText
from ..contamination.probes import LL_PROBES, PROBE_NAMES
from ..contamination.run import contamination_record, probe_cost, probe_samples, reference_for, write_record
from ..contamination.validation import EVIDENCE, ProbeValidation, model_key, record, user_file, validate_probe
from ..contamination.windows import latest_year
from .spending import BUDGET_TOKENS_OPTION, MAX_COST_OPTION, PRICE_OPTION, make_spending, stop_if_budget_reached


def _open(spec: str, store: Path, role: str, concurrency: int | None, spending: Any) -> Any:
    from .. import open_model
    from ..core.backend import SpecError

    try:
        return open_model(spec, store, role=role, concurrency=concurrency, spending=spending)
    except SpecError as err:
        fail(str(err))


def _folder(text: str) -> str:
    from ..core.pool import run_dir_name

    return run_dir_name(text)


def _per_sample(run_dir: Path | None) -> dict[str, float] | None:
    if run_dir is None or not (run_dir / "samples.jsonl").is_file():
        return None
    from ..report.runs import load_run

    return load_run(run_dir).per_sample()


def _progress(quiet: bool, what: str) -> Any:
    if quiet:
        return None
    started = time.perf_counter()
    last = [0.0]

    def on_item(done: int, total: int) -> None:
        now = time.perf_counter()
        if now - last[0] >= 5.0 or done == total:
            last[0] = now
            typer.echo(f"{what}: {done}/{total} items, {now - started:.0f} s", err=True)
    return on_item


def contamination_command(
    task: Optional[str] = typer.Argument(None, metavar="[TASK]", help="The task whose items are probed (`finharness "
                                         "list`); leave out with --validate."),
    model: str = typer.Option("embedded", "--model", "-m", help="Model spec probed."),
    reference: Optional[str] = typer.Option(None, help="Smaller model of the same family for the reference probe "
                                            "(default: embedded for embedded:1.5b; 'none' for no reference)."),
    probes: str = typer.Option("auto", help="auto (log-likelihood probes where the backend has them, else the chat "
                               "probes) | ll | chat | all | a comma-separated list of: " + ", ".join(PROBE_NAMES)),
    limit: Optional[int] = typer.Option(None, min=1, help="The first N items."),
    sample: Optional[int] = typer.Option(None, min=1, help="A seeded random subset of N items (as `run --sample`)."),
    seed: int = typer.Option(0, help="Seeds --sample."),
    option: list[str] = typer.Option([], "-o", help="Task option KEY=VALUE (repeatable), as for `run`."),
    data_dir: Optional[Path] = typer.Option(None, help="Data root (default $FINHARNESS_DATA_DIR or the cache)."),
    run: Optional[Path] = typer.Option(None, "--run", help="A run folder of TASK: its per-sample scores are split "
                                       "into likely seen and likely unseen (default: --out when it holds one)."),
    out: Optional[Path] = typer.Option(None, help="Folder for contamination.json and the store (default "
                                       "runs/contamination/TASK__MODEL)."),
    store: Optional[Path] = typer.Option(None, help="Run store (default OUT/store.sqlite or $FINHARNESS_STORE)."),
    max_tokens: int = typer.Option(MAX_TOKENS, min=8, help="Tokens of each item's text read at most."),
    concurrency: Optional[int] = typer.Option(None, help="Calls in flight per model."),
    validate: bool = typer.Option(False, "--validate", help="Measure the probes' power on the filings split for "
                                  "--model instead of probing a task."),
    split: str = typer.Option("filings", help="--validate: filings (FinanceBench's MD&A of FY2015-2023 against "
                              "filings after the model's release; sets the thresholds) | options (TASK's published "
                              "multiple-choice items against the same items with their options rotated)"),
    windows: int = typer.Option(200, min=10, help="--validate: windows per side (items, for --split options)."),
    window_tokens: int = typer.Option(128, min=16, help="--validate: tokens per window."),
    guided: int = typer.Option(0, min=0, help="--validate: also the guided-completion probe on this many windows "
                               "per side (it generates: slow on a CPU)."),
    validation: Optional[Path] = typer.Option(None, help="--validate: the validations file to keep the result in "
                                              "(default: the user's, under the cache folder)."),
    price: list[str] = PRICE_OPTION,
    max_cost: Optional[float] = MAX_COST_OPTION,
    budget_tokens: Optional[int] = BUDGET_TOKENS_OPTION,
    as_json: bool = typer.Option(False, "--json", help="Print contamination.json (or the validation) as JSON."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress lines."),
) -> None:
    """Membership evidence per item (Min-K%, Min-K%++, zlib, reference model; guided completion and option order
    for chat-only APIs), each probe shown with its validated power on this model (docs/contamination.md)."""
    from ..data.registry import resolve_data_dir

    root = resolve_data_dir(data_dir)
    spending = make_spending(price, max_cost, budget_tokens)
    reference_spec = None if reference == "none" else (reference or reference_for(model))
    if validate and split not in ("filings", "options"):
        fail(f"--split is filings or options, not {split!r}")
    if validate and split == "filings":
        if task:
            fail("give TASK or --validate, not both (a TASK is validated on with --split options)")
        out = out or Path("runs") / "contamination" / f"validate__{_folder(model)}"
        out.mkdir(parents=True, exist_ok=True)
        _validate(model, reference_spec, root, out, resolve_store(store, out / "store.sqlite"), windows, window_tokens,
                  guided, validation or user_file(), concurrency, spending, as_json, quiet)
        return
    if not task:
        fail("give a TASK to probe (`finharness list`), or --validate" +
             (": --split options needs the TASK whose items it reorders" if validate else ""))
    from ..benchmarks.registry import resolve_task
    from ..core.runner import RunOptions, select_samples
    from ..data.errors import DataError

    try:
        ref = resolve_task(task)
        made = ref.make(parse_options(option))
    except (KeyError, ValueError, TypeError) as err:
        fail(str(err.args[0] if isinstance(err, KeyError) else err))
    out = out or Path("runs") / "contamination" / f"{_folder(task)}__{_folder(model)}"
    out.mkdir(parents=True, exist_ok=True)
    try:
        samples = select_samples(made, RunOptions(data_dir=root, limit=limit, subset=sample, seed=seed))
    except DataError as err:
        fail(str(err))
    store_path = resolve_store(store, out / "store.sqlite")
    if validate:
        try:
            _validate_options(made, samples, model, store_path, windows, max_tokens, validation or user_file(),
                              concurrency, spending, as_json, quiet)
        finally:
            made.close()
        return
    handle = _open(model, store_path, "probe", concurrency, spending)
    reference_handle = _open(reference_spec, store_path, "reference", concurrency, spending) if reference_spec else None
    try:
        asked = default_probes(handle.capabilities, probes)
    except ValueError as err:
        fail(str(err))
    if reference_handle is None:
        asked = tuple(p for p in asked if p != "reference")
    started = time.perf_counter()
    try:
        evidence = asyncio.run(probe_samples(made, samples, handle, reference=reference_handle, probes=asked,
                                             max_tokens=max_tokens, on_item=_progress(quiet, task)))
    finally:
        _close(handle, reference_handle)
        made.close()
    run_dir = run or (out if (out / "samples.jsonl").is_file() else None)
    cost = probe_cost(started, out, handle, reference_handle)
    rec = contamination_record(made.name, model, handle.identity, evidence, reference=reference_spec, probes=asked,
                               per_sample=_per_sample(run_dir), run_dir=str(run_dir) if run_dir else None, cost=cost,
                               samples=samples)
    path = write_record(out, rec)
    if as_json:
        typer.echo(json.dumps(json.loads(path.read_text(encoding="utf-8")), ensure_ascii=False, indent=1))
    else:
        _print_record(rec, path)
    stop_if_budget_reached(spending)  # the record holds what was probed; the refused items say so in their errors


def _close(*handles: Any) -> None:
    for h in handles:
        if h is not None:
            close = getattr(h.backend, "close", None)
            if close is not None:
                close()


def _fmt(value: Any, digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "—"
    return f"{value:.{digits}f}" if isinstance(value, float) else str(value)


def _print_record(rec: dict[str, Any], path: Path) -> None:
    import statistics

    typer.echo(f"contamination: {rec['task']} on {rec['model']}: {rec['n_items']} items, probes "
               f"{', '.join(rec['probes'])}" + (f", reference {rec['reference']}" if rec.get("reference") else ""))
    validations = rec["validation"]["probes"]
    for probe in rec["probes"]:
        values = [i["scores"].get(probe) for i in rec["items"] if i["scores"].get(probe) is not None]
        v = validations.get(probe)
        power = (f"AUC {v['auc']:.3f} [{v['ci95'][0]:.3f}, {v['ci95'][1]:.3f}]: "
                 f"{_status_text(v['status'], v.get('status_ci'))}" if v else "not validated on this model")
        typer.echo(f"  {PROBE_NAMES[probe]:32} median {_fmt(statistics.median(values)) if values else '—':>8}  "
                   f"({len(values)} items)  {power}")
    impact = rec["impact"]
    if impact.get("probe"):
        share = impact["share"]
        typer.echo(f"  likely seen by {impact['probe']}: {impact['above']}/{impact['n_items']} = "
                   f"{100 * share['value']:.1f}% [{100 * share['ci95'][0]:.1f}, {100 * share['ci95'][1]:.1f}] "
                   f"(unseen text: {100 * (impact['fpr'] or 0):.0f}%)")
        if impact.get("difference"):
            d = impact["difference"]
            typer.echo(f"  score seen {_fmt(impact['seen']['value'])} (n {impact['seen']['n']}) vs unseen "
                       f"{_fmt(impact['unseen']['value'])} (n {impact['unseen']['n']}): Δ {_fmt(d['diff'])} "
                       f"[{_fmt(d['ci95'][0])}, {_fmt(d['ci95'][1])}]")
    else:
        typer.echo(f"  {impact['status']}")
    if impact.get("fresh"):
        from ..suite.contamination import fresh_text

        typer.echo(f"  {fresh_text(impact['fresh'])}")
    for note in impact.get("notes") or ():
        typer.echo(f"  note: {note}")
    cost = rec.get("cost") or {}
    typer.echo(f"  {cost.get('calls', 0)} calls ({cost.get('cache_hits', 0)} from the store), {cost.get('wall_s')} s; "
               f"written: {path}")


# --- validation ---------------------------------------------------------------------------------------------------

def _scores(evidence: list[ItemEvidence], probe: str, ids: set[str]) -> list[float | None]:
    return [e.scores.get(probe) for e in evidence if e.id in ids]


def validation_table(model: str, windows_: list[Any], evidence: list[ItemEvidence], probes: tuple[str, ...]
                     ) -> dict[str, ProbeValidation]:
    """Each probe's ProbeValidation on all windows, its controls beside it (year-free windows, the technology
    sector only, and the blind baselines: the latest year a window names, its compressibility)."""
    from ..contamination.probes import zlib_bytes
    from ..stats.auc import auc_ci

    by_id = {w.id: w for w in windows_}
    seen = {w.id for w in windows_ if w.seen}
    unseen = {w.id for w in windows_ if not w.seen}
    year_free = {w.id for w in windows_ if w.year_free}
    tech = {w.id for w in windows_ if w.tech}
    out = {}
    scored = [probe for probe in probes if any(e.scores.get(probe) is not None for e in evidence)]
    for probe in scored:
        controls = {}
        for name, subset in (("year-free windows", year_free), ("technology companies only", tech)):
            est = auc_ci([v for v in _scores(evidence, probe, seen & subset) if v is not None],
                         [v for v in _scores(evidence, probe, unseen & subset) if v is not None])
            controls[name] = {"auc": est.value, "ci95": list(est.ci95), "n_seen": est.n_positive,
                              "n_unseen": est.n_negative}
        out[probe] = validate_probe(probe, _scores(evidence, probe, seen), _scores(evidence, probe, unseen),
                                    "filings", controls=controls, family=len(scored))
    # blind baselines: what tells the sides apart with no model at all
    dated = [w for w in windows_ if latest_year(w.text) is not None]
    year_auc = auc_ci([-latest_year(w.text) for w in dated if w.seen],  # type: ignore[operator]
                      [-latest_year(w.text) for w in dated if not w.seen])  # type: ignore[operator]
    comp = auc_ci([zlib_bytes(w.text) / len(w.text) for w in by_id.values() if w.seen],
                  [zlib_bytes(w.text) / len(w.text) for w in by_id.values() if not w.seen])
    out["_blind"] = {"latest year named (windows naming one)": {"auc": year_auc.value, "ci95": list(year_auc.ci95),
                                                                 "n_seen": year_auc.n_positive,
                                                                 "n_unseen": year_auc.n_negative},
                     "zlib bytes per character": {"auc": comp.value, "ci95": list(comp.ci95),
                                                  "n_seen": comp.n_positive, "n_unseen": comp.n_negative}}
    return out  # type: ignore[return-value]


def _family_line(family: int) -> str:
    from ..contamination.validation import family_confidence

    return (f"  (95% intervals; each status is read at {100 * family_confidence(family):g}%, the family-wise level "
            f"of {family} probes validated together)" if family > 1 else "  (95% intervals)")


def _status_text(status: str, status_ci: Sequence[float] | None) -> str:
    """The status, with the family-wise interval it was read off."""
    return f"{status} [{status_ci[0]:.3f}, {status_ci[1]:.3f}]" if status_ci else status


def _validate(model: str, reference: str | None, root: Path, out: Path, store_path: Path, per_side: int,
              tokens: int, guided: int, path: Path, concurrency: int | None, spending: Any, as_json: bool,
              quiet: bool) -> None:
    from ..benchmarks.financebench.filings import read_pages
    from ..contamination.split import build_split, release_of

    handle = _open(model, store_path, "probe", concurrency, spending)
    reference_handle = _open(reference, store_path, "reference", concurrency, spending) if reference else None
    started = time.perf_counter()
    try:
        windows_, about = build_split(root, handle.count_tokens, read_pages, tokens=tokens, per_side=per_side)
        if not any(w.seen for w in windows_) or all(w.seen for w in windows_):
            fail(f"the filings split needs both sides under {root}: financebench/pdfs/ and fintradebench/SEC_Filings/")
        probes = tuple(p for p in LL_PROBES if p != "reference" or reference_handle is not None)
        if not handle.capabilities.loglikelihood:
            probes = ()
        items = [ItemText(w.id, w.text) for w in windows_]
        evidence = asyncio.run(probe_items(items, handle, reference=reference_handle, probes=probes,
                                           max_tokens=tokens + 8, on_item=_progress(quiet, "windows"))) if probes else []
        probe_wall = time.perf_counter() - started
        if guided:
            picked = [w for w in windows_ if w.seen][:guided] + [w for w in windows_ if not w.seen][:guided]
            by_id = {e.id: e for e in evidence}

            async def guide() -> list[ItemEvidence]:
                tasks = [probe_items([ItemText(w.id, w.text)], handle, probes=("guided",),
                                     source=f"the {w.company} {w.form} of {w.year} filed with the SEC",
                                     split="Management's Discussion and Analysis") for w in picked]
                return [r for group in await asyncio.gather(*tasks) for r in group]

            for e in asyncio.run(guide()):
                merged = {**(by_id[e.id].scores if e.id in by_id else {}), "guided": e.scores.get("guided")}
                by_id[e.id] = ItemEvidence(e.id, by_id[e.id].tokens if e.id in by_id else 0, merged)
            evidence = list(by_id.values())
            probes = probes + ("guided",)
    finally:
        _close(handle, reference_handle)
    stop_if_budget_reached(spending)  # a validation on part of the windows is not kept; the rerun resumes
    table = validation_table(model, windows_, evidence, probes)
    blind = table.pop("_blind")  # type: ignore[arg-type]
    label, released = release_of(model)
    tokens_seen = [e.tokens for e in evidence if e.id in {w.id for w in windows_ if w.seen}]
    tokens_unseen = [e.tokens for e in evidence if e.id in {w.id for w in windows_ if not w.seen}]
    split_about = {**about, "released": released, "reference": reference, "blind_baselines": blind,
                   "mean_tokens": {"seen": sum(tokens_seen) / max(1, len(tokens_seen)),
                                   "unseen": sum(tokens_unseen) / max(1, len(tokens_unseen))},
                   "probe_wall_s": round(probe_wall, 1), "wall_s": round(time.perf_counter() - started, 1),
                   "genre": "MD&A prose lines only, both sides", "length": f"windows of {tokens} tokens (−2) of the "
                   "model's tokenizer"}
    key = model_key(handle.identity)
    record(path, key, label, table, {"spec": model, "split": split_about})
    (out / "validation.json").write_text(json.dumps(
        {"model": model, "model_key": key, "label": label, "split": split_about,
         "probes": {k: v.__dict__ for k, v in table.items()},
         "windows": [{"id": w.id, "seen": w.seen, "document": w.document, "year_free": w.year_free,
                      "scores": dict(next((e.scores for e in evidence if e.id == w.id), {}))} for w in windows_]},
        ensure_ascii=False, indent=1, default=list) + "\n", encoding="utf-8")
    if as_json:
        typer.echo(json.dumps({"model": model, "model_key": key, "split": split_about,
                               "probes": {k: v.__dict__ for k, v in table.items()}}, indent=1, default=list))
        return
    typer.echo(f"validation of {label} on the filings split: {about['seen_windows']} windows from "
               f"{about['seen_filings']} filings of FY2015-{about['seen_last_year']} vs {about['unseen_windows']} "
               f"from {about['unseen_filings']} filed from {about['cutoff']}, {tokens} tokens each")
    typer.echo(_family_line(len(table)))
    for probe, v in table.items():
        yf = v.controls.get("year-free windows", {})
        typer.echo(f"  {PROBE_NAMES[probe]:32} AUC {v.auc:.3f} [{v.ci95[0]:.3f}, {v.ci95[1]:.3f}] "
                   f"{_status_text(v.status, v.status_ci):44} "
                   f"year-free {_fmt(yf.get('auc'))} [{_fmt((yf.get('ci95') or [None])[0])}, "
                   f"{_fmt((yf.get('ci95') or [None, None])[1])}]"
                   + (f"  threshold {v.threshold:.3f} (TPR {v.tpr:.2f})" if v.status == EVIDENCE else ""))
    for name, b in blind.items():
        typer.echo(f"  blind baseline, {name}: AUC {b['auc']:.3f} [{b['ci95'][0]:.3f}, {b['ci95'][1]:.3f}]")
    typer.echo(f"kept in {path} under {key}; windows and scores: {out / 'validation.json'}")


def _validate_options(task: Any, samples: list[Any], model: str, store_path: Path, per_side: int, max_tokens: int,
                      path: Path, concurrency: int | None, spending: Any, as_json: bool, quiet: bool) -> None:
    """The log-likelihood probes on TASK's published multiple-choice items against the same items with their
    options rotated (contamination/reorder.py), kept beside the model's filings validation."""
    from ..contamination.items import item_text
    from ..contamination.reorder import SPLIT, option_pairs, paired_validation
    from ..contamination.split import release_of
    from ..contamination.validation import record_split

    pairs = option_pairs([item_text(s, task) for s in samples], per_side)
    if not pairs:
        fail(f"{task.name} has no multiple-choice items with options in their text to reorder")
    handle = _open(model, store_path, "probe", concurrency, spending)
    started = time.perf_counter()
    try:
        if not handle.capabilities.loglikelihood:
            fail(f"{model} computes no log-likelihoods: the option-order split validates the log-likelihood probes")
        probes = tuple(p for p in LL_PROBES if p != "reference")
        texts = [t for pair in pairs for t in (pair.published, pair.reordered)]
        evidence = asyncio.run(probe_items(texts, handle, probes=probes, max_tokens=max_tokens,
                                           on_item=_progress(quiet, "items")))
    finally:
        _close(handle)
    stop_if_budget_reached(spending)  # as for the filings: kept only whole
    wall = time.perf_counter() - started
    scores = {e.id: e.scores for e in evidence}
    published_ids = {p.published.id for p in pairs}
    table = {}
    sides = {probe: {i: v.get(probe) for i, v in scores.items()} for probe in probes}
    scored = [probe for probe, side in sides.items() if any(v is not None for v in side.values())]
    for probe in scored:
        side = sides[probe]
        table[probe] = paired_validation(pairs, {i: v for i, v in side.items() if i in published_ids},
                                         {i: v for i, v in side.items() if i not in published_ids},
                                         family=len(scored))
    label, released = release_of(model)
    tokens = [e.tokens for e in evidence]
    about = {"task": task.name, "items": len(pairs), "released": released, "probe_wall_s": round(wall, 1),
             "sorted_share": sum(p.sorted_options for p in pairs) / len(pairs),
             "mean_tokens": sum(tokens) / max(1, len(tokens)),
             "genre": "the same items both sides", "length": "the same tokens both sides, reordered"}
    key = model_key(handle.identity)
    record_split(path, key, label, SPLIT, table, about)
    if as_json:
        typer.echo(json.dumps({"model": model, "model_key": key, "split": SPLIT, **about, "probes": table}, indent=1))
        return
    typer.echo(f"validation of {label} on {task.name}'s option order: {len(pairs)} published items against the same "
               f"with their options rotated ({100 * about['sorted_share']:.0f}% have sorted options)")
    typer.echo(_family_line(len(table)))
    for probe, v in table.items():
        u = v["controls"]["options not sorted"]
        typer.echo(f"  {PROBE_NAMES[probe]:32} paired AUC {v['paired_auc']:.3f} [{v['paired_ci95'][0]:.3f}, "
                   f"{v['paired_ci95'][1]:.3f}] {_status_text(v['status'], v['status_ci']):44} unsorted "
                   f"{_fmt(u['paired_auc'])} [{_fmt(u['paired_ci95'][0])}, {_fmt(u['paired_ci95'][1])}] (n "
                   f"{u['n_items']}, {_status_text(u['status'], u['status_ci'])}); unpaired AUC "
                   f"{v['auc']:.3f} [{v['ci95'][0]:.3f}, {v['ci95'][1]:.3f}]")
    typer.echo(f"kept in {path} under {key} ({SPLIT}); {about['probe_wall_s']} s")
