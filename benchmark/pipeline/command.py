"""A ``python -m benchmark.run`` command line turned into what a run decides before any stage runs: the
parser, and ``prepare``: the checked plan, its store, the suite and the resources per stage kind. Here, below
the report and the measurements, so that ``benchmark.perf`` plans as a run does through a function."""

from __future__ import annotations

import argparse
import os
from typing import Any

from benchmark.common.errors import BenchmarkError
from benchmark.pipeline.commands import SYSTEMS
from benchmark.pipeline.plan import Options, Plan, build_plan
from benchmark.stages.store import Store

#: what ``python -m benchmark.run --help`` opens with
DESCRIPTION = (
    "``python -m benchmark.run --suite NAME`` (or ``--datasets ID…`` alone, ad hoc): validate the plan, run the\n"
    "missing stages, write the tables."
)

#: ``--keep auto`` (the default) drops the encoded shards of corpora this large once their impact index is
#: built. Measured by ``python -m benchmark.perf scale`` at 100,000 documents (docs/compute-budget.md): the
#: JSON shards take 2,120 bytes per document, the impact index built from them 178; gzip would leave 635
#: (-1) or 496 (-6, 85 µs of CPU per document) on top of the index. After indexing, the index is what a
#: large corpus needs on disk, and a re-search reads the index, not the shards.
LARGE_CORPUS = 1_000_000


