"""Hand-written inline SVG: horizontal bar charts with 95% CI whiskers, and heatmaps with a legend.

No chart library and no script: each chart is one <svg role="img"> with a <title> and <desc>,
and every bar or cell carries its own <title> (a tooltip in browsers, read by screen readers).
Every label goes through markupsafe, so text from runs (model names, categories) stays text.
"""

from __future__ import annotations

import hashlib
import math
import unicodedata
from dataclasses import dataclass
from typing import Sequence

from markupsafe import Markup

PALETTE: tuple[str, ...] = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#8C6D31",
                            "#595959")
"""Okabe–Ito colours (safe for colour-blind readers), yellow swapped for darker tones that read on white."""

VIRIDIS: tuple[tuple[float, str], ...] = ((0.0, "#440154"), (0.25, "#3b528b"), (0.5, "#21918c"),
                                          (0.75, "#5ec962"), (1.0, "#fde725"))
"""Anchors of the viridis colour map (perceptually uniform, readable in grey)."""

FONT = "system-ui, -apple-system, 'Segoe UI', 'Noto Sans', 'Noto Sans CJK SC', sans-serif"
LABEL_SIZE = 12
"""Font size of labels, in px."""

LABEL_GAP = 8.0
"""Space between the end of a right-aligned label and what it labels, in px."""

LABEL_MARGIN = 6.0
"""Space left of the longest label, in px: a label column is its longest label plus both."""

MAX_LABEL_W = 400.0
"""Longest label printed whole, in px (about 55 Latin or 33 Chinese characters); a longer one is cut with an
ellipsis and kept whole in its <title>."""

MIN_PLOT_W = 320.0
"""Narrowest plot area of a bar chart, in px: long labels widen the chart (it scales down to fit the page)."""

NO_DATA = "#e6e6e6"
"""Fill of a heatmap cell without a value."""


# Advance widths (in em) of printable ASCII in DejaVu Sans, rounded up to 0.01: the font that `system-ui` and
# `sans-serif` resolve to on Debian (and in the headless browser of the tests), and wider than Segoe UI, San
# Francisco or Noto Sans, so a label sized from these fits wherever the report is opened. A flat 0.6 em was too
# narrow for lower-case text ('embedded' is 5.4 em), and the first letters of right-aligned labels were cut.
_ASCII_EM: dict[str, float] = {ch: em for em, chars in (
    (0.28, "'ijl"), (0.30, "IJ"), (0.32, " ,."), (0.34, "/:;\\|"), (0.36, "f-"), (0.40, "()[]t!"), (0.42, "r"),
    (0.46, '"'), (0.50, "*_`"), (0.53, "sz?"), (0.55, "c"), (0.56, "L"), (0.58, "Fk"), (0.60, "vxyP"),
    (0.62, "TYaoe"), (0.64, "ESbdghnpqu$0123456789{}"), (0.66, "K"), (0.69, "AVBRXZ"), (0.70, "C"), (0.74, "U"),
    (0.76, "HN"), (0.78, "DG&"), (0.79, "OQ"), (0.82, "w"), (0.84, "#+<=>^~"), (0.87, "M"), (0.95, "%"),
    (0.98, "m"), (1.00, "W@")) for ch in chars}
_OTHER_EM: dict[str, float] = {"·": 0.32, "–": 0.5, "—": 1.0, "…": 1.0, "×": 0.84, "±": 0.84, "≥": 0.84, "≤": 0.84,
                               "→": 0.84}
WIDE_EM = 1.0
"""East Asian wide and full-width characters (CJK, kana, Hangul, full-width punctuation) take a full em
(Noto Sans CJK, which the report's font list names and `make sysdeps` installs)."""
OTHER_EM = 0.7
"""Any other character (accented Latin, Greek, Cyrillic...): a generous average."""


def char_width(ch: str) -> float:
    """Estimated advance width of one character, in em."""
    if ch in _ASCII_EM:
        return _ASCII_EM[ch]
    if ch in _OTHER_EM:
        return _OTHER_EM[ch]
    if unicodedata.east_asian_width(ch) in ("W", "F"):
        return WIDE_EM
    if unicodedata.combining(ch) or unicodedata.category(ch) in ("Mn", "Me", "Cf"):
        return 0.0
    return OTHER_EM


