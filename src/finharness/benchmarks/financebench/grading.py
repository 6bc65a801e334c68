"""Grading a FinanceBench answer correct / incorrect / refusal, as the paper's human reviewers did.

The paper (Islam et al. 2023, arXiv 2311.11944) graded every answer by hand; its release labels each answer
"Correct Answer", "Incorrect Answer" or "Refusal". Two grading modes reproduce those labels.

rules   no model at all. Each grade records its rule, and whether the rule is sure (`Grade.decided`):
          empty            an empty answer: refusal.
          number_match /   numeric questions (`is_numeric_question`: the gold is one number). The answer's
          number_mismatch  conclusion numbers (`conclusion_numbers`: the last sentence with a number and the
                           last one with a 'therefore / so / thus / rounded / answer' cue, plus bold, [[...]] and
                           \\boxed{} spans; dates, years, page / note / item numbers, '10-K', list markers and
                           '3M' left out) are compared with the gold after unit, scale and percent
                           normalisation (`_quantities`): a reply in units, in thousands (statements often
                           are) or with its own scale word against a gold in the question's unit ('in USD
                           millions'); a percentage, or a bare number when the question asks in percents,
                           against a ratio gold (0.054 vs '5.43%'); a magnitude whatever its sign ('(1,577)',
                           'a decrease of 0.2 percentage points' for 0.002: filings and analysts write
                           outflows and declines as positive amounts with the sign in words). Equal is
                           `tolerance`: one unit of the gold's last digit (rounded intermediate results:
                           7.8% for 7.9%), less than half a unit when the gold has one significant digit
                           (0.02; '1.5 percentage points' is not '1 percentage point'), at
                           least RELATIVE_TOLERANCE of the gold, at the reply's own precision when it is
                           coarser but within COARSEST_REPLY_STEP ('$1.62 billion' for 1,616 million, not
                           '$1.6 billion'); a gold of 0 needs 0.
          refusal_phrase   the answer declines or says the information is not there ('does not provide',
                           'I cannot calculate', 'is not available in the', 'I don't have access', 'as an
                           AI', 'please refer to', 'you would need to', 'if you can provide' ...): on a
                           numeric question, when its number does not match and no sentence after its last
                           declining one states a value (a disclaimer followed by 'the margin is 5.4%' is
                           graded on the 5.4%; a calculation that stops at 'without the COGS we cannot
                           complete it' is a refusal); on the other questions, when the phrase is in its
                           first REFUSAL_OPENING sentences (later ones are caveats of an answer).
          made_up          the answer says its figures are invented ('let's assume', 'hypothetical values',
                           'for the purpose of this example'): incorrect, whatever it concludes.
          no_number        a numeric question answered without any number: incorrect, a guess.
          yes_no           the gold starts with Yes/No and the answer opens a sentence with Yes/No (or
                           says 'the answer is yes'): the other stance is incorrect; the same stance is
                           correct when at least half the gold's key figures are in the answer too, and
                           one of the names the gold gives that the question does not (`key_names`: 'Ulta
                           Beauty'), where it gives any (yes_no_figures, a guess, when not).
          yes_no_implied   no explicit Yes/No: the stance read from negation in the answer's conclusion,
                           and the gold's key figures; a guess.
          overlap          the rest (open answers): correct when at least half the gold's key numbers are in
                           the answer, or, for a gold without numbers, at least OVERLAP_CORRECT of its content
                           words that the question does not already have (`key_fact_overlap`: an answer that
                           repeats the question's words and picks the wrong option shares none); a guess.
judge   the rules where they are sure (decided=True), a rubric LLM judge for every grade they only guessed
        (`judge_messages`; its one-line verdict read by `read_judge_verdict`; `grade_judged` does both for
        one answer); a reply with no readable verdict keeps the rules' guess (rule 'judge_unreadable').

Measured against the release's 1,200 human labels, design files apart from held-out ones:
bench/financebench_grader.py and docs/benchmarks/financebench.md.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from ...core.types import GenerateParams, Message
from ...extract.numbers import NumberReading, find_numbers, normalise_number_text, parse_number

GRADES = ("correct", "incorrect", "refusal")
HUMAN_LABELS = {"Correct Answer": "correct", "Incorrect Answer": "incorrect", "Refusal": "refusal"}
"""The release's label -> the grade."""

JUDGE_MAX_TOKENS = 16
"""The judge's answer budget: the verdict is one word on one line ('VERDICT: incorrect' is about 5 tokens)."""

RELATIVE_TOLERANCE = 0.001
"""A reply this close to the gold (relative) is equal even past the gold's precision: a ratio computed from
statement lines rounded to $ millions moves in its fourth significant digit (93.88 vs 93.86 days)."""

LAST_DIGIT_UNITS = 1.0
"""How far from the gold, in units of its last written digit, a reply may be: one unit, the difference that
rounding intermediate results makes (averaging 12.6%, 5.7% and 5.2% gives 7.8% where the exact figures give
7.9%; 24.25 for 24.26)."""

