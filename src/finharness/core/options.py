"""Task options: declared once as a frozen dataclass, parsed from the CLI's `-o KEY=VALUE` (strings or JSON values).

Every task declares its options as a frozen dataclass (`Task.Options`), a docstring under each field,
its allowed values in the class variable `CHOICES` and the integer fields that must be >= 1 in
`AT_LEAST_ONE`. That one declaration is what the registry parses `-o` into (parse_task_options, once per
run), what `finharness list TASK` and the docs tables show (describe_options), and, as the task's
config(), part of the run key:

    @dataclass(frozen=True)
    class FinKnowOptions:
        CHOICES: ClassVar = {"method": METHODS}

        method: str = "ll"
        '''ll (the paper) or gen.'''

An unknown option is an error that lists the known ones (and the closest, for a typo); None means "not
given" (the field's default); values are coerced to the field's annotation (int, float, str, bool, tuple
from a comma list); a value outside its allowed choices is an error that lists them. Checks that involve
several options stay in the declaration's own `parse` classmethod. A task that declares no Options takes
no options: nothing reads a task's `__init__` signature.
"""

from __future__ import annotations

import ast
import dataclasses
import difflib
import inspect
import textwrap
import types
from collections.abc import Collection, Mapping, Sequence
from typing import Any, TypeVar, Union, get_args, get_origin, get_type_hints

T = TypeVar("T")

_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


def given_options(options: Mapping[str, Any], known: Collection[str], task: str) -> dict[str, Any]:
    """The options that were given (None = not given); an unknown name is a ValueError listing the known ones."""
    unknown = sorted(set(options) - set(known))
    if unknown:
        close = {name: difflib.get_close_matches(name, list(known), n=1) for name in unknown}
        hints = "; ".join(f"did you mean {found[0]!r} for {name!r}?" for name, found in close.items() if found)
        raise ValueError(f"{task}: unknown option(s) {unknown}; known: {sorted(known)}"
                         + (f" ({hints})" if hints else ""))
    return {name: value for name, value in options.items() if value is not None}


def check_choice(task: str, name: str, value: Any, allowed: Sequence[Any]) -> None:
    """Raise a ValueError naming the allowed values when `value` is not one of them."""
    if value not in allowed:
        raise ValueError(f"{task}: {name}={value!r} is not one of {list(allowed)}")


def comma_tuple(value: Any) -> tuple:
    """'a, b,c' -> ('a', 'b', 'c') (empty items dropped); a list or tuple is kept as a tuple."""
    if isinstance(value, str):
        return tuple(item.strip() for item in value.split(",") if item.strip())
    return tuple(value)


def parse_bool(value: Any, task: str, name: str) -> bool:
    """True/False, or one of 1/true/yes/on, 0/false/no/off in any case."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ValueError(f"{task}: {name}={value!r} is not true/false")


def _coerce(value: Any, hint: Any, task: str, name: str) -> Any:
    if get_origin(hint) in (Union, types.UnionType):  # `int | None`: None never gets here (not given)
        concrete = [arg for arg in get_args(hint) if arg is not type(None)]
        if len(concrete) != 1:
            return value
        hint = concrete[0]
    if hint is bool:
        return parse_bool(value, task, name)
    if hint in (int, float):
        try:
            return hint(value)
        except (TypeError, ValueError):
            raise ValueError(f"{task}: {name}={value!r} is not a{'n integer' if hint is int else ' number'}") from None
    if hint is str:
        return str(value)
    if hint is tuple or get_origin(hint) is tuple:
        return comma_tuple(value)
    return value


def parse_task_options(options_type: type[T], options: Mapping[str, Any], task: str, *,
                       choices: Mapping[str, Sequence[Any]] | None = None, exclude: Collection[str] = (),
                       at_least_one: Sequence[str] = ()) -> T:
    """Build `options_type` (a dataclass) from CLI-style options of the task named `task`.

    choices: allowed values per field, checked in this order after coercion (defaults are checked too);
    default: the declaration's CHOICES. exclude: fields this task does not take (an error when given).
    at_least_one: integer fields that must be >= 1 when set; default: the declaration's AT_LEAST_ONE.
    """
    if choices is None:
        choices = getattr(options_type, "CHOICES", None)
    if not at_least_one:
        at_least_one = getattr(options_type, "AT_LEAST_ONE", ())
    hints = get_type_hints(options_type)
    known = [f.name for f in dataclasses.fields(options_type) if f.name not in exclude]  # type: ignore[arg-type]
    values = {name: _coerce(value, hints[name], task, name)
              for name, value in given_options(options, known, task).items()}
    parsed = options_type(**values)
    for name, allowed in (choices or {}).items():
        value = getattr(parsed, name)
        for item in value if isinstance(value, tuple) else (value,):  # a tuple option: each of its items
            check_choice(task, name, item, allowed)
    too_small = [name for name in at_least_one if getattr(parsed, name) is not None and getattr(parsed, name) < 1]
    if too_small:
        names = " and ".join([", ".join(too_small[:-1]), too_small[-1]] if len(too_small) > 1 else too_small)
        raise ValueError(f"{task}: {names} must be at least 1")
    return parsed


@dataclasses.dataclass(frozen=True)
class OptionInfo:
    """One declared option, as `finharness list TASK` and the docs tables show it."""

    name: str
    """The `-o NAME=VALUE` key."""

    type: str
    """Its type as written in the declaration ('int', 'str | None', 'tuple[str, ...]')."""

    default: Any
    """The value when not given."""

    choices: tuple[Any, ...] | None
    """Its allowed values (None: any value of its type)."""

    help: str
    """The field's docstring."""


