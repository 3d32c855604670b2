"""SPLADE trained (or left untrained) here: backbones × variants (how the MLM head is rescaled) × seeds, one
row per backbone, variant and training state; variants that give the same weights share one stage and row."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from benchmark.common.errors import BenchmarkError
from benchmark.pipeline.systems.base import (
    BASELINE,
    SPLADE,
    Build,
    Condition,
    RowKey,
    System,
    engine_label,
    engine_name,
    tag_text,
)
from benchmark.pipeline.systems.published import distinct
from benchmark.stages import Backbone, Index, Search, Train, Triples
from benchmark.stages.store import Stage
from benchmark.suites import Bm25, Suite
from benchmark.training.recipe import Recipe

MINE_DEPTH = 50
TRAIN_SEARCH_K = 100


class SpladeSystem(System):
    order = 40
    name = SPLADE
    has_baseline = True
    trains = True

    def present(self, suite: Any, opts: Any) -> bool:
        return suite.splade is not None

    def conditions(self, build: Build) -> list[Condition]:
        suite, opts, plan, problems = build.suite, build.opts, build.plan, build.problems
        if suite.splade is None:
            return []
        sp = suite.splade
        backbones = opts.backbones or list(sp.backbones)
        names = opts.variants or list(sp.variants)
        try:
            variants = variant_specs(suite, names, opts)
        except BenchmarkError as exc:
            problems.append(str(exc))
            valid = variant_specs(suite, [], opts, all_variants=True)
            variants = {n: valid[n] for n in names if n in valid}
        recipe_name = opts.recipe or sp.recipe
        if (
            recipe_name
            and not opts.recipe
            and sp.slice_recipe
            and sp.slice_recipe != recipe_name
            and (opts.max_docs is not None or opts.max_queries is not None)
        ):
            recipe_name, plan.slice_training = sp.slice_recipe, True
        train_inputs = None
        if recipe_name:
            try:
                train_inputs = _train_inputs(build, recipe_name, opts.recipe_overrides())
            except BenchmarkError as exc:
                problems.append(str(exc))
        seeds = list(opts.seeds or sp.seeds)
        plan.backbones, plan.variants, plan.seeds = list(backbones), dict(variants), seeds
        plan.recipe = dataclasses.asdict(train_inputs[0]) if train_inputs is not None else None
        if plan.recipe is not None and recipe_name:
            from benchmark.training.recipe import recipe_tuned_on

            plan.recipe["tuned_on"] = recipe_tuned_on(recipe_name)  # a record, not in the train stage's id
        plan.backbones = distinct(backbones, plan.same_backbones)
        out = []
        for backbone in plan.backbones:
            # variants that give the same weights and training share one stage and one row
            arms: dict[str, tuple[list[str], Any, dict[str, Any]]] = {}
            for vname, (spec, overrides) in variants.items():
                spec = spec.canonical_for(backbone)
                key = repr((spec.to_dict(), sorted(overrides.items())))
                arms.setdefault(key, ([], spec, overrides))[0].append(vname)
            for vnames, spec, overrides in arms.values():
                label = " = ".join(vnames)
                init = Stage(Backbone, Backbone.Config(backbone, spec))
                models: list[tuple[Stage, Stage | None, int | None]] = []
                if train_inputs is not None:
                    recipe, mined = train_inputs
                    for each in seeds:
                        trained = Stage(
                            Train, Train.Config(recipe, each, dict(overrides)), {"init": init, "triples": mined}
                        )
                        models.append((trained, trained, each))
                if (train_inputs is None or sp.untrained) and not overrides:
                    models.append((init, None, None))
                for trained_or_init, train, seed in models:
                    row: dict[str, Any] = {
                        "systems": SPLADE,
                        "backbones": backbone,
                        "variants": vnames[0],
                        "seeds": seed,
                    }
                    if train is None and train_inputs is not None:
                        row["untrained"] = True
                    elif train is not None and sp.untrained:
                        row["trained"] = True
                    for name in build.datasets:
                        for choice in build.engines:
                            ev, search = build.impact_search(trained_or_init, name, choice=choice)
                            out.append(
                                Condition(
                                    name,
                                    SPLADE,
                                    backbone,
                                    engine_label(label, choice),
                                    tuple(vnames),
                                    factor_label(spec),
                                    spec.method if spec.mode != "none" else "",
                                    trained=train is not None,
                                    seed=seed,
                                    evaluate=ev,
                                    train=train,
                                    search=search,
                                    backbone_stage=init,
                                    command=build.command(datasets=name, engines=build.engine_flag(choice), **row),
                                    engine=engine_name(choice),
                                )
                            )
        return out

    def label(self, key: RowKey) -> str:
        label = f"SPLADE {key.backbone} {key.variant}"
        return label if key.trained else f"{label} (untrained)"

    def tag(self, c: Any) -> str:
        parts = [c.system, c.backbone, c.variant.replace(" ", "")]
        if c.method:
            parts.append(f"{c.method}-{c.factor}")
        parts.append(f"seed{c.seed}" if c.trained and c.seed is not None else ("trained" if c.trained else "untrained"))
        return tag_text(".".join(p for p in parts if p))

    def untrained_cell(self, c: Any) -> str:
        return "untrained"

    def dry_run(self, c: Condition) -> str:
        trained = "trained, seed " + str(c.seed) if c.trained else "untrained"
        return f"{c.system} {c.backbone} {c.variant} (factor {c.factor}, {trained})"

    def matches(self, entry: Any, cond: Any) -> bool:
        return (
            (not entry.backbone or cond.backbone == entry.backbone)
            and (entry.variant or BASELINE) in (getattr(cond, "variants", ()) or (cond.variant,))
            and (entry.trained is None or cond.trained == entry.trained)
        )

    def describe(self, entry: Any) -> str:
        trained = "" if entry.trained is None else (" trained" if entry.trained else " untrained")
        return f"splade {entry.backbone or '*'} {entry.variant or BASELINE}{trained}"


SYSTEM = SpladeSystem()


def fmt_factor(f: float) -> str:
    return f"{f:g}"


def describe_variant(spec: Any, overrides: dict[str, Any]) -> str:
    return spec.description + "".join(
        f", {k} = {v:g}" if isinstance(v, float) else f", {k} = {v}" for k, v in sorted(overrides.items())
    )


def tuned_note(tuned_on: str, datasets: Sequence[str]) -> str:
    """Which split the recipe was tuned on, and whether this plan reports on it (a leak that favours it)."""
    if not tuned_on:
        return "tuned on: not stated in the recipe file"
    leak = any(split in datasets for split in tuned_on.split(", "))
    return f"tuned on: {tuned_on}" + (
        ", a split this plan reports on: its numbers there favour the recipe's arms" if leak else ""
    )


def untie_note(backbones: Sequence[str], variants: Any) -> str:
    """Where a variant says 'once' but a backbone's tie makes it 'untie': which backbones, so the header
    does not call their arm the paper's method."""
    from benchmark.model.rescale import tie_handling

    if not any(spec.method == "once" and spec.mode != "none" for spec, _ in variants):
        return ""
    untied = [b for b in backbones if tie_handling(b) == "untie"]
    if not untied:
        return ""
    return (
        f"; on {', '.join(untied)} 'once' runs as 'untie', an untied scaled copy: this harness's extension, "
        "not the paper's method"
    )


