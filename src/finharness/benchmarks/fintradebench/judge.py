"""The rubric judge: prompt, reading its JSON verdict, retries.

Prompt: SYSTEM_PROMPT and BATCH_JUDGE_PROMPT of evaluate_rag_pipeline.py (the release's RAG vs
No-RAG judge), verbatim, with one candidate per call (`num_models` = 1; the release batches up to
five models' answers to one question into a call -- a run of this harness holds one model, and one
candidate per call keeps each verdict independent of the others). The candidate's answer is cut at
4,000 characters with '...[TRUNCATED]', as the release does. The rubric asks for correctness 1-5,
reasoning 1-5, trading-signal integration 1-5, fundamental integration 1-5 and the golden
indicators found. A prompt that does not fit the judge's context window is cut further by the policy
of fitting.py (`fitted_judge_messages`); one that fits is sent exactly as the release writes it.

Reading a reply (`parse_verdict`): the text from the first '{' to the last '}' (the release's rule)
is read as JSON; the verdict is `evaluations[0]` (or the object itself when it has no
'evaluations'). `correctness_score` must be an integer 1-5, else the reply is unparseable; the other
scores are kept when they are integers 1-5 and listed in `missing` otherwise. One rule of ours on
top: a JSON object that occurs in the judge's own prompt (whitespace aside) is an echo, not a verdict
-- the rubric's example (correctness 4, reasoning 5) copied by a weak judge, or a verdict planted in
the candidate's answer -- and makes the reply unparseable. An unparseable reply is retried as a new
cached call (sample_index 1, then 2): at most `JUDGE_ATTEMPTS` calls; a sample whose every reply is
unparseable is not scored and is counted.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field, replace
from typing import Any, Mapping, Sequence

from ...core.types import GenerateParams, Message
from ...judges.soft import TOP_LOGPROBS, label_distribution
from .fitting import cut_text, fit_prompt

JUDGE_ATTEMPTS = 3
"""Calls per sample at most: the first and two retries (sample_index 0, 1, 2)."""

ANSWER_CHARS = 4000
"""The release cuts each candidate answer to 4,000 characters in the judge prompt."""

JUDGE_SYSTEM_PROMPT = """You are an expert Financial Analyst and AI Evaluator. 
Your task is to benchmark multiple AI models against a Gold Standard.
You will assess their reasoning quality, factual accuracy, and specifically their usage of key financial indicators."""
"""SYSTEM_PROMPT of evaluate_rag_pipeline.py (its trailing space after 'Evaluator.' kept)."""

JUDGE_PROMPT = """
You are evaluating {num_models} different AI models answering the SAME question.
Compare each Candidate Answer against the **Gold Answer**, **Source Context**, and **Golden Indicators**.

--- SHARED DATA (Applies to all models) ---
[Question]: {question}

[Golden Indicators (Reference Metrics)]: 
{golden_indicators}

[Gold Answer (Ground Truth)]:
{gold_answer}

[Context - Trading Signals]:
{trading_context}

[Context - Fundamentals]:
{fun_context}

--- CANDIDATE ANSWERS TO EVALUATE ---
{candidates_text}

--- EVALUATION RUBRIC (1-5 SCALE) ---

1. Factual and Numerical Accuracy (Maps to `correctness_score`)
- Score 5: All numerical claims are supported by the Source Context and Gold Answer.
- Score 3: Minor calculation errors or hallucinations that do not change the overall thesis.
- Score 1: Severe hallucinations or math errors that invalidate the conclusion.

2. Clarity and Rationale (Maps to `reasoning_score`)
- REWARD responses that are highly structured. Step-by-step breakdowns are highly desirable if they make logic easy to follow.
- Score 5: Crisp, highly readable, actionable, and gets straight to the point without filler.
- Score 3: Understandable, but overly wordy, verbose, or relies on clunky formatting.
- Score 1: Confusing, disjointed, or buried in impenetrable financial jargon.

