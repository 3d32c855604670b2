"""Stage kinds, stage nodes and the ``runs/`` store (in the manner of tango).

A *stage kind* (one small class per kind, in ``benchmark/stages/``) holds its typed ``Config``, its
``Record`` (``benchmark.stages.records``: what ``run()`` returns), a ``VERSION``, ``run()`` and
``describe()``; later stages read its files through ``benchmark.formats``. A *stage*
is one node of the plan: a kind, a config and its parent stages. Its id hashes the kind, the
kind's VERSION, the config, the parents' ids and the content fingerprints of what it reads from
outside ``runs/`` (a checkpoint folder, a local dataset), so a changed input or changed code gives
a new id, and an unchanged stage is found again.

The store publishes a stage by one ``os.replace`` of ``runs/<kind>/.<id>.partial`` onto
``runs/<kind>/<id>``; the folder counts as finished only when its ``config.json`` (written last)
says ``"status": "complete"`` and names its id. ``config.json`` also lists every output file with
its size and sha256, and the package versions and commit that computed it. Reuse checks the sizes
(``--verify``: the hashes too) and the counts a stage shares with its parents (documents, queries);
a damaged stage is reported in one line and recomputed, never reused. Two processes never compute
the same stage at once: see ``benchmark.stages.claims``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Generic, Protocol, TypeVar

from benchmark.common import kill_points
from benchmark.common.atomic import write_json
from benchmark.common.disk import disk_usage
from benchmark.common.errors import BenchmarkError
from benchmark.stages.records import StageRecord, parse


@dataclass
class Context:
    """How stages run in this process (not part of any id): threads, progress bars, the log, and
    the cluster a stage may spread its work over (``benchmark.pipeline.ray_executor.Cluster``: encode shards
    as tasks, training as data-parallel workers); None runs everything in this process."""

    threads: int = 1
    progress: bool = True
    log: Callable[[str], None] = print
    extra: dict[str, Any] | None = None
    cluster: Any = None


CONFIG = "config.json"
COMPLETE = "complete"
WAIT_POLL = 1.0  # seconds between looks at a stage another process is computing


def canonical(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str)


def read_meta(stage_dir: Path | str) -> dict[str, Any]:
    """A stage folder's config.json (raises OSError/ValueError if unreadable)."""
    return json.loads((Path(stage_dir) / CONFIG).read_text(encoding="utf-8"))


def _str_map(value: Any) -> bool:
    return isinstance(value, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in value.items())


def _output_entry(entry: Any) -> bool:
    return (
        isinstance(entry, list)
        and len(entry) == 2
        and isinstance(entry[0], int)
        and not isinstance(entry[0], bool)
        and entry[0] >= 0
        and (entry[1] is None or isinstance(entry[1], str))
    )


def meta_problem(meta: Mapping[str, Any], kind: str | None = None) -> str | None:
    """Where a complete config.json does not have the JSON types the store writes (its outputs, inputs,
    parents, dropped names and seconds; its record through the kind's typed ``from_json``), or None. A
    malformed config.json is damage, found before anything reads a field of it."""
    from benchmark.stages.records import RECORDS, RecordError, StageRecord, parse

    if kind is not None and meta.get("kind") != kind:
        return f"its config.json names kind {meta.get('kind')!r}, not {kind!r}"
    outputs = meta.get("outputs")
    if outputs is not None and not isinstance(outputs, dict):
        return f"its config.json's outputs is {outputs!r:.40}, not a JSON object of [size, sha256]"
    for rel, entry in (outputs or {}).items():
        if not _output_entry(entry):
            return f"its config.json's outputs entry {rel!r} is {entry!r:.40}, not [size, sha256]"
    for key, ok, want in (
        ("inputs", _str_map, "a JSON object of digests"),
        ("parents", _str_map, "a JSON object of stage ids"),
        ("external", lambda v: isinstance(v, dict), "a JSON object"),
        ("config", lambda v: isinstance(v, dict), "a JSON object"),
        ("dropped", lambda v: isinstance(v, list) and all(isinstance(n, str) for n in v), "a JSON list of names"),
        ("seconds", lambda v: isinstance(v, (int, float)) and not isinstance(v, bool), "a number"),
    ):
        if key in meta and not ok(meta[key]):
            return f"its config.json's {key} is {meta[key]!r:.40}, not {want}"
    try:
        parse(meta, RECORDS.get(str(meta.get("kind")), StageRecord))
    except (RecordError, TypeError) as exc:
        return str(exc)
    return None


