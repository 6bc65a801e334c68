"""The scorecard written out: scorecard.html (self-contained), scorecard.md, scorecard.csv, scorecard.json, and a
terminal table that fits the terminal (rich; cells wrap, nothing is cut).

Every view shows the same things (scorecard.py builds them): the models × rows grid with CI, n, status and rank,
footnotes for the flags results.json carries, the judges' health, a rating row's table with its reference player, the
pairwise differences and what each model spent. The CSV holds the grid only (one line per cell); the JSON is the
Scorecard itself.
"""

from __future__ import annotations

import csv
import io
import json
import sys
from pathlib import Path
from typing import Any, Callable, Sequence

from markupsafe import Markup

from ..data.io import atomic_write_text
from ..report.html import CSS
from ..report.markup import details, fmt_num, fmt_p, html_page, note, section, table
from ..report.runinfo import compact
from ..report.svg import Bar, BarGroup, bar_chart, ci_strip, format_value
from ..util import output_console
from .contamination import CONTAMINATION_HEADERS, CONTAMINATION_NOTE, contamination_text
from .scorecard import Cell, Difference, Row, Scorecard

FILES: tuple[str, ...] = ("scorecard.html", "scorecard.md", "scorecard.csv", "scorecard.json")


CSV_COLUMNS: tuple[str, ...] = ("row", "benchmark", "label", "run", "kind", "metric", "direction", "model", "value",
                                "ci_low", "ci_high", "n", "status", "why", "rank", "method", "warning", "judge",
                                "run_dir", "flags")

CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'"
"""No script, nothing fetched."""

EXTRA_CSS = """
table.scorecard td{min-width:11em}
table.scorecard td .v{font-weight:650;font-size:14px}
table.scorecard td .rank{display:inline-block;margin-left:6px;font-size:11px;border-radius:9px;padding:0 6px;background:#e8f0fe;color:#174ea6}
table.scorecard td .rank.top{background:#e3f3e6;color:var(--good)}
table.scorecard td .flag{display:block;color:#7a5200;font-size:11px}
table.scorecard td .why{display:block;color:var(--bad);font-size:11px}
table.scorecard th small{display:block;color:var(--muted);font-weight:400;font-size:11px}
table.scorecard tr.composite{background:#f4f8fb}
.badge.judge{background:#efe7fb;color:#5b2a86}
.badge.standin{background:#fff4d6;color:#7a5200}
"""


# --- text of values ---------------------------------------------------------------------------------------------

def value_text(row: Row, value: float | None, signed: bool = False) -> str:
    """A row's number as printed: a percentage, a rating (whole points) or a plain number."""
    if value is None:
        return "—"
    digits = 0 if row.kind == "rating" else 1
    text = format_value(value, row.percent, digits)
    return f"+{text}" if (signed or row.metric == "rag_delta") and value > 0 else text


def ci_text(row: Row, ci95: Sequence[float] | None) -> str:
    if not ci95:
        return "—"
    digits = 0 if row.kind == "rating" else 1
    return f"[{format_value(ci95[0], row.percent, digits)}, {format_value(ci95[1], row.percent, digits)}]"


def metric_text(row: Row) -> str:
    name = {"bt_rating": "Bradley–Terry rating", "mean_of_tasks": "mean of task headlines",
            "rag_delta": "RAG − No-RAG accuracy"}.get(row.metric or "", row.metric or "—")
    return name + {"lower": " ↓", "info": " (not ranked)"}.get(row.direction, "")


def row_heading(row: Row) -> list[str]:
    """The row's label, the options that tell it apart, and its judge."""
    lines = [row.label]
    if row.run_label:
        lines.append(row.run_label)
    if row.judged:
        lines.append(f"judged by {row.judge.judge if row.judge and row.judge.judge else '?'}")
    return lines


