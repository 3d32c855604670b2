"""``python -m benchmark.perf matmul-shapes``: matmul speed per precision: the whole-vocabulary shape against the
screen's cache-sized blocks.

A CPU is often described by one matmul, [512 × 128] × [128 × 30522] on 2 threads. Written as
``x @ w.T`` it allocates its output on every call: 62 MB of float32 or int32 (31 MB of bf16/fp16)
whose pages are faulted in, so it measures the allocator and memory traffic as much as arithmetic. The encoder's
screen runs blocks of ``BLOCK_ROWS`` × (``BLOCK_ELEMENTS``
/ ``BLOCK_ROWS``) logits (4 MiB), one per single-threaded worker, all workers at once. This command
times both shapes for float32, bf16, fp16 and int8 (``torch._int_mm``), on the same random inputs,
best of ``--rounds``. Its numbers show what a machine's screen can reach (see README, Performance).

Usage: ``python -m benchmark.perf matmul-shapes [--threads 2] [--dtypes float32,bfloat16,float16,int8]
[--out results/perf/matmul_shapes.json]``.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import torch

from benchmark.common.atomic import write_json
from benchmark.common.errors import BenchmarkError
from benchmark.perf.perf_cli import subset
from benchmark.splade.pooling import BLOCK_ELEMENTS

DTYPES = ("float32", "bfloat16", "float16", "int8")
ROWS, HIDDEN, VOCAB = 512, 128, 30522


def _operands(dtype: str, cols: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    if dtype == "int8":
        x = torch.randint(-127, 128, (ROWS, HIDDEN), dtype=torch.int8, generator=g)
        w = torch.randint(-127, 128, (cols, HIDDEN), dtype=torch.int8, generator=g)
        return x, w, torch.empty(ROWS, cols, dtype=torch.int32)
    t = getattr(torch, dtype)
    x, w = torch.randn(ROWS, HIDDEN, generator=g).to(t), torch.randn(cols, HIDDEN, generator=g).to(t)
    return x, w, torch.empty(ROWS, cols, dtype=t)


def _mm(dtype: str, x: torch.Tensor, w: torch.Tensor, out: torch.Tensor) -> None:
    if dtype == "int8":
        torch._int_mm(x, w.T, out=out)
    else:
        torch.mm(x, w.T, out=out)


def _best(fn: Callable[[], object], rounds: int) -> float:
    fn()
    best = float("inf")
    for _ in range(rounds):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def whole(dtype: str, threads: int, rounds: int, fresh: bool = False) -> float:
    """GFLOP/s of the whole-vocabulary product on ``threads`` OpenMP threads, into one output buffer
    or (``fresh``) into a new one each call, as ``x @ w.T`` does: 31–62 MB whose pages are faulted in."""
    torch.set_num_threads(threads)
    x, w, out = _operands(dtype, VOCAB)
    if fresh:
        fn = (lambda: torch._int_mm(x, w.T)) if dtype == "int8" else (lambda: x @ w.T)
    else:
        fn = lambda: _mm(dtype, x, w, out)  # noqa: E731
    return 2 * ROWS * HIDDEN * VOCAB / _best(fn, rounds) / 1e9


def blocked(dtype: str, workers: int, rounds: int) -> float:
    """GFLOP/s of the same product in the screen's blocks, on ``workers`` single-threaded workers at once."""
    cols = BLOCK_ELEMENTS // ROWS
    parts = [_operands(dtype, cols) for _ in range(workers)]
    per_worker = -(-VOCAB // cols) // workers + 1

    def work(i: int) -> None:
        torch.set_num_threads(1)
        x, w, out = parts[i]
        for _ in range(per_worker):
            _mm(dtype, x, w, out)

    with ThreadPoolExecutor(workers) as pool:
        seconds = _best(lambda: list(pool.map(work, range(workers))), rounds)
    return 2 * ROWS * HIDDEN * cols * per_worker * workers / seconds / 1e9


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmark.perf matmul-shapes", description=__doc__.split("\n\n")[0])
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--dtypes", default=",".join(DTYPES), help=f"comma-separated, of: {', '.join(DTYPES)}")
    p.add_argument("--out", type=Path, default=None)
    args = p.parse_args(argv)
    try:
        dtypes = subset(args.dtypes, DTYPES, "dtype", "dtypes")
        if args.threads < 1 or args.rounds < 1:
            raise BenchmarkError(
                f"--threads and --rounds must be positive integers, got {args.threads} and {args.rounds}"
            )
    except BenchmarkError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    info: dict[str, str] = {}
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            info.setdefault(key.strip(), value.strip())
    except OSError:
        pass
    flags = info.get("flags", "")
    result = {
        "cpu": info.get("model name") or platform.processor() or platform.machine(),
        "torch": torch.__version__,
        "threads": args.threads,
        "isa": sorted(
            f for f in ("avx512_bf16", "avx512_fp16", "avx512_vnni", "amx_bf16", "amx_int8") if f in flags.split()
        ),
        "whole_vocabulary_new_output_gflops": {},
        "whole_vocabulary_gflops": {},
        "screen_blocks_gflops": {},
    }
    for dtype in dtypes:
        result["whole_vocabulary_new_output_gflops"][dtype] = round(whole(dtype, args.threads, args.rounds, True), 1)
        result["whole_vocabulary_gflops"][dtype] = round(whole(dtype, args.threads, args.rounds), 1)
        result["screen_blocks_gflops"][dtype] = round(blocked(dtype, args.threads, args.rounds), 1)
    print(json.dumps(result, indent=2, sort_keys=True))
    if args.out is not None:
        write_json(args.out, result)
    return 0
