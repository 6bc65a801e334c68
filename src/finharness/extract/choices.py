"""Reading an option choice or a true/false verdict from a model reply, one auditable rule at a time.

The cascade reads what a person would read, in this order, and stops at the first rule that
yields a valid answer; `Extraction.rule` says which one fired. A reply with no answer is
`unparseable` (answer None) and is never guessed.

Choices (single and multiple):
  answer_cue     the answer after the last 答案 cue ('答案：B', '正确答案是 A、C', '答案为选项D')
  select_cue     '故选B', '应选择 A,C', '我选B', '所以选项C' (a bare '选项A' is discussion, not a choice)
  so_cue         '所以B。', '因此 AC 正确'
  english_cue    'The answer is B', 'Answer: (C)', 'I choose A and D'
  bare_letter    the whole reply is letters ('B', '(B)', 'A C D', 'A,B,D', '**AC**')
  leading_letter the reply opens with letters and a delimiter ('B. 飞鸟公司…', 'A、C两项')
  option_text    the reply repeats option text and names no letter at all; mapped back to its letter
For a single choice that names several letters the first is taken (CFinBench's rule) and the rule
gets the suffix '/first'. Letters outside the question's options never count. Letters followed by
'or' / '或' / '还是' and another letter ('A or B?', '答案：A或C') name alternatives, not a choice: the
reply is unparseable with detail 'hedge', never credited with its first letter.

Verdicts (judgment):
  answer_cue     the verdict after the last 答案 cue ('答案：错误', '答案是对的', '答案：×')
  bare_verdict   the whole reply is one verdict word ('对', '错', '是', '否', 'T', 'F', 'Yes', 'No')
  verdict_word   the first verdict phrase anywhere, negations first ('不正确', '并非正确', '没有错误',
                 '这个说法是错误的', 'True', 'incorrect', '√', '×')
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from functools import lru_cache
from typing import Mapping, Sequence

from . import UNPARSEABLE  # re-exported: callers import it from here

TRUE = "正确"
"""Canonical verdict for a true statement (the CFinBench gold spelling)."""

FALSE = "错误"
"""Canonical verdict for a false statement."""


@dataclass(frozen=True)
class Extraction:
    """What was read from one reply and how."""

    answer: str | None
    """Option letters in alphabetical order ('B', 'ACD'), or '正确' / '错误'; None when unparseable."""

    rule: str
    """The rule that fired ('answer_cue', 'option_text', ...) or 'unparseable'."""

    detail: str = ""
    """Why an unparseable reply is one, when a rule saw letters: 'hedge' ('A or B')."""

    @property
    def parsed(self) -> bool:
        return self.answer is not None


# --- options ----------------------------------------------------------------------------------

_OPTION_PREFIX = re.compile(r"^\s*([A-Z])\s*[.．、:：)）]\s*(.*)$", re.S)


def parse_options(option_list: Sequence[str]) -> dict[str, str]:
    """['A. 甲', 'B. 乙'] -> {'A': '甲', 'B': '乙'}; an option without a letter gets its position's."""
    options: dict[str, str] = {}
    for position, option in enumerate(option_list):
        match = _OPTION_PREFIX.match(option)
        if match:
            options[match.group(1)] = match.group(2).strip()
        else:
            options[chr(ord("A") + position)] = option.strip()
    return options


# --- preparing a reply ------------------------------------------------------------------------

def prepare_reply(reply: str) -> str:
    """What a reader looks at: the text after a reasoning block, NFKC-normalised (full-width
    letters and punctuation become ASCII: 'Ｂ' -> 'B', '：' -> ':', '（' -> '(')."""
    if "</think>" in reply:
        reply = reply.rsplit("</think>", 1)[1]
    return unicodedata.normalize("NFKC", reply).strip()


# --- choice patterns --------------------------------------------------------------------------

_OPEN = r"[(\[【「《'\"*]*"
# letters are joined by punctuation, 和/及/与/and, or spaces on the same line (a newline ends the answer)
_SEPARATOR = r"(?:[ \t]*(?:[,;/、&+]|和|及|与|以及|and)[ \t]*|[ \t]*)"


