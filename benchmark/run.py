"""``python -m benchmark.run --suite NAME``: validate the plan, run the missing stages, write the tables."""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any, Callable

from benchmark.errors import BenchmarkError
from benchmark.plan import Options, Plan, build_plan, check_factor, describe, parse_list
from benchmark.stage import Stage, Store

COLLAPSED = "collapsed"


class Context:
    def __init__(self, store: Store, threads: int, progress: bool) -> None:
        self.store, self.threads, self.progress = store, threads, progress


Runner = Callable[[Stage, dict[str, Path], Path, Context], dict[str, Any]]


def _topics(stage: Stage, parents: dict[str, Path], out: Path, ctx: Context) -> dict[str, Any]:
    from benchmark.data import materialise_topics

    return materialise_topics(stage.config["dataset"], out, stage.config["max_queries"], stage.config["seed"])


def _corpus(stage: Stage, parents: dict[str, Path], out: Path, ctx: Context) -> dict[str, Any]:
    from benchmark.data import judged_docs, materialise_corpus

    keep = judged_docs(parents["topics"]) if "topics" in parents else frozenset()
    return materialise_corpus(stage.config["source"], out, stage.config["max_docs"], stage.config["seed"], keep, ctx.progress)


def _backbone(stage: Stage, parents: dict[str, Path], out: Path, ctx: Context) -> dict[str, Any]:
    from benchmark.rescale import Rescale, prepare_backbone

    return prepare_backbone(stage.config["backbone"], Rescale(**stage.config["rescale"]), out / "model")


def _triples(stage: Stage, parents: dict[str, Path], out: Path, ctx: Context) -> dict[str, Any]:
    from benchmark.mine import NEGATIVES_TO_MINER

    config = dict(stage.config)
    return NEGATIVES_TO_MINER[config.pop("negatives")](parents, out, **config)


def _train(stage: Stage, parents: dict[str, Path], out: Path, ctx: Context) -> dict[str, Any]:
    from benchmark.mine import read_triples
    from benchmark.train import load_recipe, train_splade

    recipe = load_recipe(stage.config["recipe"]["name"])
    return train_splade(parents["init"] / "model", read_triples(parents["triples"]), recipe, out,
                        seed=stage.config["seed"], progress=ctx.progress)


def _encode(stage: Stage, parents: dict[str, Path], out: Path, ctx: Context) -> dict[str, Any]:
    from benchmark.encode import encode_docs_stage

    return encode_docs_stage(parents["model"] / "model", parents["corpus"], out, progress=ctx.progress, **stage.config)


def _queries(stage: Stage, parents: dict[str, Path], out: Path, ctx: Context) -> dict[str, Any]:
    from benchmark.encode import encode_queries_stage

    return encode_queries_stage(parents["model"] / "model", parents["topics"], out, progress=ctx.progress, **stage.config)


def _index(stage: Stage, parents: dict[str, Path], out: Path, ctx: Context) -> dict[str, Any]:
    from benchmark.index import index_stage

    return index_stage(stage.config["type"], parents["source"], out, ctx.threads)


def _search(stage: Stage, parents: dict[str, Path], out: Path, ctx: Context) -> dict[str, Any]:
    from benchmark.search import search_stage

    extra = {k: stage.config[k] for k in ("k1", "b") if k in stage.config}
    return search_stage(parents["index"], parents["queries"], out, k=stage.config["k"], threads=ctx.threads, **extra)


def _evaluate(stage: Stage, parents: dict[str, Path], out: Path, ctx: Context) -> dict[str, Any]:
    from benchmark.evaluate import evaluate_stage
    from benchmark.search import RUN

    return evaluate_stage(parents["run"] / RUN, parents["topics"], parents["corpus"], stage.config["measures"], out)


# suite → topics/corpus → backbone (+ rescale) → triples → train → encode/queries → index → search → evaluate
KIND_TO_RUNNER: dict[str, Runner] = {
    "topics": _topics, "corpus": _corpus, "backbone": _backbone, "triples": _triples, "train": _train,
    "encode": _encode, "queries": _queries, "index": _index, "search": _search, "evaluate": _evaluate,
}