COARSEST_REPLY_STEP = 0.01
"""A reply rounded more coarsely than the gold is compared at its own precision only while that precision
is within 1% of the gold (BizBench's tolerance): coarser than that says nothing about the number."""

OVERLAP_CORRECT = 0.3
"""The open-answer fallback: share of the gold's content words new to the question that the answer must contain
to be guessed correct (on the 1,200 labelled answers 0.3 agrees as well as 0.5 did over all the gold's words)."""

REFUSAL_OPENING = 2
"""Sentences at the start of an open answer where a refusal phrase marks it a refusal. On the four design files
the humans labelled 253 of 256 answers with such a phrase in the first sentence 'Refusal', and 1 of 14 with it
only later (those were answers with a caveat)."""

JUDGE_ANSWER_CHARS = 2500
"""The longest answer shown to the judge whole; a longer one keeps its start and its end (the conclusion)."""


@dataclass(frozen=True)
class Grade:
    """One answer's grade and the rule behind it."""

    label: str
    """One of GRADES: 'correct', 'incorrect' or 'refusal'."""

    rule: str
    """The rule that decided: 'empty', 'refusal_phrase', 'number_match', 'number_mismatch', 'no_number', 'yes_no',
    'yes_no_figures', 'yes_no_implied', 'overlap', 'made_up'; in the judge mode also 'judge', 'judge_unreadable'."""

    decided: bool
    """True: the rule is confident (the judge mode keeps it); False: a fallback guessed (rules mode still
    returns its label; the judge mode asks the judge)."""

    detail: str | None = None
    """What the rule saw, e.g. 'gold 0.054 (±0.0005) vs 5.43% -> 0.0543'."""


# --- numbers: the gold, the question's unit, the answer's conclusion ------------------------------------

_SCALE_WORDS = {"thousand": 1e3, "million": 1e6, "billion": 1e9, "trillion": 1e12}
_QUESTION_UNIT = re.compile(
    r"\b(?:in|units\s+of)\s+(?:(?:USD|US\$|\$|U\.S\.\s*dollars?|dollars?)\s+)?(thousand|million|billion|trillion)s?\b"
    r"|\b(?:USD|US\$)\s*(thousand|million|billion|trillion)s?\b", re.I)
_PERCENT_QUESTION = re.compile(r"%|\bpercent", re.I)
_IN_THOUSANDS = re.compile(r"\(?\s*in\s+thousands\s*\)?", re.I)
_SCALE_AFTER = re.compile(r"\)?\s*(thousand|million|billion|trillion|mn|bn|mm)s?\b", re.I)
_SCALE_AFTER_FACTORS = {"mn": 1e6, "mm": 1e6, "bn": 1e9}
_PERCENTAGE_POINTS = re.compile(r"\s*(?:percentage\s+points?|pp\b|ppts?\b)", re.I)
_BASIS_POINTS = re.compile(r"\s*(?:basis\s+points?|bps\b)", re.I)
_MONTH_BEFORE = re.compile(r"\b(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|"
                           r"sept?(?:ember)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)\.?\s*$", re.I)
_REFERENCE_BEFORE = re.compile(r"(?:\bpage|\bp\.|\bpp\.|\bnote|\bitem|\bsection|\bexhibit|\bpart|\bstep|\brule|"
                               r"\bform|\bschedule|\barticle|\btable|\bfigure|\bphase|\bpillar|#)\s*$", re.I)
_FILING_AFTER = re.compile(r"^-?[KQ]\b|^\s*decimal|^\s*(?:digits?|significant)\b|^-(?:year|month|day|week|quarter)",
                           re.I)
_CUE = re.compile(r"\b(?:therefore|thus|hence|so|in summary|in conclusion|overall|final(?:ly)?|answer|rounded|"
                  r"rounding|approximately|result)\b", re.I)
_SENTENCE_END = re.compile(r"(?<=[.!?:])\s+(?=[A-Z\"'(\[*$•-])|\n+")
_EMPHASIS = re.compile(r"\*\*(.+?)\*\*|\[\[(.+?)\]\]|\\boxed\{([^{}]*)\}", re.S)


@dataclass(frozen=True)
class Quantity:
    """A number read as a candidate value, with the precision it was written at."""

    value: float
    """The value in the gold's terms (the question's unit; a ratio for a percentage)."""

    step: float
    """One unit in its last written digit, in the same terms (0.001 for '5.4%' as a ratio)."""

    text: str
    """What it was read from, and how ('5.43% as a ratio')."""


def _decimals(digits: str) -> int:
    """Decimals written, trailing zeros dropped: '$1577.00' is a whole number, '8.70' has one decimal."""
    if "." not in digits:
        return 0
    return len(digits.split(".", 1)[1].rstrip("0"))


def _mantissa_digits(reading: NumberReading) -> str:
    found = re.search(r"\d[\d,]*(?:\.\d+)?|\.\d+", reading.span or "")
    return found.group(0).replace(",", "") if found else "0"