def text_width(text: str, size: float = LABEL_SIZE) -> float:
    """Estimated rendered width in px, on the generous side: East Asian wide characters take a full em, about
    twice a Latin letter; Latin characters use the widths of DejaVu Sans (see `_ASCII_EM`)."""
    return size * sum(char_width(ch) for ch in text)


def clip_text(text: str, max_px: float, size: float = LABEL_SIZE) -> str:
    """`text` cut with an ellipsis so that it fits `max_px` (the full text stays in the <title>)."""
    if text_width(text, size) <= max_px:
        return text
    out, used = "", 0.0  # used: the width of `out` in em, summed in text_width's order
    ellipsis = char_width("…")
    for ch in text:
        advance = char_width(ch)
        if size * (used + advance + ellipsis) > max_px:
            break
        out += ch
        used += advance
    return out + "…"


def format_value(value: float | None, percent: bool, digits: int = 1) -> str:
    if value is None or not math.isfinite(value):
        return "—"
    return f"{100 * value:.{digits}f}%" if percent else f"{value:,.{digits}f}"


def hex_to_rgb(colour: str) -> tuple[int, int, int]:
    return int(colour[1:3], 16), int(colour[3:5], 16), int(colour[5:7], 16)


def viridis(t: float) -> str:
    """The viridis colour at t in [0, 1] (linear between anchors)."""
    t = min(1.0, max(0.0, t))
    for (t0, c0), (t1, c1) in zip(VIRIDIS, VIRIDIS[1:]):
        if t <= t1:
            f = (t - t0) / (t1 - t0)
            rgb = [round(a + f * (b - a)) for a, b in zip(hex_to_rgb(c0), hex_to_rgb(c1))]
            return "#{:02x}{:02x}{:02x}".format(*rgb)
    return VIRIDIS[-1][1]


def ink_on(fill: str) -> str:
    """Black or white text, whichever reads better on `fill` (relative luminance)."""
    r, g, b = (c / 255 for c in hex_to_rgb(fill))
    return "#111111" if 0.2126 * r + 0.7152 * g + 0.0722 * b > 0.5 else "#ffffff"


def nice_ticks(low: float, high: float, count: int = 5, integer: bool = False) -> list[float]:
    """Round tick positions covering [low, high] (steps of 1, 2, 2.5 or 5 times a power of ten); `integer`: whole
    steps only (counts: 0 1 2, never 0 0.5 1)."""
    if high <= low:
        return [low]
    raw = (high - low) / max(1, count)
    if integer:
        raw = max(raw, 1.0)
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw and not (integer and m == 2.5 and power < 10))
    first = math.ceil(low / step - 1e-9) * step
    ticks = []
    x = first
    while x <= high + 1e-9 * step:
        ticks.append(round(x, 10))
        x += step
    return ticks


def tick_labels(ticks: Sequence[float], percent: bool) -> list[str]:
    """The tick values as text with the fewest decimals that write each one exactly (0.0 0.5 1.0, never 0 0 1:
    every label distinct and true)."""
    shown = [100 * t if percent else t for t in ticks]
    digits = next((d for d in range(5) if all(abs(round(v, d) - v) < 1e-9 * max(1.0, abs(v)) for v in shown)), 4)
    return [format_value(t, percent, digits) for t in ticks]


def chart_id(*parts: object) -> str:
    """A stable id for gradients and titles (same chart, same id; different charts differ)."""
    return "c" + hashlib.sha1(repr(parts).encode()).hexdigest()[:10]


def _svg_open(width: float, height: float, title: str, desc: str, uid: str) -> Markup:
    return Markup('<svg class="chart" role="img" viewBox="0 0 {w} {h}" '
                  'width="{w}" height="{h}" style="max-width:100%;height:auto" font-family="{font}" '
                  'font-size="{size}" aria-labelledby="{uid}-t {uid}-d"><title id="{uid}-t">{title}</title>'
                  '<desc id="{uid}-d">{desc}</desc>').format(w=round(width), h=round(height), font=FONT,
                                                             size=LABEL_SIZE, uid=uid, title=title, desc=desc)


