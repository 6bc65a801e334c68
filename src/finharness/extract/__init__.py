"""Answer extraction: choices, judgments, numbers and code blocks; each reading records which rule fired."""

UNPARSEABLE = "unparseable"
"""The rule name every extractor records when nothing could be read (one name, so aggregates can count it)."""
