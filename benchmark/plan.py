"""From a suite to a graph of stages: suite → data → backbone (+ rescale) → train → encode → index → search → evaluate.

Building the plan loads no model and touches no index, so it can be validated and printed
(``--dry-run``) before any work starts.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from benchmark.data import DatasetRef
from benchmark.errors import BenchmarkError
from benchmark.stage import Stage
from benchmark.suites import Bm25, Suite

MINE_DEPTH = 50
TRAIN_SEARCH_K = 100


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


@dataclass(frozen=True)
class Condition:
    """One cell of the result tables: a system on a dataset."""

    dataset: str
    system: str
    backbone: str = ""
    variant: str = ""
    factor: str = ""
    trained: bool = False
    evaluate: Stage | None = None
    train: Stage | None = None
    seed: int | None = None  # the training seed; several seeds of one system share a table row
    method: str = ""  # the rescale method's label, "" when the head is as pretrained
    search: Stage | None = None
    command: str = ""  # the command line that reproduces this condition

    @property
    def system_key(self) -> tuple[str, str, str, bool]:
        """What identifies a row of the result tables: the same system on every dataset."""
        return (self.system, self.backbone, self.variant, self.trained)

    def row(self) -> dict[str, Any]:
        return {"dataset": self.dataset, "system": self.system, "backbone": self.backbone, "variant": self.variant,
                "factor": self.factor, "trained": self.trained}


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
    variants: dict[str, Any] = field(default_factory=dict)  # variant name → Rescale spec
    recipe: dict[str, Any] | None = None  # the training recipe as data, None: untrained only

    def summary(self) -> str:
        """The matrix in a few lines: what --dry-run prints before the stage list."""
        lines = [f"suite {self.suite.name}: {self.suite.description}"]
        splade = {c.system_key for c in self.conditions if c.system == "splade"}
        systems = {c.system_key for c in self.conditions}
        if self.suite.splade is not None:
            states = sorted({"trained" if key[3] else "untrained" for key in splade})
            lines.append(f"matrix: {len(self.backbones)} backbone(s) × {len(self.variants)} variant(s)"
                         f" ({' + '.join(states)}) = {len(splade)} SPLADE system(s)"
                         f"{' + BM25' if self.suite.bm25 is not None else ''}; {len(systems)} system(s) × "
                         f"{len(self.datasets)} dataset(s) = {len(self.conditions)} conditions")
            lines.append(f"backbones: {', '.join(self.backbones)}")
            lines.append("variants: " + "; ".join(f"{n} ({_describe_rescale(v)})" for n, v in self.variants.items()))
            if self.recipe is not None:
                r = self.recipe
                lines.append(f"training: recipe {r.get('name')} — {r.get('description', '')}")
                keys = ("loss", "dataset", "negatives", "batch_size", "max_steps", "epochs", "learning_rate", "lambda_q", "lambda_d")
                lines.append("  " + ", ".join(f"{k}={r[k]}" for k in keys if k in r))
            else:
                lines.append("training: none (untrained backbones)")
        else:
            lines.append(f"matrix: BM25 × {len(self.datasets)} dataset(s) = {len(self.conditions)} conditions")
        subset = f" (subset: max_docs={self.max_docs}, max_queries={self.max_queries})" if self.max_docs or self.max_queries else ""
        lines.append(f"datasets ({len(self.datasets)}){subset}: {', '.join(self.datasets)}")
        for group, members in self.groups.items():
            lines.append(f"  {group}: mean over {len(members)} members")
        lines.append(f"measures: {', '.join(self.measures)}")
        counts: dict[str, int] = {}
        for stage in self.stages():
            counts[stage.kind] = counts.get(stage.kind, 0) + 1
        lines.append("stages: " + ", ".join(f"{k} {n}" for k, n in counts.items()) + f" ({sum(counts.values())} in all)")
        return "\n".join(lines)

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


def _describe_rescale(spec: Any) -> str:
    if spec.mode == "none":
        return "MLM head as pretrained"
    what = f"head × {spec.factor:g}" if spec.mode == "factor" else f"head norm matched to {spec.match}"
    return what + (", bias scaled too" if spec.scale_bias else ", bias kept")


def variant_specs(suite: Suite, names: Sequence[str], opts: Options, all_variants: bool = False) -> dict[str, Any]:
    """Variant name → Rescale spec; every bad name is reported at once with the valid ones."""
    from benchmark.rescale import Rescale

    assert suite.splade is not None
    rs = suite.splade.rescale
    factor = opts.rescale_factor if opts.rescale_factor is not None else rs.factor
    mode, match = rs.mode, rs.match
    if opts.rescale_factor is not None:
        mode, match = "factor", None
    elif opts.match_norm is not None:
        mode, match, factor = "match", opts.match_norm, None
    table: dict[str, Any] = {
        "baseline": Rescale(mode="none"),
        "rescaled": Rescale(mode=mode, factor=factor, match=match, scale_bias=rs.scale_bias),
    }
    for f in suite.splade.sweep:
        table[f"x{_fmt_factor(f)}"] = Rescale(mode="factor", factor=f, scale_bias=rs.scale_bias)
    if all_variants:
        return table
    bad = [n for n in names if n not in table]
    if bad:
        raise BenchmarkError(f"unknown variant(s) {', '.join(map(repr, bad))}; valid: {', '.join(table)}. Pass them to --variants, comma-separated")
    return {n: table[n] for n in names}


def _rescale_label(spec: Any) -> str:
    if spec.mode == "none":
        return "1"
    if spec.mode == "factor":
        return _fmt_factor(spec.factor)
    return f"match:{spec.match}"


def _select_datasets(suite: Suite, requested: Sequence[str], problems: list[str]) -> tuple[list[str], list[str], dict[str, list[str]]]:
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
        elif name in known or DatasetRef(name).local is not None:
            datasets.append(name)
            columns.append(name)
        else:
            bad.append(name)
    if bad:
        valid = list(suite.datasets) + list(suite.optional_datasets) + [g for g in suite.groups if g not in suite.optional_datasets]
        problems.append(
            f"dataset(s) {', '.join(map(repr, bad))} not in suite {suite.name!r}; valid: {', '.join(dict.fromkeys(valid))} "
            f"(or {'a group member or ' if suite.groups else ''}a local BEIR folder PATH[@split])"
        )
    return list(dict.fromkeys(datasets)), list(dict.fromkeys(columns)), groups


def build_plan(suite: Suite, opts: Options, problems: list[str] | None = None) -> Plan:
    """The plan for ``suite`` under ``opts``.

    Every problem found (datasets outside the suite, unknown variants, an unknown recipe) is
    reported at once: appended to ``problems`` when given (the caller adds its own checks and
    raises), else raised here as one error.
    """
    found: list[str] = [] if problems is None else problems
    start = len(found)
    plan = _build_plan(suite, opts, found)
    if problems is None and len(found) > start:
        raise BenchmarkError(" | ".join(found[start:]))
    return plan


def _build_plan(suite: Suite, opts: Options, problems: list[str]) -> Plan:
    datasets, columns, groups = _select_datasets(suite, opts.datasets or list(suite.datasets), problems)
    plan = Plan(suite, datasets, suite.all_measures(), columns=columns, groups=groups)
    plan.dataset_measures = {name: suite.measures_of(name) for name in datasets}
    max_docs = opts.max_docs if opts.max_docs is not None else suite.max_docs
    max_queries = opts.max_queries if opts.max_queries is not None else suite.max_queries
    plan.max_docs, plan.max_queries = max_docs, max_queries

    def evaluate(search: Stage, name: str) -> Stage:
        t, c = data_stages(name, max_docs, max_queries)
        return Stage("evaluate", {"measures": sorted(suite.measures_of(name))}, {"run": search, "topics": t, "corpus": c})

    for name in datasets:
        if suite.bm25 is not None:
            topics, corpus = data_stages(name, max_docs, max_queries)
            idx = Stage("index", {"type": "bm25"}, {"source": corpus})
            search = Stage("search", {"k": suite.k, "k1": suite.bm25.k1, "b": suite.bm25.b}, {"index": idx, "queries": topics})
            plan.conditions.append(Condition(name, "bm25", evaluate=evaluate(search, name)))

    if suite.splade is None:
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
    train_inputs = None
    if recipe_name:
        try:
            train_inputs = _train_inputs(suite, recipe_name)
        except BenchmarkError as exc:
            problems.append(str(exc))
    plan.backbones, plan.variants = list(backbones), dict(variants)
    plan.recipe = train_inputs[0] if train_inputs is not None else None
    e = suite.encode
    doc_cfg = {"max_length": e.max_doc_length, "batch_size": e.batch_size, "shard_size": e.shard_size,
               "scale": e.scale, "precision": e.precision}
    query_cfg = {"max_length": e.max_query_length, "batch_size": e.batch_size, "scale": e.scale, "precision": e.precision}
    for backbone in backbones:
        for vname, spec in variants.items():
            init = Stage("backbone", {"backbone": backbone, "rescale": dataclasses.asdict(spec)})
            models: list[tuple[Stage, Stage | None]] = []
            if train_inputs is not None:
                recipe, mined = train_inputs
                train = Stage("train", {"recipe": recipe, "seed": sp.seed}, {"init": init, "triples": mined}, resumable=True)
                models.append((train, train))
            if train_inputs is None or sp.untrained:
                models.append((init, None))
            for model, train in models:
                for name in datasets:
                    topics, corpus = data_stages(name, max_docs, max_queries)
                    encode = Stage("encode", doc_cfg, {"model": model, "corpus": corpus}, resumable=True)
                    queries = Stage("queries", query_cfg, {"model": model, "topics": topics})
                    idx = Stage("index", {"type": "impact"}, {"source": encode})
                    search = Stage("search", {"k": suite.k}, {"index": idx, "queries": queries})
                    plan.conditions.append(Condition(
                        name, "splade", backbone, vname, _rescale_label(spec), trained=train is not None,
                        evaluate=evaluate(search, name), train=train))
    return plan


def _train_inputs(suite: Suite, recipe_name: str) -> tuple[dict[str, Any], Stage]:
    """The recipe (as data, so edits to it re-key the stage) and the mined-triples stage it trains on."""
    from benchmark.train import load_recipe

    recipe = load_recipe(recipe_name)
    as_dict = dataclasses.asdict(recipe) if dataclasses.is_dataclass(recipe) else dict(recipe)
    dataset = as_dict.get("dataset") or as_dict.get("train_dataset")
    if not dataset:
        raise BenchmarkError(f"recipe {recipe_name!r} names no training dataset; add dataset = \"<ir_datasets id>\" to it")
    negatives = as_dict.get("negatives", "bm25")
    seed = suite.splade.seed if suite.splade else 42
    # Enough examples for the whole run, when the recipe bounds it by steps.
    limit = as_dict["max_steps"] * as_dict["batch_size"] if as_dict.get("max_steps", -1) > 0 else 0
    if negatives != "bm25":
        return as_dict, Stage("triples", {"negatives": negatives, "dataset": dataset, "limit": limit})
    topics, corpus = data_stages(dataset, None, as_dict.get("max_train_queries"))
    idx = Stage("index", {"type": "bm25"}, {"source": corpus})
    bm25 = suite.bm25 or Bm25()  # mining uses BM25 even in a suite that does not report it
    search = Stage("search", {"k": TRAIN_SEARCH_K, "k1": bm25.k1, "b": bm25.b}, {"index": idx, "queries": topics})
    mined = Stage("triples", {"negatives": "bm25", "depth": MINE_DEPTH, "seed": seed, "limit": limit},
                  {"topics": topics, "corpus": corpus, "run": search})
    return as_dict, mined


def data_stages(name: str, max_docs: int | None, max_queries: int | None) -> tuple[Stage, Stage]:
    """(topics, corpus) of a dataset. Query sets that share documents share the corpus stage (and so
    its encodings and indexes), unless a subset is cut: then the corpus keeps the topics' judged docs."""
    from benchmark.data import corpus_fingerprint, corpus_source

    ref = DatasetRef(name)
    dataset = str(ref.local[0]) + "@" + ref.local[1] if ref.local is not None else name
    topics = Stage("topics", {"dataset": dataset, "key": ref.key(), "max_queries": max_queries, "seed": 0})
    try:
        source = corpus_source(name)
    except Exception:  # an unknown id: validation reports it; the plan only needs a placeholder
        source = name
    corpus_cfg = {"source": source, "fingerprint": corpus_fingerprint(name), "max_docs": max_docs, "seed": 0}
    corpus = Stage("corpus", corpus_cfg, {"topics": topics} if max_docs is not None else {})
    return topics, corpus


