"""Where tasks, backends, commands and report sections come from: built in, an installed package's entry
point, or (tasks) a Python file.

One door for all of them. benchmarks/registry.py (tasks), backends/__init__.py (backends), cli_plugins.py (command
groups) and report/sections.py (report sections) name their built-ins as `name -> "module:attr"` (a benchmark's
from its declaration, benchmarks/declaration.py, where an installed benchmark declares its own under the group
`finharness.benchmarks`); an installed distribution adds more under the entry-point groups `finharness.tasks`, `finharness.backends`,
`finharness.commands` and `finharness.report_sections` (same `module:attr` values); a task may also be given
as `path/to/file.py:ClassName`, loaded from that file. Each found thing is a `Plugin` carrying its
`Source`, which `finharness list` shows. Nothing is imported until it is used (`Plugin.load`), so
start-up stays fast and a broken plugin only fails when it is asked for.

A built-in name always wins: an entry point with the same name is listed as shadowed, never used.
Two distributions giving the same entry-point name are an error when the name is used (say which).
"""

from __future__ import annotations

import hashlib
import importlib
import re
import sys
import traceback
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from types import ModuleType
from typing import Any, Mapping, Sequence

from .data.registry import sha256_file

TASK_GROUP = "finharness.tasks"
BACKEND_GROUP = "finharness.backends"
COMMAND_GROUP = "finharness.commands"
"""Command groups and commands of `finharness` (cli_plugins.py says what a name and its value mean)."""
REPORT_SECTION_GROUP = "finharness.report_sections"
"""Sections of the HTML report, each a report.sections.ReportSection."""


class PluginError(ValueError):
    """A plug-in that cannot be found or loaded; the message says which file, entry point or name."""


@dataclass(frozen=True)
class Source:
    """Where a task or backend comes from."""

    kind: str
    """'built-in', 'entry point' or 'file'."""

    detail: str = ""
    """The distribution (and version) of an entry point; the path of a file."""

    def __str__(self) -> str:
        if self.kind == "file":
            return self.detail
        return f"{self.kind} ({self.detail})" if self.detail else self.kind


BUILT_IN = Source("built-in")


@dataclass(frozen=True)
class Plugin:
    """A named plug-in (a task class, a backend factory, a command, a report section), not imported yet."""

    name: str
    target: str
    """'module:attr' (built-in, entry point) or 'FILE.py:attr' (file)."""
    source: Source
    distribution: str | None = None
    """The distribution of an entry point (its Name in METADATA)."""

    def load(self) -> Any:
        """The object, imported now. An entry point whose import fails is a PluginError
        naming it; a built-in's failure is the harness's own bug and raised as it is."""
        if self.source == BUILT_IN:
            return load_target(self.target)
        try:
            return load_target(self.target)
        except PluginError:
            raise
        except Exception as err:  # an installed plugin whose import fails: say which one, keep its cause
            raise PluginError(f"{self.name!r} ({self.source}, {self.target}) cannot be loaded: "
                              f"{type(err).__name__}: {err}") from err


@dataclass(frozen=True)
class Resolved:
    """A spec resolved: what it names, the loaded object, and what identifies code the harness does not ship."""

    plugin: Plugin
    obj: Any
    file_sha256: str | None = None
    """The sha256 of a file's bytes (hashed as it was loaded); None for a built-in or an entry point."""

    @cached_property
    def fingerprint(self) -> Mapping[str, Any] | None:
        """None for a built-in (the harness's own source fingerprint covers it); for a file its sha256, for an
        entry point its distribution, version and the sha256 of the module defining the object. Computed on
        first use: only tasks put it in their config, a backend never asks for it."""
        if self.plugin.source.kind == "file":
            return {"file_sha256": self.file_sha256, "attr": self.plugin.name}
        if self.plugin.source == BUILT_IN:
            return None
        return entry_point_fingerprint(self.plugin, self.obj)


def resolve(spec: str, builtins: Mapping[str, str], group: str, *, base: type | None = None,
            files: bool = False, entry_points: Sequence[Plugin] | None = None) -> Resolved | None:
    """The one door: `spec` as a built-in name, an entry-point name of `group`, or (with `files`) a
    `FILE.py[:ATTR]`; None when no name matches. `base`: the object must be a subclass of it.
    `entry_points`: those of `group` when the caller has already read them (see find)."""
    sha = None
    if files and is_file_spec(spec):
        path, attr = split_file_spec(spec)
        obj, _, sha = load_file(path, attr, base)
        attr = attr or obj.__name__
        plugin = Plugin(attr, f"{path}:{attr}", Source("file", str(path)))
    else:
        found = find(spec, builtins, group, entry_points)
        if found is None:
            return None
        plugin, obj = found, found.load()
    if base is not None and not (isinstance(obj, type) and issubclass(obj, base)):
        where = plugin.target if plugin.source.kind == "file" else f"{plugin.target} ({plugin.source})"
        raise PluginError(f"{where} is not a subclass of {base.__module__}.{base.__name__}")
    return Resolved(plugin, obj, sha)


def entry_point_fingerprint(plugin: Plugin, obj: Any) -> dict[str, Any]:
    """An entry point's distribution and version, and the sha256 of the source file defining `obj`."""
    out: dict[str, Any] = {"entry_point": plugin.target, "distribution": plugin.source.detail}
    module = sys.modules.get(getattr(obj, "__module__", "") or "")
    source = getattr(module, "__file__", None)
    if source and Path(source).is_file():
        out["module_sha256"] = sha256_file(source)
    return out