class Footnotes:
    """Numbered notes for cell flags, each text once."""

    def __init__(self) -> None:
        self.texts: list[str] = []

    def mark(self, text: str | None) -> str:
        if not text:
            return ""
        if text not in self.texts:
            self.texts.append(text)
        return f"[{self.texts.index(text) + 1}]"


INLINE_WHY_CHARS = 60
"""A missing cell's reason up to this long stands in the cell; a longer one (an error) becomes a footnote, printed
once however many cells it explains."""


def missing_reason(cell: Cell, notes: Footnotes) -> tuple[str, str]:
    """(why, its footnote mark): a short reason has no mark and stands in the cell; a long one only its mark."""
    why = cell.why or "?"
    return why, "" if len(why) <= INLINE_WHY_CHARS else notes.mark(why)


def flag_text(cell: Cell, notes: Footnotes) -> str:
    """'flagged: unparseable, not greedy [2][3]': what makes the number mislead, each in full as a footnote; ''."""
    if not cell.flags:
        return ""
    kinds = dict.fromkeys(flag.split(":", 1)[0] if ":" in flag else "see note" for flag in cell.flags)
    return f"flagged: {', '.join(kinds)} " + "".join(notes.mark(flag) for flag in cell.flags)


def cell_lines(row: Row, cell: Cell, notes: Footnotes) -> list[str]:
    """A cell as lines: value (rank), CI and n, then status, what flags it, and a footnote mark for its warning."""
    if cell.value is None:
        why, mark = missing_reason(cell, notes)
        return ["—", f"missing {mark}" if mark else f"missing: {why}"]
    head = value_text(row, cell.value) + (f" ({cell.rank})" if cell.rank else "")
    lines = [head, f"{ci_text(row, cell.ci95)} n={fmt_num(cell.n)}"]
    mark = notes.mark(cell.warning)
    if mark:
        lines[-1] += f" {mark}"
    if cell.status == "incomplete":
        lines.append(f"incomplete: {cell.why}")
    if cell.flags:
        lines.append(flag_text(cell, notes))
    return lines


def difference_text(card: Scorecard, d: Difference) -> list[str]:
    """row, ahead − behind, Δ, 95% CI, p, test (n), separable."""
    row = card.row(d.row)
    test = d.test + (f" (n={d.n})" if d.n else "")
    return [row.label + (f" · {row.run_label}" if row.run_label else ""), f"{d.ahead} − {d.behind}",
            value_text(row, d.diff, signed=True), ci_text(row, d.ci95), fmt_p(d.p_value), test,
            "yes" if d.separable else "no (tied)"]


DIFFERENCE_HEADERS = ("row", "ahead − behind", "Δ", "95% CI of Δ", "p", "test (n)", "separable")
USAGE_HEADERS = ("model", "calls", "tokens in", "cached in", "cache writes", "tokens out", "reasoning", "ll tokens",
                 "wall s", "cost USD", "cost by role/mode")


def billed_words(billed: Any) -> str:
    """`model/batch $1.2345 (40 calls), judge/live ...`: what the calls made cost, by role and mode."""
    if not billed:
        return "—"
    return ", ".join(f"{where} " + ("unpriced" if f.get("cost_usd") is None else f"${f['cost_usd']:.4f}")
                     + f" ({f.get('calls', 0)} calls)" for where, f in sorted(billed.items()))


def usage_cells(card: Scorecard) -> list[list[str]]:
    return [[u.model, fmt_num(u.calls), compact(u.prompt_tokens), compact(u.cached_tokens),
             compact(u.cache_write_tokens), compact(u.completion_tokens),
             compact(u.reasoning_tokens), compact(u.tokens_evaluated), fmt_num(u.wall_s, 1),
             "—" if u.cost_usd is None else f"{u.cost_usd:.4f}", billed_words(u.billed)] for u in card.usage]


