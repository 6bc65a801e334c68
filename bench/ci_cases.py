"""The small-n cases of issue 27, each computed by the finharness on PYTHONPATH (run by hand, before and after):

    PYTHONPATH=OLD_CHECKOUT/src python bench/ci_cases.py     # e.g. a worktree of 64ceb59
    .venv/bin/python bench/ci_cases.py

Cases: three judge verdicts of 4/5 (0.8 each, the zero-width interval), token counts of a few short replies and
one long one, a per-category macro over 4 categories of one item each (0 of 4) beside 0 of 12 pooled, the
Bradley–Terry gap from 3 matches (3-0 and 2-1), and a paired test on one shared item.
"""

from __future__ import annotations

from finharness.rating import Match
from finharness.rating.bt import bt_table
from finharness.stats.ci import mean_ci, weighted_mean_ci
from finharness.stats.paired import paired_test


def show(name: str, estimate) -> None:
    lo, hi = estimate.ci95
    extra = f"  method {estimate.method}" if getattr(estimate, "method", None) else ""
    warning = getattr(estimate, "warning", None)
    print(f"{name:38} {estimate.value:.4f} [{lo:.4f}, {hi:.4f}] n={estimate.n}{extra}"
          + (f"\n{'':38} warning: {warning}" if warning else ""))


def main() -> None:
    show("accuracy, 3 verdicts of 4/5", mean_ci([0.8] * 3))
    show("accuracy, 30 verdicts of 4/5", mean_ci([0.8] * 30))
    show("completion tokens, 3 replies", mean_ci([12, 15, 302], counts=True))
    categories = [mean_ci([0.0]) for _ in range(4)]  # 4 categories, one wrong answer each
    show("macro over 4 categories, 0 of 4", weighted_mean_ci([(0.25, e) for e in categories]))
    show("pooled, 0 of 12", mean_ci([0.0] * 12))
    for outcomes in (("model_a",) * 3, ("model_a", "model_a", "model_b")):
        table = bt_table([Match("t", "a", "b", outcome) for outcome in outcomes], bootstrap=1000, seed=0)
        wins = sum(o == "model_a" for o in outcomes)
        print(f"{f'BT gap, 3 matches ({wins}-{3 - wins})':38} {table.gaps[0].to_json()}")
    result = paired_test({"q1": 0.0}, {"q1": 1.0})
    print(f"{'paired test, n = 1':38} diff {result.diff} p {result.p_value} test {result.test} "
          f"warning {getattr(result, 'warning', None) or getattr(result, 'warnings', None)!r}")


if __name__ == "__main__":
    main()