def factor_label(spec: Any) -> str:
    if spec.mode == "none":
        return "1"
    if spec.mode == "factor":
        return fmt_factor(spec.factor)
    return f"match:{spec.match}"


def variant_specs(suite: Suite, names: Sequence[str], opts: Any, all_variants: bool = False) -> dict[str, Any]:
    """Variant name → (Rescale spec, recipe overrides); every bad name is reported at once with the valid ones."""
    from benchmark.model.rescale import Rescale

    assert suite.splade is not None
    rs = suite.splade.rescale
    scale_bias, method = rs.scale_bias, opts.rescale_method or rs.method
    stat = opts.match_stat or rs.match_stat
    suite_spec = (rs.mode, rs.alpha, rs.match)
    try:
        rescaled = Rescale.from_options(opts.rescale_factor, opts.match_norm, scale_bias, method, stat, suite_spec)
    except BenchmarkError:
        if not all_variants:
            raise
        rescaled = Rescale.from_options(None, None, scale_bias, method, stat, suite_spec)
    table: dict[str, Any] = {BASELINE: (Rescale(mode="none"), {}), "rescaled": (rescaled, {})}
    for k in suite.splade.k_grid:
        table[f"k{fmt_factor(k)}"] = (Rescale("factor", 1.0 / k, scale_bias=scale_bias, method=method), {})
    for f in suite.splade.sweep:
        table[f"x{fmt_factor(f)}"] = (Rescale("factor", f, scale_bias=scale_bias, method=method), {})
    for v in suite.splade.extra_variants:
        spec = (
            Rescale("factor", v.factor, scale_bias=scale_bias, method=v.method or method)
            if v.factor is not None
            else Rescale()
        )
        table[v.name] = (spec, dict(v.overrides))
    reference = opts.match_norm or rs.match
    if reference is not None:
        # This harness's extensions, run only when named in --variants: the head matched to the reference
        # backbone's statistic (the paper uses one fixed k), via head-norm or via the projection.
        table.setdefault(
            "head-norm",
            (Rescale("match", match=reference, match_stat=stat, scale_bias=scale_bias, method="head-norm"), {}),
        )
        from benchmark.model.rescale import STATISTICS

        for name in STATISTICS:
            table.setdefault(
                f"match-{name}",
                (Rescale("match", match=reference, match_stat=name, scale_bias=scale_bias, method=method), {}),
            )
    if all_variants:
        return table
    bad = [n for n in names if n not in table]
    if bad:
        from benchmark.common.command_line import did_you_mean

        close = [hint for hint in (did_you_mean(n, table) for n in bad) if hint]
        hint = f" (did you mean {', '.join(map(repr, close))}?)" if close else ""
        raise BenchmarkError(
            f"unknown variant(s) {', '.join(map(repr, bad))}{hint}; valid: {', '.join(table)}. Pass them to "
            "--variants, comma-separated"
        )
    return {n: table[n] for n in names}


