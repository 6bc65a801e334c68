"""Reading a number from a model reply, and deciding whether it matches a gold number.

Two named modes, each reading recording the rule that fired (`NumberReading.rule`); a reply
with nothing readable is `unparseable` (value None, `detail` says why) and is never guessed.

official  BizBench's `brace_extract` (kensho-technologies/benchmarks-pipeline, prompt.py):
          `re.findall(r"\\[\\[(.*)\\]\\]")` must find exactly one match (the `.*` is greedy and
          does not cross lines, so '[[1]] or [[2]]' on one line is one match that fails to parse);
          ',', '$' and '%' are removed; a single option letter A-D reads as its index; otherwise
          Python's `float()` decides (it also accepts 'nan', 'inf', '1e3', '1_000', spaces).
          Rules: official_brackets, official_letter.
robust    A finance-aware reading, first rule that yields a number wins:
            brackets       exactly one [[…]], or several that all read the same value
                           (brackets_repeated); several different values are a conflict
            boxed          \\boxed{…}
            answer_cue     the first number after the last 'answer is' / 'Answer:' / '答案是'
            bare_number    the whole reply is one number
          and every number is read by `parse_number`, which knows percentages, K/M/B/bn/mn,
          thousand/million/billion/trillion words, 千/万/百万/千万/亿/万亿, '(1,234)' and '$(1,234)' as
          negative,
          currency symbols and codes (before or after), unicode/full-width minus and digits.
          The normalisations applied are listed in `NumberReading.notes`.

Matching (`match_number`):
  within_1pct   |pred - gold| <= 1% of |gold| (the BizBench paper's rule; gold 0 needs 0)
  exact_round5  round(pred, 5) == round(gold, 5) (FinQA's rule), a named alternative
  official mode compares the float read from [[…]] with the gold as is; robust mode is also
  scale-aware: a reply in units for a gold in millions ('1,496,500,000' for 1496.5 million),
  a reply with its own scale word ('1,496.5 million' for 1496.5), or a ratio for a percentage
  (0.2222 for 22.22 percent) is normalised and matched, with the normalisation as the rule.
"""

from __future__ import annotations

import math
import re
import unicodedata
from dataclasses import dataclass
from typing import Literal

from . import UNPARSEABLE  # re-exported: callers import it from here

Mode = Literal["official", "robust"]

# --- the official reader ----------------------------------------------------------------------

_OFFICIAL_BRACKETS = re.compile(r"\[\[(.*)\]\]")
_OFFICIAL_LETTERS = "ABCD"


@dataclass(frozen=True)
class NumberReading:
    """One number read from a reply (or nothing), and how it was read."""

    value: float | None
    """The number with every scale applied ('$3.4bn' -> 3.4e9, '12%' -> 12.0); None when unparseable."""

    rule: str
    """The rule that fired ('official_brackets', 'brackets', 'answer_cue', ...) or 'unparseable'."""

    span: str | None = None
    """The text the number was read from."""

    mantissa: float | None = None
    """The number before its scale word or suffix ('1,496.5 million' -> 1496.5); equals value when none."""

    multiplier: float = 1.0
    """The scale the reply itself stated (1e6 for 'million', 1e4 for '万'); 1 when none."""

    percent: bool = False
    """The reply marked the number as a percentage ('12%', '12 percent'); value stays 12.0."""

    notes: tuple[str, ...] = ()
    """Normalisations applied, e.g. ('currency:$', 'thousands_separator', 'scale:bn')."""

    detail: str | None = None
    """Why nothing was read (no_brackets, multiple_brackets, brackets_conflict, not_a_number...)."""

    @property
    def parsed(self) -> bool:
        return self.value is not None


def _unparseable(detail: str, span: str | None = None) -> NumberReading:
    return NumberReading(value=None, rule=UNPARSEABLE, span=span, detail=detail)