@dataclass(frozen=True)
class Bar:
    """One bar: a value with its interval."""

    value: float | None
    """Bar length (None: no bar, shown as '—')."""

    ci95: tuple[float, float] | None = None
    """Whisker ends (None: no whisker)."""

    n: int | None = None
    """Items behind the value, shown in the tooltip."""

    note: str = ""
    """Extra text after the value label (e.g. significance stars) and in the tooltip."""


@dataclass(frozen=True)
class BarGroup:
    """A labelled group of bars, one per series (a model, with one bar per scoring mode)."""

    label: str
    """Shown left of the group."""

    bars: tuple[Bar | None, ...]
    """One per series, in series order; None leaves a gap."""


def bar_chart(title: str, groups: Sequence[BarGroup], series: Sequence[str] = ("",), *, percent: bool = True,
              domain: tuple[float, float] | None = None, baseline: float | None = None, width: int = 760,
              desc: str = "", integer: bool | None = None) -> Markup:
    """Horizontal bars with CI whiskers; several series per group get a legend.

    `domain` defaults to [0, 1] for percentages and to the data range (with the CIs) otherwise;
    bars start at `baseline` (default: the domain's low end or 0), so ratings can start at 1000.
    `integer`: whole-number axis ticks (default: for a non-percent axis spanning 2 or more)."""
    uid = chart_id("bar", title, [g.label for g in groups], series)
    bars = [b for g in groups for b in g.bars if b is not None and b.value is not None]
    lows = [min(b.value, b.ci95[0]) if b.ci95 else b.value for b in bars]
    highs = [max(b.value, b.ci95[1]) if b.ci95 else b.value for b in bars]
    if domain is None:
        if percent:
            domain = (0.0, 1.0)
        elif bars:
            lo, hi = min(lows), max(highs)
            pad = 0.08 * (hi - lo or abs(hi) or 1.0)
            domain = (lo - pad if baseline is not None or lo < 0 else 0.0, hi + pad)
        else:
            domain = (0.0, 1.0)
    start = baseline if baseline is not None else max(domain[0], min(0.0, domain[1]))
    # the label column fits the longest label, the value column the longest value text; the plot keeps the rest
    # of `width` but at least MIN_PLOT_W, so long labels widen the chart instead of squeezing its bars
    label_w = label_column_width([g.label for g in groups])
    value_w = max([text_width(_value_text(b, percent)) for b in bars] + [40.0]) + 5 + LABEL_MARGIN
    plot_w = max(MIN_PLOT_W, width - label_w - value_w)
    legend_x = [label_w]  # where each legend entry starts; the last item is where one more would start
    for name in series:
        legend_x.append(legend_x[-1] + (16 + text_width(name) + 18))
    legend_end = legend_x[-1] - 18 + LABEL_MARGIN
    width = max(label_w + plot_w + value_w, legend_end if len(series) > 1 else 0.0)
    bar_h, bar_gap, group_gap = 14.0, 3.0, 12.0
    legend_h = 22.0 if len(series) > 1 else 0.0
    axis_h = 22.0
    group_h = len(series) * (bar_h + bar_gap) - bar_gap
    height = legend_h + axis_h + len(groups) * (group_h + group_gap) + 8

    def x_of(v: float) -> float:
        v = min(domain[1], max(domain[0], v))
        return label_w + plot_w * (v - domain[0]) / (domain[1] - domain[0] or 1.0)

    parts = [_svg_open(width, height, title, desc or title, uid)]
    if len(series) > 1:
        for i, (name, x) in enumerate(zip(series, legend_x)):
            parts.append(Markup('<rect x="{x}" y="4" width="12" height="12" rx="2" fill="{c}"/>'
                                '<text x="{tx}" y="14.5">{name}</text>').format(
                x=round(x, 1), c=PALETTE[i % len(PALETTE)], tx=round(x + 16, 1), name=name))
    top = legend_h + axis_h
    bottom = height - 8
    if integer is None:
        integer = not percent and domain[1] - domain[0] >= 2
    ticks = nice_ticks(*domain, integer=integer)
    for tick, text in zip(ticks, tick_labels(ticks, percent)):
        x = x_of(tick)
        parts.append(Markup('<line x1="{x}" x2="{x}" y1="{y0}" y2="{y1}" stroke="#e3e3e3"/>'
                            '<text x="{x}" y="{ty}" text-anchor="middle" fill="#555">{label}</text>').format(
            x=round(x, 1), y0=top - 4, y1=bottom, ty=top - 8, label=text))
    parts.append(Markup('<line x1="{x}" x2="{x}" y1="{y0}" y2="{y1}" stroke="#888"/>').format(
        x=round(x_of(start), 1), y0=top - 4, y1=bottom))
    y = top
    for group in groups:
        parts.append(Markup('<text class="label" x="{x}" y="{y}" text-anchor="end" dominant-baseline="middle">'
                            '<title>{full}</title>{label}</text>').format(
            x=round(label_w - LABEL_GAP, 1), y=round(y + group_h / 2, 1), full=group.label,
            label=clip_text(group.label, label_w - LABEL_GAP - LABEL_MARGIN)))
        for i, bar in enumerate(group.bars):
            by = y + i * (bar_h + bar_gap)
            if bar is None:
                continue
            parts.append(_bar(bar, series[i] if i < len(series) else "", group.label, PALETTE[i % len(PALETTE)],
                              x_of, start, by, bar_h, percent))
        y += group_h + group_gap
    parts.append(Markup("</svg>"))
    return Markup("").join(parts)


