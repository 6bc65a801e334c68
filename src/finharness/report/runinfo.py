"""How each run went (counts and timing from results.json) and the transcript browser.

The transcript browser is one <details> per sample (prompt, response, extraction, score), readable
without any script; the page's small inline script adds search and filters. Model output is
untrusted: everything is escaped by markupsafe, never inserted as markup.
"""

from __future__ import annotations

import json
from typing import Any, Mapping, Sequence

from markupsafe import Markup, escape

from .markup import details, fmt_num, note, pre, table
from .runs import RunData, by_task, display_names

HEALTH_COLUMNS: tuple[tuple[str, str, bool], ...] = (
    ("failed_samples", "failed samples", True),
    ("unparseable", "unparseable answers", True),
    ("truncated_samples", "truncated samples", True),
    ("length_stops", "cut by max_tokens", True),
    ("budget_truncations", "prompts cut to budget", True),
    ("calls", "calls made", False),
    ("cache_hits", "from the store", False),
    ("retries", "retries", True),
    ("failures", "failed calls", True),
)
"""(results.json counts key, column label, whether a non-zero value is a warning)."""


def compact(value: Any) -> str:
    """12,345 -> '12.3k'; None -> '—'."""
    if not isinstance(value, (int, float)):
        return "—"
    for size, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= size:
            return f"{value / size:.1f}{suffix}"
    return f"{value:g}"


DEFAULT_TRANSCRIPTS_PER_RUN = 2000
"""Samples shown per run in the transcript browser by default (the page stays light)."""


def _warn(text: str, warn: bool) -> Markup:
    return Markup(f'<span class="warn">{escape(text)}</span>') if warn else escape(text)


def tokens_text(c: Mapping[str, Any]) -> str:
    """'12.3k / 456', with log-likelihood and reasoning tokens when there are any."""
    text = f"{compact(c.get('prompt_tokens'))} / {compact(c.get('completion_tokens'))}"
    if c.get("tokens_evaluated"):
        text += f" ({compact(c['tokens_evaluated'])} ll)"
    if c.get("reasoning_tokens"):
        text += f" ({compact(c['reasoning_tokens'])} reasoning)"
    return text


def run_effort(r: RunData) -> tuple[Any, Any, Any]:
    """(tokens cell, wall time cell, out tokens/s) of a run: summed over every invocation when results.json has
    `cumulative` (a resumed or cached rerun spent little itself), with this invocation's own figures beneath."""
    timing, c = r.results.get("timing") or {}, r.counts
    total = r.results.get("cumulative")
    if not isinstance(total, Mapping):
        return tokens_text(c), fmt_num(timing.get("wall_s"), 1), fmt_num(timing.get("completion_tokens_per_s"), 1)
    wall, out = total.get("wall_s"), total.get("completion_tokens")
    rate = out / wall if isinstance(wall, (int, float)) and wall > 0 and isinstance(out, (int, float)) else None
    invocations = total.get("invocations")
    if not isinstance(invocations, int) or invocations <= 1:
        return tokens_text(total), fmt_num(wall, 1), fmt_num(rate, 1)
    return (Markup('{}<small class="this">{} invocations</small><small class="this">last: {}</small>').format(
                tokens_text(total), invocations, tokens_text(c)),
            Markup('{}<small class="this">last: {}</small>').format(fmt_num(wall, 1), fmt_num(timing.get("wall_s"), 1)),
            fmt_num(rate, 1))


