"""The run summary printed on the terminal: metrics without items are named on one line, not listed as rows."""

from __future__ import annotations

from finharness.cli import _print_results


def test_metrics_without_items_are_named_once_and_the_rest_are_rows(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    results = {"task": "cfinbench", "model": "fake", "status": "complete", "metrics": {
        "strict.score": {"value": 0.25, "ci95": [0.1, 0.4], "n": 40},
        "strict.multiple": {"value": None, "ci95": None, "n": 0},
        "strict.judgment": {"value": None, "ci95": None, "n": 0},
        "kappa.ll~gen": {"value": 0.1, "ci95": None, "n": 40},
        "agreement.ll~letters": {"value": None, "ci95": None, "n": 3},  # undefined on items: stays a row
    }, "counts": {}, "notes": []}
    _print_results(results)
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith("│")]
    assert [row.split("│")[1].strip() for row in rows] == ["strict.score", "kappa.ll~gen", "agreement.ll~letters"]
    assert "no items (n 0, null in results.json): strict.multiple, strict.judgment" in out
    assert "│ kappa.ll~gen" in out and "│ —" in out  # a metric without an interval shows a dash


def test_no_line_about_empty_metrics_when_every_metric_has_items(capsys):
    _print_results({"task": "demo", "metrics": {"accuracy": {"value": 0.5, "ci95": [0.2, 0.8], "n": 12}}})
    assert "no items" not in capsys.readouterr().out


def test_many_metrics_without_items_are_counted_by_their_last_part(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    empty = {"value": None, "ci95": None, "n": 0}
    metrics = {f"{method}.{mode}.{kind}": empty for method in ("ll", "gen") for mode in ("strict", "paper")
               for kind in ("multiple", "judgment")}
    _print_results({"task": "cfinbench", "metrics": {"strict.score": {"value": 0.3, "ci95": [0.2, 0.4], "n": 9},
                                                     **metrics}})
    assert "no items (n 0, null in results.json): 8 metrics, *.multiple (4), *.judgment (4)" in capsys.readouterr().out