def label_column_width(labels: Sequence[str], size: float = LABEL_SIZE, minimum: float = 40.0) -> float:
    """Width of a column of right-aligned labels: the longest label (at most MAX_LABEL_W) plus LABEL_MARGIN on
    its left and LABEL_GAP on its right, so that none starts left of the drawing."""
    return min(MAX_LABEL_W, max([text_width(t, size) for t in labels] + [minimum])) + LABEL_GAP + LABEL_MARGIN


def _value_text(bar: Bar, percent: bool) -> str:
    """The text printed right of a bar."""
    return format_value(bar.value, percent) + (f" {bar.note}" if bar.note else "")


def _bar(bar: Bar, series: str, group: str, colour: str, x_of, start: float, y: float, h: float,
         percent: bool) -> Markup:
    name = f"{group} — {series}" if series else group
    if bar.value is None:
        return Markup('<g class="bar"><title>{name}: no value</title><text x="{x}" y="{y}" '
                      'dominant-baseline="middle" fill="#777">—</text></g>').format(
            name=name, x=round(x_of(start) + 4, 1), y=round(y + h / 2, 1))
    ci = (f" [{format_value(bar.ci95[0], percent)}, {format_value(bar.ci95[1], percent)}]"
          if bar.ci95 else "")
    n = f", n={bar.n}" if bar.n is not None else ""
    note = f" {bar.note}" if bar.note else ""
    tooltip = f"{name}: {format_value(bar.value, percent)}{ci}{n}{note}"
    x0, x1 = sorted((x_of(start), x_of(bar.value)))
    out = [Markup('<g class="bar"><title>{t}</title><rect x="{x}" y="{y}" width="{w}" height="{h}" '
                  'fill="{c}" rx="1.5"/>').format(t=tooltip, x=round(x0, 1), y=round(y, 1),
                                                  w=round(max(x1 - x0, 0.8), 1), h=h, c=colour)]
    right = x1
    if bar.ci95:
        lo, hi = x_of(bar.ci95[0]), x_of(bar.ci95[1])
        cy = y + h / 2
        out.append(Markup('<path class="whisker" d="M{lo} {cy}H{hi}M{lo} {t}V{b}M{hi} {t}V{b}" stroke="#222" '
                          'stroke-width="1.3" fill="none"/>').format(
            lo=round(lo, 1), hi=round(hi, 1), cy=round(cy, 1), t=round(cy - 4, 1), b=round(cy + 4, 1)))
        right = max(right, hi)
    out.append(Markup('<text x="{x}" y="{y}" dominant-baseline="middle" fill="#222">{v}</text></g>').format(
        x=round(right + 5, 1), y=round(y + h / 2, 1), v=_value_text(bar, percent)))
    return Markup("").join(out)


