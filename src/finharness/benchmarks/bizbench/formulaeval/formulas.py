"""The FormulaEval formulas: stubs cut from the reference source, programs assembled from completions,
and the comparison with the reference on seeded inputs.

A formula is a standalone function (standalone.py) or a method of a statement class (statements.py).
- stub: `import math` (and `from dataclasses import dataclass`), then the function's signature and
  docstring -- for a method, the class with its fields and the method's signature and docstring.
- program (what runs in the sandbox): `import math`, the class with its fields only (methods), the
  completion, and for methods a caller `__formulaeval_case__(fields, args)`. A completion may be
  the whole function, the whole method, the class with the method (its methods are attached to the
  fields-only class), or only the body (placed under the stub's signature).
- check: the program is called on COUNT seeded cases in one sandbox job; the completion is correct iff
  every value is a number within the formula's tolerance of the reference (math.isclose).
"""

from __future__ import annotations

import ast
import hashlib
import inspect
import json
import math
import random
import textwrap
from dataclasses import dataclass
from typing import Any, Callable

from . import standalone, statements
from .inputs import METHOD_ARGS, STANDALONE, STATEMENT_FIELDS, Case

CASE_FUNCTION = "__formulaeval_case__"
"""The caller appended to method programs: builds the object from its fields and calls the method."""

PROGRAM_IMPORTS = "import math\n"
CLASS_IMPORTS = "import math\nfrom dataclasses import dataclass\n"


def _function_node(source: str, name: str) -> ast.FunctionDef:
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return node
    raise LookupError(name)


def _signature_and_docstring(source: str, name: str) -> str:
    """The lines of `def name(...)` through the end of its docstring."""
    node = _function_node(source, name)
    docstring = node.body[0]
    if not (isinstance(docstring, ast.Expr) and isinstance(docstring.value, ast.Constant)):
        raise ValueError(f"reference {name} has no docstring")
    lines = source.splitlines()
    return "\n".join(lines[node.lineno - 1: docstring.end_lineno]) + "\n"


def _fields_only(cls: type) -> str:
    """The class source up to its first method: decorator, docstring and fields."""
    source = textwrap.dedent(inspect.getsource(cls))
    tree = ast.parse(source).body[0]
    assert isinstance(tree, ast.ClassDef)
    first = next(node for node in tree.body if isinstance(node, ast.FunctionDef))
    lines = source.splitlines()[: first.lineno - 1 - len(first.decorator_list)]
    return "\n".join(lines).rstrip() + "\n"


