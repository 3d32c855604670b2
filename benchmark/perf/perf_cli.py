"""The ``python -m benchmark.perf`` command: parts to run, their tables, ``results/perf/perf.{md,csv}``;
and the measurements the README and the budget cite, each a subcommand (``python -m benchmark.perf NAME``)."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from benchmark.common.environment import machine_class
from benchmark.common.errors import BenchmarkError, unknown
from benchmark.common.registry import Registry

#: part → "module:function" returning (rows, lines); in run order
PARTS: Registry[str] = Registry("perf part", fix="Pass --only with a comma-separated subset, or --only all")
PARTS.register("encode", "benchmark.perf.encode_speed:part_encode")
PARTS.register("large", "benchmark.perf.encode_speed:part_large")
PARTS.register("search", "benchmark.perf.search_speed:part_search")
PARTS.register("train", "benchmark.perf.train_speed:part_train")
PARTS.register("e2e", "benchmark.perf.e2e:part_e2e")
DEFAULT_PARTS = ("encode", "large", "search", "train")  # e2e (a whole smoke run, minutes) only when asked

#: subcommand → "module:main" (``main(argv) -> exit status``): measurements whose numbers are cited
COMMANDS: Registry[str] = Registry("perf subcommand", fix="Run python -m benchmark.perf --help for the list")
COMMANDS.register("gpu-profile", "benchmark.perf.gpu_profile:main")  # results/gpu/gpu_profile.json, README GPU
COMMANDS.register("budget-probe", "benchmark.perf.budget_probe:main")  # benchmark.pipeline.budget's throughputs
COMMANDS.register("matmul-shapes", "benchmark.perf.matmul_shapes:main")  # results/perf/matmul_shapes.json
COMMANDS.register("skip-bounds", "benchmark.perf.skip_bounds:main")  # results/perf/skip_bounds.json
COMMANDS.register("rescale-study", "benchmark.perf.rescale_study:main")  # results/rescale-study/*.md
COMMANDS.register("scale", "benchmark.perf.scale:main")  # results/perf/scale.{md,csv,png}
COMMANDS.register("engines", "benchmark.perf.engines:main")  # results/perf/engines.{md,csv,png}
COMMANDS.register("search-stage", "benchmark.perf.search_stage:main")  # results/perf/search-stage.{md,csv}
COMMANDS.register("precision-effect", "benchmark.perf.precision_effect:main")  # results/precision/bf16-vs-float32.md


def subset(text: str, valid: Any, what: str, flag: str) -> list[str]:
    """The comma-separated names given to ``--flag``, each one of ``valid``; one line naming the first that is not."""
    names = [n.strip() for n in text.split(",") if n.strip()]
    for name in names:
        if name not in valid:
            raise unknown(what, name, valid, f"Pass --{flag} with a comma-separated subset")
    return names


def positive_ints(text: str, flag: str) -> list[int]:
    """A comma-separated list of positive integers given to ``--flag``; BenchmarkError otherwise."""
    try:
        sizes = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        sizes = []
    if not sizes or min(sizes) < 1:
        raise BenchmarkError(f"--{flag.replace('_', '-')} must be comma-separated positive integers, got {text!r}")
    return sizes


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    import benchmark.perf
    from benchmark.model.loader import resolve_backbone

    default_model = Path(resolve_backbone("bert-tiny"))  # $BENCHMARK_MODEL_DIR/bert-tiny when it is there
    from benchmark.common.command_line import parser

    p = parser("python -m benchmark.perf", benchmark.perf.__doc__.splitlines()[0])
    p.epilog = f"subcommands (python -m benchmark.perf NAME --help): {', '.join(COMMANDS)}"
    p.add_argument(
        "--only",
        default=",".join(DEFAULT_PARTS),
        help=f"comma-separated parts of {', '.join(PARTS)}, or 'all' (default: {','.join(DEFAULT_PARTS)})",
    )
    p.add_argument("--docs", type=int, default=2000, help="SciFact documents to encode (judged ones included)")
    p.add_argument("--model", type=Path, default=default_model, help="a *ForMaskedLM folder (default bert-tiny)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--max-length", type=int, default=256)
    p.add_argument("--path", default=None, help="force one encode path (default: chosen by measurement)")
    p.add_argument("--repeat", type=int, default=1, help="encode runs per system (best wall time kept)")
    p.add_argument("--large-batch", type=int, default=64)
    p.add_argument("--large-length", type=int, default=512)
    p.add_argument("--search-repeat", type=int, default=3)
    p.add_argument("--train-steps", type=int, default=20)
    p.add_argument("--train-batch", type=int, default=32)
    p.add_argument("--train-length", type=int, default=64, help="max length of queries and documents in training")
    p.add_argument(
        "--out",
        type=Path,
        default=Path("results/perf"),
        help="folder for perf.<machine class>.md and .csv (class: intel, amd or other)",
    )
    p.add_argument("--work", type=Path, help="keep intermediate files here (default: a temp dir)")
    p.add_argument("--worker", help=argparse.SUPPRESS)
    return p.parse_args(argv)


def _check(args: argparse.Namespace) -> list[str]:
    parts = list(PARTS) if args.only.strip() == "all" else [p.strip() for p in args.only.split(",") if p.strip()]
    for p in parts:
        if p not in PARTS:
            raise unknown("perf part", p, PARTS, PARTS.fix)
    for flag in (
        "docs",
        "threads",
        "batch_size",
        "max_length",
        "repeat",
        "large_batch",
        "large_length",
        "search_repeat",
        "train_steps",
        "train_batch",
        "train_length",
    ):
        if getattr(args, flag) < 1:
            raise BenchmarkError(f"--{flag.replace('_', '-')} must be a positive integer, got {getattr(args, flag)}")
    if args.path is not None:
        from benchmark.splade.screens import SCREENS

        SCREENS[args.path]  # noqa: B018 (an unknown name raises the standard error)
    if not (args.model / "config.json").exists():
        raise BenchmarkError(f"--model {args.model} is not a model folder (no config.json); pass a *ForMaskedLM folder")
    return [p for p in PARTS if p in parts]


def _header(args: argparse.Namespace) -> str:
    cls, what = machine_class()
    return (
        "# Performance: benchmark.splade / training / impact search vs sentence-transformers / Pyserini\n\n"
        f"machine class {cls}: {what}; torch's CPU capability {_capability()}.\n\n"
        f"model {Path(args.model).name}, {args.threads} threads, encode batch {args.batch_size}, max length "
        f"{args.max_length}; {os.cpu_count()} CPUs; each system in its own subprocess (peak = its VmHWM; "
        "Δ = peak − RSS before the measured work); speed× and mem× are relative to the first row of each "
        "part; load = 1-minute load average before → after.\n\n"
    )


def _capability() -> str:
    import torch

    return str(torch.backends.cpu.get_cpu_capability())


def main(argv: list[str] | None = None) -> int:
    from benchmark.common.atomic import csv_text, write_text
    from benchmark.perf.report import csv_rows, markdown
    from benchmark.perf.workers import load, worker

    argv = sys.argv[1:] if argv is None else list(argv)
    if argv and argv[0] in COMMANDS:
        module, _, func = COMMANDS[argv[0]].partition(":")
        return getattr(importlib.import_module(module), func)(argv[1:])
    args = parse_args(argv)
    if args.worker:
        return worker(args.worker)
    try:
        parts = _check(args)
        rows, lines, failed = [], [], []
        with tempfile.TemporaryDirectory(prefix="perf-") as tmp:
            work = args.work or Path(tmp)
            work.mkdir(parents=True, exist_ok=True)
            for part in parts:
                module, _, func = PARTS[part].partition(":")
                before = load()
                try:
                    r, lns = getattr(importlib.import_module(module), func)(args, work)
                    lns = [
                        *lns,
                        f"{part}: 1-min load average {before:.1f} → {load():.1f} on {os.cpu_count()} CPUs "
                        "(a shared machine slows wall time, CPU ms less)",
                    ]
                except BenchmarkError as exc:  # report the other parts all the same
                    r, lns = [], [f"{part}: FAILED: {exc}"]
                    failed.append(part)
                rows += r
                lines += lns
                print(markdown(r, lns, "", tuple(PARTS)), flush=True)
        dicts, columns = csv_rows(rows)
        args.out.mkdir(parents=True, exist_ok=True)
        stem = f"perf.{machine_class()[0]}"  # one table per machine class: the screens are chosen per class
        write_text(args.out / f"{stem}.csv", csv_text(dicts, columns))
        write_text(args.out / f"{stem}.md", markdown(rows, lines, _header(args), tuple(PARTS)))
        print(f"[perf] wrote {args.out / (stem + '.md')} and {args.out / (stem + '.csv')}")
        if failed:
            print(f"error: perf part(s) failed: {', '.join(failed)}", file=sys.stderr)
        return 1 if failed else 0
    except BenchmarkError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