@dataclass(frozen=True)
class Cell:
    """One heatmap cell."""

    value: float | None
    """Colour value (None: the 'no data' colour)."""

    text: str | None = None
    """Printed in the cell (default: the formatted value)."""

    tooltip: str = ""
    """Extra tooltip text (n, CI...)."""


def heatmap(title: str, rows: Sequence[str], columns: Sequence[str], cells: Sequence[Sequence[Cell | None]], *,
            domain: tuple[float, float] = (0.0, 1.0), percent: bool = True, legend_label: str = "",
            row_header: str = "", column_header: str = "", desc: str = "", integer: bool = False) -> Markup:
    """Rows × columns of coloured cells (viridis over `domain`) with a colour legend and a 'no data' key;
    `integer`: the values are counts (whole-number legend ticks)."""
    uid = chart_id("heat", title, rows, columns)
    row_label_w = label_column_width([*rows, row_header])
    cell_w = max(46.0, min(96.0, max([text_width(c) for c in columns] + [0.0]) * 0.55 + 12))
    cell_h = 22.0
    # column labels are rotated by 40°: sin 40° ≈ 0.64 of their length goes up, cos 40° ≈ 0.77 to the right
    col_text = min(180.0, max([text_width(c) for c in columns] + [30.0]) + 6)
    col_label_h = col_text * 0.64 + 22
    legend_h = 58.0
    legend_w = 220 + 24 + text_width(legend_label, 11) + 90
    width = max(row_label_w + cell_w * (len(columns) - 0.5) + col_text * 0.77 + 12, row_label_w + legend_w)
    height = col_label_h + cell_h * len(rows) + legend_h
    parts = [_svg_open(width, height, title, desc or title, uid)]
    if column_header:
        parts.append(Markup('<text x="{x}" y="12" fill="#555">{t}</text>').format(x=round(row_label_w, 1),
                                                                                 t=column_header))
    if row_header:
        parts.append(Markup('<text x="{x}" y="{y}" text-anchor="end" fill="#555"><title>{t}</title>{label}</text>')
                     .format(x=round(row_label_w - LABEL_GAP, 1), y=round(col_label_h - 6, 1), t=row_header,
                             label=clip_text(row_header, row_label_w - LABEL_GAP - LABEL_MARGIN)))
    for j, col in enumerate(columns):
        cx = row_label_w + (j + 0.5) * cell_w
        parts.append(Markup('<text transform="translate({x},{y}) rotate(-40)"><title>{full}</title>{label}</text>')
                     .format(x=round(cx, 1), y=round(col_label_h - 6, 1), full=col,
                             label=clip_text(col, col_text)))
    lo, hi = domain
    for i, row in enumerate(rows):
        y = col_label_h + i * cell_h
        parts.append(Markup('<text class="label" x="{x}" y="{y}" text-anchor="end" dominant-baseline="middle">'
                            '<title>{full}</title>{label}</text>').format(
            x=round(row_label_w - LABEL_GAP, 1), y=round(y + cell_h / 2, 1), full=row,
            label=clip_text(row, row_label_w - LABEL_GAP - LABEL_MARGIN)))
        for j, col in enumerate(columns):
            cell = cells[i][j] if j < len(cells[i]) else None
            x = row_label_w + j * cell_w
            has_value = cell is not None and cell.value is not None and math.isfinite(cell.value)
            fill = viridis((cell.value - lo) / ((hi - lo) or 1.0)) if has_value else NO_DATA
            label = (cell.text if cell is not None and cell.text is not None
                     else format_value(cell.value, percent, 0) if has_value else "")
            tip = f"{row} × {col}: {format_value(cell.value, percent) if has_value else 'no data'}"
            if cell is not None and cell.tooltip:
                tip += f" ({cell.tooltip})"
            parts.append(Markup('<g class="cell"><title>{tip}</title><rect x="{x}" y="{y}" width="{w}" height="{h}" '
                                'fill="{fill}" stroke="#fff"/><text x="{tx}" y="{ty}" text-anchor="middle" '
                                'dominant-baseline="middle" font-size="11" fill="{ink}">{label}</text></g>').format(
                tip=tip, x=round(x, 1), y=round(y, 1), w=round(cell_w, 1), h=cell_h, fill=fill,
                tx=round(x + cell_w / 2, 1), ty=round(y + cell_h / 2, 1), ink=ink_on(fill), label=label))
    parts.append(_legend(uid, row_label_w, col_label_h + cell_h * len(rows) + 16, domain, percent, legend_label,
                         integer))
    parts.append(Markup("</svg>"))
    return Markup("").join(parts)


