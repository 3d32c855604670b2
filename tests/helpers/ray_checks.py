"""Programs that tests/system/test_ray.py runs inside its test cluster
(``python tests/helpers/ray_checks.py NAME ARGS``).

``train INIT OUT ADDRESS``: ddp_worker's two SPLADE training steps on two Ray Train workers (one per
node, gloo), through ``benchmark.training.ray_cluster.fit``, as the train stage runs them with workers = 2.

``contain RUNS ADDRESS``: a plan of toy stages where one fails; prints the executor's outcome as JSON.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmark.common.atomic import write_text
from benchmark.common.errors import BenchmarkError
from benchmark.stages.records import StageRecord
from benchmark.stages.store import Inputs, Stage, StageKind


class Leaf(StageKind):
    """A number written to a file; ``fail`` makes the stage raise as a broken stage would."""

    name = "leaf"
    VERSION = 1

    @dataclass(frozen=True)
    class Config:
        value: int
        fail: bool = False

    @classmethod
    def run(cls, config: Config, inputs: Inputs, out: Path, ctx: Any) -> dict[str, Any]:
        if config.fail:
            raise BenchmarkError(f"leaf {config.value} cannot be computed")
        write_text(out / "value.txt", str(config.value))
        return {"value": config.value}


class Total(StageKind):
    """The sum of its two parents' values."""

    name = "total"
    VERSION = 1
    parents = ("a", "b")

    @dataclass(frozen=True)
    class Config:
        pass

    @classmethod
    def run(cls, config: Config, inputs: Inputs, out: Path, ctx: Any) -> dict[str, Any]:
        value = inputs.record("a", StageRecord).details["value"] + inputs.record("b", StageRecord).details["value"]
        write_text(out / "value.txt", str(value))
        return {"value": value}


def toy_plan() -> dict[str, Stage]:
    a, b, c = (Stage(Leaf, Leaf.Config(1)), Stage(Leaf, Leaf.Config(2, fail=True)), Stage(Leaf, Leaf.Config(3)))
    blocked = Stage(Total, Total.Config(), {"a": a, "b": b})
    fine = Stage(Total, Total.Config(), {"a": a, "b": c})
    below = Stage(Total, Total.Config(), {"a": blocked, "b": fine})
    return {"a": a, "b": b, "c": c, "blocked": blocked, "fine": fine, "below": below}


def contain(runs: str, address: str) -> None:
    from benchmark.pipeline.ray_executor import execute
    from benchmark.pipeline.resources import resolve
    from benchmark.stages import Context
    from benchmark.stages.store import Store

    stages = toy_plan()
    outcome = execute(
        Store(runs), Context(progress=False), [stages["below"], stages["fine"]], resolve([Leaf, Total]), set(), address
    )
    names = {s.id: n for n, s in stages.items()}
    print(
        "OUTCOME "
        + json.dumps(
            {
                "done": {names[i]: (m or {}).get("record") for i, m in outcome.done.items()},
                "failed": {names[i]: e for i, e in outcome.failed.items()},
                "blocked": {names[i]: names[r] for i, r in outcome.blocked.items()},
                "summary": outcome.summary({s.id: s for s in stages.values()}),
            }
        )
    )


def train(init: str, out: str, address: str) -> None:
    from ddp_worker import run

    from benchmark.pipeline.ray_executor import connect
    from benchmark.training.ray_cluster import fit

    connect(address)
    fit(run, (Path(init), Path(out)), workers=2, cpus=1, storage=Path(out) / ".ray-train")


if __name__ == "__main__":
    import ray_checks  # the toy kinds must be pickled as ray_checks.*, which the workers import, not __main__.*

    {"train": ray_checks.train, "contain": ray_checks.contain}[sys.argv[1]](*sys.argv[2:])
