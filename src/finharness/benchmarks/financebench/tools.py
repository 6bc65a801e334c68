"""The agentic mode's tools: every cited filing the data root holds behind list_documents / search / read_page,
and a calculator and Python in the sandbox (agents/tools.py)."""

from __future__ import annotations

from typing import Any

from ...agents.tools import Library, PythonTool, calculator, document_tools
from .data import cited_documents, pdf_path
from .filings import read_pages


def filing_tools(task: Any) -> list[Any]:
    """The tools of one FinanceBench task (its data root and shared store)."""
    names = [n for n in cited_documents(list(task._questions.values())) if n not in task._absent]
    library = Library(names=names, pages=lambda name: read_pages(pdf_path(task._root, name)),
                      index=lambda: task.store("shared"), encoder=task.encoder)
    return [*document_tools(library), calculator(), PythonTool()]