def _legend(uid: str, x: float, y: float, domain: tuple[float, float], percent: bool, label: str,
            integer: bool = False) -> Markup:
    """A horizontal viridis gradient with ticks, and a 'no data' swatch."""
    width, height = 220.0, 10.0
    stops = Markup("").join(Markup('<stop offset="{o}" stop-color="{c}"/>').format(o=t, c=c) for t, c in VIRIDIS)
    parts = [Markup('<g class="legend"><title>colour scale{l}</title><defs><linearGradient id="{uid}-g">{stops}'
                    '</linearGradient></defs><rect x="{x}" y="{y}" width="{w}" height="{h}" fill="url(#{uid}-g)"/>')
             .format(l=f": {label}" if label else "", uid=uid, stops=stops, x=round(x, 1), y=round(y, 1), w=width,
                     h=height)]
    lo, hi = domain
    ticks = nice_ticks(lo, hi, 4, integer=integer)
    for tick, text in zip(ticks, tick_labels(ticks, percent)):
        tx = x + width * (tick - lo) / ((hi - lo) or 1.0)
        parts.append(Markup('<line x1="{x}" x2="{x}" y1="{y0}" y2="{y1}" stroke="#555"/><text x="{x}" y="{ty}" '
                            'text-anchor="middle" font-size="11" fill="#555">{t}</text>').format(
            x=round(tx, 1), y0=round(y + height, 1), y1=round(y + height + 4, 1), ty=round(y + height + 16, 1),
            t=text))
    if label:
        parts.append(Markup('<text x="{x}" y="{y}" font-size="11" fill="#555">{t}</text>').format(
            x=round(x + width + 12, 1), y=round(y + height - 1, 1), t=label))
    nx = x + width + 24 + (text_width(label, 11) if label else 0)
    parts.append(Markup('<rect x="{x}" y="{y}" width="14" height="{h}" fill="{f}"/><text x="{tx}" y="{ty}" '
                        'font-size="11" fill="#555">no data</text></g>').format(
        x=round(nx, 1), y=round(y, 1), h=height, f=NO_DATA, tx=round(nx + 18, 1), ty=round(y + height - 1, 1)))
    return Markup("").join(parts)


def ci_strip(value: float | None, ci95: tuple[float, float] | None, domain: tuple[float, float], *,
             percent: bool = True, width: int = 120, label: str = "") -> Markup:
    """A tiny inline dot-and-whisker for table cells (leaderboard)."""
    if value is None:
        return Markup("")
    lo, hi = domain
    span = (hi - lo) or 1.0

    def x_of(v: float) -> float:
        return 4 + (width - 8) * (min(hi, max(lo, v)) - lo) / span

    tip = f"{label}: {format_value(value, percent)}"
    whisker = Markup("")
    if ci95:
        tip += f" [{format_value(ci95[0], percent)}, {format_value(ci95[1], percent)}]"
        whisker = Markup('<path d="M{a} 8H{b}" stroke="#0072B2" stroke-width="2.5" stroke-linecap="round" '
                         'opacity="0.45"/>').format(a=round(x_of(ci95[0]), 1), b=round(x_of(ci95[1]), 1))
    return Markup('<svg class="strip" role="img" width="{w}" height="16" '
                  'viewBox="0 0 {w} 16"><title>{tip}</title><line x1="4" x2="{e}" y1="8" y2="8" stroke="#ddd"/>'
                  '{whisker}<circle cx="{cx}" cy="8" r="3.5" fill="#0072B2"/></svg>').format(
        w=width, tip=tip, e=width - 4, whisker=whisker, cx=round(x_of(value), 1))
