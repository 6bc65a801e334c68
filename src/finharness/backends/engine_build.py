"""The llama.cpp engine (llama-cpp-python), built for this machine without the instructions that fault.

llama-cpp-python ships only as source, and its default build compiles ggml with ``-march=native``.
On cloud VMs whose CPU flags list AMX but whose hypervisor does not enable it, that turns on ggml's
AMX kernels, and the first matrix product dies with a general protection fault at ``ldtilecfg``.
Here the engine is compiled with ``-march=native`` (AVX-512 and the rest where the CPU has them)
minus every AMX extension, and without the parts finharness never loads (the multimodal library,
tools, examples), in parallel on all cores.

The wheel is kept in the user cache under a key of the engine version, these build options and the
CPU's flags, so a fresh clone on the same machine installs it in seconds, while a different CPU (or
an earlier ``-march=native`` wheel in pip's own cache) is never reused. pip's wheel cache is bypassed
for the same reason: it keys a built wheel by the source archive alone, not by the build options.

Run by ``make`` before the package is installed, so it imports nothing outside the standard library:
``python3 src/finharness/backends/engine_build.py --python .venv/bin/python`` builds the wheel if the
cache lacks it and installs it into that interpreter's environment unless it is already there.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ENGINE = "llama-cpp-python"
ENGINE_VERSION = "0.3.36"

AMX_OFF = ("-mno-amx-tile", "-mno-amx-int8", "-mno-amx-bf16")
"""GCC/Clang flags that keep AMX out whatever -march=native enables (explicit -mno-* win over -march)."""

FAULTING_INSTRUCTIONS = ("ldtilecfg", "sttilecfg", "tileloadd", "tdpbssd", "tdpbf16ps", "tilezero")
"""AMX tile instructions: none may appear in the engine's libraries (tests and `finharness doctor` look)."""


def cmake_args() -> list[str]:
    """The CMake options of the engine build."""
    no_amx = " ".join(AMX_OFF)
    return [
        "-DGGML_NATIVE=ON",             # the CPU's own vector extensions (AVX2, AVX-512, VNNI...)
        f"-DCMAKE_C_FLAGS={no_amx}",    # ... less AMX, which VMs may list but fault on
        f"-DCMAKE_CXX_FLAGS={no_amx}",
        "-DGGML_AMX_TILE=OFF", "-DGGML_AMX_INT8=OFF", "-DGGML_AMX_BF16=OFF",
        "-DLLAVA_BUILD=OFF",            # the multimodal library: never loaded here, a third of the compile
        "-DLLAMA_BUILD_TESTS=OFF", "-DLLAMA_BUILD_EXAMPLES=OFF", "-DLLAMA_BUILD_TOOLS=OFF",
        "-DLLAMA_BUILD_SERVER=OFF",
    ]


def cpu_flags() -> list[str]:
    """The CPU's feature flags as the kernel lists them (sorted; empty where /proc/cpuinfo is absent)."""
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    for line in text.splitlines():
        name, _, value = line.partition(":")
        if name.strip() in ("flags", "Features"):
            return sorted(set(value.split()))
    return []


def build_key() -> str:
    """What the built wheel depends on: engine version, build options, CPU flags, machine and Python ABI."""
    parts = {"engine": ENGINE, "version": ENGINE_VERSION, "cmake_args": cmake_args(), "cpu_flags": cpu_flags(),
             "machine": os.uname().machine, "python": f"{sys.version_info.major}.{sys.version_info.minor}"}
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode("utf-8")).hexdigest()[:16]


def cache_root() -> Path:
    """$FINHARNESS_CACHE, else $XDG_CACHE_HOME/finharness, else ~/.cache/finharness (as model_files)."""
    if explicit := os.environ.get("FINHARNESS_CACHE"):
        return Path(explicit).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg).expanduser() if xdg else Path.home() / ".cache") / "finharness"