@dataclass(frozen=True)
class GoldNumber:
    """A numeric gold answer in ratio terms."""

    value: float
    """The gold ('5.4%' is 0.054; '$1577.00' is 1577)."""

    step: float
    """One unit in its last written (non-zero) decimal, in the same terms."""

    text: str
    """The gold as written."""

    scale: float = 1.0
    """The scale word the gold itself carries ('$2,018mn' -> 1e6), whose unit the gold is read in when the
    question names none; 1 when none."""


def read_gold_number(gold: str) -> GoldNumber | None:
    """The gold as one number (None when it is not one): percentages become ratios, trailing zeros of a
    currency amount are formatting ('$1577.00' has the precision of 1577)."""
    reading = parse_number(str(gold))
    if not reading.parsed:
        return None
    decimals = _decimals(_mantissa_digits(reading))
    step = 10.0 ** -decimals * reading.multiplier
    value = float(reading.value)  # type: ignore[arg-type]
    if reading.percent:
        value, step = value / 100.0, step / 100.0
    return GoldNumber(value, step, str(gold).strip(), reading.multiplier)


def is_numeric_question(gold: str, question_type: str | None = None) -> bool:
    """The numeric subset: the gold is one number ('$1577.00', '0.054', '5.4%'), or a metrics-generated
    question whose gold holds exactly one number."""
    if read_gold_number(gold) is not None:
        return True
    return question_type == "metrics-generated" and len(find_numbers(str(gold))) == 1


def question_unit(question: str) -> float:
    """The unit the question asks the answer in ('in USD millions' -> 1e6); 1 when it names none."""
    found = _QUESTION_UNIT.search(question or "")
    if not found:
        return 1.0
    return _SCALE_WORDS[(found.group(1) or found.group(2)).lower()]


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE_END.split(text) if s and s.strip()]


def _located(sentence: str) -> list[tuple[NumberReading, str, str]]:
    """Each number of a sentence with the text before and after it (to tell dates and references apart)."""
    normalised, _ = normalise_number_text(sentence)
    cursor, located = 0, []
    for reading in find_numbers(normalised):
        span = reading.span or ""
        at = normalised.find(span, cursor)
        if at < 0:
            continue
        cursor = at + len(span)
        located.append((reading, normalised[:at], normalised[cursor:]))
    return located


def _is_quantity(reading: NumberReading, before: str, after: str, gold: GoldNumber | None) -> bool:
    """False for the numbers of a sentence that are not amounts: years, days of dates, page / note / item
    numbers, '10-K', list markers, 'two decimal places'."""
    value = reading.value or 0.0
    plain = not reading.percent and reading.multiplier == 1.0 and not any(n.startswith("currency") for n in reading.notes)
    whole = float(value).is_integer() and "." not in (reading.span or "")
    gold_like_year = gold is not None and 1900 <= abs(gold.value) <= 2100 and float(gold.value).is_integer()
    if plain and whole and 1900 <= value <= 2100 and "," not in (reading.span or "") and not gold_like_year:
        return False
    if plain and whole and _MONTH_BEFORE.search(before):
        return False
    if plain and _REFERENCE_BEFORE.search(before):
        return False
    if _FILING_AFTER.search(after):
        return False
    if plain and whole and not before.strip() and re.match(r"^\s*[.)]", after):  # '1.' / '2)' list markers
        return False
    currency = any(n.startswith("currency") for n in reading.notes)
    if not currency and re.fullmatch(r"\d{1,2}[MBKT]", reading.span or ""):  # '3M' is a company, not 3 million
        return False
    return True


@dataclass(frozen=True)
class AnswerNumber:
    """A quantity of the answer, as written."""

    reading: NumberReading
    after: str
    """The text right after it (scale words the grammar left outside a bracket, 'percentage points')."""


def _answer_numbers(sentence: str, gold: GoldNumber | None) -> list[AnswerNumber]:
    return [AnswerNumber(r, after) for r, before, after in _located(sentence) if _is_quantity(r, before, after, gold)]


def conclusion_numbers(answer: str, gold: GoldNumber | None = None) -> tuple[list[AnswerNumber], str]:
    """The numbers of the answer's conclusion and the text they come from: the last sentence that has a
    number, the last sentence with a conclusion cue that has one, and bold / [[...]] / \\boxed{} spans."""
    text = answer.rsplit("</think>", 1)[-1]
    sentences = _sentences(text)
    with_numbers = [(s, nums) for s in sentences if (nums := _answer_numbers(s, gold))]
    if not with_numbers:
        return [], ""
    chosen = [with_numbers[-1]]
    cued = [(s, n) for s, n in with_numbers if _CUE.search(s)]
    if cued and cued[-1][0] != chosen[0][0]:
        chosen.insert(0, cued[-1])
    for match in _EMPHASIS.finditer(text):
        span = next(g for g in match.groups() if g is not None)
        if nums := _answer_numbers(span, gold):
            chosen.append((span, nums))
    return [n for _, nums in chosen for n in nums], " | ".join(s for s, _ in chosen)


