"""Membership evidence (issue 36): the probes' arithmetic against hand-computed values, per-token log-likelihoods
that leave every earlier call key as it was, validation and its statuses, the seen/unseen split, and
`finharness contamination` on the fake model."""

from __future__ import annotations

import asyncio
import json
import math
import zlib
from pathlib import Path

import pytest
from typer.testing import CliRunner

from finharness.backends.fake import FAKE_TOKEN_MEAN, FAKE_TOKEN_STD, FakeBackend, fake_tokens
from finharness.contamination import probes
from finharness.contamination.evidence import ItemEvidence, default_probes, probe_item
from finharness.contamination.impact import best_probe, date_split, row_impact
from finharness.contamination.items import ItemText, item_text
from finharness.contamination.validation import (
    EVIDENCE,
    INVERTED,
    NO_EVIDENCE,
    model_key,
    record,
    validate_probe,
    validations_for,
)
from finharness.contamination.windows import cut_to_tokens, mentions_year, prose, windows
from finharness.core.hashing import canonical_json
from finharness.core.types import LoglikelihoodRequest, LoglikelihoodResponse, Sample, to_jsonable
from tests.fakes import fake_models, fresh_store


def words(text: str) -> int:
    return len(text.split())


# --- the probes' arithmetic --------------------------------------------------------------------------------------

def test_min_k_averages_the_least_likely_fifth():
    lps = [-0.1, -0.2, -5.0, -0.3, -0.4, -7.0, -0.5, -0.6, -0.7, -0.8]
    assert probes.min_k(lps) == pytest.approx((-7.0 - 5.0) / 2)  # ceil(0.2 * 10) = 2 lowest
    assert probes.min_k(lps[:3]) == pytest.approx(-5.0)  # ceil(0.6) = 1
    assert probes.mean_logprob(lps) == pytest.approx(sum(lps) / 10)
    assert math.isnan(probes.min_k([]))


def test_min_k_plus_plus_standardises_by_the_distributions_moments():
    lps, means, stds = [-1.0, -4.0, -2.0, -9.0, -0.5], [-2.0, -3.0, -2.0, -3.0, -1.0], [1.0, 2.0, 0.5, 3.0, 0.0]
    z = [(-1 + 2) / 1, (-4 + 3) / 2, 0.0, (-9 + 3) / 3, 0.0]  # sigma 0: a certain position gives 0
    assert probes.standardised(lps, means, stds) == pytest.approx(z)
    assert probes.min_k_plus_plus(lps, means, stds) == pytest.approx(-2.0)  # ceil(0.2 * 5) = 1: the lowest, -6/3


def test_zlib_and_reference_ratios():
    text = "Revenue rose 8% on higher services revenue. " * 3
    assert probes.zlib_ratio(-120.0, text) == pytest.approx(-120.0 / len(zlib.compress(text.encode(), 9)))
    assert probes.reference_ratio(-1.5, -2.25) == pytest.approx(0.75)
    scores = probes.ll_scores([-1.0, -3.0], -4.0, 2, text, [-2.0, -2.0], [1.0, 1.0], reference_mean=-2.5)
    assert scores == pytest.approx({"loss": -2.0, "min_k": -3.0, "min_k_pp": -1.0,
                                    "zlib": -4.0 / probes.zlib_bytes(text), "reference": 0.5})
    sums_only = probes.ll_scores(None, -4.0, 2, text)
    assert sums_only["min_k"] is None and sums_only["min_k_pp"] is None and sums_only["reference"] is None


def test_rouge_l_is_the_lcs_f1_of_words():
    # LCS of 'the cat sat on the mat' and 'the cat lay on a mat': the cat on mat = 4 of 6 and 6
    assert probes.rouge_l("the cat sat on the mat", "The cat lay on a mat.") == pytest.approx(4 / 6)
    assert probes.rouge_l("a b c", "x y") == 0.0 and probes.rouge_l("", "x") == 0.0
    assert probes.words("营业收入增长8%") == ["营", "业", "收", "入", "增", "长", "8"]


