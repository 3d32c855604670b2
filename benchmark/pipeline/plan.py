"""From a suite to a graph of stages: suite → data → backbone (+ rescale) → train → encode → index → search → evaluate.

Building the plan loads no model and touches no index, so it can be validated and printed
(``--dry-run``) before any work starts. Variants that give the same weights (``x1`` and
``baseline``; a head matched to its own backbone) share one stage and one table row.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from benchmark.common.errors import BenchmarkError
from benchmark.data.sources import is_path, parse
from benchmark.pipeline.stage_labels import stage_labels
from benchmark.pipeline.subset import narrowing_label, subset_folder
from benchmark.pipeline.systems import BM25, PUBLISHED, SPLADE, SYSTEMS, Build, Condition
from benchmark.pipeline.systems.splade import describe_variant, tuned_note, untie_note, variant_specs
from benchmark.pipeline.views import ConditionView, PlanView, SuiteView
from benchmark.stages import Corpus, Topics
from benchmark.stages.store import Stage
from benchmark.suites import Suite

__all__ = [
    "Condition",
    "ConditionView",
    "Options",
    "Plan",
    "PlanView",
    "SuiteView",
    "build_plan",
    "data_stages",
    "subset_folder",
    "variant_specs",
]


@dataclass(frozen=True)
class Options:
    """What the command line can change in a suite."""

    datasets: list[str] | None = None
    backbones: list[str] | None = None
    variants: list[str] | None = None
    rescale_factor: float | None = None
    match_norm: str | None = None
    max_docs: int | None = None
    max_queries: int | None = None
    recipe: str | None = None
    seeds: list[int] | None = None
    rescale_method: str | None = None
    match_stat: str | None = None
    sets: tuple[str, ...] = ()  # --set KEY=VALUE, as given (suite keys, and recipe.KEY)
    runs: tuple[tuple[str, str], ...] = ()  # --run NAME=PATH: (name, absolute path)
    published: list[str] | None = None  # --published: models trained elsewhere, evaluated as they are
    systems: list[str] | None = None  # --systems: the row families kept (None: every family the suite has)
    engines: list[str] | None = None  # --engines: impact search engines (benchmark.retrieval.engines)

    def wants(self, family: str) -> bool:
        """Whether ``--systems`` keeps the rows of ``family`` (bm25, splade, published, run)."""
        return self.systems is None or family in self.systems

    def recipe_overrides(self) -> list[tuple[list[str], Any]]:
        """The ``--set recipe.KEY=VALUE`` items, as (path inside the recipe, value)."""
        from benchmark.common.config import parse_override

        return [(path[1:], value) for path, value in map(parse_override, self.sets) if path[0] == "recipe"]

    def suite_overrides(self) -> list[tuple[list[str], Any]]:
        from benchmark.common.config import parse_override

        return [(path, value) for path, value in map(parse_override, self.sets) if path[0] != "recipe"]

    def narrowing(self) -> list[tuple[str, str]]:
        """The command-line flags that make this run a subset of its suite, as (flag, value)."""
        out = []
        for name in ("systems", "datasets", "backbones", "variants", "seeds", "published", "engines"):
            value = getattr(self, name)
            if value is not None:
                out.append((name, ",".join(map(str, value))))
        for name in (
            "recipe",
            "rescale_factor",
            "match_norm",
            "rescale_method",
            "match_stat",
            "max_docs",
            "max_queries",
        ):
            value = getattr(self, name)
            if value is not None:
                out.append((name.replace("_", "-"), f"{value:g}" if isinstance(value, float) else str(value)))
        out += [("set", item) for item in self.sets]
        out += [("run", name) for name, _ in self.runs]
        return out


@dataclass
class Plan:
    suite: Suite
    datasets: list[str]  # every dataset evaluated (groups expanded to their members)
    measures: list[str]
    conditions: list[Condition] = field(default_factory=list)
    columns: list[str] = field(default_factory=list)  # table columns: datasets and groups, in order
    groups: dict[str, list[str]] = field(default_factory=dict)  # selected groups → their members
    max_docs: int | None = None
    max_queries: int | None = None
    dataset_measures: dict[str, list[str]] = field(default_factory=dict)  # dataset → measures evaluated on it
    backbones: list[str] = field(default_factory=list)
    published: list[str] = field(default_factory=list)  # models trained elsewhere, one row each
    same_backbones: dict[str, list[str]] = field(default_factory=dict)  # a backbone → other names of its checkpoint
    variants: dict[str, Any] = field(default_factory=dict)  # variant name → (Rescale spec, recipe overrides)
    recipe: dict[str, Any] | None = None  # the training recipe as data, None: untrained only
    seeds: list[int] = field(default_factory=list)
    subset: str | None = None  # a label when the command line narrowed the suite, else None
    suite_arg: str = ""  # the --suite value as given (for the reproduce commands)
    slice_training: bool = False  # the recipe is the suite's slice_recipe, because the command line sliced the data

    @property
    def training(self) -> str:
        """One sentence for the tables: which recipe trained the models, and why when it is not the suite's."""
        if self.recipe is None:
            return ""
        text = f"Training: recipe {self.recipe.get('name')} ({self.recipe.get('description', '')})"
        if self.slice_training and self.suite.splade is not None:
            text += (
                f", not the suite's {self.suite.splade.recipe}: a run sliced with --max-docs/--max-queries trains"
                " with the suite's slice_recipe (pass --recipe to choose)"
            )
        return text + "."

    def summary(self) -> str:
        """The matrix in a few lines: what --dry-run prints before the stage list."""
        lines = [f"suite {self.suite.name}: {self.suite.description}"]
        splade = {c.system_key for c in self.conditions if c.system == SPLADE}
        systems = {c.system_key for c in self.conditions}
        if self.suite.splade is not None and self.backbones:
            states = sorted({"trained" if key[3] else "untrained" for key in splade})
            lines.append(
                f"matrix: {len(self.backbones)} backbone(s) × {len(self.variants)} variant(s)"
                f" ({' + '.join(states)}) = {len(splade)} SPLADE system(s)"
                f"{' + BM25' if self.suite.bm25 is not None else ''}; {len(systems)} system(s) × "
                f"{len(self.datasets)} dataset(s) = {len({(c.system_key, c.dataset) for c in self.conditions})}"
                f" conditions" + (f", {len(self.seeds)} seeds each" if len(self.seeds) > 1 and self.recipe else "")
            )
            lines.append(f"backbones: {', '.join(self.backbones)}")
            for name, others in self.same_backbones.items():
                lines.append(f"  {' and '.join(map(repr, others))}: the checkpoint of {name!r} (same content), one row")
            lines.append(
                "variants: "
                + "; ".join(f"{n} ({describe_variant(*v)})" for n, v in self.variants.items())
                + untie_note(self.backbones, self.variants.values())
            )
            arms: dict[str, list[str]] = {}
            for c in self.conditions:
                if c.system == SPLADE and c.arm not in arms.setdefault(c.backbone, []):
                    arms[c.backbone].append(c.arm)
            from benchmark.model.rescale import tie_note

            rescaled = {c.backbone for c in self.conditions if c.system == SPLADE and c.method in ("once", "untie")}
            for backbone, labels in arms.items():
                lines.append(f"  {backbone}: " + "; ".join(labels))
                if backbone in rescaled:
                    lines.append(f"    {tie_note(backbone)}")
            if self.recipe is not None:
                r = self.recipe
                lines.append(
                    f"training: recipe {r.get('name')} — {r.get('description', '')}"
                    + (
                        f" (the suite's slice_recipe for a command-line slice; --recipe {self.suite.splade.recipe}"
                        " trains as the suite does)"
                        if self.slice_training
                        else ""
                    )
                )
                keys = (
                    "loss",
                    "dataset",
                    "negatives",
                    "batch_size",
                    "max_steps",
                    "epochs",
                    "learning_rate",
                    "lambda_q",
                    "lambda_d",
                    "max_grad_norm",
                )
                lines.append("  " + ", ".join(f"{k}={r[k]}" for k in keys if k in r) + f"; seeds {self.seeds}")
                lines.append("  " + tuned_note(r.get("tuned_on", ""), self.datasets))
            else:
                lines.append("training: none (untrained backbones)")
        elif self.suite.bm25 is not None:
            lines.append(
                f"matrix: BM25 × {len(self.datasets)} dataset(s) = "
                f"{sum(c.system == BM25 for c in self.conditions)} conditions"
            )
        if self.published:
            lines.append(
                f"published (trained elsewhere, evaluated as they are): {', '.join(self.published)}; "
                f"{len(self.published)} model(s) × {len(self.datasets)} dataset(s) = "
                f"{sum(c.system == PUBLISHED for c in self.conditions)} conditions"
            )
            for name, others in self.same_backbones.items():
                if name in self.published:
                    lines.append(
                        f"  {' and '.join(map(repr, others))}: the checkpoint of {name!r} (same content), one row"
                    )
        cut = (
            f" (max_docs={self.max_docs}, max_queries={self.max_queries})" if self.max_docs or self.max_queries else ""
        )
        lines.append(f"datasets ({len(self.datasets)}){cut}: {', '.join(self.datasets)}")
        if self.subset:
            lines.append(f"subset of the suite: {self.subset}")
        for group, members in self.groups.items():
            lines.append(f"  {group}: mean over {len(members)} members")
        lines.append(f"measures: {', '.join(self.measures)}")
        counts: dict[str, int] = {}
        for stage in self.stages():
            counts[stage.kind.name] = counts.get(stage.kind.name, 0) + 1
        lines.append(
            "stages: " + ", ".join(f"{k} {n}" for k, n in counts.items()) + f" ({sum(counts.values())} in all)"
        )
        return "\n".join(lines)

    def stage_labels(self) -> dict[str, str]:
        """Stage id → what it belongs to, for the log (``benchmark.pipeline.stage_labels``)."""
        return stage_labels(self.conditions, self.stages(), self.recipe is not None)

    def stages(self) -> list[Stage]:
        """Every stage once, parents before children."""
        seen: dict[str, Stage] = {}

        def visit(stage: Stage) -> Iterator[Stage]:
            for parent in stage.parents.values():
                yield from visit(parent)
            if stage.id not in seen:
                seen[stage.id] = stage
                yield stage

        ordered: list[Stage] = []
        for cond in self.conditions:
            if cond.evaluate is not None:
                ordered.extend(visit(cond.evaluate))
        return ordered