def _quantities(number: AnswerNumber, unit: float, percent_question: bool, in_thousands: bool) -> list[Quantity]:
    """Every reading of one answer number in the gold's terms (see the module docstring)."""
    reading = number.reading
    mantissa = abs(float(reading.mantissa if reading.mantissa is not None else reading.value or 0.0))
    multiplier = reading.multiplier
    after = _SCALE_AFTER.match(number.after) if multiplier == 1.0 else None
    if after:  # '$(4,625) million': the scale word stands outside the bracket the grammar closed
        word = after.group(1).lower()
        multiplier = _SCALE_WORDS.get(word) or _SCALE_AFTER_FACTORS[word]
    step = 10.0 ** -_decimals(_mantissa_digits(reading))
    span = reading.span or ""
    out: list[Quantity] = []

    def add(value: float, value_step: float, how: str) -> None:
        out.append(Quantity(value, value_step, f"{span} {how}".strip()))

    if reading.percent or _PERCENTAGE_POINTS.match(number.after):
        if unit != 1.0:  # the question asks for an amount in millions / billions: a percentage is not one
            return out
        add(mantissa / 100.0, step / 100.0, "as a ratio")
        add(mantissa, step, "")
        return out
    if _BASIS_POINTS.match(number.after):
        add(mantissa / 10_000.0, step / 10_000.0, "bps as a ratio")
        return out
    value = mantissa * multiplier
    add(value / unit, step * multiplier / unit, f"in units of {unit:g}" if unit != 1.0 else "")
    if multiplier != 1.0:
        add(mantissa, step, "without its scale word")
    if unit != 1.0:
        add(value, step * multiplier, "as written")
        if multiplier == 1.0 and (in_thousands or value >= unit):
            # statements in thousands (Netflix, Block, MGM): '$5,466,312' is $5,466 million
            add(value * 1e3 / unit, step * 1e3 / unit, "in thousands")
    if percent_question:
        add(value / 100.0, step * multiplier / 100.0, "as a percentage")
    return out


def _band(gold: GoldNumber, reply_step: float) -> tuple[float, bool]:
    """`tolerance`'s band and whether it is open: the half-unit band of a gold of one significant digit, read at
    its own step, excludes its edge ('1.5 percentage points' rounds away from a gold of '1 percentage point')."""
    target = abs(gold.value)
    if target == 0.0:
        return 0.0, False
    coarse = target < 10 * gold.step * (1 - 1e-9)
    own_step = not gold.step < reply_step <= COARSEST_REPLY_STEP * target
    step = gold.step if own_step else reply_step
    width = step * (0.5 if coarse else LAST_DIGIT_UNITS)
    floor = RELATIVE_TOLERANCE * target
    return max(width, floor), coarse and own_step and width >= floor


def tolerance(gold: GoldNumber, reply_step: float = 0.0) -> float:
    """How far from the gold (in magnitude) a reply written to `reply_step` may be and still equal it: one unit
    of the gold's last digit (LAST_DIGIT_UNITS), half a unit for a gold of one significant digit (0.02, 0.4 are
    coarse bands already), at the reply's own precision when it is coarser but within COARSEST_REPLY_STEP, and
    never less than RELATIVE_TOLERANCE of the gold. 0 for a gold of 0."""
    return _band(gold, reply_step)[0]


def number_agrees(quantity: Quantity, gold: GoldNumber) -> bool:
    """Whether a reading of the reply equals the gold (`tolerance`, an open band where `_band` says so); signs are
    not compared (module docstring)."""
    value = abs(quantity.value)
    if not math.isfinite(value):
        return False
    width, is_open = _band(gold, quantity.step)
    distance = abs(value - abs(gold.value))
    return distance < width * (1 - 1e-9) if is_open else distance <= width * (1 + 1e-9)


def _format(value: float) -> str:
    return f"{value:.6g}"


def grade_number(question: str, gold: GoldNumber, answer: str) -> Grade:
    """The number rules: the conclusion's numbers against the gold."""
    numbers, where = conclusion_numbers(answer, gold)
    if not numbers:
        return Grade("incorrect", "no_number", False, f"gold {gold.text}: the answer states no number")
    unit = question_unit(question)
    if gold.scale != 1.0:  # a gold with its own scale word ('$1,577 million'): in the question's unit, else in its own
        unit = unit if unit != 1.0 else gold.scale
        gold = GoldNumber(gold.value / unit, gold.step / unit, gold.text)
    percent_question = bool(_PERCENT_QUESTION.search(question or ""))
    in_thousands = bool(_IN_THOUSANDS.search(answer))
    band = "exactly 0" if gold.value == 0 else f"±{_format(tolerance(gold))}"
    for number in numbers:
        for quantity in _quantities(number, unit, percent_question, in_thousands):
            if number_agrees(quantity, gold):
                return Grade("correct", "number_match", True,
                             f"gold {gold.text} ({band}) vs {quantity.text} -> {_format(quantity.value)}")
    last = numbers[-1].reading.span
    return Grade("incorrect", "number_mismatch", True,
                 f"gold {gold.text} ({band}) vs conclusion {last!r} (from: {where[:160]!r})")


