"""A task declared in a TOML file: where its data is, what kind of answer it wants, the prompt, and how to score.

    name = "my_exam"                              # the task's name (run folders, results.json)
    kind = "multiple_choice"                      # multiple_choice | numeric | span | code | open
    [data]
    path = "my_exam.jsonl"                        # JSONL, CSV or Parquet; or hub = "OWNER/NAME" + revision + file
    [fields]
    question = "question"                         # record field -> the template's name for it
    options = "options"                           # multiple_choice: a list field, or a list of column names
    answer = "answer"
    category = "topic"                            # groups and macro averages (optional)
    [prompt]
    template = "{{ question }}\n{{ options }}\nAnswer:"

Every key is checked when the file is read; a problem is a FileError naming the file and the key (`[fields]
answer: ...`), which the command line prints as one `error:` line. docs/write-a-task.md is the reference for every
key; docs/examples/*.toml are worked examples.
"""

from __future__ import annotations

import difflib
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

KINDS = ("multiple_choice", "numeric", "span", "code", "open")
MC_METHODS = ("gen", "ll", "auto")
SPAN_MATCH = ("exact", "f1")
NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]*$")
HUB_REVISION = re.compile(r"^[0-9a-f]{40}$")
TOP_KEYS = ("name", "description", "kind", "data", "fields", "prompt", "scoring", "weights")
SECTION_KEYS: Mapping[str, tuple[str, ...]] = {
    "data": ("path", "hub", "revision", "file", "split", "split_field", "fewshot_split"),
    "fields": ("id", "question", "context", "options", "answer", "category", "extra"),
    "prompt": ("template", "system", "fewshot", "answer", "max_tokens", "cue"),
    "scoring": ("method", "tolerance", "scale", "percent", "match", "rubric", "threshold"),
}


class FileError(ValueError):
    """A task file that cannot be used: `str()` is 'FILE: [section] key: what is wrong'."""


@dataclass(frozen=True)
class DataSource:
    """Where the records are."""

    path: str | None = None
    """A local JSONL, CSV or Parquet file: relative to the data root (--data-dir), else to the task file's folder."""
    hub: str | None = None
    """A Hugging Face dataset `OWNER/NAME` (with `revision`, 40 hex digits, and `file`, its path in the repo)."""
    revision: str | None = None
    """The Hub commit the file is pulled at (pinned: a branch name pins nothing)."""
    file: str | None = None
    """The file within the Hub dataset."""
    split: str | None = None
    """Keep the records whose `split_field` equals this (the items scored)."""
    split_field: str = "split"
    """The record field naming a record's split."""
    fewshot_split: str | None = None
    """The split few-shot examples come from (never the scored one)."""


@dataclass(frozen=True)
class TaskFile:
    """A task file, read and checked."""

    path: Path
    """The file."""
    name: str
    """The task's name."""
    kind: str
    """One of KINDS."""
    data: DataSource
    fields: Mapping[str, Any]
    """Template name -> record field (`options` may be a list of fields); `id`, `category` optional."""
    template: str
    """Jinja2 template of the user message; record fields by their template names, `options` as 'A. ...' lines."""
    description: str = ""
    system: str | None = None
    """A system message (optional)."""
    fewshot: int = 0
    """Examples from `data.fewshot_split` shown before the question (user and assistant turns)."""
    answer: str | None = None
    """Jinja2 template of a few-shot example's assistant turn, over the fields and `answer` (the record's own answer
    text; the letter for multiple choice). None: 'Answer: {{ answer }}' for multiple choice, else the answer text."""
    max_tokens: int = 256
    """The answer budget."""
    cue: str = "\nAnswer:"
    """multiple_choice with method ll: the text after the prompt that each option letter continues."""
    scoring: Mapping[str, Any] = field(default_factory=dict)
    """Kind-specific: method (gen | ll | auto), tolerance, scale, percent, match (exact | f1), rubric, threshold."""
    weights: Mapping[str, float] = field(default_factory=dict)
    """category -> weight of its mean in the weighted macro average (categories not named weigh 1)."""
    text: str = ""
    """The file's text (its sha256 is in every run key)."""


def _fail(path: Path, where: str, message: str) -> FileError:
    return FileError(f"{path}: {where}: {message}")


