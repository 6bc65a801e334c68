"""Option text is matched back to its letter regardless of case (English options)."""

from finharness.extract.choices import extract_choice

OPTIONS = ["A. Income statement", "B. Balance sheet", "C. Cash flow statement", "D. Statement of retained earnings"]


def test_option_text_in_other_case_maps_to_its_letter():
    found = extract_choice("The statement that reports assets at a point in time is the Balance Sheet.", OPTIONS)
    assert (found.answer, found.rule) == ("B", "option_text")


def test_no_option_named_stays_unparseable():
    found = extract_choice("It depends on the accounting standard used.", OPTIONS)
    assert found.answer is None and found.rule == "unparseable"


def test_a_hedge_between_letters_is_unparseable_not_its_first_letter():
    for reply in ("A or B?", "答案：A或C", "答案是 (B) or (D)", "The answer is C, or D"):
        found = extract_choice(reply, OPTIONS)
        assert (found.answer, found.rule, found.detail) == (None, "unparseable", "hedge"), reply
    for reply, letter in (("A. Oracle filings show it", "A"), ("答案：C。或者说现金流量表", "C"), ("B ordered first", "B")):
        assert extract_choice(reply, OPTIONS).answer == letter, reply
