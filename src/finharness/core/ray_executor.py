"""Solving a run's samples on a Ray cluster (`finharness run ... --executor ray`).

The driver (the `finharness run` process) does everything a local run does --
load and select the samples, compute the run key, skip the samples the store
already holds, score, write the run directory -- except solving the pending
samples: those are split into shards, one Ray task each. A worker builds the
task and its own backends from their recipes, solves its shard with the same
engine (`run_task(..., only_ids=shard)`) into a store of its own, and returns
that store's rows; the driver adds them to the one run store. Calls and
samples are keyed by content, so a shard cannot be stored twice, and a shard
whose worker died (killed, out of memory, node lost) is run again by Ray
(`max_retries`); its lost calls are made again, nothing else is. No shared
filesystem is needed between nodes: only the data directory must exist on
every node at the same path.

Ray is imported only here, and only when a run asks for it.
"""

from __future__ import annotations

import asyncio
import os
import socket
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence

import numpy as np

from .backend import Backend
from .model import RunCounters
from .runner import RunOptions, run_task
from .store import RunStore, StoreRows
from .task import SampleRecord, Task
from .types import Sample

INSTALL_HINT = "the Ray executor needs Ray: pip install 'finharness[ray]'"


def import_ray() -> Any:
    """The `ray` module, or an ImportError that says how to install it."""
    try:
        import ray
    except ImportError as err:
        raise ImportError(INSTALL_HINT) from err
    return ray


@contextmanager
def ray_session(address: str | None = None) -> Iterator[Any]:
    """Connect to a Ray cluster (`auto`, `ray://HOST:10001`...; None: $RAY_ADDRESS, else a new local
    one), or use the one this process is already connected to; disconnect only from a cluster
    connected to here."""
    ray = import_ray()
    if ray.is_initialized():
        yield ray
        return
    local = address is None and not os.environ.get("RAY_ADDRESS")
    # a throwaway local cluster needs no dashboard (it only slows the start)
    ray.init(address=address, **({"include_dashboard": False} if local else {}))
    try:
        yield ray
    finally:
        ray.shutdown()


@dataclass(frozen=True)
class ShardJob:
    """What a worker needs to solve part of a run; pickled to every worker, so every field must pickle
    (functions and classes by reference: finharness must be installed on every node)."""

    task_factory: Callable[[], Task]
    """Builds the task: TaskRef.factory(options) of benchmarks/registry.py, a functools.partial of
    make_task_from_spec(spec, options) that resolves the task spec again on the worker."""

    backend_specs: Mapping[str, str]
    """Model spec by role ('model', 'judge', 'user'): each worker builds its own backends from them."""

    backend_factory: Callable[[str], Backend]
    """Spec -> backend (finharness.backends.from_spec); core never imports a backend itself."""

    options: RunOptions
    """How samples are selected and solved: the driver's own RunOptions, so the worker's run key is the
    driver's."""


@dataclass(frozen=True)
class ShardResult:
    """What a worker sends back: its shard solved, and the rows its store gained doing it."""

    run_key: str
    """The run key the worker computed; it must be the driver's (same task, data, models, options)."""

    config: Mapping[str, Any]
    """The run config behind run_key (to say what differs when the keys do not match)."""

    records: Mapping[str, dict[str, Any]]
    """Raw result by sample id: {"prediction", "trace"}, plus "failed" when a call failed for good."""

    rows: StoreRows
    """Every call, failure, run and sample row of the worker's store."""

    counters: RunCounters
    """The worker's counts (calls made, cache hits, retries, tokens...)."""

    node: str
    """The worker's host name, for messages."""


def raw_record(record: SampleRecord) -> dict[str, Any]:
    """A solved sample as run_task keeps it before scoring."""
    raw: dict[str, Any] = {"prediction": record.prediction, "trace": list(record.trace)}
    if record.failed:
        raw["failed"] = record.failed
        raw["transient"] = record.transient
    return raw


def solve_shard(job: ShardJob, sample_ids: Sequence[str]) -> ShardResult:
    """Runs in a Ray worker: solve these samples of the run into a store of the worker's own."""
    with tempfile.TemporaryDirectory(prefix="finharness-shard-") as tmp:
        store = RunStore(Path(tmp) / "store.sqlite")
        try:
            result = asyncio.run(_solve(job, sample_ids, store))
            run_key = result.results["run_key"]
            rows = store.export_rows(run_key)
        finally:
            store.close()
    assert result.counters is not None
    return ShardResult(run_key=run_key, config=result.results["config"],
                       records={r.id: raw_record(r) for r in result.records}, rows=rows,
                       counters=result.counters, node=socket.gethostname())