def option_docs(options_type: type) -> dict[str, str]:
    """The docstring under each field of a dataclass (and of the dataclasses it derives from), read from its
    source: `name: type = default` followed by a string. A class whose source cannot be read has none."""
    docs: dict[str, str] = {}
    for klass in reversed(options_type.__mro__):
        try:
            tree = ast.parse(textwrap.dedent(inspect.getsource(klass)))
        except (OSError, TypeError, SyntaxError):
            continue
        body = tree.body[0].body if tree.body and isinstance(tree.body[0], ast.ClassDef) else []
        for field_node, doc_node in zip(body, body[1:]):
            if (isinstance(field_node, ast.AnnAssign) and isinstance(field_node.target, ast.Name)
                    and isinstance(doc_node, ast.Expr) and isinstance(doc_node.value, ast.Constant)
                    and isinstance(doc_node.value.value, str)):
                docs[field_node.target.id] = " ".join(inspect.cleandoc(doc_node.value.value).split())
    return docs


def _type_name(hint: Any) -> str:
    return hint.__name__ if isinstance(hint, type) else str(hint).replace("typing.", "")


def describe_options(options_type: type, *, exclude: Collection[str] = ()) -> list[OptionInfo]:
    """Every option the declaration takes, in declaration order, with its type, default, choices and help."""
    hints = get_type_hints(options_type)
    docs = option_docs(options_type)
    choices = getattr(options_type, "CHOICES", None) or {}
    out = []
    for f in dataclasses.fields(options_type):
        if f.name in exclude:
            continue
        if f.default is not dataclasses.MISSING:
            default = f.default
        elif f.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
            default = f.default_factory()  # type: ignore[misc]
        else:
            default = None
        allowed = choices.get(f.name)
        out.append(OptionInfo(f.name, _type_name(hints.get(f.name, Any)), default,
                              tuple(allowed) if allowed is not None else None, docs.get(f.name, "")))
    return out


def show_default(value: Any) -> str:
    """An option's default as people read it: a tuple as its comma list, None as a dash."""
    if isinstance(value, tuple):
        return ",".join(map(str, value)) or "(empty)"
    return "—" if value is None else str(value)


def options_markdown(infos: Sequence[OptionInfo]) -> str:
    """Options as the markdown table the docs pages carry between `<!-- options: TASK -->` and `<!-- /options -->`
    (tools/docs_options.py writes them; tests/unit/test_docs_options.py checks them against the declarations)."""
    rows = ["| option | type | default | allowed | what it does |", "|---|---|---|---|---|"]
    for o in infos:
        allowed = "any" if o.choices is None else ", ".join(f"`{c}`" for c in o.choices)
        kind = o.type.replace("|", "or")
        rows.append(f"| `{o.name}` | {kind} | `{show_default(o.default)}` | {allowed} | {o.help.replace('|', '/')} |")
    return "\n".join(rows)
