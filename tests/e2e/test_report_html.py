"""`write_html_report` end to end: real runs on the fake backend -> one self-contained HTML file,
rendered in headless Chromium (Debian's `chromium`; skipped with a reason when it is absent, a failure under
FINHARNESS_REQUIRE_BROWSER=1 or FINHARNESS_REQUIRE_ALL=1, as in CI)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest
from typer.testing import CliRunner

from finharness.cli import app
from finharness.report import write_html_report
from tests.conftest import requires, skip_or_fail

from ..benchmarks.test_cfinbench_task import write_exam

HOSTILE = "<script>document.title='pwned'</script><img src=x onerror=alert(1)>"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--hide-scrollbars"]
needs_chromium = requires("BROWSER", None if CHROMIUM else "Debian's chromium is not installed "
                          "(apt-get install -y chromium); the browser checks need it")
CHROMEDRIVER = shutil.which("chromedriver")


def run_cli(*args: str) -> None:
    result = CliRunner().invoke(app, list(args))
    assert result.exit_code == 0, result.output


def write_matches(path: Path) -> Path:
    """Three models, every item judged in both orders by one judge; 'strong' wins most."""
    lines = []
    pairs = [("strong", "mid"), ("strong", "weak"), ("mid", "weak")]
    for task in ("0_股价预测", "Analyst"):
        for item in range(6):
            for a, b in pairs:
                for order in ("ab", "ba"):
                    winner = "tie" if (item + len(order + a)) % 5 == 0 else ("model_a" if item % 4 else "model_b")
                    lines.append({"task": task, "item_id": str(item), "model_a": a, "model_b": b, "winner": winner,
                                  "judge": "judge-x", "order": order})
    path.write_text("".join(json.dumps(x, ensure_ascii=False) + "\n" for x in lines), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> Path:
    """Runs: demo (fake; hostile replies), demo (another fake), CFinBench tiny exam x 2; plus matches."""
    root = tmp_path_factory.mktemp("report")
    exam = write_exam(root / "exam")
    run_cli("run", "demo", "--model", f"fake?reply={HOSTILE}", "--out", str(root / "demo_hostile"), "-q")
    run_cli("run", "demo", "--model", "fake?name=other", "--out", str(root / "demo_other"), "-q")
    run_cli("run", "cfinbench", "--model", "fake", "--data-dir", str(exam), "--out", str(root / "cfin_a"), "-q")
    run_cli("run", "cfinbench", "--model", "fake?name=b", "--data-dir", str(exam), "--out", str(root / "cfin_b"), "-q")
    runs = [root / name for name in ("demo_hostile", "demo_other", "cfin_a", "cfin_b")]
    return write_html_report(runs, root / "report.html", matches=write_matches(root / "matches.jsonl"))


class Elements(HTMLParser):
    """Every start tag with its attributes, and the text inside <title> of the document head."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.stack: list[str] = []
        self.doc_title = ""

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        self.stack.append(tag)

    def handle_endtag(self, tag):
        if tag in self.stack:
            while self.stack and self.stack.pop() != tag:
                pass

    def handle_data(self, data):
        if self.stack[-1:] == ["title"] and "svg" not in self.stack:
            self.doc_title += data

    def count(self, tag: str, **attrs: str) -> int:
        return sum(1 for t, a in self.tags if t == tag and all(a.get(k) == v for k, v in attrs.items()))


def parse(html: str) -> Elements:
    parser = Elements()
    parser.feed(html)
    return parser


def test_report_has_every_section_and_chart(report: Path):
    html = report.read_text(encoding="utf-8")
    for anchor in ("leaderboard", "cfinbench", "task-demo", "ucfe", "runs", "transcripts"):
        assert f'id="{anchor}"' in html
    doc = parse(html)
    charts = doc.count("svg", **{"class": "chart"})
    # CFinBench: modes, types, 2 heatmaps, extraction; demo: by lang; UCFE: Elo, BT, win counts
    assert charts >= 9
    assert doc.count("title") >= charts + 1  # every chart titled, plus the page
    assert doc.count("details", **{"class": "sample"}) == 12 + 12 + 7 + 7
    assert "strict.score" in html and "Win counts" in html and "Judge behaviour" in html


def test_model_output_is_escaped_and_inert(report: Path):
    html = report.read_text(encoding="utf-8")
    assert HOSTILE not in html
    assert "&lt;script&gt;document.title=&#39;pwned&#39;&lt;/script&gt;" in html
    doc = parse(html)
    assert doc.count("script") == 1  # the report's own search script only
    assert doc.count("img") == 0
    assert doc.doc_title == "finharness report"


def test_nothing_is_loaded_from_the_network(report: Path):
    html = report.read_text(encoding="utf-8")
    doc = parse(html)
    for tag, attrs in doc.tags:
        for name in ("src", "href", "xlink:href", "action", "data", "poster"):
            value = attrs.get(name) or ""
            assert not re.match(r"\s*(https?:)?//", value), f"<{tag} {name}={value!r}> loads from the network"
    assert not re.search(r"url\(\s*['\"]?\s*(https?:)?//", html)
    assert not re.search(r"@import", html)
    csp = next(a["content"] for t, a in doc.tags if t == "meta" and a.get("http-equiv") == "Content-Security-Policy")
    assert "default-src 'none'" in csp and "script-src 'sha256-" in csp


def test_leaderboard_shows_ties_for_inseparable_runs(report: Path):
    html = report.read_text(encoding="utf-8")
    board = html[html.index('id="leaderboard"'):html.index('id="cfinbench"')]
    # the fakes answer judgment items with a letter (unparseable, 0 for both), so at most 5 of the 7
    # items are discordant: exact McNemar p >= 2 * 0.5**5 = 0.0625, never separable -> both rank =1
    cfin = board[board.index("<b>cfinbench</b>"):]
    assert cfin.count("<th>=1</th>") == 2


