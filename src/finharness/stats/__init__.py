"""Confidence intervals, weighted aggregates and paired tests (scipy underneath)."""

from .ci import Estimate, mean_ci, proportion_ci, weighted_mean_ci, wilson_ci
from .paired import PairedResult, paired_test

__all__ = ["Estimate", "mean_ci", "proportion_ci", "weighted_mean_ci", "wilson_ci", "PairedResult", "paired_test"]
