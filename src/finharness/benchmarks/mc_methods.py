"""Method-robust multiple choice: one question asked up to three ways, and how far the ways agree.

Methods (in headline order):
  ll       log-likelihood of each option's continuation after a raw-text context (backends with
           prompt log-likelihood: capabilities.loglikelihood).
  letters  the chat prompt of `gen`, answered with few tokens (LETTERS_MAX_TOKENS) and the top
           LETTERS_TOP_LOGPROBS alternatives of every generated token (capabilities.next_token_logprobs,
           e.g. `openai:`). The answer position is found in the reply by `answer_offset` (see there);
           the probabilities of the option letters at that position are read with
           judges.soft.label_distribution and the argmax is the choice. When no position is found (or
           the logprobs cannot be read there) the item is unparseable (`no_position`), never guessed.
  gen      generate with the task's prompt and budget and extract the answer as the task does.

`--method` takes one of those, or
  auto     the first method the backend offers (ll, else letters, else gen); recorded in the
           prediction, a trace note (`mc_method`) and the aggregate (extra.methods, a note).
  all      every method the backend offers, on the same items. The headline stays the first of
           ll/letters/gen; each method's metrics also appear under a `METHOD.` prefix, and each pair of
           methods gets `agreement.M1~M2` (share of items where both chose an option and chose the same
           one; Wilson 95 % CI, n = those items) and `kappa.M1~M2` (Cohen's κ over the same items,
           categories = option letters; no CI, ci95 null).

The single methods `ll` and `gen` keep each task's prediction shape and requests exactly (cache keys
unchanged). Any other method predicts `{"method": REQUESTED, "methods": {M: prediction of M}}`;
a `letters` prediction is `{"choice", "probs", "offset", "token", "rule", "reply"}`.
"""

from __future__ import annotations

import math
import re
from dataclasses import replace
from itertools import combinations
from typing import Any, Awaitable, Callable, Mapping, Sequence

from ..core.metrics import Metric
from ..core.types import GenerateParams, Message, Score
from ..judges.soft import label_distribution
from ..stats import proportion_ci
from ..stats.agreement import cohen_kappa

METHODS: tuple[str, ...] = ("ll", "letters", "gen")
"""The ways to ask, in headline order."""

METHOD_CHOICES: tuple[str, ...] = ("auto", "ll", "letters", "gen", "all")
"""What `--method` accepts for a method-robust task."""

METHOD_DIRECTIONS: dict[str, str] = {"agreement.*": "info", "kappa.*": "info"}
"""The methods' agreement describes the methods, it ranks no model (Task.metric_directions of the tasks that
use them)."""

LETTERS_MAX_TOKENS = 16
"""`letters`: generation budget (enough for 'Answer: X' or '答案：X' and a little preamble)."""

LETTERS_TOP_LOGPROBS = 20
"""`letters`: alternatives per generated token (20 is the OpenAI maximum)."""

NO_POSITION = "no_position"
"""Rule of a `letters` reading where no answer position was found."""

AUTO_EVENT = "mc_method"
"""Trace event naming the method(s) `auto`/`all` chose for the backend."""

_ANSWER_CUE = re.compile(
    r"(?:the\s+)?(?:correct\s+|final\s+)?answer(?:\s+is)?\s*[:：]?|(?:正确)?答案(?:是|为)?\s*[:：]?", re.IGNORECASE)
_OPENERS = "[(（【*\"'"
_WORD_AFTER = re.compile(r"[ \t]+[a-z]")


def _skip_openers(text: str, i: int) -> int:
    while i < len(text) and (text[i].isspace() or text[i] in _OPENERS):
        i += 1
    return i


def answer_offset(reply: str, letters: Sequence[str]) -> int | None:
    """Character offset of the option letter that opens the reply, or None (no answer position).

    The rule: skip leading white space and opening marks; then, optionally, one answer cue ('Answer:', 'The answer is',
    '答案：', '答案是'..., case-insensitive, colon optional, half- or full-width); then white space and
    opening marks ('[[', '(', '（', '【', '**', quotes). The next character must be one of `letters` and
    must not be followed by another ASCII letter or digit (so 'According…' or 'A1' are not answers), and an
    'A' or 'I' must not be followed by white space and a lower-case word (the English words 'A bond…',
    'I think…'). Anything else -- reasoning first, an option's text instead of its letter -- has no position."""
    i = _skip_openers(reply, 0)
    cue = _ANSWER_CUE.match(reply, i)
    if cue:
        i = _skip_openers(reply, cue.end())
    if i >= len(reply) or reply[i] not in letters:
        return None
    following = reply[i + 1:i + 2]
    if following and following.isascii() and following.isalnum():
        return None
    if reply[i] in "AI" and _WORD_AFTER.match(reply, i + 1):
        return None
    return i