# --- refusals ------------------------------------------------------------------------------------

_SOURCE = r"(?:information|context|text|document|documents|data|evidence|excerpts?|filings?|passages?|statements?|" \
          r"details|sources?|report|records?)"
_REFUSAL_PATTERNS = [
    rf"\b(?:the|this|these|provided|given|available)\s+(?:\w+\s+){{0,3}}{_SOURCE}\s+(?:\w+\s+){{0,2}}"
    r"(?:does|do|did)\s*(?:not|n't)\s+(?:\w+\s+)?(?:provide|include|contain|specify|mention|give|have|offer|state|"
    r"show|disclose|cover|list|indicate|allow|detail|present|break)",
    rf"\b(?:is|are)\s+not\s+(?:\w+\s+)?(?:provided|available|included|given|specified|mentioned|disclosed|stated|"
    rf"present|found)\s+(?:in|within|from)\s+(?:the|this|these)\s+(?:\w+\s+){{0,2}}{_SOURCE}",
    r"\b(?:i|we)\s*(?:cannot|can't|can not|could not|couldn't|am unable to|'m unable to|are unable to|was unable to|"
    r"do not|don't)\s+(?:\w+\s+)?(?:provide|calculate|determine|answer|find|give|compute|confirm|say|locate|access|"
    r"see|identify|assess|verify|know|complete|proceed|perform)",
    r"\bif you (?:can |could )?provide\b",
    r"\b(?:unable|impossible|not possible)\s+to\s+(?:\w+\s+)?(?:provide|calculate|determine|answer|find|give|compute|"
    r"confirm|say|assess)",
    r"\b(?:i|we)\s*(?:do not|don't|did not|didn't)\s+have\s+(?:\w+\s+){0,2}(?:access|information|data|context|"
    r"ability|details|enough|sufficient)",
    r"\bi(?:'m| am)\s+sorry\b", r"\bi apologi[sz]e\b", r"\bunfortunately\b", r"\bas an ai\b",
    r"\b(?:not enough|insufficient|no (?:specific |relevant |such )?(?:information|data|details))\b",
    r"\bwithout (?:access to|the (?:specific|necessary|actual|relevant))\b",
    r"\bplease (?:refer to|consult)\b", r"\bi (?:would )?recommend (?:checking|consulting|referring)\b",
    r"\byou (?:would|will) need to\b", r"\byou (?:can|could) (?:calculate|find|compute|look)\b",
    r"\bnot (?:explicitly |directly )?(?:provided|available|included|given|disclosed) in the\b",
    rf"\b{_SOURCE}\b[^.]{{0,60}}\b(?:is|are|was|were)\s+not\s+(?:provided|available|given|included|present)\b",
    r"\bplease provide (?:the|more|additional|me|us)\b",
    r"\b(?:can't|cannot|can not|unable to) (?:provide|give) (?:the|an|a specific|this|that) (?:answer|information|figure)",
]
_REFUSAL = re.compile("|".join(f"(?:{p})" for p in _REFUSAL_PATTERNS), re.I)
_ASSERTED_BEFORE = re.compile(r"(?:\b(?:is|was|were|are|be|of|at|equals?|totall?ed|amounts? to|amounted to|came to|"
                              r"stood at|reached)|=|≈)\s*(?:approximately|about|around|roughly|an? estimated|~|≈)?\s*"
                              r"(?:a |an )?(?:(?:increase|decrease|decline|drop|gain|loss|change) of\s*)?$", re.I)
_OPERATOR_AFTER = re.compile(r"^\s*[-*/×÷+^]\s*[(\w$]")
"""A number followed by an operator is a step of a formula ('365 * (average payables)'), not an answer."""


def detect_refusal(answer: str) -> str | None:
    """The phrase that marks the answer as a refusal or a failure to answer, else None; an empty answer is
    '(empty answer)'. Only the answer's opening counts (its first REFUSAL_OPENING sentences): an answer that
    works the question through and notes on the way that a detail is missing ('the evidence does not include
    acquisitions in FY2021') is an answer, and is graded as one."""
    text = (answer or "").rsplit("</think>", 1)[-1].replace("\u2019", "'")
    if not text.strip():
        return "(empty answer)"
    for sentence in _sentences(text)[:REFUSAL_OPENING]:
        if found := _REFUSAL.search(sentence):
            return found.group(0)
    return None


def _asserts_number(sentence: str, gold: GoldNumber | None) -> bool:
    """Whether a sentence states a value ('the margin is 5.4%', '= $1,832 million'), not a step of a formula."""
    for reading, before, after in _located(sentence):
        if (_is_quantity(reading, before, after, gold) and _ASSERTED_BEFORE.search(before)
                and not _OPERATOR_AFTER.match(after)):
            return True
    return False


