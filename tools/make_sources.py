#!/usr/bin/env python3
"""Generate each benchmark's registry entries (benchmarks/NAME/sources.json) from a local copy of the official data.

    python tools/make_sources.py DATA_ROOT            # write them
    python tools/make_sources.py DATA_ROOT --check    # exit 1 if one would change

DATA_ROOT is a folder laid out like ../shared/data (see its README.md): each file there is byte-identical
to an upstream file at the commit its dataset records, except the ones marked derived. Each benchmark keeps the
rules for its datasets in its own folder (benchmarks/NAME/sources.py, `DATASETS`, data/source_spec.py says each
field); this script hashes every file and maps it to its in-repo upstream path with those rules, and writes the
entries beside them. It names no benchmark: it reads the built-in declarations' packages (or --package).

How the upstream paths were checked: each rule marked `confirmed` was looked up path by path in an index of
the public repositories (every one of the 143 NASDAQ files, every IDEAFinBench file, ...), and sizes were
compared where the text could be read. Paths the index did not hold are marked `unconfirmed`: they are the
place the repository's own layout or documentation points to, recorded as `unconfirmed_path`, never as
`upstream_path`. `pull` may try them because the sha256 decides. Files that were made here from upstream
data (a column subset, a hand-made mapping) are `derived`: no upstream file has their bytes.

Every file under DATA_ROOT must belong to exactly one dataset or be listed in IGNORED; anything else is
reported on stderr and the script fails, so the registry cannot silently drift from the data.

Files that no local copy holds (the BizBench parquet, the FinQA and ConvFinQA question files) are listed as
`Remote` entries at a pinned commit, without size and sha256: the git blob ids come from the tree of that commit
(`git ls-tree` of a clone), and `finharness data pull` records size and sha256 in its lock after the first
verified download.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import json
import re
import sys
from pathlib import Path

from finharness.benchmarks.declaration import BUILT_IN
from finharness.data.registry import SOURCES_FILE
from finharness.data.source_spec import CONFIRMED, SCHEMA_VERSION, UNCONFIRMED, Remote, Spec

# Files under DATA_ROOT that belong to no dataset entry.
IGNORED = {
    "README.md",  # the README of the shared copy itself
}


def benchmark_specs(packages: tuple[str, ...] = BUILT_IN) -> dict[str, tuple[Spec, ...]]:
    """Package -> the Specs of its `sources` module (packages without one bring no datasets)."""
    out = {}
    for package in packages:
        try:
            module = importlib.import_module(f"{package}.sources")
        except ModuleNotFoundError as err:
            if err.name != f"{package}.sources":
                raise
            continue
        out[package] = tuple(module.DATASETS)
    return out


def entries_path(package: str) -> Path:
    """Where a package's generated entries go: sources.json beside its sources.py."""
    return Path(importlib.import_module(package).__file__).parent / SOURCES_FILE


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def raw_url(repository: str, commit: str, path: str) -> str:
    return f"https://raw.githubusercontent.com/{repository}/{commit}/{path}"


def hub_url(repository: str, commit: str, path: str) -> str:
    """The Hub's resolve URL of a dataset file (what huggingface_hub asks for)."""
    return f"https://huggingface.co/datasets/{repository}/resolve/{commit}/{path}"


def remote_entry(spec: Spec, remote: Remote) -> dict:
    """A file no local copy holds: its URL at the commit and what verifies it, size and sha256 left to the lock."""
    url = (hub_url if spec.host == "huggingface" else raw_url)(spec.repository, spec.commit, remote.path)
    entry: dict = {"path": remote.path, "size": None, "sha256": None, "upstream_path": remote.path, "url": url}
    if remote.git_blob:
        entry["git_blob"] = remote.git_blob
    if remote.unpack:
        entry["unpack"] = remote.unpack
    return entry


