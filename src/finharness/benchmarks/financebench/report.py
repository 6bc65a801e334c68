"""FinanceBench's section of the HTML report: the grades per run (correct / incorrect / refusal, by question type),
and in agent mode each episode whole: every model call with its tokens, every tool call with its arguments and
result, how the episode stopped. Reads results.json (`metrics`, `groups`, `extra.grades`, `extra.agent`) and
samples.jsonl (`prediction.episode`, `extraction.value`)."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from markupsafe import Markup

from ...report.markup import details, fmt_num, note, pre, subsection, table
from ...report.runs import RunData, display_names
from ...report.sections import ReportSection, generic_section, value_cell

EPISODES_SHOWN = 40
"""Episodes shown per run (the rest are in samples.jsonl)."""


def grades_table(runs: Sequence[RunData]) -> Markup:
    names = display_names(runs)
    rows = []
    for run in runs:
        extra = run.results.get("extra") or {}
        rows.append([names[run.path], extra.get("paper_mode") or "agent", value_cell(run.metric("accuracy")),
                     value_cell(run.metric("incorrect")), value_cell(run.metric("refusal")),
                     ", ".join(f"{k} {v}" for k, v in sorted((extra.get("grades") or {}).items()))])
    return table(["run", "configuration", "correct", "incorrect", "refusal", "grades"], rows, numeric_from=2)


def _step(index: int, step: Mapping[str, Any]) -> Markup:
    head = Markup("step {i}: {p} prompt + {c} completion tokens, {f}").format(
        i=index + 1, p=fmt_num(step.get("prompt_tokens")), c=fmt_num(step.get("completion_tokens")),
        f=step.get("finish_reason"))
    parts = [Markup("<p>{}</p>").format(head)]
    if step.get("text"):
        parts.append(pre(step["text"]))
    if step.get("parse_error"):
        parts.append(note(f"tool call not readable: {step['parse_error']}"))
    for tool in step.get("tools") or ():
        label = "error" if tool.get("error") else "result"
        parts.append(Markup("<p><b>{n}</b>({a}) → {l}</p>").format(n=tool.get("name"), a=tool.get("arguments"),
                                                                   l=label))
        parts.append(pre(tool.get("result", "")))
    return Markup("").join(parts)


def episode_view(sample: Mapping[str, Any]) -> Markup | None:
    prediction = sample.get("prediction")
    episode = prediction.get("episode") if isinstance(prediction, Mapping) else None
    if not episode:
        return None
    summary = episode.get("summary") or {}
    grade = (sample.get("extraction") or {}).get("value")
    title = (f"{sample.get('id')}: {grade}, {episode.get('stop')} after {summary.get('steps')} steps, "
             f"{summary.get('tool_calls')} tool calls, {fmt_num(summary.get('tokens'))} tokens")
    body = [_step(i, s) for i, s in enumerate(episode.get("steps") or ())]
    body.append(Markup("<p><b>answer</b></p>") + pre(episode.get("answer") or "(none: gave up)"))
    body.append(Markup("<p><b>gold</b></p>") + pre(sample.get("target") or ""))
    return details(title, *body)


def episodes(run: RunData) -> Markup | None:
    views = [v for v in (episode_view(s) for s in run.samples) if v is not None]
    if not views:
        return None
    agent = (run.results.get("extra") or {}).get("agent") or {}
    stops = ", ".join(f"{k} {v}" for k, v in sorted((agent.get("stops") or {}).items()))
    calls = ", ".join(f"{k} {v}" for k, v in sorted((agent.get("calls_by_tool") or {}).items()))
    intro = note(f"stops: {stops}; tool calls: {calls}; {len(views)} episodes"
                 + (f", the first {EPISODES_SHOWN} shown" if len(views) > EPISODES_SHOWN else ""))
    return subsection(f"Episodes of {run.name}", intro, *views[:EPISODES_SHOWN])


def financebench_section(runs: Sequence[RunData]) -> Markup:
    parts = [note("Grades as the paper's human reviewers gave them (correct, incorrect, refusal), reproduced by "
                  "finharness's grader (the run's grader is named in its notes; its agreement with the released "
                  "human labels: docs/benchmarks/financebench.md)."), grades_table(runs), generic_section(runs)]
    parts += [view for view in (episodes(run) for run in runs) if view is not None]
    return Markup("").join(parts)


SECTION = ReportSection("FinanceBench", applies=lambda task: task == "financebench", render=financebench_section)