@dataclass(frozen=True)
class Formula:
    """One FormulaEval item: a reference, its stub, and how to check a completion."""

    name: str
    """'net_present_value' or 'IncomeStatement.ebitda' (the sample id is 'formulaeval/NAME')."""

    reference: Callable[..., Any]
    """The reference implementation."""

    generate: Callable[[random.Random], Case]
    """One seeded case: (fields, args)."""

    owner: type | None = None
    """The statement class of a method; None for a standalone function."""

    rel_tol: float = 1e-6
    """Relative tolerance of the comparison."""

    abs_tol: float = 1e-9
    """Absolute tolerance (for values near zero)."""

    @property
    def function_name(self) -> str:
        return self.reference.__name__

    @property
    def kind(self) -> str:
        return "standalone" if self.owner is None else "method"

    @property
    def group(self) -> str:
        """'standalone' or the class name (the results break down by it)."""
        return "standalone" if self.owner is None else self.owner.__name__

    @property
    def reference_source(self) -> str:
        """The reference function or method, dedented."""
        return textwrap.dedent(inspect.getsource(self.reference))

    def stub(self) -> str:
        """What the model completes."""
        header = _signature_and_docstring(self.reference_source, self.function_name)
        if self.owner is None:
            return PROGRAM_IMPORTS + "\n\n" + header
        return CLASS_IMPORTS + "\n\n" + _fields_only(self.owner) + "\n" + textwrap.indent(header, "    ")

    # --- inputs and expected values ------------------------------------------------------------------

    def cases(self, seed: int = 0, count: int = 100) -> list[Case]:
        """COUNT cases from a generator seeded by (formula name, seed): stable across runs and machines."""
        digest = hashlib.sha256(f"formulaeval:{self.name}:{seed}".encode()).hexdigest()
        rng = random.Random(int(digest[:16], 16))
        return [self.generate(rng) for _ in range(count)]

    def call_reference(self, case: Case) -> Any:
        fields, args = case
        if self.owner is None:
            return self.reference(*args)
        return getattr(self.owner(**fields), self.function_name)(*args)

    def expected(self, cases: list[Case]) -> list[Any]:
        """Reference values, round-tripped through JSON as sandbox values are."""
        return json.loads(json.dumps([self.call_reference(case) for case in cases]))

    def call(self, cases: list[Case]) -> tuple[str, list[list[Any]]]:
        """The sandbox `call` argument: the function to call and one argument list per case."""
        if self.owner is None:
            return self.function_name, [list(args) for _, args in cases]
        return CASE_FUNCTION, [[fields, list(args)] for fields, args in cases]

    def matches(self, got: Any, expected: Any) -> bool:
        if isinstance(got, bool) or not isinstance(got, (int, float)):
            return False
        return math.isclose(float(got), float(expected), rel_tol=self.rel_tol, abs_tol=self.abs_tol)

    # --- programs --------------------------------------------------------------------------------------

    def program(self, completion: str) -> str:
        """The program that runs for a completion (see the module docstring)."""
        code = textwrap.dedent(completion).strip("\n") + "\n"
        if self.owner is None:
            return PROGRAM_IMPORTS + "\n" + self._standalone(code)
        cls = self.owner.__name__
        return (CLASS_IMPORTS + "\n\n" + _fields_only(self.owner) + "\n\n" + self._method(code) + "\n\n"
                f"def {CASE_FUNCTION}(fields, args):\n    return {cls}(**fields).{self.function_name}(*args)\n")

    def _body_under_stub(self, code: str) -> str:
        header = _signature_and_docstring(self.reference_source, self.function_name)
        return header + textwrap.indent(code, "    ")

    def _standalone(self, code: str) -> str:
        try:
            tree = ast.parse(code)
        except SyntaxError:
            tree = None
        if tree is not None and any(isinstance(node, ast.FunctionDef) and node.name == self.function_name
                                    for node in tree.body):
            return code
        if tree is None or not any(isinstance(node, ast.FunctionDef) for node in ast.walk(tree)):
            return self._body_under_stub(code)  # a body (or something that will fail as one)
        return code  # defines other functions only: it runs, and the call fails by name

    def _method(self, code: str) -> str:
        cls, method = self.owner.__name__, self.function_name  # type: ignore[union-attr]
        try:
            tree = ast.parse(code)
        except SyntaxError:
            return code
        lines = code.splitlines()

        def segment(node: ast.AST) -> str:
            start = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])  # type: ignore[attr-defined]
            return textwrap.dedent("\n".join(lines[start - 1: node.end_lineno])) + "\n"  # type: ignore[attr-defined]

        parts, attached = [], []
        for node in tree.body:
            if isinstance(node, ast.ClassDef) and node.name == cls:
                for member in node.body:  # the completion's methods go onto the fields-only class
                    if isinstance(member, ast.FunctionDef):
                        parts.append(segment(member))
                        attached.append(member.name)
            elif isinstance(node, ast.FunctionDef) and node.name == method:
                parts.append(segment(node))
                attached.append(method)
            elif not (isinstance(node, ast.ImportFrom) and node.module == "dataclasses"):
                parts.append(segment(node))
        if method not in attached:
            if any(isinstance(node, (ast.FunctionDef, ast.ClassDef)) for node in tree.body):
                return code  # something else was written: it runs, and the call fails
            return self._body_under_stub(code) + f"\n{cls}.{method} = {method}\n"
        return "\n".join(parts) + "\n" + "".join(f"{cls}.{name} = {name}\n" for name in dict.fromkeys(attached))


def _standalone_formulas() -> list[Formula]:
    formulas = []
    for name, generate in STANDALONE.items():
        tolerance = {"rel_tol": 1e-4, "abs_tol": 1e-6} if name == "internal_rate_of_return" else {}
        formulas.append(Formula(name=name, reference=getattr(standalone, name), generate=generate, **tolerance))
    return formulas


def _method_formulas() -> list[Formula]:
    formulas = []
    for class_name, fields_of in STATEMENT_FIELDS.items():
        owner = getattr(statements, class_name)
        for method_name, method in vars(owner).items():
            if method_name.startswith("_") or not inspect.isfunction(method):
                continue
            full = f"{class_name}.{method_name}"
            args_of = METHOD_ARGS.get(full, lambda rng, fields: [])

            def generate(rng: random.Random, fields_of=fields_of, args_of=args_of) -> Case:
                fields = fields_of(rng)
                return fields, args_of(rng, fields)

            formulas.append(Formula(name=full, reference=method, generate=generate, owner=owner))
    return formulas


FORMULAS: tuple[Formula, ...] = tuple(_standalone_formulas() + _method_formulas())
"""Every FormulaEval formula, standalone ones first, then methods in class and definition order."""


def formula(name: str) -> Formula:
    for item in FORMULAS:
        if item.name == name:
            return item
    raise KeyError(f"unknown formula {name!r}")