def _ends_declining(answer: str, gold: GoldNumber | None) -> str | None:
    """For a numeric question: the refusal phrase of the last sentence that declines, when no sentence after it
    states a value ('... Average PP&E = $267.5 million. Without the revenue we cannot calculate the ratio.');
    None when the answer does not decline, or states a value after it did ('The text does not give the margin
    directly. From the revenue and EBITDA lines, the margin is 5.4%.')."""
    sentences = _sentences(answer.rsplit("</think>", 1)[-1].replace("\u2019", "'"))
    for i in range(len(sentences) - 1, -1, -1):
        if found := _REFUSAL.search(sentences[i]):
            later = sentences[i + 1:]
            return None if any(_asserts_number(s, gold) for s in later) else found.group(0)
    return None


_MADE_UP = re.compile(r"\blet'?s (?:assume|say|suppose)\b|\bhypothetical\b|\bfor (?:the )?purposes? of (?:this|the|an?) "
                      r"(?:example|illustration)\b|\bplaceholder\b|\billustrative (?:values?|figures?|numbers?|data)\b|"
                      r"\bassume (?:that )?(?:the )?(?:following )?(?:values?|figures?|numbers?|data)\b", re.I)


def made_up(answer: str) -> str | None:
    """The phrase with which an answer says its figures are invented ('Let's assume the following values
    (these are hypothetical values ...)'), else None. Such an answer is not an answer from the filing, whatever
    it concludes: incorrect (a small model does this where it has no figures; no released answer the humans
    labelled correct does)."""
    found = _MADE_UP.search((answer or "").rsplit("</think>", 1)[-1])
    return found.group(0) if found else None


# --- yes / no --------------------------------------------------------------------------------------

_GOLD_STANCE = re.compile(r"^\W*(yes|no)\b(?![-'])", re.I)
_ANSWER_STANCE = re.compile(r"(?:^|(?<=[\n.!?:])|\banswer is:?)\s*[*\"'(]*\s*(yes|no)\b(?![-'])(?!\s+(?:one|single|"
                            r"other|longer|more|less|specific|information|data|mention|details?|evidence)\b)", re.I)


def gold_stance(gold: str) -> str | None:
    """'yes' / 'no' when the gold starts with it, else None."""
    found = _GOLD_STANCE.match(str(gold))
    return found.group(1).lower() if found else None


def answer_stance(answer: str) -> str | None:
    """'yes' / 'no' when the answer opens a sentence with it (or says 'the answer is yes'); the first one counts."""
    found = _ANSWER_STANCE.search(answer.rsplit("</think>", 1)[-1])
    return found.group(1).lower() if found else None


_NEGATION = re.compile(r"\b(?:not|no|never|neither|nor|none|cannot)\b|n't\b", re.I)
_NOT_ONLY = re.compile(r"\bnot\s+only\b|\bno\s+(?:doubt|longer\s+\w+\s+than)\b", re.I)


def implied_stance(answer: str) -> tuple[str, str]:
    """A guess at the stance of an answer that says no Yes/No: 'no' when its conclusion (the last sentence with a
    'therefore / in summary / overall' cue, else its first sentence) is negated, else 'yes'; and that sentence."""
    sentences = _sentences(answer.rsplit("</think>", 1)[-1]) or [""]
    cued = [s for s in sentences if _CUE.search(s)]
    conclusion = cued[-1] if cued else sentences[0]
    negated = bool(_NEGATION.search(_NOT_ONLY.sub("", conclusion)))
    return ("no" if negated else "yes"), conclusion


# --- the open-answer fallback ---------------------------------------------------------------------

_STOPWORDS = frozenset("""a about above after again all also am an and any are as at be because been before being
below between both but by can could did do does doing down during each few for from further had has have having he
her here hers him his how i if in into is it its itself just more most my no nor not now of off on once only or
other our out over own same she should so some such than that the their them then there these they this those
through to too under until up very was we were what when where which while who whom why will with would you your
company company's fy fiscal year years period based answer here assumes refers""".split())
_WORD = re.compile(r"[a-z][a-z&'-]+")


def _content_words(text: str) -> set[str]:
    return {w.strip("'-") for w in _WORD.findall(text.lower()) if w.strip("'-") not in _STOPWORDS and len(w) > 2}


def key_fact_overlap(gold: str, answer: str, question: str = "") -> tuple[int, int, float]:
    """(the gold's key numbers found in the answer, the gold's key numbers, share of its content words found):
    the words the question already has are left out of that share where the gold has others."""
    gold_numbers = [r for r, before, after in _located(str(gold)) if _is_quantity(r, before, after, None)]
    answer_numbers = [n for s in _sentences(answer) for n in _answer_numbers(s, None)]
    found = 0
    for reading in gold_numbers:
        target = read_gold_number(reading.span or "")
        if target is None:
            continue
        quantities = [q for n in answer_numbers for q in _quantities(n, 1.0, reading.percent, False)]
        if any(number_agrees(q, target) for q in quantities):
            found += 1
    words = _content_words(str(gold))
    words = (words - _content_words(question)) or words
    share = len(words & _content_words(answer)) / len(words) if words else 0.0
    return found, len(gold_numbers), share


