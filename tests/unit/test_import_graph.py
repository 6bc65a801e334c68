"""Imports go one way: no import circle inside src/finharness (issue 20, item 2), and no import from a floor
below to a floor above (issue 28, item 6).

The graph is read from the source with `ast`, not from what Python happens to import: every
`import finharness.x` and `from ... import` (absolute or relative) of a finharness module is an
edge, and a `from pkg import name` where `name` is a submodule is an edge to the submodule. Imports
inside functions count too: an import made late to dodge a circle is still a circle to a reader,
to refactoring tools and to type checkers, and one reordering away from an ImportError. (When this
test was written no circle existed through function-level imports either, so none is exempt.)
Imports by string (`importlib.import_module` in benchmarks/registry.py, util.lazy_exports) are not
edges: they name their target only when called.

The command line is the top of the graph: `finharness.cli` mounts every command group, so
nothing but the entry point (`python -m finharness`) imports it; what the groups share is in
`finharness.cli_common`.

Floors, bottom to top (FLOORS; docs/index.md says each): leaf utilities (with cli_common, the command modules'
toolkit), core, shared services, the benchmark machinery (declaration, registry, mc_methods, from_data), the report
toolkit a benchmark draws its section with, the benchmarks, the report's assembly with ui, suite and api, the
command line (with commands/). A module may import its own floor or one below. No module is put on a floor by its
role: a benchmark's cli.py and report.py sit on the benchmarks floor and import only what is below it.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path

PACKAGE_ROOT = Path(__file__).resolve().parents[2] / "src" / "finharness"


@dataclass(frozen=True)
class Edge:
    source: str
    target: str
    line: int
    in_function: bool

    def __str__(self) -> str:
        where = " (inside a function)" if self.in_function else ""
        return f"{self.source} -> {self.target}  line {self.line}{where}"


def package_modules(root: Path) -> dict[str, tuple[Path, bool]]:
    """Dotted module name -> (file, is a package) for every .py under `root` (a package folder)."""
    modules = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        if is_package:
            parts = parts[:-1]
        modules[".".join(parts)] = (path, is_package)
    return modules


def import_edges(root: Path) -> list[Edge]:
    """Every import of a module of the package under `root` by another (or the same) module of it."""
    modules = package_modules(root)
    package = root.name
    edges: list[Edge] = []

    def known(name: str | None) -> str | None:
        """The module `name` names, or the innermost package holding it (`pkg.mod.attr` -> `pkg.mod`)."""
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    for module, (path, is_package) in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))

        def add(target: str | None, node: ast.stmt, in_function: bool) -> None:
            if target is not None and (target == package or target.startswith(package + ".")):
                resolved = known(target)
                if resolved is not None:
                    edges.append(Edge(module, resolved, node.lineno, in_function))

        def visit(node: ast.AST, in_function: bool) -> None:
            for child in ast.iter_child_nodes(node):
                inside = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
                if isinstance(child, ast.Import):
                    for alias in child.names:
                        add(alias.name, child, inside)
                elif isinstance(child, ast.ImportFrom):
                    if child.level:
                        base = module.split(".") if is_package else module.split(".")[:-1]
                        base = base[:len(base) - (child.level - 1)]
                        origin = ".".join(base + ([child.module] if child.module else []))
                    else:
                        origin = child.module or ""
                    submodules = [f"{origin}.{a.name}" for a in child.names if f"{origin}.{a.name}" in modules]
                    for submodule in submodules:
                        add(submodule, child, inside)
                    if len(submodules) < len(child.names):  # names defined in `origin` itself
                        add(origin, child, inside)
                visit(child, inside)

        visit(tree, False)
    return edges


def import_cycles(edges: list[Edge]) -> list[list[str]]:
    """The strongly connected components with more than one module, and modules importing themselves."""
    graph: dict[str, set[str]] = {}
    for e in edges:
        graph.setdefault(e.source, set()).add(e.target)
        graph.setdefault(e.target, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []
    for start in sorted(graph):  # Tarjan's algorithm, iteratively (no recursion limit)
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, successors = work[-1]
            for succ in successors:
                if succ not in index:
                    index[succ] = low[succ] = len(index)
                    stack.append(succ)
                    on_stack.add(succ)
                    work.append((succ, iter(sorted(graph[succ]))))
                    break
                if succ in on_stack:
                    low[node] = min(low[node], index[succ])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1 or node in graph[node]:
                        components.append(sorted(component))
    return sorted(components)


FLOORS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("leaf utilities", ("finharness.stats", "finharness.stats.*", "finharness.extract", "finharness.extract.*",
                        "finharness.data", "finharness.data.*", "finharness.util", "finharness.redact",
                        "finharness.eta", "finharness.cli_common")),
    ("core", ("finharness.core", "finharness.core.*", "finharness.plugins")),
    ("shared services", ("finharness", *(f"finharness.{name}{tail}" for name in
                                         ("agents", "backends", "contamination", "markets", "retrieval", "judges", "rating",
                                          "sandbox")
                                         for tail in ("", ".*")))),
    ("benchmark machinery", ("finharness.benchmarks", "finharness.benchmarks.from_data",
                             "finharness.benchmarks.from_data.*", *(f"finharness.benchmarks.{name}" for name in
                                                                   ("declaration", "registry", "mc_methods")))),
    ("report toolkit", tuple(f"finharness.report.{name}" for name in
                             ("markup", "svg", "runs", "sections", "pairwise", "leaderboard"))),
    ("benchmarks", ("finharness.benchmarks.*",)),
    ("report and ui", ("finharness.report", "finharness.report.*", "finharness.ui", "finharness.ui.*",
                       "finharness.suite", "finharness.suite.*", "finharness.api")),
    ("command line", ("finharness.cli", "finharness.cli_plugins", "finharness.__main__", "finharness.doctor",
                      "finharness.commands", "finharness.commands.*")),
)
"""(floor, module patterns), bottom first; a module sits on the floor of its first matching pattern, wherever it
is: no module is put on a floor by what it is (a command module, a report section) rather than by its package."""


def floor_of(module: str, floors=FLOORS) -> int | None:
    """The index in `floors` of `module`'s floor (None: no pattern matches it)."""
    return next((i for i, (_, patterns) in enumerate(floors) if any(fnmatchcase(module, p) for p in patterns)), None)


