"""The Ray executor: a plan's stages as Ray tasks over a cluster (``--executor ray``).

The driver (``python -m benchmark.run``) walks the plan and submits each stage as a task once its
parents are finished, so independent branches run at once, as far as the cluster's resources allow
(``benchmark.pipeline.resources``: GPU for train/encode/queries, CPU and memory for the rest). Every task
runs the stage through the same ``Store`` on the same ``runs/`` (a filesystem every node mounts):
publication stays one atomic rename, and the claims keep two tasks (or a task and a local run)
from computing one stage. A failed stage fails its dependants with its error; the other branches go
on, and the driver ends with a summary of what failed.

Two kinds spread further (through ``Context.cluster``):

* an encode stage fans out into one task per missing shard over every GPU (or CPU) worker
  (``benchmark.retrieval.impact_vectors.encode_shard_task``); its own task only coordinates and finalises;
* a train stage with ``workers > 1`` runs on that many Ray Train workers (``benchmark.training.ray_cluster``),
  one DDP process group across nodes; rank 0 saves and publishes, as under torchrun.

A task whose worker process or node dies is retried by Ray (``RETRIES`` times): the dead holder's
claim is taken over (at once on the same node, after the claim TTL from another), a resumable
stage continues its partial folder, and finished shards are kept. ``ray`` is imported only here.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from benchmark.common import kill_points
from benchmark.common.errors import BenchmarkError
from benchmark.pipeline.executor import Outcome, run_stage, stops_pipeline
from benchmark.pipeline.resources import Resources
from benchmark.stages.store import Stage, Store

#: Ray retries a task this many times when its worker process or node dies (not on an exception).
RETRIES = 3
#: Seconds between the driver's progress lines while stages run.
PROGRESS_EVERY = 30.0
#: Environment variables the driver passes to every task (data and model locations, offline flags,
#: claim TTL and fault points); PYTHONPATH also carries this checkout.
FORWARD_PREFIXES = ("BENCHMARK_",)
FORWARD = ("IR_DATASETS_HOME", "HF_HOME", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "TOKENIZERS_PARALLELISM")
#: A task that only coordinates (the encode stage around its shard tasks, training around its
#: Ray Train workers) reserves no CPU: it waits on the others.
COORDINATOR = Resources(cpus=0.0)


def _first_line(text: str) -> str:
    lines = [line for line in str(text).strip().splitlines() if line.strip()]
    return lines[0] if lines else ""


def _unwrap(exc: BaseException) -> BaseException:
    """The stage's own exception inside Ray's wrappers (a task error raised in a task in a task)."""
    import ray.exceptions

    while isinstance(exc, ray.exceptions.RayTaskError) and isinstance(exc.cause, BaseException):
        exc = exc.cause
    return exc


def describe_error(exc: BaseException) -> str:
    """One line for a failed task: the stage's own error, not Ray's wrapper and traceback."""
    exc = _unwrap(exc)
    if isinstance(exc, BenchmarkError):
        return str(exc)
    return f"{type(exc).__name__}: {_first_line(str(exc))}"


def _set_threads(threads: int) -> None:
    """torch's intra-op threads for this task (a reused worker may have run a task of another size)."""
    import torch

    torch.set_num_threads(threads)


# --------------------------------------------------------------------------- inside the cluster


@dataclass(frozen=True)
class Cluster:
    """What a stage running as a task may spread over the cluster (``Context.cluster``): shard tasks
    and data-parallel training. Picklable; its methods run inside a task."""

    root: Path  # the runs folder (Ray Train's storage goes under it: every node mounts it)
    resources: Mapping[str, Resources]
    retries: int = RETRIES

    def map(self, fn: Callable[[Any], Any], tasks: list[Any], kind: str, total: int | None = None) -> list[Any]:
        """``fn(task)`` for every task, as tasks with ``kind``'s resources, retried when their worker
        dies; the results in order. The first task that raises cancels the rest and raises its error."""
        import ray

        res = self.resources[kind]
        done = f" ({total - len(tasks)} of {total} already done)" if total is not None and total > len(tasks) else ""
        print(f"[shards] {kind}: {len(tasks)} shard task(s) on {res.describe()} each{done}", flush=True)
        remote = ray.remote(_shard_task).options(**_task_options(res, self.retries, f"{kind}-shard"))
        refs = [remote.remote(fn, task, res.threads) for task in tasks]
        waiting = list(refs)
        try:
            while waiting:
                ready, waiting = ray.wait(waiting, num_returns=1)
                ray.get(ready[0])
                kill_points.point("shards:collected")
        except ray.exceptions.RayError as exc:  # a shard raised, or its worker died RETRIES + 1 times
            for ref in waiting:
                ray.cancel(ref, force=True)
            raise _unwrap(exc) from None
        return ray.get(refs)

    def data_parallel(self, fn: Callable[..., Any], *args: Any) -> Any:
        """``fn(*args)`` on every worker of one DDP process group (train's ``workers``); rank 0's result.
        With one worker, here."""
        res = self.resources["train"]
        if res.workers == 1:
            return fn(*args)
        from benchmark.training.ray_cluster import fit

        return fit(
            fn,
            args,
            workers=res.workers,
            cpus=res.cpus,
            gpus=res.gpus,
            memory_gb=res.memory_gb,
            storage=self.root / ".ray-train",
            retries=self.retries,
        )