def load_target(target: str) -> Any:
    """The object `module:attr` names (attr may be dotted)."""
    module_name, _, attr = target.partition(":")
    obj: Any = importlib.import_module(module_name)
    for part in filter(None, attr.split(".")):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise PluginError(f"{target}: module {module_name!r} has no attribute {attr!r}") from None
    return obj


def entry_point_plugins(group: str) -> list[Plugin]:
    """Every entry point of `group` in the installed distributions, by name (duplicates kept)."""
    from importlib import metadata  # here: importing it costs start-up that a built-in name never needs

    found = []
    for ep in metadata.entry_points(group=group):
        dist = getattr(ep, "dist", None)
        dist_name = dist.metadata["Name"] if dist is not None else None
        detail = f"{dist_name} {dist.version}" if dist is not None else "unknown distribution"
        found.append(Plugin(ep.name, ep.value, Source("entry point", detail), dist_name))
    return sorted(found, key=lambda p: (p.name, p.distribution or ""))


def catalogue(builtins: Mapping[str, str], group: str, extra: Sequence[Plugin] = ()) -> list[tuple[Plugin, str | None]]:
    """Every plugin of a kind: the built-ins, then the entry points of `group` and `extra` (those an installed
    benchmark declares); each with why it is not used (None when it is what its name resolves to)."""
    out: list[tuple[Plugin, str | None]] = [(Plugin(name, target, BUILT_IN), None) for name, target in builtins.items()]
    eps = [*entry_point_plugins(group), *extra]
    for p in eps:
        if p.name in builtins:
            out.append((p, "shadowed by the built-in of the same name"))
        elif sum(q.name == p.name for q in eps) > 1:
            out.append((p, "ambiguous: several distributions give this name"))
        else:
            out.append((p, None))
    return sorted(out, key=lambda item: (item[0].source.kind != "built-in", item[0].name))


def find(name: str, builtins: Mapping[str, str], group: str,
         entry_points: Sequence[Plugin] | None = None) -> Plugin | None:
    """What `name` resolves to: a built-in (entry points are not even read), else the one entry point of
    `group` with that name (`entry_points`, else read now); None when there is none. Two distributions with
    the name are a PluginError."""
    if name in builtins:
        return Plugin(name, builtins[name], BUILT_IN)
    if entry_points is None:
        entry_points = entry_point_plugins(group)
    hits = [p for p in entry_points if p.name == name]
    if len(hits) > 1:
        raise PluginError(f"{name!r} is given by several installed distributions under entry-point group "
                          f"{group!r}: {', '.join(str(p.source) for p in hits)}; uninstall all but one")
    return hits[0] if hits else None


# --- tasks from a file ------------------------------------------------------------------------------------

def is_file_spec(spec: str) -> bool:
    """`path/to/file.py:ClassName` or `path/to/file.py` (not a registered name: those never end in .py)."""
    return split_file_spec(spec)[0].suffix == ".py"


def split_file_spec(spec: str) -> tuple[Path, str | None]:
    """(file, attribute or None) of `FILE.py:ATTR` / `FILE.py`; the last ':' splits (a Windows drive keeps its own)."""
    if spec.endswith(".py"):
        return Path(spec), None
    head, sep, attr = spec.rpartition(":")
    if sep and head.endswith(".py") and attr:
        return Path(head), attr
    return Path(spec), None


def load_file(path: Path, attr: str | None, base: type | None = None) -> tuple[Any, ModuleType, str]:
    """(object, module, sha256 of the file) for `attr` of the Python file `path`, run as a module of its own.

    The module is named after the file's content (`finharness_file_<stem>_<sha12>`), so the same file
    loads once per process and an edited one loads anew. The code run is the bytes hashed. With `attr`
    None, the file must define exactly one concrete subclass of `base`. Errors name the file: a missing
    file or class, or the file's own exception with its line."""
    if not path.is_file():
        raise PluginError(f"{path}: no such file")
    data = path.read_bytes()
    sha = hashlib.sha256(data).hexdigest()
    module_name = f"finharness_file_{re.sub(r'[^0-9A-Za-z_]', '_', path.stem)}_{sha[:12]}"
    module = sys.modules.get(module_name)
    if module is None:
        module = ModuleType(module_name)
        module.__file__ = str(path)
        sys.modules[module_name] = module  # before running it: dataclasses and pickle look it up
        try:
            exec(compile(data, str(path), "exec"), module.__dict__)
        except SyntaxError as err:
            del sys.modules[module_name]
            raise PluginError(f"{path}:{err.lineno}: {type(err).__name__}: {err.msg}") from None
        except Exception as err:
            del sys.modules[module_name]
            frames = [f for f in traceback.extract_tb(err.__traceback__) if f.filename == str(path)]
            where = f"{path}:{frames[-1].lineno}" if frames else str(path)
            raise PluginError(f"{where}: {type(err).__name__} while loading the file: {err}") from err
    candidates = sorted(name for name, obj in vars(module).items()
                        if isinstance(obj, type) and base is not None and issubclass(obj, base)
                        and obj.__module__ == module_name and not getattr(obj, "__abstractmethods__", None))
    if attr is None:
        if len(candidates) != 1:
            kind = base.__name__ if base is not None else "class"
            found = f"it defines {', '.join(candidates)}" if candidates else f"it defines no {kind} subclass"
            raise PluginError(f"{path}: say which class to use, as {path}:CLASS ({found})")
        attr = candidates[0]
    if not hasattr(module, attr):
        listed = f"; its {base.__name__} classes: {', '.join(candidates)}" if base is not None and candidates else ""
        raise PluginError(f"{path}: no {attr!r} in this file{listed}")
    return getattr(module, attr), module, sha
