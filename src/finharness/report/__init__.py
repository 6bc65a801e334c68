"""The HTML report: leaderboards with honest ties, benchmark sections, run health, transcripts.

`write_html_report(run_dirs, out_file, matches=..., ratings=...)` writes one self-contained file
(inline CSS and SVG, no network); `build_html_report(runs, ...)` returns the page as a string.
Modules: runs (loading), leaderboard (ranking rule), sections (ReportSection: each benchmark's section is a
plug-in of its own, in its folder; the generic section), pairwise (ratings, win counts, judge behaviour),
runinfo (health, transcripts), svg (charts), markup (HTML helpers), html (the page).
"""

from .html import build_html_report, write_html_report
from .leaderboard import Entry, Standing, compare, rank_entries
from .runs import RunData, load_run, load_runs

__all__ = ["build_html_report", "write_html_report", "Entry", "Standing", "compare", "rank_entries", "RunData",
           "load_run", "load_runs"]
