"""Running a plan's stages: the local executor (one process, parents first) and what every executor shares.

An executor (``Executor``) gets the plan's evaluate stages and makes each one exist in the store,
computing what is missing, and says what happened to each (``Outcome``). The store decides what is reused
(``Store.run``: verified, claimed, atomic); the executor decides where and in which order stages run.
``LocalExecutor`` runs them in this process; ``benchmark.pipeline.ray_executor.RayExecutor`` runs the same
stages as Ray tasks over a cluster.
"""

from __future__ import annotations

import contextlib
import time
import traceback
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from benchmark.common.atomic import write_text
from benchmark.common.errors import BenchmarkError
from benchmark.stages.records import StageRecord, TrainRecord, parse
from benchmark.stages.store import Inputs, Stage, Store


@dataclass
class Outcome:
    """What happened to each stage of a run."""

    done: dict[str, dict[str, Any] | None] = field(default_factory=dict)  # id → meta (None: after a collapse)
    failed: dict[str, str] = field(default_factory=dict)  # id → its error
    blocked: dict[str, str] = field(default_factory=dict)  # id → the failed ancestor's id

    def summary(self, stages: Mapping[str, Stage]) -> str:
        lines = [f"{len(self.failed)} stage(s) failed; {len(self.blocked)} depending on them did not run:"]
        for sid, error in self.failed.items():
            lines.append(f"  {sid} ({stages[sid].describe() or stages[sid].kind.name}): {error}")
            below = sorted(b for b, root in self.blocked.items() if root == sid)
            if below:
                lines.append(f"    not run: {', '.join(below)}")
        return "\n".join(lines)


class Executor(Protocol):
    """Makes each target stage exist in the store, its missing ancestors first (a stage below a training
    run that stopped early is not computed: ``done`` holds None for it)."""

    def run(self, targets: list[Stage]) -> Outcome: ...


def stops_pipeline(meta: Mapping[str, Any] | None) -> bool:
    """A training run that stopped at a collapse trigger has no model worth encoding."""
    return meta is None or parse(meta, TrainRecord).stopped_early


def inputs_of(stage: Stage, store: Store, metas: Mapping[str, Mapping[str, Any]]) -> Inputs:
    return Inputs(
        {role: store.path(p) for role, p in stage.parents.items()},
        {role: metas[p.id] for role, p in stage.parents.items()},
        stage.payload()["external"],
    )


def stage_log(store: Store, stage: Stage) -> Path:
    """Where a stage that failed leaves its full traceback: beside its folder, kept until it succeeds."""
    return store.root / stage.name / f"{stage.id}.log"


def _fix(exc: BaseException) -> tuple[str, str]:
    """(the input, the fix) the one line gives for an exception no stage turned into a BenchmarkError."""
    if isinstance(exc, OSError) and exc.filename:
        what = {PermissionError: "make it readable", FileNotFoundError: "restore it"}.get(type(exc), "check it")
        return f"{exc.filename}", f"{what} and rerun the same command"
    if isinstance(exc, UnicodeError):
        return "a text input", (
            "the input holds text that is not valid UTF-8 (bytes, or a lone surrogate escape such as \\ud800): "
            "fix that text and rerun"
        )
    return "", "if its inputs are as intended, this is a fault of the harness: report this line with the log"


def failure_line(stage: Stage, exc: BaseException, log: Path | None, name: str | None = None) -> str:
    """The one line a stage's unexpected exception becomes: the stage, its input, what went wrong, the fix,
    and the log that holds the full traceback."""
    lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
    what = f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__
    if len(lines) > 1:
        what += f" (+{len(lines) - 1} lines)"
    source, fix = _fix(exc)
    described = stage.describe()
    about = f" ({described})" if described and not name else ""
    input_part = f" reading {source}" if source else ""
    where = f"; the full traceback is in {log}" if log is not None else "; its traceback could not be written"
    return f"stage {name or stage.id}{about} failed{input_part}: {what}; {fix}{where}"