def parse_list(value: str | None) -> list[str] | None:
    if value is None:
        return None
    items = [v.strip() for v in value.split(",") if v.strip()]
    return items or None


def check_factor(value: float | None) -> None:
    if value is not None and (not math.isfinite(value) or value <= 0):
        raise BenchmarkError(f"rescale factor {value!r} is not a positive finite number; pass e.g. --rescale-factor 0.25")


def describe(stage: Stage) -> str:
    cfg = stage.config
    if stage.kind == "topics":
        return f"{cfg['dataset']}" + (f" (max_queries={cfg['max_queries']})" if cfg["max_queries"] else "")
    if stage.kind == "corpus":
        return f"{cfg['source']}" + (f" (max_docs={cfg['max_docs']})" if cfg["max_docs"] else "")
    if stage.kind == "backbone":
        r = cfg["rescale"]
        return f"{cfg['backbone']} rescale={r.get('mode')}" + (f" factor={r.get('factor')}" if r.get("factor") else "") + (f" match={r.get('match')}" if r.get("match") else "")
    if stage.kind == "train":
        return f"recipe={cfg['recipe'].get('name')} seed={cfg['seed']}"
    if stage.kind == "index":
        return f"{cfg['type']}"
    if stage.kind == "search":
        return f"top-{cfg['k']}"
    if stage.kind == "evaluate":
        return ", ".join(cfg["measures"])
    if stage.kind in ("encode", "queries"):
        return f"max length {cfg['max_length']}, impacts round(w·{cfg['scale']}), {cfg['precision']}"
    if stage.kind == "triples":
        return f"BM25 negatives from top-{cfg['depth']}" if cfg["negatives"] == "bm25" else f"{cfg['negatives']} from {cfg['dataset']}"
    return ""

