"""FinanceBench grading (benchmarks/financebench/grading.py): each rule on made-up answers, the judge's verdict
reading and the judge mode on the fake model, and the rules grader against the release's human labels."""

from __future__ import annotations

import asyncio
import json

import pytest

from finharness.backends.fake import FakeBackend
from finharness.benchmarks.financebench.grading import (
    GRADES,
    HUMAN_LABELS,
    JUDGE_ANSWER_CHARS,
    Grade,
    combine,
    conclusion_numbers,
    detect_refusal,
    grade_judged,
    grade_rules,
    is_numeric_question,
    judge_messages,
    key_names,
    made_up,
    read_gold_number,
    read_judge_verdict,
)
from finharness.core.types import Message
from finharness.stats.agreement import cohen_kappa
from tests.fakes import fake_models

CAPEX_Q = "What is the FY2018 capital expenditure amount (in USD millions) for 3M?"
MARGIN_Q = "What is the FY2015 unadjusted EBITDA % margin for Netflix? Answer in units of percents."
DPO_Q = "What is FY2018 days payable outstanding (DPO) for Walmart? Round your answer to two decimal places."
PPNE_Q = "What is the year end FY2018 net PPNE for 3M? Answer in USD billions."


def grade(question: str, gold: str, answer: str, question_type: str | None = None) -> Grade:
    return grade_rules(question, gold, answer, question_type=question_type)


# --- numbers ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("answer", [
    "Therefore, Amcor's net AR is $1,615.9 million.",
    "Net trade receivables amount to $1.6159 billion.",
    "The balance sheet shows trade receivables of $1,615,900,000.",
    "Trade receivables, net: 1,616",
    "The figure is about $1.62 billion.",  # coarser than the gold, but within 1% of it
])
def test_a_number_with_its_scale_word_or_in_units_matches_a_gold_in_millions(answer):
    g = grade("What is Amcor's year end FY2020 net AR (in USD millions)?", "1616", answer)
    assert (g.label, g.rule, g.decided) == ("correct", "number_match", True), g.detail


@pytest.mark.parametrize("question", [CAPEX_Q, "What was 3M's FY2018 capital expenditure?"])
@pytest.mark.parametrize("answer,label", [
    ("Capex was $1,577 million.", "correct"), ("Capex was $1.577 billion.", "correct"),
    ("Capex was 1,577.", "correct"), ("Capex was $1,373 million.", "incorrect"),
])
def test_a_gold_with_its_own_scale_word(question, answer, label):
    assert grade(question, "The capex was $1,577 million.", answer, "metrics-generated").label == label


def test_a_reply_much_coarser_than_the_gold_is_no_match():
    g = grade("What is Amcor's year end FY2020 net AR (in USD millions)?", "1616", "It is roughly $1.6 billion.")
    assert (g.label, g.rule) == ("incorrect", "number_mismatch")


def test_a_statement_in_thousands_matches_a_gold_in_millions():
    g = grade("What is Netflix's year end FY2017 total current liabilities (in USD millions)?", "5466",
              "The total current liabilities for Netflix at the end of FY2017 is $5,466,312.")
    assert g.label == "correct", g.detail


@pytest.mark.parametrize("gold,answer,label", [
    ("0.054", "So, the FY2015 unadjusted EBITDA % margin for Netflix is approximately 5.43%.", "correct"),
    ("5.4%", "The margin is 0.054.", "correct"),
    ("0.054", "The margin is 5.43", "correct"),  # the question asks in percents: a bare 5.43 is a percentage
    ("0.054", "The margin is 5.6%.", "incorrect"),
    ("0.002", "So the change is a decrease of 0.2 percentage points.", "correct"),  # the sign is in words
    ("0.8", "Dividend Payout Ratio ≈ 0.798 or 79.80% (rounded to two decimal places).", "correct"),
])
def test_percentages_and_ratios_are_one_number(gold, answer, label):
    assert grade(MARGIN_Q, gold, answer).label == label


def test_a_percentage_is_not_an_amount_in_billions():
    g = grade("How much (in USD billions) did American Water Works pay out in cash dividends for FY2020?", "0.4",
              "Approximately 40% of the total regulatory liabilities relate to deferred taxes.")
    assert g.label == "incorrect"