def wheel_dir(key: str | None = None) -> Path:
    return cache_root() / "engine" / (key or build_key())


def cached_wheel(key: str | None = None) -> Path | None:
    wheels = sorted(wheel_dir(key).glob("llama_cpp_python-*.whl"))
    return wheels[0] if wheels else None


def build_wheel(python: str, *, log=print) -> Path:
    """Compile the engine into the cache (a few minutes); returns the wheel."""
    key = build_key()
    target = wheel_dir(key)
    env = dict(os.environ)
    env["CMAKE_ARGS"] = " ".join(shlex.quote(arg) for arg in cmake_args())
    env["CMAKE_BUILD_PARALLEL_LEVEL"] = str(os.cpu_count() or 1)
    env.setdefault("PIP_DISABLE_PIP_VERSION_CHECK", "1")
    target.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    log(f"engine: compiling {ENGINE} {ENGINE_VERSION} for this CPU without AMX (a few minutes, once per machine)")
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=f".{key}-") as scratch:
        # --no-binary: the source archive even if an index offered a wheel built for another CPU.
        command = [python, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-cache-dir",
                   "--no-binary", ENGINE, "-w", scratch, f"{ENGINE}=={ENGINE_VERSION}"]
        result = subprocess.run(command, env=env)
        if result.returncode != 0:
            raise SystemExit(f"engine: building {ENGINE} failed (exit {result.returncode}); command: "
                             f"CMAKE_ARGS={shlex.quote(env['CMAKE_ARGS'])} {shlex.join(command)}")
        built = sorted(Path(scratch).glob("llama_cpp_python-*.whl"))
        if not built:
            raise SystemExit(f"engine: pip wheel wrote no wheel into {scratch}")
        (Path(scratch) / "build.json").write_text(json.dumps(
            {"key": key, "cmake_args": cmake_args(), "cpu_flags": cpu_flags(),
             "seconds": round(time.monotonic() - started, 1)}, indent=1), encoding="utf-8")
        if target.exists():
            shutil.rmtree(target)
        os.replace(scratch, target)
        os.mkdir(scratch)  # TemporaryDirectory removes what it made
    log(f"engine: built in {time.monotonic() - started:.0f} s -> {target}")
    return cached_wheel(key)  # type: ignore[return-value]


def rebuild_command(python: str | None = None) -> str:
    """The command that compiles the engine again and installs it into `python`'s environment."""
    return f"{python or sys.executable} -m finharness.backends.engine_build --force"


def installed_stamp(python: str) -> Path:
    """A file beside the environment's interpreter naming the build key of the engine installed there."""
    return Path(python).absolute().parent.parent / ".finharness-engine-build"  # not resolve(): venv links


def ensure_installed(python: str, *, force: bool = False, log=print) -> Path:
    """Build (if not cached) and install the engine wheel into `python`'s environment; returns the wheel."""
    key = build_key()
    wheel = None if force else cached_wheel(key)
    if wheel is None:
        wheel = build_wheel(python, log=log)
    stamp = installed_stamp(python)
    if not force and stamp.is_file() and stamp.read_text(encoding="utf-8").strip() == key:
        return wheel
    subprocess.run([python, "-m", "pip", "install", "--quiet", "--no-deps", "--force-reinstall", str(wheel)],
                   check=True)
    stamp.write_text(key + "\n", encoding="utf-8")
    log(f"engine: installed {wheel.name} (build {key})")
    return wheel


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python", default=sys.executable, help="interpreter of the environment to install into")
    parser.add_argument("--force", action="store_true", help="compile again even if a cached wheel exists")
    parser.add_argument("--print-key", action="store_true", help="print the build key and the cache folder, then exit")
    args = parser.parse_args(argv)
    if args.print_key:
        print(build_key(), wheel_dir())
        return 0
    ensure_installed(args.python, force=args.force)
    return 0


if __name__ == "__main__":
    sys.exit(main())
