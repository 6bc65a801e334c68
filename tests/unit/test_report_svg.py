"""Hand-written SVG charts: structure, accessibility, escaping, scales."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from finharness.report.svg import (Bar, BarGroup, Cell, bar_chart, ci_strip, clip_text, heatmap, ink_on, nice_ticks,
                                   text_width, viridis)


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
    assert text_width("中文") == 2 * text_width("ab") / 1.2
    clipped = clip_text("a very long model name indeed", 60)
    assert clipped.endswith("…") and text_width(clipped) <= 60


def test_ci_strip_and_charts_contain_no_network_reference():
    strip = str(ci_strip(0.5, (0.4, 0.6), (0, 1), label="m"))
    chart = str(bar_chart("t", [BarGroup("a", (Bar(0.5, (0.4, 0.6)),))]))
    for svg in (strip, chart):
        assert not re.search(r"https?://", svg)