def _unknown(path: Path, where: str, given: Mapping[str, Any], known: Sequence[str]) -> None:
    for key in given:
        if key not in known:
            close = difflib.get_close_matches(key, list(known), n=1)
            raise _fail(path, where, f"unknown key {key!r}" + (f" (did you mean {close[0]!r}?)" if close else "")
                        + f"; known: {', '.join(known)}")


def _table(path: Path, raw: Mapping[str, Any], name: str, required: bool = False) -> dict[str, Any]:
    value = raw.get(name)
    if value is None:
        if required:
            raise _fail(path, f"[{name}]", "missing (see docs/write-a-task.md)")
        return {}
    if not isinstance(value, dict):
        raise _fail(path, name, f"must be a table ([{name}]), not {type(value).__name__}")
    _unknown(path, f"[{name}]", value, SECTION_KEYS.get(name, tuple(value)))
    return value


def _text(path: Path, where: str, value: Any, *, required: bool = False) -> str | None:
    if value is None:
        if required:
            raise _fail(path, where, "missing")
        return None
    if not isinstance(value, str) or not value.strip():
        raise _fail(path, where, f"must be text, not {value!r}")
    return value


def _number(path: Path, where: str, value: Any, *, minimum: float = 0.0, whole: bool = False) -> Any:
    if value is None:
        return None
    kind = int if whole else (int, float)
    if isinstance(value, bool) or not isinstance(value, kind) or value < minimum or value != value:
        what = "a whole number" if whole else "a number"
        raise _fail(path, where, f"must be {what} of at least {minimum:g}, not {value!r}")
    return value