@pytest.mark.parametrize("answer,label", [
    ("DPO ≈ 42.67 days. Therefore, the DPO for Walmart for FY2018 is approximately 42.67 days.", "correct"),
    ("Therefore, the DPO for Walmart is 42.68 days.", "correct"),  # one unit of the gold's last digit
    ("Therefore, the DPO for Walmart is approximately 42.57 days.", "incorrect"),
    ("Therefore, the DPO for Walmart is 43 days.", "incorrect"),  # coarser than 1% of the gold: says nothing
])
def test_rounding_at_the_golds_precision(answer, label):
    assert grade(DPO_Q, "42.69", answer).label == label


def test_a_gold_of_one_significant_digit_gets_no_extra_unit():
    roa = "Round your answer to two decimal places. What is AES's FY2022 return on assets (ROA)?"
    assert grade(roa, "-0.02", "ROA = -0.0153 or -1.53%").label == "correct"  # rounds to -0.02
    assert grade(roa, "-0.02", "ROA = -1.35%").label == "incorrect"  # rounds to -0.01


def test_trailing_zeros_of_a_currency_gold_are_formatting():
    assert read_gold_number("$1577.00").step == 1.0
    assert read_gold_number("5.4%").value == pytest.approx(0.054)
    assert read_gold_number("5.4%").step == pytest.approx(0.001)
    assert grade(PPNE_Q, "$8.70", "Therefore, the year-end FY2018 net PP&E for 3M is $8.738 billion.").label == "correct"


@pytest.mark.parametrize("answer", [
    "Purchases of PP&E were $(1,577) million.",
    "Capital expenditure was -$1,577 million (an outflow).",
    "3M spent 1,577 million on capex (a cash outflow of (1,577)).",
])
def test_an_outflow_matches_a_positive_gold(answer):
    assert grade(CAPEX_Q, "1577", answer).label == "correct"


def test_the_conclusion_counts_not_the_intermediate_steps():
    answer = ("In 2018 purchases of PP&E were $1,577 million and in 2017 $1,373 million.\n\n"
              "Therefore, the FY2018 capital expenditure amount for 3M was $1,373 million.")
    g = grade(CAPEX_Q, "1577", answer)
    assert (g.label, g.rule) == ("incorrect", "number_mismatch")


def test_dates_years_and_references_are_not_the_answer():
    answer = ("Therefore, Amazon's FY2019 net income attributable to shareholders is $11,588 million.\n"
              "This figure is listed under the Net income row (page 38, Note 7) for the year ended December 31, 2019.")
    numbers, _ = conclusion_numbers(answer)
    assert [n.reading.span for n in numbers] == ["$11,588 million"]
    assert grade("What is Amazon's FY2019 net income (in USD millions)?", "11588", answer).label == "correct"


def test_a_gold_of_zero_needs_zero():
    q = "What is the quantity of restructuring costs for FY2022? If not explicitly outlined then state 0."
    assert grade(q, "0", "Therefore, the quantity of restructuring costs is $0.").label == "correct"
    assert grade(q, "0", "Restructuring costs were $0.3 million.").label == "incorrect"


def test_a_numeric_answer_without_a_number_is_incorrect_but_not_decided():
    g = grade(CAPEX_Q, "1577", "3M uses derivatives to hedge its net investment in foreign subsidiaries.")
    assert (g.label, g.rule, g.decided) == ("incorrect", "no_number", False)


@pytest.mark.parametrize("gold,question_type,numeric", [
    ("1577", None, True), ("$1577.00", None, True), ("5.4%", None, True), ("-0.02", "metrics-generated", True),
    ("AMCOR's Adj. EBITDA was $2,018mn in FY 2023", "novel-generated", False),
    ("The capex was $1,577 million.", "metrics-generated", True),  # one number in a sentence
    ("Yes, one customer accounted for 16% of consolidated net revenue", "novel-generated", False),
])
def test_the_numeric_subset(gold, question_type, numeric):
    assert is_numeric_question(gold, question_type) is numeric


# --- refusals -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("answer", [
    "I'm sorry, but the information provided does not include the capital expenditure amount for 3M in FY2018.",
    "The text doesn't provide information on the FY2018 capital expenditure amount for 3M.",
    "As an AI, I don't have real-time access to financial databases. Please refer to 3M's annual report.",
    "The document needed to provide the information is not provided. Please provide the income statement.",
    "Unfortunately I do not have enough context to calculate the specific financial metric you asked about.",
])
def test_refusal_phrases(answer):
    assert detect_refusal(answer) is not None
    g = grade(CAPEX_Q, "1577", answer)
    assert (g.label, g.rule, g.decided) == ("refusal", "refusal_phrase", True)


def test_an_empty_answer_is_a_refusal():
    assert grade(CAPEX_Q, "1577", "  ").label == "refusal"