def execute(stage: Stage, ctx: Context, done: dict[str, dict[str, Any] | None]) -> dict[str, Any] | None:
    """Run ``stage`` after its parents; None when an ancestor training run collapsed."""
    if stage.id in done:
        return done[stage.id]
    if ctx.store.is_done(stage):  # a finished stage needs nothing from its parents (they may be dropped)
        done[stage.id] = ctx.store.run(stage, lambda out: {})
        return done[stage.id]
    parents: dict[str, Path] = {}
    for role, parent in stage.parents.items():
        meta = execute(parent, ctx, done)
        if meta is None or meta["record"].get("status") == COLLAPSED:
            done[stage.id] = None
            return None
        parents[role] = ctx.store.path(parent)
    meta = ctx.store.run(stage, lambda out: KIND_TO_RUNNER[stage.kind](stage, parents, out, ctx))
    done[stage.id] = meta
    return meta


def follow_training(plan: Plan, ctx: Context, poll: float = 2.0) -> None:
    """Ranks > 0 under ``torchrun``: join each training stage once rank 0 has its inputs ready.

    Rank 0 runs the whole pipeline; training is the only stage that is data-parallel, so the other
    ranks wait for a train stage's parents (files in runs/), train with rank 0 into the same partial
    folder (the HF Trainer synchronises them; rank 0 saves and publishes), then move on.
    """
    for stage in plan.stages():
        if stage.kind != "train" or ctx.store.is_done(stage):
            continue
        while not all(ctx.store.load(p) is not None for p in stage.parents.values()):
            time.sleep(poll)
        out = ctx.store.partial_path(stage)
        out.mkdir(parents=True, exist_ok=True)
        parents = {role: ctx.store.path(p) for role, p in stage.parents.items()}
        KIND_TO_RUNNER["train"](stage, parents, out, ctx)


def validate(plan: Plan, opts: Options, found: list[str] | None = None) -> None:
    """Check everything the plan names before any work starts; report every problem at once
    (with ``found``, those build_plan already collected: datasets outside the suite, variants)."""
    from benchmark.data import validate_dataset
    from benchmark.evaluate import measure_problems

    problems: list[str] = list(found or [])
    for name in plan.datasets:
        problem = validate_dataset(name)
        if problem:
            problems.append(problem)
    problems.extend(measure_problems(plan.measures))
    if plan.suite.splade is not None:
        from benchmark.backbone import resolve_backbone

        for backbone in opts.backbones or plan.suite.splade.backbones:
            try:
                resolve_backbone(backbone)
            except BenchmarkError as exc:
                problems.append(str(exc))
    if problems:
        raise BenchmarkError(" | ".join(problems) if len(problems) > 1 else problems[0])


def drop_encoded(plan: Plan, store: Store) -> None:
    """Delete encoded document shards whose impact index is finished (queries and stats stay)."""
    freed = 0
    for stage in plan.stages():
        if stage.kind == "index" and stage.config.get("type") == "impact" and store.is_done(stage):
            freed += store.drop(stage.parents["source"], ["docs"])
    if freed:
        print(f"--keep indexed: freed {freed / 2**20:.1f} MiB of encoded shards")


def write_stage_log(plan: Plan, store: Store, out_dir: Path) -> None:
    """Every finished stage of the plan: the wall time it took when computed, its bytes on disk, and
    whether this run computed it or found it cached (``results/<suite>/stages.csv``)."""
    from benchmark.atomic import write_lines
    from benchmark.stage import disk_usage

    def rows():
        yield "stage,id,seconds,bytes,this_run"
        for stage in plan.stages():
            meta = store.load(stage)
            if meta is not None:
                state = "computed" if store.timings.get(stage.id) else "cached"
                yield f"{stage.kind},{stage.id},{meta['seconds']:.2f},{disk_usage(store.path(stage))},{state}"

    write_lines(out_dir / "stages.csv", rows())


