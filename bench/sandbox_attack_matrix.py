"""The attack matrix: every hostile program of the attack suite under every isolation, contained or not,
and the layer that stopped it, as root and as a normal user (run by hand; the same programs and checks
are tests in tests/reliability/test_sandbox_attacks.py).

    .venv/bin/python bench/sandbox_attack_matrix.py [--as-user NAME] [--markdown FILE] [--json FILE]

A cell reads "<layer>" when the program was refused or ended by that layer (audit guard, seccomp,
Landlock, mount namespace, read-only mount, sized tmpfs, RLIMIT_*, pids cgroup, uid, wall clock, memory
cgroup), "ran (contained)" when it ran to its end and nothing reached the host, and "ESCAPED: ..." with
what reached the host (a marker file, a connection, the planted secret, the victim process killed, host
paths seen, the host disk written, a host file's mode/owner/times changed, the next job on the worker
finding what the program left). Configurations that cannot run here are left out, with the reason.

Run as root with `--as-user NAME` (an existing account, e.g. `useradd -m sbxuser`), the script also runs
itself as that user and prints both matrices side by side: as root every worker drops to a uid of its own;
as a normal user the worker is that user (bubblewrap maps it in a user namespace). The user's run happens
in a private mount namespace where a Python installation behind a closed directory (/root, mode 0700) is
bound back readable, as tests/reliability/test_sandbox_unprivileged.py does: nothing on the host changes mode.
"""

from __future__ import annotations

import argparse
import json
import os
import pwd
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import finharness  # noqa: E402
from finharness.sandbox import Sandbox, SandboxUnavailable  # noqa: E402
from tests.reliability.sandbox_attacks import ATTACKS, CONFIGS, stopped_by  # noqa: E402
from tests.reliability.test_sandbox_attacks import LIMITS, host_world, read_what_was_left, run_attack  # noqa: E402
from tests.reliability.test_sandbox_unprivileged import _unprivileged  # noqa: E402


def matrix() -> tuple[dict[str, dict[str, str]], dict[str, str]]:
    """attack -> config -> cell, and config -> the isolation label it ran under (or why it did not run)."""
    cells: dict[str, dict[str, str]] = {attack.name: {} for attack in ATTACKS}
    labels = {}
    kind_of = {config: kind for config, (kind, _) in CONFIGS.items()}
    with tempfile.TemporaryDirectory(prefix="finharness-matrix-") as secret_dir, host_world(Path(secret_dir)) as host:
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
                    if attack.plants and (found := read_what_was_left(box)):
                        leaks.append(f"the next job found {len(found)} of its traces")
                    cells[attack.name][config] = (f"ESCAPED: {', '.join(leaks)}" if leaks
                                                  else stopped_by(result, kind_of[config], attack))
    return cells, labels


def as_user(name: str) -> dict:
    """This script's cells and labels, run as the account `name` (from root)."""
    uid = pwd.getpwnam(name).pw_uid
    out = tempfile.mkdtemp(prefix="finharness-matrix-user-")
    os.chown(out, uid, uid)
    try:
        argv = _unprivileged(uid, [sys.executable, "-B", str(Path(__file__).resolve()), "--json",
                                   f"{out}/cells.json", "--quiet"])
        # The same finharness as this run's (PYTHONPATH=src of a worktree, or the installed one).
        env = {"PATH": "/usr/bin:/bin", "TMPDIR": "/tmp", "PYTHONPATH": str(Path(finharness.__file__).parents[1])}
        done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=1800)
        if done.returncode != 0:
            raise RuntimeError(f"the run as {name} failed: {done.stderr[-3000:]}")
        return json.loads(Path(out, "cells.json").read_text())
    finally:
        subprocess.run(["rm", "-rf", out], check=False)


def markdown(cells: dict[str, dict[str, str]], labels: dict[str, str]) -> str:
    configs = [c for c in labels if not labels[c].startswith("not here")]
    lines = ["| attack | " + " | ".join(configs) + " |", "|---|" + "---|" * len(configs)]
    for name, row in cells.items():
        lines.append(f"| {name} | " + " | ".join(row.get(c, "") for c in configs) + " |")
    lines += ["", "Labels: " + "; ".join(f"{c} = `{labels[c]}`" for c in configs)]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--as-user", help="as root: also run as this account and print both side by side")
    parser.add_argument("--markdown", type=Path, help="also write the table here")
    parser.add_argument("--json", type=Path, help="also write the cells here")
    parser.add_argument("--quiet", action="store_true", help="print nothing (the run as a user)")
    args = parser.parse_args()
    who = "root" if os.geteuid() == 0 else pwd.getpwuid(os.geteuid()).pw_name
    cells, labels = matrix()
    if args.json:
        args.json.write_text(json.dumps({"labels": labels, "cells": cells, "who": who}, indent=1))
    if args.quiet:
        return
    columns = {f"{c} ({who})": label for c, label in labels.items()}
    merged = {name: {f"{c} ({who})": cell for c, cell in row.items()} for name, row in cells.items()}
    if args.as_user:
        other = as_user(args.as_user)
        user = f"user {other['who']}"
        columns |= {f"{c} ({user})": label for c, label in other["labels"].items()}
        for name, row in other["cells"].items():
            merged[name] |= {f"{c} ({user})": cell for c, cell in row.items()}
    table = markdown(merged, columns)
    print(table)
    for column, label in columns.items():
        if label.startswith("not here"):
            print(f"{column}: {label}")
    escaped = sorted((name, c) for name, row in merged.items() for c, cell in row.items() if cell.startswith("ESCAPED"))
    ran = sum(not v.startswith("not here") for v in columns.values())
    print(f"{len(merged)} attacks x {ran} configurations; escaped: {escaped}")
    if args.markdown:
        args.markdown.write_text(table)


if __name__ == "__main__":
    main()