_NAME = re.compile(r"(?<![.!?]\s)\b[A-Z][a-zA-Z&'-]+(?:\s+[A-Z][a-zA-Z&'-]+)*")
_LETTERS = re.compile(r"[A-Za-z&'\u2019-]+")
_NOT_NAMES = frozenset("yes no the this that these those she he it they its their our we i a an in on of for and or but so "
                       "as at by to fy q1 q2 q3 q4 usd us".split())


def _bare(word: str) -> str:
    """A word lower-cased without its possessive: "Boeing's" -> 'boeing'."""
    word = word.lower().replace("\u2019", "'").strip("'")
    return word[:-2] if word.endswith("'s") else word


def _bare_words(text: str) -> set[str]:
    return {_bare(w) for w in _LETTERS.findall(text or "")}


def key_names(gold: str, question: str) -> list[str]:
    """The names the gold gives that the question does not ('Ulta Beauty' for 'Does Foot Locker's new CEO have
    previous CEO experience ...'): capitalised words inside a sentence, none of whose words the question has."""
    asked = _bare_words(question)
    names = []
    for sentence in _sentences(str(gold)):
        for found in _NAME.finditer(sentence):
            if found.start() == 0:
                continue
            words = [_bare(w) for w in found.group(0).split()]
            if any(w in asked for w in words) or all(w in _NOT_NAMES or len(w) < 3 for w in words):
                continue
            if _MONTH_BEFORE.search(found.group(0)):
                continue
            names.append(found.group(0))
    return list(dict.fromkeys(names))


def names_found(names: list[str], answer: str) -> int:
    """How many of `names` the answer mentions (each by any of its words of 3 letters or more, case-blind)."""
    words = _bare_words(answer)
    return sum(1 for n in names if any(_bare(w) in words for w in n.split() if len(w) >= 3))


def _fallback(gold: str, answer: str, why: str, question: str) -> Grade:
    found, wanted, share = key_fact_overlap(gold, answer, question)
    if wanted:
        label = "correct" if 2 * found >= wanted else "incorrect"
        detail = f"{why}; {found} of the gold's {wanted} key numbers in the answer"
    else:
        label = "correct" if share >= OVERLAP_CORRECT else "incorrect"
        detail = f"{why}; {share:.0%} of the gold's content words new to the question in the answer"
    return Grade(label, "overlap", False, detail)


# --- the rules grader ---------------------------------------------------------------------------------

def grade_rules(question: str, gold: str, answer: str, *, question_type: str | None = None) -> Grade:
    """The model-free grade (module docstring for the rules and their order)."""
    answer = answer or ""
    gold = str(gold)
    gold_number = read_gold_number(gold)
    if gold_number is None and question_type == "metrics-generated" and is_numeric_question(gold, question_type):
        gold_number = read_gold_number(find_numbers(gold)[0].span or "")  # '$1,577 million.' in a sentence
    refusal = detect_refusal(answer)
    if refusal == "(empty answer)":
        return Grade("refusal", "empty", True, "the answer is empty")
    if gold_number is not None:
        graded = grade_number(question, gold_number, answer)
        declined = _ends_declining(answer, gold_number)
        if graded.label != "correct" and declined is not None:  # a matching number is an answer, caveats or not
            return Grade("refusal", "refusal_phrase", True, f"declines and gives no number after: {declined!r}")
        if graded.label == "correct" and (invented := made_up(answer)):
            return Grade("incorrect", "made_up", True, f"its figures are invented ({invented!r}): {graded.detail}")
        return graded
    if refusal is not None:
        return Grade("refusal", "refusal_phrase", True, f"declines: {refusal!r}")
    if invented := made_up(answer):
        return Grade("incorrect", "made_up", True, f"its figures are invented: {invented!r}")
    stance = gold_stance(gold)
    if stance is not None:
        said = answer_stance(answer)
        if said is not None:
            found, wanted, _ = key_fact_overlap(gold, answer)
            if said != stance:
                return Grade("incorrect", "yes_no", True, f"gold {stance}, answer {said}")
            names = key_names(gold, question)
            named = names_found(names, answer)
            facts = f"{found} of the gold's {wanted} key numbers" + (f", {named} of its names {names}" if names else "")
            if 2 * found >= wanted and (named or not names):
                return Grade("correct", "yes_no", True, f"gold {stance}, answer {said}; {facts} in the answer")
            return Grade("correct", "yes_no_figures", False, f"gold {stance}, answer {said}, but only {facts} "
                                                             "in the answer")
        implied, conclusion = implied_stance(answer)
        found, wanted, _ = key_fact_overlap(gold, answer)
        agrees = implied == stance and 2 * found >= wanted  # the gold's figures are part of its answer
        return Grade("correct" if agrees else "incorrect", "yes_no_implied", False,
                     f"gold {stance}, no explicit yes/no; the conclusion reads {implied} ({conclusion[:100]!r}); "
                     f"{found} of the gold's {wanted} key numbers in the answer")
    return _fallback(gold, answer, "open answer", question)