def dry_run(plan: Plan, store: Store) -> None:
    print(plan.summary())
    stages = plan.stages()
    cached = sum(store.is_done(s) for s in stages)
    print(f"{len(stages)} stages, {cached} cached, {len(stages) - cached} to run:")
    for s in stages:
        state = "cached" if store.is_done(s) else "would run"
        print(f"  [{state:9}] {s.kind:8} {s.id}  {describe(s)}")
    print(f"{len(plan.conditions)} conditions (system × dataset):")
    for c in plan.conditions:
        label = c.system if c.system == "bm25" else f"{c.system} {c.backbone} {c.variant} (factor {c.factor}, {'trained' if c.trained else 'untrained'})"
        print(f"  {c.dataset:40} {label}")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    from benchmark.suites import suite_names

    p = argparse.ArgumentParser(prog="python -m benchmark.run", description=__doc__)
    p.add_argument("--suite", required=True, help=f"one of: {', '.join(suite_names())}, or a suite .toml path")
    p.add_argument("--datasets", help="comma-separated subset of the suite's datasets (or local BEIR folders)")
    p.add_argument("--backbones", help="comma-separated backbone keys, HF ids or local paths")
    p.add_argument("--variants", help="comma-separated: baseline, rescaled, and the suite's sweep variants")
    p.add_argument("--rescale-factor", type=float, help="the 'rescaled' variant multiplies the MLM head by this")
    p.add_argument("--match-norm", help="the 'rescaled' variant matches this backbone's (or number's) head norm")
    p.add_argument("--recipe", help="training recipe name (overrides the suite's)")
    p.add_argument("--max-docs", type=int, help="deterministic corpus subset; judged documents always stay")
    p.add_argument("--max-queries", type=int, help="deterministic query subset")
    p.add_argument("--runs-dir", default=os.environ.get("BENCHMARK_RUNS_DIR", "runs"))
    p.add_argument("--results-dir", default=os.environ.get("BENCHMARK_RESULTS_DIR", "results"))
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    p.add_argument("--force", action="store_true", help="redo stages even if finished")
    p.add_argument("--dry-run", action="store_true", help="print the stage plan without loading models")
    p.add_argument("--check", action="store_true", help="compare with the suite's expected scores; exit 1 on FAIL")
    p.add_argument("--keep", choices=["all", "indexed"], default="all",
                   help="'indexed' deletes encoded document shards once their impact index is built")
    p.add_argument("--no-progress", action="store_true")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        return _main(args)
    except BenchmarkError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


def _main(args: argparse.Namespace) -> int:
    from benchmark.suites import load_suite

    for flag in ("max_docs", "max_queries", "threads"):
        value = getattr(args, flag)
        if value is not None and value <= 0:
            raise BenchmarkError(f"--{flag.replace('_', '-')} {value} must be a positive integer")
    check_factor(args.rescale_factor)
    suite = load_suite(args.suite)
    opts = Options(datasets=parse_list(args.datasets), backbones=parse_list(args.backbones),
                   variants=parse_list(args.variants), rescale_factor=args.rescale_factor,
                   match_norm=args.match_norm, max_docs=args.max_docs, max_queries=args.max_queries,
                   recipe=args.recipe)
    problems: list[str] = []
    plan = build_plan(suite, opts, problems)
    store = Store(args.runs_dir, force=args.force)
    validate(plan, opts, problems)
    if args.dry_run:
        dry_run(plan, store)
        return 0
    store.check_writable()
    ctx = Context(store, args.threads, progress=not args.no_progress)
    if int(os.environ.get("RANK", "0")) > 0:  # a torchrun worker: it only helps train
        follow_training(plan, ctx)
        return 0
    start = time.perf_counter()
    done: dict[str, dict[str, Any] | None] = {}
    for cond in plan.conditions:
        assert cond.evaluate is not None
        execute(cond.evaluate, ctx, done)
    if args.keep == "indexed":
        drop_encoded(plan, store)
    from benchmark.report import write_suite_results

    out = write_suite_results(plan, store, Path(args.results_dir))
    write_stage_log(plan, store, out)
    print(f"suite {suite.name} finished in {time.perf_counter() - start:.1f}s; tables in {out}")
    if args.check:
        from benchmark.check import check_suite

        return check_suite(plan, store)
    return 0


if __name__ == "__main__":
    sys.exit(main())