def task_log(message: str) -> None:
    """A task's log: its stdout, which Ray forwards to the driver (``print`` itself is not picklable there)."""
    print(message, flush=True)


def _shard_task(fn: Callable[[Any], Any], task: Any, threads: int) -> Any:
    _set_threads(threads)
    return fn(task)


def _stage_task(
    stage: Stage, root: str, force: bool, verify: bool, ctx: Any, parents: Mapping[str, Mapping[str, Any]]
) -> tuple[dict[str, Any], float]:
    """One stage, in a worker: through its own Store on the shared runs/ (claimed, atomic)."""
    if stage.kind.device == "gpu":
        _set_threads(ctx.threads)
    store = Store(root, force=force, verify=verify)
    meta = run_stage(stage, store, ctx, parents)
    return meta, store.timings.get(stage.id, 0.0)


def _task_options(res: Resources, retries: int, name: str) -> dict[str, Any]:
    options: dict[str, Any] = {
        "num_cpus": res.cpus,
        "num_gpus": res.gpus,
        "max_retries": retries,
        "retry_exceptions": False,
        "name": name,
    }
    if res.memory_gb:
        options["memory"] = int(res.memory_gb * 2**30)
    return options


# --------------------------------------------------------------------------- the driver


def forwarded_env() -> dict[str, str]:
    """The variables every task gets from the driver (see FORWARD); PYTHONPATH starts with this checkout."""
    env = {k: v for k, v in os.environ.items() if k in FORWARD or k.startswith(FORWARD_PREFIXES)}
    root = str(Path(__file__).resolve().parents[1])
    paths = [root] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p != root]
    env["PYTHONPATH"] = os.pathsep.join(paths)
    return env


def connect(address: str | None, gpus: int | None = None, log: Callable[[str], None] = print) -> bool:
    """Connect to the cluster at ``address`` (``auto``, ``HOST:PORT``, ``ray://HOST:PORT``) or, with
    None, start a local one (``gpus`` GPUs: default, those Ray finds); True when a local one was started."""
    try:
        import ray
    except ImportError:
        raise BenchmarkError(
            "--executor ray needs Ray: pip install 'splade-rescale-benchmark[ray]' "
            "(or pip install 'ray[default,train]'), or use --executor local"
        ) from None
    start = time.perf_counter()
    kwargs: dict[str, Any] = {
        "runtime_env": {"env_vars": forwarded_env()},
        "logging_level": "WARNING",
        "log_to_driver": True,
    }
    try:
        if address is None:
            ray.init(num_gpus=gpus, include_dashboard=False, **kwargs)
        else:
            ray.init(address=address, **kwargs)
    except ConnectionError as exc:
        raise BenchmarkError(
            f"cannot reach a Ray cluster at --ray-address {address!r} ({_first_line(str(exc))}); "
            "start one (ray start --head) or omit --ray-address for a local one"
        ) from None
    total = ray.cluster_resources()
    log(
        f"[ray] {'started a local cluster' if address is None else 'connected to ' + address} in "
        f"{time.perf_counter() - start:.1f}s: {len(ray.nodes())} node(s), {total.get('CPU', 0):g} CPU, "
        f"{total.get('GPU', 0):g} GPU"
    )
    return address is None


