"""`write_html_report`: one self-contained HTML file from run directories, matches and ratings.

Self-contained means: inline CSS, inline SVG, one small inline script (search in transcripts),
and a Content-Security-Policy that forbids every network load and every script but that one
(by its hash) -- so even a model reply that slipped through escaping could not run or fetch.
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from markupsafe import Markup

from .. import __version__
from ..data.io import atomic_write_text
from ..redact import redact
from .leaderboard import leaderboard_section
from .markup import html_page, section
from .pairwise import load_ratings, rate_for_report
from .runinfo import DEFAULT_TRANSCRIPTS_PER_RUN, health_section_body, transcripts_body
from .runs import RunData, load_runs
from .sections import benchmark_sections

PathLike = str | Path

CSS = """
:root{--ink:#1d232a;--muted:#5b6570;--line:#e2e6ea;--bg:#f6f7f9;--card:#fff;--accent:#0072B2;--bad:#b3261e;--good:#137333}
*{box-sizing:border-box}
body{margin:0;font:14px/1.5 system-ui,-apple-system,'Segoe UI','Noto Sans','Noto Sans CJK SC',sans-serif;color:var(--ink);background:var(--bg)}
header{background:#12263a;color:#fff;padding:22px 32px 14px}
header h1{margin:0;font-size:22px;font-weight:650;letter-spacing:.2px}
header p{margin:4px 0 0;color:#c9d4df;font-size:13px}
nav{position:sticky;top:0;z-index:2;background:#12263aee;padding:6px 32px 8px;display:flex;flex-wrap:wrap;gap:4px 16px}
nav a{color:#dfe9f3;text-decoration:none;font-size:13px}
nav a:hover{color:#fff;text-decoration:underline}
main{max-width:1240px;margin:0 auto;padding:18px 24px 60px}
section{background:var(--card);border:1px solid var(--line);border-radius:10px;padding:6px 22px 18px;margin:18px 0;box-shadow:0 1px 2px #0000000a}
h2{font-size:19px;margin:14px 0 6px;border-bottom:2px solid var(--accent);display:inline-block;padding-bottom:2px}
h3{font-size:15px;margin:20px 0 6px}
h4{font-size:12px;margin:10px 0 2px;color:var(--muted);text-transform:uppercase;letter-spacing:.5px}
p.note,p.intro{color:var(--muted);margin:6px 0 10px;max-width:980px}
figure{margin:10px 0 14px}
figcaption{color:var(--muted);font-size:12px;margin-top:2px}
.table-wrap{overflow-x:auto;margin:8px 0 12px}
table{border-collapse:collapse;font-size:13px;min-width:40%}
caption{text-align:left;color:var(--muted);padding:2px 0 6px}
th,td{padding:5px 10px;border-bottom:1px solid var(--line);text-align:left;vertical-align:top}
thead th{background:#f0f3f6;font-weight:600}
th:not(.num),td:not(.num){overflow-wrap:anywhere;max-width:340px}
tr>:first-child{min-width:12em}
thead th.num{white-space:normal;min-width:4.5em}
table.health thead th{font-size:12px;vertical-align:bottom}
small.this{display:block;color:var(--muted);font-size:11px;white-space:nowrap}
.ok,.warn{white-space:nowrap}
tbody tr:nth-child(even){background:#fafbfc}
tbody th{font-weight:500}
.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
span.ci{display:block;color:var(--muted);font-size:11px}
table.leaderboard td:first-child,table.leaderboard th:first-child{font-weight:700}
table.leaderboard tr>:first-child{min-width:3.5em}
table.leaderboard tr>:nth-child(2){min-width:9em}
table.leaderboard .run{white-space:nowrap}
ul.config{margin:0;padding-left:1.1em;font-size:12px;min-width:14em}
ul.config code{overflow-wrap:anywhere}
details.config>summary{white-space:nowrap;font-size:12px;padding:0}
.board{margin-bottom:16px}
.warn{color:var(--bad);font-weight:600}
.ok{color:var(--good);font-weight:600}
details{margin:4px 0}
details>summary{cursor:pointer;padding:3px 0}
details.run-tx{border:1px solid var(--line);border-radius:8px;padding:4px 12px;margin:8px 0}
details.run-tx>summary{font-weight:600}
details.sample{border-bottom:1px solid var(--line);padding:2px 0}
details.sample[open]{background:#fbfcfd}
details.sample>summary{font-family:ui-monospace,'DejaVu Sans Mono',monospace;font-size:12.5px}
.sid{color:var(--ink)} .rule{color:var(--muted)}
.score{display:inline-block;min-width:42px;text-align:center;border-radius:4px;padding:0 4px;background:#eef1f4}
.score.good{background:#e3f3e6;color:var(--good)} .score.bad{background:#fbe9e7;color:var(--bad)}
.badge{display:inline-block;font-size:11px;border-radius:9px;padding:0 7px;margin-left:4px;background:#fff4d6;color:#7a5200}
.badge.failed{background:#fbe9e7;color:var(--bad)} .badge.cached{background:#e8f0fe;color:#174ea6}
pre{white-space:pre-wrap;word-break:break-word;background:#f4f6f8;border:1px solid var(--line);border-radius:6px;padding:8px 10px;margin:2px 0 6px;font:12.5px/1.45 ui-monospace,'DejaVu Sans Mono','Noto Sans Mono CJK SC',monospace;max-height:420px;overflow:auto}
.msg .role{font-size:11px;color:var(--muted);text-transform:uppercase}
table.facts td,table.facts th{padding:2px 8px;font-size:12px}
.controls{display:flex;flex-wrap:wrap;gap:8px 16px;align-items:center;padding:8px 0}
.controls input[type=search]{padding:5px 8px;border:1px solid #b9c2cb;border-radius:6px;min-width:320px}
svg .bar:hover rect,svg .cell:hover rect{opacity:.85}
code{background:#f0f3f6;border-radius:4px;padding:0 4px}
footer{color:var(--muted);font-size:12px;text-align:center;padding:10px}
"""

SCRIPT = """
(function () {
  var box = document.getElementById('tx-controls');
  if (!box) return;
  box.hidden = false;
  var query = document.getElementById('tx-q');
  var boxes = Array.prototype.slice.call(box.querySelectorAll('input[type=checkbox]'));
  var items = Array.prototype.slice.call(document.querySelectorAll('details.sample'));
  var runs = Array.prototype.slice.call(document.querySelectorAll('details.run-tx'));
  var count = document.getElementById('tx-count');
  var texts = null, timer = null;
  function apply() {
    if (texts === null) texts = items.map(function (d) { return d.textContent.toLowerCase(); });
    var q = query.value.trim().toLowerCase();
    var need = boxes.filter(function (b) { return b.checked; }).map(function (b) { return b.value; });
    var shown = 0;
    items.forEach(function (d, i) {
      var flags = (d.getAttribute('data-flags') || '').split(' ');
      var ok = (!q || texts[i].indexOf(q) >= 0) && need.every(function (f) { return flags.indexOf(f) >= 0; });
      d.hidden = !ok;
      if (ok) shown += 1;
    });
    if (q || need.length) runs.forEach(function (r) { r.open = r.querySelector('details.sample:not([hidden])') !== null; });
    count.textContent = (q || need.length) ? shown + ' of ' + items.length + ' samples match' : '';
  }
  query.addEventListener('input', function () { clearTimeout(timer); timer = setTimeout(apply, 150); });
  boxes.forEach(function (b) { b.addEventListener('change', apply); });
})();
"""


def _script_hash(script: str) -> str:
    return "sha256-" + base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest()).decode("ascii")


CSP = ("default-src 'none'; img-src data:; style-src 'unsafe-inline'; script-src '{hash}'; base-uri 'none'; "
       "form-action 'none'")
"""Nothing may be fetched; only the report's own script (by hash) may run."""


def _paths(value: PathLike | Iterable[PathLike] | None) -> list[Path]:
    if value is None:
        return []
    if isinstance(value, (str, Path)):
        return [Path(value)]
    return [Path(v) for v in value]


def build_html_report(runs: Sequence[RunData], *, matches: Sequence[Any] | None = None,
                      ratings: Sequence[tuple[str, Mapping[str, Any]]] = (),
                      transcripts_per_run: int | None = DEFAULT_TRANSCRIPTS_PER_RUN,
                      title: str = "finharness report") -> str:
    """The whole page as a string (typer-free, file-free: what tests and other tools call)."""
    sections: list[tuple[str, str, Markup]] = []
    if runs:
        sections.append(("leaderboard", "Leaderboard", leaderboard_section(runs)))
    sections += benchmark_sections(runs, matches=matches, ratings=ratings)
    if runs:
        sections.append(("runs", "Run health", section("runs", "Run health", health_section_body(runs),
                                                       intro="Every truncation, unparseable answer, retry, failure "
                                                             "and cache hit, per run (results.json counts).")))
        sections.append(("transcripts", "Transcripts", section(
            "transcripts", "Transcripts", transcripts_body(runs, transcripts_per_run),
            intro="Every sample as the model saw it and answered; model output is shown as text, never run.")))
    nav = Markup("").join(Markup('<a href="#{a}">{t}</a>').format(a=a, t=t) for a, t, _ in sections)
    generated = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    summary = (f"{len(runs)} run(s) · {len({r.task for r in runs})} task(s)"
               + (f" · {len(matches)} matches" if matches else "") + f" · generated {generated} · finharness {__version__}")
    return html_page(title=title, summary=summary, nav=nav, body=Markup("").join(html for _, _, html in sections),
                     css=CSS, csp=CSP.format(hash=_script_hash(SCRIPT)), footer="Self-contained: no network, no "
                     "external files.", script=SCRIPT)


def write_html_report(run_dirs: Iterable[PathLike], out_file: PathLike, *,
                      matches: PathLike | Iterable[PathLike] | None = None,
                      ratings: PathLike | Iterable[PathLike] | None = None,
                      transcripts_per_run: int | None = DEFAULT_TRANSCRIPTS_PER_RUN) -> Path:
    """Write the report for `run_dirs` (and pairwise `matches` JSONL / `rate --json` `ratings` files) to `out_file`.

    Bad input raises DataError (or rating.MatchFileError) naming the file and line. With matches
    but no ratings, Elo and Bradley–Terry are computed here. Returns the path written."""
    from ..rating import read_matches

    runs = load_runs(run_dirs)
    loaded_matches = [m for p in _paths(matches) for m in read_matches(p)]
    loaded_ratings = [(str(p), load_ratings(p)) for p in _paths(ratings)]
    if not runs and not loaded_matches and not loaded_ratings:
        raise ValueError("nothing to report: give run directories, --matches or --ratings")
    if loaded_matches and not loaded_ratings:
        loaded_ratings = [("the matches (computed for this report)", r) for r in rate_for_report(loaded_matches)]
    out = Path(out_file)
    atomic_write_text(out, redact(build_html_report(runs, matches=loaded_matches or None, ratings=loaded_ratings,
                                                    transcripts_per_run=transcripts_per_run)))
    return out
