"""The train stage: SPLADE trained from a backbone on a triples stage, by a recipe and a seed.

Resumable: a killed run continues from its last checkpoint in the partial folder. Under torchrun
or Ray Train every rank joins the stage that rank 0 claimed; rank 0 saves and publishes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmark.common.config import from_dict
from benchmark.stages.records import TrainRecord
from benchmark.stages.store import Context, Inputs, StageKind
from benchmark.training.recipe import Recipe


class Train(StageKind["Train.Config", TrainRecord]):
    name = "train"
    VERSION = 5  # 5: recovery needs `patience` healthy armed rows, as firing does; a collapse after the published
    # best checkpoint is collapsed (it read "ok … recovered"). 4: degraded at a stated false-positive rate
    # (one-sided t); a collapse that no longer holds on the
    # published checkpoint is an event, not the outcome. 3: degraded judged on the published checkpoint; per-query
    # dev RR. 2: outcomes decided by armed triggers and a held-out dev batch; no clipping in the recipes
    Record = TrainRecord
    parents = ("init", "triples")
    resumable = True
    device = "gpu"
    sources = (
        "benchmark.formats.checkpoint",
        "benchmark.formats.json_lines",
        "benchmark.formats.triples",
        "benchmark.model.heads",
        "benchmark.splade.impacts",
        "benchmark.training.detector",
        "benchmark.training.dev",
        "benchmark.training.examples",
        "benchmark.training.loop",
        "benchmark.training.losses",
        "benchmark.training.max_pool",
        "benchmark.training.outcomes",
        "benchmark.training.ray_cluster",
        "benchmark.training.recipe",
        "benchmark.training.telemetry",
        "benchmark.stages.train",
    )

    @dataclass(frozen=True)
    class Config:
        # the id hashes every field of the recipe (dataclasses.asdict): editing it re-keys the stage
        recipe: Recipe
        seed: int = 42
        overrides: dict[str, Any] = field(default_factory=dict)  # recipe keys a suite variant changes (λ)

        def __post_init__(self) -> None:
            if isinstance(self.recipe, Mapping):  # the recipe as data (a plan's, a script's)
                object.__setattr__(
                    self, "recipe", from_dict(Recipe, dict(self.recipe), f"recipe {self.recipe.get('name')!r}")
                )

    @classmethod
    def describe(cls, config: Config) -> str:
        extra = "".join(f" {k}={v}" for k, v in sorted(config.overrides.items()))
        return f"recipe={config.recipe.name} seed={config.seed}{extra}"

    @classmethod
    def run(cls, config: Config, inputs: Inputs, out: Path, ctx: Context) -> TrainRecord:
        cluster = getattr(ctx, "cluster", None)
        if cluster is not None:  # every worker trains into ``out``; rank 0 saves and returns the record
            return TrainRecord.from_json(cluster.data_parallel(train, config, inputs, out, ctx.progress))
        return TrainRecord.from_json(train(config, inputs, out, ctx.progress))


def train(config: Train.Config, inputs: Inputs, out: Path, progress: bool) -> dict[str, Any]:
    """One process's part of a train stage (all of it, or one rank's under torchrun or Ray Train)."""
    from benchmark.formats.checkpoint import model_path
    from benchmark.formats.triples import triples_path
    from benchmark.training.loop import train_splade

    return train_splade(
        model_path(inputs.path("init")),
        triples_path(inputs.path("triples")),
        config.recipe,
        out,
        seed=config.seed,
        progress=progress,
        overrides=config.overrides or None,
    )