def _train_inputs(
    build: Build, recipe_name: str, overrides: Sequence[tuple[list[str], Any]] = ()
) -> tuple[Recipe, Stage]:
    """The recipe (every field enters the train stage's id, so edits to it, and ``--set recipe.KEY=VALUE``,
    re-key the stage) and the triples stage it trains on."""
    from benchmark.training.recipe import load_recipe

    suite = build.suite
    recipe = load_recipe(recipe_name, overrides)
    as_dict = dataclasses.asdict(recipe)
    dataset = as_dict.get("dataset") or as_dict.get("train_dataset")
    if not dataset:
        raise BenchmarkError(
            f'recipe {recipe_name!r} names no training dataset; add dataset = "<ir_datasets id>" to it'
        )
    negatives = as_dict.get("negatives", "bm25")
    seed = suite.splade.data_seed if suite.splade else 42
    # Enough examples for the whole run, when the recipe bounds it by steps, plus room for the rows of
    # the held-out dev queries, which training drops (MS MARCO triples: ~50 rows per query).
    limit = (
        as_dict["max_steps"] * as_dict["batch_size"] + 100 * as_dict.get("dev_queries", 0)
        if as_dict.get("max_steps", -1) > 0
        else 0
    )
    if negatives != "bm25":
        return recipe, Stage(Triples, Triples.Config(negatives, dataset=dataset, limit=limit))
    topics, corpus = build.data_stages(dataset, None, as_dict.get("max_train_queries"))
    idx = Stage(Index, Index.Config("bm25"), {"source": corpus})
    bm25 = suite.bm25 or Bm25()  # mining uses BM25 even in a suite that does not report it
    search = Stage(Search, Search.Config(TRAIN_SEARCH_K, bm25.k1, bm25.b), {"index": idx, "queries": topics})
    mined = Stage(
        Triples,
        Triples.Config("bm25", depth=MINE_DEPTH, seed=seed, limit=limit),
        {"topics": topics, "corpus": corpus, "run": search},
    )
    return recipe, mined