def read_official(reply: str) -> NumberReading:
    """BizBench's `brace_extract`, reproduced exactly (see the module docstring)."""
    found = _OFFICIAL_BRACKETS.findall(reply or "")
    if len(found) != 1:
        return _unparseable("no_brackets" if not found else "multiple_brackets")
    span = found[0]
    text = span
    for junk in (",", "$", "%"):
        text = text.replace(junk, "")
    if text in _OFFICIAL_LETTERS:  # note: '' is "in" every string, exactly as upstream: '[[]]' reads 0.0
        index = float(_OFFICIAL_LETTERS.index(text))
        return NumberReading(value=index, rule="official_letter", span=span, mantissa=index)
    try:
        value = float(text)
    except ValueError:
        return _unparseable("not_a_float", span)
    return NumberReading(value=value, rule="official_brackets", span=span, mantissa=value)


# --- the finance-aware number grammar -----------------------------------------------------------

_MINUS_SIGNS = {"\u2212": "-", "\u2012": "-", "\u2013": "-", "\u2014": "-", "\ufe63": "-", "\uff0d": "-"}

# Longest spellings first: the alternation takes the first that matches.
_SCALES: list[tuple[str, float, str]] = [
    ("trillions", 1e12, "trillion"), ("trillion", 1e12, "trillion"), ("tn", 1e12, "tn"), ("T", 1e12, "T"),
    ("billions", 1e9, "billion"), ("billion", 1e9, "billion"), ("bn", 1e9, "bn"), ("B", 1e9, "B"),
    ("millions", 1e6, "million"), ("million", 1e6, "million"), ("mln", 1e6, "mn"), ("mn", 1e6, "mn"),
    ("mm", 1e6, "mm"), ("M", 1e6, "M"),
    ("thousands", 1e3, "thousand"), ("thousand", 1e3, "thousand"), ("k", 1e3, "K"), ("K", 1e3, "K"),
    ("万亿", 1e12, "万亿"), ("千亿", 1e11, "千亿"), ("百亿", 1e10, "百亿"), ("十亿", 1e9, "十亿"),
    ("亿", 1e8, "亿"), ("千万", 1e7, "千万"), ("百万", 1e6, "百万"), ("十万", 1e5, "十万"),
    ("万", 1e4, "万"), ("千", 1e3, "千"),
]
_SCALE_BY_TEXT = {text: (factor, name) for text, factor, name in _SCALES}
# Case-insensitive fallbacks: 'M', 'B', 'K' are also read in lower case ('$5m', '3b'); 'T' is not
# ('5 t' is tonnes more often than trillions).
_SCALE_BY_TEXT_LOWER = {text.lower(): (factor, name) for text, factor, name in _SCALES if text != "T"}

_CURRENCY_PREFIX = r"(?:US\$|HK\$|A\$|C\$|NT\$|R\$|S\$|\$|€|£|¥|￥|₹|USD|EUR|GBP|JPY|CNY|RMB|HKD|CHF)"
_CURRENCY_SUFFIX = r"(?:USD|EUR|GBP|JPY|CNY|RMB|HKD|CHF|dollars?|euros?|元|美元|人民币|港元|円)"
_SCALE_ALTERNATION = "|".join("(?-i:T)" if text == "T" else re.escape(text) for text, _, _ in _SCALES)

_NUMBER_EXPRESSION = re.compile(
    rf"""
    (?P<open>\()?\s*
    (?P<sign1>[-+])?\s*
    (?P<currency1>{_CURRENCY_PREFIX})?\s*
    (?P<open2>\()?\s*
    (?P<sign2>[-+])?\s*
    (?P<digits>\d{{1,3}}(?:,\d{{3}})+(?:\.\d+)?|\d+(?:\.\d+)?|\.\d+)
    (?P<exponent>[eE][-+]?\d+)?
    (?:\s*(?P<scale>{_SCALE_ALTERNATION})(?![A-Za-z]))?
    (?:\s*(?P<percent>%|percent(?![A-Za-z])|per\s+cent(?![A-Za-z])|pct(?![A-Za-z])|个百分点))?
    (?:\s*(?P<currency2>{_CURRENCY_SUFFIX})(?![A-Za-z]))?
    \s*(?P<close>\))?
    """,
    re.VERBOSE | re.IGNORECASE,
)


