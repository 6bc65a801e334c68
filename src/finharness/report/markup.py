"""Small HTML building blocks shared by the report sections; every value is escaped by markupsafe."""

from __future__ import annotations

import json
import math
from typing import Any, Iterable, Sequence

from markupsafe import Markup, escape

from .. import __version__
from .svg import format_value


def fmt_num(value: Any, digits: int = 0) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        if not math.isfinite(value):
            return "—"
        return f"{value:,.{digits}f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def fmt_metric(value: float | None, percent: bool = True) -> str:
    return format_value(value, percent, 1)


def fmt_ci(ci95: Sequence[float] | None, percent: bool = True) -> str:
    if not ci95 or any(v is None for v in ci95):
        return "—"
    return f"[{format_value(ci95[0], percent)}, {format_value(ci95[1], percent)}]"


def small_n_mark(metric: Any) -> Markup:
    """A '!' whose tooltip is the metric's warning (n too small for its interval's method), or nothing."""
    warning = metric.get("warning") if isinstance(metric, dict) else None
    return Markup(' <span class="warn" title="{}">!</span>').format(warning) if warning else Markup("")


def fmt_p(p: float | None) -> str:
    if p is None or not math.isfinite(p):
        return "—"
    return "<0.001" if p < 0.001 else f"{p:.3f}"


def stars(p: float | None) -> str:
    """*** p < 0.001, ** p < 0.01, * p < 0.05, else ''."""
    if p is None or not math.isfinite(p):
        return ""
    return "***" if p < 0.001 else "**" if p < 0.01 else "*" if p < 0.05 else ""


def is_percent_metric(name: str, metric: dict[str, Any] | None = None) -> bool:
    """Metrics are fractions unless they say otherwise (ratings, tokens, seconds)."""
    if metric and metric.get("value") is not None and not -1e-9 <= metric["value"] <= 1 + 1e-9:
        return False
    return not any(word in name for word in ("rating", "elo", "tokens", "seconds", "_s"))


def table(headers: Sequence[Any], rows: Iterable[Sequence[Any]], *, cls: str = "", numeric_from: int = 1,
          caption: Any = None) -> Markup:
    """A <table>; columns from `numeric_from` on are right-aligned (numbers).

    Built with escape() and f-strings rather than Markup.format: transcripts hold thousands of these."""
    def cell(tag: str, i: int, value: Any) -> str:
        return f'<{tag} class="num">{escape(value)}</{tag}>' if i >= numeric_from else f"<{tag}>{escape(value)}</{tag}>"

    head = "".join(cell("th", i, h).replace("<th", '<th scope="col"', 1) for i, h in enumerate(headers))
    body = "".join("<tr>" + "".join(cell("th" if i == 0 else "td", i, v) for i, v in enumerate(row)) + "</tr>"
                   for row in rows)
    cap = f"<caption>{escape(caption)}</caption>" if caption is not None else ""
    return Markup(f'<div class="table-wrap"><table class="{escape(cls)}">{cap}<thead><tr>{head}</tr></thead>'
                  f"<tbody>{body}</tbody></table></div>")


def section(anchor: str, title: str, *body: Any, intro: Any = None) -> Markup:
    lead = Markup('<p class="intro">{}</p>').format(intro) if intro else ""
    return Markup('<section id="{a}"><h2>{t}</h2>{lead}{body}</section>').format(
        a=anchor, t=title, lead=lead, body=Markup("").join(body))


def subsection(title: str, *body: Any, anchor: str = "") -> Markup:
    ident = Markup(' id="{}"').format(anchor) if anchor else ""
    return Markup("<h3{i}>{t}</h3>{body}").format(i=ident, t=title, body=Markup("").join(body))


def figure(chart: Markup, caption: Any = "") -> Markup:
    cap = Markup("<figcaption>{}</figcaption>").format(caption) if caption else ""
    return Markup('<figure>{chart}{cap}</figure>').format(chart=chart, cap=cap)


def details(summary: Any, *body: Any, open_: bool = False, cls: str = "") -> Markup:
    return Markup(f'<details class="{escape(cls)}"{" open" if open_ else ""}><summary>{escape(summary)}</summary>'
                  f'{"".join(escape(b) for b in body)}</details>')


def note(text: Any) -> Markup:
    return Markup('<p class="note">{}</p>').format(text)


def pre(value: Any) -> Markup:
    """Text in <pre>; non-strings as indented JSON."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, indent=1, default=str)
    return Markup(f"<pre>{escape(text)}</pre>")


def html_page(*, title: str, summary: Any, nav: Markup, body: Markup, css: str, csp: str, footer: str,
              script: str | None = None) -> str:
    """A whole self-contained page (the run report's and the scorecard's): its header, section links, body and
    footer; `script` inline, allowed by `csp`."""
    tail = Markup("<script>{}</script>").format(Markup(script)) if script else Markup("")
    return str(Markup(
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta http-equiv="Content-Security-Policy" content="{csp}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<title>{title}</title><style>{css}</style></head><body>'
        '<header><h1>{title}</h1><p>{summary}</p></header><nav aria-label="sections">{nav}</nav>'
        '<main>{body}</main><footer>Written by finharness {version}. {footer}</footer>{tail}</body></html>\n').format(
        csp=csp, title=title, css=Markup(css), summary=summary, nav=nav, body=body, version=__version__,
        footer=footer, tail=tail))
