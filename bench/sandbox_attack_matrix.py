"""The attack matrix: every hostile program of the attack suite under every isolation, contained or not,
and the layer that stopped it (run by hand; the same programs and checks are tests in
tests/reliability/test_sandbox_attacks.py).

    .venv/bin/python bench/sandbox_attack_matrix.py [--markdown FILE] [--json FILE]

A cell reads "<layer>" when the program was refused or ended by that layer (audit guard, seccomp,
Landlock, mount namespace, read-only mount, sized tmpfs, RLIMIT_*, wall clock, memory cgroup), "ran,
contained" when it ran to its end and nothing reached the host, and "ESCAPED: ..." with what reached the
host (a marker file, a connection, the planted secret, the victim process killed, host paths seen, the
host disk written). Configurations that cannot run here are left out, with the reason.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from finharness.sandbox import Sandbox, SandboxUnavailable  # noqa: E402
from tests.reliability.sandbox_attacks import ATTACKS, CONFIGS, stopped_by  # noqa: E402
from tests.reliability.test_sandbox_attacks import LIMITS, SECRET, Listener, Victim, run_attack  # noqa: E402


def matrix() -> tuple[dict[str, dict[str, str]], dict[str, str]]:
    """attack -> config -> cell, and config -> the isolation label it ran under (or why it did not run)."""
    os.environ["FINHARNESS_TEST_SECRET"] = SECRET
    secret_dir = tempfile.mkdtemp(prefix="finharness-matrix-")
    secret_file = Path(secret_dir) / "api_key.txt"
    secret_file.write_text(SECRET)
    host = {"listener": Listener(), "secret_file": secret_file, "victim": Victim()}
    cells: dict[str, dict[str, str]] = {attack.name: {} for attack in ATTACKS}
    labels = {}
    try:
        for config, (kind, audit) in CONFIGS.items():
            try:
                box = Sandbox(pool_size=1, limits=LIMITS, isolation=kind, audit=audit)
            except SandboxUnavailable as exc:
                labels[config] = f"not here: {exc}"
                continue
            with box:
                labels[config] = box.isolation
                for attack in ATTACKS:
                    result, leaks = run_attack(box, host, attack)
                    cells[attack.name][config] = f"ESCAPED: {', '.join(leaks)}" if leaks else stopped_by(result)
    finally:
        host["listener"].close()
        host["victim"].stop()
        secret_file.unlink()
        os.rmdir(secret_dir)
    return cells, labels


def markdown(cells: dict[str, dict[str, str]], labels: dict[str, str]) -> str:
    configs = [c for c in CONFIGS if not labels.get(c, "").startswith("not here")]
    lines = ["| attack | " + " | ".join(f"{c} (`{labels[c]}`)" for c in configs) + " |",
             "|---|" + "---|" * len(configs)]
    for name, row in cells.items():
        lines.append(f"| {name} | " + " | ".join(row.get(c, "") for c in configs) + " |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--markdown", type=Path, help="also write the table here")
    parser.add_argument("--json", type=Path, help="also write the cells here")
    args = parser.parse_args()
    cells, labels = matrix()
    table = markdown(cells, labels)
    print(table)
    for config, label in labels.items():
        if label.startswith("not here"):
            print(f"{config}: {label}")
    escaped = {(name, c) for name, row in cells.items() for c, cell in row.items() if cell.startswith("ESCAPED")}
    print(f"{len(cells)} attacks x {sum(not v.startswith('not here') for v in labels.values())} isolations; "
          f"escaped: {sorted(escaped)}")
    if args.markdown:
        args.markdown.write_text(table)
    if args.json:
        args.json.write_text(json.dumps({"labels": labels, "cells": cells}, indent=1))


if __name__ == "__main__":
    main()
