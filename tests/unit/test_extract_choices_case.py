"""Option text is matched back to its letter regardless of case (English options)."""

from finharness.extract.choices import extract_choice

OPTIONS = ["A. Income statement", "B. Balance sheet", "C. Cash flow statement", "D. Statement of retained earnings"]


def test_option_text_in_other_case_maps_to_its_letter():
    found = extract_choice("The statement that reports assets at a point in time is the Balance Sheet.", OPTIONS)
    assert (found.answer, found.rule) == ("B", "option_text")


def test_no_option_named_stays_unparseable():
    found = extract_choice("It depends on the accounting standard used.", OPTIONS)
    assert found.answer is None and found.rule == "unparseable"
