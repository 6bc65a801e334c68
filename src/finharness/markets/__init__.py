"""Market data: daily prices from the common export layouts, and the FinTradeBench trading signals.

Names are loaded on first use so that importing the CLI does not import pandas.
"""

from __future__ import annotations

from finharness.util import lazy_exports

_EXPORTS = {
    "load_prices": "prices",
    "price_column": "prices",
    "as_of": "prices",
    "PRICE_COLUMNS": "prices",
    "compute_signals": "signals",
    "SIGNAL_COLUMNS": "signals",
}

__getattr__, __all__ = lazy_exports(__name__, _EXPORTS)
