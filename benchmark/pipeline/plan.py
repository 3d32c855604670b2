"""From a suite to a graph of stages: suite → data → backbone (+ rescale) → train → encode → index → search → evaluate.

Building the plan loads no model and touches no index, so it can be validated and printed
(``--dry-run``) before any work starts. Variants that give the same weights (``x1`` and
``baseline``; a head matched to its own backbone) share one stage and one table row.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from benchmark.common.errors import BenchmarkError
from benchmark.data.sources import is_path, parse
from benchmark.stages import Backbone, Corpus, Encode, Evaluate, Index, Queries, RunFile, Search, Topics, Train, Triples
from benchmark.stages.store import Stage, StageView
from benchmark.suites import Bm25, Suite
from benchmark.training.recipe import Recipe

MINE_DEPTH = 50
TRAIN_SEARCH_K = 100
BASELINE = "baseline"
RUN_SYSTEM = "run"  # a --run file's rows: system "run", variant = its name
PUBLISHED = "published"  # a model trained elsewhere, evaluated as it is: system "published", backbone = its name


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


class SuiteView(Protocol):
    """What a report reads of a suite: its name, its description, its ``[table]`` settings (a
    ``benchmark.suites.Table``, or the same as a dict when read back from results.json) and its expected
    scores."""

    @property
    def name(self) -> str: ...

    @property
    def description(self) -> str: ...

    @property
    def table(self) -> object: ...

    @property
    def expected(self) -> Sequence[object] | None: ...  # the [[expected]] entries (None: not recorded)


class ConditionView(Protocol):
    """What a report reads of one condition (a cell of the tables for one seed) and the stages behind it."""

    @property
    def dataset(self) -> str: ...

    @property
    def system(self) -> str: ...

    @property
    def backbone(self) -> str: ...

    @property
    def variant(self) -> str: ...

    @property
    def factor(self) -> str: ...

    @property
    def method(self) -> str: ...

    @property
    def trained(self) -> bool: ...

    @property
    def seed(self) -> int | None: ...

    @property
    def evaluate(self) -> StageView | None: ...

    @property
    def train(self) -> StageView | None: ...

    @property
    def search(self) -> StageView | None: ...

    @property
    def command(self) -> str: ...


class PlanView(Protocol):
    """What ``benchmark.report.collect`` reads of a plan: the planner's ``Plan`` is one, and so is the plan a
    refresh rebuilds from a results record and its stage ids (``benchmark.report.collect.RecordedPlan``)."""

    @property
    def suite(self) -> SuiteView: ...

    @property
    def measures(self) -> Sequence[str]: ...

    @property
    def dataset_measures(self) -> Mapping[str, Sequence[str]]: ...

    @property
    def columns(self) -> Sequence[str]: ...

    @property
    def groups(self) -> Mapping[str, Sequence[str]]: ...

    @property
    def max_docs(self) -> int | None: ...

    @property
    def max_queries(self) -> int | None: ...

    @property
    def seeds(self) -> Sequence[int]: ...

    @property
    def subset(self) -> str | None: ...

    @property
    def training(self) -> str: ...

    @property
    def conditions(self) -> Sequence[ConditionView]: ...


@dataclass(frozen=True)
class Condition:
    """One cell of the result tables for one seed: a system on a dataset."""

    dataset: str
    system: str  # bm25 | splade | published | run
    backbone: str = ""
    variant: str = ""  # the row label; variants that share one model are joined: "baseline = x1"
    variants: tuple[str, ...] = ()  # the variant names behind the label
    factor: str = ""
    method: str = ""  # how the head was rescaled ("" when it was not)
    trained: bool = False
    seed: int | None = None
    evaluate: Stage | None = None
    train: Stage | None = None
    search: Stage | None = None
    backbone_stage: Stage | None = None
    command: str = ""  # the command that reproduces this row
    engine: str = ""  # the impact search's engine label where it is not Lucene ("pisa:maxscore")

    @property
    def system_key(self) -> tuple[str, str, str, bool]:
        """What identifies a row of the result tables: the same system on every dataset and seed."""
        return (self.system, self.backbone, self.variant, self.trained)

    @property
    def is_baseline(self) -> bool:
        return self.system == "splade" and BASELINE in self.variants

    @property
    def arm(self) -> str:
        """The row label with how its head was rescaled: 'rescaled [projection ×0.0625 = 1/16]'."""
        from benchmark.model.rescale import rescale_tag

        return f"{self.variant} [{rescale_tag(self.method, self.factor)}]" if self.method else self.variant

    def row(self) -> dict[str, Any]:
        return {
            "dataset": self.dataset,
            "system": self.system,
            "backbone": self.backbone,
            "variant": self.variant,
            "variants": list(self.variants),
            "factor": self.factor,
            "method": self.method,
            "trained": self.trained,
            "seed": self.seed,
            "command": self.command,
        } | ({"engine": self.engine} if self.engine else {})


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
        splade = {c.system_key for c in self.conditions if c.system == "splade"}
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
                + "; ".join(f"{n} ({_describe_variant(*v)})" for n, v in self.variants.items())
                + _untie_note(self.backbones, self.variants.values())
            )
            arms: dict[str, list[str]] = {}
            for c in self.conditions:
                if c.system == "splade" and c.arm not in arms.setdefault(c.backbone, []):
                    arms[c.backbone].append(c.arm)
            from benchmark.model.rescale import tie_note

            rescaled = {c.backbone for c in self.conditions if c.system == "splade" and c.method in ("once", "untie")}
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
                lines.append("  " + _tuned_note(r.get("tuned_on", ""), self.datasets))
            else:
                lines.append("training: none (untrained backbones)")
        elif self.suite.bm25 is not None:
            lines.append(
                f"matrix: BM25 × {len(self.datasets)} dataset(s) = "
                f"{sum(c.system == 'bm25' for c in self.conditions)} conditions"
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
        """Stage id → what it belongs to, for the log: ``bert-tiny x4, seed 42, beir/scifact/test``,
        ``BM25, beir/nfcorpus/test``. A hash alone does not say which system a stage of a long run is.

        Read from the stage and its ancestors (the backbone, the training seed, the dataset of its
        topics or corpus); the variant label from the rows whose model the backbone stage is. A part
        shared by nothing (a corpus serves every system) is left out."""
        variants: dict[str, list[str]] = {}
        for c in self.conditions:
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
        for stage in self.stages():
            f = gather(stage)
            parts = []
            if len(f["model"]) == 1:
                (model,) = f["model"]
                trains = stage.kind.name not in (Backbone.name, Train.name) and not f["seed"]
                parts.append(model + (" untrained" if trains and self.recipe is not None else ""))
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


def _fmt_factor(f: float) -> str:
    return f"{f:g}"


def _describe_variant(spec: Any, overrides: dict[str, Any]) -> str:
    return spec.description + "".join(
        f", {k} = {v:g}" if isinstance(v, float) else f", {k} = {v}" for k, v in sorted(overrides.items())
    )


def _tuned_note(tuned_on: str, datasets: Sequence[str]) -> str:
    """Which split the recipe was tuned on, and whether this plan reports on it (a leak that favours it)."""
    if not tuned_on:
        return "tuned on: not stated in the recipe file"
    leak = tuned_on in datasets
    return f"tuned on: {tuned_on}" + (
        ", a split this plan reports on: its numbers there favour the recipe's arms" if leak else ""
    )


def _untie_note(backbones: Sequence[str], variants: Any) -> str:
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


def variant_specs(suite: Suite, names: Sequence[str], opts: Options, all_variants: bool = False) -> dict[str, Any]:
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
        table[f"k{_fmt_factor(k)}"] = (Rescale("factor", 1.0 / k, scale_bias=scale_bias, method=method), {})
    for f in suite.splade.sweep:
        table[f"x{_fmt_factor(f)}"] = (Rescale("factor", f, scale_bias=scale_bias, method=method), {})
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


def _factor_label(spec: Any) -> str:
    if spec.mode == "none":
        return "1"
    if spec.mode == "factor":
        return _fmt_factor(spec.factor)
    return f"match:{spec.match}"


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
    parts = []
    for flag, value in opts.narrowing():
        if flag == "datasets":
            value = "+".join(_short_dataset(d) for d in value.split(","))
        elif flag in ("backbones", "published", "recipe"):
            value = ",".join(_short_model(m) for m in value.split(","))
        parts.append(f"{flag}={value}")
    return ",".join(parts) or None


def _short_model(name: str) -> str:
    """A model or recipe as a label names it: a local model folder by its name and content digest
    (benchmark.model.identity), a recipe file by its own name (the label names the results folder, which
    holds no machine path); keys and hub ids as given."""
    from pathlib import Path

    from benchmark.model.identity import local_folder, model_label

    if local_folder(name) is not None:
        return model_label(name)
    if name.startswith(("/", "~", ".")):
        return Path(name.rstrip("/\\")).name or name
    return name


def subset_folder(label: str) -> str:
    """A filesystem-safe folder name for a subset label: long labels keep a prefix and a digest."""
    import hashlib
    import re

    name = re.sub(r"[^A-Za-z0-9=+,.:_~-]", "_", label)
    if len(name) > 80:
        name = name[:60] + "-" + hashlib.sha1(name.encode()).hexdigest()[:8]
    return name


def _short_dataset(name: str) -> str:
    """A dataset in a subset label (and so in its results folder's name). A local folder carries its content
    digest, ``cisi~1a2b3c4d``: two folders of one name, run apart, must not publish into one results folder,
    the second's numbers under the first's name."""
    try:
        return parse(name).short()
    except BenchmarkError:  # a name in no known form: validation names it before any results folder is written
        return name


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
    datasets, columns, groups = _select_datasets(suite, opts.datasets or list(suite.datasets), problems)
    plan = Plan(suite, datasets, suite.all_measures(), columns=columns, groups=groups, suite_arg=suite_arg)
    plan.dataset_measures = {name: suite.measures_of(name) for name in datasets}
    max_docs = opts.max_docs if opts.max_docs is not None else suite.max_docs
    max_queries = opts.max_queries if opts.max_queries is not None else suite.max_queries
    plan.max_docs, plan.max_queries = max_docs, max_queries
    plan.subset = subset_label(opts)

    def evaluate(search: Stage, name: str) -> Stage:
        t, c = data_stages(name, max_docs, max_queries)
        return Stage(
            Evaluate, Evaluate.Config(tuple(sorted(suite.measures_of(name)))), {"run": search, "topics": t, "corpus": c}
        )

    from benchmark.pipeline.commands import systems_problem

    problem = systems_problem(suite, opts)
    if problem:
        problems.append(problem)
    for name in datasets:
        if suite.bm25 is not None and opts.wants("bm25"):
            topics, corpus = data_stages(name, max_docs, max_queries)
            idx = Stage(Index, Index.Config("bm25"), {"source": corpus})
            search = Stage(
                Search,
                Search.Config(suite.k, suite.bm25.k1, suite.bm25.b, suite.removes_query(name)),
                {"index": idx, "queries": topics},
            )
            plan.conditions.append(
                Condition(
                    name,
                    "bm25",
                    evaluate=evaluate(search, name),
                    search=search,
                    command=reproduce_command(suite_arg, opts, systems="bm25", datasets=name),
                )
            )
    if opts.runs and len(datasets) != 1:
        problems.append(
            f"--run evaluates a run file on one dataset, and this run has {len(datasets)} "
            f"({', '.join(datasets) or 'none'}); pass --datasets with the one the run file was made on"
        )
    elif opts.runs:
        topics, corpus = data_stages(datasets[0], max_docs, max_queries)
        for run_name, path in opts.runs:
            source = Stage(RunFile, RunFile.Config(path), {"topics": topics, "corpus": corpus})
            plan.conditions.append(
                Condition(
                    datasets[0],
                    RUN_SYSTEM,
                    variant=run_name,
                    evaluate=evaluate(source, datasets[0]),
                    search=source,
                    command=reproduce_command(suite_arg, opts, systems=RUN_SYSTEM, run=run_name),
                )
            )

    e = suite.encode
    doc_cfg = Encode.Config(e.max_doc_length, e.batch_size, e.shard_size, e.precision, e.attn_implementation, e.compile)
    query_cfg = Queries.Config(e.max_query_length, e.batch_size, e.precision, e.attn_implementation)

    choices = _engine_choices(suite, opts, problems)

    def impact_search(model: Stage, name: str, limit: int | None = None, choice: Any = None) -> tuple[Stage, Stage]:
        """(evaluate, search) of a model's encodings of ``name``, searched in an impact index of ``choice``'s
        engine (Lucene when None); ``limit``: the model's own max_seq_length, which caps the suite's lengths
        (a smaller suite setting stands)."""
        topics, corpus = data_stages(name, max_docs, max_queries)
        docs, query = doc_cfg, query_cfg
        if limit is not None:
            docs = dataclasses.replace(docs, max_length=min(docs.max_length, limit))
            query = dataclasses.replace(query, max_length=min(query.max_length, limit))
        encode = Stage(Encode, docs, {"model": model, "corpus": corpus})
        queries = Stage(Queries, query, {"model": model, "topics": topics})
        engine, spec = (choice.engine.name, choice.spec) if choice is not None else ("lucene", "lucene")
        idx = Stage(Index, Index.Config("impact", engine=engine), {"source": encode})
        search = Stage(
            Search,
            Search.Config(suite.k, remove_query=suite.removes_query(name), exact=True, engine=spec),
            {"index": idx, "queries": queries, "docs": encode},
        )
        return evaluate(search, name), search

    published = (
        opts.published if opts.published is not None else list(suite.published.models if suite.published else [])
    )
    late: list[Condition] = []  # the published rows follow the harness's own
    if published and opts.wants(PUBLISHED):
        from benchmark.model.rescale import Rescale

        plan.published = _distinct_models(published, plan)
        for model in plan.published:
            # the checkpoint as it is: the same backbone stage as an untrained baseline of that name
            init = Stage(Backbone, Backbone.Config(model, Rescale().canonical_for(model)))
            limit = _sparse_encoder_length(model)
            for name in datasets:
                for choice in choices:
                    ev, search = impact_search(init, name, limit, choice)
                    late.append(
                        Condition(
                            name,
                            PUBLISHED,
                            model,
                            _engine_label("", choice),
                            (),
                            "1",
                            trained=False,
                            evaluate=ev,
                            search=search,
                            backbone_stage=init,
                            command=reproduce_command(
                                suite_arg,
                                opts,
                                systems=PUBLISHED,
                                datasets=name,
                                published=model,
                                engines=_engine_flag(choice, choices),
                            ),
                            engine=_engine_name(choice),
                        )
                    )
    if suite.splade is None or not opts.wants("splade"):
        plan.conditions.extend(late)
        return plan
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
            train_inputs = _train_inputs(suite, recipe_name, opts.recipe_overrides())
        except BenchmarkError as exc:
            problems.append(str(exc))
    seeds = list(opts.seeds or sp.seeds)
    plan.backbones, plan.variants, plan.seeds = list(backbones), dict(variants), seeds
    plan.recipe = dataclasses.asdict(train_inputs[0]) if train_inputs is not None else None
    if plan.recipe is not None and recipe_name:
        from benchmark.training.recipe import recipe_tuned_on

        plan.recipe["tuned_on"] = recipe_tuned_on(recipe_name)  # a record, not in the train stage's id
    for backbone in _distinct_backbones(backbones, plan):
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
                row: dict[str, Any] = {"systems": "splade", "backbones": backbone, "variants": vnames[0], "seeds": seed}
                if train is None and train_inputs is not None:
                    row["untrained"] = True
                elif train is not None and sp.untrained:
                    row["trained"] = True
                for name in datasets:
                    for choice in choices:
                        ev, search = impact_search(trained_or_init, name, choice=choice)
                        plan.conditions.append(
                            Condition(
                                name,
                                "splade",
                                backbone,
                                _engine_label(label, choice),
                                tuple(vnames),
                                _factor_label(spec),
                                spec.method if spec.mode != "none" else "",
                                trained=train is not None,
                                seed=seed,
                                evaluate=ev,
                                train=train,
                                search=search,
                                backbone_stage=init,
                                command=reproduce_command(
                                    suite_arg, opts, datasets=name, engines=_engine_flag(choice, choices), **row
                                ),
                                engine=_engine_name(choice),
                            )
                        )
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


def _engine_name(choice: Any) -> str:
    return "" if choice.engine.name == "lucene" else choice.name


def _engine_flag(choice: Any, choices: list[Any]) -> str | None:
    """A row command's ``--engines``: the row's own engine where the run searched with another than Lucene alone."""
    return choice.name if len(choices) > 1 or choice.engine.name != "lucene" else None


def _engine_label(label: str, choice: Any) -> str:
    """A row's label with its engine where it is not Lucene: ``baseline · pisa:maxscore``, and ``(approximate)``
    for an approximate point."""
    if choice.engine.name == "lucene":
        return label
    return f"{label} · {choice.label}" if label else choice.label


def _sparse_encoder_length(name: str) -> int | None:
    """A SparseEncoder folder's max_seq_length (the lengths it encodes at), None for anything else."""
    from pathlib import Path

    from benchmark.model.loader import resolve_backbone
    from benchmark.model.st_modules import max_seq_length

    try:
        source = Path(resolve_backbone(name))
    except BenchmarkError:
        return None  # validation names it
    return max_seq_length(source) if source.is_dir() else None


def _distinct_models(models: Sequence[str], plan: Plan) -> list[str]:
    """Published models, one per checkpoint content (as ``_distinct_backbones``)."""
    first: dict[str, str] = {}
    for name in models:
        key = Stage(Backbone, Backbone.Config(name)).id
        if key in first:
            plan.same_backbones.setdefault(first[key], []).append(name)
        else:
            first[key] = name
    return list(first.values())


def _distinct_backbones(backbones: Sequence[str], plan: Plan) -> list[str]:
    """One name per checkpoint content: a registry key, its hub id and a folder of the same files are
    one backbone stage (its id sees the content, not the name), so they get one row, named as first
    listed; the other names are kept in ``plan.same_backbones`` for the summary."""
    first: dict[str, str] = {}
    for name in backbones:
        key = Stage(Backbone, Backbone.Config(name)).id
        if key in first:
            plan.same_backbones.setdefault(first[key], []).append(name)
        else:
            first[key] = name
    plan.backbones = list(first.values())
    return plan.backbones


def _train_inputs(
    suite: Suite, recipe_name: str, overrides: Sequence[tuple[list[str], Any]] = ()
) -> tuple[Recipe, Stage]:
    """The recipe (every field enters the train stage's id, so edits to it, and ``--set recipe.KEY=VALUE``,
    re-key the stage) and the triples stage it trains on."""
    from benchmark.training.recipe import load_recipe

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
    topics, corpus = data_stages(dataset, None, as_dict.get("max_train_queries"))
    idx = Stage(Index, Index.Config("bm25"), {"source": corpus})
    bm25 = suite.bm25 or Bm25()  # mining uses BM25 even in a suite that does not report it
    search = Stage(Search, Search.Config(TRAIN_SEARCH_K, bm25.k1, bm25.b), {"index": idx, "queries": topics})
    mined = Stage(
        Triples,
        Triples.Config("bm25", depth=MINE_DEPTH, seed=seed, limit=limit),
        {"topics": topics, "corpus": corpus, "run": search},
    )
    return recipe, mined


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
