"""Max-pooling over tokens of the vocabulary head, in cache-sized blocks, and the sparse rows it leaves.

Blocks of a few documents × a vocabulary slice are reduced by ``amax`` over tokens at once, so the
[B, L, V] logits are never built; on CPU the groups run on single-threaded workers. Non-zeros are
extracted on the device, so a GPU sends ~200 (id, value) pairs per document to the host instead of
a dense 30k row. Weights are ``log1p`` of the values in float64 on the host, rounded to float32
(position-independent, unlike a vectorised float32 kernel with a scalar tail).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from benchmark.splade.screens import _Batch, _canonical, _Screen, _Terms, _upper

if TYPE_CHECKING:
    import torch

#: Decoder blocks: about this many token rows per matmul (several short documents, or one long
#: one), and this many logits per block (4 MiB in float32, cache-sized; measured fastest on CPU).
BLOCK_ROWS = 512
BLOCK_ELEMENTS = 1 << 20
#: On CUDA one block holds the whole batch and this many times more logits.
CUDA_BLOCK_FACTOR = 64


@dataclass
class _Stats:
    """What the encode did, for ``info``."""

    candidates: int = 0
    terms: int = 0
    head_s: float = 0.0
    forward_s: float = 0.0


def _screen_group(
    screen: _Screen,
    batch: _Batch,
    terms: _Terms,
    docs: slice,
    cols: int,
    k: int,
    unit32: float,
    elements: int,
    buf: torch.Tensor | None = None,
) -> tuple[torch.Tensor, int]:
    """Exact values for one group of documents: screen in blocks, candidate test, canonical recompute."""
    import torch

    x = screen.inputs(batch.screen(screen))[docs]
    weight = screen.weight(terms.screen(screen))
    n_docs, length = x.shape[:2]
    vocab = weight.shape[0]
    rows = n_docs * length
    x2 = x.reshape(rows, -1)
    pooled = torch.empty(n_docs, vocab, dtype=torch.float32, device=x.device)
    dtype = getattr(torch, screen.out_dtype)
    if buf is None or buf.dtype != dtype or buf.numel() < rows * min(cols, vocab):
        buf = torch.empty(rows * min(cols, vocab), dtype=dtype, device=x.device)
    for v0 in range(0, vocab, cols):
        w = weight[v0 : v0 + cols]
        out = screen.block(x2, w, buf[: rows * w.shape[0]].view(rows, w.shape[0]))
        pooled[:, v0 : v0 + cols] = out.view(n_docs, length, -1).amax(dim=1)
    candidates = _upper(screen, pooled, batch, terms, docs, k, unit32) > 0
    return _canonical(batch.hidden[docs], candidates, terms, unit32, elements), int(candidates.sum())


def _plain_group(hidden: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, cols: int) -> torch.Tensor:
    """max over tokens of ``hidden @ weight.T`` + bias in the weight's dtype (precision='bfloat16')."""
    import torch

    n_docs, length, _ = hidden.shape
    x2 = hidden.reshape(n_docs * length, -1)
    pooled = torch.empty(n_docs, weight.shape[0], dtype=torch.float32, device=hidden.device)
    for v0 in range(0, weight.shape[0], cols):
        pooled[:, v0 : v0 + cols] = torch.mm(x2, weight[v0 : v0 + cols].T).view(n_docs, length, -1).amax(dim=1)
    return pooled + bias.float()