def read_letters(reply: str, logprobs: Sequence[Any] | None, letters: Sequence[str]) -> dict[str, Any]:
    """A `letters` prediction from a reply and its per-token logprobs (see the module docstring)."""
    offset = answer_offset(reply, letters)
    reading = None if offset is None else label_distribution(reply, logprobs, offset, letters)
    if reading is None:
        return {"choice": None, "probs": None, "offset": offset, "token": None, "rule": NO_POSITION, "reply": reply}
    probs, token = reading
    choice = max(letters, key=lambda x: probs[x])  # first letter on ties
    return {"choice": choice, "probs": probs, "offset": offset, "token": token, "rule": "letters", "reply": reply}


def ll_choice(letters: Sequence[str], logprobs: Sequence[float]) -> dict[str, Any]:
    """An `ll` prediction: the letter whose continuation is most likely (the first on ties) and every letter's
    log-likelihood."""
    best = max(range(len(letters)), key=lambda i: logprobs[i])
    return {"choice": letters[best], "logprobs": dict(zip(letters, logprobs))}


def letters_params(params: GenerateParams) -> GenerateParams:
    """The `letters` request's parameters: the gen parameters with a small budget and top logprobs."""
    return replace(params, max_tokens=min(params.max_tokens, LETTERS_MAX_TOKENS), top_logprobs=LETTERS_TOP_LOGPROBS)


async def ask_letters(model: Any, messages: Sequence[Message], params: GenerateParams,
                      letters: Sequence[str]) -> dict[str, Any]:
    """Send the gen prompt with `letters_params` and read the option letters' distribution."""
    response = await model.chat(tuple(messages), letters_params(params))
    return read_letters(response.text, response.logprobs, letters)


def supported_methods(capabilities: Any) -> tuple[str, ...]:
    """The methods a backend offers, in headline order."""
    out = []
    if getattr(capabilities, "loglikelihood", False):
        out.append("ll")
    if getattr(capabilities, "next_token_logprobs", False):
        out.append("letters")
    if getattr(capabilities, "generate", True):
        out.append("gen")
    return tuple(out)


def methods_to_run(method: str, capabilities: Any) -> tuple[str, ...]:
    """What a requested method means on a backend: itself, the best one (auto) or all it offers."""
    if method in METHODS:
        return (method,)
    offered = supported_methods(capabilities)
    if not offered:
        raise ValueError("the backend offers none of ll, letters, gen")
    if method == "auto":
        return offered[:1]
    if method == "all":
        return offered
    raise ValueError(f"method {method!r}; choose from {list(METHOD_CHOICES)}")


def is_multi_method(method: str) -> bool:
    """Whether `method` predicts the multi-method shape: letters, auto and all do; plain ll and gen keep each
    task's own prediction (and requests, and aggregate) exactly."""
    return method not in ("ll", "gen")


def is_multi(prediction: Any) -> bool:
    """A prediction made by `solve_methods` for a method other than plain ll / gen."""
    return isinstance(prediction, Mapping) and isinstance(prediction.get("methods"), Mapping)


async def solve_methods(method: str, model: Any, solve_one: Callable[[str], Awaitable[Any]]) -> Any:
    """Run the requested method(s); plain 'll' / 'gen' return the task's own prediction unchanged."""
    if not is_multi_method(method):
        return await solve_one(method)
    methods = methods_to_run(method, model.capabilities)
    if method in ("auto", "all"):
        model.note(AUTO_EVENT, f"{method}: {', '.join(methods)}")
    predictions = {}
    for m in methods:  # one after the other: the trace keeps the methods' order
        predictions[m] = await solve_one(m)
    return {"method": method, "methods": predictions}


async def solve_choice(method: str, model: Any, *, messages: Callable[[], Sequence[Message]], params: GenerateParams,
                       letters: Sequence[str], loglikelihood: Callable[[], Awaitable[Any]]) -> Any:
    """Solve a multiple-choice item by `method` (one or several, solve_methods): `gen` the reply's text, `letters` the
    option letters' distribution after the same prompt, `ll` the task's own log-likelihood prediction. `messages` is
    called only by the methods that send it (a task may cut its prompt to the model's window)."""

    async def solve_one(m: str) -> Any:
        if m == "ll":
            return await loglikelihood()
        if m == "letters":
            return await ask_letters(model, messages(), params, letters)
        return (await model.chat(tuple(messages()), params)).text

    return await solve_methods(method, model, solve_one)


def headline_method(methods: Sequence[str]) -> str:
    """The first of ll / letters / gen that ran."""
    return min(methods, key=lambda m: METHODS.index(m) if m in METHODS else len(METHODS))