def content_digest(meta: Mapping[str, Any]) -> str:
    """What a finished stage holds, as one digest of its recorded outputs (paths, sizes, sha256)."""
    return hashlib.sha256(canonical(meta.get("outputs")).encode()).hexdigest()[:16]


def files_problem(folder: Path | str, meta: Mapping[str, Any], hashes: bool = True) -> str | None:
    """Why a finished stage folder does not hold exactly the files its config.json records (one missing,
    of another size or, with ``hashes``, another sha256; or one it never recorded), or None.

    An unrecorded file is not harmless: a shard or collection file added to a folder is read by the
    stage built from it (Lucene indexes every file of a collection folder)."""
    folder = Path(folder)
    dropped = tuple(meta.get("dropped", ()))
    outputs = meta.get("outputs")
    if not isinstance(outputs, dict):
        return "its config.json lists no outputs (written by an older version)"
    for rel, (size, digest) in outputs.items():
        if rel.split("/")[0] in dropped:
            continue
        path = folder / rel
        try:
            actual = path.stat().st_size
        except OSError:
            return f"{rel} is missing"
        if actual != size:
            return f"{rel} is {actual} bytes, recorded {size}"
        if hashes and digest is not None:
            from benchmark.common.fingerprint import sha256_file

            if sha256_file(path) != digest:
                return f"{rel} differs from its recorded sha256"
    extra = sorted(
        rel for rel in output_files(folder, hashes=False) if rel not in outputs and rel.split("/")[0] not in dropped
    )
    if extra:
        more = f" (and {len(extra) - 1} more)" if len(extra) > 1 else ""
        return f"it holds {extra[0]}{more}, which it did not record"
    return None


def output_files(folder: Path, hashes: bool = True) -> dict[str, list[Any]]:
    """Every file under ``folder`` but ``config.json``: relative path → [size, sha256 or None]."""
    from benchmark.common.fingerprint import sha256_file

    out: dict[str, list[Any]] = {}
    for path in sorted(p for p in Path(folder).rglob("*") if p.is_file()):
        rel = path.relative_to(folder).as_posix()
        if rel != CONFIG:
            out[rel] = [path.stat().st_size, sha256_file(path) if hashes else None]
    return out


# --------------------------------------------------------------------------- kinds and nodes


R = TypeVar("R", bound=StageRecord)


@dataclass(frozen=True)
class Inputs:
    """What a running stage gets from its parents: folder and config.json per role."""

    paths: Mapping[str, Path]
    metas: Mapping[str, Mapping[str, Any]]
    #: the content fingerprints of outside inputs as the plan computed them (they are in the stage's id): a
    #: stage compares what it copies with them (``benchmark.common.snapshot``), so it never publishes other
    #: bytes under this id
    external: Mapping[str, Any] = field(default_factory=dict)

    def path(self, role: str) -> Path:
        return self.paths[role]

    def record(self, role: str, as_type: type[R]) -> R:
        """The parent's record, as its kind's record type (``as_type``: that type or a base of it)."""
        return parse(self.metas[role], as_type)

    def __contains__(self, role: str) -> bool:
        return role in self.paths


#: a kind's ``Config`` and ``Record``: ``class Train(StageKind["Train.Config", TrainRecord])`` lets the type
#: checker hold every method of the kind to its own config and record
ConfigT = TypeVar("ConfigT")
RecordT = TypeVar("RecordT", bound=StageRecord)