@dataclass(frozen=True)
class _ChoicePatterns:
    """The compiled cascade for one set of valid letters."""

    letter_in_text: re.Pattern
    answer_cue: re.Pattern
    select_cue: re.Pattern
    so_cue: re.Pattern
    english_cue: re.Pattern
    bare_letter: re.Pattern
    leading_letter: re.Pattern
    hedge: re.Pattern
    """Right after a rule's letters: 'or B', '或C', '还是 D' -- the reply names alternatives, not a choice."""


@lru_cache(maxsize=64)
def _choice_patterns(letters: str) -> _ChoicePatterns:
    one = f"[{letters}](?![a-z])"  # 'B' but not the B of 'Because'
    seq = rf"(?<![A-Za-z])(?P<ans>{one}(?:{_SEPARATOR}{one})*)(?![A-Za-z])"
    return _ChoicePatterns(
        letter_in_text=re.compile(rf"(?<![A-Za-z])[{letters}](?![A-Za-z])"),
        answer_cue=re.compile(
            rf"答案\s*(?:应该|应当|应)?\s*(?:是|为|选|选择)?\s*:?\s*(?:选项|选择|选)?\s*{_OPEN}\s*{seq}"),
        select_cue=re.compile(
            rf"(?:(?:故|应|所以|因此|因而|综上所述|综上|本题|最终)[,\s]*(?:应当|应该|应)?\s*选(?:择)?项?"
            rf"|选(?:择)?(?!项))\s*:?\s*{_OPEN}\s*{seq}"),
        so_cue=re.compile(
            rf"(?:所以|因此|故|综上所述|综上)[,\s]*(?:是|为)?\s*{_OPEN}{seq}"
            r"(?=\s*(?:$|[。.,;!)\]】」*]|选项|项|正确|是正确))"),
        english_cue=re.compile(
            rf"(?:(?i:answers?)(?:\s+(?i:is|are|would\s+be|should\s+be))?|(?i:choose|select|pick)"
            rf"(?:\s+(?i:options?))?)\s*:?\s*{_OPEN}\s*{seq}"),
        bare_letter=re.compile(rf"[\s(\[【「《'\"*.,;:、。!]*{seq}[\s)\]】」》'\"*.,;:、。!]*"),
        leading_letter=re.compile(rf"^{_OPEN}\s*{seq}\s*(?:[.:)\]】」、*]|\s|$)"),
        hedge=re.compile(rf"[)\]】」'\"*]*\s*[,，]?\s*(?:(?i:or)(?![A-Za-z])|或者|或|还是)\s*{_OPEN}\s*{one}(?![A-Za-z])"),
    )


_SEARCH_LAST = ("answer_cue", "select_cue", "so_cue", "english_cue")
"""Cue rules read the last cue in the reply (reasoning first, conclusion last)."""


def _letters_of(match_text: str, letters: str) -> list[str]:
    return [c for c in match_text if c in letters]


def _option_text_letters(text: str, options: Mapping[str, str]) -> list[str]:
    """Options whose text the reply repeats; an option contained in another found option is dropped."""
    # case-folded: 'the Balance Sheet' names the option 'Balance sheet'
    normalised = {k: unicodedata.normalize("NFKC", v).strip().rstrip("。.").casefold() for k, v in options.items()}
    text = text.casefold()
    found = {k: v for k, v in normalised.items() if len(v) >= 2 and v in text}
    return sorted(k for k, v in found.items()
                  if not any(v != other and v in other for other in found.values()))


def extract_choice(reply: str, options: Mapping[str, str] | Sequence[str], *,
                   multiple: bool = False) -> Extraction:
    """The option letter(s) a reply chooses. `options`: {letter: text} or an OptionList."""
    if not isinstance(options, Mapping):
        options = parse_options(options)
    letters = "".join(sorted(options)) or "ABCDE"
    patterns = _choice_patterns(letters)
    text = prepare_reply(reply)

    def decide(found: list[str], rule: str, match: re.Match[str]) -> Extraction:
        if patterns.hedge.match(text, match.end("ans")):
            return Extraction(None, UNPARSEABLE, "hedge")
        if multiple:
            return Extraction("".join(sorted(set(found))), rule)
        return Extraction(found[0], rule if len(set(found)) == 1 else rule + "/first")

    for rule in _SEARCH_LAST:
        matches = list(getattr(patterns, rule).finditer(text))
        if matches:
            return decide(_letters_of(matches[-1].group("ans"), letters), rule, matches[-1])
    whole = patterns.bare_letter.fullmatch(text)
    if whole:
        return decide(_letters_of(whole.group("ans"), letters), "bare_letter", whole)
    opening = patterns.leading_letter.match(text)
    if opening:
        return decide(_letters_of(opening.group("ans"), letters), "leading_letter", opening)
    if not patterns.letter_in_text.search(text):
        found = _option_text_letters(text, options)
        if found and (multiple or len(found) == 1):
            return Extraction("".join(found), "option_text")
    return Extraction(None, UNPARSEABLE)


