"""finharness: an open harness that measures how well language models do real financial work.

Public API: the core types and the runner; backends are resolved from model specs.
"""

from importlib.metadata import PackageNotFoundError, version as _version

try:
    __version__ = _version("finharness")
except PackageNotFoundError:  # running from a source tree without installation
    __version__ = "0.0.0+unknown"

__all__ = ["__version__"]