async def _solve(job: ShardJob, sample_ids: Sequence[str], store: RunStore) -> Any:
    # one backend per distinct spec, as the CLI builds them: a model that is also the judge loads once
    by_spec = {spec: job.backend_factory(spec) for spec in dict.fromkeys(job.backend_specs.values())}
    backends = {role: by_spec[spec] for role, spec in job.backend_specs.items()}
    try:
        return await run_task(job.task_factory(), backends, store, job.options, only_ids=sample_ids)
    finally:
        for backend in by_spec.values():
            await backend.aclose()


def split_shards(ids: Sequence[str], shards: int) -> list[list[str]]:
    """At most `shards` contiguous, near-equal shards (neighbours often share a prompt prefix)."""
    return [list(part) for part in np.array_split(np.asarray(ids, dtype=object), min(shards, len(ids)))
            if len(part)]


def config_difference(here: Mapping[str, Any] | None, there: Mapping[str, Any]) -> str:
    """What differs between two run configs, one line per entry."""
    here = here or {}
    lines = []
    for key in sorted(set(here) | set(there)):
        if here.get(key) != there.get(key):
            lines.append(f"  {key}: driver {str(here.get(key))[:300]}; worker {str(there.get(key))[:300]}")
    return "\n".join(lines)


@dataclass(frozen=True)
class RayExecutor:
    """A SampleExecutor (core/runner.py) that solves the pending samples on Ray workers."""

    job: ShardJob
    """How a worker builds and solves its part of the run."""

    shards: int | None = None
    """Number of shards (Ray tasks); None: one per CPU of the cluster. More shards balance the load
    better and lose less when a worker dies; each one loads the task's data once."""

    max_retries: int = 3
    """Times Ray runs a shard again after its worker died; a shard still lost after that leaves its
    samples failed (counted; a rerun retries them)."""

    async def __call__(self, run_key: str, pending: Sequence[Sample], store: RunStore, counters: RunCounters,
                       progress: Callable[[RunCounters], None] | None) -> dict[str, dict[str, Any]]:
        ray = import_ray()
        from ray.exceptions import RayError, RayTaskError

        shards = split_shards([s.id for s in pending],
                              self.shards or max(1, int(ray.cluster_resources().get("CPU", 1))))
        solve = ray.remote(solve_shard).options(num_cpus=1, max_retries=self.max_retries,
                                                retry_exceptions=False)
        job = ray.put(self.job)
        refs = [solve.remote(job, shard) for shard in shards]

        async def finished(index: int) -> tuple[int, ShardResult | None, str | None]:
            try:
                return index, await refs[index], None
            except RayTaskError as err:
                # the task itself failed (bad data, a bug): the same error a local run would raise
                raise (err.cause if isinstance(err.cause, Exception) else err) from None
            except RayError as err:  # the worker kept dying
                return index, None, f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}"

        results: dict[str, dict[str, Any]] = {}
        try:
            for next_done in asyncio.as_completed([finished(i) for i in range(len(refs))]):
                index, part, lost = await next_done
                shard = shards[index]
                if part is None:
                    message = (f"shard of {len(shard)} sample(s) lost: its worker died "
                               f"{self.max_retries + 1} time(s) ({lost})")
                    counters.failure_messages.append(message)
                    results.update({sid: {"prediction": None, "trace": [], "failed": f"worker-lost: {message}"}
                                    for sid in shard})
                else:
                    results.update(self._absorb(run_key, shard, part, store, counters))
                counters.samples_done += len(shard)
                if progress:
                    progress(counters)
        except BaseException:
            for ref in refs:
                ray.cancel(ref)
            raise
        return results

    @staticmethod
    def _absorb(run_key: str, shard: Sequence[str], part: ShardResult, store: RunStore,
                counters: RunCounters) -> Mapping[str, dict[str, Any]]:
        """Check that a worker ran this very run (the run key covers the task, the models, the options
        and the selected samples), then add its rows to the run store and its counts to the run's."""
        if part.run_key != run_key:
            raise ValueError(
                f"the worker on {part.node} ran a different run than this driver (run key "
                f"{part.run_key[:12]} instead of {run_key[:12]}):\n"
                f"{config_difference(store.get_run(run_key), part.config)}\n"
                "every node needs the same finharness version and data, and the same model behind each "
                "spec (an openai: spec's server must answer GET /models alike on every node and here)")
        store.import_rows(part.rows)
        counters.add(part.counters)
        return {sid: part.records[sid] for sid in shard}
