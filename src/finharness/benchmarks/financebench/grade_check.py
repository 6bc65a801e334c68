"""The grader measured against human labels: every labelled answer graded as `finharness score financebench` grades
it, then agreement with the labels (`finharness financebench grade-check`).

A labelled file has the release's results layout (`results/*.jsonl`: financebench_id, model_answer, label
'Correct Answer' | 'Incorrect Answer' | 'Refusal'; other fields ignored). For each file: n, the accuracy the human
labels give (the paper's table), the grader's accuracy, their agreement and Cohen's κ, the numeric questions
apart; pooled over the files: agreement and κ, each label's recall and precision, per question type, numeric and
other questions, the rules that decided, and the confusion matrix. Every figure has its 95% interval (agreement
and accuracies: binomial; κ: a seeded bootstrap over answers, stats/agreement.py).
"""

from __future__ import annotations

import asyncio
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from ...data.errors import DataError
from ...data.io import iter_jsonl
from ...stats.agreement import cohen_kappa_ci, confusion_matrix, label_agreement
from ...stats.ci import Estimate, proportion_ci
from .grading import GRADES, HUMAN_LABELS


@dataclass(frozen=True)
class Graded:
    """One labelled answer: the human's grade and the grader's."""

    file: str
    """The labelled file's name without .jsonl (e.g. 'gpt-4_oracle_reverse')."""
    qid: str
    human: str
    """The human label as a grade (HUMAN_LABELS)."""
    grade: str
    """The grader's grade."""
    rule: str
    """The rule that decided (grading.py), 'judge' where the judge did."""
    decided: bool
    """A confident rule (or the judge) gave the grade, not a fallback's guess."""
    question_type: str
    numeric: bool


def human_labels(path: Path) -> dict[str, str]:
    """financebench_id -> the human's grade, of one labelled file."""
    labels: dict[str, str] = {}
    for line, obj in iter_jsonl(path):
        label = obj.get("label")
        if label not in HUMAN_LABELS:
            raise DataError(f"label {label!r} is not one of {', '.join(HUMAN_LABELS)}", path=path, line=line)
        labels[str(obj.get("financebench_id"))] = HUMAN_LABELS[label]
    return labels


def estimate_json(e: Estimate) -> dict[str, Any]:
    return {"value": e.value, "ci95": list(e.ci95), "n": e.n}


def agreement(rows: Sequence[Graded]) -> Estimate:
    return proportion_ci(sum(r.human == r.grade for r in rows), len(rows))


def kappa(rows: Sequence[Graded]) -> Estimate:
    return cohen_kappa_ci([r.human for r in rows], [r.grade for r in rows])


def share(rows: Sequence[Graded], label: str, who: str) -> Estimate:
    return proportion_ci(sum(getattr(r, who) == label for r in rows), len(rows))


def summary(rows: Sequence[Graded]) -> dict[str, Any]:
    """Agreement and κ of some rows, the numeric questions and the rest apart."""
    numeric = [r for r in rows if r.numeric]
    other = [r for r in rows if not r.numeric]
    return {"n": len(rows), "agreement": estimate_json(agreement(rows)),
            "kappa": estimate_json(kappa(rows)) if rows else None,
            "numeric": estimate_json(agreement(numeric)), "other": estimate_json(agreement(other))}


def per_file(rows: Sequence[Graded]) -> list[dict[str, Any]]:
    """Each labelled file: the human labels' accuracy (the paper's) beside the grader's, and their agreement."""
    out = []
    for name in sorted({r.file for r in rows}):
        mine = [r for r in rows if r.file == name]
        out.append({"file": name, **summary(mine), "human_accuracy": estimate_json(share(mine, "correct", "human")),
                    "grader_accuracy": estimate_json(share(mine, "correct", "grade"))})
    return out


def pooled(rows: Sequence[Graded]) -> dict[str, Any]:
    """Over every row: agreement, per label, per question type, rules, decided vs guessed, the confusion matrix."""
    human, graded = [r.human for r in rows], [r.grade for r in rows]
    out: dict[str, Any] = {**summary(rows), "per_label": {}, "question_type": {}, "rules": {}}
    for name, la in label_agreement(human, graded, GRADES).items():
        out["per_label"][name] = {"support": la.support, "predicted": la.predicted, "kappa": la.kappa,
                                  "recall": estimate_json(proportion_ci(la.agreed, la.support)),
                                  "precision": estimate_json(proportion_ci(la.agreed, la.predicted))}
    for qtype in sorted({r.question_type for r in rows}):
        out["question_type"][qtype] = summary([r for r in rows if r.question_type == qtype])
    for rule in sorted({r.rule for r in rows}):
        out["rules"][rule] = estimate_json(agreement([r for r in rows if r.rule == rule]))
    out["decided"] = estimate_json(agreement([r for r in rows if r.decided]))
    out["guessed"] = estimate_json(agreement([r for r in rows if not r.decided]))
    out["confusion"] = {"labels": list(GRADES), "rows": "human", "columns": "grader",
                        "matrix": confusion_matrix(human, graded, GRADES).tolist()}
    return out