class StageKind(Generic[ConfigT, RecordT]):
    """One kind of stage. Subclasses set the class attributes and implement ``run``.

    ``VERSION`` enters every id of the kind: bump it when the kind's output would change for the
    same config (``tests/stages/test_stage_versions.py`` fails when its ``sources`` change without a bump).
    """

    name: ClassVar[str]
    VERSION: ClassVar[int]
    Config: ClassVar[type]
    Record: ClassVar[type[StageRecord]] = StageRecord
    parents: ClassVar[tuple[str, ...]] = ()  # required parent roles
    optional_parents: ClassVar[tuple[str, ...]] = ()
    #: parent roles read for their record and small files only: a parent whose large intermediates
    #: were dropped (``--keep indexed``) still serves them, and is not recomputed for them
    light_parents: ClassVar[tuple[str, ...]] = ()
    resumable: ClassVar[bool] = False  # picks up its own partial folder after a kill
    device: ClassVar[str] = "cpu"  # "gpu": runs faster on an accelerator (executors schedule by it)
    sources: ClassVar[tuple[str, ...]] = ()  # modules whose code decides the output

    @classmethod
    def external(cls, config: ConfigT) -> dict[str, Any]:
        """Content fingerprints of what the stage reads from outside runs/ (they enter the id)."""
        return {}

    @classmethod
    def describe(cls, config: ConfigT) -> str:
        return ""

    @classmethod
    def run(cls, config: ConfigT, inputs: Inputs, out: Path, ctx: Context) -> RecordT:
        """Compute the stage into ``out``; the store publishes the folder atomically once this returns.

        Args:
            config: the kind's ``Config`` (it and ``VERSION`` make the id).
            inputs: the finished parent stages by role, and the fingerprints of external inputs.
            out: an empty staging folder (a resumable kind may find its own partial work there).
            ctx: the run's settings that do not enter the id (threads, progress, the executor's device).

        Returns:
            The kind's ``Record``: what the report and the child stages read without opening the files.
        """
        raise NotImplementedError

    @classmethod
    def record_problem(cls, meta: Mapping[str, Any], folder: Path, deep: bool) -> str | None:
        """Where a finished stage's record disagrees with its own files (a record is not trusted where
        it can be derived), or None. Cheap checks always; ``deep`` (``--verify``) may read large files."""
        return None

    @classmethod
    def space_needed(cls, config: ConfigT, inputs: Inputs, out: Path) -> int | None:
        """Bytes the finished output is expected to take, for the line a full disk gets; None: unknown."""
        return None

    #: (record key, parent role, what the stage did): counts that must equal the parent's record's
    counted: ClassVar[tuple[tuple[str, str, str], ...]] = ()

    @classmethod
    def consistent(cls, record: StageRecord, parents: Mapping[str, StageRecord]) -> str | None:
        """A problem when counts disagree with the parents' records (documents, queries), else None."""
        for key, role, did in cls.counted:
            parent = parents.get(role)
            expected = getattr(parent, key, None) if parent is not None and key not in parent.absent else None
            if expected is not None and getattr(record, key, None) != expected:
                return f"{getattr(record, key, None)} {key} {did}, but the {role} stage holds {expected}"
        return None


def added_field(default: Any) -> Any:
    """A config field added after the kind's ids were published. At its default it computes what the
    kind computed before the field existed, so it stays out of the id there, and cached stages keep
    their ids; any other value enters the id."""
    return field(default=default, metadata={"added": True})


def label_field(**kwargs: Any) -> Any:
    """A config field that only names an input whose content ``external()`` fingerprints (a backbone
    given as a registry key, a hub id or a folder of the same files). It stays out of the id, so one
    content gives one stage whatever it is called; config.json still records it."""
    return field(metadata={"label": True}, **kwargs)