def _select_datasets(
    suite: Suite, requested: Sequence[str], problems: list[str]
) -> tuple[list[str], list[str], dict[str, list[str]]]:
    """(datasets to evaluate, table columns, selected groups); names outside the suite go to ``problems``."""
    known = suite.known_datasets()
    datasets: list[str] = []
    columns: list[str] = []
    groups: dict[str, list[str]] = {}
    bad = []
    for name in requested:
        if name in suite.groups:
            groups[name] = list(suite.groups[name])
            datasets.extend(suite.groups[name])
            columns.append(name)
        elif name in known or is_path(name):  # a local folder runs in any suite
            datasets.append(name)
            columns.append(name)
        else:
            bad.append(name)
    if bad:
        valid = (
            list(suite.datasets)
            + list(suite.optional_datasets)
            + [g for g in suite.groups if g not in suite.optional_datasets]
        )
        problems.append(
            f"dataset(s) {', '.join(map(repr, bad))} not in suite {suite.name!r}; valid: "
            f"{', '.join(dict.fromkeys(valid))} "
            f"(or {'a group member or ' if suite.groups else ''}a local BEIR folder PATH[@split]; any other "
            "ir_datasets id runs without --suite, its measures from its conventions)"
        )
    return list(dict.fromkeys(datasets)), list(dict.fromkeys(columns)), groups