def report(rows: Sequence[Graded], grader: str, judge: str | None) -> dict[str, Any]:
    return {"grader": grader, "judge": judge, "files": per_file(rows), "pooled": pooled(rows)}


def graded_rows(files: Sequence[Path], root: Path, *, judge: Any = None, out: Path | None = None,
                concurrency: int | None = None) -> list[Graded]:
    """Every labelled answer of `files` graded through the task's `answers` option, as `score` grades it: by the
    rules alone, or with `judge` (a backend) through the engine, its calls stored in OUT/store.sqlite (default: a
    folder of the cache named by the judge) so that a rerun makes none."""
    from ...core.runner import RunOptions, run_task
    from ...core.store import RunStore
    from ...data.registry import cache_dir
    from .task import FinanceBenchTask

    folder = None
    if judge is not None:
        folder = out or cache_dir() / "grade-check" / "".join(c if c.isalnum() else "_" for c in judge.spec)[:80]
        folder.mkdir(parents=True, exist_ok=True)
    rows = []
    for path in files:
        labels = human_labels(path)
        task = FinanceBenchTask(FinanceBenchTask.parse_options({"answers": str(path),
                                                                "grader": "rules" if judge is None else "judge"}))
        samples = task.load(root)
        if folder is None:
            predictions = {s.id: {"answer": task._answers[s.id]} for s in samples}
        else:
            print(f"grade-check: {path.stem} ({files.index(path) + 1} of {len(files)}): the judge grades what the "
                  "rules leave undecided", file=sys.stderr, flush=True)
            with RunStore(folder / "store.sqlite") as store:
                result = asyncio.run(run_task(task, {"judge": judge}, store,
                                              RunOptions(data_dir=root, concurrency=concurrency),
                                              out_dir=folder / path.stem, progress=_progress_line(path.stem)))
            predictions = {r.id: r.prediction for r in result.records if r.failed is None}
        for sample in samples:
            if sample.id not in predictions or sample.id not in labels:
                continue
            grade = task.grade(sample, predictions[sample.id])
            rows.append(Graded(path.stem, sample.id, labels[sample.id], grade.label, grade.rule,
                               grade.decided or grade.rule == "judge", str(sample.metadata["question_type"]),
                               bool(sample.metadata["numeric"])))
    return rows


def _progress_line(name: str) -> Any:
    """A progress callback printing one line every 10 s at most: samples done, judge calls made and stored."""
    last = [0.0]

    def show(counters: Any) -> None:
        now = time.monotonic()
        if now - last[0] < 10 and counters.samples_done < counters.samples_total:
            return
        last[0] = now
        print(f"  {name}: {counters.samples_done}/{counters.samples_total} answers, {counters.calls} judge calls "
              f"made, {counters.cache_hits} from the store", file=sys.stderr, flush=True)

    return show


# --- printing ---------------------------------------------------------------------------------------------

def fmt(e: dict[str, Any] | None, digits: int = 3) -> str:
    if not e or not e.get("n"):
        return "—"
    lo, hi = e["ci95"]
    return f"{e['value']:.{digits}f} [{lo:.{digits}f}, {hi:.{digits}f}]"


def format_report(out: dict[str, Any]) -> str:
    grader = out["grader"] + (f" (judge {out['judge']})" if out.get("judge") else "")
    lines = [f"FinanceBench grader vs human labels — grader {grader}; 95% intervals (κ: bootstrap over answers)", "",
             f"{'file':40} {'n':>4}  {'human accuracy':22} {'grader accuracy':22} {'agreement':22} {'κ':22} "
             "numeric agreement"]
    for f in out["files"]:
        lines.append(f"{f['file']:40} {f['n']:4}  {fmt(f['human_accuracy']):22} {fmt(f['grader_accuracy']):22} "
                     f"{fmt(f['agreement']):22} {fmt(f['kappa']):22} {fmt(f['numeric'])} (n {f['numeric']['n']})")
    p = out["pooled"]
    lines += ["", f"all files: n {p['n']}, agreement {fmt(p['agreement'])}, κ {fmt(p['kappa'])}; numeric questions "
              f"{fmt(p['numeric'])} (n {p['numeric']['n']}), the rest {fmt(p['other'])} (n {p['other']['n']})",
              "per human label (recall: of the humans' label, the share the grader gave; precision: the reverse):"]
    for name, la in p["per_label"].items():
        lines.append(f"  {name:10} n {la['support']:5}  recall {fmt(la['recall'])}  precision {fmt(la['precision'])}  "
                     f"one-vs-rest κ {la['kappa']:.3f}")
    lines.append("per question type:")
    for qtype, s in p["question_type"].items():
        lines.append(f"  {qtype:20} n {s['n']:5}  agreement {fmt(s['agreement'])}  κ {fmt(s['kappa'])}")
    lines.append(f"decided by a confident rule or the judge: {fmt(p['decided'])} (n {p['decided']['n']}); "
                 f"guessed by a fallback: {fmt(p['guessed'])} (n {p['guessed']['n']})")
    lines.append("confusion (rows: human, columns: grader): " + "; ".join(
        f"{name} " + " / ".join(str(v) for v in row) for name, row in zip(p["confusion"]["labels"],
                                                                          p["confusion"]["matrix"])))
    return "\n".join(lines)