def test_guided_split_and_order_sensitivity():
    first, rest = probes.split_for_guided("one two three four five six")
    assert (first, rest) == ("one two three", "four five six")
    assert probes.split_for_guided("single") == ("single", "")
    assert probes.order_sensitivity(True, [False, False]) == 1.0
    assert probes.order_sensitivity(True, [True, False]) == 0.5
    assert probes.order_sensitivity(False, [True, True]) == -1.0


# --- per-token log-likelihoods ----------------------------------------------------------------------------------

def test_a_plain_request_keeps_its_json_and_so_its_call_key():
    plain = LoglikelihoodRequest("Q: ", (" A", " B"))
    assert canonical_json(to_jsonable(plain)) == canonical_json(
        {"context": "Q: ", "continuations": [" A", " B"], "kind": "loglikelihood"})
    asked = LoglikelihoodRequest("Q: ", (" A", " B"), per_token=True)
    assert to_jsonable(asked)["per_token"] is True
    response = LoglikelihoodResponse((-1.0,), (True,), (1,))
    assert set(to_jsonable(response)) == {"logprobs", "is_greedy", "continuation_tokens", "context_tokens",
                                          "tokens_evaluated", "retries"}


def test_per_token_values_read_back_from_json_as_tuples():
    data = {"logprobs": [-3.0], "is_greedy": [False], "continuation_tokens": [2], "token_logprobs": [[-1.0, -2.0]],
            "token_means": [[-2.0, -2.0]], "token_stds": [[1.0, 1.5]]}
    from finharness.core.model import response_from_json

    back = response_from_json("loglikelihood", data)
    assert back.token_logprobs == ((-1.0, -2.0),) and back.token_stds == ((1.0, 1.5),)


def test_the_fake_scores_per_token_by_the_chain_rule(tmp_path: Path):
    def logprob(context: str, continuation: str) -> float:
        return -0.1 * len(continuation) - (0.5 if "secret" in context else 0.0)

    models = fake_models(fresh_store(tmp_path), model=FakeBackend(logprob=logprob, name="chain"))
    text = "the secret revenue line"
    response = asyncio.run(models.model.loglikelihood(LoglikelihoodRequest("", (text,), per_token=True)))
    pieces = fake_tokens(text)
    expected, done = [], ""
    for piece in pieces:
        expected.append(logprob(done, piece))
        done += piece
    assert response.token_logprobs == (tuple(pytest.approx(v) for v in expected),)
    assert response.logprobs[0] == pytest.approx(sum(expected))
    assert response.token_means == ((FAKE_TOKEN_MEAN,) * len(pieces),)
    assert response.token_stds == ((FAKE_TOKEN_STD,) * len(pieces),)
    assert response.continuation_tokens == (len(pieces),)


def test_probing_an_item_through_the_fake_is_the_arithmetic_and_a_rerun_is_free(tmp_path: Path):
    def logprob(context: str, continuation: str) -> float:
        return -0.2 * len(continuation.strip())

    store = fresh_store(tmp_path)
    models = fake_models(store, model=FakeBackend(logprob=logprob, name="item"),
                         reference=FakeBackend(logprob=lambda c, x: -0.3 * len(x.strip()), name="ref"))
    item = ItemText("q1", "What is the nominal risk-free rate?")
    evidence = asyncio.run(probe_item(item, models.model, reference=models["reference"],
                                      probes=probes.LL_PROBES))
    pieces = fake_tokens(item.text)
    lps = [-0.2 * len(p.strip()) for p in pieces]
    ref = [-0.3 * len(p.strip()) for p in pieces]
    assert evidence.tokens == len(pieces)
    assert evidence.scores["loss"] == pytest.approx(sum(lps) / len(lps))
    assert evidence.scores["min_k"] == pytest.approx(probes.min_k(lps))
    assert evidence.scores["min_k_pp"] == pytest.approx(probes.min_k([(v - FAKE_TOKEN_MEAN) / FAKE_TOKEN_STD
                                                                      for v in lps]))
    assert evidence.scores["zlib"] == pytest.approx(sum(lps) / probes.zlib_bytes(item.text))
    assert evidence.scores["reference"] == pytest.approx(sum(lps) / len(lps) - sum(ref) / len(ref))
    calls = models.model.counters.calls
    again = asyncio.run(probe_item(item, models.model, reference=models["reference"], probes=probes.LL_PROBES))
    assert again.scores == evidence.scores and models.model.counters.calls == calls  # every call from the store