def _layout(n_docs: int, length: int, vocab: int, device: Any) -> tuple[int, int, int]:
    """(documents per group, vocabulary columns per block, logits per block)."""
    if device.type == "cpu":
        rows_target, elements = BLOCK_ROWS, BLOCK_ELEMENTS
    else:
        rows_target, elements = n_docs * length, CUDA_BLOCK_FACTOR * BLOCK_ELEMENTS
    docs = max(1, rows_target // max(length, 1))
    cols = min(vocab, max(128, elements // (min(docs, n_docs) * max(length, 1))))
    return docs, cols, elements


def _run_groups(fn: Any, n_docs: int, docs: int, pool: Any, workers: int) -> None:
    """``fn(slice)`` for every group of ``docs`` documents, spread over single-threaded pool workers.

    Each block is a few ms of work, and an OpenMP barrier after every one stalls whenever the
    machine is shared; independent workers never wait for each other.
    """
    import torch

    starts = list(range(0, n_docs, docs))

    @torch.inference_mode()  # thread-local, like the thread count
    def work(mine: list[int], single_threaded: bool = False) -> None:
        if single_threaded:
            torch.set_num_threads(1)
        for d0 in mine:
            fn(slice(d0, min(d0 + docs, n_docs)))

    threads = torch.get_num_threads()
    try:
        if pool is not None and len(starts) > 1:
            list(pool.map(work, [starts[i::workers] for i in range(workers)], [True] * workers))
        else:  # single-threaded all the same: a bf16 matmul's sums may depend on the thread count
            work(starts, pool is not None)
    finally:
        torch.set_num_threads(threads)  # the setting is process-wide


def _pool_screened(
    batch: _Batch, terms: _Terms, screen: _Screen, pool: Any, workers: int, unit32: float, stats: _Stats
) -> torch.Tensor:
    """Exact pooled values [B, V] (0 for the terms the screen rules out) of a whole batch."""
    import torch

    n_docs, length, k = batch.hidden.shape
    vocab = terms.weight.shape[0]
    docs, cols, elements = _layout(n_docs, length, vocab, batch.hidden.device)
    pooled = torch.empty(n_docs, vocab, dtype=torch.float32, device=batch.hidden.device)
    counts: list[int] = []

    def group(sl: slice) -> None:
        pooled[sl], n = _screen_group(screen, batch, terms, sl, cols, k, unit32, elements)
        counts.append(n)  # list.append is thread-safe

    batch.screen(screen)  # prepared once, before the workers share them
    batch.beta(terms)
    terms.screen(screen)
    terms.abs_bias  # noqa: B018  (a cached property: computed once, before the workers share it)
    _run_groups(group, n_docs, docs, pool, workers)
    stats.candidates += sum(counts)
    stats.terms += n_docs * vocab
    return pooled


def _pool_plain(
    hidden: torch.Tensor, mask: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, pool: Any, workers: int
) -> torch.Tensor:
    """Pooled ``hidden @ weight.T + bias`` in the weight's own dtype (no screen, no recompute)."""
    import torch

    hidden = torch.where(mask.unsqueeze(-1).bool(), hidden, hidden[:, :1]).to(weight.dtype).contiguous()
    n_docs, length, _ = hidden.shape
    docs, cols, _ = _layout(n_docs, length, weight.shape[0], hidden.device)
    bias = torch.zeros(weight.shape[0], device=hidden.device) if bias is None else bias
    pooled = torch.empty(n_docs, weight.shape[0], dtype=torch.float32, device=hidden.device)

    def group(sl: slice) -> None:
        pooled[sl] = _plain_group(hidden[sl], weight, bias, cols)

    _run_groups(group, n_docs, docs, pool, workers)
    return pooled


def _pool_logits(logits: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Fallback for heads that are not a plain Linear: max over masked tokens, vocabulary-chunked."""
    import torch

    n_docs, length, vocab = logits.shape
    cols = max(128, BLOCK_ELEMENTS // max(n_docs * length, 1))
    pooled = torch.empty(n_docs, vocab, dtype=torch.float32, device=logits.device)
    drop = ~mask.unsqueeze(-1)
    for v0 in range(0, vocab, cols):
        pooled[:, v0 : v0 + cols] = logits[..., v0 : v0 + cols].float().masked_fill(drop, float("-inf")).amax(dim=1)
    return pooled


def _sparse_rows(pooled: torch.Tensor) -> list[tuple[np.ndarray, np.ndarray]]:
    """log1p of each row's positive entries as (ids ascending, float32 weights), found on the device.

    ``log1p`` runs in float64 on the host and is rounded to float32: the same routine for every
    element wherever it sits in the array (a vectorised float32 kernel may treat a scalar tail
    differently), and ``log1p(x) > 0`` exactly when ``x > 0``.
    """
    import torch

    row, col = torch.nonzero(pooled > 0, as_tuple=True)  # row-major: ids ascend within a row
    values = pooled[row, col].cpu().numpy()
    weights = np.log1p(values.astype(np.float64)).astype(np.float32)
    ids = col.to(torch.int32).cpu().numpy()
    ends = np.cumsum(torch.bincount(row, minlength=pooled.shape[0]).cpu().numpy())
    starts = np.concatenate([[0], ends[:-1]])
    return [(ids[a:b], weights[a:b]) for a, b in zip(starts, ends)]