# --- the judge ----------------------------------------------------------------------------------------

JUDGE_SYSTEM = """You grade answers to questions about public companies' financial filings against a reference answer \
written by a financial analyst.

Grade the candidate answer with exactly one word:
- correct: it gives the reference answer's key facts (numbers, names, yes/no stance, direction of a change) and \
contradicts none of them. Numbers count as equal when they agree at the reference's precision after converting \
units (millions, billions), percentages and ratios (5.4% = 0.054), and signs written in words (an outflow of \
$1,577 million = (1,577)). Extra detail, other wording and a longer explanation are fine.
- incorrect: it gives an answer, but a key fact is missing, different or contradicted, or the final number \
differs from the reference.
- refusal: it declines, says the information is not available or cannot be determined, or only explains how \
one could find the answer, without giving one.

Reply with one line and nothing else: VERDICT: correct, VERDICT: incorrect or VERDICT: refusal."""


def _shown_answer(answer: str) -> str:
    if len(answer) <= JUDGE_ANSWER_CHARS:
        return answer
    head, tail = JUDGE_ANSWER_CHARS // 4, JUDGE_ANSWER_CHARS - JUDGE_ANSWER_CHARS // 4
    return f"{answer[:head]}\n[... {len(answer) - head - tail} characters left out ...]\n{answer[-tail:]}"


def judge_messages(question: str, gold: str, answer: str) -> tuple[Message, ...]:
    """The rubric judge's prompt: the question, the reference (gold) answer and the candidate answer (a long
    answer shown by its start and its end, where the conclusion is)."""
    user = (f"Question:\n{question.strip()}\n\nReference answer:\n{str(gold).strip()}\n\n"
            f"Candidate answer:\n{_shown_answer((answer or '').strip()) or '(empty)'}\n\n"
            "Grade the candidate answer. Reply with one line: VERDICT: correct, VERDICT: incorrect or VERDICT: refusal.")
    return (Message("system", JUDGE_SYSTEM), Message("user", user))


_VERDICT_WORDS = {"correct": "correct", "incorrect": "incorrect", "wrong": "incorrect", "refusal": "refusal",
                  "refused": "refusal", "refuse": "refusal", "refuses": "refusal"}
_VERDICT_LINE = re.compile(r"^\W*(?:(?:final\s+)?(?:verdict|grade|label|answer)\s*[:=\-]?\s*)?\W*"
                           r"(correct|incorrect|wrong|refusal|refused|refuses|refuse)\W*$", re.I)
_VERDICT_MARKED = re.compile(r"\b(?:verdict|grade|label)\s*[:=]\s*\W*(correct|incorrect|wrong|refusal|refused|refuse)\b",
                             re.I)
def read_judge_verdict(text: str) -> str | None:
    """The judge reply's grade (one of GRADES), None when it cannot be read: the last 'VERDICT: x' (also
    'Grade: x', 'Label: x'), else the last line that is nothing but a verdict word ('Incorrect.', '**refusal**').
    Free prose ('the answer is not correct', 'partly right, partly wrong') is None, never a guess: the judge was
    asked for one line, and a reply that ignores the format is counted as unreadable."""
    body = (text or "").rsplit("</think>", 1)[-1].strip()
    if not body:
        return None
    marked = _VERDICT_MARKED.findall(body)
    if marked:
        return _VERDICT_WORDS[marked[-1].lower()]
    lines = [line.strip() for line in body.splitlines() if line.strip()]
    line_verdicts = [m.group(1).lower() for line in lines if (m := _VERDICT_LINE.match(line))]
    return _VERDICT_WORDS[line_verdicts[-1]] if line_verdicts else None


def combine(rules: Grade, judge_label: str | None) -> Grade:
    """The judge mode's grade: the rules' when they decided (refusal, number and yes/no rules), the judge's
    otherwise; with no readable verdict the rules' guess stands, marked 'judge_unreadable'."""
    if rules.decided:
        return rules
    if judge_label in GRADES:
        return Grade(judge_label, "judge", True, f"judge: {judge_label} (rules guessed {rules.label}: {rules.rule})")
    return Grade(rules.label, "judge_unreadable", False, f"no readable judge verdict; rules' guess: {rules.detail}")


async def grade_judged(judge: Any, question: str, gold: str, answer: str, *,
                       question_type: str | None = None) -> tuple[Grade, str | None]:
    """The judge mode for one answer: the rules, and the judge (a model handle: `await judge.chat(messages,
    params)`) only when they did not decide; returns the grade and the judge's reply (None: no call made)."""
    rules = grade_rules(question, gold, answer, question_type=question_type)
    if rules.decided:
        return rules, None
    reply = await judge.chat(judge_messages(question, gold, answer),
                             GenerateParams(max_tokens=JUDGE_MAX_TOKENS, temperature=0.0))
    return combine(rules, read_judge_verdict(reply.text)), reply.text