def health_section_body(runs: Sequence[RunData]) -> Markup:
    names = display_names(runs)
    rows = []
    costs = {r.path: (r.results.get("cumulative") or {}).get("cost_usd") for r in runs}
    show_cost = any(isinstance(v, (int, float)) and v > 0 for v in costs.values())
    for r in runs:
        status = r.results.get("status", "?")
        c = r.counts
        rows.append([Markup("{}<br><small>{}</small>").format(names[r.path], r.task),
                     Markup('<span class="{}">{}</span>').format("ok" if status == "complete" else "warn", status),
                     f"{fmt_num(c.get('scored'))} / {fmt_num(c.get('samples'))}",
                     *[_warn(fmt_num(c.get(key)), warn and bool(c.get(key))) for key, _, warn in HEALTH_COLUMNS],
                     *run_effort(r), *([fmt_num(costs[r.path], 4)] if show_cost else [])])
    parts = [table(["run", "status", "scored / samples", *[label for _, label, _ in HEALTH_COLUMNS],
                    "tokens in / out", "wall time (s)", "out tokens/s", *(["cost (USD)"] if show_cost else [])],
                   rows, cls="health", numeric_from=2)]
    rules = {r.path: r.extraction_rules() for r in runs}
    for task, task_runs in by_task([r for r in runs if rules[r.path]]).items():
        names_in_task = sorted({k for r in task_runs for k in rules[r.path]}, key=lambda k: -sum(
            rules[r.path].get(k, 0) for r in task_runs))
        parts.append(details(f"Extraction rules: {task}",
                             table(["run", *names_in_task],
                                   [[names[r.path], *[fmt_num(rules[r.path].get(k, 0)) for k in names_in_task]]
                                    for r in task_runs])))
    for r in runs:
        notes = list(r.results.get("notes") or [])
        failures = list(r.counts.get("failure_examples") or [])
        if not (notes or failures):
            continue
        body = [Markup("<ul>{}</ul>").format(Markup("").join(Markup("<li>{}</li>").format(n) for n in notes))]
        if failures:
            body += [Markup("<p>Failure examples:</p>"), pre("\n".join(map(str, failures)))]
        parts.append(details(Markup("{} · {}: {} note(s), {} failure example(s)").format(
            names[r.path], r.task, len(notes), len(failures)), *body, open_=True))
    return Markup("").join(parts)


def _flags(sample: Mapping[str, Any]) -> list[str]:
    flags = []
    score = sample.get("score") or {}
    value = score.get("value")
    if sample.get("failed"):
        flags.append("failed")
    elif value is not None:
        flags.append("correct" if value >= 1 else "wrong")
    if sample.get("extraction") and not sample["extraction"].get("parsed", True):
        flags.append("unparseable")
    if sample.get("truncated"):
        flags.append("truncated")
    if sample.get("cache_hit"):
        flags.append("cached")
    return flags


def _prompt(prompt: Any) -> str:
    if isinstance(prompt, list) and all(isinstance(m, Mapping) and "content" in m for m in prompt):
        return "".join(f'<div class="msg"><span class="role">{escape(m.get("role", "?"))}</span>'
                       f'{pre(m.get("content", ""))}</div>' for m in prompt)
    return pre(prompt if prompt is not None else "")


