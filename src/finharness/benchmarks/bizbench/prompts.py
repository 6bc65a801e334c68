"""BizBench prompts: the official system messages with their one-shot samples, rendered exactly as the
official pipeline renders them (kensho-technologies/benchmarks-pipeline @ cdffa9b, prompt.py).

Messages are [system, one-shot user, one-shot assistant, user] (`create_prompt`); a question is
rendered by its class's `__str__`:
  with options   'Question: {q}\\nA. {o1}\\nB. {o2}...'       (MultipleChoiceQuestion)
  with context   'Context:\\n{context}\\n\\nQuestion: {q}\\n'   (ContextualQuestion)
  otherwise      '{q}'                                      (Question)

Which file each task uses (config.py `code_prompt_creator` / `cot_prompt_creator`):

  task          style 'code'              style 'cot'
  codetatqa     context_code.json         context_cot.json
  codefinqa     codefinqa_code.json       codefinqa_cot.json
  fincode       fincode_code.json         fincode_cot.json
  tatqa-e       tatqa_e.json              tatqa_e.json
  convfinqa-e   convfinqa.json            convfinqa.json
  finknow       finknow.json              finknow.json
  secnum        convfinqa.json (not in the pipeline: its extraction prompt, whose one-shot sample is an
                SEC 10-K excerpt, as SEC-Num's contexts are; override with -o prompt_file=tatqa_e.json)

FormulaEval has no official prompt; ours is `FORMULAEVAL_SYSTEM` (see formulaeval/).

Merge-conflict markers: upstream `mc_cot.json` and `no_context_cot.json` (neither used by config.py)
hold an unresolved conflict in the sample question's `task` field. `resolve_conflicts` parses both
sides and keeps the side whose samples match the schema of every clean file (`"task": "prompt"`),
i.e. the 'upstream/main' side, and records the choice in `OfficialPrompt.resolution`. The two sides
differ only in that field, which is never rendered, so the prompt text is the same either way.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from ...core.hashing import content_key
from ...core.types import Message, to_jsonable
from ...data.errors import DataError
from ...data.hints import pull_hint
from ...data.io import read_text

LETTERS = "ABCD"
"""The pipeline's option letters (prompt.py LETTERS)."""

PROMPT_FILES: dict[str, dict[str, str]] = {
    "codetatqa": {"code": "context_code.json", "cot": "context_cot.json"},
    "codefinqa": {"code": "codefinqa_code.json", "cot": "codefinqa_cot.json"},
    "fincode": {"code": "fincode_code.json", "cot": "fincode_cot.json"},
    "tatqa-e": {"code": "tatqa_e.json", "cot": "tatqa_e.json"},
    "convfinqa-e": {"code": "convfinqa.json", "cot": "convfinqa.json"},
    "finknow": {"code": "finknow.json", "cot": "finknow.json"},
    "secnum": {"code": "convfinqa.json", "cot": "convfinqa.json"},
}
"""task -> style -> prompt file (config.py; secnum is ours, see the module docstring)."""

STYLES = ("code", "cot")

SCHEMA_TASK = "prompt"
"""The sample question's `task` in every clean upstream file; the conflict side that matches it wins."""

PROMPTS_DATASET = "bizbench-prompts"
"""The registry dataset of the official prompt files (read at the first prompt)."""

PROMPTS_HINT = ("the official prompt files live in DATA_DIR/bizbench/prompts "
                "(`finharness data pull bizbench-prompts`), or pass -o prompts=DIR")


# --- rendering (prompt.py) ------------------------------------------------------------------------

def multiple_choice_string_format(question: str, options: Sequence[str]) -> str:
    """prompt.py `multiple_choice_string_format`."""
    lines = [LETTERS[index] + ". " + option for index, option in enumerate(options)]
    return f"Question: {question}\n" + "\n".join(lines)


def context_string_format(context: str, question: str) -> str:
    """prompt.py `context_string_format` (context_type is accepted upstream and unused)."""
    return f"Context:\n{context}\n\nQuestion: {question}\n"


def render_question(question: Mapping[str, Any]) -> str:
    """A question as `str(parse_question_json(question))` upstream: options first, then context."""
    if "options" in question and question["options"] is not None:
        return multiple_choice_string_format(question["question"], question["options"])
    if "context" in question and question["context"] is not None:
        return context_string_format(question["context"], question["question"])
    return str(question["question"])


# --- files and merge conflicts ---------------------------------------------------------------------

_CONFLICT = re.compile(r"^<{7,}[^\n]*\n(?P<ours>.*?)^={7,}[^\n]*\n(?P<theirs>.*?)^>{7,}[^\n]*\n",
                       re.DOTALL | re.MULTILINE)


@dataclass(frozen=True)
class OfficialPrompt:
    """One official prompt file: the system message and its one-shot samples."""

    name: str
    """The file name ('context_code.json')."""

    system_message: str
    """The system turn."""

    samples: tuple[tuple[Mapping[str, Any], str], ...]
    """(question object, assistant answer) pairs, rendered as user/assistant turns."""

    resolution: str | None = None
    """How merge-conflict markers were resolved ('upstream/main side: ...'); None when there were none."""

    def messages(self, question: Mapping[str, Any]) -> list[Message]:
        """prompt.py `create_prompt`: system, each sample as user + assistant, then the question."""
        turns = [Message("system", self.system_message)]
        for sample_question, sample_answer in self.samples:
            turns += [Message("user", render_question(sample_question)), Message("assistant", str(sample_answer))]
        turns.append(Message("user", render_question(question)))
        return turns