def file_entry(spec: Spec, root: Path, rel: str) -> dict:
    """One file of a dataset: size, sha256, and where it comes from upstream."""
    local = root / spec.local_dir / rel
    entry: dict = {"path": rel, "size": local.stat().st_size, "sha256": sha256_of(local),
                   "upstream_path": None, "url": None}
    for rule in spec.rules:
        if not re.fullmatch(rule.pattern, rel):
            continue
        mapped = re.sub(rf"^(?:{rule.pattern})$", rule.template, rel) if rule.template else None
        if rule.status == CONFIRMED:
            entry["upstream_path"] = mapped
            entry["url"] = raw_url(spec.repository, spec.commit, mapped)
        elif rule.status == UNCONFIRMED:
            entry["unconfirmed_path"] = mapped
        else:
            entry["derived"] = True
            if mapped:
                entry["derived_from"] = mapped
        return entry
    raise SystemExit(f"{spec.name}: no rule maps {rel}")


def dataset_entry(spec: Spec, root: Path, claimed: set[str]) -> dict:
    """One dataset's registry entry; its local files are added to `claimed` (a file claimed twice is an error)."""
    files = [remote_entry(spec, remote) for remote in spec.remote]
    folder = root / spec.local_dir
    if spec.available_here and spec.include is not None:
        for path in sorted(p for p in folder.rglob("*") if p.is_file()):
            rel = path.relative_to(folder).as_posix()
            if re.fullmatch(spec.include, rel):
                full = spec.local_dir + rel
                if full in claimed:
                    raise SystemExit(f"{full} is claimed by two datasets")
                claimed.add(full)
                files.append(file_entry(spec, root, rel))
        if len(files) == len(spec.remote):
            raise SystemExit(f"{spec.name}: no files under {folder}")
    files.sort(key=lambda f: f["path"])
    entry = {
        "name": spec.name, "description": spec.description, "available_here": spec.available_here,
        "repository": spec.repository, "commit": spec.commit, "licence": spec.licence,
        "layout": spec.layout, "local_dir": spec.local_dir, "homepage": spec.homepage,
        "notes": list(spec.notes), "files": files,
    }
    if spec.host != "github":
        entry["host"] = spec.host
    return entry


def build(root: Path, specs: dict[str, tuple[Spec, ...]] | None = None) -> tuple[dict[str, dict], list[str]]:
    """Package -> its registry document, and the local files no dataset of any package claims."""
    claimed: set[str] = set()
    documents = {package: {"schema": SCHEMA_VERSION, "datasets": [dataset_entry(s, root, claimed) for s in specs_]}
                 for package, specs_ in (benchmark_specs() if specs is None else specs).items()}
    every = {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()}
    return documents, sorted(every - claimed - IGNORED)


def render(document: dict) -> str:
    """Indented JSON with one line per file: readable diffs, a small file."""
    parts = ['{\n "schema": %d,\n "datasets": [\n' % document["schema"]]
    for i, ds in enumerate(document["datasets"]):
        head = {k: v for k, v in ds.items() if k != "files"}
        lines = [f'   "{k}": {json.dumps(v, ensure_ascii=False)}' for k, v in head.items()]
        files = ",\n".join("    " + json.dumps(f, ensure_ascii=False) for f in ds["files"])
        lines.append('   "files": [' + (f"\n{files}\n   ]" if files else "]"))
        parts.append("  {\n" + ",\n".join(lines) + "\n  }" + ("," if i < len(document["datasets"]) - 1 else "")
                     + "\n")
    parts.append(" ]\n}\n")
    return "".join(parts)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("root", type=Path, help="a local copy of the official data, laid out like ../shared/data")
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if an entries file would change")
    parser.add_argument("--package", action="append", help="a benchmark package (default: the built-in ones)")
    args = parser.parse_args(argv)
    if not args.root.is_dir():
        print(f"{args.root}: not a directory", file=sys.stderr)
        return 2
    packages = tuple(args.package) if args.package else BUILT_IN
    documents, unclaimed = build(args.root, benchmark_specs(packages))
    if unclaimed and not args.package:
        print("files under DATA_ROOT that no dataset claims (add them to a dataset or to IGNORED):",
              *unclaimed, sep="\n  ", file=sys.stderr)
        return 1
    stale = []
    for package, document in documents.items():
        text = render(document)
        json.loads(text)  # the hand-rendered JSON must parse
        path = entries_path(package)
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            stale.append(path)
            if not args.check:
                path.write_text(text, encoding="utf-8")
    for path in stale:
        print(f"{'would change' if args.check else 'wrote'} {path}", file=sys.stderr)
    return 1 if args.check and stale else 0


if __name__ == "__main__":
    sys.exit(main())
