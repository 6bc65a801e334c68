"""Assembling embedded models from chunk packages, and the sha256 sidecar cache.

Uses small fake chunk packages (temporary modules with `get_part_path()` on sys.path),
never the real model chunks."""

from __future__ import annotations

import dataclasses
import hashlib
import os
import uuid
from pathlib import Path

import pytest

from finharness.backends import model_files
from finharness.backends.model_files import EmbeddedModel, ModelFileError, ensure_model, file_sha256
from finharness.core.backend import SpecError


def _fake_chunk_packages(root: Path, pieces: list[bytes]) -> tuple[str, ...]:
    """Write one importable module per piece, each with get_part_path() -> its data file."""
    stem = f"fh_fake_chunks_{uuid.uuid4().hex[:8]}"
    names = []
    for i, piece in enumerate(pieces, start=1):
        package = root / f"{stem}_part{i}"
        (package / "data").mkdir(parents=True)
        (package / "data" / f"part{i:02d}.bin").write_bytes(piece)
        (package / "__init__.py").write_text(
            "import os\n"
            "def get_part_path():\n"
            f"    return os.path.join(os.path.dirname(os.path.abspath(__file__)), 'data', 'part{i:02d}.bin')\n")
        names.append(package.name)
    return tuple(names)


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    directory = tmp_path / "cache"
    monkeypatch.setenv("FINHARNESS_CACHE", str(directory))
    return directory


@pytest.fixture
def pieces() -> list[bytes]:
    # Uneven sizes and more than one copy block, so joining order and block loops matter.
    return [os.urandom(3 * 1024 * 1024 + 17), os.urandom(1024), os.urandom(5 * 1024 * 1024 + 3)]


def _register(monkeypatch, tmp_path: Path, pieces: list[bytes], *, sha256: str | None = None,
              size: int | None = None) -> EmbeddedModel:
    modules = _fake_chunk_packages(tmp_path / "site", pieces)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    whole = b"".join(pieces)
    model = EmbeddedModel(
        name="embedded:fake", description="test model", filename="fake.gguf",
        part_modules=modules, size=len(whole) if size is None else size,
        sha256=sha256 or hashlib.sha256(whole).hexdigest(), part_version="1.0", extra="fake-extra")
    monkeypatch.setitem(model_files.EMBEDDED_MODELS, model.name, model)
    return model


def test_assembles_the_parts_in_order_into_the_cache(cache, tmp_path, monkeypatch, pieces):
    _register(monkeypatch, tmp_path, pieces)
    path = ensure_model("embedded:fake")
    assert path == cache / "models" / "fake.gguf"
    assert path.read_bytes() == b"".join(pieces)
    assert [p.name for p in path.parent.iterdir()] == ["fake.gguf"]  # no temp file left behind


def test_second_call_trusts_the_sidecar_and_does_not_rehash(cache, tmp_path, monkeypatch, pieces):
    _register(monkeypatch, tmp_path, pieces)
    first = ensure_model("embedded:fake")
    mtime = first.stat().st_mtime_ns

    def forbidden(*args, **kwargs):
        raise AssertionError("the model was hashed or assembled again")

    monkeypatch.setattr(hashlib, "file_digest", forbidden)
    monkeypatch.setattr(model_files, "_assemble", forbidden)
    assert ensure_model("embedded:fake") == first
    assert first.stat().st_mtime_ns == mtime


def test_wrong_checksum_is_refused_naming_expected_and_actual(cache, tmp_path, monkeypatch, pieces):
    wrong = "0" * 64
    _register(monkeypatch, tmp_path, pieces, sha256=wrong)
    with pytest.raises(ModelFileError) as caught:
        ensure_model("embedded:fake")
    message = str(caught.value)
    actual = hashlib.sha256(b"".join(pieces)).hexdigest()
    assert wrong in message and actual in message and "fake.gguf" in message
    assert list((cache / "models").iterdir()) == []  # the bad temporary file is deleted


def test_wrong_total_size_is_refused_before_copying(cache, tmp_path, monkeypatch, pieces):
    _register(monkeypatch, tmp_path, pieces, size=12345)
    monkeypatch.setattr(model_files, "_assemble", lambda *a: pytest.fail("copied despite wrong size"))
    with pytest.raises(ModelFileError, match="expected 12345"):
        ensure_model("embedded:fake")


def test_missing_chunk_package_names_the_pip_command(cache, monkeypatch):
    model = EmbeddedModel(
        name="embedded:fake", description="", filename="fake.gguf",
        part_modules=("fh_no_such_chunk_package_part1",), size=1, sha256="0" * 64,
        part_version="1.0", extra="fake-extra")
    monkeypatch.setitem(model_files.EMBEDDED_MODELS, model.name, model)
    with pytest.raises(ModelFileError, match=r"pip install 'finharness\[fake-extra\]'"):
        ensure_model("embedded:fake")


def test_core_model_missing_chunk_names_its_distribution(cache, monkeypatch):
    real = model_files.embedded_model("embedded")
    broken = dataclasses.replace(real, part_modules=("fh_missing_part3",))
    monkeypatch.setitem(model_files.EMBEDDED_MODELS, "embedded:0.5b", broken)
    with pytest.raises(ModelFileError, match=r"pip install fh-missing-part3==0\.9\.0"):
        ensure_model("embedded")


def test_corrupt_cached_file_is_rebuilt(cache, tmp_path, monkeypatch, pieces):
    _register(monkeypatch, tmp_path, pieces)
    path = ensure_model("embedded:fake")
    path.write_bytes(b"garbage")  # changes size and mtime, so the sidecar no longer vouches for it
    assert ensure_model("embedded:fake").read_bytes() == b"".join(pieces)


def test_unknown_embedded_name_lists_the_known_ones():
    with pytest.raises(SpecError, match="embedded:1.5b"):
        ensure_model("embedded:7b")


def test_registry_entries_are_consistent():
    assert model_files.embedded_model("embedded") is model_files.embedded_model("embedded:0.5b")
    for model in model_files.EMBEDDED_MODELS.values():
        assert len(model.sha256) == 64 and model.size > 0 and model.filename.endswith(".gguf")


def test_file_sha256_uses_the_sidecar_until_the_file_changes(cache, tmp_path, monkeypatch):
    target = tmp_path / "model.gguf"
    target.write_bytes(b"first")
    assert file_sha256(target) == hashlib.sha256(b"first").hexdigest()

    calls = []
    real_digest = hashlib.file_digest
    monkeypatch.setattr(hashlib, "file_digest", lambda *a: calls.append(1) or real_digest(*a))
    assert file_sha256(target) == hashlib.sha256(b"first").hexdigest()
    assert calls == []

    target.write_bytes(b"second, longer")
    assert file_sha256(target) == hashlib.sha256(b"second, longer").hexdigest()
    assert calls == [1]


def test_cache_dir_order(monkeypatch, tmp_path):
    monkeypatch.setenv("FINHARNESS_CACHE", str(tmp_path / "a"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "b"))
    assert model_files.cache_dir() == tmp_path / "a"
    monkeypatch.delenv("FINHARNESS_CACHE")
    assert model_files.cache_dir() == tmp_path / "b" / "finharness"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert model_files.cache_dir() == tmp_path / "home" / ".cache" / "finharness"
