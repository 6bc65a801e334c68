"""Agent episodes: a model with tools, bounded by limits, every step a stored call (loop.py), and the tools a
finance task can give it (tools.py: arithmetic, Python in the sandbox, search and reading over paged filings;
sec.py: inline-XBRL facts and point-in-time search over EDGAR filings)."""

from __future__ import annotations

from finharness.util import lazy_exports

_EXPORTS = {
    "AgentLimits": "loop", "Episode": "loop", "FunctionTool": "loop", "Tool": "loop", "ToolError": "loop",
    "run_episode": "loop", "calculator": "tools", "PythonTool": "tools", "Library": "tools",
    "document_tools": "tools",
}

__getattr__, __all__ = lazy_exports(__name__, _EXPORTS)
