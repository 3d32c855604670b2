"""What each stage of a plan belongs to, for the log: a hash alone does not say which system a stage of a
long run is."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from benchmark.pipeline.systems import PUBLISHED, Condition
from benchmark.stages import Backbone, Corpus, Index, RunFile, Topics, Train, Triples
from benchmark.stages.store import Stage


def stage_labels(conditions: Sequence[Condition], stages: Sequence[Stage], recipe: bool) -> dict[str, str]:
    """Stage id → what it belongs to, for the log: ``bert-tiny x4, seed 42, beir/scifact/test``,
    ``BM25, beir/nfcorpus/test``. A hash alone does not say which system a stage of a long run is.

    Read from the stage and its ancestors (the backbone, the training seed, the dataset of its
    topics or corpus); the variant label from the rows whose model the backbone stage is. A part
    shared by nothing (a corpus serves every system) is left out; ``recipe``: the plan trains models."""
    variants: dict[str, list[str]] = {}
    for c in conditions:
        label = "(published)" if c.system == PUBLISHED else c.variant
        if c.backbone_stage is not None and label not in variants.setdefault(c.backbone_stage.id, []):
            variants[c.backbone_stage.id].append(label)
    facts: dict[str, dict[str, set[Any]]] = {}

    def gather(stage: Stage) -> dict[str, set[Any]]:
        if stage.id in facts:
            return facts[stage.id]
        out: dict[str, set[Any]] = {key: set() for key in ("model", "seed", "topics", "corpus", "bm25", "run")}
        for parent in stage.parents.values():
            for key, values in gather(parent).items():
                out[key] |= values
        kind, config = stage.kind.name, stage.config
        if kind == Backbone.name:
            out["model"].add(f"{config.backbone} {' / '.join(variants.get(stage.id, []))}".strip())
        elif kind == Train.name:
            out["seed"].add(config.seed)
            out["topics"], out["corpus"] = set(), set()  # the recipe's data, not an evaluated dataset
            out["bm25"] = set()
        elif kind == Triples.name:
            out["bm25"] = set()  # negatives mined with BM25: training data, not the BM25 row
        elif kind == Topics.name:
            out["topics"].add(config.dataset)
        elif kind == Corpus.name:
            out["corpus"].add(config.source)
        elif kind == Index.name and config.type == "bm25":
            out["bm25"].add(True)
        elif kind == RunFile.name:
            out["run"].add(config.path.replace("\\", "/").rsplit("/", 1)[-1])
        facts[stage.id] = out
        return out

    labels: dict[str, str] = {}
    for stage in stages:
        f = gather(stage)
        parts = []
        if len(f["model"]) == 1:
            (model,) = f["model"]
            trains = stage.kind.name not in (Backbone.name, Train.name) and not f["seed"]
            parts.append(model + (" untrained" if trains and recipe else ""))
        elif f["bm25"] and not f["model"]:
            parts.append("BM25")
        elif len(f["run"]) == 1:
            parts.append(f"run file {next(iter(f['run']))}")
        if len(f["seed"]) == 1:
            parts.append(f"seed {next(iter(f['seed']))}")
        datasets = f["topics"] or f["corpus"]  # beir/scifact/test, not its documents' beir/scifact
        if len(datasets) == 1 and stage.kind.name not in (Backbone.name, Train.name):
            parts.append(next(iter(datasets)))
        if parts:
            labels[stage.id] = ", ".join(parts)
    return labels