@contextlib.contextmanager
def stage_boundary(stage: Stage, store: Store) -> Iterator[None]:
    """Every stage runs inside this: an exception that is not already one line (``BenchmarkError``) becomes
    one, naming the stage and the log file that holds its traceback. Interrupts pass through."""
    try:
        yield
    except BenchmarkError:
        raise
    except Exception as exc:
        log: Path | None = stage_log(store, stage)
        assert log is not None
        try:
            log.parent.mkdir(parents=True, exist_ok=True)
            write_text(log, "".join(traceback.format_exception(exc)))
        except OSError:
            log = None
        raise BenchmarkError(failure_line(stage, exc, log, store.name(stage))) from exc
    else:
        with contextlib.suppress(OSError):  # a log of an earlier failure, now mended
            stage_log(store, stage).unlink(missing_ok=True)


def run_stage(stage: Stage, store: Store, ctx: Any, parents: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """Compute (or reuse) one stage whose parents are finished; ``parents`` maps parent ids to their metas.
    Any failure is one line (``stage_boundary``)."""
    with stage_boundary(stage, store):
        return _run_stage(stage, store, ctx, parents)


def _run_stage(stage: Stage, store: Store, ctx: Any, parents: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    inputs = inputs_of(stage, store, parents)

    def compute(out: Path) -> StageRecord:
        from benchmark.common import disk

        try:
            return stage.kind.run(stage.config, inputs, out, ctx)
        except OSError as exc:
            if not disk.is_full(exc):
                raise
            needed = stage.kind.space_needed(stage.config, inputs, out)
            raise BenchmarkError(disk.disk_full_line(stage, out, needed)) from None

    return store.run(stage, compute)


def duration(seconds: float) -> str:
    """``42s``, ``3m05s``, ``2h07m``: an elapsed time or an ETA, to the unit that matters."""
    s = int(round(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


class Progress:
    """The overall line above each stage's own output: ``stage k of N (kind: system), elapsed, ETA``.

    N counts the stages that were not finished when the run started. The ETA sums, over the stage
    that is starting and every stage after it, the mean time of the finished stages of the same kind:
    those this run computed, else those of earlier runs in the store (a resume knows what its
    training runs took). A kind timed nowhere yet is priced at the mean of all timed stages and
    named (``train not timed yet``): one training run outlasts many searches. Hence ``~``.
    """

    def __init__(
        self,
        pending: list[Stage],
        log: Any,
        labels: Mapping[str, str] | None = None,
        earlier: Mapping[str, list[float]] | None = None,
    ) -> None:
        self.pending = {s.id: s.kind.name for s in pending}
        self.total, self.k, self.log = len(pending), 0, log
        self.labels = labels or {}
        self.earlier = {kind: list(ts) for kind, ts in (earlier or {}).items() if ts}
        self.start = time.perf_counter()
        self.seconds: dict[str, list[float]] = {}
        self._began: float | None = None

    def _mean(self, kind: str) -> float | None:
        ts = self.seconds.get(kind) or self.earlier.get(kind)
        return sum(ts) / len(ts) if ts else None

    def eta(self, starting: str | None = None) -> str:
        """The time left, the ``starting`` stage's kind included."""
        kinds = ([starting] if starting else []) + list(self.pending.values())
        every = [t for ts in (*self.seconds.values(), *self.earlier.values()) for t in ts]
        if not every:
            return "ETA unknown"
        mean = sum(every) / len(every)
        untimed = list(dict.fromkeys(k for k in kinds if self._mean(k) is None))
        left = sum(m if (m := self._mean(kind)) is not None else mean for kind in kinds)
        more = f" and {len(untimed) - 3} more kind{'s' if len(untimed) > 4 else ''}" if len(untimed) > 3 else ""
        named = ", ".join(untimed[:3]) + more
        return f"ETA ~{duration(left)}" + (f" ({named} not timed yet)" if untimed else "")

    def begin(self, stage: Stage) -> None:
        if stage.id not in self.pending:
            return
        self.pending.pop(stage.id)
        self.k += 1
        label = self.labels.get(stage.id)
        what = f"{stage.kind.name}: {label}" if label else stage.kind.name
        self.log(
            f"stage {self.k} of {self.total} ({what}), {duration(time.perf_counter() - self.start)} "
            f"elapsed, {self.eta(stage.kind.name)}"
        )
        self._began = time.perf_counter()

    def end(self, stage: Stage, seconds: float | None = None) -> None:
        """``stage`` finished, after ``seconds`` (default: since its ``begin``)."""
        if seconds is None and self._began is not None:
            seconds = time.perf_counter() - self._began
        if seconds is not None:
            self.seconds.setdefault(stage.kind.name, []).append(seconds)
        self._began = None


class LocalExecutor:
    """Every stage in this process, parents before children, stopping at the first failure (it raises:
    its ``Outcome`` never holds a failed stage)."""

    def __init__(self, store: Store, ctx: Any) -> None:
        self.store, self.ctx = store, ctx
        self.done: dict[str, dict[str, Any] | None] = {}
        self.progress: Progress | None = None

    def execute(self, stage: Stage, reading: bool = False, light: bool = False) -> dict[str, Any] | None:
        """Run ``stage`` after its parents; None when an ancestor training run stopped early.

        ``reading``: a stage about to be computed reads this one, so its hashes are checked first (a
        file changed in place at the same size is found before anything is built from it).
        ``light``: the child reads no dropped intermediate of it (``StageKind.light_parents``)."""
        if stage.id in self.done:
            done = self.done[stage.id]
            if (light or not (done or {}).get("dropped")) and (
                not reading or done is None or self.store.lookup(stage, hashes=True, dropped_ok=light) is not None
            ):
                return done
            # damaged since it was reused, or dropped for a child that reads it: recomputed below
            del self.done[stage.id]
        for parent in self.store.reached(stage):  # --verify: damage below a finished stage is found too
            self.execute(parent)
        # a finished stage needs nothing from its parents
        if self.store.is_done(stage, hashes=reading, dropped_ok=light):
            with stage_boundary(stage, self.store):
                self.done[stage.id] = self.store.run(stage, lambda out: {}, light)
            return self.done[stage.id]
        metas: dict[str, dict[str, Any]] = {}
        for role, parent in stage.parents.items():
            meta = self.execute(parent, reading=True, light=role in stage.kind.light_parents)
            if meta is None or (parent.kind.name == "train" and stops_pipeline(meta)):
                self.done[stage.id] = None
                return None
            metas[parent.id] = meta
        if self.progress is not None:
            self.progress.begin(stage)
        self.done[stage.id] = run_stage(stage, self.store, self.ctx, metas)
        if self.progress is not None:  # the compute time the store recorded (no wait for another process)
            self.progress.end(stage, getattr(self.store, "timings", {}).get(stage.id) or None)
        return self.done[stage.id]

    def run(self, targets: list[Stage]) -> Outcome:
        self.progress = Progress(
            self.pending(targets),
            getattr(self.ctx, "log", print),
            getattr(self.store, "labels", {}),
            self.earlier(targets),
        )
        for stage in targets:
            self.execute(stage)
        return Outcome(done=self.done)

    def earlier(self, targets: list[Stage]) -> dict[str, list[float]]:
        """Per kind, the seconds the plan's finished stages took when they were computed: the ETA's
        prior for kinds this run has not timed yet (a resume knows its earlier part)."""
        out: dict[str, list[float]] = {}
        seen: set[str] = set()

        def visit(stage: Stage) -> None:
            if stage.id in seen:
                return
            seen.add(stage.id)
            for parent in stage.parents.values():
                visit(parent)
            meta = self.store.load(stage)
            if meta is not None and isinstance(meta.get("seconds"), (int, float)):
                out.setdefault(stage.kind.name, []).append(float(meta["seconds"]))

        for stage in targets:
            visit(stage)
        return out

    def pending(self, targets: list[Stage]) -> list[Stage]:
        """The stages the targets still need, each once, parents first (nothing below a finished stage:
        it needs nothing from its parents)."""
        seen: dict[str, Stage | None] = {}

        def visit(stage: Stage) -> None:
            if stage.id in seen:
                return
            if self.store.is_done(stage):
                seen[stage.id] = None
                return
            for parent in stage.parents.values():
                visit(parent)
            seen[stage.id] = stage

        for stage in targets:
            visit(stage)
        return [s for s in seen.values() if s is not None]


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
        metas = {p.id: meta for p in stage.parents.values() if (meta := store.load(p)) is not None}
        stage.kind.run(stage.config, inputs_of(stage, store, metas), Path(out), ctx)