def fit_resources(
    resources: Mapping[str, Resources], explicit_gpus: set[str], kinds: set[str], log: Callable[[str], None] = print
) -> dict[str, Resources]:
    """The resources checked against the cluster before any work: GPU kinds fall back to CPU on a
    cluster without GPUs (unless GPUs were asked for explicitly), and every request must fit a node."""
    import ray

    nodes = [n.get("Resources", {}) for n in ray.nodes() if n.get("Alive")]
    has_gpu = any(n.get("GPU", 0) > 0 for n in nodes)
    out = dict(resources)
    fallback = sorted(k for k in kinds if out[k].gpus and not has_gpu and k not in explicit_gpus)
    for kind in fallback:
        out[kind] = replace(out[kind], gpus=0.0)
    if fallback:
        log(f"[ray] no GPU in the cluster: {', '.join(fallback)} run on CPU workers")
    for kind in sorted(kinds):
        res = out[kind]
        if not any(
            n.get("CPU", 0) >= res.cpus
            and n.get("GPU", 0) >= res.gpus
            and (not res.memory_gb or n.get("memory", 0) >= res.memory_gb * 2**30)
            for n in nodes
        ):
            raise BenchmarkError(
                f"no node of the cluster can run a {kind} task ({res.describe()}): its nodes offer "
                + "; ".join(
                    f"{n.get('CPU', 0):g} CPU, {n.get('GPU', 0):g} GPU, {n.get('memory', 0) / 2**30:.0f} GiB"
                    for n in nodes
                )
                + f". Lower it with --resources {kind}=… or add such a node"
            )
        if kind == "train" and res.workers > 1:
            slots = sum(
                min(
                    n.get("CPU", 0) // res.cpus if res.cpus else res.workers,
                    n.get("GPU", 0) // res.gpus if res.gpus else res.workers,
                )
                for n in nodes
            )
            if slots < res.workers:
                raise BenchmarkError(
                    f"training asks for {res.workers} workers of {res.cpus:g} CPU + {res.gpus:g} GPU, "
                    f"the cluster has room for {int(slots)}; pass --resources train=workers:{int(slots)}"
                )
    return out


