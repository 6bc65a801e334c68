"""Every CFinBench prompt, character for character as the official evaluation builds it.

Source: yanbinwei/CFinBench-Eval (OpenCompass configs `configs/datasets/CFinBench/`), as
restated in the project issue. `{}` in a template is the category's Chinese name. Golden strings
for each type x shots live in tests/golden/cfinbench_prompts.json.

- 0-shot:  `_p + '{text}\\n答案：'` (full-width colon, no newline after `_p`).
- 3-shot:  `_p'` (with the few-shot note) `+ '\\n' + EXAMPLES + '\\n{text}\\n答案：'`; EXAMPLES is the
  examples `'{text}\\n答案: {Answer}'` (half-width colon and a space) joined with `'\\n'`, with one `'\\n'`
  after the last (as OpenCompass's FixKRetriever joins them).
- log-likelihood (single choice, the official PPL config): `_p + r'\\n' + '{text}\\n答案: {X}'` per option X:
  after `_p` a literal backslash and 'n' (two characters; the release's template is a raw f-string), not a
  newline.
- `text` is the question followed by each option on its own line (the official loader appends
  `'\\n' + option` for single and multiple choice).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

TEMPLATES: dict[str, str] = {
    "single_choice": (
        "请你做一道关于{}的单项选择题，\n你将从A，B，C，D中选出正确的答案，并写在'答案：'之后，"
        "答案应只包含最终结果，不要添加额外语句。\n例如：答案： B。请你严格按照上述格式作答。\n题目如下："),
    "multi_choice": (
        "请你做一道关于{}的多项选择题，\n答案可能是一个到多个选项,请你从四个或者五个选项中选出正确的答案，"
        "并将其写在'答案：'之后，答案应只包含最终结果，不要添加额外语句。\n例如：答案: A D。请你严格按照上述格式作答。"
        "\n题目如下："),
    "judgment": (
        "请回答下面关于{}的判断题，将你的判断结果写在'答案：'之后，答案应只包含最终结果，不要添加额外语句。"
        "若给定题目表述正确，则回答：'答案：正确'，否则回答：'答案：错误'。请严格按照上述格式作答。题目如下："),
}
"""The official `_p` per question type."""

FEW_SHOT_NOTE = "下面会展示三个问题及其答案的示例。"
"""Inserted into `_p` for 3-shot, before '\\n题目如下：' (judgment: directly before '题目如下：')."""

FEW_SHOT_ANCHOR: dict[str, str] = {
    "single_choice": "\n题目如下：",
    "multi_choice": "\n题目如下：",
    "judgment": "题目如下：",
}
"""Where the few-shot note goes in each template."""

SHOTS = 3
"""The official few-shot count: dev items 0, 1, 2 of the same category and type."""

ANSWER_CUE = "\n答案："
"""Ends every generation prompt (full-width colon)."""

EXAMPLE_ANSWER_CUE = "\n答案: "
"""Precedes the answer of a few-shot example and of a log-likelihood option (half-width + space)."""


def instruction(question_type: str, category_zh: str, *, few_shot: bool = False) -> str:
    """`_p` for a type and category; with `few_shot` the note is inserted at the official place."""
    template = TEMPLATES[question_type]
    if few_shot:
        anchor = FEW_SHOT_ANCHOR[question_type]
        assert template.endswith(anchor), "the few-shot anchor must end the template"
        template = template[: -len(anchor)] + FEW_SHOT_NOTE + anchor
    # replace, not format: a category name from categories.json might contain braces
    return template.replace("{}", category_zh)


def question_text(text: str, options: Sequence[str]) -> str:
    """The question followed by each option on its own line (judgment questions have none)."""
    return text + "".join("\n" + option for option in options)


def zero_shot_prompt(question_type: str, category_zh: str, question: str) -> str:
    """`_p + '{text}\\n答案：'`; `question` is already `question_text(...)`."""
    return instruction(question_type, category_zh) + question + ANSWER_CUE


def three_shot_prompt(question_type: str, category_zh: str, question: str,
                      examples: Sequence[tuple[str, str]]) -> str:
    """`_p' + '\\n' + EXAMPLES + '\\n{text}\\n答案：'`; examples are (question_text, Answer) pairs, joined
    as OpenCompass's FixKRetriever joins them: '\\n' between examples and one after the last."""
    if len(examples) != SHOTS:
        raise ValueError(f"3-shot needs exactly {SHOTS} examples, got {len(examples)}")
    shown = "\n".join(example + EXAMPLE_ANSWER_CUE + answer for example, answer in examples) + "\n"
    return instruction(question_type, category_zh, few_shot=True) + "\n" + shown + "\n" + question + ANSWER_CUE


PPL_SEPARATOR = "\\n"
"""Between instruction and question in the official PPL string: a literal backslash and 'n' (raw f-string)."""


def loglikelihood_context(question_type: str, category_zh: str, question: str) -> str:
    """The shared context `'{_p}\\n{text}\\n答案:'`; each option X is scored as continuation `' X'`.

    The release's template is a raw f-string, `rf'{_p}\\n{text1}{answer}'`, so the instruction is followed by
    a backslash and an 'n', not a newline: reproduced as written (see `official_loglikelihood_string`)."""
    return instruction(question_type, category_zh) + PPL_SEPARATOR + question + EXAMPLE_ANSWER_CUE.rstrip(" ")


def loglikelihood_continuation(letter: str) -> str:
    """`' X'`, so that context + continuation is the official `'...答案: X'`."""
    return " " + letter


def official_loglikelihood_string(question_type: str, category_zh: str, question: str, letter: str) -> str:
    """The official PPL template `rf"{_p}\\n{text1}{answer}"` with `text1 = "{text}\\n答案: "`; in the raw
    f-string the first `\\n` is two characters, the one inside text1 (a plain string) a newline."""
    return f"{instruction(question_type, category_zh)}{PPL_SEPARATOR}{question}\n答案: {letter}"


# --- truncation -------------------------------------------------------------------------------

@dataclass(frozen=True)
class TruncationPolicy:
    """How a prompt longer than the budget is cut. Every cut is counted (note_truncation)."""

    name: str
    """The policy name as given on the command line and recorded in the run."""

    max_prompt_tokens: int | None
    """Prompt budget in the model's tokens (of the prompt text, before any chat template); None: never cut."""

    keep: str = "start"
    """'start' = right-truncate (drop the end of the prompt), as the paper's OpenCompass runs did."""


TRUNCATION_POLICIES: dict[str, TruncationPolicy] = {
    "paper-2048": TruncationPolicy("paper-2048", 2048, "start"),
    "none": TruncationPolicy("none", None),
}
"""Named truncation policies; 'paper-2048' is the paper's setting (max_seq_len 2048, right side cut)."""


def right_truncate(text: str, max_tokens: int, count_tokens: Callable[[str], int | None]) -> str | None:
    """The longest prefix of `text` with at most `max_tokens` tokens (binary search on characters).

    Returns `text` itself when it fits and None when the tokenizer cannot count."""
    total = count_tokens(text)
    if total is None:
        return None
    if total <= max_tokens:
        return text
    low, high = 0, len(text)  # invariant: text[:low] fits, text[:high] does not
    while high - low > 1:
        middle = (low + high) // 2
        counted = count_tokens(text[:middle])
        if counted is not None and counted <= max_tokens:
            low = middle
        else:
            high = middle
    return text[:low]
