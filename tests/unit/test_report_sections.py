"""Report sections from hand-made run directories (FinTradeBench, BizBench, generic), UCFE matches and
ratings, run loading errors, and the transcript browser."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from finharness.benchmarks.bizbench.report import failure_class_counts
from finharness.core.metrics import Metric
from finharness.data.errors import DataError
from finharness.rating import Match
from finharness.rating.matches import judge_behaviour
from finharness.report import build_html_report, load_run, write_html_report
from finharness.report.pairwise import load_ratings, win_counts
from finharness.report.runinfo import sample_details
from finharness.stats import mean_ci


def metric(values: list[float]) -> dict:
    return Metric.of(mean_ci(values)).to_json()


def write_run(root: Path, name: str, task: str, model: str, samples: list[dict], metrics: dict,
              task_config: dict | None = None) -> Path:
    out = root / name
    out.mkdir(parents=True)
    results = {"task": task, "model": model, "status": "complete", "metrics": metrics, "groups": {},
               "config": {"task": task, "task_config": task_config or {}},
               "counts": {"samples": len(samples), "scored": len(samples), "unparseable": 0, "retries": 2},
               "timing": {"wall_s": 1.5}}
    (out / "results.json").write_text(json.dumps(results), encoding="utf-8")
    (out / "samples.jsonl").write_text("".join(json.dumps(s) + "\n" for s in samples), encoding="utf-8")
    return out


def fintrade_run(root: Path, model: str, mode: str, correct: dict[str, int], n: int = 40) -> Path:
    """n questions per type; the first correct[t] of each type are right."""
    samples, per = [], {}
    for t in ("F", "T", "FT"):
        per[t] = [float(i < correct[t]) for i in range(n)]
        samples += [{"id": f"{t}{i}", "score": {"value": v, "values": {f"accuracy.{t}": v}},
                     "metadata": {"question_type": t}} for i, v in enumerate(per[t])]
    metrics = {"accuracy": metric([s["score"]["value"] for s in samples]),
               **{f"accuracy.{t}": metric(v) for t, v in per.items()},
               "f1.official": metric([0.5, 0.6]), "f1.proper": metric([0.4, 0.5])}
    return write_run(root, f"ftb_{model}_{mode}", "fintradebench", model, samples, metrics, {"mode": mode})


def section_of(html: str, anchor: str) -> str:
    start = html.index(f'<section id="{anchor}"')
    return html[start:html.index("</section>", start)]


def test_fintradebench_rag_delta_is_paired_and_starred(tmp_path: Path):
    runs = [fintrade_run(tmp_path, "m", "norag", {"F": 10, "T": 20, "FT": 15}),
            fintrade_run(tmp_path, "m", "rag", {"F": 30, "T": 21, "FT": 15})]
    html = build_html_report([load_run(r) for r in runs])
    ftb = section_of(html, "fintradebench")
    rows = {(cells[0], cells[1]): cells for cells in table_rows(ftb) if len(cells) == 8}
    # columns: model, type, No-RAG, RAG, RAG Δ, CI of Δ, p, test
    f, t, ft = rows[("m", "F")], rows[("m", "T")], rows[("m", "FT")]
    assert f[4] == "50.0% ***" and f[7] == "mcnemar-score (n=40)"  # 20 discordant, all one way
    assert t[4] == "2.5%" and float(t[6]) > 0.05  # one item: no star
    assert ft[4] == "0.0%" and t[6] != "—"
    assert "Golden-indicator F1" in ftb and "f1.proper" in ftb


def table_rows(html: str) -> list[list[str]]:
    """Cell texts (tags stripped) of every table row."""
    return [[re.sub(r"<[^>]+>", "", cell) for cell in re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", row)]
            for row in re.findall(r"<tr>(.*?)</tr>", html)]


def test_bizbench_failure_classes(tmp_path: Path):
    samples = [{"id": "1", "score": {"value": 1.0, "values": {}}},
               {"id": "2", "score": {"value": 0.0, "values": {"failure.timeout": 1.0}}},
               {"id": "3", "score": {"value": 0.0, "values": {"failure.timeout": 1.0, "failure.exception": 0.0}}},
               {"id": "4", "score": {"value": 0.0, "values": {}}, "extraction": {"rule": "none", "parsed": False}},
               {"id": "5", "score": None, "failed": "timeout: call failed"},
               {"id": "6", "score": {"value": 0.0, "values": {}}, "extraction": {"rule": "code", "parsed": True}}]
    path = write_run(tmp_path, "biz", "bizbench/fincode", "m", samples, {"accuracy": metric([1, 0, 0, 0, 0])})
    run = load_run(path)
    assert failure_class_counts(run) == {"timeout": 2, "unparseable (none)": 1, "call failed": 1, "wrong answer": 1}
    html = build_html_report([run])
    biz = section_of(html, "bizbench")
    assert "Failure classes" in biz and "timeout" in biz and "BizBench failure classes" in biz


def test_unknown_tasks_get_the_generic_section(tmp_path: Path):
    path = write_run(tmp_path, "x", "my/task", "m", [{"id": "a", "score": {"value": 1.0}}], {"accuracy": metric([1.0])})
    html = build_html_report([load_run(path)])
    assert 'id="task-my-task"' in html and "All 1 metrics" in html


def matches_for_judges() -> list[Match]:
    """Judge j1 sees item 1 in both orders and flips; item 2 in both orders and agrees."""
    return [Match("T", "x", "y", "model_a", "1", "j1", "ab"),   # x shown first, x wins
            Match("T", "x", "y", "model_b", "1", "j1", "ba"),   # y shown first, y wins -> flip
            Match("T", "x", "y", "model_a", "2", "j1", "ab"),   # x first, x wins
            Match("T", "x", "y", "model_a", "2", "j1", "ba"),   # y first, x wins -> agree
            Match("T", "x", "z", "tie", "3", "j1", "ab"),
            Match("T", "y", "z", "model_b", "4", "j2", "both")]


def test_judge_behaviour_rates():
    by_judge = {j.judge: j for j in judge_behaviour(matches_for_judges())}
    j1 = by_judge["j1"]
    assert j1.matches == 5 and j1.tie.n == 5 and abs(j1.tie.value - 0.2) < 1e-9
    # decided ordered matches: 4; won by the one shown first: #1, #2, #3 -> 3/4
    assert j1.first_position_win.n == 4 and abs(j1.first_position_win.value - 0.75) < 1e-9
    assert j1.flip.n == 2 and abs(j1.flip.value - 0.5) < 1e-9
    j2 = by_judge["j2"]
    assert j2.first_position_win.n == 0 and j2.flip.n == 0  # order 'both' carries no position


def test_win_counts_matrix():
    models, wins, ties = win_counts(matches_for_judges())
    assert models[0] == "x"  # most wins
    assert wins[("x", "y")] == 3 and wins[("y", "x")] == 1 and wins[("z", "y")] == 1
    assert ties[frozenset(("x", "z"))] == 1


def test_ucfe_section_from_matches_and_ratings(tmp_path: Path):
    matches = tmp_path / "m.jsonl"
    matches.write_text("".join(json.dumps(m.to_json()) + "\n" for m in matches_for_judges()), encoding="utf-8")
    ratings = tmp_path / "r.json"
    ratings.write_text(json.dumps({"method": "bt", "options": {"init": 1000},
                                   "overall": {"ratings": {"x": {"rating": 1100, "ci95": [1050, 1150], "wins": 3,
                                                                 "ties": 1, "losses": 1},
                                                           "y": {"rating": 900, "ci95": [850, 950], "wins": 1,
                                                                 "ties": 0, "losses": 3}},
                                               "n_matches": 6, "bootstrap_rounds": 10},
                                   "by_task": {"T": {"ratings": {"x": {"rating": 1100}}, "n_matches": 6}}}),
                       encoding="utf-8")
    out = write_html_report([], tmp_path / "r.html", matches=matches, ratings=[ratings])
    ucfe = section_of(out.read_text(encoding="utf-8"), "ucfe")
    assert "Bradley–Terry ratings" in ucfe and "Elo ratings" not in ucfe  # given ratings are used as they are
    assert "UCFE win counts" in ucfe and "Judge behaviour" in ucfe and "Ratings per task" in ucfe
    # the two models' intervals do not overlap: ranks 1 and 2, no tie
    assert "<th>1</th>" in ucfe and "<th>2</th>" in ucfe and "<th>=1</th>" not in ucfe


def test_matches_alone_are_rated_here(tmp_path: Path):
    matches = tmp_path / "m.jsonl"
    matches.write_text("".join(json.dumps(m.to_json()) + "\n" for m in matches_for_judges()), encoding="utf-8")
    html = write_html_report([], tmp_path / "r.html", matches=matches).read_text(encoding="utf-8")
    assert "Elo ratings" in html and "Bradley–Terry ratings" in html


def test_bad_inputs_name_the_file_and_line(tmp_path: Path):
    with pytest.raises(DataError, match="no results.json"):
        load_run(tmp_path)
    path = write_run(tmp_path, "r", "t", "m", [], {"accuracy": metric([1.0])})
    (path / "samples.jsonl").write_text('{"id": "a"}\n{"id": \n', encoding="utf-8")
    with pytest.raises(DataError, match=r"samples\.jsonl:2: malformed JSON"):
        load_run(path)
    bad = tmp_path / "ratings.json"
    bad.write_text('{"method": "elo"}', encoding="utf-8")
    with pytest.raises(DataError, match="ratings.json: not a `finharness rate --json` output"):
        load_ratings(bad)
    with pytest.raises(ValueError, match="nothing to report"):
        write_html_report([], tmp_path / "x.html")


def test_transcript_of_a_hostile_sample_is_text():
    sample = {"id": "<b>id</b>", "prompt": [{"role": "user", "content": "</pre><script>x()</script>"}],
              "response": "<img src=x onerror=alert(1)>", "prediction": "<img src=x onerror=alert(1)>",
              "extraction": {"value": "<i>", "rule": "<rule>", "parsed": False},
              "score": {"value": 0.0, "values": {"<k>": 0.0}}, "truncated": True,
              "metadata": {"<m>": "<v>"}, "trace": []}
    html = str(sample_details(sample))
    for raw in ("<b>id", "<script>", "<img", "<i>", "<rule>", "<k>", "<m>", "<v>"):
        assert raw not in html
    assert "&lt;img src=x onerror=alert(1)&gt;" in html
    assert 'data-flags="wrong unparseable truncated"' in html