def normalise_number_text(text: str) -> tuple[str, list[str]]:
    """NFKC (full-width digits and signs become ASCII) and unicode minus signs become '-'."""
    notes = []
    normalised = unicodedata.normalize("NFKC", text)
    if normalised != text:
        notes.append("fullwidth")
    if any(sign in normalised for sign in _MINUS_SIGNS):
        normalised = "".join(_MINUS_SIGNS.get(char, char) for char in normalised)
        notes.append("unicode_minus")
    return normalised, notes


def _reading_from_match(match: re.Match, notes: list[str], rule: str) -> NumberReading:
    parts = match.groupdict()
    digits = parts["digits"]
    notes = list(notes)
    if "," in digits:
        notes.append("thousands_separator")
    mantissa = float(digits.replace(",", "") + (parts["exponent"] or ""))
    # '(1,234)' and '$(1,234)' are negative; an unbalanced bracket belongs to the surrounding prose
    bracketed = bool((parts["open"] or parts["open2"]) and parts["close"])
    if bracketed:
        notes.append("parenthesised_negative")
    negative = bracketed or "-" in (parts["sign1"] or "") + (parts["sign2"] or "")
    currency = parts["currency1"] or parts["currency2"]
    if currency:
        notes.append(f"currency:{currency}")
    multiplier = 1.0
    if parts["scale"]:
        multiplier, scale_name = _SCALE_BY_TEXT.get(parts["scale"]) or _SCALE_BY_TEXT_LOWER[parts["scale"].lower()]
        notes.append(f"scale:{scale_name}")
    percent = bool(parts["percent"])
    if percent:
        notes.append("percent")
    sign = -1.0 if negative else 1.0
    return NumberReading(value=sign * mantissa * multiplier, rule=rule, span=match.group(0).strip(),
                         mantissa=sign * mantissa, multiplier=multiplier, percent=percent, notes=tuple(notes))


def parse_number(text: str, rule: str = "number") -> NumberReading:
    """Read `text` as exactly one number expression ('(1,234)', '−5.2%', '$3.4bn', '1.2万', 'USD 1,000')."""
    normalised, notes = normalise_number_text((text or "").strip())
    normalised = normalised.strip().rstrip(".").strip()
    match = _NUMBER_EXPRESSION.fullmatch(normalised)
    if not match:
        return _unparseable("not_a_number", text)
    return _reading_from_match(match, notes, rule)


def find_numbers(text: str, rule: str = "number") -> list[NumberReading]:
    """Every number expression in running text, in order."""
    normalised, notes = normalise_number_text(text or "")
    readings = []
    for match in _NUMBER_EXPRESSION.finditer(normalised):
        if not match.group("digits"):
            continue
        # Digits glued to letters are names or codes ('Q3', 'FY2024', 'CO2'), not quantities.
        start = match.start() + len(match.group(0)) - len(match.group(0).lstrip())
        before = normalised[start - 1] if start > 0 else " "
        if before.isalpha() and not match.group("currency1"):
            continue
        readings.append(_reading_from_match(match, notes, rule))
    return readings


# --- the robust reader ---------------------------------------------------------------------------

_BRACKETS = re.compile(r"\[\[(.*?)\]\]", re.S)
_BOXED = re.compile(r"\\boxed\{([^{}]*)\}")
_ANSWER_CUE = re.compile(r"(?:final\s+answer|answer)\s*(?:is|=|:|：)?\s*(?:approximately|about|around|roughly|~|≈)?"
                         r"|答案\s*(?:是|为|：|:)", re.IGNORECASE)


def _strip_reasoning(reply: str) -> str:
    return reply.rsplit("</think>", 1)[-1] if "</think>" in reply else reply


def _read_inside(span: str, rule: str) -> NumberReading:
    """A bracket or box body: one whole number, else the only number inside it."""
    whole = parse_number(span, rule)
    if whole.parsed:
        return whole
    found = find_numbers(span, rule + "_search")
    if len(found) == 1:
        return found[0]
    return _unparseable("not_a_number" if not found else "several_numbers", span)


