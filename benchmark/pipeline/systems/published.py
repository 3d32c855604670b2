"""A SPLADE model trained elsewhere, evaluated as it is (``--published``, a suite's ``[published]``): one row
per checkpoint content, its impacts searched as the harness's own SPLADE rows are."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from benchmark.pipeline.systems.base import (
    PUBLISHED,
    Build,
    Condition,
    RowKey,
    System,
    engine_label,
    engine_name,
    tag_text,
)
from benchmark.stages import Backbone
from benchmark.stages.store import Stage


def model_names(name: str) -> set[str]:
    """The names an expected entry may give a model by: as the run names it, and a local folder by its
    label (``<name>~<digest>``) or its own name alone (a suite file cannot know where a folder lies on
    each machine)."""
    from benchmark.model.identity import label_names, local_folder, model_label

    names = label_names(name)
    if local_folder(name) is not None:
        names |= label_names(model_label(name))
    elif name.startswith(("/", "~", ".")):
        names.add(Path(name.rstrip("/\\")).name)
    return names


def sparse_encoder_length(name: str) -> int | None:
    """A SparseEncoder folder's max_seq_length (the lengths it encodes at), None for anything else."""
    from benchmark.common.errors import BenchmarkError
    from benchmark.model.loader import resolve_backbone
    from benchmark.model.st_modules import max_seq_length

    try:
        source = Path(resolve_backbone(name))
    except BenchmarkError:
        return None  # validation names it
    return max_seq_length(source) if source.is_dir() else None


def distinct(names: Sequence[str], same: dict[str, list[str]]) -> list[str]:
    """One name per checkpoint content: a registry key, its hub id and a folder of the same files are
    one backbone stage (its id sees the content, not the name), so they get one row, named as first
    listed; the other names are added to ``same`` for the summary."""
    first: dict[str, str] = {}
    for name in names:
        key = Stage(Backbone, Backbone.Config(name)).id
        if key in first:
            same.setdefault(first[key], []).append(name)
        else:
            first[key] = name
    return list(first.values())


class PublishedSystem(System):
    order = 30
    name = PUBLISHED
    late = True

    how_to_add = "add --published MODEL"

    def present(self, suite: Any, opts: Any) -> bool:
        return bool(
            opts.published or (opts.published is None and suite.published is not None and suite.published.models)
        )

    def conditions(self, build: Build) -> list[Condition]:
        suite, opts, plan = build.suite, build.opts, build.plan
        models = (
            opts.published if opts.published is not None else list(suite.published.models if suite.published else [])
        )
        if not models:
            return []
        from benchmark.model.rescale import Rescale

        plan.published = distinct(models, plan.same_backbones)
        out = []
        for model in plan.published:
            # the checkpoint as it is: the same backbone stage as an untrained baseline of that name
            init = Stage(Backbone, Backbone.Config(model, Rescale().canonical_for(model)))
            limit = sparse_encoder_length(model)
            for name in build.datasets:
                for choice in build.engines:
                    ev, search = build.impact_search(init, name, limit, choice)
                    out.append(
                        Condition(
                            name,
                            PUBLISHED,
                            model,
                            engine_label("", choice),
                            (),
                            "1",
                            trained=False,
                            evaluate=ev,
                            search=search,
                            backbone_stage=init,
                            command=build.command(
                                systems=PUBLISHED, datasets=name, published=model, engines=build.engine_flag(choice)
                            ),
                            engine=engine_name(choice),
                        )
                    )
        return out

    def label(self, key: RowKey) -> str:
        # trained elsewhere: not a starting point the harness left untrained
        return f"SPLADE {key.backbone} (published)"

    def state(self, key: RowKey) -> str:
        return PUBLISHED

    def tag(self, c: Any) -> str:
        return tag_text(f"{c.system}.{c.backbone}")

    def dry_run(self, c: Condition) -> str:
        return f"published {c.backbone} (trained elsewhere, evaluated as it is)"

    def matches(self, entry: Any, cond: Any) -> bool:
        return not entry.backbone or entry.backbone in model_names(cond.backbone)

    def describe(self, entry: Any) -> str:
        return f"published {entry.backbone or '*'}"

    def evaluates(self, entry: Any, models: Iterable[str]) -> bool:
        return not entry.backbone or any(entry.backbone in model_names(name) for name in models)


SYSTEM = PublishedSystem()