def test_a_formula_after_declining_is_not_an_answer():
    answer = ("As an AI, I don't have real-time access to financial databases. However, you can calculate it: "
              "1. Find the accounts payable. 2. Plug these numbers into the DPO formula: 365 * (average accounts "
              "payable) / (COGS + change in inventory).")
    assert grade(DPO_Q, "42.69", answer).label == "refusal"


def test_an_answer_that_works_then_declines_is_a_refusal():
    answer = ("To calculate DPO we need payables, COGS and inventory. Change in Inventory = $737 million. "
              "However, the provided text does not include the COGS for FY2018. Without the COGS, we cannot complete "
              "the calculation. If you can provide the COGS, I would be able to calculate the DPO.")
    g = grade(DPO_Q, "42.69", answer)
    assert (g.label, g.rule) == ("refusal", "refusal_phrase"), g.detail


def test_a_disclaimer_followed_by_the_answer_is_judged_on_the_answer():
    answer = ("The text does not state the margin directly. From the revenue and EBITDA lines, "
              "the FY2015 unadjusted EBITDA margin is 5.43%.")
    assert grade(MARGIN_Q, "0.054", answer).label == "correct"
    assert grade(MARGIN_Q, "0.062", answer).label == "incorrect"


def test_a_caveat_late_in_an_open_answer_is_not_a_refusal():
    answer = ("Best Buy made two major acquisitions in fiscal 2022: Current Health Ltd. and Two Peaks, LLC "
              "(Yardbird). There is no mention of any acquisitions in fiscal 2023 or 2021 within the provided evidence.")
    assert detect_refusal(answer) is None
    assert grade("What are major acquisitions that Best Buy has done in FY2023, FY2022 and FY2021?",
                 "Best Buy acquired Current Health and Two Peaks (Yardbird) in FY2022.", answer).label != "refusal"


# --- yes / no and the fallback ----------------------------------------------------------------------------

def test_yes_no_stance():
    gold = "No, the company is managing its CAPEX and Fixed Assets pretty efficiently."
    q = "Is 3M a capital-intensive business based on FY2022 data?"
    assert grade(q, gold, "Yes, 3M is capital intensive given its large PP&E.").label == "incorrect"
    assert grade(q, gold, "Based on the data:\nNo. 3M manages its capex efficiently.").label == "correct"
    assert grade(q, gold, "Yes, 3M is capital intensive.").decided


def test_yes_no_with_the_golds_figures_missing_is_only_a_guess():
    gold = "Yes. Corning had a positive working capital amount of $831 million by FY 2022 close."
    g = grade("Does Corning have positive working capital based on FY2022 data?", gold,
              "Yes, Corning's working capital is $2,278 million.")
    assert g.decided is False and g.rule == "yes_no_figures"
    g = grade("Does Corning have positive working capital based on FY2022 data?", gold,
              "Yes, Corning's working capital is $831 million.")
    assert (g.label, g.decided) == ("correct", True)


def test_an_implied_stance_is_a_guess():
    gold = "No. Microsoft decreased its debt by $2.5bn in FY 2023 vs FY 2022."
    q = "Has Microsoft increased its debt on balance sheet between FY2023 and the FY2022 period?"
    g = grade(q, gold, "Total debt fell from $52.3 billion to $49.8 billion, a drop of $2.5 billion. "
                       "Therefore, Microsoft did not increase its debt.")
    assert (g.label, g.rule, g.decided) == ("correct", "yes_no_implied", False)


def test_open_answers_fall_back_to_key_facts_and_are_never_decided():
    gold = "Las Vegas resorts contributed ~90% of company level EBITDAR during FY2022."
    q = "Which region had the Highest EBITDAR Contribution for MGM during FY2022?"
    right = grade(q, gold, "Las Vegas Strip Resorts contributed about 90% of the company's EBITDAR.")
    wrong = grade(q, gold, "MGM China had the highest EBITDAR contribution, about 45%.")
    assert (right.label, right.rule, right.decided) == ("correct", "overlap", False)
    assert (wrong.label, wrong.decided) == ("incorrect", False)


# --- what small models write: invented figures, the question's own words, a name the gold gives ----------------

def test_half_a_unit_of_a_one_digit_gold_is_not_equal():
    q = "As of FY2023Q1, by how many percentage points did Pepsico raise full year guidance in respect of core EPS growth?"
    gold = "Pepsico raised full year guidance in respect of core constant currency EPS growth by 1 percentage point."
    assert grade(q, gold, "Pepsico raised its guidance by 1.5 percentage points.").label == "incorrect"
    assert grade(q, gold, "Pepsico raised its guidance by 1 percentage point.").label == "correct"
    assert grade("What was the margin?", "0.4", "The margin was 0.45.").label == "incorrect"  # rounds to 0.5
    assert grade("What was the margin?", "0.4", "The margin was 0.44.").label == "correct"