def _config_dict(config: Any, labels: bool = True) -> dict[str, Any]:
    if isinstance(config, Mapping):
        return dict(config)
    assert dataclasses.is_dataclass(config) and not isinstance(config, type), f"a config is a dataclass, got {config!r}"
    out = dataclasses.asdict(config)
    for f in dataclasses.fields(config):
        if (f.metadata.get("added") and out[f.name] == f.default) or (not labels and f.metadata.get("label")):
            del out[f.name]
    return out


@dataclass(frozen=True, eq=False)
class Stage:
    """One node of the plan: what to compute (kind + config) from what (parents)."""

    kind: type[StageKind[Any, Any]]
    config: Any
    parents: Mapping[str, Stage] = field(default_factory=dict)

    def __post_init__(self) -> None:
        config_type = getattr(self.kind, "Config", None)
        if config_type is not None and not isinstance(self.config, config_type):
            raise TypeError(f"{self.kind.name} stage needs a {config_type.__name__}, got {type(self.config).__name__}")
        missing = [r for r in self.kind.parents if r not in self.parents]
        extra = [r for r in self.parents if r not in (*self.kind.parents, *self.kind.optional_parents)]
        if missing or extra:
            raise TypeError(
                f"{self.kind.name} stage: parents {sorted(self.parents)}; needs {self.kind.parents}"
                f" (optional {self.kind.optional_parents})"
            )

    @property
    def name(self) -> str:
        return self.kind.name

    @property
    def resumable(self) -> bool:
        return self.kind.resumable

    def payload(self) -> dict[str, Any]:
        """What the id hashes (label fields left out; config.json records the config in full)."""
        cached = self.__dict__.get("_payload")
        if cached is None:
            cached = {
                "kind": self.kind.name,
                "version": self.kind.VERSION,
                "config": _config_dict(self.config, labels=False),
                "external": self.kind.external(self.config),
                "parents": {role: p.id for role, p in sorted(self.parents.items())},
            }
            object.__setattr__(self, "_payload", cached)
        return cached

    @property
    def id(self) -> str:
        cached = self.__dict__.get("_id")
        if cached is None:
            digest = hashlib.sha256(canonical(self.payload()).encode()).hexdigest()[:12]
            cached = f"{self.kind.name}-{digest}"
            object.__setattr__(self, "_id", cached)
        return cached

    def describe(self) -> str:
        return self.kind.describe(self.config)

    def __hash__(self) -> int:
        return hash(self.id)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Stage) and other.id == self.id


StageFn = Callable[[Path], StageRecord | Mapping[str, Any]]


class StageView(Protocol):
    """What the store and the report read of a stage: its id, its kind's name and its parents. A planned
    ``Stage`` is one; so is a stage known by its id only (``benchmark.report.collect.StageRef``, a refresh)."""

    @property
    def id(self) -> str: ...

    @property
    def name(self) -> str: ...

    @property
    def parents(self) -> Mapping[str, StageView]: ...


# --------------------------------------------------------------------------- the store