def build_parser() -> argparse.ArgumentParser:
    from benchmark.common.command_line import parser
    from benchmark.suites import suite_names

    p = parser(
        "python -m benchmark.run",
        DESCRIPTION + "\nList flags (--datasets, --backbones, --variants, --seeds) take "
        "comma-separated values or several words: --backbones a,b or --backbones a b.",
    )
    p.add_argument(
        "--suite",
        help=f"one of: {', '.join(suite_names())}, or a suite .toml path (default: none, an "
        "ad-hoc suite of the --datasets ids with BM25, and SPLADE with --backbones; measures from each "
        "dataset's conventions)",
    )
    p.add_argument(
        "--systems",
        nargs="+",
        metavar="SYSTEM",
        help=f"only these row families of the suite: {', '.join(SYSTEMS)}; stage ids stay the "
        "suite's (default: every family the suite has)",
    )
    p.add_argument(
        "--datasets",
        nargs="+",
        metavar="DATASET",
        help="a subset of the suite's datasets, local BEIR folders "
        "PATH[@split], or without --suite any ir_datasets ids (default: the suite's)",
    )
    p.add_argument(
        "--backbones", nargs="+", metavar="BACKBONE", help="backbone keys, HF ids or local paths (default: the suite's)"
    )
    p.add_argument(
        "--published",
        nargs="+",
        metavar="MODEL",
        help="SPLADE models trained elsewhere, evaluated as they are (rows 'published'): hub ids such as "
        "naver/splade-v3, or local SparseEncoder or *ForMaskedLM folders (default: the suite's [published])",
    )
    p.add_argument(
        "--variants",
        nargs="+",
        metavar="VARIANT",
        help="baseline, rescaled, the suite's k<k>/x<f> arms, and "
        "the extensions head-norm, match-<stat> (default: the suite's)",
    )
    p.add_argument(
        "--rescale-factor",
        "--rescale",
        type=float,
        metavar="FACTOR",
        help="the 'rescaled' variant multiplies the MLM head by this (default: the suite's [splade.rescale])",
    )
    p.add_argument(
        "--match-norm",
        metavar="REF_OR_NUMBER",
        help="the 'rescaled' variant matches this backbone's "
        "(or number's) head statistic (default: the suite's [splade.rescale] match)",
    )
    p.add_argument(
        "--rescale-method",
        "--method",
        metavar="METHOD",
        help="how 'rescaled' scales the head: once (the paper's: the weights × α once, then trained), or this "
        "harness's extensions projection, head-norm, tied, untie (default: the suite's, else once)",
    )
    p.add_argument(
        "--match-stat",
        metavar="STAT",
        help="what --match-norm matches: logit-std, frobenius or row-rms (default: the suite's, else logit-std)",
    )
    p.add_argument(
        "--recipe",
        help="training recipe name or .toml path (default: the suite's; its slice_recipe "
        "when --max-docs/--max-queries cut the data)",
    )
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        dest="sets",
        help="override a suite value (k=100, bm25.k1=1.2, encode.batch_size=16) or, as recipe.KEY, a "
        "recipe value (recipe.max_steps=10); VALUE is read as TOML; repeatable (default: none)",
    )
    p.add_argument(
        "--run",
        action="append",
        default=[],
        metavar="NAME=PATH",
        dest="runs",
        help="also evaluate this TREC run file, as the table row NAME, on the run's one dataset; "
        "repeatable (default: none)",
    )
    p.add_argument(
        "--max-docs",
        type=int,
        help="deterministic corpus subset; judged documents always stay (default: the suite's, else the whole corpus)",
    )
    p.add_argument(
        "--max-queries", type=int, help="deterministic query subset (default: the suite's, else every judged query)"
    )
    p.add_argument("--seeds", nargs="+", metavar="SEED", help="training seeds (default: the suite's)")
    p.add_argument(
        "--engines",
        metavar="NAME[:POINT],...",
        help="impact search engines, comma-separated: lucene (exact reference), pisa (exact), seismic "
        "(approximate), exhaustive (exact, the harness's own); each SPLADE row once per engine (default: the "
        "suite's, else lucene)",
    )
    p.add_argument(
        "--runs-dir",
        default=os.environ.get("BENCHMARK_RUNS_DIR", "runs"),
        help="where stages are stored and reused ($BENCHMARK_RUNS_DIR)",
    )
    p.add_argument(
        "--results-dir",
        default=os.environ.get("BENCHMARK_RESULTS_DIR", "results"),
        help="where tables and pages are written ($BENCHMARK_RESULTS_DIR)",
    )
    p.add_argument(
        "--threads",
        type=int,
        default=os.cpu_count() or 1,
        help="Lucene threads (local executor; under Ray each task uses its kind's CPUs)",
    )
    p.add_argument("--force", action="store_true", help="redo stages even if finished")
    p.add_argument(
        "--verify", action="store_true", help="check every reused stage's files against their recorded sha256"
    )
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="print the plan without loading models: the matrix, stage counts and the GPU estimate (--gpus N)",
    )
    p.add_argument(
        "--stages", action="store_true", help="with --dry-run: list every stage (id, cached or not) and condition"
    )
    p.add_argument("--check", action="store_true", help="compare with the suite's expected scores; exit 1 on FAIL")
    p.add_argument(
        "--keep",
        choices=["all", "indexed", "auto"],
        default="auto",
        help="'indexed' deletes encoded document shards once their impact index is built; 'auto' does so "
        f"for corpora of {LARGE_CORPUS:,} documents or more (the index is about 1/11 of their bytes); "
        "'all' keeps every shard",
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bars (the per-stage lines stay)")
    p.add_argument(
        "--verbose", action="store_true", help="let the JVM's warnings and ir_datasets' [INFO] lines reach the terminal"
    )
    p.add_argument(
        "--executor",
        choices=["local", "ray"],
        default="local",
        help="local: every stage in this process; ray: stages as tasks on a Ray cluster",
    )
    p.add_argument(
        "--ray-address",
        help="with --executor ray: 'auto' (the cluster this node belongs to), HOST:PORT "
        "or ray://HOST:PORT (default: start a local cluster)",
    )
    p.add_argument(
        "--resources",
        help="with --executor ray: per stage kind, e.g. encode=gpu:1,index=cpu:4+mem:16,"
        "train=gpu:1+workers:4 (names: cpu, gpu, mem in GiB, workers) (default: the suite's, else 1 CPU, "
        "and 1 GPU for train, encode and queries)",
    )
    p.add_argument(
        "--gpus",
        type=int,
        help="with --executor ray: GPUs of the local cluster; with --dry-run: "
        "estimate the wall time on this many GPUs (default: all the cluster has; the estimate: this machine's, "
        "else 1)",
    )
    return p


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    return build_parser().parse_args(argv)


def _seeds(value: str | list[str] | None) -> list[int] | None:
    from benchmark.common.command_line import split_list

    items = split_list(value)
    if items is None:
        return None
    given = ",".join(items)
    try:
        seeds = [int(v) for v in items]
    except ValueError:
        raise BenchmarkError(f"--seeds {given!r} must be comma-separated integers, e.g. --seeds 42,43,44") from None
    from benchmark.suites import seed_problem

    for seed in seeds:
        problem = seed_problem(seed, f"--seeds {given!r}")
        if problem:
            raise BenchmarkError(problem)
    if len(set(seeds)) != len(seeds):
        raise BenchmarkError(f"--seeds {given!r} repeats a seed; give each seed once")
    return seeds


def load_run_suite(args: argparse.Namespace, opts: Options) -> tuple[Any, str]:
    """(suite, the --suite value for reproduce commands): a packaged or file suite, or an ad-hoc one
    built from --datasets when --suite is left out (benchmark.suites.adhoc)."""
    from benchmark.suites import load_suite, suite_names
    from benchmark.suites.adhoc import ADHOC, load_adhoc

    if args.suite is not None:
        return load_suite(args.suite, opts.suite_overrides()), args.suite
    if not opts.datasets:
        raise BenchmarkError(
            f"give --suite NAME (one of: {', '.join(suite_names())}, or a suite .toml path), or "
            "--datasets with ir_datasets ids for an ad-hoc run, e.g. --datasets cranfield"
        )
    return load_adhoc(opts.datasets, opts.backbones, opts.suite_overrides(), opts.published), ADHOC


def resources_layers(suite: Any, cli: str | None) -> list[dict[str, dict[str, Any]]]:
    """The suite's ``[resources]`` and the command line's ``--resources``, each checked (later wins)."""
    from benchmark.pipeline.resources import parse_cli
    from benchmark.suites import suite_resources

    return [suite_resources(suite.resources, suite.name), parse_cli(cli)]


def stage_resources(suite: Any, cli: str | None) -> dict[str, Any]:
    """Stage kind → the resources one of its tasks asks of a cluster."""
    from benchmark.pipeline.resources import resolve
    from benchmark.stages import KINDS

    return resolve([kind for _, kind in KINDS.items()], *resources_layers(suite, cli))


def results_folder(plan: Plan) -> str:
    """``<suite>``, or ``<suite>@<subset>`` for a run the command line narrowed (under --results-dir):
    a subset never overwrites the suite's own tables."""
    from benchmark.pipeline.plan import subset_folder

    return plan.suite.name + (f"@{subset_folder(plan.subset)}" if plan.subset else "")


def prepare(args: argparse.Namespace) -> tuple[Plan, Store, Any, dict[str, Any]]:
    """The checked plan of a command line, its store, suite, and (under Ray) the resources per stage kind:
    everything a run decides before any stage runs (``benchmark.perf.scale`` plans with it, then runs its stages
    one by one)."""
    from benchmark.common.command_line import set_verbose, split_list
    from benchmark.evaluation.external_runs import parse_runs
    from benchmark.pipeline.preflight import check_flags, check_plan, recipe_override_problem

    check_flags(args)
    runs, problems = parse_runs(args.runs)
    opts = Options(
        datasets=split_list(args.datasets),
        backbones=split_list(args.backbones),
        variants=split_list(args.variants),
        rescale_factor=args.rescale_factor,
        match_norm=args.match_norm,
        max_docs=args.max_docs,
        max_queries=args.max_queries,
        recipe=args.recipe,
        seeds=_seeds(args.seeds),
        rescale_method=args.rescale_method,
        match_stat=args.match_stat,
        sets=tuple(args.sets),
        runs=tuple(runs),
        published=split_list(args.published),
        systems=split_list(args.systems),
        engines=split_list(args.engines),
    )
    set_verbose(args.verbose)
    suite, suite_arg = load_run_suite(args, opts)
    problem = recipe_override_problem(opts, suite)
    if problem:
        problems.append(problem)
    plan = build_plan(suite, opts, problems, suite_arg=suite_arg)
    store = Store(args.runs_dir, force=args.force, verify=args.verify)
    store.labels = plan.stage_labels()  # the log names each stage's system, seed and dataset beside its id
    resources = stage_resources(suite, args.resources) if args.executor == "ray" else {}
    check_plan(plan, opts, problems, deep=not args.dry_run)
    return plan, store, suite, resources
