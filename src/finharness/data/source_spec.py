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
    """One dataset a benchmark reads: where its upstream copy lives and which local files make it up."""

    name: str
    """The dataset's name in the registry (`finharness data pull NAME`); unique across all benchmarks."""
    description: str
    """One line saying what the dataset is, shown by `finharness data list`."""
    repository: str | None
    """The upstream repository (`owner/name` on GitHub or the Hub); None for data made here."""
    commit: str | None
    """The upstream commit (or Hub revision) the files are pinned at; None where there is no repository."""
    licence: str
    """The data's licence as its authors state it."""
    layout: str
    """What the files hold and how they are laid out (kept in the registry entry for whoever reads the data)."""
    local_dir: str
    """The dataset's folder under the data root, with a trailing slash (`ucfe/`)."""
    rules: tuple[Rule, ...] = ()
    """Map each local file to its upstream path; a file no rule matches is an error of the generator."""
    include: str | None = r".*"
    """Local files (under local_dir) that belong to the dataset; None: none, only `remote`."""
    notes: tuple[str, ...] = ()
    """Caveats of the copy (a short commit id, a file missing upstream), listed with the dataset."""
    homepage: str | None = None
    """The paper's or project's page, where there is one."""
    available_here: bool = True
    """False for a dataset no local copy holds: nothing is hashed here, its files are `remote` only."""
    host: str = "github"
    """Where `repository` lives: "github" or "huggingface" (which URL form a file's download uses)."""
    remote: tuple[Remote, ...] = ()
    """Files registered without a local copy (downloaded by URL, verified by the host's hash)."""
