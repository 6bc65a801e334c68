"""TELeR prompts L1-L6, the No-RAG question, and self-selection, as the FinTradeBench release writes them.

Two official prompt sets exist, one per pipeline of the release (texts copied verbatim, including
their trailing spaces):

- `RETRIEVAL_PROMPTS` -- run_snowflake_rag_pipeline.py (standard RAG). L1 is one directive sentence,
  L2 adds the role and sub-tasks, L3 the numbered steps, L4 the evaluation criteria, L5 the retrieved
  evidence (`{context_str}`) and a quote-the-evidence step, L6 asks to justify the use of the data.
  L1-L4 carry no evidence at all (the release formats them with the context and it is ignored), so
  they are also our `norag` prompts.
- `IDEAL_PROMPTS` -- generate_benchmark_responses.py (ideal RAG on precomputed contexts): every level
  carries the trading-signal and fundamental contexts; the same six levels otherwise.
- `BARE` ('No RAG' in generate_benchmark_responses.py): the question alone.

Self-selection (both pipelines generate every level, then the model picks its best answer):
- rag/norag: SELF_SELECTION_PROMPT of run_snowflake_rag_pipeline.py; candidates written
  '--- {prompt_id} ---\\n{response}' joined by newlines; the reply's first line, quotes removed, is
  matched against the prompt ids in level order (first id contained in it wins); no match -> the
  first candidate (counted as 'fallback-first').
- ideal: SELF_SELECTION_PROMPT_TEMPLATE of generate_benchmark_responses.py; candidates written
  '--- Candidate: {prompt_id} ---\\n{response}' joined by blank lines, sampled at temperature 0.1; the
  reply (with '*', quotes stripped) is an id exactly, else the one id it contains, else the id it
  starts with, else the id mentioned last; no id -> the first candidate ('fallback-first').

Both instructions give one candidate's id, L3's, as the example, and small models answer with it whatever
the candidates say. Style 'neutral' (ours) keeps each prompt but labels the candidates 'Candidate 1..N' in
a seeded random order and lists every label instead of giving one as the example (`neutral_selection_prompt`,
read by `parse_label`).
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from typing import Mapping, Sequence

LEVELS: tuple[str, ...] = ("L1", "L2", "L3", "L4", "L5", "L6")
"""TELeR levels."""

BARE = "bare"
"""The question alone (the release's 'No RAG' candidate)."""

EVIDENCE_LEVELS = frozenset({"L5", "L6"})
"""Levels whose retrieval prompt carries the retrieved evidence."""

RETRIEVAL_PROMPT_IDS: Mapping[str, str] = {
    "L1": "TELER_L1_Baseline", "L2": "TELER_L2_Strict_Focus", "L3": "L3_Step_By_Step",
    "L4": "TELER_L4_Auditor_Evidence", "L5": "TELER_L5_Deconstruction", "L6": "TELER_L6_Maximalist",
}
"""Prompt ids of run_snowflake_rag_pipeline.py (what the model names when it self-selects)."""

IDEAL_PROMPT_IDS: Mapping[str, str] = {
    "L1": "L1_Baseline", "L2": "TELER_L2_Strict_Focus", "L3": "TELER_L3_Step_By_Step",
    "L4": "TELER_L4_Auditor_Evidence", "L5": "TELER_L5_Deconstruction", "L6": "TELER_L6_Maximalist",
    BARE: "No RAG",
}
"""Prompt ids of generate_benchmark_responses.py."""

_STEPS_1_4 = """1. **Clear goals:** State and explain what the question is asking.
2. **Deconstruct:** Identify embedded sub-questions.
"""
_NO_ADVICE = "Do not provide direct investment advice (e.g., 'buy', 'sell', 'hold').\n"
_CRITERIA = ("Evaluation Method: A good response will focus on four key metrics: answer correctness, context "
             "accuracy, answer completeness and answer coherence.\n")

RETRIEVAL_PROMPTS: Mapping[str, str] = {
    "L1": """You are a financial analyst. Provide a detailed response to Question: {query_str}. Please do not provide any investment advice.
Answer:""",
    "L2": """(TELeR: Single-Turn, Instruction-Style, Role-Specified, Level 2)
You are a senior financial analyst. Break down the question and answer the question methodically. First, explain what the question is asking and the main goal of the question clearly. 
Then, identify the embedded sub-questions in the given question. Answer each part. Consider both trading signals and company fundamentals. Finally, combine sub-answers into a single, comprehensive final answer and answer in a professional style.
The question is given as {query_str}. 
Your analysis should clearly distinguish between the reasoning process for your answers for each embedded sub question and the conclusion in the final answer.
""",
    "L3": """You are a senior financial analyst. Break down and answer the question methodically:
1. State what the question is asking.
2. Identify embedded sub-questions.
3. Answer each part. Consider both trading signals and company fundamentals.
4. Synthesize into a final answer.

Question: {query_str}
Answer:""",
    "L4": """(TELeR: Single-Turn, Instruction-Style, Role-Specified, Level 4)
You are a senior financial analyst. Break down and answer the question methodically:
""" + _STEPS_1_4 + """3. **Answer Sub-Questions:** Answer each part. Consider both trading signals and company fundamentals.
4. **Synthesize:** Combine sub-answers into a single, comprehensive final answer.

""" + _NO_ADVICE + _CRITERIA + """
Question:
{query_str}

Explanation & Justification:
[Detailed rationale referencing both signal types]

Final Answer:
[Provide final answer]
""",
    "L5": """(TELeR: Single-Turn, Instruction-Style, Role-Specified, Level 5)
You are a senior financial analyst. Break down and answer the question methodically:
""" + _STEPS_1_4 + """3. **Answer Sub-Questions:** Answer each part using the given context.
4. **Synthesize:** Combine sub-answers into a single, comprehensive final answer.
5. **Support:** Cite exact supporting text or evidence retrieved from the given context.

""" + _NO_ADVICE + _CRITERIA + """
Context:
{context_str}

Question:
{query_str}

Supporting Evidence:
- "[Quote from Context]"

Explanation & Justification:
[Detailed rationale referencing both trading signals and company data.]

Final Answer:
[Provide final answer]
""",
    "L6": """(TELeR: Single-Turn, Instruction-Style, Role-Specified, Level 6)
You are a senior financial analyst. Break down and answer the question methodically:

""" + _STEPS_1_4 + """3. **Answer Sub-Questions:** Answer each part using the given context.
4. **Synthesize:** Combine sub-answers into a single, comprehensive final answer.
5. **Support:** Cite exact supporting text or evidence retrieved from the given context.
6. **Justify:** Justify why information from the context is included or excluded and explain your reasoning.

""" + _NO_ADVICE + _CRITERIA + """
Context:
{context_str}

Question:
{query_str}

Supporting Evidence:
- "[Quote from Context]"

Explanation & Justification:
[Detailed rationale referencing both trading signals and company data.]

Final Answer:
[Comprehensive, well-justified answer]
""",
}
"""run_snowflake_rag_pipeline.py PROMPTS_TO_EVALUATE, by level."""

IDEAL_CONTEXTS = """Trading Signals Context:
{trading_context_str}

Fundamental Data Context:
{fundamental_context_str}

Question:
{query_str}
"""
_IDEAL_STEPS_3_4 = """3. **Answer Sub-Questions:** Answer each part using *both* the 'Trading Signals Context' and 'Fundamental Data Context'.
4. **Synthesize:** Combine sub-answers into a single, comprehensive final answer.
"""
_IDEAL_EVIDENCE = """
Supporting Evidence:
- "[Quote from Trading Context]"
- "[Quote from Fundamental Context]"
"""
_IDEAL_RATIONALE = """
Explanation & Justification:
[Detailed rationale referencing both signal types]

Final Answer:
"""
_IDEAL_SUPPORT = "5. **Support:** Cite exact supporting text or evidence retrieved from the given contexts.\n"

IDEAL_PROMPTS: Mapping[str, str] = {
    "L1": """(TELeR: Single-Turn, Instruction-Style, Role-Specified, Level 1)
Use the provided 'Context' from financial documents as your primary source of truth and answer the given question.

""" + IDEAL_CONTEXTS + """
Answer:
""",
    "L2": """(TELeR: Single-Turn, Instruction-Style, Role-Specified, Level 2)
You are a senior financial analyst. Break down the question and answer the question methodically. First, explain what the question is asking and the main goal of the question clearly.
Then, identify the embedded sub-questions in the given question. Answer each part using only the provided context. Finally, combine sub-answers into a single, comprehensive final answer and answer in a professional style.
The context for trading signals is provided as Trading Signals Context: {trading_context_str} and context for Fundamental Data is provided as {fundamental_context_str}, and the question is given as {query_str}.
Your analysis should clearly distinguish between the reasoning process for your answers for each embedded sub question and the conclusion in the final answer.
""",
    "L3": """(TELeR: Single-Turn, Instruction-Style, Role-Specified, Level 3)
You are a senior financial analyst. Break down and answer the question methodically:
""" + _STEPS_1_4 + _IDEAL_STEPS_3_4 + "\n" + _NO_ADVICE + "\n" + IDEAL_CONTEXTS + _IDEAL_RATIONALE
    + "[Provide final answer]\n",
    "L4": """(TELeR: Single-Turn, Instruction-Style, Role-Specified, Level 4)
You are a senior financial analyst. Break down and answer the question methodically:
""" + _STEPS_1_4 + _IDEAL_STEPS_3_4 + "\n" + _NO_ADVICE + _CRITERIA + "\n" + IDEAL_CONTEXTS + _IDEAL_RATIONALE
    + "[Provide final answer]\n",
    "L5": """(TELeR: Single-Turn, Instruction-Style, Role-Specified, Level 5)
You are a senior financial analyst. Break down and answer the question methodically:
""" + _STEPS_1_4 + _IDEAL_STEPS_3_4 + _IDEAL_SUPPORT + "\n" + _NO_ADVICE + _CRITERIA + "\n" + IDEAL_CONTEXTS
    + _IDEAL_EVIDENCE + _IDEAL_RATIONALE + "[Provide final answer]\n",
    "L6": """(TELeR: Single-Turn, Instruction-Style, Role-Specified, Level 6)
You are a senior financial analyst. Break down and answer the question methodically:

""" + _STEPS_1_4 + _IDEAL_STEPS_3_4 + _IDEAL_SUPPORT
    + "6. **Justify:** Justify why information from *both* contexts is included or excluded and explain your reasoning.\n"
    + "\n" + _NO_ADVICE + _CRITERIA + "\n" + IDEAL_CONTEXTS + _IDEAL_EVIDENCE + _IDEAL_RATIONALE
    + "[Comprehensive, well-justified answer]\n",
}
"""generate_benchmark_responses.py PROMPTS_TO_EVALUATE, by level."""

RETRIEVAL_SELECTION_PROMPT = """You are a Lead Financial Editor. You have been given a Question and several Candidate Answers generated by an AI analyst.
Your task is to select the single *best* answer that is the most accurate, complete, and relevant.

Question:
{question}

--- CANDIDATE ANSWERS ---
{candidate_answers_str}
-------------------------

INSTRUCTIONS:
Review all candidate answers. Respond with *only* the Prompt ID of the answer you choose (e.g., "L3_Step_By_Step").
Do not add any explanation.

Your Choice (Prompt ID only):"""
"""SELF_SELECTION_PROMPT of run_snowflake_rag_pipeline.py (modes rag and norag)."""

IDEAL_SELECTION_PROMPT = """You are a financial analyst. You have been given a single Question and several Candidate Answers generated by an AI.
Your task is to select the single *best* answer that is the most accurate, complete, and relevant to the question.

Question:
{question}

--- CANDIDATE ANSWERS ---

{candidate_answers_str}

---
INSTRUCTIONS:
Review all candidate answers. Respond with *only* the Prompt ID of the answer you choose (e.g., "TELER_L3_Step_By_Step").
Do not add any other text or explanation.

Your Choice (Prompt ID only):
"""
"""SELF_SELECTION_PROMPT_TEMPLATE of generate_benchmark_responses.py (mode ideal)."""

RAG_CONTEXT_PREFIX = "MARKET DATA:\n"
"""run_snowflake_rag_pipeline.py: full_context_str = 'MARKET DATA:\\n' + the retrieved texts joined by newlines."""

IDEAL_SELECTION_TEMPERATURE = 0.1
"""generate_benchmark_responses.py samples the self-selection at temperature 0.1 (the rest is greedy)."""


def prompt_ids(mode: str) -> Mapping[str, str]:
    return IDEAL_PROMPT_IDS if mode == "ideal" else RETRIEVAL_PROMPT_IDS


def selection_example(mode: str) -> tuple[str, str]:
    """(prompt id, level) the mode's self-selection prompt names as its example ('e.g., "..."'): in both
    sets it is a real candidate, L3's, so a model that copies the example picks L3 whatever the answers say."""
    template = IDEAL_SELECTION_PROMPT if mode == "ideal" else RETRIEVAL_SELECTION_PROMPT
    found = re.search(r'\(e\.g\., "([^"]+)"\)', template)
    assert found, "the release's selection prompt names an example id"
    example = found.group(1)
    return example, next(level for level, pid in prompt_ids(mode).items() if pid == example)


def example_copy_note(copies: int, of: int, example_id: str, level: str) -> str | None:
    """The note for `copies` of `of` self-selections that picked the prompt's example id; None unless most did."""
    if copies * 2 <= of:
        return None
    return (f"{copies} of {of} self-selections picked {example_id}, the id the selection prompt gives as its "
            f"example: a model copying the example picks {level} whatever the answers say, so the pick (and "
            "anything measured on it) says little about the model's judgement")


SELECTION_STYLES: tuple[str, ...] = ("official", "neutral")
"""Self-selection prompt styles: the release's, or ours without the example id (module docstring)."""

_SELECTION_CUE = "Your Choice (Prompt ID only):"


def _neutral_template(mode: str) -> str:
    template = IDEAL_SELECTION_PROMPT if mode == "ideal" else RETRIEVAL_SELECTION_PROMPT
    instruction = f'Respond with *only* the Prompt ID of the answer you choose (e.g., "{selection_example(mode)[0]}").'
    assert instruction in template and _SELECTION_CUE in template
    return (template.replace(instruction, "Respond with *only* the label of the answer you choose, one of: {labels}.")
            .replace(_SELECTION_CUE, "Your Choice (label only):"))


NEUTRAL_SELECTION_PROMPTS: Mapping[str, str] = {"ideal": _neutral_template("ideal"),
                                                "retrieval": _neutral_template("rag")}
"""The release's selection prompts with the instruction's example replaced by the list of labels (style
'neutral'); keyed 'ideal' and 'retrieval' (modes rag and norag)."""


def shuffled_order(count: int, key: str) -> list[int]:
    """Candidate positions in the order the neutral prompt shows them, shuffled by a seed string (the caller's
    seed, question and model, so a run is reproducible and no level keeps one position)."""
    order = list(range(count))
    random.Random(key).shuffle(order)
    return order


def neutral_selection_prompt(mode: str, question: str, answers: Sequence[str], order: Sequence[int]) -> str:
    """The neutral selection prompt over `answers` shown in `order`, labelled 'Candidate 1..N'."""
    labels = [f"Candidate {k + 1}" for k in range(len(order))]
    separator = "\n\n" if mode == "ideal" else "\n"
    text = separator.join(f"--- {label} ---\n{answers[i]}" for label, i in zip(labels, order))
    template = NEUTRAL_SELECTION_PROMPTS["ideal" if mode == "ideal" else "retrieval"]
    return template.format(question=question, candidate_answers_str=text, labels=", ".join(labels))


def selection_turn(mode: str, question: str, candidates: Sequence[Candidate], style: str, order_key: str
                   ) -> tuple[str, list[int]]:
    """(prompt, positions of `candidates` in the order shown) of a self-selection in `style`; 'neutral' shuffles
    by `order_key` (the caller's seed, question and model)."""
    if style == "official":
        return selection_prompt(mode, question, candidates), list(range(len(candidates)))
    order = shuffled_order(len(candidates), order_key)
    return neutral_selection_prompt(mode, question, [c.response for c in candidates], order), order


def read_selection(mode: str, reply: str, candidates: Sequence[Candidate], style: str, order: Sequence[int]
                   ) -> tuple[int, str]:
    """(position in `candidates`, rule) of the reply to `selection_turn`; no usable answer -> the first shown."""
    if style == "official":
        chosen, rule = parse_selection(mode, reply, candidates)
        return next(i for i, c in enumerate(candidates) if c is chosen), rule
    index, rule = parse_label(reply, len(order))
    return order[0 if index is None else index], rule


_LABEL = re.compile(r"candidate\s*#?\s*(\d+)", re.IGNORECASE)


def parse_label(reply: str, count: int) -> tuple[int | None, str]:
    """(0-based label index, rule) of a neutral-style reply: 'exact' ('Candidate 2', '2'), 'contains' (one
    label named in more text), 'last-mentioned' (several: the release's rule for several ids), else
    (None, 'fallback-first')."""
    text = (reply or "").replace("*", "").replace("'", "").replace('"', "").strip().rstrip(".")
    bare = re.fullmatch(r"(?:candidate\s*#?\s*)?(\d+)", text, re.IGNORECASE)
    if bare and 1 <= int(bare.group(1)) <= count:
        return int(bare.group(1)) - 1, "exact"
    named = [int(m.group(1)) for m in _LABEL.finditer(text) if 1 <= int(m.group(1)) <= count]
    if len(set(named)) == 1:
        return named[0] - 1, "contains"
    if named:
        return named[-1] - 1, "last-mentioned"
    return None, "fallback-first"


def render(mode: str, level: str, question: str, *, context: str = "", trading_context: str = "",
           fundamental_context: str = "") -> str:
    """The exact prompt of one level. norag/rag: RETRIEVAL_PROMPTS (context used by L5, L6 only);
    ideal: IDEAL_PROMPTS with the two contexts; level 'bare': the question alone."""
    if level == BARE:
        return question
    if mode == "ideal":
        return IDEAL_PROMPTS[level].format(query_str=question, trading_context_str=trading_context,
                                           fundamental_context_str=fundamental_context)
    if mode == "norag" and level in EVIDENCE_LEVELS:
        raise ValueError(f"level {level} cites retrieved evidence; mode norag takes L1-L4 (and 'bare')")
    return RETRIEVAL_PROMPTS[level].format(query_str=question, context_str=RAG_CONTEXT_PREFIX + context)


@dataclass(frozen=True)
class Candidate:
    """One generated answer."""

    level: str
    """'L1'..'L6' or 'bare'."""
    prompt_id: str
    """The release's id for that prompt (what the selection prompt shows)."""
    response: str


def selection_prompt(mode: str, question: str, candidates: Sequence[Candidate]) -> str:
    if mode == "ideal":
        text = "\n\n".join(f"--- Candidate: {c.prompt_id} ---\n{c.response}" for c in candidates)
        return IDEAL_SELECTION_PROMPT.format(question=question, candidate_answers_str=text)
    text = "\n".join(f"--- {c.prompt_id} ---\n{c.response}" for c in candidates)
    return RETRIEVAL_SELECTION_PROMPT.format(question=question, candidate_answers_str=text)


def parse_selection(mode: str, reply: str, candidates: Sequence[Candidate]) -> tuple[Candidate, str]:
    """(chosen candidate, rule) by the release's rule for the mode (module docstring)."""
    ids = [c.prompt_id for c in candidates]
    by_id = dict(zip(ids, candidates))
    if mode != "ideal":
        lines = (reply or "").split("\n")
        clean = lines[0].strip().replace("'", "").replace('"', "")
        hit = next((pid for pid in ids if pid in clean), None)
        return (by_id[hit], "contains") if hit else (candidates[0], "fallback-first")
    clean = (reply or "").replace("*", "").replace("'", "").replace('"', "").strip()
    if clean in by_id:
        return by_id[clean], "exact"
    lowered = clean.lower()
    found = [pid for pid in ids if pid.lower() in lowered]
    if len(found) == 1:
        return by_id[found[0]], "contains"
    if found:
        starts = next((pid for pid in found if lowered.startswith(pid.lower())), None)
        if starts:
            return by_id[starts], "starts-with"
        return by_id[max(found, key=lambda pid: lowered.rfind(pid.lower()))], "last-mentioned"
    return candidates[0], "fallback-first"
