"""finharness: an open harness that measures how well language models do real financial work.

Public API: the core types and the runner; backends are resolved from model specs.
"""

__all__ = ["__version__"]


def __getattr__(name: str) -> str:
    # resolved on first use: importlib.metadata costs ~60 ms of start-up that most commands never need
    if name == "__version__":
        from importlib.metadata import PackageNotFoundError, version

        try:
            return version("finharness")
        except PackageNotFoundError:  # running from a source tree without installation
            return "0.0.0+unknown"
    raise AttributeError(f"module 'finharness' has no attribute {name!r}")
