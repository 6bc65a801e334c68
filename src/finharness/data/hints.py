"""What to type when data a task reads is missing: the registry knows which dataset holds each path below a data
root, so an error about a missing file or folder names the `finharness data pull` that puts it there, with the
data root the task read (a pull into the default root would not help a run given `--data-dir`)."""

from __future__ import annotations

from pathlib import Path, PurePosixPath

from .registry import DatasetSource, load_registry


def datasets_holding(path: str | Path) -> tuple[list[DatasetSource], Path] | None:
    """The datasets with a file at `path` or below it (a file or folder under some data root), and that root; the
    longest match of `path`'s last parts wins; None when no dataset has a file there."""
    parts = Path(path).parts
    best: tuple[int, list[DatasetSource]] = (0, [])
    for dataset in load_registry():
        for file in dataset.files:
            rel = PurePosixPath(dataset.local_dir.rstrip("/"), file.path).parts
            for k in range(min(len(parts), len(rel)), best[0] - 1, -1):
                if k and tuple(parts[-k:]) == rel[:k]:
                    if k > best[0]:
                        best = (k, [])
                    if dataset not in best[1]:
                        best[1].append(dataset)
                    break
    if not best[1]:
        return None
    return best[1], Path(*parts[: len(parts) - best[0]]) if len(parts) > best[0] else Path(".")


def pull_hint(path: str | Path) -> str | None:
    """'`finharness data pull NAME --data-dir ROOT`' for each dataset holding `path` (a dataset with files no public
    host serves: with `--from DIR`, a copy of a data root that has them); None when no registered dataset does."""
    found = datasets_holding(path)
    if found is None:
        return None
    datasets, root = found
    commands = [f"`finharness data pull {d.name} --data-dir {root}`" if d.pullable else
                f"`finharness data pull {d.name} --from DIR --data-dir {root}` (DIR: a copy of a data root that "
                "holds it; it has no public download)" for d in datasets]
    return ("run " if len(commands) == 1 else "run each of ") + ", ".join(commands)