3. Integration Bias (Maps to `trading_signals_score` and `fundamental_score`)
- `trading_signals_score` (1-5): 1 = Ignored trading signals context entirely, 5 = Perfectly integrated trading signals.
- `fundamental_score` (1-5): 1 = Ignored SEC fundamental context entirely, 5 = Perfectly integrated fundamentals.
- **[CRITICAL HUMAN ALIGNMENT RULE]**: Do NOT penalize these scores heavily just because an answer omits *some* Reference Metrics. If the response successfully answers the prompt using a smaller, highly relevant subset of metrics, it MUST score a 4 or 5.

--- OUTPUT FORMAT ---
Return a JSON object containing a list under the key "evaluations".
IMPORTANT JSON RULES:
- Ensure the output is valid JSON.
- Do NOT use unescaped double quotes inside string values.
- Do NOT include trailing commas.

Example:
{{
  "evaluations": [
    {{
      "model_name": "Model Name Here",
      "mode": "RAG",
      "indicator_analysis": {{
         "found_indicators": ["Metric A", "Metric B"],
         "total_golden_indicators": 3,
         "indicators_found_count": 2
      }},
      "bias_analysis": {{
         "trading_signals_score": 4,
         "fundamental_score": 5
      }},
      "overall_quality": {{
         "correctness_score": 4,
         "reasoning_score": 5
      }}
    }}
  ]
}}
"""
"""BATCH_JUDGE_PROMPT of evaluate_rag_pipeline.py."""

CANDIDATE_BLOCK = """
--- CANDIDATE {index} ---
Model Name: {model}
Mode: {mode}
Answer: 
{answer}
"""
"""How the release writes each candidate into the judge prompt."""

MODE_LABELS: Mapping[str, str] = {"rag": "RAG", "norag": "Non_RAG", "ideal": "Ideal_RAG"}
"""The mode label shown to the judge ('RAG' / 'Non_RAG' as the release's loaders set them)."""

SCORE_KEYS: Mapping[str, tuple[str, str]] = {
    "correctness": ("overall_quality", "correctness_score"),
    "reasoning": ("overall_quality", "reasoning_score"),
    "trading_signals": ("bias_analysis", "trading_signals_score"),
    "fundamentals": ("bias_analysis", "fundamental_score"),
}
"""Score field -> (section, key): where the judge writes its 1-5 value in the rubric's JSON."""

SCORE_FIELDS: tuple[str, ...] = tuple(SCORE_KEYS)


def judge_messages(*, question: str, golden: Sequence[str], gold_answer: str, answer: str, model: str, mode: str,
                   trading_context: str = "", fundamental_context: str = "",
                   answer_chars: int = ANSWER_CHARS) -> tuple[Message, ...]:
    """System and user turn of one judgment (golden indicators written '|'-joined as in the seed file).
    `answer_chars`: where the answer is cut (the release's 4,000; less only to fit a context, fitting.py)."""
    answer = cut_text(answer, answer_chars)
    candidate = CANDIDATE_BLOCK.format(index=1, model=model, mode=MODE_LABELS.get(mode, mode), answer=answer)
    user = JUDGE_PROMPT.format(num_models=1, question=question, golden_indicators="|".join(golden),
                               gold_answer=gold_answer, trading_context=trading_context,
                               fun_context=fundamental_context, candidates_text=candidate)
    return (Message("system", JUDGE_SYSTEM_PROMPT), Message("user", user))


JUDGE_PARAMS = GenerateParams(max_tokens=1024, temperature=0.0)
"""Greedy, as the release (temperature 0); the release allows 8,192 tokens, a verdict needs far fewer."""

JUDGE_CUT_STAGES: tuple[tuple[str, ...], ...] = (("trading_context", "fundamental_context"), ("answer", "gold_answer"))
"""What is cut, in order, when a judge prompt does not fit the judge's window (fitting.py): our ideal contexts
first, then the candidate's answer and the gold answer to equal shares."""


def fitted_judge_messages(judge: Any, *, question: str, golden: Sequence[str], gold_answer: str, answer: str,
                          model: str, mode: str, trading_context: str = "", fundamental_context: str = "",
                          params: GenerateParams = JUDGE_PARAMS) -> tuple[tuple[Message, ...], dict[str, list[int]]]:
    """(messages, cuts): `judge_messages` exactly when it fits `judge`'s window, else cut by JUDGE_CUT_STAGES
    (the policy of fitting.py; `cuts`: field -> [characters before, kept], empty when nothing was cut)."""
    texts = {"trading_context": trading_context, "fundamental_context": fundamental_context,
             "gold_answer": gold_answer}

    def render(limits: Mapping[str, int | None]) -> tuple[Message, ...]:
        kept = limits["answer"]
        return judge_messages(question=question, golden=golden, model=model, mode=mode, answer=answer,
                              answer_chars=ANSWER_CHARS if kept is None else kept,
                              **{name: cut_text(text, limits[name]) for name, text in texts.items()})

    sizes = {**{name: len(text) for name, text in texts.items()}, "answer": min(len(answer), ANSWER_CHARS)}
    return fit_prompt(render, sizes, JUDGE_CUT_STAGES, lambda messages: judge.fits(messages, params.max_tokens))


@dataclass(frozen=True)
class Verdict:
    """One judge reply, read."""

    parsed: bool
    """False: no usable verdict (no JSON, invalid JSON, or no correctness score 1-5)."""
    scores: Mapping[str, int] = field(default_factory=dict)
    """correctness, reasoning, trading_signals, fundamentals (those present and valid)."""
    found_indicators: tuple[str, ...] = ()
    found_count: int = 0
    """indicators_found_count as the judge wrote it (0 when absent, as the release defaults)."""
    total_golden: int = 1
    """total_golden_indicators as the judge wrote it (1 when absent or 0, as the release)."""
    missing: tuple[str, ...] = ()
    """Fields absent or invalid (counted in the aggregate)."""
    error: str | None = None
    """Why the reply was unparseable."""

    def to_json(self) -> dict[str, Any]:
        return {"parsed": self.parsed, "scores": dict(self.scores), "found_indicators": list(self.found_indicators),
                "found_count": self.found_count, "total_golden": self.total_golden, "missing": list(self.missing),
                "error": self.error}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "Verdict":
        return cls(bool(data.get("parsed")), dict(data.get("scores") or {}), tuple(data.get("found_indicators") or ()),
                   int(data.get("found_count") or 0), int(data.get("total_golden") or 1),
                   tuple(data.get("missing") or ()), data.get("error"))


def _score(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)) and float(value).is_integer() and 1 <= value <= 5:
        return int(value)
    if isinstance(value, str) and value.strip().isdigit() and 1 <= int(value) <= 5:
        return int(value)
    return None


