"""How a benchmark says where its datasets come from: one `Spec` per dataset, kept in the benchmark's folder
(`benchmarks/NAME/sources.py`, `DATASETS`), from which tools/make_sources.py writes the registry entries
(`sources.json` beside it, with every file's size and sha256) that data/registry.py reads. Rules map a local file
to its upstream path, `confirmed` (looked up path by path), `unconfirmed` (where the repository's layout points)
or `derived` (made here from upstream data; no upstream file has its bytes).
"""

from __future__ import annotations

from dataclasses import dataclass

SCHEMA_VERSION = 1
"""The registry entries' format (a sources.json's `schema`)."""

CONFIRMED, UNCONFIRMED, DERIVED = "confirmed", "unconfirmed", "derived"


@dataclass(frozen=True)
class Rule:
    """Maps local paths (relative to the dataset's local folder) to upstream paths."""

    pattern: str
    """Regular expression matched against the whole local path."""
    template: str | None
    """re.sub template giving the in-repo path (confirmed or unconfirmed) or, for derived files, the upstream
    file they were derived from (None when there is no single one)."""
    status: str = CONFIRMED
    """confirmed | unconfirmed | derived."""


@dataclass(frozen=True)
class Remote:
    """A file no local copy holds, registered at the spec's commit without size and sha256."""

    path: str
    """Path in the dataset's local folder (the upstream path too)."""
    git_blob: str | None = None
    """Its git blob id in the tree of the commit (GitHub); None for a Hub LFS file (the Hub sends its sha256)."""
    unpack: str | None = None
    """'zip' for an archive unpacked into the dataset's folder."""


@dataclass(frozen=True)
class Spec:
    name: str
    description: str
    repository: str | None
    commit: str | None
    licence: str
    layout: str
    local_dir: str
    rules: tuple[Rule, ...] = ()
    include: str | None = r".*"
    """Local files (under local_dir) that belong to the dataset; None: none, only `remote`."""
    notes: tuple[str, ...] = ()
    homepage: str | None = None
    available_here: bool = True
    host: str = "github"
    remote: tuple[Remote, ...] = ()