class Store:
    """The ``runs/`` folder: finds finished stages, verifies them, runs missing ones under a claim,
    publishes them atomically.

    Args:
        root: the runs folder (every node of a cluster mounts the same one).
        force: recompute each stage once in this process even when it is finished.
        verify: check every reused stage's files against their recorded sha256, not only their sizes.
        log: where the one-line reports go ([cached], [run], [damaged], …).
        claim_ttl: seconds without a heartbeat before a holder on another machine counts as dead
            (default: ``$BENCHMARK_CLAIM_TTL``, else ``benchmark.stages.claims.DEFAULT_TTL``).
    """

    def __init__(
        self,
        root: Path | str,
        force: bool = False,
        verify: bool = False,
        log: Callable[[str], None] = print,
        claim_ttl: float | None = None,
    ) -> None:
        from benchmark.stages.claims import Claims

        self.root = Path(root)
        self.force = force
        self.verify = verify
        self.log = log
        self.claims = Claims(log=log, ttl=claim_ttl)
        self.timings: dict[str, float] = {}
        self.sizes: dict[str, int] = {}
        self.damaged: dict[str, str] = {}  # stage id → what was wrong (reported and recomputed)
        self._forced: set[str] = set()
        self._verified: set[str] = set()
        self._hashed: set[str] = set()  # verified with hashes (before a stage reads it, or under verify)
        self.labels: dict[str, str] = {}  # stage id → the system, seed and dataset it serves (the run sets it)

    def name(self, stage: Stage) -> str:
        """A stage as the log names it: its id, and which system it belongs to when the run said so."""
        label = self.labels.get(stage.id)
        return f"{stage.id} ({label})" if label else stage.id

    def check_writable(self) -> None:
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            probe = self.root / f".write-probe-{os.getpid()}"
            probe.write_text("")
            probe.unlink()
        except OSError as exc:
            raise BenchmarkError(
                f"runs folder {str(self.root)!r} is not writable ({exc.strerror}); "
                "fix its permissions or pass --runs-dir DIR (or set BENCHMARK_RUNS_DIR)"
            ) from None

    def sweep(self) -> list[str]:
        """Remove what killed processes of this machine left aside in every kind's folder (an old folder moved
        out at a swap, a damaged one being discarded): no later stage would, as none is named like them."""
        from benchmark.common.leftovers import sweep_leftovers

        if not self.root.is_dir():
            return []
        return [
            name
            for kind in sorted(self.root.iterdir())
            if kind.is_dir() and not kind.name.startswith(".")
            for name in sweep_leftovers(kind)
        ]

    def path(self, stage: StageView) -> Path:
        return self.root / stage.name / stage.id

    def partial_path(self, stage: StageView) -> Path:
        return self.root / stage.name / f".{stage.id}.partial"

    def _complete(self, stage: StageView) -> dict[str, Any] | None:
        """The stage's config.json if the folder says it is this stage, complete (its fields unchecked)."""
        try:
            meta = read_meta(self.path(stage))
        except (OSError, ValueError):
            return None
        if not isinstance(meta, dict) or meta.get("id") != stage.id or meta.get("status") != COMPLETE:
            return None
        return meta

    def load(self, stage: StageView) -> dict[str, Any] | None:
        """The stage's config.json if the folder is complete, really is this stage and has the JSON types the
        store writes (``meta_problem``: a malformed one is damage, which ``lookup`` reports), else None."""
        meta = self._complete(stage)
        return meta if meta is not None and meta_problem(meta, stage.name) is None else None

    def problem(self, stage: Stage, meta: Mapping[str, Any], hashes: bool | None = None) -> str | None:
        """Why a complete folder cannot be reused (a file missing or of the wrong size or hash, a parent
        found damaged in this run or changed since the stage read it, counts that disagree with its
        parents), or None. Hashes are checked with ``verify`` (or ``hashes``)."""
        hashes = self.verify if hashes is None else hashes
        folder = self.path(stage)
        problem = files_problem(folder, meta, hashes)
        if problem:
            return problem
        try:
            problem = stage.kind.record_problem(meta, folder, self.verify)
        except (OSError, ValueError, KeyError, TypeError) as exc:  # its files cannot back its record: damage
            problem = f"its record cannot be checked against its files ({type(exc).__name__}: {exc})"
        if problem:
            return problem
        parents = {role: self.load(p) for role, p in stage.parents.items()}
        recorded = meta.get("inputs") or {}
        for role, parent in sorted(stage.parents.items()):
            if parent.id in self.damaged:
                return f"it was computed from its {role} stage {parent.id}, found damaged in this run"
            found = parents[role]
            if role in recorded and found is not None and recorded[role] != content_digest(found):
                return f"its {role} stage {parent.id} has other content than when it was computed from it"
        known = {role: parse(m, StageRecord) for role, m in parents.items() if m is not None}
        return stage.kind.consistent(parse(meta, StageRecord), known)

    def lookup(self, stage: Stage, hashes: bool = False, dropped_ok: bool = False) -> dict[str, Any] | None:
        """A finished, undamaged folder of ``stage`` (checked once per process; its hashes too with
        ``hashes`` or ``verify``), else None; a damaged one is reported in one line and moved out of the way.
        One whose intermediates were dropped counts only with ``dropped_ok`` (for a child that reads none of them)."""
        meta = self._complete(stage)
        if meta is None:
            return None
        problem = meta_problem(meta, stage.name)
        if problem is None:
            if meta.get("dropped") and not dropped_ok:
                return None
            hashes = hashes or self.verify
            if stage.id in (self._hashed if hashes else self._verified):
                return meta
            problem = self.problem(stage, meta, hashes)
        if problem is None:
            self._verified.add(stage.id)
            if hashes:
                self._hashed.add(stage.id)
            return meta
        self.damaged[stage.id] = problem
        self.log(f"[damaged] {stage.id}: {problem}; recomputing it")
        self._discard(self.path(stage))
        return None

    def _discard(self, folder: Path) -> None:
        from benchmark.common.leftovers import scratch_name

        if folder.exists():
            trash = folder.with_name(scratch_name(folder.name, "discard"))
            os.replace(folder, trash)
            shutil.rmtree(trash, ignore_errors=True)

    def drop(self, stage: Stage, names: list[str]) -> int:
        """Delete large intermediates of a finished stage; it then counts as not done (rerun if needed)."""
        meta = self.load(stage)
        if meta is None:
            return 0
        folder, freed = self.path(stage), 0
        meta["dropped"] = sorted(set(meta.get("dropped", [])) | set(names))
        write_json(folder / CONFIG, meta)  # first: a kill below must not leave a 'complete' folder with holes
        for name in names:
            target = folder / name
            freed += disk_usage(target)
            if target.is_dir():
                shutil.rmtree(target)
            elif target.exists():
                target.unlink()
        return freed

    def is_done(self, stage: Stage, hashes: bool = False, dropped_ok: bool = False) -> bool:
        """Finished and reusable (sizes checked; hashes with ``hashes`` or ``verify``), and not due to be forced."""
        if self.force and stage.id not in self._forced:
            return False
        return self.lookup(stage, hashes, dropped_ok) is not None

    def reached(self, stage: Stage) -> list[Stage]:
        """The parents of a finished ``stage`` that ``verify`` must check too: every one still complete
        (a stage built on a damaged parent is not served; dropped or deleted parents are not needed)."""
        if not self.verify:
            return []
        return [p for p in stage.parents.values() if (m := self._complete(p)) is not None and not m.get("dropped")]

    def run(self, stage: Stage, fn: StageFn, dropped_ok: bool = False) -> dict[str, Any]:
        """Return the stage's config.json, computing and publishing it first if needed.

        Waits while another process computes the same stage, then reuses its result.

        Args:
            stage: the stage to make exist.
            fn: computes it into the partial folder it is given; returns its record (a ``StageRecord``, or
                the record's JSON).
            dropped_ok: a finished stage whose large intermediates were dropped (``--keep indexed``) counts
                as finished (for a child that reads none of them).
        """
        waited = False
        while True:
            if self.is_done(stage, dropped_ok=dropped_ok):
                meta = self.load(stage)
                assert meta is not None
                self.log(f"[cached] {self.name(stage)}")
                self.timings.setdefault(stage.id, 0.0)
                self.sizes.setdefault(stage.id, disk_usage(self.path(stage)))
                return meta
            claim = self.claims.acquire(self.root / stage.kind.name / f".{stage.id}")
            if claim is not None:
                break
            if not waited:
                holder = self.claims.holder_of(self.root / stage.kind.name / f".{stage.id}")
                self.log(f"[wait] {self.name(stage)} is being computed by {holder}")
                waited = True
            time.sleep(WAIT_POLL)
        try:
            if not (self.force and stage.id not in self._forced):
                meta = self.lookup(stage, dropped_ok=dropped_ok)  # finished by the previous holder while we waited
                if meta is not None:
                    self.log(f"[cached] {self.name(stage)}")
                    self.timings.setdefault(stage.id, 0.0)
                    self.sizes.setdefault(stage.id, disk_usage(self.path(stage)))
                    return meta
            return self._compute(stage, fn, claim)
        finally:
            claim.release()

    def _compute(self, stage: Stage, fn: StageFn, claim: Any) -> dict[str, Any]:
        final, partial = self.path(stage), self.partial_path(stage)
        if partial.exists():
            who = f" left by {claim.previous}" if claim.previous else ""
            if stage.resumable:
                self.log(f"[resume] {self.name(stage)}: continuing the partial folder{who}")
            else:
                self.log(f"[clean] {self.name(stage)}: removed the partial folder{who}")
                shutil.rmtree(partial)
        partial.mkdir(parents=True, exist_ok=True)
        inputs = {}
        for role, p in sorted(stage.parents.items()):
            if (m := self.load(p)) is not None:
                inputs[role] = content_digest(m)
        self.log(f"[run] {self.name(stage)}")
        start = time.perf_counter()
        try:
            result = fn(partial)
        except Exception:
            claim.check()  # a successor that took the stage over removed this partial folder: say so, not what broke
            raise
        seconds = time.perf_counter() - start
        from benchmark.common.environment import environment

        record = result.to_json() if isinstance(result, StageRecord) else dict(result)
        payload = stage.payload()
        meta = {
            "id": stage.id,
            "kind": stage.kind.name,
            "version": stage.kind.VERSION,
            "config": _config_dict(stage.config),
            "external": payload["external"],
            "parents": payload["parents"],
            "inputs": inputs,  # the parents' content as read (content_digest): a changed parent is not served
            "record": record,
            "outputs": output_files(partial),
            "environment": environment(),
            "seconds": round(seconds, 3),
            "finished": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "status": COMPLETE,
        }
        parents = {role: self.load(p) for role, p in stage.parents.items()}
        problem = stage.kind.consistent(
            parse(meta, StageRecord), {r: parse(m, StageRecord) for r, m in parents.items() if m is not None}
        )
        if problem and not self.verify:
            raise BenchmarkError(f"{stage.id}: {problem}; its inputs are inconsistent — rerun with --verify")
        if problem:  # --verify checked its inputs' files and records and found nothing: the counting rules disagree
            raise BenchmarkError(
                f"{stage.id}: {problem}, and --verify found the files and records of its inputs intact: "
                "the two stages count by different rules, which no rerun mends; this is a fault of the "
                "harness, not of the data: report this line"
            )
        write_json(partial / CONFIG, meta)
        kill_points.point("stage:publish")
        claim.check()  # a holder declared dead meanwhile must not publish over its successor
        from benchmark.common.leftovers import scratch_name, sweep_leftovers

        sweep_leftovers(final.parent)  # what killed publishers of this kind left aside
        if final.exists():  # forced rerun or a foreign/corrupt folder: move it aside, then swap
            trash = final.with_name(scratch_name(stage.id, "old"))
            os.replace(final, trash)
            kill_points.point("stage:swap")
            os.replace(partial, final)
            shutil.rmtree(trash, ignore_errors=True)
        else:
            os.replace(partial, final)
        self._forced.add(stage.id)
        self._verified.add(stage.id)
        self._hashed.add(stage.id)
        self.timings[stage.id] = seconds
        self.sizes[stage.id] = disk_usage(final)
        self.log(f"[done] {self.name(stage)} in {seconds:.1f}s")
        return meta