def health_cells(card: Scorecard) -> list[list[str]]:
    out = []
    for row in card.rows:
        if row.judge is None:
            continue
        for rate in row.judge.rates or ():
            out.append([row.label, row.judge.judge or "?", rate.name,
                        "—" if rate.value is None else format_value(rate.value, True, 1),
                        "—" if rate.ci95 is None else f"[{format_value(rate.ci95[0], True)}, "
                                                      f"{format_value(rate.ci95[1], True)}]",
                        f"{rate.hits}/{rate.n}"])
    return out


HEALTH_HEADERS = ("row", "judge", "rate", "value", "95% CI", "hits/n")


def ratings_title(card: Scorecard) -> str:
    """'NAME ratings': the rating table's heading, after its row's benchmark."""
    return f"{card.ratings.benchmark} ratings" if card.ratings is not None else "Ratings"


def rating_cells(card: Scorecard) -> list[list[str]]:
    if card.ratings is None:
        return []
    return [[p.name + (" [reference]" if p.reference else ""), fmt_num(p.rating, 0),
             "—" if p.ci95 is None else f"[{p.ci95[0]:,.0f}, {p.ci95[1]:,.0f}]", f"{p.wins}/{p.ties}/{p.losses}"]
            for p in card.ratings.players]


RATING_HEADERS = ("player", "rating", "95% CI", "W/T/L")


def judge_notes(card: Scorecard) -> list[str]:
    return [f"{row.label}: {text}" for row in card.rows if row.judge for text in row.judge.notes]


def about_notes(card: Scorecard) -> list[str]:
    return [f"{row.label}: {row.about}" for row in card.rows if row.about]


def summary_line(card: Scorecard) -> str:
    parts = [f"scorecard: {card.title}", f"from {card.source}"]
    if card.status:
        parts.append(f"status {card.status}" + (" (PARTIAL)" if card.partial else ""))
    parts += [f"{role} {spec}" for role, spec in card.roles.items() if spec]
    return " · ".join(parts)


# --- terminal ---------------------------------------------------------------------------------------------------

def print_scorecard(card: Scorecard, *, file: Any = None, width: int | None = None) -> None:
    """The scorecard as rich tables `width` columns wide (default: util.terminal_width()); cells wrap, never cut."""
    from rich.table import Table

    console = output_console(file=file or sys.stdout, width=width, markup=False, highlight=False, emoji=False,
                             soft_wrap=False)

    def new_table(title: str, headers: Sequence[str], numeric_from: int = 99) -> Table:
        t = Table(title=title, title_justify="left", show_lines=True)
        for i, h in enumerate(headers):
            t.add_column(h, overflow="fold", justify="right" if i >= numeric_from else "left")
        return t

    console.print(summary_line(card))
    if card.partial:
        console.print(f"PARTIAL: {card.partial}")
    notes = Footnotes()
    grid = new_table("models × rows (value (rank), [95% CI] n)", ["row", "number", *card.models, "ranking"])
    for row in card.rows:
        grid.add_row("\n".join(row_heading(row)), metric_text(row),
                     *["\n".join(cell_lines(row, card.cell(row.id, m), notes)) for m in card.models],
                     row.ranking or "—")
    console.print(grid)
    for i, text in enumerate(notes.texts, 1):
        console.print(f"[{i}] {text}")
    for text in about_notes(card) + judge_notes(card):
        console.print(f"· {text}")
    if (rows := health_cells(card)):
        t = new_table("judge health", HEALTH_HEADERS, 3)
        for r in rows:
            t.add_row(*r)
        console.print(t)
    if (rows := rating_cells(card)):
        t = new_table(f"{card.ratings.benchmark} Bradley–Terry ratings ({card.ratings.n_matches} matches, "  # type: ignore[union-attr]
                      f"{card.ratings.bootstrap_rounds} bootstrap rounds)", RATING_HEADERS, 1)  # type: ignore[union-attr]
        for r in rows:
            t.add_row(*r)
        console.print(t)
    if card.differences:
        t = new_table("pairwise differences (paired on the items both scored)", DIFFERENCE_HEADERS, 2)
        for d in card.differences:
            t.add_row(*difference_text(card, d))
        console.print(t)
    if card.contamination:
        t = new_table("contamination evidence (membership probes, validated per model)", CONTAMINATION_HEADERS, 3)
        for r in contamination_text(card):
            t.add_row(*r)
        console.print(t)
        console.print(f"· {CONTAMINATION_NOTE}")
    if card.usage:
        t = new_table("usage (every invocation)", USAGE_HEADERS, 1)
        for r in usage_cells(card):
            t.add_row(*r)
        console.print(t)
    for text in card.notes:
        console.print(f"! {text}")


