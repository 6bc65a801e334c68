"""Tools an agent episode can use: arithmetic, Python in the sandbox, and reading a set of paged documents.

Every tool is deterministic for the same arguments and data (a resumed episode re-runs the tools and must send
the model the same results, so that its stored steps are found again). Results are plain text.

- `calculator`: one arithmetic expression (numbers, + - * / // % **, parentheses, abs, round, min, max,
  sqrt, log, exp), evaluated on its syntax tree, never by `eval`.
- `python`: a short program run in finharness's sandbox (sandbox/: no network, no host files, CPU and
  memory limits); the value of its last expression and what it printed come back.
- `documents` over a `Library` (names, pages, a passage index): `list_documents` (optionally by a word in the
  name), `search` (the passage index: BM25 and dense, fused; optionally within one document), `read_page`.
"""

from __future__ import annotations

import ast
import asyncio
import math
import operator
import re
import threading
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from ..core.types import ToolSpec
from .loop import FunctionTool, ToolError

_BINARY: Mapping[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow}
_UNARY: Mapping[type, Callable[[Any], Any]] = {ast.USub: operator.neg, ast.UAdd: operator.pos}
_FUNCTIONS: Mapping[str, Callable[..., Any]] = {"abs": abs, "round": round, "min": min, "max": max,
                                                 "sqrt": math.sqrt, "log": math.log, "exp": math.exp}
_THOUSANDS = re.compile(r"(?<=\d),(?=\d{3}(?!\d))")
MAX_EXPONENT = 100
"""`**` with a larger exponent is refused (a calculator must not hang the run)."""


def evaluate(expression: str) -> float | int:
    """The value of an arithmetic expression; ToolError naming what is not allowed."""
    try:  # '1,577' is a number with a thousands separator, '^' a power, as people write them
        tree = ast.parse(_THOUSANDS.sub("", expression).replace("^", "**"), mode="eval")
    except SyntaxError as err:
        raise ToolError(f"not an arithmetic expression ({err.msg}): {expression!r}") from None

    def value(node: ast.AST) -> Any:
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
            return node.value
        if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
            left, right = value(node.left), value(node.right)
            if isinstance(node.op, ast.Pow) and abs(right) > MAX_EXPONENT:
                raise ToolError(f"exponent {right} is too large")
            return _BINARY[type(node.op)](left, right)
        if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
            return _UNARY[type(node.op)](value(node.operand))
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _FUNCTIONS
                and not node.keywords):
            return _FUNCTIONS[node.func.id](*(value(a) for a in node.args))
        raise ToolError(f"{ast.unparse(node)!r} is not allowed in the calculator (numbers, + - * / // % **, "
                        f"parentheses, {', '.join(_FUNCTIONS)})")

    try:
        return value(tree.body)
    except (ZeroDivisionError, OverflowError, ValueError, TypeError) as err:
        raise ToolError(f"{type(err).__name__}: {err}") from None


def _format_number(result: float | int) -> str:
    if isinstance(result, float) and result.is_integer() and abs(result) < 1e15:
        return str(int(result))
    return repr(result) if isinstance(result, float) else str(result)


def calculator() -> FunctionTool:
    spec = ToolSpec("calculator", "Evaluate one arithmetic expression, e.g. (1577 - 1373) / 1373 * 100.",
                    {"type": "object", "properties": {"expression": {"type": "string",
                                                                     "description": "the expression"}},
                     "required": ["expression"]})

    def run(arguments: dict[str, Any]) -> str:
        expression = arguments.get("expression")
        if not isinstance(expression, str) or not expression.strip():
            raise ToolError("give the expression as a string: {\"expression\": \"...\"}")
        return _format_number(evaluate(expression))

    return FunctionTool(spec, run)


class PythonTool:
    """Python in the sandbox; the sandbox (a pool of warm workers) starts on the first call."""

    spec = ToolSpec("python", "Run a short Python program (no network, no files); returns the value of its last "
                    "expression and what it printed.",
                    {"type": "object", "properties": {"code": {"type": "string", "description": "the program"}},
                     "required": ["code"]})

    def __init__(self, isolation: str = "auto") -> None:
        self.isolation = isolation
        self._sandbox: Any = None
        self._lock = threading.Lock()

    def _run(self, code: str) -> str:
        from ..sandbox import Sandbox

        with self._lock:
            if self._sandbox is None:
                self._sandbox = Sandbox(pool_size=1, isolation=self.isolation)  # type: ignore[arg-type]
        result = self._sandbox.run(code, mode="last_expression")
        printed = result.stdout.strip()
        if not result.ok:
            raise ToolError(f"{result.error_class}: {result.message}" + (f"\nprinted: {printed}" if printed else ""))
        shown = _format_number(result.value) if isinstance(result.value, (int, float)) else repr(result.value)
        return shown + (f"\nprinted:\n{printed}" if printed else "")

    async def __call__(self, arguments: dict[str, Any]) -> str:
        code = arguments.get("code")
        if not isinstance(code, str) or not code.strip():
            raise ToolError("give the program as a string: {\"code\": \"...\"}")
        return await asyncio.to_thread(self._run, code)

    def close(self) -> None:
        if self._sandbox is not None:
            self._sandbox.close()
            self._sandbox = None