def conflict_sides(text: str) -> dict[str, str]:
    """The file text with every conflict resolved to one side: {'ours': ..., 'theirs': ...};
    {} when the text has no conflict markers. The side labels ('HEAD', 'upstream/main') are kept in
    the keys 'ours_label' / 'theirs_label'."""
    blocks = list(_CONFLICT.finditer(text))
    if not blocks:
        return {}
    labels = re.findall(r"^<{7,} ?([^\n]*)$", text, re.MULTILINE), re.findall(r"^>{7,} ?([^\n]*)$", text, re.MULTILINE)
    return {"ours": _CONFLICT.sub(lambda m: m.group("ours"), text),
            "theirs": _CONFLICT.sub(lambda m: m.group("theirs"), text),
            "ours_label": labels[0][0] if labels[0] else "ours", "theirs_label": labels[1][0] if labels[1] else "theirs"}


def _sample_tasks(document: Mapping[str, Any]) -> set[str]:
    return {str(sample.get("question", {}).get("task")) for sample in document.get("samples", [])}


def resolve_conflicts(text: str, path: Path) -> tuple[dict[str, Any], str | None]:
    """Parse a prompt file; with conflict markers, parse both sides and keep the one matching the
    clean files' schema (`task` == 'prompt'). Returns (document, resolution note or None)."""
    sides = conflict_sides(text)
    if not sides:
        try:
            return json.loads(text), None
        except json.JSONDecodeError as err:
            raise DataError(f"malformed JSON: {err.msg} (column {err.colno})", path=path, line=err.lineno) from None
    parsed: dict[str, dict[str, Any]] = {}
    for side in ("ours", "theirs"):
        try:
            parsed[side] = json.loads(sides[side])
        except json.JSONDecodeError:
            continue
    matching = [side for side, document in parsed.items() if _sample_tasks(document) == {SCHEMA_TASK}]
    if len(matching) != 1:
        raise DataError(f"merge-conflict markers: {len(parsed)} side(s) parse, {len(matching)} match the "
                        f"schema of the clean files (sample task {SCHEMA_TASK!r})", path=path,
                        hint="resolve the conflict by hand")
    side = matching[0]
    other = "theirs" if side == "ours" else "ours"
    note = (f"merge conflict resolved to the {sides[side + '_label']!r} side (sample task {SCHEMA_TASK!r}, as every "
            f"clean file); the {sides[other + '_label']!r} side "
            + (f"has task {sorted(_sample_tasks(parsed[other]))}" if other in parsed else "does not parse")
            + "; the rendered prompt does not use this field")
    return parsed[side], note


def load_prompt_file(path: str | Path) -> OfficialPrompt:
    """Read one official prompt file (conflict markers resolved, see the module docstring)."""
    path = Path(path)
    document, resolution = resolve_conflicts(read_text(path), path)
    if not isinstance(document, dict) or "system_message" not in document or "samples" not in document:
        raise DataError("expected {'system_message': ..., 'samples': [{'question': ..., 'answer': ...}]}", path=path,
                        hint=PROMPTS_HINT)
    samples = []
    for index, sample in enumerate(document["samples"]):
        if "question" not in sample or "answer" not in sample or "question" not in sample["question"]:
            raise DataError(f"sample {index} lacks question/answer", path=path, hint=PROMPTS_HINT)
        samples.append((dict(sample["question"]), str(sample["answer"])))
    return OfficialPrompt(name=path.name, system_message=str(document["system_message"]), samples=tuple(samples),
                          resolution=resolution)


def prompts_dir(data_dir: Path | None, override: str | Path | None = None) -> Path:
    """-o prompts=DIR, else DATA_DIR/bizbench/prompts."""
    if override:
        folder = Path(override)
    elif data_dir is not None:
        folder = Path(data_dir) / "bizbench" / "prompts"
    else:
        raise DataError("no data directory given for the BizBench prompt files", hint=PROMPTS_HINT)
    if not folder.is_dir():
        pull = pull_hint(folder) if not override else None
        raise DataError("prompt folder not found", path=folder, hint=f"{pull}, or pass -o prompts=DIR" if pull
                        else PROMPTS_HINT)
    return folder


def prompt_file_name(task: str, style: str, override: str | None = None) -> str:
    """The file a task uses in a style (PROMPT_FILES), or the override."""
    if override:
        return override
    if style not in STYLES:
        raise ValueError(f"style must be one of {list(STYLES)}, got {style!r}")
    return PROMPT_FILES[task][style]


# --- FormulaEval (ours; no official prompt) ---------------------------------------------------------

FORMULAEVAL_SYSTEM = (
    "You are a Python coding bot for finance. You complete a function from its signature and docstring. "
    "Write the complete function (for a method, the complete method; the class fields are given). "
    "The python code cannot import external libraries or print any values. "
    "Put the code in a single markdown code block. (```python)")
"""FormulaEval's system message, in the manner of the official code prompts."""


def formulaeval_messages(stub: str) -> list[Message]:
    """[system, user]: zero-shot, the stub in a python block."""
    return [Message("system", FORMULAEVAL_SYSTEM),
            Message("user", f"Complete the following code.\n\n```python\n{stub.rstrip()}\n```\n")]


def config_with_prompt(options: Mapping[str, Any], prompt: Callable[[], OfficialPrompt]) -> dict[str, Any]:
    """A task's options plus the content hash of its prompt file once load() has placed it: the
    prompt files are data, so an edited one never resumes samples asked with the old text."""
    config = dict(options)
    try:
        config["prompt_sha256"] = content_key(to_jsonable(prompt()))
    except DataError:
        pass  # no prompt file (`finharness score` needs none); solve() says so where it needs one
    return config