# --- markdown and CSV -------------------------------------------------------------------------------------------

def _md(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _md_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[str]:
    return ["| " + " | ".join(_md(h) for h in headers) + " |", "|" + "---|" * len(headers),
            *["| " + " | ".join(_md(c) for c in r) + " |" for r in rows], ""]


def render_markdown(card: Scorecard) -> str:
    notes = Footnotes()
    lines = [f"# Scorecard: {card.title}", "", summary_line(card), ""]
    if card.partial:
        lines += [f"**PARTIAL**: {_md(card.partial)}", ""]
    grid = [["<br>".join(row_heading(row)), metric_text(row),
             *["<br>".join(cell_lines(row, card.cell(row.id, m), notes)) for m in card.models], row.ranking or "—"]
            for row in card.rows]
    lines += _md_table(["row", "number", *card.models, "ranking"], grid)
    lines += [f"[{i}] {text}  " for i, text in enumerate(notes.texts, 1)] + ([""] if notes.texts else [])
    lines += [f"- {text}" for text in about_notes(card) + judge_notes(card)] + [""]
    for title, headers, rows in (("Judge health", HEALTH_HEADERS, health_cells(card)),
                                 (ratings_title(card), RATING_HEADERS, rating_cells(card)),
                                 ("Pairwise differences", DIFFERENCE_HEADERS,
                                  [difference_text(card, d) for d in card.differences]),
                                 ("Contamination evidence", CONTAMINATION_HEADERS, contamination_text(card)),
                                 ("Usage (every invocation)", USAGE_HEADERS, usage_cells(card))):
        if rows:
            lines += [f"## {title}", "", *_md_table(headers, rows)]
            if title == "Contamination evidence":
                lines += [CONTAMINATION_NOTE, ""]
    if card.notes:
        lines += ["## Notes", "", *[f"- {_md(n)}" for n in card.notes], ""]
    return "\n".join(lines)


def render_csv(card: Scorecard) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for row in card.rows:
        for model in card.models:
            c = card.cell(row.id, model)
            writer.writerow([row.id, row.benchmark, row.label, row.run_label, row.kind, row.metric, row.direction,
                             model, "" if c.value is None else repr(c.value), *(("", "") if c.ci95 is None else
                                                                               (repr(c.ci95[0]), repr(c.ci95[1]))),
                             "" if c.n is None else c.n, c.status, c.why or "", c.rank or "", c.method or "",
                             c.warning or "", (row.judge.judge or "") if row.judge else "", c.run or "",
                             "; ".join(c.flags)])
    return buffer.getvalue()


def render_json(card: Scorecard) -> str:
    return json.dumps(card.to_json(), ensure_ascii=False, indent=2, allow_nan=False) + "\n"


# --- HTML -------------------------------------------------------------------------------------------------------

def _cell_html(row: Row, cell: Cell, notes: Footnotes) -> Markup:
    if cell.value is None:
        why, mark = missing_reason(cell, notes)
        if not mark:
            return Markup('—<span class="why">missing: {}</span>').format(why)
        return Markup('—<span class="why" title="{t}">missing {m} see below</span>').format(t=why, m=mark)
    domain = (0.0, 1.0) if row.percent and row.metric != "rag_delta" else None
    rank = Markup("")
    if cell.rank:
        rank = Markup('<span class="rank{top}" title="rank within the row">{r}</span>').format(
            top=" top" if cell.rank.lstrip("=") == "1" else "", r=cell.rank)
    parts = [Markup('<span class="v">{}</span>{}').format(value_text(row, cell.value), rank),
             Markup('<span class="ci">{} n={}</span>').format(ci_text(row, cell.ci95), fmt_num(cell.n))]
    if domain is not None:
        parts.append(ci_strip(cell.value, cell.ci95, domain, label=f"{cell.model} · {row.label}", width=110))
    if cell.status == "incomplete":
        parts.append(Markup('<span class="why">incomplete: {}</span>').format(cell.why))
    if (mark := notes.mark(cell.warning)):
        parts.append(Markup('<span class="flag" title="{t}">{m} see below</span>').format(m=mark, t=cell.warning))
    if cell.flags:
        parts.append(Markup('<span class="why" title="{t}">{f}</span>').format(t="; ".join(cell.flags),
                                                                             f=flag_text(cell, notes)))
    return Markup("").join(parts)


def _row_html(row: Row) -> Markup:
    badges = Markup("")
    if row.judged:
        badges += Markup('<span class="badge judge">judged by {}</span>').format(
            row.judge.judge if row.judge and row.judge.judge else "?")
    if row.standin:
        badges += Markup('<span class="badge standin">stand-in: {}</span>').format(row.standin)
    extra = Markup("<small>{}</small>").format(row.run_label) if row.run_label else Markup("")
    return Markup("{label}{extra}{badges}").format(label=row.label, extra=extra, badges=badges)


def _grid_html(card: Scorecard) -> tuple[Markup, Footnotes]:
    notes = Footnotes()
    head = "".join(f'<th scope="col">{Markup.escape(h)}</th>' for h in ["row", "number", *card.models, "ranking"])
    body = []
    for row in card.rows:
        cells = "".join(f"<td>{_cell_html(row, card.cell(row.id, m), notes)}</td>" for m in card.models)
        body.append(f'<tr class="{Markup.escape(row.kind)}"><th scope="row">{_row_html(row)}</th>'
                    f"<td>{Markup.escape(metric_text(row))}</td>{cells}<td>{Markup.escape(row.ranking or '—')}</td></tr>")
    grid = Markup(f'<div class="table-wrap"><table class="scorecard"><thead><tr>{head}</tr></thead>'
                  f'<tbody>{"".join(body)}</tbody></table></div>')
    return grid, notes


def _charts(card: Scorecard) -> Markup:
    """One bar chart of the percentage rows (a bar per model, CI whiskers) and one of the ratings (reference
    included)."""
    rows = [r for r in card.rows if r.percent and r.metric != "rag_delta"]
    parts = []
    if rows:
        groups = [BarGroup(r.label + (f" · {r.run_label}" if r.run_label else ""),
                           tuple(Bar(c.value, c.ci95, c.n) if c.value is not None else None
                                 for c in (card.cell(r.id, m) for m in card.models))) for r in rows]
        parts.append((bar_chart("Headline per row and model, with 95% intervals", groups, card.models, percent=True,
                                desc="One group of bars per scorecard row, one bar per model"),
                      "Each row's number per model (whiskers: 95% intervals)."))
    if card.ratings is not None and card.ratings.players:
        players = card.ratings.players
        parts.append((bar_chart(f"{card.ratings.benchmark} Bradley–Terry ratings with 95% bootstrap intervals",
                                [BarGroup(p.name + (" [reference]" if p.reference else ""),
                                          (Bar(p.rating, p.ci95, p.wins + p.ties + p.losses),)) for p in players],
                                percent=False, baseline=1000.0,
                                desc=f"{card.ratings.n_matches} matches; bars start at 1000 (the mean rating)"),
                      f"{card.ratings.benchmark} Bradley–Terry ratings from {card.ratings.n_matches} matches, the "
                      "reference included; bars start at 1000, the mean rating."))
    return Markup("").join(Markup("<figure>{}<figcaption>{}</figcaption></figure>").format(p, c) for p, c in parts)


def doubts_html(card: Scorecard) -> Markup:
    doubts = [d for d in card.differences if d.warning]
    if not doubts:
        return Markup("")
    items = Markup("").join(Markup("<li>{} · {} − {}: {}</li>").format(card.row(d.row).label, d.ahead, d.behind,
                                                                       d.warning) for d in doubts)
    return details(f"Why to doubt some of these ({len(doubts)})", Markup("<ul>{}</ul>").format(items))


def render_html(card: Scorecard) -> str:
    grid, notes = _grid_html(card)
    footnotes = Markup("").join(Markup('<p class="note">[{}] {}</p>').format(i, t) for i, t in enumerate(notes.texts, 1))
    about = Markup("<ul>{}</ul>").format(Markup("").join(Markup("<li>{}</li>").format(t)
                                                         for t in about_notes(card) + judge_notes(card)))
    sections = [section("grid", "Models × rows", grid, footnotes, about, _charts(card),
                        intro="Each cell: the row's number for the model, its 95% interval and n; the badge is its "
                              "rank within the row ('=k': the data do not separate it from another model). Ranks "
                              "only separate what a paired test (or non-overlapping intervals) separates.")]
    if (rows := health_cells(card)):
        sections.append(section("judges", "Judge health", table(HEALTH_HEADERS, rows, numeric_from=3),
                                *[note(t) for t in judge_notes(card)]))
    if (rows := rating_cells(card)):
        gaps = [difference_text(card, g)[1:] for g in card.ratings.gaps]  # type: ignore[union-attr]
        sections.append(section("ratings", ratings_title(card), table(RATING_HEADERS, rows, numeric_from=1),
                                details(f"Gaps between neighbours ({len(gaps)})",
                                        table(DIFFERENCE_HEADERS[1:], gaps, numeric_from=1)) if gaps else ""))
    if card.differences:
        sections.append(section("differences", "Pairwise differences",
                                table(DIFFERENCE_HEADERS, [difference_text(card, d) for d in card.differences],
                                      numeric_from=2),
                                doubts_html(card)))
    if card.contamination:
        sections.append(section("contamination", "Contamination evidence",
                                table(CONTAMINATION_HEADERS, contamination_text(card), numeric_from=3),
                                intro=CONTAMINATION_NOTE))
    if card.usage:
        sections.append(section("usage", "Usage", table(USAGE_HEADERS, usage_cells(card), numeric_from=1),
                                intro="Summed over every invocation (a resumed run counts what it spent before)."))
    if card.notes:
        sections.append(section("notes", "Notes", *[note(t) for t in card.notes]))
    nav = Markup("").join(Markup('<a href="#{a}">{t}</a>').format(a=a, t=t) for a, t in (
        ("grid", "Models × rows"), ("judges", "Judge health"), ("ratings", ratings_title(card)),
        ("differences", "Pairwise differences"), ("contamination", "Contamination"), ("usage", "Usage"),
        ("notes", "Notes"))
        if any(f'id="{a}"' in s for s in sections))
    if card.partial:
        sections.insert(0, section("partial", "Partial", note(f"PARTIAL: {card.partial}")))
    return html_page(title=f"finharness scorecard: {card.title}", summary=summary_line(card), nav=nav,
                     body=Markup("").join(sections), css=CSS + EXTRA_CSS, csp=CSP,
                     footer="Self-contained: no network, no script, no external files.")


RENDERERS: dict[str, Callable[[Scorecard], str]] = {"scorecard.html": render_html, "scorecard.md": render_markdown,
                                                    "scorecard.csv": render_csv, "scorecard.json": render_json}


def write_scorecard(card: Scorecard, out_dir: str | Path) -> list[Path]:
    """scorecard.html, .md, .csv and .json into `out_dir` (each written atomically); returns the paths."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for name in FILES:
        atomic_write_text(out / name, RENDERERS[name](card))
        paths.append(out / name)
    return paths
