"""Reading a Python program from a model reply, one auditable rule at a time.

Extraction only: the program is run by `finharness.sandbox`, whose `mode` says how its value is
taken ('last_expression' reproduces the official pipeline; 'answer_variable' reads `answer`).
`CodeExtraction.value_mode` names the mode to run a program with.

official  BizBench's `python_extract` (kensho-technologies/benchmarks-pipeline, prompt.py): the
          pattern ``^```(?:\\w+)?\\s*\\n(.*?)(?=^```)```  `` (DOTALL, MULTILINE) must find exactly one
          fenced block; its value is the last statement's value (for `x = e` that is `e`, the
          sandbox's 'last_expression' mode). Upstream, a reply containing ``` at all is read as
          code and any other reply as a [[number]] (`official_dispatch`).
robust    fenced            exactly one fenced block
          fenced_python     several blocks, exactly one labelled python (or py) -- the others are
                            output or prose
          fenced_joined     several blocks, all python or all unlabelled: run in order as one program
          fenced_unclosed   an opening fence whose closing fence never came (a cut-off reply)
          bare_program      no fence, but the whole reply (after a reasoning block) parses as Python
                            with at least one statement that is not a lone name or number
          The value comes from the last expression, or from a top-level variable `answer` when the
          program assigns it and ends in no expression or in a print() (value_mode 'answer_variable').
A reply with no program is `unparseable` (code None) and is never guessed.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from typing import Literal

from . import UNPARSEABLE  # re-exported: callers import it from here

ValueMode = Literal["last_expression", "answer_variable"]

_OFFICIAL_FENCE = re.compile(r"^```(?:\w+)?\s*\n(.*?)(?=^```)```", re.DOTALL | re.MULTILINE)
# Robust fences: the language tag is kept, the closing fence may be indented.
_FENCE = re.compile(r"^[ \t]*```[ \t]*([\w+-]*)[^\n]*\n(.*?)^[ \t]*```", re.DOTALL | re.MULTILINE)
_OPEN_FENCE = re.compile(r"^[ \t]*```[ \t]*([\w+-]*)[^\n]*\n(.*)\Z", re.DOTALL | re.MULTILINE)
_PYTHON_TAGS = {"python", "py", "python3"}


@dataclass(frozen=True)
class CodeExtraction:
    """One program read from a reply (or nothing), and how it was read."""

    code: str | None
    """The program text; None when unparseable."""

    rule: str
    """The rule that fired ('official_fenced', 'fenced', 'bare_program', ...) or 'unparseable'."""

    value_mode: ValueMode = "last_expression"
    """How the sandbox should take the program's value."""

    detail: str | None = None
    """Why nothing was read (no_code_block, multiple_code_blocks, syntax_error, ...)."""

    @property
    def parsed(self) -> bool:
        return self.code is not None


def official_dispatch(reply: str) -> Literal["code", "number"]:
    """The official pipeline's choice: any ``` makes the reply code, else it is read as [[number]]."""
    return "code" if "```" in (reply or "") else "number"


def extract_code_official(reply: str) -> CodeExtraction:
    """BizBench's `python_extract` block search, reproduced exactly (exactly one fenced block)."""
    blocks = _OFFICIAL_FENCE.findall(reply or "")
    if len(blocks) != 1:
        return CodeExtraction(None, UNPARSEABLE, detail="no_code_block" if not blocks else "multiple_code_blocks")
    return CodeExtraction(blocks[0], "official_fenced")


def _value_mode(code: str) -> ValueMode:
    """'answer_variable' when the program sets `answer` at top level and ends in no expression (or in
    a print(), whose value is None)."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return "last_expression"  # the sandbox reports the syntax error itself
    last = tree.body[-1] if tree.body else None
    ends_in_print = (isinstance(last, ast.Expr) and isinstance(last.value, ast.Call)
                     and isinstance(last.value.func, ast.Name) and last.value.func.id == "print")
    if isinstance(last, ast.Expr) and not ends_in_print:
        return "last_expression"
    for statement in tree.body:
        targets = []
        if isinstance(statement, ast.Assign):
            targets = statement.targets
        elif isinstance(statement, (ast.AugAssign, ast.AnnAssign)):
            targets = [statement.target]
        if any(isinstance(target, ast.Name) and target.id == "answer" for target in targets):
            return "answer_variable"
    return "last_expression"


def _strip_reasoning(reply: str) -> str:
    return reply.rsplit("</think>", 1)[-1] if "</think>" in reply else reply


def _is_program(text: str) -> bool:
    """Parses as Python and does more than name a single value (prose like 'Yes' parses as a name)."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return False
    if not tree.body:
        return False
    if len(tree.body) == 1 and isinstance(tree.body[0], ast.Expr) and isinstance(
            tree.body[0].value, (ast.Name, ast.Constant)):
        return False
    return True


def extract_code_robust(reply: str) -> CodeExtraction:
    """The robust cascade (see the module docstring)."""
    text = _strip_reasoning(reply or "")
    blocks = [(tag.lower(), body) for tag, body in _FENCE.findall(text)]
    chosen: str | None = None
    rule = ""
    if len(blocks) == 1:
        chosen, rule = blocks[0][1], "fenced"
    elif len(blocks) > 1:
        python_blocks = [body for tag, body in blocks if tag in _PYTHON_TAGS]
        tags = {tag for tag, _ in blocks}
        if len(python_blocks) == 1:
            chosen, rule = python_blocks[0], "fenced_python"
        elif tags <= _PYTHON_TAGS or tags == {""}:
            chosen, rule = "\n".join(body.rstrip("\n") for _, body in blocks) + "\n", "fenced_joined"
        else:
            return CodeExtraction(None, UNPARSEABLE, detail="multiple_code_blocks")
    else:
        unclosed = _OPEN_FENCE.search(text)
        if unclosed and unclosed.group(2).strip():
            chosen, rule = unclosed.group(2), "fenced_unclosed"
        elif "```" not in text and _is_program(text.strip()):
            chosen, rule = text.strip() + "\n", "bare_program"
    if chosen is None:
        return CodeExtraction(None, UNPARSEABLE, detail="no_code_block")
    if not chosen.strip():
        return CodeExtraction(None, UNPARSEABLE, detail="empty_code_block")
    return CodeExtraction(chosen, rule, value_mode=_value_mode(chosen))


def extract_code(reply: str, mode: Literal["official", "robust"] = "robust") -> CodeExtraction:
    """Read the program in the named mode."""
    if mode == "official":
        return extract_code_official(reply)
    if mode == "robust":
        return extract_code_robust(reply)
    raise ValueError(f"unknown code-extraction mode {mode!r}; use 'official' or 'robust'")
