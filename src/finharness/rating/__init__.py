"""Ratings from pairwise matches: online Elo (UCFE's, order-dependent) and Bradley–Terry, with
seeded bootstrap 95% intervals, plus agreement between rating tables and between raters."""

from __future__ import annotations

from importlib import import_module
from typing import Any

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

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f".{_EXPORTS[name]}", __name__), name)