def read_robust(reply: str) -> NumberReading:
    """The finance-aware cascade (see the module docstring); never guesses among candidates."""
    text = _strip_reasoning(reply or "")
    bodies = _BRACKETS.findall(text)
    if bodies:
        readings = [_read_inside(body, "brackets") for body in bodies]
        values = {r.value for r in readings if r.parsed}
        if len(values) == 1 and all(r.parsed for r in readings):
            first = readings[0]
            if len(readings) == 1:
                return first
            return NumberReading(**{**first.__dict__, "rule": "brackets_repeated"})
        if len(bodies) == 1:
            return readings[0]
        return _unparseable("brackets_conflict", " | ".join(bodies))
    boxed = _BOXED.findall(text)
    if boxed:
        reading = _read_inside(boxed[-1], "boxed")
        if reading.parsed:
            return reading
    cues = list(_ANSWER_CUE.finditer(text))
    if cues:
        rest = text[cues[-1].end():].split("\n", 1)[0]
        found = find_numbers(rest, "answer_cue")
        if found:
            return found[0]
    bare = parse_number(text, "bare_number")
    if bare.parsed:
        return bare
    return _unparseable("no_number_found")


def read_number(reply: str, mode: Mode = "robust") -> NumberReading:
    """Read the reply in the named mode."""
    if mode == "official":
        return read_official(reply)
    if mode == "robust":
        return read_robust(reply)
    raise ValueError(f"unknown number-reading mode {mode!r}; use 'official' or 'robust'")


# --- matching --------------------------------------------------------------------------------------

SCALE_MULTIPLIERS = {"": 1.0, "thousand": 1e3, "million": 1e6, "billion": 1e9, "trillion": 1e12,
                     "percent": 1.0}
"""TAT-QA's `scale` values and the multiplier from the gold's unit to plain units."""


@dataclass(frozen=True)
class NumberMatch:
    """Whether a reading matches the gold, and by which rule."""

    correct: bool
    """True when the reading matches the gold under the mode's rules."""

    rule: str
    """within_1pct / exact_round5 / mantissa / scale_normalised / ratio_for_percent / percent_for_ratio,
    or 'wrong', or 'unparseable' when nothing was read."""


def within_relative(prediction: float, gold: float, tolerance: float = 0.01) -> bool:
    """BizBench's rule: |prediction - gold| <= tolerance * |gold| (so a gold of 0 needs exactly 0)."""
    if not (math.isfinite(prediction) and math.isfinite(gold)):
        return False
    return abs(prediction - gold) <= tolerance * abs(gold)


def exact_round5(prediction: float, gold: float) -> bool:
    """FinQA's rule: equal after rounding both to 5 decimals."""
    if not (math.isfinite(prediction) and math.isfinite(gold)):
        return False
    return round(prediction, 5) == round(gold, 5)


def match_number(reading: NumberReading, gold: float, *, mode: Mode = "robust", gold_scale: str = "",
                 rule: Literal["within_1pct", "exact_round5"] = "within_1pct",
                 tolerance: float = 0.01) -> NumberMatch:
    """Compare a reading with the gold number; `gold_scale` is the gold's unit ('million', 'percent', '')."""
    if not reading.parsed:
        return NumberMatch(False, UNPARSEABLE)

    def close(prediction: float, target: float) -> bool:
        return exact_round5(prediction, target) if rule == "exact_round5" else within_relative(
            prediction, target, tolerance)

    value = float(reading.value)  # type: ignore[arg-type]
    if close(value, gold):
        return NumberMatch(True, rule)
    if mode == "official":
        return NumberMatch(False, "wrong")
    if reading.multiplier != 1.0 and reading.mantissa is not None and close(reading.mantissa, gold):
        return NumberMatch(True, "mantissa")
    multiplier = SCALE_MULTIPLIERS.get(gold_scale or "", 1.0)
    if multiplier != 1.0 and close(value, gold * multiplier):
        return NumberMatch(True, "scale_normalised")
    if gold_scale == "percent" and not reading.percent and close(value * 100.0, gold):
        return NumberMatch(True, "ratio_for_percent")
    if reading.percent and gold_scale != "percent" and close(value / 100.0, gold):
        return NumberMatch(True, "percent_for_ratio")
    return NumberMatch(False, "wrong")
