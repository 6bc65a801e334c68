"""Task options as the CLI passes them (`-o KEY=VALUE`, strings or JSON values) -> a frozen options dataclass.

Every benchmark task declares its options as a frozen dataclass (the task's part of the run key) and
parses them the same way:

    settings = parse_task_options(FinKnowOptions, options, "bizbench/finknow",
                                  choices={"method": METHODS, "source": SOURCES})

An unknown option is an error that lists the known ones; None means "not given" (the field's default);
values are coerced to the field's annotation (int, float, str, bool, tuple from a comma list); a value
outside its allowed choices is an error that lists them. Checks that involve several options stay in
the task.
"""

from __future__ import annotations

import dataclasses
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
        raise ValueError(f"{task}: unknown option(s) {unknown}; known: {sorted(known)}")
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

    choices: allowed values per field, checked in this order after coercion (defaults are checked too).
    exclude: fields this task does not take (an error when given).
    at_least_one: integer fields that must be >= 1 when set.
    """
    hints = get_type_hints(options_type)
    known = [f.name for f in dataclasses.fields(options_type) if f.name not in exclude]  # type: ignore[arg-type]
    values = {name: _coerce(value, hints[name], task, name)
              for name, value in given_options(options, known, task).items()}
    parsed = options_type(**values)
    for name, allowed in (choices or {}).items():
        check_choice(task, name, getattr(parsed, name), allowed)
    too_small = [name for name in at_least_one if getattr(parsed, name) is not None and getattr(parsed, name) < 1]
    if too_small:
        names = " and ".join([", ".join(too_small[:-1]), too_small[-1]] if len(too_small) > 1 else too_small)
        raise ValueError(f"{task}: {names} must be at least 1")
    return parsed
