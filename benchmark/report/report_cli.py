"""``python -m benchmark.report``: rebuild every table, plot and page under ``results/`` from the
results folders alone; ``--refresh SUITE --runs-dir DIR`` re-reads a suite from a runs folder first."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from benchmark.common.errors import BenchmarkError


def build_parser() -> argparse.ArgumentParser:
    from benchmark.common.command_line import parser

    p = parser("python -m benchmark.report", __doc__)
    p.add_argument(
        "--results-dir",
        default=os.environ.get("BENCHMARK_RESULTS_DIR", "results"),
        help="the folder of results folders ($BENCHMARK_RESULTS_DIR)",
    )
    p.add_argument(
        "--suite",
        action="append",
        metavar="SUITE",
        help="only these results folders, comma-separated or repeated (default: every one)",
    )
    p.add_argument(
        "--refresh",
        action="append",
        metavar="SUITE",
        help="re-read this suite's conditions from --runs-dir by their stage ids, then rebuild it "
        "(repeatable; default: none)",
    )
    p.add_argument("--runs-dir", help="the runs folder --refresh reads (default: $BENCHMARK_RUNS_DIR or runs)")
    return p


def main(argv: list[str] | None = None) -> int:
    from benchmark.common.command_line import split_list
    from benchmark.common.signals import Interrupted, install_signal_handlers, interrupted_exit
    from benchmark.report.build import rebuild, refresh_suites

    args = build_parser().parse_args(argv)
    results = Path(args.results_dir)

    def names(values: list[str] | None) -> list[str] | None:
        """Comma-separated names, except a value that is a folder's whole name (a narrowed run's folder,
        ``smoke@engines=lucene,pisa``, holds commas)."""
        if values is None:
            return None
        return [n for v in values for n in ([v] if (results / v).is_dir() else split_list(v) or [])] or None

    args.suite, args.refresh = names(args.suite), names(args.refresh)
    install_signal_handlers()
    try:
        if args.refresh:
            runs = Path(args.runs_dir or os.environ.get("BENCHMARK_RUNS_DIR", "runs"))
            return refresh_suites(Path(args.results_dir), args.refresh, runs)
        if args.runs_dir:
            raise BenchmarkError(
                "--runs-dir is read only with --refresh SUITE; tables are rebuilt from the results folders alone"
            )
        return rebuild(Path(args.results_dir), args.suite)
    except BenchmarkError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except (KeyboardInterrupt, Interrupted) as exc:  # a folder is swapped in whole or not at all
        return interrupted_exit(exc, "each results folder holds its earlier tables or its new ones; rerun to rebuild")


if __name__ == "__main__":
    sys.exit(main())
