"""Ratings from pairwise matches: online Elo (UCFE's, order-dependent) and Bradley–Terry, with
seeded bootstrap 95% intervals, plus agreement between rating tables and between raters."""

from .base import ModelRating, RatingScale, RatingTable
from .bt import BTConfig, bt_ratings, bt_table
from .compare import RatingAgreement, cohen_kappa, compare_ratings, load_rating_values
from .elo import EloConfig, elo_ratings, elo_table
from .matches import (FEW_SHOT, ZERO_SHOT, Match, MatchFileError, is_zero_shot, read_matches,
                      split_by_setting, split_by_task, write_matches)
from .rate import METHODS, RatingOptions, RatingReport, rate_matches, rate_table

__all__ = [
    "ModelRating", "RatingScale", "RatingTable",
    "BTConfig", "bt_ratings", "bt_table",
    "RatingAgreement", "cohen_kappa", "compare_ratings", "load_rating_values",
    "EloConfig", "elo_ratings", "elo_table",
    "FEW_SHOT", "ZERO_SHOT", "Match", "MatchFileError", "is_zero_shot", "read_matches",
    "split_by_setting", "split_by_task", "write_matches",
    "METHODS", "RatingOptions", "RatingReport", "rate_matches", "rate_table",
]
