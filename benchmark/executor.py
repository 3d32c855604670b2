"""Running a plan's stages: the local executor (one process, parents first) and what every executor shares.

An executor gets the plan's evaluate stages and makes each one exist in the store, computing what
is missing. The store decides what is reused (``Store.run``: verified, claimed, atomic); the
executor decides where and in which order stages run. ``benchmark.ray_executor`` runs the same
stages as Ray tasks over a cluster.
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from benchmark.outcomes import COLLAPSED
from benchmark.stage import Inputs, Stage, Store


class Interrupted(BaseException):
    """SIGTERM, raised like KeyboardInterrupt so that ``finally`` blocks stop child processes."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def install_signal_handlers() -> None:
    """SIGTERM unwinds the stack as SIGINT does: claims are released, writer processes and the JVM
    indexer are stopped, and the partial folders stay for the rerun."""

    def handler(signum: int, frame: Any) -> None:
        raise Interrupted(signum)

    signal.signal(signal.SIGTERM, handler)


@contextlib.contextmanager
def uninterrupted() -> Iterator[None]:
    """Run a block whole: a SIGTERM or SIGINT arriving inside it is delivered when it ends. For library
    code that is not safe against an exception at any bytecode: in matplotlib's drawing an interrupt
    surfaced as an IndexError traceback, or was swallowed by a weakref callback and lost."""
    if threading.current_thread() is not threading.main_thread():  # only the main thread gets signals
        yield
        return
    pending: list[int] = []
    previous = {s: signal.signal(s, lambda signum, frame: pending.append(signum)) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        if pending:
            signal.raise_signal(pending[0])  # now the usual handler runs: Interrupted, KeyboardInterrupt


def stops_pipeline(meta: Mapping[str, Any] | None) -> bool:
    """A training run that stopped at a collapse trigger has no model worth encoding."""
    if meta is None:
        return True
    record = meta.get("record", {})
    if "stopped_early" in record:
        return bool(record["stopped_early"])
    return record.get("status") == COLLAPSED  # records written before training ran to its end


def inputs_of(stage: Stage, store: Store, metas: Mapping[str, Mapping[str, Any]]) -> Inputs:
    return Inputs({role: store.path(p) for role, p in stage.parents.items()},
                  {role: metas[p.id] for role, p in stage.parents.items()})


def run_stage(stage: Stage, store: Store, ctx: Any, parents: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """Compute (or reuse) one stage whose parents are finished; ``parents`` maps parent ids to their metas."""
    inputs = inputs_of(stage, store, parents)

    def compute(out: Path) -> dict[str, Any]:
        from benchmark import disk

        try:
            return stage.kind.run(stage.config, inputs, out, ctx)
        except OSError as exc:
            if not disk.is_full(exc):
                raise
            from benchmark.errors import BenchmarkError

            raise BenchmarkError(disk.disk_full_line(stage, out, stage.kind.space_needed(stage.config, inputs, out))) from None

    return store.run(stage, compute)


class LocalExecutor:
    """Every stage in this process, parents before children, stopping at the first failure."""

    def __init__(self, store: Store, ctx: Any) -> None:
        self.store, self.ctx = store, ctx
        self.done: dict[str, dict[str, Any] | None] = {}

    def execute(self, stage: Stage, light: bool = False) -> dict[str, Any] | None:
        """Run ``stage`` after its parents; None when an ancestor training run stopped early.
        ``light``: the child reads no dropped intermediate of it (``StageKind.light_parents``)."""
        if stage.id in self.done and (light or not (self.done[stage.id] or {}).get("dropped")):
            return self.done[stage.id]
        if self.store.is_done(stage, light):  # a finished stage needs nothing from its parents (they may be dropped)
            self.done[stage.id] = self.store.run(stage, lambda out: {}, light)
            return self.done[stage.id]
        metas: dict[str, dict[str, Any]] = {}
        for role, parent in stage.parents.items():
            meta = self.execute(parent, role in stage.kind.light_parents)
            if meta is None or (parent.kind.name == "train" and stops_pipeline(meta)):
                self.done[stage.id] = None
                return None
            metas[parent.id] = meta
        self.done[stage.id] = run_stage(stage, self.store, self.ctx, metas)
        return self.done[stage.id]

    def run(self, targets: list[Stage]) -> dict[str, dict[str, Any] | None]:
        for stage in targets:
            self.execute(stage)
        return self.done


def follow_training(stages: list[Stage], store: Store, ctx: Any, poll: float = 2.0) -> None:
    """Ranks > 0 under ``torchrun``: join each training stage once rank 0 has its inputs ready.

    Rank 0 runs the whole pipeline and claims the train stage; training is the only data-parallel
    stage, so the other ranks wait for its parents (files in runs/), train with rank 0 into the
    same partial folder (the HF Trainer synchronises them; rank 0 saves and publishes), then move on.
    """
    for stage in stages:
        if stage.kind.name != "train" or store.is_done(stage):
            continue
        while not all(store.load(p) is not None for p in stage.parents.values()):
            time.sleep(poll)
        out = store.partial_path(stage)
        out.mkdir(parents=True, exist_ok=True)
        metas = {p.id: store.load(p) for p in stage.parents.values()}
        stage.kind.run(stage.config, inputs_of(stage, store, metas), Path(out), ctx)