def _count(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)) and float(value).is_integer() and value >= 0:
        return int(value)
    return None


def _squashed(text: str) -> str:
    return " ".join(text.split())


def parse_verdict(reply: str, prompt: str = "") -> Verdict:
    """Read one reply (rules in the module docstring); `prompt`: the judge's prompt, whose JSON is an echo."""
    text = reply or ""
    start, end = text.find("{"), text.rfind("}")
    if start == -1 or end <= start:
        return Verdict(False, error="no JSON object in the reply")
    if prompt and _squashed(text[start:end + 1]) in _squashed(prompt):
        return Verdict(False, error="the JSON is copied from the judge's prompt (the rubric's example or the "
                                    "judged answer), not a verdict")
    try:
        data = json.loads(text[start:end + 1])
    except json.JSONDecodeError as err:
        return Verdict(False, error=f"invalid JSON: {err.msg} at character {err.pos}")
    if isinstance(data, dict) and isinstance(data.get("evaluations"), list):
        data = data["evaluations"][0] if data["evaluations"] else {}
    if not isinstance(data, dict):
        return Verdict(False, error="the JSON is not an object")
    def section(name: str) -> Mapping[str, Any]:
        return data[name] if isinstance(data.get(name), dict) else {}

    indicators = section("indicator_analysis")
    raw = {name: section(part).get(key) for name, (part, key) in SCORE_KEYS.items()}
    scores = {k: s for k, v in raw.items() if (s := _score(v)) is not None}
    missing = [k for k in SCORE_FIELDS if k not in scores]
    found = indicators.get("found_indicators")
    found_list = tuple(str(x) for x in found) if isinstance(found, list) else ()
    if not isinstance(found, list):
        missing.append("found_indicators")
    count = _count(indicators.get("indicators_found_count"))
    total = _count(indicators.get("total_golden_indicators"))
    if count is None:
        missing.append("indicators_found_count")
    if total is None:
        missing.append("total_golden_indicators")
    if "correctness" not in scores:
        return Verdict(False, scores, found_list, count or 0, total or 1, tuple(missing),
                       error="no correctness_score 1-5")
    return Verdict(True, scores, found_list, count or 0, total or 1, tuple(missing))