def test_chat_probes_score_a_guided_completion_and_option_order(tmp_path: Path):
    def reply(prompt: str) -> str:
        if "First part" in prompt:
            return "rate of inflation expected"  # 3 of the rest's words, in order
        return "C"  # a model that remembers "the answer is C": right only while C holds the answer

    models = fake_models(fresh_store(tmp_path), model=FakeBackend(reply=reply, name="chat"))
    item = item_text(Sample("k1", {"question": "The nominal risk-free rate is the real rate plus a premium for:",
                                   "options": ["maturity.", "liquidity.", "expected inflation."]}, target="C"))
    evidence = asyncio.run(probe_item(item, models.model, probes=probes.CHAT_PROBES))
    first, rest = probes.split_for_guided(item.text)
    assert evidence.scores["guided"] == pytest.approx(probes.rouge_l("rate of inflation expected", rest))
    assert evidence.scores["order"] == 1.0  # right as published, wrong under both other orders
    assert evidence.detail["order_answers"]["published"] == {"answer": "C", "correct": "C"}


def test_item_text_reads_question_options_and_answer():
    sample = Sample("d1", {"question": "What is 5% of 1,000?", "options": ["5", "50", "500"]}, target="B")
    item = item_text(sample)
    assert item.text == "What is 5% of 1,000?\nA. 5\nB. 50\nC. 500\nAnswer: 50"
    assert item.answer == "B" and item.options == ("5", "50", "500")
    free = item_text(Sample("f1", {"question": "Capex in FY2018?", "doc_name": "3M_2018_10K"}, target="$1577.00"))
    assert free.text == "Capex in FY2018?\nAnswer: $1577.00" and free.answer is None

    class Own:
        def membership_text(self, sample: Sample) -> str:
            return "own text"

    assert item_text(sample, Own()).text == "own text"


def test_default_probes_follow_the_backends_capabilities():
    class Caps:
        loglikelihood = False

    assert default_probes(Caps()) == probes.CHAT_PROBES
    Caps.loglikelihood = True
    assert default_probes(Caps()) == probes.LL_PROBES
    assert default_probes(Caps(), "min_k,guided") == ("min_k", "guided")
    with pytest.raises(ValueError, match="unknown probe"):
        default_probes(Caps(), "min_k,nope")


# --- windows ------------------------------------------------------------------------------------------------------

def test_prose_keeps_sentences_and_drops_tables_and_headings():
    text = ("Item 7. MD&A\nNet sales increased 8% compared with the prior year, driven by services and wearables.\n"
            "Net sales | 391,035 | 383,285\n2024 2023 2022 1,234 5,678 9,012 3,456 7,890 1,234 5,678 9,012 3,456 78\n"
            "Gross margin   was lower   because of product mix and higher component costs in the year.")
    assert prose(text) == ("Net sales increased 8% compared with the prior year, driven by services and wearables. "
                           "Gross margin was lower because of product mix and higher component costs in the year.")