def subset_label(opts: Options) -> str | None:
    """What the command line narrowed, in full (None: the whole suite); tables and pages show it."""
    return narrowing_label(opts.narrowing())


def reproduce_command(suite_arg: str, opts: Options, **row: Any) -> str:
    """The command that recomputes one table row (a narrowing of the suite run): ``benchmark.pipeline.commands``."""
    from benchmark.pipeline.commands import row_command

    return row_command(suite_arg, opts, row)


def build_plan(suite: Suite, opts: Options, problems: list[str] | None = None, suite_arg: str | None = None) -> Plan:
    """The plan for ``suite`` under ``opts``.

    Every problem found (datasets outside the suite, unknown variants, an unknown recipe) is
    reported at once: appended to ``problems`` when given (the caller adds its own checks and
    raises), else raised here as one error.
    """
    found: list[str] = [] if problems is None else problems
    start = len(found)
    plan = _build_plan(suite, opts, found, suite_arg or suite.name)
    if problems is None and len(found) > start:
        raise BenchmarkError(" | ".join(found[start:]))
    return plan


def _build_plan(suite: Suite, opts: Options, problems: list[str], suite_arg: str) -> Plan:
    """The registered systems composed: each that ``--systems`` keeps adds its conditions, in the registry's
    order, a late one's (models trained elsewhere) after the harness's own."""
    datasets, columns, groups = _select_datasets(suite, opts.datasets or list(suite.datasets), problems)
    plan = Plan(suite, datasets, suite.all_measures(), columns=columns, groups=groups, suite_arg=suite_arg)
    plan.dataset_measures = {name: suite.measures_of(name) for name in datasets}
    plan.max_docs = opts.max_docs if opts.max_docs is not None else suite.max_docs
    plan.max_queries = opts.max_queries if opts.max_queries is not None else suite.max_queries
    plan.subset = subset_label(opts)

    def command(**row: Any) -> str:
        return reproduce_command(suite_arg, opts, **row)

    from benchmark.pipeline.commands import systems_problem

    problem = systems_problem(suite, opts)
    if problem:
        problems.append(problem)
    build = Build(suite, opts, plan, datasets, problems, data_stages, command, plan.max_docs, plan.max_queries)
    build.engines = _engine_choices(suite, opts, problems)
    late: list[Condition] = []
    for name in SYSTEMS:
        if not opts.wants(name):
            continue
        system = SYSTEMS[name]
        (late if system.late else plan.conditions).extend(system.conditions(build))
    plan.conditions.extend(late)
    return plan