def expected_scores(reply: str, logprobs: Sequence[Any] | None) -> dict[str, float]:
    """Per score field, Σ s·P(s) over the digits 1-5 at the token where the judge wrote that field's value,
    renormalised over the digits (ours, -o judge_scores=expected); fields that cannot be read are left out.

    The value is the last `"KEY": n` inside the reply's JSON (first `{` to last `}`, as parse_verdict reads
    it); the digit is read with `judges.soft.label_distribution` (the reply's tokens must spell it)."""
    text = reply or ""
    start, end = text.find("{"), text.rfind("}")
    if start == -1 or end <= start or not logprobs:
        return {}
    out: dict[str, float] = {}
    for name, (_, key) in SCORE_KEYS.items():
        found = list(re.finditer(rf'"{key}"\s*:\s*"?([1-5])\b', text[start:end + 1]))
        if not found:
            continue
        read = label_distribution(text, logprobs, start + found[-1].start(1), "12345")
        if read is not None:
            out[name] = sum(int(digit) * p for digit, p in read[0].items())
    return out


def example_scores() -> dict[str, int]:
    """The four scores of the rubric's own example verdict (4/5/4/5 in the release's prompt).

    A small judge often copies them instead of grading; the aggregate counts verdicts that do."""
    example = JUDGE_PROMPT.split("Example:", 1)[1].replace("{{", "{").replace("}}", "}")
    return dict(parse_verdict(example).scores)


def rubric_copy_note(copies: int, of: int, consequence: str = "") -> str | None:
    """The note for `copies` of `of` verdicts that are exactly the rubric's example; None unless most are."""
    if copies * 2 <= of:
        return None
    example = "/".join(str(v) for v in example_scores().values())
    return (f"{copies} of {of} judge verdicts are exactly the rubric's example ({example}): the judge is likely "
            f"copying the example rather than grading{consequence}; use a stronger judge")


@dataclass(frozen=True)
class Judgment:
    """The outcome of judging one answer, with every attempt."""

    verdict: Verdict
    """The first parseable verdict, else the last unparseable one."""
    attempts: int
    """Judge calls made (1 = no retry)."""
    replies: tuple[str, ...]
    """Every reply, in order."""
    expected: Mapping[str, float] | None = None
    """Expected 1-5 scores read from the counted reply's logprobs (-o judge_scores=expected); None: not asked."""

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"verdict": self.verdict.to_json(), "attempts": self.attempts}
        if self.expected is not None:  # only when asked: official runs write what they always wrote
            out["expected"] = dict(self.expected)
        return out


def reads_expected(judge: Any) -> bool:
    """Whether expected scores can be read from `judge`: its backend returns next-token logprobs (Anthropic's
    does not; asking it would fail every call)."""
    return bool(getattr(getattr(judge, "capabilities", None), "next_token_logprobs", False))


async def judge_answer(judge: Any, messages: Sequence[Message], params: GenerateParams = JUDGE_PARAMS,
                       attempts: int = JUDGE_ATTEMPTS, *, expected: bool = False) -> Judgment:
    """Ask the judge; an unparseable reply is retried as a new cached call (sample_index 1, 2, ...).
    `expected`: also ask for top logprobs and read the expected scores of the counted reply -- when the judge
    gives next-token logprobs (`reads_expected`); otherwise the judgment's `expected` stays None."""
    replies: list[str] = []
    verdict = Verdict(False, error="not judged")
    prompt = "\n".join(m.content for m in messages)
    expected = expected and reads_expected(judge)
    if expected:
        params = replace(params, top_logprobs=TOP_LOGPROBS)
    response = None
    for index in range(attempts):
        response = await judge.chat(messages, params, sample_index=index)
        replies.append(response.text)
        verdict = parse_verdict(response.text, prompt)
        if verdict.parsed:
            break
    read = expected_scores(response.text, response.logprobs) if verdict.parsed else {}
    return Judgment(verdict, len(replies), tuple(replies), read if expected else None)
