"""Print the reliability table of a test session as Markdown.

    FINHARNESS_RELIABILITY_TABLE=/tmp/rel.json .venv/bin/pytest tests/reliability
    .venv/bin/python tests/reliability/table.py /tmp/rel.json

One line per fault class: cases (rows recorded), faults injected, runs completed (of the runs
made, where the tests said), samples lost, calls repeated, and the wall time of the tests
that exercised the class (a test that covers several classes counts toward each of them).
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any, Mapping

HEADER = ("fault class", "cases", "injected", "runs completed", "samples lost", "calls repeated", "wall time (s)")


def table_rows(payload: Mapping[str, Any]) -> list[tuple[str, ...]]:
    """The Markdown cells, one tuple per fault class in first-recorded order, then a total line."""
    by_class: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for row in payload["rows"]:
        by_class[row["fault_class"]].append(row)
    wall = payload.get("test_wall_s", {})

    def completed(rows: list[Mapping[str, Any]]) -> str:
        done = sum(r["completed"] for r in rows)
        runs = [r.get("runs") for r in rows]
        return f"{done}/{sum(runs)}" if all(n is not None for n in runs) else str(done)

    def line(name: str, rows: list[Mapping[str, Any]], seconds: float) -> tuple[str, ...]:
        return (name, str(len(rows)), str(sum(r["injected"] for r in rows)), completed(rows),
                str(sum(r["lost"] for r in rows)), str(sum(r["repeated"] for r in rows)), f"{seconds:.1f}")

    out = [line(name, rows, sum(wall.get(t, 0.0) for t in {r["test"] for r in rows}))
           for name, rows in by_class.items()]
    out.append(line("**all**", list(payload["rows"]), payload.get("suite_wall_s", 0.0)))
    return out


def markdown(payload: Mapping[str, Any]) -> str:
    lines = ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    lines += ["| " + " | ".join(cells) + " |" for cells in table_rows(payload)]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python tests/reliability/table.py TALLY.json", file=sys.stderr)
        return 2
    path = Path(argv[0])
    try:
        payload = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        print(f"{path}: cannot read the tally ({exc}); write it with FINHARNESS_RELIABILITY_TABLE={path} pytest ...",
              file=sys.stderr)
        return 1
    print(markdown(payload))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