def _engine_choices(suite: Suite, opts: Options, problems: list[str]) -> list[Any]:
    """The impact search engines of this run (``--engines``, else the suite's ``engines``, else Lucene alone):
    an unknown engine, or one whose package is missing, is a problem named before any work."""
    from benchmark.retrieval import engines

    try:
        return engines.choose_all(opts.engines or suite.engines)
    except BenchmarkError as exc:
        problems.append(str(exc))
        return [engines.choose(engines.DEFAULT)]


def data_stages(name: str, max_docs: int | None, max_queries: int | None) -> tuple[Stage, Stage]:
    """(topics, corpus) of a dataset. Query sets that share documents share the corpus stage (and so
    its encodings and indexes), unless a subset is cut: then the corpus keeps the topics' judged docs."""
    try:
        ref = parse(name)
        dataset, source = ref.place, ref.corpus()  # an id's place is its name
    except Exception:  # an unknown id, or a name in no known form: validation reports it; the plan needs placeholders
        dataset = source = name
    topics = Stage(Topics, Topics.Config(dataset, max_queries, 0))
    corpus = Stage(Corpus, Corpus.Config(source, max_docs, 0), {"topics": topics} if max_docs is not None else {})
    return topics, corpus


def check_factor(value: float | None) -> None:
    if value is not None and (not math.isfinite(value) or value <= 0):
        raise BenchmarkError(
            f"rescale factor {value!r} is not a positive finite number; pass e.g. --rescale-factor 0.25"
        )
