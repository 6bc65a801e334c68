"""Market data: daily prices from the common export layouts, and the FinTradeBench trading signals.

Names are loaded on first use so that importing the CLI does not import pandas.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

_EXPORTS = {
    "load_prices": "prices",
    "price_column": "prices",
    "as_of": "prices",
    "PRICE_COLUMNS": "prices",
    "compute_signals": "signals",
    "SIGNAL_COLUMNS": "signals",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f".{_EXPORTS[name]}", __name__), name)