def _short(value: Any, limit: int = 60) -> str:
    """An extracted answer for the one-line summary; a dict of readings as 'k v / k v'."""
    if value is None or value == "":
        return ""
    if isinstance(value, Mapping):
        text = " / ".join(f"{k} {v if v != '' else '∅'}" for k, v in value.items() if isinstance(v, (str, int, float)))
    else:
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def sample_details(sample: Mapping[str, Any]) -> Markup:
    """One sample as <details>; f-strings with escape() on every value (fast for thousands of samples)."""
    flags = _flags(sample)
    score = sample.get("score") or {}
    extraction = sample.get("extraction") or {}
    value = score.get("value")
    mark = "✗ failed" if sample.get("failed") else ("—" if value is None else f"{value:g}")
    badges = "".join(f'<span class="badge {f}">{f}</span>' for f in flags if f not in ("correct", "wrong"))
    verdict = "good" if "correct" in flags else "bad" if "wrong" in flags else ""
    read = _short(extraction.get("value"))
    gold = f" · gold {_short(sample['target'])}" if sample.get("target") is not None else ""
    summary = (f'<span class="sid">{escape(sample.get("id"))}</span> <span class="score {verdict}">{escape(mark)}'
               f'</span> <span class="rule">{escape(extraction.get("rule") or "")}'
               f'{escape(" → " + read if read else "")}{escape(gold)}</span> {badges}')
    body = ["<h4>Prompt</h4>", _prompt(sample.get("prompt")), "<h4>Response</h4>",
            pre(sample.get("response") if sample.get("response") is not None else "")]
    if sample.get("prediction") is not None and sample.get("prediction") != sample.get("response"):
        body += ["<h4>Prediction</h4>", pre(sample.get("prediction"))]
    if sample.get("failed"):
        body += ["<h4>Failure</h4>", pre(sample["failed"])]
    tokens = sample.get("tokens") or {}
    facts = [["extracted", json.dumps(extraction.get("value"), ensure_ascii=False)],
             ["rule", str(extraction.get("rule"))], ["parsed", str(extraction.get("parsed"))], ["score", mark],
             *[[k, f"{v:g}" if isinstance(v, (int, float)) else str(v)] for k, v in (score.get("values") or {}).items()],
             ["tokens", f"{tokens.get('prompt', 0)} prompt · {tokens.get('completion', 0)} completion"],
             ["latency", f"{sample.get('latency_s', 0)} s"], ["from store", str(bool(sample.get("cache_hit")))],
             *[[f"metadata.{k}", str(v)] for k, v in (sample.get("metadata") or {}).items()]]
    if sample.get("target") is not None:
        facts.insert(0, ["gold", json.dumps(sample["target"], ensure_ascii=False)])
    body.append(table(["", "value"], facts, cls="facts", numeric_from=2))
    calls = [t for t in sample.get("trace") or [] if t.get("kind") in ("generate", "loglikelihood") or t.get("event")]
    if len(calls) > 1 or any(t.get("event") for t in calls):
        body.append(details(f"All {len(calls)} calls and events",
                            Markup("".join(_call(i, t) for i, t in enumerate(calls, 1)))))
    return Markup(f'<details class="sample" data-flags="{" ".join(flags)}"><summary>{summary}</summary>'
                  f'{"".join(body)}</details>')


def _call(index: int, call: Mapping[str, Any]) -> str:
    if call.get("event"):
        return (f'<p class="event">{index}. {escape(call.get("role"))}: {escape(call.get("event"))} '
                f'({escape(call.get("policy", ""))}) {escape(call.get("detail", ""))}</p>')
    cached = " (from store)" if call.get("cache_hit") else ""
    head = f'<p class="call">{index}. <b>{escape(call.get("role"))}</b> {escape(call.get("kind"))}{cached}</p>'
    if call.get("failed"):
        return head + pre(call["failed"])
    response = call.get("response", call.get("logprobs"))
    return head + _prompt(call.get("prompt")) + "<p>→</p>" + pre(response if response is not None else "")


def transcripts_body(runs: Sequence[RunData], per_run: int | None = DEFAULT_TRANSCRIPTS_PER_RUN) -> Markup:
    names = display_names(runs)
    controls = Markup(
        '<div id="tx-controls" class="controls" hidden><label>Search <input id="tx-q" type="search" '
        'placeholder="text in prompt, response, id…" autocomplete="off"></label>'
        '<label><input type="checkbox" value="wrong"> wrong</label>'
        '<label><input type="checkbox" value="unparseable"> unparseable</label>'
        '<label><input type="checkbox" value="truncated"> truncated</label>'
        '<label><input type="checkbox" value="failed"> failed</label>'
        '<span id="tx-count" aria-live="polite"></span></div>'
        '<noscript><p class="note">Search needs JavaScript; every transcript below still opens on click.</p></noscript>')
    blocks = [controls]
    for r in runs:
        if not r.samples:
            blocks.append(note(Markup("{} · {}: no samples.jsonl in {}").format(names[r.path], r.task, str(r.path))))
            continue
        shown = r.samples if per_run is None else r.samples[:per_run]
        cut = note(f"Showing the first {len(shown)} of {len(r.samples)} samples.") if len(shown) < len(r.samples) \
            else Markup("")
        blocks.append(Markup('<details class="run-tx"><summary>{name} · {task} <small>({n} samples)</small></summary>'
                             '{cut}{items}</details>').format(
            name=names[r.path], task=r.task, n=len(r.samples), cut=cut,
            items=Markup("").join(sample_details(s) for s in shown)))
    return Markup("").join(blocks)
