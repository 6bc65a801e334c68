"""Confidence intervals, weighted aggregates, paired tests, group differences, AUC, draws and power (scipy underneath).

Every interval family and its method: docs/statistics.md."""

from .auc import AucEstimate, auc_ci, bootstrap_auc_ci
from .ci import (
    RELIABLE_N,
    Estimate,
    binomial_ci,
    clopper_pearson_ci,
    mean_ci,
    proportion_ci,
    weighted_mean_ci,
    wilson_ci,
)
from .draws import VarianceComponents, clustered_mean_ci, majority_vote, pass_at_k, pass_at_k_ci, variance_components
from .groups import GroupDifference, group_difference
from .paired import PairedResult, mcnemar_score_p, paired_test, sign_flip_p_value, tango_interval
from .power import PowerPlan, detectable_difference, plan_comparison, required_items

__all__ = ["RELIABLE_N", "Estimate", "binomial_ci", "clopper_pearson_ci", "mean_ci", "proportion_ci",
           "weighted_mean_ci", "wilson_ci", "VarianceComponents", "clustered_mean_ci", "majority_vote", "pass_at_k",
           "pass_at_k_ci", "variance_components", "PairedResult", "paired_test", "sign_flip_p_value", "PowerPlan",
           "detectable_difference", "plan_comparison", "required_items", "AucEstimate", "auc_ci", "bootstrap_auc_ci",
           "GroupDifference", "group_difference", "mcnemar_score_p", "tango_interval"]