def test_windows_have_the_same_token_count():
    text = " ".join(f"w{i}" for i in range(53))
    cut, n = cut_to_tokens(text, 10, words)
    assert n == 10 and cut == " ".join(f"w{i}" for i in range(10))
    out = windows(text, 10, words)
    assert [words(w) for w in out] == [10] * 5  # the last 3 words are too few for a window
    assert windows(text, 10, words, limit=2) == [out[0], out[-1]]
    assert mentions_year("in fiscal 2019 revenue") and not mentions_year("revenue of 2,019 units")


# --- validation and impact ---------------------------------------------------------------------------------------

def test_validation_status_comes_from_the_auc_interval_alone():
    seen = [0.1 * i + 1.0 for i in range(40)]
    unseen = [0.1 * i for i in range(40)]
    v = validate_probe("min_k", seen, unseen, "filings")
    assert v.status == EVIDENCE and v.ci95[0] > 0.5
    assert v.threshold == pytest.approx(sorted(unseen)[37] + 0.05 * (unseen[38] - unseen[37]))  # 95th pct
    assert v.fpr == pytest.approx(2 / 40) and v.tpr == pytest.approx(sum(s > v.threshold for s in seen) / 40)
    mixed = validate_probe("zlib", [0.0, 1.0, 2.0, 3.0] * 5, [0.5, 1.5, 2.5, 2.0] * 5, "filings")
    assert mixed.status == NO_EVIDENCE and mixed.threshold is None
    assert validate_probe("loss", unseen, seen, "filings").status == INVERTED


def test_a_probe_of_a_family_separates_only_at_the_family_wise_level():
    """AUC 0.63 on 60 + 60: its own 95% interval [0.529, 0.724] clears 0.5, the 98.75% one a family of four
    needs does not; the row would pick it among four, so it must not be called separating."""
    seen, unseen = [i + 9.0 for i in range(60)], [i + 0.5 for i in range(60)]
    alone = validate_probe("zlib", seen, unseen, "filings")
    assert alone.status == EVIDENCE and alone.family == 1 and alone.status_ci is None
    of_four = validate_probe("zlib", seen, unseen, "filings", family=4)
    assert of_four.ci95 == alone.ci95 and of_four.ci95[0] > 0.5  # the probe's own interval, shown as before
    assert of_four.family == 4 and of_four.status_ci[0] < 0.5 < of_four.status_ci[1]
    assert of_four.status == NO_EVIDENCE and of_four.threshold is None
    assert best_probe({"zlib": of_four}, ["zlib"]) is None and best_probe({"zlib": alone}, ["zlib"]) is alone
    clear = validate_probe("zlib", [i + 14.0 for i in range(60)], unseen, "filings", family=4)
    assert clear.status == EVIDENCE and clear.status_ci[0] > 0.5 and clear.threshold is not None


def test_validations_are_kept_per_model(tmp_path: Path):
    path = tmp_path / "validated.json"
    v = validate_probe("min_k", [2.0 + i for i in range(30)], [float(i) / 10 for i in range(30)], "filings")
    record(path, "sha256:abc", "a model", {"min_k": v}, {"spec": "x"})
    found, source = validations_for("sha256:abc", [path])
    assert source == str(path) and found["min_k"] == v
    of_two = validate_probe("zlib", [2.0 + i for i in range(30)], [float(i) / 10 for i in range(30)], "filings",
                            family=2)
    record(path, "sha256:abc", "a model", {"zlib": of_two}, {"spec": "x"})
    assert validations_for("sha256:abc", [path])[0]["zlib"] == of_two  # the status interval read back as written
    assert validations_for("sha256:other", [path]) == ({}, None)
    assert model_key({"model_sha256": "abc", "n_ctx": 4096}) == "sha256:abc"
    assert model_key({"spec": "fake"}).startswith("identity:")


def _evidence(scores: dict[str, float]) -> list[ItemEvidence]:
    return [ItemEvidence(i, 10, {"min_k": v}) for i, v in scores.items()]