def read_task_file(path: str | Path) -> TaskFile:
    """Read and check a task file (module docstring); FileError naming the key on any problem."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
        raw = tomllib.loads(text)
    except FileNotFoundError:
        raise FileError(f"{path}: no such task file") from None
    except (OSError, UnicodeDecodeError) as err:
        raise FileError(f"{path}: cannot be read: {err}") from None
    except tomllib.TOMLDecodeError as err:
        raise FileError(f"{path}: not valid TOML: {err}") from None
    _unknown(path, "top level", raw, TOP_KEYS)
    name = _text(path, "name", raw.get("name"), required=True)
    if not NAME.match(name):  # type: ignore[arg-type]
        raise _fail(path, "name", f"{name!r} must start with a letter and hold letters, digits, '_', '.', '-'")
    kind = raw.get("kind")
    if kind not in KINDS:
        raise _fail(path, "kind", f"{kind!r} is not one of {', '.join(KINDS)}")
    data = _table(path, raw, "data", required=True)
    fields = _table(path, raw, "fields", required=True)
    prompt = _table(path, raw, "prompt", required=True)
    scoring = _table(path, raw, "scoring")
    source = DataSource(**{k: _text(path, f"[data] {k}", v) for k, v in data.items()})
    if (source.path is None) == (source.hub is None):
        raise _fail(path, "[data]", "give path = FILE, or hub = OWNER/NAME with revision and file (one of them)")
    if source.hub is not None:
        if source.revision is None or not HUB_REVISION.match(source.revision):
            raise _fail(path, "[data] revision", "a Hub dataset needs the 40-hex commit to pull it at (a branch "
                        "name pins nothing): see its page's 'History'")
        if source.file is None:
            raise _fail(path, "[data] file", "missing: the file within the Hub dataset (e.g. data/test.parquet)")
    if source.fewshot_split is not None and source.fewshot_split == source.split:
        raise _fail(path, "[data] fewshot_split", "must differ from split (examples are never the scored items)")
    for key, value in fields.items():
        ok = isinstance(value, str) or (key in ("options", "extra") and isinstance(value, list)
                                         and value and all(isinstance(v, str) for v in value))
        if not ok:
            raise _fail(path, f"[fields] {key}", f"must name a record field{' (or a list of them)' if key in ('options', 'extra') else ''}, not {value!r}")
    for needed in ("question", "answer"):
        if needed not in fields:
            raise _fail(path, f"[fields] {needed}", "missing: the record field that holds it")
    if kind == "multiple_choice" and "options" not in fields:
        raise _fail(path, "[fields] options", "missing: a multiple-choice task needs its options (a list field, or "
                    "a list of the option columns)")
    template = _text(path, "[prompt] template", prompt.get("template"), required=True)
    _check_template(path, template, fields)  # type: ignore[arg-type]
    fewshot = _number(path, "[prompt] fewshot", prompt.get("fewshot"), whole=True) or 0
    if fewshot and source.fewshot_split is None:
        raise _fail(path, "[prompt] fewshot", "needs [data] fewshot_split: the split the examples come from")
    answer = _text(path, "[prompt] answer", prompt.get("answer"))
    if answer is not None:
        if not fewshot:
            raise _fail(path, "[prompt] answer", "is the few-shot examples' reply: it needs [prompt] fewshot")
        _check_template(path, answer, fields, "[prompt] answer", also=("answer",))  # type: ignore[arg-type]
    max_tokens = _number(path, "[prompt] max_tokens", prompt.get("max_tokens"), minimum=1, whole=True) or 256
    _check_scoring(path, kind, scoring)
    weights = raw.get("weights") or {}
    if not isinstance(weights, dict):
        raise _fail(path, "weights", "must be a table of category = weight")
    for category, weight in weights.items():
        _number(path, f"[weights] {category}", weight, minimum=0)
    if weights and "category" not in fields:
        raise _fail(path, "[weights]", "needs [fields] category: the record field the weights are for")
    return TaskFile(path=path, name=name, kind=kind, data=source, fields=dict(fields), template=template,  # type: ignore[arg-type]
                    description=str(raw.get("description") or ""), system=_text(path, "[prompt] system", prompt.get("system")),
                    fewshot=fewshot, answer=answer, max_tokens=max_tokens, cue=str(prompt.get("cue", "\nAnswer:")),
                    scoring=dict(scoring), weights={k: float(v) for k, v in weights.items()}, text=text)


def _check_template(path: Path, template: str, fields: Mapping[str, Any], where: str = "[prompt] template",
                    also: Sequence[str] = ()) -> None:
    """The template parses, and every name it uses is a field (or `options`, or one of `also`)."""
    import jinja2
    from jinja2 import meta

    try:
        names = meta.find_undeclared_variables(jinja2.Environment().parse(template))
    except jinja2.TemplateSyntaxError as err:
        raise _fail(path, where, f"not a valid template (line {err.lineno}: {err.message})") from None
    known = set(fields) - {"id", "answer", "category"} | set(also)
    for name in sorted(names - known):
        raise _fail(path, where, f"uses {{{{ {name} }}}}, which no [fields] key names (fields: "
                    f"{', '.join(sorted(known))})")


def _check_scoring(path: Path, kind: str, scoring: Mapping[str, Any]) -> None:
    allowed = {"multiple_choice": ("method",), "numeric": ("tolerance", "scale", "percent"), "span": ("match",),
               "code": ("tolerance",), "open": ("rubric", "threshold")}[kind]
    for key in scoring:
        if key not in allowed:
            raise _fail(path, f"[scoring] {key}", f"does not apply to kind {kind!r} (it takes: {', '.join(allowed)})")
    if "method" in scoring and scoring["method"] not in MC_METHODS:
        raise _fail(path, "[scoring] method", f"{scoring['method']!r} is not one of {', '.join(MC_METHODS)}")
    if "match" in scoring and scoring["match"] not in SPAN_MATCH:
        raise _fail(path, "[scoring] match", f"{scoring['match']!r} is not one of {', '.join(SPAN_MATCH)}")
    if "tolerance" in scoring:
        tolerance = _number(path, "[scoring] tolerance", scoring["tolerance"])
        if tolerance >= 1:
            raise _fail(path, "[scoring] tolerance", f"a relative tolerance below 1 (0.01 = 1%), not {tolerance!r}")
    if "scale" in scoring and scoring["scale"] not in ("", "thousand", "million", "billion", "trillion", "percent"):
        raise _fail(path, "[scoring] scale", f"{scoring['scale']!r}: the gold's unit is one of thousand, million, "
                    "billion, trillion, percent")
    if "percent" in scoring and not isinstance(scoring["percent"], bool):
        raise _fail(path, "[scoring] percent", "must be true or false")
    if kind == "open":
        _text(path, "[scoring] rubric", scoring.get("rubric"), required=True)
        threshold = _number(path, "[scoring] threshold", scoring.get("threshold"), minimum=1, whole=True)
        if threshold is not None and threshold > 5:
            raise _fail(path, "[scoring] threshold", "grades run 1 to 5: a threshold from 1 to 5")
