"""``python -m benchmark.run --suite NAME`` (or ``--datasets ID…`` alone, ad hoc): validate the plan, run the
missing stages, write the tables."""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from benchmark.common.errors import BenchmarkError
from benchmark.pipeline.command import (
    LARGE_CORPUS,
    build_parser,
    load_run_suite,
    parse_args,
    prepare,
    resources_layers,
    results_folder,
    stage_resources,
)
from benchmark.pipeline.plan import Plan
from benchmark.pipeline.systems import system
from benchmark.stages.store import Store


def drop_encoded(plan: Plan, store: Store, keep: str = "indexed") -> None:
    """Delete encoded document shards whose impact index is finished (queries and stats stay): all of them
    (``indexed``), or those of corpora of at least ``LARGE_CORPUS`` documents (``auto``)."""
    from benchmark.stages.records import EncodeRecord, parse

    freed = 0
    for stage in plan.stages():
        if stage.kind.name == "index" and stage.config.type == "impact" and store.is_done(stage):
            source = stage.parents["source"]
            if keep == "auto":
                meta = store.load(source)
                if meta is None or parse(meta, EncodeRecord).documents < LARGE_CORPUS:
                    continue
            freed += store.drop(source, ["docs"])
    if freed:
        which = (
            "" if keep == "indexed" else f" of corpora of {LARGE_CORPUS:,} documents or more (--keep all keeps them)"
        )
        print(f"--keep {keep}: freed {freed / 2**20:.1f} MiB of encoded shards{which}")


def dry_run(plan: Plan, store: Store) -> None:
    print(plan.summary())
    stages = plan.stages()
    cached = sum(store.is_done(s) for s in stages)
    print(f"{len(stages)} stages, {cached} cached, {len(stages) - cached} to run:")
    for s in stages:
        state = "cached" if store.is_done(s) else "would run"
        print(f"  [{state:9}] {s.kind.name:8} {s.id}  {s.describe()}")
    print(f"{len(plan.conditions)} conditions (system × dataset × seed):")
    for c in plan.conditions:
        print(f"  {c.dataset:40} {system(c.system).dry_run(c)}")


def main(argv: list[str] | None = None) -> int:
    from benchmark.common.signals import Interrupted, install_signal_handlers

    args = parse_args(argv)
    install_signal_handlers()
    try:
        return _main(args)
    except BenchmarkError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:  # a full disk outside any stage (the tables, a stage's config.json)
        from benchmark.common.disk import is_full

        if not is_full(exc):
            raise
        print(
            f"error: no space left on the device of {exc.filename or 'an output folder'}; free space there, or "
            "pass --runs-dir/--results-dir on a larger disk, and rerun the same command",
            file=sys.stderr,
        )
        return 2
    except (KeyboardInterrupt, Interrupted) as exc:
        name = exc.args[0] if isinstance(exc, Interrupted) else "SIGINT"
        print(f"interrupted ({name}): finished stages are kept; rerun the same command to resume", file=sys.stderr)
        return 128 + (exc.signum if isinstance(exc, Interrupted) else 2)


def _main(args: argparse.Namespace) -> int:
    plan, store, suite, resources = prepare(args)
    if args.dry_run:
        dry_run(plan, store)
        if args.executor == "ray":
            from benchmark.pipeline.budget import describe_estimate

            print(
                "resources per task: "
                + "; ".join(
                    f"{k} {r.describe()}" for k, r in resources.items() if any(s.kind.name == k for s in plan.stages())
                )
            )
            print(describe_estimate(plan, args.gpus or 1, resources.get("train")))
        return 0
    store.check_writable()
    store.sweep()
    from benchmark.common.atomic import not_a_folder

    problem = not_a_folder(Path(args.results_dir) / results_folder(plan))
    if problem:
        raise BenchmarkError(problem)
    from benchmark.pipeline.executor import LocalExecutor, follow_training
    from benchmark.stages import Context

    ctx = Context(threads=args.threads, progress=not args.no_progress)
    if int(os.environ.get("RANK", "0")) > 0:  # a torchrun worker: it only helps train
        follow_training(plan.stages(), store, ctx)
        return 0
    start = time.perf_counter()
    targets = [c.evaluate for c in plan.conditions if c.evaluate is not None]
    if args.executor == "ray":
        from benchmark.pipeline.ray_executor import execute

        explicit = {k for layer in resources_layers(suite, args.resources) for k, f in layer.items() if "gpus" in f}
        outcome = execute(store, ctx, targets, resources, explicit, args.ray_address, args.gpus)
    else:
        outcome = LocalExecutor(store, ctx).run(targets)
    failed = outcome.summary({s.id: s for s in plan.stages()}) if outcome.failed else None
    if args.keep != "all":
        drop_encoded(plan, store, args.keep)
    from benchmark.report.build import headline, publish_run

    results_dir, folder = Path(args.results_dir), results_folder(plan)
    out, kept = publish_run(plan, store, results_dir, folder, failed=failed is not None)
    if failed:
        where = (
            f"the complete tables in {results_dir / folder} are kept; this run's, of the finished conditions, "
            f"are in {out}"
            if kept
            else f"tables of the finished conditions in {out}"
        )
        print(
            f"suite {suite.name} incomplete after {time.perf_counter() - start:.1f}s; {where}\n{failed}",
            file=sys.stderr,
        )
        return 1
    table = headline(out)
    if table:
        print("\n" + table + "\n")
    print(f"suite {suite.name} finished in {time.perf_counter() - start:.1f}s; tables in {out}")
    if args.check:
        from benchmark.report.check import check_suite

        return check_suite(plan, store)
    return 0


__all__ = [
    "LARGE_CORPUS",
    "build_parser",
    "drop_encoded",
    "dry_run",
    "load_run_suite",
    "main",
    "parse_args",
    "prepare",
    "resources_layers",
    "results_folder",
    "stage_resources",
]


if __name__ == "__main__":
    sys.exit(main())