class RayExecutor:
    """The plan's stages as Ray tasks: parents first, independent branches at once, failures contained
    (an ``Executor``; ``execute`` connects to a cluster around it)."""

    def __init__(
        self,
        store: Store,
        ctx: Any,
        resources: Mapping[str, Resources],
        *,
        log: Callable[[str], None] = print,
        progress_every: float = PROGRESS_EVERY,
    ) -> None:
        self.store, self.ctx, self.resources, self.log = store, ctx, dict(resources), log
        self.root = Path(store.root).resolve()
        self.progress_every = progress_every

    def _options(self, stage: Stage) -> tuple[Resources, Resources]:
        """(what the stage's task reserves, what its work runs on)."""
        res = self.resources[stage.kind.name]
        if stage.kind.name == "encode" or (stage.kind.name == "train" and res.workers > 1):
            return COORDINATOR, res
        return res, res

    def _submit(self, stage: Stage, metas: Mapping[str, Mapping[str, Any]]) -> Any:
        import ray

        reserve, work = self._options(stage)
        ctx = replace(self.ctx, threads=work.threads, cluster=Cluster(self.root, self.resources), log=task_log)
        parents = {p.id: metas[p.id] for p in stage.parents.values()}
        task = ray.remote(_stage_task).options(**_task_options(reserve, RETRIES, stage.id))
        self.log(
            f"[ray] submit {self.store.name(stage)} ({work.describe()}{', fanned out' if reserve is not work else ''})"
        )
        return task.remote(stage, str(self.root), self.store.force, self.store.verify, ctx, parents)

    def plan(self, targets: list[Stage]) -> tuple[list[Stage], Outcome]:
        """The stages to compute, parents first; finished ones are reused without a task (and, as in the
        local executor, a finished stage needs nothing from its parents)."""
        outcome, order, seen, dropped = Outcome(), [], set(), set()

        def visit(stage: Stage, reading: bool = False, light: bool = False) -> None:
            if stage.id in seen:
                if not light and stage.id in dropped:
                    pass  # served to a light child so far; a full one needs it recomputed
                elif (
                    reading
                    and stage.id in outcome.done
                    and self.store.lookup(stage, hashes=True, dropped_ok=light) is None
                ):
                    pass  # damaged (reported); recomputed before the stage that reads it
                else:
                    return
            seen.add(stage.id)
            dropped.discard(stage.id)
            outcome.done.pop(stage.id, None)
            for parent in self.store.reached(stage):  # --verify: damage below a finished stage is found too
                visit(parent)
            if self.store.is_done(stage, hashes=reading, dropped_ok=light):  # a reader's parents: hashes checked first
                meta = outcome.done[stage.id] = self.store.run(stage, lambda out: {}, light)
                if meta.get("dropped"):
                    dropped.add(stage.id)
                return
            for role, parent in stage.parents.items():
                visit(parent, reading=True, light=role in stage.kind.light_parents)
            order.append(stage)

        for stage in targets:
            visit(stage)
        return order, outcome

    def run(self, targets: list[Stage]) -> Outcome:
        return self.run_plan(*self.plan(targets))

    def run_plan(self, waiting: list[Stage], outcome: Outcome) -> Outcome:
        """Run the stages ``plan`` left to compute (``waiting``, parents first) until none can run."""
        import ray

        waiting = list(waiting)
        running: dict[Any, tuple[Stage, float]] = {}
        total, last = len(waiting), time.monotonic()
        self.log(f"[ray] {total} stage(s) to run, {len(outcome.done)} cached")
        try:
            while waiting or running:
                for stage in list(waiting):
                    state = self._ready(stage, outcome)
                    if state == "wait":
                        continue
                    waiting.remove(stage)
                    if state == "run":
                        ref = self._submit(stage, outcome.done)  # type: ignore[arg-type]
                        running[ref] = (stage, time.monotonic())
                if not running:
                    break
                ready, _ = ray.wait(list(running), num_returns=1, timeout=self.progress_every)
                for ref in ready:
                    stage, started = running.pop(ref)
                    try:
                        meta, seconds = ray.get(ref)
                    except ray.exceptions.RayError as exc:
                        outcome.failed[stage.id] = describe_error(exc)
                        self.log(
                            f"[ray] FAILED {self.store.name(stage)} after {time.monotonic() - started:.1f}s: "
                            f"{outcome.failed[stage.id]}"
                        )
                        continue
                    outcome.done[stage.id] = meta
                    if seconds:
                        self.store.timings[stage.id] = seconds
                    computed = f"computed in {seconds:.1f}s" if seconds else "found finished"
                    self.log(
                        f"[ray] done {self.store.name(stage)}: {computed}, {time.monotonic() - started:.1f}s after "
                        f"submission "
                        f"({self._counts(outcome, running, waiting, total)})"
                    )
                if time.monotonic() - last >= self.progress_every:
                    last = time.monotonic()
                    busy = ", ".join(f"{s.id} {time.monotonic() - t0:.0f}s" for s, t0 in running.values())
                    self.log(f"[ray] {self._counts(outcome, running, waiting, total)}; running: {busy}")
        except BaseException:
            for ref in running:
                ray.cancel(ref, force=True)  # their claims die with them; the rerun resumes
            raise
        return outcome

    @staticmethod
    def _counts(outcome: Outcome, running: Mapping[Any, Any], waiting: list[Stage], total: int) -> str:
        finished = total - len(running) - len(waiting) - len(outcome.failed) - len(outcome.blocked)
        text = f"{finished}/{total} done, {len(running)} running, {len(waiting)} waiting"
        return text + (f", {len(outcome.failed)} failed" if outcome.failed else "")

    def _ready(self, stage: Stage, outcome: Outcome) -> str:
        """'run' (every parent finished), 'wait', or 'skip' (a parent failed, or a training run
        before it stopped early: nothing worth computing)."""
        for parent in stage.parents.values():
            if parent.id in outcome.failed or parent.id in outcome.blocked:
                outcome.blocked[stage.id] = outcome.blocked.get(parent.id, parent.id)
                return "skip"
        if any(p.id not in outcome.done for p in stage.parents.values()):
            return "wait"
        for parent in stage.parents.values():
            meta = outcome.done[parent.id]
            if meta is None or (parent.kind.name == "train" and stops_pipeline(meta)):
                outcome.done[stage.id] = None
                return "skip"
        return "run"


def execute(
    store: Store,
    ctx: Any,
    targets: list[Stage],
    resources: Mapping[str, Resources],
    explicit_gpus: set[str],
    address: str | None,
    gpus: int | None = None,
    log: Callable[[str], None] = print,
) -> Outcome:
    """Connect (or start a local cluster), run ``targets`` and their missing ancestors, disconnect."""
    import ray

    started = connect(address, gpus, log)
    try:
        executor = RayExecutor(store, ctx, resources, log=log)
        order, outcome = executor.plan(targets)
        executor.resources = fit_resources(resources, explicit_gpus, {s.kind.name for s in order}, log)
        outcome = executor.run_plan(order, outcome)
    finally:
        ray.shutdown()
    if started:
        log("[ray] local cluster stopped")
    return outcome