def test_an_answer_with_invented_figures_is_incorrect_and_sure():
    q = "What is the FY2015 operating cash flow ratio for Adobe? Round your answer to two decimal places."
    made = ("Let's assume the following values (these are hypothetical values for the purpose of this example): "
            "cash from operations $132 million, current liabilities $200 million. The ratio is 0.66.")
    g = grade(q, "0.66", made)
    assert (g.label, g.rule, g.decided) == ("incorrect", "made_up", True)
    g = grade("Did the risk JPM faced decrease in Q2 2023?", "Yes. It decreased.",
              "Let's say the VaR was $100,000 in 2023 and $150,000 in 2022: the VaR is lower, so the risk decreased.")
    assert (g.label, g.rule) == ("incorrect", "made_up")
    assert made_up("Assuming the company keeps its dividend, the payout is 40%.") is None  # an answer's assumption


def test_open_answers_count_the_golds_words_the_question_does_not_have():
    q = "Among operations, investing, and financing activities, which brought in the most (or lost the least) cash flow for AMD in FY22?"
    gold = "In 2022, AMD brought in the most cashflow from Operations"
    wrong = grade(q, gold, "Investing activities brought in the most cash flow for AMD in FY22.")
    assert (wrong.label, wrong.decided) == ("incorrect", False)  # every word it shares with the gold is the question's
    mgm = grade("What was MGM's interest coverage ratio using FY2022 Adjusted EBIT as the numerator and annual "
                "Interest Expense as the denominator?", "As adjusted EBIT is negative, coverage ratio is zero",
                "MGM's interest coverage ratio using FY2022 Adjusted EBIT and annual Interest Expense was 1.0.")
    assert mgm.label == "incorrect"


def test_a_yes_without_the_name_the_gold_gives_is_only_a_guess():
    q = "Does Foot Locker's new CEO have previous CEO experience in a similar company to Footlocker?"
    gold = "Yes. She was previous CEO of Ulta Beauty which means she had to manage a large retail company."
    assert key_names(gold, q) == ["Ulta Beauty"]
    invented = grade(q, gold, "Yes, Foot Locker's new CEO, John Doe, was the CEO of Nike.")
    assert (invented.rule, invented.decided) == ("yes_no_figures", False)
    named = grade(q, gold, "Yes: Mary Dillon ran Ulta Beauty as its CEO before.")
    assert (named.label, named.rule, named.decided) == ("correct", "yes_no", True)
    assert key_names("Yes, Boeing's business is cyclical.", "Is Boeing's business subject to cyclicality?") == []


# --- the judge --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("reply,label", [
    ("VERDICT: correct", "correct"), ("verdict: INCORRECT", "incorrect"), ("Refusal", "refusal"),
    ("**Incorrect**", "incorrect"), ("Verdict - refusal.", "refusal"),
    ("The candidate gives 5.43% for 5.4%.\nVERDICT: correct", "correct"),
    ("It says 'correct' is the capex line... VERDICT: incorrect", "incorrect"),  # the marked verdict wins
    ("The answer is not correct.", None), ("partly right, partly wrong", None),
    ("<think>could be correct</think>\nincorrect", "incorrect"),  # reasoning is not read
    ("", None), ("I am not sure.", None), ("correct or incorrect, hard to say", None), ("VERDICT: maybe", None),
])
def test_reading_the_judge_verdict(reply, label):
    assert read_judge_verdict(reply) == label


def test_the_judge_prompt_carries_question_gold_and_answer_and_cuts_long_answers():
    messages = judge_messages(CAPEX_Q, "1577", "word " * 2000 + "Therefore capex was $1,577 million.")
    assert all(isinstance(m, Message) for m in messages) and [m.role for m in messages] == ["system", "user"]
    user = messages[1].content
    assert CAPEX_Q in user and "Reference answer:\n1577" in user and "characters left out" in user
    assert user.rstrip().endswith("VERDICT: refusal.") and "Therefore capex was $1,577 million." in user
    assert len(user) < JUDGE_ANSWER_CHARS + 1000