def chromium(*args: str, user_data: Path, timeout: int = 120) -> subprocess.CompletedProcess:
    return subprocess.run([CHROMIUM, *CHROMIUM_FLAGS, f"--user-data-dir={user_data}", *args],
                          capture_output=True, text=True, timeout=timeout)


@needs_chromium
def test_chromium_renders_the_plots_and_runs_only_our_script(report: Path, tmp_path: Path):
    proc = chromium("--dump-dom", report.resolve().as_uri(), user_data=tmp_path / "profile")
    assert proc.returncode == 0, proc.stderr[-2000:]
    dom = parse(proc.stdout)
    assert dom.count("svg", **{"class": "chart"}) >= 9
    assert dom.count("rect") > 50 and dom.count("path", **{"class": "whisker"}) > 5
    assert dom.count("script") == 1 and dom.count("img") == 0
    assert dom.doc_title == "finharness report"  # the hostile reply did not run
    # the search controls start hidden and our (CSP-hashed) script reveals them: it ran
    controls = next(a for t, a in dom.tags if a.get("id") == "tx-controls")
    assert "hidden" not in controls


@needs_chromium
def test_chromium_screenshot_is_not_blank(report: Path, tmp_path: Path):
    try:
        from PIL import Image
    except ImportError as err:
        skip_or_fail("BROWSER", f"Pillow is needed to read the screenshot ({err}): pip install -e '.[test]'")
    png = tmp_path / "report.png"
    proc = chromium(f"--screenshot={png}", "--window-size=1280,2000", report.resolve().as_uri(),
                    user_data=tmp_path / "profile")
    assert png.exists(), proc.stderr[-2000:]
    with Image.open(png) as image:
        assert image.size == (1280, 2000)
        rgb = image.convert("RGB")
        colours = rgb.getcolors(maxcolors=1 << 20)
        assert colours is not None and len(colours) > 100  # text, bars, whiskers, heatmap cells
        non_white = sum(n for n, c in colours if c != (255, 255, 255))
        assert non_white > 0.2 * 1280 * 2000


# Every <text> of every chart, measured by the browser: its box on the page must lie inside its <svg> (an
# overflowing label is cut off: 'mbedded' for 'embedded'), and a right-aligned label must start at x >= 0
# in the chart's own coordinates. Also the width of Chinese text in the charts' font: about 1 em a character
# with a CJK font, a narrow box ('tofu') per character without one.
MEASURE = """
var out = {texts: [], cjkEm: null};
document.querySelectorAll('svg.chart text').forEach(function (t) {
  var r = t.getBoundingClientRect(), s = t.ownerSVGElement.getBoundingClientRect(), b = t.getBBox();
  var own = Array.prototype.filter.call(t.childNodes, function (n) { return n.nodeType === 3; });
  out.texts.push({text: own.map(function (n) { return n.data; }).join(''), label: t.classList.contains('label'),
                  x: b.x, left: r.left - s.left, right: s.right - r.right, top: r.top - s.top,
                  bottom: s.bottom - r.bottom});
});
var svg = document.querySelector('svg.chart'), ctx = document.createElement('canvas').getContext('2d');
ctx.font = '12px ' + getComputedStyle(svg).fontFamily;
out.cjkEm = ctx.measureText('政治经济学').width / 12 / 5;
return out;
"""


def open_in_chromium(page: Path, profile: Path, window: str = "1400,1000"):
    """A selenium driver of headless chromium showing `page` (skips, or fails in CI, without them); quit() it."""
    skip_or_fail("BROWSER", None if CHROMIUM and CHROMEDRIVER else
                 "Debian's chromium and chromedriver are needed (apt-get install -y chromium chromium-driver)")
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError as err:
        skip_or_fail("BROWSER", f"the browser checks need selenium ({err}): pip install -e '.[test]'")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in (*CHROMIUM_FLAGS, "--disable-dev-shm-usage", f"--window-size={window}", f"--user-data-dir={profile}"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    driver.get(page.resolve().as_uri())
    return driver


@pytest.fixture(scope="module")
def measured(report: Path, tmp_path_factory) -> dict:
    """MEASURE run in headless chromium driven by selenium."""
    driver = open_in_chromium(report, tmp_path_factory.mktemp("selenium-profile"))
    try:
        return driver.execute_script(MEASURE)
    finally:
        driver.quit()


def test_chart_texts_are_not_clipped_in_chromium(measured: dict):
    texts = measured["texts"]
    labels = [t for t in texts if t["label"]]
    # model labels of the bar charts and the category rows of the CFinBench heatmaps (Chinese and English)
    assert len(labels) >= 10 and any(re.search(r"[\u4e00-\u9fff]", t["text"]) for t in labels)
    for t in labels:
        assert t["x"] >= 0, f"label {t['text']!r} starts at x={t['x']:.1f}, left of its chart: cut off"
    for t in texts:  # tick labels, values, legends, rotated column labels too
        assert min(t["left"], t["right"], t["top"], t["bottom"]) >= -0.5, f"{t['text']!r} overflows its chart: {t}"


def test_chinese_labels_render_in_a_cjk_font(measured: dict):
    if measured["cjkEm"] < 0.9:
        skip_or_fail("BROWSER", f"Chinese text renders as boxes ({measured['cjkEm']:.2f} em a character): no CJK "
                                "font; apt-get install -y fonts-noto-cjk (make sysdeps does)")
    assert measured["cjkEm"] == pytest.approx(1.0, abs=0.05)
