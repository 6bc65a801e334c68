"""Lazy package exports: a package names its public API without importing the modules behind it.

Packages whose modules pull in pandas, scipy, bm25s or onnxruntime use this so that importing
the CLI (which imports every command group) stays light:

    __getattr__, __all__ = lazy_exports(__name__, {"load_prices": "prices", ...})
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from importlib import import_module
from typing import Any


def lazy_exports(package: str, exports: Mapping[str, str]) -> tuple[Callable[[str], Any], list[str]]:
    """A module-level `__getattr__` (PEP 562) and `__all__` for `package`.

    `exports` maps each public name to the submodule (relative to `package`) that defines it;
    the submodule is imported on the first access to one of its names.
    """
    exports = dict(exports)

    def __getattr__(name: str) -> Any:
        if name not in exports:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(import_module(f".{exports[name]}", package), name)

    return __getattr__, sorted(exports)
