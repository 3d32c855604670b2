"""``python -m benchmark.perf skip-bounds``: how much of the vocabulary a proven bound could skip before the
screening matmul.

The encoder screens every (token, term) pair: the dense head is the cost floor of every screen. A
*skip* would rule terms out for a whole document (or group of tokens, or block of terms) from a
bound cheaper than the matmul. This command measures, on real documents and the perf model, the
share of (document, term) pairs each classic bound leaves alive; a term is alive when its bound on
``max_t h_t·w_j + b_j`` is > 0. The floor is the exact share (terms with a non-zero weight). A skip pays when its own
cost plus the
alive share (screened as now) is below 1, the dense head's cost (``head_cost_with_skip``).

Bounds (c_t = h_t − μ, β_j = μ·w_j + b_j, as in ``benchmark.splade``):

* ``ball``: β_j + max_t ‖c_t‖·‖w_j‖ (Cauchy–Schwarz, one bound per document);
* ``box``: β_j + mid·w_j + rad·|w_j|, mid/rad the per-dimension interval of the document's c_t;
* ``box/g``: the same per group of g consecutive tokens (cost 2/g of the dense head);
* ``vocab-blocks/n``: terms clustered (k-means, n per block); per token c_t·m_B + ‖c_t‖·r_B;
* ``pca/r``: rank-r projection of the decoder, plus ‖c_t‖·‖residual_j‖ (cost r/K).

Usage: ``python -m benchmark.perf skip-bounds [--docs 128] [--out results/perf/skip_bounds.json]``.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

import torch

from benchmark.common.atomic import write_json
from benchmark.common.errors import BenchmarkError
from benchmark.model.heads import mlm_head
from benchmark.model.loader import load_backbone
from benchmark.perf.encode_speed import scifact
from benchmark.perf.perf_cli import positive_ints
from benchmark.splade.encoder import encode


def _kmeans(w: torch.Tensor, per_block: int, iters: int = 8, seed: int = 0) -> torch.Tensor:
    """Block id per row: k-means with k = rows/per_block (the blocks' sizes vary)."""
    g = torch.Generator().manual_seed(seed)
    k = max(1, w.shape[0] // per_block)
    centres = w[torch.randperm(w.shape[0], generator=g)[:k]].clone()
    for _ in range(iters):
        d = (w * w).sum(1, keepdim=True) - 2 * w @ centres.T + (centres * centres).sum(1)[None]
        assign = d.argmin(1)
        sums = torch.zeros_like(centres).index_add_(0, assign, w)
        counts = torch.bincount(assign, minlength=k).clamp(min=1)[:, None]
        centres = sums / counts
    return assign


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmark.perf skip-bounds", description=__doc__.split("\n\n")[0])
    p.add_argument("--docs", type=int, default=128)
    p.add_argument("--max-length", type=int, default=256)
    p.add_argument("--groups", default="4,16,64", help="token group sizes of the box/g bounds")
    p.add_argument("--block-sizes", default="16,64", help="terms per k-means block of the vocab-blocks/n bounds")
    p.add_argument("--ranks", default="32,64", help="ranks of the pca/r bounds")
    p.add_argument("--out", type=Path, default=None)
    args = p.parse_args(argv)
    try:
        groups, block_sizes, ranks = (positive_ints(getattr(args, f), f) for f in ("groups", "block_sizes", "ranks"))
        if args.docs < 1 or args.max_length < 1:
            raise BenchmarkError(
                f"--docs and --max-length must be positive integers, got {args.docs} and {args.max_length}"
            )
    except BenchmarkError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2

    t_start = time.perf_counter()
    try:
        model, tokenizer = load_backbone("bert-tiny")
    except BenchmarkError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    _, texts, _, _ = scifact(args.docs)
    texts = texts[: args.docs]
    decoder = mlm_head(model).decoder
    w = decoder.weight.detach().double()
    b = decoder.bias.detach().double()
    vocab, k = w.shape
    wn, wabs = w.norm(dim=1), w.abs()
    blocks = {n: _kmeans(w, n) for n in block_sizes}
    block_geom = {}
    for n, assign in blocks.items():
        nb = int(assign.max()) + 1
        centres = (
            torch.zeros(nb, k, dtype=w.dtype).index_add_(0, assign, w)
            / torch.bincount(assign, minlength=nb).clamp(min=1)[:, None].double()
        )
        radius = torch.zeros(nb, dtype=w.dtype).scatter_reduce_(0, assign, (w - centres[assign]).norm(dim=1), "amax")
        block_geom[n] = (assign, centres, radius)
    _, _, vt = torch.linalg.svd(w, full_matrices=False)
    pca = {}
    for r in ranks:
        proj = vt[:r]
        coef = w @ proj.T
        pca[r] = (proj, coef, (w - coef @ proj).norm(dim=1))

    captured: list[torch.Tensor] = []
    hook = decoder.register_forward_pre_hook(lambda m, a: captured.append(a[0].detach()))
    alive: dict[str, int] = {}
    pairs = 0
    tokens_total = 0
    try:
        for text in texts:
            enc = tokenizer(text, truncation=True, max_length=args.max_length, return_tensors="pt")
            captured.clear()
            with torch.inference_mode():
                model(**enc)
            h = captured[0][0].double()
            mu = h.mean(0)
            c = h - mu
            beta = w @ mu + b
            exact = (c @ w.T).amax(0) + beta
            cn = c.norm(dim=1)
            bounds = {
                "exact (floor)": exact,
                "ball": beta + cn.max() * wn,
            }
            lo, hi = c.amin(0), c.amax(0)
            bounds["box"] = beta + w @ ((lo + hi) / 2) + wabs @ ((hi - lo) / 2)
            for g in groups:
                best = torch.full((vocab,), -math.inf, dtype=w.dtype)
                for s in range(0, len(c), g):
                    cg = c[s : s + g]
                    lo, hi = cg.amin(0), cg.amax(0)
                    best = torch.maximum(best, w @ ((lo + hi) / 2) + wabs @ ((hi - lo) / 2))
                bounds[f"box/{g} tokens"] = beta + best
            for n, (assign, centres, radius) in block_geom.items():
                per_block = (c @ centres.T + cn[:, None] * radius[None, :]).amax(0)
                bounds[f"vocab-blocks/{n} terms"] = beta + per_block[assign]
            for r, (proj, coef, res) in pca.items():
                bounds[f"pca/rank {r}"] = beta + ((c @ proj.T) @ coef.T + cn[:, None] * res[None, :]).amax(0)
            for name, value in bounds.items():
                alive[name] = alive.get(name, 0) + int((value > 0).sum())
            pairs += vocab
            tokens_total += len(c)
    finally:
        hook.remove()

    info: dict[str, Any] = {}
    encode(model, tokenizer, texts, max_length=args.max_length, path="int8", info=info)
    cost = {
        "exact (floor)": 0.0,
        "ball": 2 / tokens_total * len(texts),
        "box": 4 / tokens_total * len(texts),
        **{f"box/{g} tokens": 2 / g for g in groups},
        **{f"vocab-blocks/{n} terms": 1 / n for n in block_sizes},
        **{f"pca/rank {r}": r / k for r in ranks},
    }
    fractions = {name: n / pairs for name, n in alive.items()}
    result = {
        "model": "bert-tiny (pretrained MLM head)",
        "docs": len(texts),
        "mean_tokens": tokens_total / len(texts),
        "vocab": vocab,
        "hidden": k,
        "alive_fraction": fractions,
        "int8_screen_candidates_fraction": info["candidates_fraction"],
        # FLOPs of the bound, then of screening the pairs it leaves alive, as fractions of the dense head
        "bound_cost_vs_dense_head": cost,
        "head_cost_with_skip": {name: cost[name] + fractions[name] for name in cost if name != "exact (floor)"},
        "seconds": time.perf_counter() - t_start,
    }
    print(json.dumps(result, indent=2, sort_keys=True))
    if args.out is not None:
        write_json(args.out, result)
    return 0
