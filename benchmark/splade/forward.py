"""Tokenising, length-sorted batching, and the forward up to the vocabulary head.

The model's own forward runs up to the MLM decoder, captured by a pre-hook that stops it there, so
the [B, L, V] logits are never built; on CPU in sub-batches of ``BODY_DOCS`` documents on
single-threaded workers (no OpenMP barriers; hidden states independent of the thread count). On
CUDA batch widths are padded to a multiple of 16 (``WIDTH_MULTIPLE``) so that a length-sorted
corpus reuses a few kernel shapes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from benchmark.common.errors import BenchmarkError

if TYPE_CHECKING:
    import torch

#: Device type → batch widths rounded up to a multiple of this many tokens. On CUDA: tensor-core
#: tiles, and a length-sorted corpus then reuses ~max_length/16 kernel shapes instead of one per
#: length (each new shape pays cuBLAS/SDPA warm-up). On CPU padding is pure extra work.
WIDTH_MULTIPLE = {"cuda": 16}
#: Documents per forward on CPU with several threads (see ``_forward``); a constant, so that the
#: hidden states depend on the documents' order only.
BODY_DOCS = 8
#: Texts tokenised at a time (a fast tokenizer's output for a whole corpus costs ~70 KB per text).
TOKENIZE_CHUNK = 256


class _Captured(Exception):
    """Raised by the decoder pre-hook to stop the forward once the decoder input is known."""

    def __init__(self, hidden: torch.Tensor) -> None:
        super().__init__()
        self.hidden = hidden


def _capture(module: Any, args: tuple[Any, ...]) -> None:
    raise _Captured(args[0])


def _check_inputs(texts: Sequence[str], max_length: int, batch_size: int = 1) -> list[str]:
    if isinstance(texts, str):
        raise BenchmarkError("texts must be a sequence of strings, got one str; wrap it in a list")
    texts = list(texts)
    for i, text in enumerate(texts):
        if not isinstance(text, str):
            raise BenchmarkError(f"texts[{i}] is {type(text).__name__}, expected str; pass the document text")
    if not isinstance(max_length, int) or max_length < 1:
        raise BenchmarkError(f"max_length must be a positive int, got {max_length!r}")
    if not isinstance(batch_size, int) or batch_size < 1:
        raise BenchmarkError(f"batch_size must be a positive int, got {batch_size!r}")
    return texts


def _decoder(model: Any) -> Any:
    """The vocabulary projection if it is a plain ``nn.Linear`` (every HF *ForMaskedLM), else None."""
    from torch import nn

    decoder = model.get_output_embeddings()
    return decoder if type(decoder) is nn.Linear else None


@dataclass(frozen=True)
class Tokenized:
    """Token ids of texts truncated to ``max_length``; ``encode`` takes it in place of the texts.

    Lets a caller tokenise the next corpus shard in a thread while the model encodes this one
    (fast tokenizers release the GIL).
    """

    ids: list[np.ndarray]
    max_length: int

    def __len__(self) -> int:
        return len(self.ids)


def tokenize(tokenizer: Any, texts: Sequence[str], max_length: int) -> Tokenized:
    """``texts`` as ``encode`` would tokenise them."""
    return Tokenized(_tokenize(tokenizer, _check_inputs(texts, max_length), max_length), max_length)


def _tokenize(tokenizer: Any, texts: list[str], max_length: int) -> list[np.ndarray]:
    """Token ids per text, truncated; in chunks, so the tokenizer's rich per-token objects stay small."""
    ids: list[np.ndarray] = []
    for start in range(0, len(texts), TOKENIZE_CHUNK):
        enc = tokenizer(
            texts[start : start + TOKENIZE_CHUNK],
            truncation=True,
            max_length=max_length,
            return_attention_mask=False,
            return_token_type_ids=False,
        )
        ids.extend(np.asarray(x, dtype=np.int64) for x in enc["input_ids"])
    return ids


