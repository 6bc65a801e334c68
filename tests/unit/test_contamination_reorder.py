"""The option-order split (contamination/reorder.py): the reordered text holds the same parts with the options
rotated, the sorted-options confound is marked, the paired AUC counts the items whose published text scores higher,
and its validation is kept beside the filings validation without replacing it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from finharness.contamination.items import ItemText, item_text
from finharness.contamination.reorder import SPLIT, option_pairs, paired_validation, reordered, sorted_options
from finharness.contamination.validation import EVIDENCE, NO_EVIDENCE, read_file, record, record_split, validate_probe
from finharness.core.types import Sample


def _item(k: int, options=("beta", "alpha", "gamma"), answer="C") -> ItemText:
    sample = Sample(f"q{k}", {"question": f"Question {k}?", "options": list(options)}, answer)
    return item_text(sample)


def test_the_reordered_item_rotates_the_options_and_keeps_the_answer_text():
    item = _item(1)
    moved = reordered(item)
    assert moved.id == "q1#reordered" and moved.options == ("alpha", "gamma", "beta")
    assert moved.text == "Question 1?\nA. alpha\nB. gamma\nC. beta\nAnswer: gamma"
    assert item.text == "Question 1?\nA. beta\nB. alpha\nC. gamma\nAnswer: gamma"
    assert moved.answer == "B" and moved.options[ord(moved.answer) - ord("A")] == "gamma"
    assert sorted(moved.text.replace("\n", " ").split()[1:]) == sorted(item.text.replace("\n", " ").split()[1:])


def test_sorted_options_reads_numbers_as_numbers():
    assert sorted_options(["$9", "$10", "$11.5"]) and not sorted_options(["9", "11", "10"])
    assert sorted_options(["daily.", "quarterly.", "semiannually."]) and not sorted_options(["b", "a"])
    assert sorted_options(["4.0%", "12%", "100%"])


def test_option_pairs_skip_items_without_distinct_options():
    items = [_item(1), item_text(Sample("open", {"question": "Why?"}, "because")), _item(2, ("x", "x")), _item(3)]
    pairs = option_pairs(items, 5)
    assert [p.published.id for p in pairs] == ["q1", "q3"] and not pairs[0].sorted_options


def test_the_paired_auc_counts_items_whose_published_text_scores_higher():
    pairs = option_pairs([_item(k) for k in range(40)], 40)
    published = {p.published.id: 1.0 + k for k, p in enumerate(pairs)}
    lower = {p.reordered.id: 0.5 + k for k, p in enumerate(pairs)}  # every item: published higher by 0.5
    v = paired_validation(pairs, published, lower)
    assert v["paired_auc"] == 1.0 and v["paired_ci95"][0] > 0.9 and v["status"] == EVIDENCE
    assert 0.5 < v["auc"] < 0.6  # unpaired: the items' spread swamps the order effect
    assert v["controls"]["options not sorted"]["n_items"] == 40 and v["sorted_share"] == 0.0
    tied = paired_validation(pairs, published, {p.reordered.id: 1.0 + k for k, p in enumerate(pairs)})
    assert tied["paired_auc"] == 0.5 and tied["status"] == NO_EVIDENCE


def test_the_option_order_status_is_read_at_the_family_wise_level():
    """27 of 40 items prefer the published order: Wilson 95% [0.52, 0.80] clears ½, the 98.75% interval of a
    family of four does not."""
    pairs = option_pairs([_item(k) for k in range(40)], 40)
    published = {p.published.id: 1.0 for p in pairs}
    reordered_ = {p.reordered.id: 0.0 if k < 27 else 2.0 for k, p in enumerate(pairs)}
    alone = paired_validation(pairs, published, reordered_)
    of_four = paired_validation(pairs, published, reordered_, family=4)
    assert alone["status"] == EVIDENCE and alone["status_ci"] is None and alone["paired_ci95"][0] > 0.5
    assert of_four["paired_ci95"] == alone["paired_ci95"] and of_four["family"] == 4
    assert of_four["status_ci"][0] < 0.5 and of_four["status"] == NO_EVIDENCE


def test_a_further_split_is_kept_beside_the_filings_validation(tmp_path: Path):
    path = tmp_path / "validated.json"
    v = validate_probe("min_k", [2.0 + i for i in range(30)], [float(i) / 10 for i in range(30)], "filings")
    record(path, "sha256:abc", "a model", {"min_k": v}, {"spec": "x"})
    record_split(path, "sha256:abc", "a model", SPLIT, {"min_k": {"paired_auc": 0.6}}, {"items": 3})
    record(path, "sha256:abc", "a model", {"min_k": v}, {"spec": "x"})  # the filings again: the split stays
    entry = read_file(path)["models"]["sha256:abc"]
    assert entry["probes"]["min_k"]["status"] == EVIDENCE
    assert entry["splits"][SPLIT] == {"items": 3, "probes": {"min_k": {"paired_auc": 0.6}}}


def test_the_command_validates_on_a_tasks_option_order(tmp_path: Path, monkeypatch):
    from finharness.cli import app

    monkeypatch.setenv("FINHARNESS_CACHE", str(tmp_path / "cache"))
    path = tmp_path / "validated.json"
    args = ["contamination", "demo", "--validate", "--split", "options", "--model", "fake", "--windows", "10",
            "--validation", str(path), "--out", str(tmp_path / "o"), "--json", "-q"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    assert out["split"] == SPLIT and out["items"] == 10 and set(out["probes"]) == {"loss", "min_k", "min_k_pp", "zlib"}
    assert all(v["n_items"] == 10 and 0.0 <= v["paired_auc"] <= 1.0 for v in out["probes"].values())
    kept = read_file(path)["models"][out["model_key"]]["splits"][SPLIT]
    assert kept["items"] == 10 and kept["probes"]["min_k"]["paired_auc"] == pytest.approx(
        out["probes"]["min_k"]["paired_auc"])
    assert all(v["family"] == 4 and v["status_ci"][0] <= v["paired_ci95"][0] for v in out["probes"].values())
    said = CliRunner().invoke(app, [a for a in args if a != "--json"])
    assert said.exit_code == 0 and "each status is read at 98.75%, the family-wise level of 4 probes" in said.output
    refused = CliRunner().invoke(app, ["contamination", "--validate", "--split", "options", "--model", "fake"])
    assert refused.exit_code != 0 and "needs the TASK" in refused.output