@dataclass
class Library:
    """Named documents of pages and a passage index over them (retrieval/passages.py), built when first needed."""

    names: Sequence[str]
    """The documents, sorted."""
    pages: Callable[[str], Sequence[str]]
    """A document's page texts (0-based)."""
    index: Callable[[], Any]
    """The passage index over every document (made on first use)."""
    encoder: Callable[[], Any] = lambda: None
    """The dense encoder of the index (None: BM25 only)."""


SNIPPET_CHARS = 500
"""Characters of each search hit shown (the model reads a whole page with read_page)."""

_BLANK_RUNS = re.compile(r"[ \t]*\n(?:[ \t]*\n)+")
_TRAILING = re.compile(r"[ \t]+\n")


def compact(text: str) -> str:
    """A page as the model reads it: lines that hold only spaces dropped and trailing spaces cut (a PDF table comes
    out one cell a line with blank lines between, which costs tokens and says nothing)."""
    return _BLANK_RUNS.sub("\n", _TRAILING.sub("\n", text)).strip()


def document_tools(library: Library) -> list[FunctionTool]:
    """list_documents, search and read_page over `library`."""
    known = set(library.names)

    def document_argument(arguments: Mapping[str, Any], required: bool) -> str | None:
        name = arguments.get("document")
        if name in (None, "") and not required:
            return None
        if not isinstance(name, str) or name not in known:
            close = [n for n in library.names if isinstance(name, str) and name.split("_")[0].upper() in n]
            raise ToolError(f"no document {name!r}" + (f"; did you mean one of {', '.join(close[:8])}?" if close else
                                                       "; list_documents names them"))
        return name

    def list_documents(arguments: dict[str, Any]) -> str:
        word = str(arguments.get("company") or "").strip().upper().replace(" ", "")
        names = [n for n in library.names if word in n.upper()] if word else list(library.names)
        if not names:
            raise ToolError(f"no document name contains {word!r}; there are {len(library.names)} documents")
        return "\n".join(names)

    def search(arguments: dict[str, Any]) -> str:
        query = arguments.get("query")
        if not isinstance(query, str) or not query.strip():
            raise ToolError("give a query string: {\"query\": \"...\"}")
        document = document_argument(arguments, required=False)
        k = arguments.get("k", 5)
        if not isinstance(k, int) or not 1 <= k <= 10:
            raise ToolError("k must be a whole number from 1 to 10")
        where = (lambda p: p.doc == document) if document else None
        found = library.index().search(query, k=k, encoder=library.encoder(), where=where)
        if not found:
            return "no passage matches"
        return "\n\n".join(f"[{f.passage.doc} page {f.passage.page}]\n{compact(f.passage.text)[:SNIPPET_CHARS]}"
                             for f in found)

    def read_page(arguments: dict[str, Any]) -> str:
        document = document_argument(arguments, required=True)
        page = arguments.get("page")
        pages = library.pages(document)  # type: ignore[arg-type]
        if not isinstance(page, int) or not 0 <= page < len(pages):
            raise ToolError(f"{document} has pages 0 to {len(pages) - 1}; give the page as a whole number")
        return f"[{document} page {page} of {len(pages)}]\n{compact(pages[page])}"

    text = {"type": "string"}
    return [
        FunctionTool(ToolSpec("list_documents", "List the filings, or those whose name contains a company's name.",
                              {"type": "object", "properties": {"company": {**text, "description": "optional"}}}),
                     list_documents),
        FunctionTool(ToolSpec("search", "Search the filings' text; returns the best passages with document and page.",
                              {"type": "object", "properties": {
                                  "query": {**text, "description": "what to look for"},
                                  "document": {**text, "description": "optional: search only this filing"},
                                  "k": {"type": "integer", "description": "passages to return (default 5)"}},
                               "required": ["query"]}), search),
        FunctionTool(ToolSpec("read_page", "Read one whole page of a filing (pages count from 0).",
                              {"type": "object", "properties": {"document": text, "page": {"type": "integer"}},
                               "required": ["document", "page"]}), read_page),
    ]