def _padded_width(lengths: Sequence[int], multiple: int) -> int:
    """A batch's width: its longest text (at least 1: a tokenizer without special tokens can give none),
    rounded up to ``multiple``."""
    return -(-max(1, max(lengths, default=0)) // multiple) * multiple


def _pad(
    ids: list[np.ndarray], rows: Sequence[int] | np.ndarray, pad_id: int, device: Any, multiple: int = 1
) -> tuple[Any, Any]:
    """Right-pad ``rows`` into (input_ids, attention_mask): positions never depend on batch-mates.

    Token types are left to the model's default (all zeros), which is what tokenizers give a single text.
    """
    import torch

    width = _padded_width([len(ids[r]) for r in rows], multiple)
    input_ids = np.full((len(rows), width), pad_id, dtype=np.int64)
    mask = np.zeros((len(rows), width), dtype=np.int64)
    for i, r in enumerate(rows):
        input_ids[i, : len(ids[r])] = ids[r]
        mask[i, : len(ids[r])] = 1
    return torch.from_numpy(input_ids).to(device), torch.from_numpy(mask).to(device)


def _hidden(model: Any, **inputs: Any) -> torch.Tensor:
    """The decoder's input for one batch (the forward stops there)."""
    try:
        model(**inputs)
    except _Captured as captured:
        return captured.hidden
    raise BenchmarkError(f"{type(model).__name__} never called its output embeddings; cannot pool its MLM head")


def _hidden_batch(
    model: Any, tokens: list[np.ndarray], rows: Sequence[int] | np.ndarray, pad_id: int, device: Any, multiple: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """(hidden [n, L, H], mask [n, L]) of ``rows``: one padded batch, or one packed row unpacked
    (``attn_implementation='varlen'``, see ``benchmark.model.varlen``)."""
    import torch

    from benchmark.model import varlen

    if not varlen.is_packed(model):
        input_ids, mask = _pad(tokens, rows, pad_id, device, multiple)
        return _hidden(model, input_ids=input_ids, attention_mask=mask), mask
    lengths = [len(tokens[r]) for r in rows]
    width = _padded_width(lengths, multiple)
    if not any(lengths):  # nothing to run the model on
        hidden_size = model.get_output_embeddings().weight.shape[1]
        return (
            torch.zeros(len(rows), width, hidden_size, device=device),
            torch.zeros(len(rows), width, dtype=torch.long, device=device),
        )
    packed = _hidden(model, **varlen.forward_kwargs(model, tokens, rows, device))
    return varlen.unpack(packed, lengths, width)


def _forward(
    model: Any,
    tokens: list[np.ndarray],
    rows: np.ndarray,
    pad_id: int,
    device: Any,
    multiple: int,
    pool: Any,
    workers: int,
    dtype: Any,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(hidden [B, L, H], mask [B, L]) of the documents ``rows``.

    On CPU the batch is cut into sub-batches of ``BODY_DOCS`` consecutive documents, each run
    single-threaded (by the workers when there are several): a transformer's small matmuls under
    OpenMP spend much of their time at barriers (measured with bert-tiny on SciFact: 3.4 CPU ms per
    document this way, 13 with two OpenMP threads on a busy machine), and MKL's sums depend on its
    thread count. The cut depends on the documents' order only, so the hidden states (and the
    vectors) depend neither on the thread count nor on a batch size that is a multiple of BODY_DOCS.
    """
    import torch

    if device.type != "cpu":
        return _hidden_batch(model, tokens, rows, pad_id, device, multiple)
    subs = [rows[i : i + BODY_DOCS] for i in range(0, len(rows), BODY_DOCS)]
    outs: list[tuple[torch.Tensor, torch.Tensor]] = [None] * len(subs)  # type: ignore[list-item]

    def work(mine: list[int]) -> None:
        torch.set_num_threads(1)
        with torch.inference_mode(), torch.autocast(device.type, dtype=dtype, enabled=dtype is not None):
            for i in mine:
                outs[i] = _hidden_batch(model, tokens, subs[i], pad_id, device, multiple)

    threads = torch.get_num_threads()
    try:
        if pool is None or len(subs) == 1:  # single-threaded all the same: MKL's sums depend on its thread count
            work(list(range(len(subs))))
        else:
            list(pool.map(work, [list(range(w, len(subs), workers)) for w in range(workers)]))
    finally:
        torch.set_num_threads(threads)
    width = max(h.shape[1] for h, _ in outs)
    hidden = outs[0][0].new_zeros(len(rows), width, outs[0][0].shape[2])
    mask = outs[0][1].new_zeros(len(rows), width)
    at = 0
    for h, m in outs:
        hidden[at : at + len(h), : h.shape[1]] = h
        mask[at : at + len(h), : h.shape[1]] = m
        at += len(h)
    return hidden, mask