def upward_imports(edges: list[Edge], floors=FLOORS) -> list[str]:
    """Each import of a module on a floor above the importer's, said with both floors."""
    out = []
    for e in edges:
        low, high = floor_of(e.source, floors), floor_of(e.target, floors)
        if low is not None and high is not None and high > low:
            out.append(f"{e}  ({floors[low][0]} imports {floors[high][0]})")
    return out


def describe(cycles: list[list[str]], edges: list[Edge]) -> str:
    lines = []
    for component in cycles:
        members = set(component)
        lines.append(f"import circle of {len(component)} module(s): {', '.join(component)}")
        lines += [f"    {e}" for e in edges if e.source in members and e.target in members]
    return "\n".join(lines)


def test_no_import_circle_in_the_package():
    edges = import_edges(PACKAGE_ROOT)
    assert len({e.source for e in edges}) > 100  # the walk saw the package
    cycles = import_cycles(edges)
    assert not cycles, "\n" + describe(cycles, edges)


def test_every_module_sits_on_a_floor():
    modules = {e.source for e in import_edges(PACKAGE_ROOT)} | set(package_modules(PACKAGE_ROOT))
    assert sorted(m for m in modules if floor_of(m) is None) == []


def test_no_import_goes_up_a_floor():
    upward = upward_imports(import_edges(PACKAGE_ROOT))
    assert not upward, "imports from a floor below to a floor above:\n" + "\n".join(upward)


def test_only_the_entry_point_imports_the_command_line():
    importers = sorted({e.source for e in import_edges(PACKAGE_ROOT) if e.target == "finharness.cli"})
    assert importers == ["finharness.__main__"]


def _write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root / "pkg"


def test_the_walk_finds_a_planted_circle_in_any_import_form(tmp_path: Path):
    package = _write(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/top.py": "import json\nfrom .sub import helpers\n",            # from PKG import SUBMODULE
        "pkg/sub/__init__.py": "",
        "pkg/sub/helpers.py": "from ..util import thing\n",               # relative, two levels
        "pkg/util.py": "def thing():\n    import pkg.top\n",              # absolute, inside a function
        "pkg/alone.py": "from pkg import util\nfrom . import alone\n",   # a module importing itself
        "pkg/clean.py": "from pkg.util import thing\nfrom typing import Any\n",
    })
    edges = import_edges(package)
    assert {(e.source, e.target) for e in edges} == {
        ("pkg.top", "pkg.sub.helpers"), ("pkg.sub.helpers", "pkg.util"), ("pkg.util", "pkg.top"),
        ("pkg.alone", "pkg.util"), ("pkg.alone", "pkg.alone"), ("pkg.clean", "pkg.util")}
    assert [e for e in edges if e.source == "pkg.util"][0].in_function
    cycles = import_cycles(edges)
    assert cycles == [["pkg.alone"], ["pkg.sub.helpers", "pkg.top", "pkg.util"]]
    message = describe(cycles, edges)
    assert "pkg.util -> pkg.top  line 2 (inside a function)" in message


def test_a_package_whose_names_are_not_submodules_is_the_edge(tmp_path: Path):
    package = _write(tmp_path, {
        "pkg/__init__.py": "from .core import Thing\n",
        "pkg/core/__init__.py": "from .types import Thing\n",
        "pkg/core/types.py": "class Thing: ...\n",
        "pkg/user.py": "from .core import Thing, types\n",  # both: the package's own name and a submodule
    })
    edges = {(e.source, e.target) for e in import_edges(package)}
    assert edges == {("pkg", "pkg.core"), ("pkg.core", "pkg.core.types"), ("pkg.user", "pkg.core"),
                     ("pkg.user", "pkg.core.types")}
    assert import_cycles(import_edges(package)) == []


def test_the_floor_check_finds_a_planted_upward_import(tmp_path: Path):
    package = _write(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/low/__init__.py": "",
        "pkg/low/helpers.py": "def f():\n    from ..high.tool import run\n",   # up, inside a function
        "pkg/low/cli.py": "from ..high import tool\n",                           # a command module: no floor of its own
        "pkg/high/__init__.py": "",
        "pkg/high/tool.py": "from ..low.helpers import f\n",                     # down: fine
        "pkg/high/reads_commands.py": "from ..low import cli\n",                 # down: fine
    })
    floors = (("low", ("pkg.low", "pkg.low.*")), ("high", ("pkg", "pkg.high", "pkg.high.*")))
    found = upward_imports(import_edges(package), floors)
    assert sorted(found) == ["pkg.low.cli -> pkg.high.tool  line 1  (low imports high)",
                             "pkg.low.helpers -> pkg.high.tool  line 2 (inside a function)  (low imports high)"]
