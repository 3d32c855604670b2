"""Content-addressed stage folders under ``runs/`` (in the manner of tango).

A stage's id hashes its kind, its config and its parents' ids, so an unchanged stage is found
again and reused. Work happens in ``runs/<kind>/.<id>.partial`` and becomes visible only through
one ``os.replace``; a folder is complete only when its ``config.json`` says so and names its id.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmark import faults
from benchmark.atomic import write_json
from benchmark.errors import BenchmarkError

CONFIG = "config.json"
COMPLETE = "complete"


def canonical(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str)


def read_meta(stage_dir: Path | str) -> dict[str, Any]:
    """A stage folder's config.json as written by ``Store.run`` (raises OSError/ValueError if unreadable)."""
    return json.loads((Path(stage_dir) / CONFIG).read_text(encoding="utf-8"))


def disk_usage(path: Path) -> int:
    path = Path(path)
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.exists() else 0


@dataclass(frozen=True)
class Stage:
    """One node of the plan: what to compute (kind + config) from what (parents)."""

    kind: str
    config: Mapping[str, Any]
    parents: Mapping[str, "Stage"] = field(default_factory=dict)
    resumable: bool = False  # the stage can pick up its own partial folder after a kill

    @property
    def id(self) -> str:
        payload = {"kind": self.kind, "config": self.config, "parents": {r: p.id for r, p in self.parents.items()}}
        return f"{self.kind}-{hashlib.sha256(canonical(payload).encode()).hexdigest()[:12]}"

    def __hash__(self) -> int:
        return hash(self.id)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Stage) and other.id == self.id


StageFn = Callable[[Path], Mapping[str, Any]]


class Store:
    """The ``runs/`` folder: finds finished stages, runs missing ones, publishes them atomically."""

    def __init__(self, root: Path | str, force: bool = False, log: Callable[[str], None] = print) -> None:
        self.root = Path(root)
        self.force = force
        self.log = log
        self.timings: dict[str, float] = {}
        self.sizes: dict[str, int] = {}
        self._forced: set[str] = set()

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

    def path(self, stage: Stage) -> Path:
        return self.root / stage.kind / stage.id

    def partial_path(self, stage: Stage) -> Path:
        return self.root / stage.kind / f".{stage.id}.partial"

    def load(self, stage: Stage) -> dict[str, Any] | None:
        """The stage's config.json if the folder is complete and really is this stage, else None."""
        try:
            meta = json.loads((self.path(stage) / CONFIG).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        if not isinstance(meta, dict) or meta.get("id") != stage.id or meta.get("status") != COMPLETE:
            return None
        return meta

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

    def is_done(self, stage: Stage) -> bool:
        if self.force and stage.id not in self._forced:
            return False
        meta = self.load(stage)
        return meta is not None and not meta.get("dropped")

    def run(self, stage: Stage, fn: StageFn) -> dict[str, Any]:
        """Return the stage's config.json, computing and publishing it first if needed."""
        name = stage.id
        if self.is_done(stage):
            meta = self.load(stage)
            assert meta is not None
            self.log(f"[cached] {name}")
            self.timings.setdefault(stage.id, 0.0)
            self.sizes.setdefault(stage.id, disk_usage(self.path(stage)))
            return meta
        final, partial = self.path(stage), self.partial_path(stage)
        if partial.exists() and not stage.resumable:
            shutil.rmtree(partial)
        partial.mkdir(parents=True, exist_ok=True)
        self.log(f"[run] {name}")
        start = time.perf_counter()
        record = dict(fn(partial))
        seconds = time.perf_counter() - start
        meta = {
            "id": stage.id,
            "kind": stage.kind,
            "config": dict(stage.config),
            "parents": {role: p.id for role, p in stage.parents.items()},
            "record": record,
            "seconds": round(seconds, 3),
            "finished": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "status": COMPLETE,
        }
        write_json(partial / CONFIG, meta)
        faults.point("stage:publish")
        if final.exists():  # forced rerun or a foreign/corrupt folder: move it aside, then swap
            trash = final.with_name(f".{stage.id}.old-{os.getpid()}")
            os.replace(final, trash)
            faults.point("stage:swap")
            os.replace(partial, final)
            shutil.rmtree(trash, ignore_errors=True)
        else:
            os.replace(partial, final)
        self._forced.add(stage.id)
        self.timings[stage.id] = seconds
        self.sizes[stage.id] = disk_usage(final)
        self.log(f"[done] {name} in {seconds:.1f}s")
        return meta