def test_row_impact_splits_the_score_at_the_validated_threshold():
    v = validate_probe("min_k", [2.0 + i / 10 for i in range(30)], [i / 30 for i in range(30)], "filings")
    scores = {f"i{k}": (5.0 if k < 10 else 0.1) for k in range(40)}
    per_sample = {f"i{k}": (1.0 if k < 10 else float(k % 2)) for k in range(40)}
    impact = row_impact(_evidence(scores), {"min_k": v}, per_sample)
    assert impact.probe == "min_k" and impact.above == 10 and impact.n_items == 40
    assert impact.share.value == pytest.approx(0.25)
    assert impact.seen.value == 1.0 and impact.unseen.value == pytest.approx(0.5)
    assert impact.difference.diff == pytest.approx(0.5) and impact.difference.differs


def test_no_separating_probe_is_no_evidence_either_way_never_clean():
    v = validate_probe("min_k", [0.0, 1.0, 2.0] * 10, [0.5, 1.5, 1.0] * 10, "filings")
    impact = row_impact(_evidence({"a": 1.0, "b": 2.0}), {"min_k": v}, {"a": 1.0, "b": 0.0})
    assert impact.status == NO_EVIDENCE and impact.probe is None and impact.share is None
    assert "not evidence that the items are unseen" in impact.notes[0]
    assert row_impact(_evidence({"a": 1.0}), {}, None).status == "not validated"


def test_dated_items_give_a_fresh_items_row():
    per_sample = {"a": 1.0, "b": 1.0, "c": 0.0, "d": 0.0}
    split = date_split(per_sample, {"a": "2023-05-01", "b": "2024-02-02", "c": "2025-01-31", "d": "2025-05-02"},
                       "2024-11-13")
    assert split["fresh_n"] == 2 and split["older_n"] == 2 and split["difference"].diff == pytest.approx(-1.0)


# --- the command -------------------------------------------------------------------------------------------------

def _app():
    from finharness.cli import app

    return app


