"""Ratings from pairwise matches: online Elo (UCFE's, order-dependent) and Bradley–Terry, with
seeded bootstrap 95% intervals, plus agreement between rating tables and between raters."""

from __future__ import annotations

from finharness.util import lazy_exports

# Loaded on first use so that importing the CLI does not import scipy.
_EXPORTS = {
    "ModelRating": "base",
    "RatingScale": "base",
    "RatingTable": "base",
    "BTConfig": "bt",
    "bt_ratings": "bt",
    "bt_table": "bt",
    "RatingAgreement": "compare",
    "cohen_kappa": "compare",
    "compare_ratings": "compare",
    "load_rating_values": "compare",
    "EloConfig": "elo",
    "elo_ratings": "elo",
    "elo_table": "elo",
    "FEW_SHOT": "matches",
    "ZERO_SHOT": "matches",
    "Match": "matches",
    "MatchFileError": "matches",
    "is_zero_shot": "matches",
    "read_matches": "matches",
    "split_by_setting": "matches",
    "split_by_task": "matches",
    "write_matches": "matches",
    "METHODS": "rate",
    "RatingOptions": "rate",
    "RatingReport": "rate",
    "rate_matches": "rate",
    "rate_table": "rate",
}

__getattr__, __all__ = lazy_exports(__name__, _EXPORTS)
