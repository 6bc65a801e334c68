"""finharness.extract.code: official (exactly one fenced block) and robust program extraction."""

from __future__ import annotations

import pytest

from finharness.extract.code import (
    UNPARSEABLE,
    extract_code,
    extract_code_official,
    extract_code_robust,
    official_dispatch,
)

ONE_BLOCK = "Let me compute.\n```python\na = 1\nb = 2\na + b\n```\nThat is 3."
TWO_PYTHON = "```python\nx = 1\n```\nthen\n```python\nx + 1\n```"
CODE_AND_OUTPUT = "```python\nx = 41 + 1\nx\n```\nOutput:\n```\n42\n```"


def test_official_takes_exactly_one_fenced_block():
    found = extract_code_official(ONE_BLOCK)
    assert found.rule == "official_fenced" and found.code == "a = 1\nb = 2\na + b\n"
    assert found.value_mode == "last_expression"
    for reply in (TWO_PYTHON, CODE_AND_OUTPUT):
        assert extract_code_official(reply).rule == UNPARSEABLE
        assert extract_code_official(reply).detail == "multiple_code_blocks"
    assert extract_code_official("x = 1\nx").detail == "no_code_block"


def test_official_dispatch_follows_the_backticks():
    assert official_dispatch("```python\n1\n```") == "code"
    assert official_dispatch("so [[1]]") == "number"


@pytest.mark.parametrize("reply, rule, code", [
    (ONE_BLOCK, "fenced", "a = 1\nb = 2\na + b\n"),
    (TWO_PYTHON, "fenced_joined", "x = 1\nx + 1\n"),
    (CODE_AND_OUTPUT, "fenced_python", "x = 41 + 1\nx\n"),
    ("```python\nx = 2\nx * 3", "fenced_unclosed", "x = 2\nx * 3"),
    ("revenue = 5\ncost = 3\nrevenue - cost", "bare_program", "revenue = 5\ncost = 3\nrevenue - cost\n"),
])
def test_robust_rules(reply, rule, code):
    found = extract_code_robust(reply)
    assert (found.rule, found.code) == (rule, code)


def test_robust_reads_an_answer_variable_when_the_program_ends_without_an_expression():
    assert extract_code_robust("revenue = 5\nanswer = revenue * 2").value_mode == "answer_variable"
    assert extract_code_robust("```\nanswer = 3\nprint(answer)\n```").value_mode == "answer_variable"
    assert extract_code_robust("```\nanswer = 3\nanswer + 1\n```").value_mode == "last_expression"


@pytest.mark.parametrize("reply", ["The answer is 5.", "Yes", "42", "", "```python\n```"])
def test_robust_never_guesses_a_program(reply):
    found = extract_code(reply, "robust")
    assert found.code is None and found.rule == UNPARSEABLE


def test_mixed_language_blocks_are_not_joined():
    reply = "```sql\nselect 1\n```\n```bash\necho 2\n```"
    assert extract_code_robust(reply).detail == "multiple_code_blocks"