def score_methods(prediction: Mapping[str, Any], score_one: Callable[[str, Any], Score],
                  choice_of: Callable[[str, Score], Any], value_name: str | None = None) -> Score:
    """Score a multi-method prediction: the headline method's Score, with every method's values under
    `METHOD.` (and its Score.value as `METHOD.value_name` when given) once more than one method ran, and
    extracted = the headline's extracted (as a dict) plus `method`, `choices` {M: option or None},
    `per_method` {M: extracted} and `letters_rule`."""
    predictions = prediction["methods"]
    scores = {m: score_one(m, p) for m, p in predictions.items()}
    head = headline_method(list(scores))
    main = scores[head]
    values = dict(main.values)
    if len(scores) > 1:
        for m, s in scores.items():
            if value_name and s.value is not None:
                values[f"{m}.{value_name}"] = s.value
            values.update({f"{m}.{k}": v for k, v in s.values.items() if k != m})
    if "letters" in predictions:
        values["letters.no_position"] = float((predictions["letters"] or {}).get("rule") == NO_POSITION)
    extracted = dict(main.extracted) if isinstance(main.extracted, Mapping) else {"answer": main.extracted}
    extracted.update({"method": head, "choices": {m: choice_of(m, s) for m, s in scores.items()},
                      "per_method": {m: s.extracted for m, s in scores.items()}})
    return replace(main, values=values, extracted=extracted)


def _scores(records: Sequence[Any]) -> list[Score]:
    """The scores of the records that were scored (failed samples and unscored ones left out)."""
    return [record.score for record in records
            if not getattr(record, "failed", None) and getattr(record, "score", None) is not None]


def _records_choices(records: Sequence[Any]) -> list[Mapping[str, Any]]:
    """Per scored item, the option each method chose (score_methods' `extracted['choices']`)."""
    return [score.extracted["choices"] for score in _scores(records)
            if isinstance(score.extracted, Mapping) and isinstance(score.extracted.get("choices"), Mapping)]


def pair_name(a: str, b: str) -> str:
    return f"{a}~{b}"


def agreement_metrics(rows: Sequence[Mapping[str, Any]], ran: Sequence[str]) -> dict[str, Metric]:
    """`agreement.M1~M2` and `kappa.M1~M2` for every pair of methods that ran, over the items where both chose."""
    out: dict[str, Metric] = {}
    for a, b in combinations(ran, 2):
        pairs = [(row[a], row[b]) for row in rows if row.get(a) and row.get(b)]
        hits = sum(x == y for x, y in pairs)
        out[f"agreement.{pair_name(a, b)}"] = Metric.of(proportion_ci(hits, len(pairs)))
        kappa = cohen_kappa([x for x, _ in pairs], [y for _, y in pairs]) if pairs else math.nan
        out[f"kappa.{pair_name(a, b)}"] = Metric(None if math.isnan(kappa) else float(kappa), None, len(pairs))
    return out


def no_position_count(records: Sequence[Any]) -> tuple[int, int]:
    """(items whose `letters` reply had no answer position, items `letters` ran on)."""
    flags = [score.values["letters.no_position"] for score in _scores(records) if "letters.no_position" in score.values]
    return sum(flag == 1.0 for flag in flags), len(flags)


def summarise_methods(requested: str, records: Sequence[Any]) -> tuple[dict[str, Metric], dict[str, Any], list[str]]:
    """What a task's Aggregate adds for a method-robust run: the agreement and κ metrics of every pair of
    methods that ran, extra['methods'] (what was requested, what ran, `auto`'s choice, the `letters` answer
    positions not found) and the notes saying so."""
    rows = _records_choices(records)
    ran = [m for m in METHODS if any(m in row for row in rows)]
    extra: dict[str, Any] = {"requested": requested, "ran": ran, "headline": ran[0] if ran else requested}
    notes = []
    if requested == "auto" and ran:
        extra["auto"] = ran[0]
        notes.append(f"method 'auto' chose '{ran[0]}' (the first of ll, letters, gen the backend offers)")
    if requested == "all" and ran:
        notes.append(f"method 'all' ran {', '.join(ran)} on the same items; headline = {ran[0]}; the others' "
                     "metrics carry their name as prefix; agreement.M1~M2 / kappa.M1~M2 compare the chosen options")
    if "letters" in ran:
        missing, total = no_position_count(records)
        extra["letters"] = {"no_position": missing, "items": total, "max_tokens": LETTERS_MAX_TOKENS,
                            "top_logprobs": LETTERS_TOP_LOGPROBS}
        if missing:
            notes.append(f"letters: no answer position found in {missing} of {total} replies (scored as unparseable)")
    return agreement_metrics(rows, ran), extra, notes