# --- verdicts ---------------------------------------------------------------------------------

# Phrases that state a verdict, with their polarity. Longer phrases are tried first at each
# position, so '不正确' wins over '正确' and '没有错误' over '错误'.
_VERDICT_PHRASES: dict[str, str] = {
    **dict.fromkeys(["不正确", "并不正确", "不是正确的", "并非正确", "不对", "不是对的", "不成立", "不准确",
                     "是错的", "是错误的", "错误", "有误", "×", "✗", "✘", "incorrect", "false", "wrong"], FALSE),
    **dict.fromkeys(["正确", "是对的", "没有错误", "并无错误", "不是错误的", "不是错的", "并非错误", "无误",
                     "成立", "√", "✓", "✔", "correct", "true"], TRUE),
}
# Short words that are a verdict only right after a cue or as the whole reply ('对于', '是否' are not).
_SHORT_VERDICTS: dict[str, str] = {"对": TRUE, "对的": TRUE, "是": TRUE, "t": TRUE, "yes": TRUE,
                                   "错": FALSE, "错的": FALSE, "否": FALSE, "f": FALSE, "no": FALSE}
# '正确的说法是…' / '正确答案' introduce something else; they are not a verdict.
_NOT_A_VERDICT = r"(?!的?(?:说法|表述|答案|做法|理解|描述|选项))"


def _alternation(words: Sequence[str]) -> str:
    parts = []
    for word in sorted(words, key=len, reverse=True):
        escaped = re.escape(word)
        if word.isascii() and word.isalpha():
            escaped = rf"(?<![A-Za-z]){escaped}(?![A-Za-z])"  # not \b: '是true' has no word boundary
        elif len(word) == 1 and "\u4e00" <= word <= "\u9fff":
            escaped += r"(?![\u4e00-\u9fff])"  # '对' but not '对于', '是' but not '是否'
        elif word in ("正确", "错误"):
            escaped += _NOT_A_VERDICT
        parts.append(escaped)
    return "|".join(parts)


_VERDICT_ANYWHERE = re.compile(f"(?i:{_alternation(list(_VERDICT_PHRASES))})")
_VERDICT_AFTER_CUE = re.compile(
    rf"答案\s*(?:应该|应当|应)?\s*(?:是|为)?\s*:?\s*{_OPEN}\s*"
    rf"(?P<verdict>(?i:{_alternation([*_VERDICT_PHRASES, *_SHORT_VERDICTS])}))")
_PUNCTUATION = re.compile(r"[\s(\[【「《'\"*.,;:、。!)\]】」》]+")


def _polarity(word: str) -> str:
    key = word.lower()
    return _VERDICT_PHRASES.get(key) or _SHORT_VERDICTS[key]


def extract_judgment(reply: str) -> Extraction:
    """'正确' or '错误' as a reader would take the reply; negations count ('不正确' is 错误)."""
    text = prepare_reply(reply)
    cued = list(_VERDICT_AFTER_CUE.finditer(text))
    if cued:
        return Extraction(_polarity(cued[-1].group("verdict")), "answer_cue")
    bare = _PUNCTUATION.sub("", text).lower()
    if bare in _SHORT_VERDICTS or bare in _VERDICT_PHRASES:
        return Extraction(_polarity(bare), "bare_verdict")
    first = _VERDICT_ANYWHERE.search(text)
    if first:
        return Extraction(_polarity(first.group(0)), "verdict_word")
    return Extraction(None, UNPARSEABLE)
