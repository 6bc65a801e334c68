"""The engine build: no AMX tile instructions in the installed llama.cpp libraries, and a cache keyed by
what the build depends on (src/finharness/backends/engine_build.py)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from finharness.backends import engine_build
from finharness.doctor import engine_library_dir, tile_instructions

needs_objdump = pytest.mark.skipif(shutil.which("objdump") is None or shutil.which("gcc") is None,
                                   reason="binutils/gcc missing")


@needs_objdump
def test_the_installed_engine_has_no_amx_tile_instructions():
    folder = engine_library_dir()
    assert folder is not None, "llama-cpp-python is not installed"
    libraries = sorted(folder.glob("libggml-cpu*.so"))
    assert libraries, f"no ggml CPU library in {folder}"
    for library in libraries:
        assert tile_instructions(library) == [], library


@needs_objdump
def test_the_amx_check_finds_tile_instructions_where_they_are(tmp_path: Path):
    # A positive control: a library that does contain ldtilecfg is caught, so the check above can fail.
    source = tmp_path / "tile.c"
    source.write_text("void configure(const void *config) { __asm__ volatile (\"ldtilecfg (%0)\" :: \"r\"(config)); }\n"
                      "void release(void) { __asm__ volatile (\"tilerelease\"); }\n")
    library = tmp_path / "libtile.so"
    subprocess.run(["gcc", "-shared", "-fPIC", "-mamx-tile", "-o", str(library), str(source)], check=True)
    assert "ldtilecfg" in tile_instructions(library)


def test_the_installed_engine_reports_no_amx_in_its_features():
    import llama_cpp

    features = llama_cpp.llama_print_system_info().decode()
    assert "AMX_INT8 = 1" not in features
    assert "AVX2 = 1" in features or "AVX2" not in Path("/proc/cpuinfo").read_text()  # native: what the CPU has


def test_build_options_keep_native_vector_extensions_and_drop_amx():
    args = engine_build.cmake_args()
    assert "-DGGML_NATIVE=ON" in args
    for flags in (a for a in args if a.startswith(("-DCMAKE_C_FLAGS=", "-DCMAKE_CXX_FLAGS="))):
        assert all(flag in flags for flag in engine_build.AMX_OFF)


def test_the_wheel_cache_key_follows_the_cpu_and_the_options(monkeypatch):
    monkeypatch.setattr(engine_build, "cpu_flags", lambda: ["avx2", "avx512f"])
    with_avx512 = engine_build.build_key()
    monkeypatch.setattr(engine_build, "cpu_flags", lambda: ["avx2"])
    without = engine_build.build_key()
    monkeypatch.setattr(engine_build, "cmake_args", lambda: ["-DGGML_NATIVE=OFF"])
    other_options = engine_build.build_key()
    assert len({with_avx512, without, other_options}) == 3


def test_an_installed_matching_build_is_not_installed_again(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("FINHARNESS_CACHE", str(tmp_path / "cache"))
    wheel_folder = engine_build.wheel_dir()
    wheel_folder.mkdir(parents=True)
    (wheel_folder / "llama_cpp_python-0.3.36-py3-none-linux_x86_64.whl").write_bytes(b"")
    python = tmp_path / "venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.touch()
    calls: list[list[str]] = []
    def run(command, **_):
        calls.append(command)
        return subprocess.CompletedProcess(command, 1)  # a compile would fail here: nothing is built

    monkeypatch.setattr(engine_build.subprocess, "run", run)
    engine_build.ensure_installed(str(python), log=lambda _: None)
    assert len(calls) == 1 and "install" in calls[0]  # first time: installed from the cached wheel
    assert engine_build.installed_stamp(str(python)).read_text().strip() == engine_build.build_key()
    engine_build.ensure_installed(str(python), log=lambda _: None)
    assert len(calls) == 1  # the stamp matches: nothing to do
    monkeypatch.setattr(engine_build, "cpu_flags", lambda: ["another-cpu"])
    with pytest.raises(SystemExit, match="building llama-cpp-python failed"):  # another CPU: it compiles anew
        engine_build.ensure_installed(str(python), log=lambda _: None)
    assert "wheel" in calls[1] and "--no-cache-dir" in calls[1]  # never pip's cache: it ignores CMAKE_ARGS