def test_combine_keeps_decided_rules_and_asks_the_judge_for_guesses():
    decided = Grade("refusal", "refusal_phrase", True)
    guessed = Grade("incorrect", "overlap", False, "open answer")
    assert combine(decided, "correct") is decided
    assert combine(guessed, "correct") == Grade("correct", "judge", True, combine(guessed, "correct").detail)
    unreadable = combine(guessed, None)
    assert (unreadable.label, unreadable.rule, unreadable.decided) == ("incorrect", "judge_unreadable", False)


def test_judge_mode_on_the_fake_model_calls_the_judge_only_for_guesses(tmp_path):
    models = fake_models(tmp_path, judge=FakeBackend(reply="VERDICT: correct"))
    judge = models["judge"]
    open_gold = "Las Vegas resorts contributed ~90% of company level EBITDAR during FY2022."
    q = "Which region had the Highest EBITDAR Contribution for MGM during FY2022?"
    graded, reply = asyncio.run(grade_judged(judge, q, open_gold, "MGM China had the highest EBITDAR."))
    assert (graded.label, graded.rule, reply) == ("correct", "judge", "VERDICT: correct")
    refused, reply = asyncio.run(grade_judged(judge, CAPEX_Q, "1577", "The text does not provide the capex."))
    assert (refused.label, refused.rule, reply) == ("refusal", "refusal_phrase", None)
    assert len(judge.backend.requests) == 1  # the refusal needed no judge call
    request = judge.backend.requests[0]
    assert "MGM China had the highest EBITDAR." in request.messages[-1].content
    assert request.params.max_tokens <= 64 and request.params.temperature == 0.0


def test_judge_mode_with_a_malformed_reply_keeps_the_rules_guess(tmp_path):
    models = fake_models(tmp_path, judge=FakeBackend(reply="Hmm, partly right and partly wrong."))
    graded, _ = asyncio.run(grade_judged(models["judge"], "Which region had the highest EBITDAR for MGM?",
                                         "Las Vegas resorts contributed ~90%.", "MGM China."))
    assert (graded.rule, graded.decided) == ("judge_unreadable", False) and graded.label in GRADES


# --- against the release's human labels -------------------------------------------------------------------

NUMERIC_AGREEMENT_FLOOR = 0.95
"""The rules grader's agreement with the humans on the numeric questions of all 8 released files measured 0.978
(bench/financebench_grader.py); the floor leaves a small margin for rule changes that trade a case or two."""

ALL_AGREEMENT_FLOOR = 0.84
"""Measured 0.865 over all 1,200 answers (κ 0.793)."""


def released_rows(shared_data):
    root = shared_data / "financebench"
    results = sorted((root / "results").glob("*.jsonl"))
    if not results:
        pytest.skip("no released FinanceBench results under the shared data")
    questions = {}
    with open(root / "data" / "financebench_open_source.jsonl", encoding="utf-8") as handle:
        for line in handle:
            obj = json.loads(line)
            questions[obj["financebench_id"]] = obj
    rows = []
    for path in results:
        with open(path, encoding="utf-8") as handle:
            rows.extend(json.loads(line) for line in handle)
    return rows, questions


def test_rules_agree_with_the_human_labels_of_the_release(shared_data):
    rows, questions = released_rows(shared_data)
    assert len(rows) == 1200
    human, graded, numeric = [], [], []
    for row in rows:
        q = questions[row["financebench_id"]]
        gold = str(row["gold_answer"])
        human.append(HUMAN_LABELS[row["label"]])
        graded.append(grade_rules(row["question"], gold, row["model_answer"] or "",
                                  question_type=q["question_type"]).label)
        numeric.append(is_numeric_question(gold, q["question_type"]))
    pairs = [(h, g) for h, g, n in zip(human, graded, numeric) if n]
    assert len(pairs) == 416
    assert sum(h == g for h, g in pairs) / len(pairs) >= NUMERIC_AGREEMENT_FLOOR
    assert sum(h == g for h, g in zip(human, graded)) / len(human) >= ALL_AGREEMENT_FLOOR
    assert cohen_kappa(human, graded) >= 0.75


def test_rules_read_the_question_files_gold_as_well(shared_data):
    """The task grades against data/financebench_open_source.jsonl ('5.4%', '$1577.00'), not the results' ratios."""
    rows, questions = released_rows(shared_data)
    pairs = []
    for row in rows:
        q = questions[row["financebench_id"]]
        if is_numeric_question(q["answer"], q["question_type"]):
            label = grade_rules(row["question"], q["answer"], row["model_answer"] or "",
                                question_type=q["question_type"]).label
            pairs.append((HUMAN_LABELS[row["label"]], label))
    assert sum(h == g for h, g in pairs) / len(pairs) >= NUMERIC_AGREEMENT_FLOOR
