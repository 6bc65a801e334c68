"""CFinBench: Chinese financial exams (and any exam in the same layout), official and robust."""

from .convert import ConversionSummary, convert_ideafinbench
from .task import CFinBenchOptions, CFinBenchTask

__all__ = ["CFinBenchTask", "CFinBenchOptions", "convert_ideafinbench", "ConversionSummary"]
