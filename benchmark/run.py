"""``python -m benchmark.run --suite NAME`` (or ``--datasets ID…`` alone, ad hoc): validate the plan, run the
missing stages, write the tables."""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

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


def gpus_here() -> int:
    """The GPUs this machine shows (CUDA_VISIBLE_DEVICES, else the NVIDIA driver's list), without
    importing torch: a dry run stays quick."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return len([d for d in visible.split(",") if d.strip() and d.strip() != "-1"])
    try:
        return len(os.listdir("/proc/driver/nvidia/gpus"))
    except OSError:
        return 0


def dry_run_summary(plan: Plan, store: Store, gpus: int | None, train: Any = None) -> None:
    """What ``--dry-run`` prints: the matrix, the stage counts, and the GPU budget on ``gpus`` GPUs (the
    machine's own when not given); ``--stages`` adds every stage and condition."""
    from benchmark.pipeline.budget import describe_estimate

    print(plan.summary())
    stages = plan.stages()
    cached = sum(store.is_done(s) for s in stages)
    print(
        f"{len(stages)} stages, {cached} cached, {len(stages) - cached} to run; {len(plan.conditions)} conditions "
        "(system × dataset × seed); --dry-run --stages lists each"
    )
    if any(s.kind.name in ("train", "encode") for s in stages):
        here = gpus_here()
        count = gpus or here or 1
        where = "--gpus" if gpus else f"this machine's {here}" if here else "no GPU here; --gpus N for a cluster"
        print(
            describe_estimate(plan, count, train).replace(
                f"estimate on {count} GPU(s)", f"estimate on {count} GPU(s) ({where})", 1
            )
        )


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
    """``benchmark run``: plan a suite, run or reuse its stages, write its tables.

    Args:
        argv: the command line without the program name (default: ``sys.argv[1:]``); ``--help`` lists it.

    Returns:
        The exit status: 0, 1 when ``--check`` found a FAIL or a stage failed, 2 for bad input (one line on
        stderr before any work), 128 + the signal number when interrupted (finished stages are kept).
    """
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
    if args.dry_run and not args.stages:
        if args.executor == "ray":
            print(
                "resources per task: "
                + "; ".join(
                    f"{k} {r.describe()}" for k, r in resources.items() if any(s.kind.name == k for s in plan.stages())
                )
            )
        dry_run_summary(plan, store, args.gpus, resources.get("train"))
        return 0
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
    from benchmark.report.reference import run_folder

    folder = run_folder(Path(args.results_dir), results_folder(plan))  # a committed reference stays as it is
    problem = not_a_folder(Path(args.results_dir) / folder)
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

    results_dir = Path(args.results_dir)
    out, kept = publish_run(plan, store, results_dir, folder, failed=failed is not None)
    if failed:
        where = (
            f"the complete tables in {results_dir / folder} are kept; this run's, of the finished conditions, "
            f"are in {out}"
            if kept
            else f"tables of the finished conditions in {out}"
        )
        print(
            f"suite {suite.name} incomplete after {(time.perf_counter() - start) / 60:.1f} min; {where}\n{failed}",
            file=sys.stderr,
        )
        return 1
    table = headline(out)
    if table:
        print("\n" + table + "\n")
    if folder != results_folder(plan):
        print(f"({results_dir / results_folder(plan)} is the committed reference, left as it is, to compare with)")
    from benchmark.report.check import applies, check_suite

    lines: list[str] = []
    code = check_suite(plan, store, out=lines.append)
    if args.check:
        print("\n".join(lines))
    print(
        finished_line(
            suite.name,
            time.perf_counter() - start,
            out,
            lines if any(applies(e, plan) for e in plan.suite.expected) else None,
            args.check,
        )
    )
    return code if args.check else 0


def finished_line(name: str, seconds: float, out: Path, check: list[str] | None, checked: bool) -> str:
    """The run's last line: its time in minutes, the check's verdict where the suite expects scores of
    this subset (``--check`` lists each; without it, the verdict alone), and the page to open."""
    verdict = ""
    if check:
        verdict = "; " + check[-1] + ("" if checked else " (--check lists each)")
    page = out / "index.html"
    where = f"page {page}" if page.is_file() else f"tables in {out}"
    return f"suite {name} finished in {seconds / 60:.1f} min{verdict}; {where}"


__all__ = [
    "LARGE_CORPUS",
    "build_parser",
    "drop_encoded",
    "dry_run",
    "dry_run_summary",
    "finished_line",
    "gpus_here",
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