def test_the_command_lists_every_item_and_a_rerun_makes_no_call(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("FINHARNESS_CACHE", str(tmp_path / "cache"))
    out = tmp_path / "probe"
    args = ["contamination", "demo", "--model", "fake", "--out", str(out), "--json", "-q"]
    first = CliRunner().invoke(_app(), args)
    assert first.exit_code == 0, first.output
    rec = json.loads(first.output)
    assert rec["n_items"] == 12 and len(rec["items"]) == 12
    assert rec["probes"] == ["loss", "min_k", "min_k_pp", "zlib"]  # no reference model for a fake
    assert all(set(i["scores"]) == set(rec["probes"]) and all(v is not None for v in i["scores"].values())
               for i in rec["items"])
    assert rec["impact"]["status"] == "not validated" and rec["cost"]["calls"] == 12
    again = json.loads(CliRunner().invoke(_app(), args).output)
    assert again["cost"]["calls"] == 0 and again["cost"]["cache_hits"] == 12
    assert [i["scores"] for i in again["items"]] == [i["scores"] for i in rec["items"]]


def test_the_command_is_held_to_a_budget_and_a_rerun_finishes(tmp_path: Path, monkeypatch):
    """`finharness contamination` takes --budget-tokens (and --price/--max-cost) as run and suite do: it stops with
    exit 3 before the call that would cross it, writes what it probed (the refused items say why), and the same
    command with more budget makes only the refused calls."""
    monkeypatch.setenv("FINHARNESS_CACHE", str(tmp_path / "cache"))
    free = json.loads(CliRunner().invoke(_app(), ["contamination", "demo", "--model", "fake", "--out",
                                                  str(tmp_path / "free"), "--json", "-q"]).output)
    per_item = sum(i["tokens"] for i in free["items"]) / 12
    out = tmp_path / "held"
    args = ["contamination", "demo", "--model", "fake", "--out", str(out), "-q"]
    held = CliRunner().invoke(_app(), [*args, "--budget-tokens", str(int(per_item * 5))])
    assert held.exit_code == 3 and "budget reached" in held.output, held.output
    rec = json.loads((out / "contamination.json").read_text(encoding="utf-8"))
    refused = [i for i in rec["items"] if "budget" in (i.get("errors") or {}).get("loss", "")]
    made = rec["cost"]["calls"]
    assert 0 < made < 12 and len(refused) == 12 - made and len(rec["items"]) == 12
    assert all(i["scores"]["loss"] is None for i in refused)
    done = CliRunner().invoke(_app(), [*args, "--json"])
    assert done.exit_code == 0, done.output
    assert json.loads(done.output)["cost"]["calls"] == 12 - made  # the rest came from the store
    costly = CliRunner().invoke(_app(), [*args, "--max-cost", "1"])
    assert costly.exit_code == 2 and "(--max-cost, max_cost=) needs prices" in costly.output


def test_a_validation_the_budget_stops_is_not_kept(tmp_path: Path, monkeypatch):
    """A validation on part of its items would set a status from fewer texts than it says: the budget stop keeps
    nothing in the validations file, and the rerun with more budget keeps the whole one."""
    from finharness.contamination.validation import read_file

    monkeypatch.setenv("FINHARNESS_CACHE", str(tmp_path / "cache"))
    path = tmp_path / "validated.json"
    args = ["contamination", "demo", "--validate", "--split", "options", "--model", "fake", "--windows", "10",
            "--validation", str(path), "--out", str(tmp_path / "o"), "-q"]
    stopped = CliRunner().invoke(_app(), [*args, "--budget-tokens", "200"])
    assert stopped.exit_code == 3 and "budget reached" in stopped.output, stopped.output
    assert not path.exists()
    assert CliRunner().invoke(_app(), args).exit_code == 0
    (entry,) = read_file(path)["models"].values()
    assert entry["splits"]["option order"]["items"] == 10


def test_the_command_splits_a_runs_scores_with_the_models_validation(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("FINHARNESS_CACHE", str(tmp_path / "cache"))
    run_dir = tmp_path / "run"
    ran = CliRunner().invoke(_app(), ["run", "demo", "--model", "fake", "--out", str(run_dir), "-q"])
    assert ran.exit_code == 0, ran.output
    first = json.loads(CliRunner().invoke(_app(), ["contamination", "demo", "--model", "fake", "--out", str(run_dir),
                                                    "--json", "-q"]).output)
    values = sorted(i["scores"]["min_k"] for i in first["items"])
    # a validation for the fake whose threshold falls between the items' 8th and 9th Min-K% score
    cut = (values[7] + values[8]) / 2
    v = validate_probe("min_k", [cut + 1 + i for i in range(30)], [cut - 5 + i * (5 / 29) for i in range(30)],
                       "filings")
    assert v.status == EVIDENCE and v.threshold == pytest.approx(cut - 5 + 5 * 0.95, rel=1e-6)
    from dataclasses import replace

    record(tmp_path / "cache" / "contamination" / "validated.json", first["model_key"], "fake",
           {"min_k": replace(v, threshold=cut)}, {})
    result = CliRunner().invoke(_app(), ["contamination", "demo", "--model", "fake", "--out", str(run_dir), "--json",
                                         "-q"])
    rec = json.loads(result.output)
    impact = rec["impact"]
    assert impact["probe"] == "min_k" and impact["above"] == 4 and impact["n_items"] == 12
    assert rec["run"] == str(run_dir) and impact["seen"]["n"] + impact["unseen"]["n"] == 12
    printed = CliRunner().invoke(_app(), ["contamination", "demo", "--model", "fake", "--out", str(run_dir), "-q"])
    assert "likely seen by min_k: 4/12" in printed.output


def test_a_suite_file_turns_the_probes_on(tmp_path: Path):
    from finharness.suite.spec import SuiteError, load_suite

    path = tmp_path / "s.toml"
    path.write_text('name = "s"\ncontamination = true\n[[task]]\ntask = "demo"\n', encoding="utf-8")
    assert load_suite(str(path)).contamination is True
    path.write_text('name = "s"\n[[task]]\ntask = "demo"\n', encoding="utf-8")
    assert load_suite(str(path)).contamination is False
    path.write_text('name = "s"\ncontamination = "yes"\n[[task]]\ntask = "demo"\n', encoding="utf-8")
    with pytest.raises(SuiteError, match="contamination must be true or false"):
        load_suite(str(path))


def test_the_scorecard_shows_a_probed_runs_evidence(tmp_path: Path, monkeypatch):
    import io

    from finharness.suite.scorecard import scorecard_from_runs
    from finharness.suite.scorecard_views import print_scorecard, render_html, render_markdown

    monkeypatch.setenv("FINHARNESS_CACHE", str(tmp_path / "cache"))
    run_dir = tmp_path / "run"
    assert CliRunner().invoke(_app(), ["run", "demo", "--model", "fake", "--out", str(run_dir), "-q"]).exit_code == 0
    assert scorecard_from_runs([run_dir]).contamination == ()  # not probed: no section
    rec = json.loads(CliRunner().invoke(_app(), ["contamination", "demo", "--model", "fake", "--out", str(run_dir),
                                                  "--json", "-q"]).output)
    values = sorted(i["scores"]["min_k"] for i in rec["items"])
    v = validate_probe("min_k", [values[-1] + 1 + i for i in range(30)], [values[0] - 3 + i / 10 for i in range(30)],
                       "filings")
    from dataclasses import replace

    record(tmp_path / "cache" / "contamination" / "validated.json", rec["model_key"], "fake",
           {"min_k": replace(v, threshold=(values[5] + values[6]) / 2)}, {})
    CliRunner().invoke(_app(), ["contamination", "demo", "--model", "fake", "--out", str(run_dir), "-q"])
    card = scorecard_from_runs([run_dir])
    (cell,) = card.contamination
    assert cell.probe == "min_k" and cell.above == 6 and cell.n_items == 12 and cell.share[0] == pytest.approx(0.5)
    assert cell.seen[1] + cell.unseen[1] == 12
    md = render_markdown(card)
    assert "## Contamination evidence" in md and "6/12 = 50.0%" in md
    assert 'id="contamination"' in render_html(card)
    shown = io.StringIO()
    print_scorecard(card, file=shown, width=200)
    assert "contamination evidence" in shown.getvalue()


def test_a_suite_run_probes_each_row_and_its_scorecard_shows_the_section(tmp_path: Path, monkeypatch):
    from finharness.core.pool import run_dir_name
    from finharness.suite.scorecard import build_scorecard

    monkeypatch.setenv("FINHARNESS_CACHE", str(tmp_path / "cache"))
    path = tmp_path / "s.toml"
    path.write_text('name = "s"\n[[task]]\ntask = "demo"\n', encoding="utf-8")
    out = tmp_path / "suite"
    result = CliRunner().invoke(_app(), ["suite", str(path), "--model", "fake", "--out", str(out), "--contamination",
                                         "-q"])
    assert result.exit_code == 0, result.output
    rec = json.loads((out / run_dir_name("fake") / "demo" / "contamination.json").read_text(encoding="utf-8"))
    assert rec["n_items"] == 12 and rec["impact"]["status"] == "not validated"
    (cell,) = build_scorecard(out).contamination
    assert cell.row == "demo" and cell.status == "not validated" and cell.n_items == 12
    plain = tmp_path / "plain"
    assert CliRunner().invoke(_app(), ["suite", str(path), "--model", "fake", "--out", str(plain), "-q"]).exit_code == 0
    assert not (plain / run_dir_name("fake") / "demo" / "contamination.json").exists()


def test_a_suites_probes_are_planned_counted_and_held_to_its_budget(tmp_path: Path, monkeypatch):
    """The probes' calls are in the dry run's plan, in suite.json's usage, and under the suite's budget; a resumed
    suite counts what its earlier invocations' probes spent, neither losing it nor counting it twice."""
    from finharness.core.pool import run_dir_name

    monkeypatch.setenv("FINHARNESS_CACHE", str(tmp_path / "cache"))
    path = tmp_path / "s.toml"
    path.write_text('name = "s"\n[[task]]\ntask = "demo"\n', encoding="utf-8")

    def suite(out: Path, *extra: str):
        return CliRunner().invoke(_app(), ["suite", str(path), "--model", "fake", "--out", str(out), "--contamination",
                                           "-q", *extra])

    def billed(out: Path) -> dict:
        return json.loads((out / "suite.json").read_text(encoding="utf-8"))["by_model"]["fake"]["billed"]

    def probe_cost(out: Path) -> dict:
        rec = json.loads((out / run_dir_name("fake") / "demo" / "contamination.json").read_text(encoding="utf-8"))
        return rec["cost"]

    planned = json.loads(suite(tmp_path / "plan", "--dry-run", "--json").output)
    (probe_tally,) = [r for r in planned["tasks"][0]["roles"] if r["role"] == "probe"]
    assert probe_tally["calls"] == 12  # one per-token scoring of each demo item

    free = tmp_path / "free"
    assert suite(free).exit_code == 0
    spent = billed(free)
    assert spent["probe/live"]["calls"] == 12 == probe_cost(free)["calls"]
    assert spent["probe/live"]["prompt_tokens"] == probe_tally["prompt_tokens"]
    rows = spent["model/live"]["prompt_tokens"] + spent["model/live"]["completion_tokens"]
    budget = rows + spent["probe/live"]["prompt_tokens"] // 2

    held = tmp_path / "held"
    result = suite(held, "--budget-tokens", str(budget))
    assert result.exit_code == 3 and "budget reached" in result.output, result.output
    assert json.loads((held / "suite.json").read_text(encoding="utf-8"))["status"] == "budget"
    first = billed(held)
    made = first["probe/live"]["calls"]
    assert 0 < made < 12
    assert sum(f["prompt_tokens"] + f["completion_tokens"] for f in first.values()) <= budget
    rec = json.loads((held / run_dir_name("fake") / "demo" / "contamination.json").read_text(encoding="utf-8"))
    refused = [i for i in rec["items"] if "budget" in (i.get("errors") or {}).get("loss", "")]
    assert len(refused) == 12 - made

    assert suite(held).exit_code == 0  # resumed without a budget: the refused probes are made, the rest stored
    assert probe_cost(held)["calls"] == 12 - made and probe_cost(held)["cumulative"]["calls"] == 12
    assert billed(held)["probe/live"]["calls"] == 12
    assert suite(held).exit_code == 0  # once more: everything stored, nothing lost or counted twice
    assert probe_cost(held)["calls"] == 0 and billed(held)["probe/live"]["calls"] == 12


def test_a_reference_model_the_suite_already_runs_is_not_loaded_again(monkeypatch):
    """The reference backend is the suite's own where the suite runs that model; otherwise made once and closed."""
    from finharness.backends import from_spec
    from finharness.contamination import run as contamination_run
    from finharness.suite.contamination import reference_backends

    monkeypatch.setitem(contamination_run.REFERENCES, "fake", "fake?reply=two")
    suites_own = from_spec("fake?reply=two")
    with reference_backends({"fake?reply=two": suites_own}) as reference_of:
        assert reference_of("fake?reply=one") is suites_own
        assert reference_of("embedded") is None  # no smaller sibling
    closed = []
    with reference_backends({}) as reference_of:
        made = reference_of("fake")
        assert made is not suites_own and reference_of("fake?latency=0") is made
        monkeypatch.setattr(made, "close", lambda: closed.append(made), raising=False)
    assert closed == [made]
