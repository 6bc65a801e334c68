"""finharness: an open harness that measures how well language models do real financial work.

Public API: `evaluate(tasks, model=..., ...)`, what `finharness run` does, returning each task's metrics with their
intervals and its samples (finharness/api.py); `evaluate_suite(suite, models=..., ...)`, what `finharness suite`
does, returning the scorecard as data (finharness/suite/evaluate.py); `open_model(spec, store, role=...)`, the model handle every task,
judge and script uses; the core types and the runner live in `finharness.core`; backends are resolved from model
specs.
"""

__all__ = ["__version__", "evaluate", "evaluate_suite", "open_model"]


def __getattr__(name: str):
    # resolved on first use: importlib.metadata costs ~60 ms of start-up that most commands never need
    if name == "__version__":
        from importlib.metadata import PackageNotFoundError, version

        try:
            return version("finharness")
        except PackageNotFoundError:  # running from a source tree without installation
            return "0.0.0+unknown"
    if name == "evaluate":  # the Python API (api.py, which runs benchmarks: a floor above this one), by name
        from importlib import import_module

        return import_module(".api", __name__).evaluate
    if name == "evaluate_suite":  # the suite's (suite/evaluate.py), likewise
        from importlib import import_module

        return import_module(".suite.evaluate", __name__).evaluate_suite
    if name == "open_model":  # the public model handle (backends/__init__.py), imported on first use
        from .backends import open_model

        return open_model
    raise AttributeError(f"module 'finharness' has no attribute {name!r}")
