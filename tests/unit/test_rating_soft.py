"""Soft (fractional) outcomes in Elo and Bradley–Terry, checked against closed forms."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest

from finharness.rating.bt import BTConfig, bt_table
from finharness.rating.elo import EloConfig, elo_ratings, elo_table
from finharness.rating.matches import Match, MatchFileError, hard_only, match_from_json


def _soft(outcome: float, winner: str = "tie", a: str = "A", b: str = "B") -> Match:
    return Match(task="t", model_a=a, model_b=b, winner=winner, outcome=outcome)


def test_one_soft_elo_step_moves_by_k_times_outcome_minus_expectation():
    # equal start ratings: E_a = ½, so R_a = 1000 + K·(s − ½)
    ratings = elo_ratings([_soft(0.8)], EloConfig(k=4.0))
    assert ratings["A"] == pytest.approx(1000 + 4.0 * 0.3)
    assert ratings["B"] == pytest.approx(1000 - 4.0 * 0.3)


def test_bradley_terry_on_fractional_wins_recovers_the_logit_of_the_outcome():
    # every match A vs B with outcome p: the likelihood p·log σ(d) + (1−p)·log σ(−d) peaks at d = logit(p),
    # i.e. a rating gap of 400·log10(p / (1 − p)) points (l2 ≈ 0 shifts it negligibly at 400 matches)
    p = 0.7
    table = bt_table([_soft(p)] * 400, BTConfig(l2=1e-9), bootstrap=0)
    gap = table.ratings["A"].rating - table.ratings["B"].rating
    assert gap == pytest.approx(400 * math.log10(p / (1 - p)), abs=0.5)


def test_hard_matches_rate_exactly_as_before_and_soft_ones_differ():
    hard = [Match("t", "A", "B", "model_a"), Match("t", "B", "C", "tie"), Match("t", "A", "C", "model_b")]
    same = [Match(m.task, m.model_a, m.model_b, m.winner, outcome=m.hard_score_a) for m in hard]
    assert elo_ratings(hard) == elo_ratings(same)  # an outcome equal to the hard score changes nothing
    softened = [Match(m.task, m.model_a, m.model_b, m.winner, outcome=0.6) for m in hard]
    assert elo_ratings(softened) != elo_ratings(hard)
    assert elo_ratings(hard_only(softened)) == elo_ratings(hard)


def test_wins_ties_losses_count_the_hard_verdicts():
    table = elo_table([_soft(0.9, winner="tie"), _soft(0.2, winner="model_b")], bootstrap=0)
    assert (table.ratings["A"].wins, table.ratings["A"].ties, table.ratings["A"].losses) == (0, 1, 1)


@pytest.mark.parametrize("outcome", [1.5, -0.1, "0.5", True])
def test_an_outcome_off_the_scale_is_an_error_naming_the_line(outcome):
    with pytest.raises(MatchFileError, match="m.jsonl:3: outcome"):
        match_from_json({"task": "t", "model_a": "A", "model_b": "B", "winner": "tie", "outcome": outcome},
                        "m.jsonl:3")


def test_rate_command_uses_soft_outcomes_unless_told_hard(tmp_path):
    path = tmp_path / "m.jsonl"
    path.write_text("".join(json.dumps({"task": "t", "model_a": "A", "model_b": "B", "winner": "tie",
                                        "outcome": 0.75}) + "\n" for _ in range(50)))

    def rate(*extra):
        done = subprocess.run([sys.executable, "-m", "finharness", "rate", str(path), "--method", "bt",
                               "--bootstrap", "0", "--json", *extra], capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    soft, hard = rate(), rate("--hard")
    gap = soft["overall"]["ratings"]["A"]["rating"] - soft["overall"]["ratings"]["B"]["rating"]
    assert gap == pytest.approx(400 * math.log10(3), abs=5)  # p = ¾: odds 3:1
    assert hard["overall"]["ratings"]["A"]["rating"] == pytest.approx(hard["overall"]["ratings"]["B"]["rating"])
    assert any("soft outcome" in note for note in soft["notes"])
    assert any("all 50 matches are ties" in note for note in hard["notes"])
