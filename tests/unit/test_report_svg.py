"""Hand-written SVG charts: structure, accessibility, escaping, scales."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from finharness.report.svg import (
    LABEL_GAP,
    LABEL_MARGIN,
    MAX_LABEL_W,
    MIN_PLOT_W,
    Bar,
    BarGroup,
    Cell,
    bar_chart,
    ci_strip,
    clip_text,
    heatmap,
    ink_on,
    label_column_width,
    nice_ticks,
    text_width,
    tick_labels,
    viridis,
)


def parse(svg: str) -> ET.Element:
    """Charts must be well-formed XML (they are inline SVG)."""
    return ET.fromstring(svg)


def test_bar_chart_has_a_titled_bar_and_whisker_per_value():
    groups = [BarGroup("model A", (Bar(0.6, (0.5, 0.7), 100), Bar(0.4, None, 100))),
              BarGroup("model B", (Bar(0.3, (0.2, 0.4), 50), None))]
    root = parse(bar_chart("Scores", groups, ("strict", "paper")))
    assert root.get("role") == "img" and root.find("title").text == "Scores"
    bars = root.findall("g[@class='bar']")
    assert len(bars) == 3  # the None bar leaves a gap
    assert bars[0].find("title").text == "model A — strict: 60.0% [50.0%, 70.0%], n=100"
    assert len(root.findall(".//path[@class='whisker']")) == 2
    # the legend names both series
    texts = [t.text for t in root.iter("text")]
    assert "strict" in texts and "paper" in texts


def test_bar_lengths_are_proportional_on_the_domain():
    root = parse(bar_chart("x", [BarGroup("a", (Bar(0.25),)), BarGroup("b", (Bar(0.75),))]))
    widths = [float(r.get("width")) for r in root.iter("rect")]
    assert abs(widths[1] / widths[0] - 3) < 0.02


def test_ratings_start_at_a_baseline_and_can_go_left():
    root = parse(bar_chart("Elo", [BarGroup("up", (Bar(1100.0, (1050.0, 1150.0)),)),
                                   BarGroup("down", (Bar(900.0, (850.0, 950.0)),))], percent=False, baseline=1000))
    up, down = [r for r in root.iter("rect")]
    assert float(down.get("x")) + float(down.get("width")) == float(up.get("x"))  # both touch the baseline


def test_labels_are_escaped_and_kept_whole_in_titles():
    evil = "<script>alert(1)</script> & co"
    svg = str(bar_chart(evil, [BarGroup(evil, (Bar(0.5),))]))
    assert "<script>" not in svg and "&lt;script&gt;" in svg
    root = parse(svg)
    assert root.find("title").text == evil


def test_heatmap_cells_legend_and_no_data():
    cells = [[Cell(0.0), Cell(1.0)], [None, Cell(0.5, text="50 / 100", tooltip="n=100")]]
    root = parse(heatmap("Heat", ["row 1", "row 2"], ["col 1", "col 2"], cells, legend_label="accuracy"))
    groups = root.findall("g[@class='cell']")
    assert len(groups) == 4
    fills = [g.find("rect").get("fill") for g in groups]
    assert fills[0] == viridis(0.0) and fills[1] == viridis(1.0) and fills[2] == "#e6e6e6"
    assert groups[3].find("text").text == "50 / 100" and "n=100" in groups[3].find("title").text
    legend = root.find("g[@class='legend']")
    assert legend is not None and legend.find(".//linearGradient") is not None
    assert "no data" in [t.text for t in legend.iter("text")]


def test_cell_text_colour_reads_on_its_fill():
    assert ink_on(viridis(0.0)) == "#ffffff" and ink_on(viridis(1.0)) == "#111111"


def test_nice_ticks_and_text_helpers():
    assert nice_ticks(0, 1) == [0, 0.2, 0.4, 0.6, 0.8, 1.0]
    assert nice_ticks(880, 1130)[0] >= 880 and all(t % 50 == 0 for t in nice_ticks(880, 1130))
    assert text_width("中文") == 24.0  # a full em each at 12 px
    assert 1.5 * text_width("ab") < text_width("中文") < 2.5 * text_width("ab")  # about twice a Latin letter
    clipped = clip_text("a very long model name indeed", 60)
    assert clipped.endswith("…") and text_width(clipped) <= 60


def test_count_axes_tick_whole_numbers_and_every_label_is_distinct():
    assert nice_ticks(0, 1, 4, integer=True) == [0, 1]  # win counts of at most 1: not 0 .25 .5 .75 1
    assert nice_ticks(0, 2.2, integer=True) == [0, 1, 2]
    assert nice_ticks(0, 37, 4, integer=True) == [0, 10, 20, 30]
    assert tick_labels(nice_ticks(0, 2.2), percent=False) == ["0.0", "0.5", "1.0", "1.5", "2.0"]  # was 0 0 1 2 2
    assert tick_labels(nice_ticks(0, 1, 4), percent=False) == ["0.00", "0.25", "0.50", "0.75", "1.00"]
    assert tick_labels(nice_ticks(0, 1), percent=True) == ["0%", "20%", "40%", "60%", "80%", "100%"]
    assert tick_labels([0, 1, 2], percent=False) == ["0", "1", "2"]


def axis_labels(svg: str) -> list[str]:
    return [t.text for t in parse(svg).iter("text")
            if t.get("fill") == "#555" and t.get("text-anchor") == "middle"]


def test_a_count_chart_and_a_count_heatmap_read_whole_numbers():
    bars = str(bar_chart("rounds", [BarGroup("a", (Bar(2.0, (1.0, 2.1)),)), BarGroup("b", (Bar(1.0),))],
                         percent=False))
    assert axis_labels(bars) == ["0", "1", "2"]
    wins = str(heatmap("wins", ["a", "b"], ["a", "b"], [[None, Cell(1)], [Cell(0), None]], domain=(0, 1),
                       percent=False, integer=True))
    assert axis_labels(wins) == ["0", "1"]


def test_ci_strip_and_charts_contain_no_network_reference():
    strip = str(ci_strip(0.5, (0.4, 0.6), (0, 1), label="m"))
    chart = str(bar_chart("t", [BarGroup("a", (Bar(0.5, (0.4, 0.6)),))]))
    for svg in (strip, chart):
        assert not re.search(r"https?://", svg)


# rendered widths at 12 px in DejaVu Sans, what system-ui resolves to on Debian (measured in headless chromium):
# the old flat 0.6 em estimate (57.6 and 129.6 px) was short, and 'fake?name=embedded' began at x = -6.6
DEJAVU_12PX = {"embedded": 64.3, "fake?name=embedded": 140.2, "Qwen/Qwen2.5-72B-Instruct": 169.7,
               "MMMWWW mmmwww": 135.0, "gpt-4o-mini · single_choice": 161.6}


def test_text_width_is_not_short_of_the_widest_common_ui_font():
    for text, rendered in DEJAVU_12PX.items():
        assert rendered <= text_width(text) <= 1.05 * rendered + 1, text
    assert text_width("é") >= text_width("e") and text_width("e\u0301") == text_width("e")  # combining: no width
    assert text_width("（注册）") == 4 * 12  # full-width punctuation is wide too


def label_extents(root: ET.Element) -> list[tuple[str, float, float]]:
    """(label text, estimated left edge, right edge) of every right-aligned label of a chart."""
    out = []
    for t in root.iter("text"):
        if t.get("class") == "label":
            assert t.get("text-anchor") == "end"
            label = "".join(t.itertext()).removeprefix(t.find("title").text)
            out.append((label, float(t.get("x")) - text_width(label), float(t.get("x"))))
    return out


LABELS = ("a", "fake?name=embedded", "2-8 注册会计师 · Certified Public Accountant (CPA)", "政治经济学", "WWWWWWWWWW")


def test_bar_chart_label_column_grows_with_the_longest_label_and_every_label_fits():
    widths = []
    for longest in LABELS:
        root = parse(bar_chart("t", [BarGroup("b", (Bar(0.5),)), BarGroup(longest, (Bar(0.25, (0.1, 0.4)),))]))
        extents = label_extents(root)
        assert [e[0] for e in extents] == ["b", longest]  # printed whole, no ellipsis
        for label, left, right in extents:
            assert left >= LABEL_MARGIN - 0.1, (label, left)  # nothing left of the drawing
        right = extents[0][2]
        assert right == extents[1][2]  # one column, right-aligned
        widths.append(right)
        assert abs(right + LABEL_GAP - label_column_width(["b", longest])) < 0.1  # (x is rounded)
        # the plot starts after the column: the bar of "b" begins right of every label
        assert min(float(r.get("x")) for r in root.iter("rect")) >= right
    # 5 CJK characters (5 em) need more room than 5 Latin letters and less than 10 W (10 em)
    assert widths[0] < widths[1] < widths[2]
    assert label_column_width(["abcde"]) < widths[3] < widths[4]


def test_long_labels_widen_the_bar_chart_and_only_overlong_ones_are_cut():
    label = "a long model name · 很长的模型名称"
    root = parse(bar_chart("t", [BarGroup(label, (Bar(0.5, note="**"),))], width=400))
    ((text, left, right),) = label_extents(root)
    assert text == label and left >= 0
    width = float(root.get("width"))
    assert width >= right + LABEL_GAP + MIN_PLOT_W  # the plot keeps its room; the chart grew
    value = [t for t in root.iter("text") if (t.text or "").startswith("50.0%")][0]
    assert value.text == "50.0% **" and float(value.get("x")) + text_width(value.text) <= width
    overlong = "财务" * 300
    ((text, left, right),) = label_extents(parse(bar_chart("t", [BarGroup(overlong, (Bar(0.5),))])))
    assert text.endswith("…") and left >= 0 and right - left <= MAX_LABEL_W


def test_heatmap_row_labels_fit_and_size_the_column():
    cells = [[Cell(0.5)], [Cell(0.25)]]
    narrow = parse(heatmap("h", ["1-1 Law", "2"], ["m"], cells, row_header="category"))
    wide = parse(heatmap("h", ["2-8 注册会计师 · Certified Public Accountant (CPA)", "2"], ["m"], cells,
                         row_header="category"))
    for root in (narrow, wide):
        extents = label_extents(root)
        assert len(extents) == 2 and all(left >= LABEL_MARGIN - 0.1 for _, left, _ in extents)
        first_cell = min(float(g.find("rect").get("x")) for g in root.iter("g") if g.get("class") == "cell")
        assert first_cell >= max(right for _, _, right in extents) + LABEL_GAP
    assert label_extents(wide)[0][2] > label_extents(narrow)[0][2]
