"""SPLADE encoding: ``w_j = max_t log(1 + relu(logit_{t,j}))`` over the attention-masked tokens.

Why not ``SparseEncoder.encode_document``: it materialises the [batch, length, vocab] logits and
runs mask/relu/log1p/max as separate passes over them (≈1 GB per batch of 32×256 on a 30k
vocabulary, ≈3 GB peak RSS). Here the same vectors come from

* length-sorted batches (little padding; input order restored on return);
* the model's own forward up to the MLM decoder, captured by a pre-hook that stops the forward
  there, so the [B, L, V] logits are never built;
* the decoder applied in blocks of (a few documents × a vocabulary slice) that fit in cache,
  each reduced by ``amax`` over tokens at once. log1p∘relu is monotone, so
  ``max_t log1p(relu(x_t)) == log1p(relu(max_t x_t))``: the transcendental runs on [B, V] only,
  and the decoder bias is added after the max for the same reason (rounding is monotone);
* padding positions overwritten with the document's first token, so they never change a max and
  no mask pass is needed;
* on CPUs with bfloat16 dot products (AVX512-BF16, AMX), a float32 encode screens the vocabulary
  with a bfloat16 projection first. A bf16 logit is within ``SCREEN_MARGIN·‖h‖·‖w_j‖`` of the
  float32 one, so a term whose screened max plus that margin plus its bias is ≤ 0 has weight 0
  exactly; only the remaining candidates (a few hundred of 30k) are recomputed in float32. The
  vectors are the float32 ones at close to bfloat16 speed;
* non-zeros extracted on the device, so a GPU sends ~200 (id, weight) pairs per document to the
  host instead of a dense 30k row, and on CUDA batch widths are padded to a multiple of 16
  (``WIDTH_MULTIPLE``) so that a length-sorted corpus reuses a few kernel shapes.

Quantisation (``quantise``) is separate: Anserini's impact indexing truncates float weights, so the
pipeline writes integer impacts ``round(w · QUANT_SCALE)`` itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from benchmark.errors import BenchmarkError
from benchmark.registry import Registry

if TYPE_CHECKING:
    import torch

QUANT_SCALE = 100

#: Compute precision → autocast dtype name (None: the model's own dtype, no autocast).
PRECISIONS: Registry[str | None] = Registry("precision", fix="Pass precision='float32' or 'bfloat16'")
PRECISIONS.register("float32", None)
PRECISIONS.register("bfloat16", "bfloat16")

#: Decoder blocks: about this many token rows per matmul (several short documents, or one long
#: one), and this many logits per block (4 MiB in float32, cache-sized; measured fastest on CPU).
BLOCK_ROWS = 512
BLOCK_ELEMENTS = 1 << 20
#: |bf16 logit − float32 logit| ≤ SCREEN_MARGIN·‖h‖₂·‖w‖₂: rounding h and w to 8-bit mantissas costs
#: 2u·Σ|h_i w_i|, rounding the bf16 output u·|logit|, fp32 accumulation ~H·2⁻²⁴ (u = 2⁻⁸); 4u covers all.
SCREEN_MARGIN = 2.0**-6
#: Screening stops for the rest of an encode once candidates pass this fraction of all terms (a dense
#: model, e.g. random or collapsed weights): bf16 pass + float32 recompute would cost more than float32.
SCREEN_MAX_FRACTION = 0.25
#: Device type → batch widths rounded up to a multiple of this many tokens. On CUDA: tensor-core
#: tiles, and a length-sorted corpus then reuses ~max_length/16 kernel shapes instead of one per
#: length (each new shape pays cuBLAS/SDPA warm-up). On CPU padding is pure extra work.
WIDTH_MULTIPLE = {"cuda": 16}
#: Texts tokenised at a time (a fast tokenizer's output for a whole corpus costs ~70 KB per text).
TOKENIZE_CHUNK = 256


@dataclass
class _Screen:
    """bf16 copy and float32 row norms of a float32 decoder weight, and how many terms survived."""

    weight: torch.Tensor
    norms: torch.Tensor
    counts: list[tuple[int, int]] = field(default_factory=list)  # (candidates, terms), appended by workers
    candidates: int = 0
    terms: int = 0

    def worthwhile(self) -> bool:
        """Fold the workers' counts into the running totals (called between batches, no worker running)."""
        for candidates, terms in self.counts:
            self.candidates += candidates
            self.terms += terms
        self.counts.clear()
        return self.candidates <= SCREEN_MAX_FRACTION * max(self.terms, 1)


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
        enc = tokenizer(texts[start : start + TOKENIZE_CHUNK], truncation=True, max_length=max_length,
                        return_attention_mask=False, return_token_type_ids=False)
        ids.extend(np.asarray(x, dtype=np.int64) for x in enc["input_ids"])
    return ids


def has_fast_bf16(device: Any) -> bool:
    """Whether this CPU has bfloat16 dot-product instructions (else a bf16 matmul is slower than float32)."""
    import torch

    if device.type != "cpu":
        return False
    probes = ("_is_avx512_bf16_supported", "_is_amx_tile_supported")
    return any(getattr(torch.cpu, name, lambda: False)() for name in probes)


def _pad(ids: list[np.ndarray], rows: Sequence[int], pad_id: int, device: Any, multiple: int = 1) -> tuple[Any, Any]:
    """Right-pad ``rows`` into (input_ids, attention_mask): positions never depend on batch-mates.

    Token types are left to the model's default (all zeros), which is what tokenizers give a single text.
    """
    import torch

    width = max(1, max(len(ids[r]) for r in rows))  # a tokenizer without special tokens can give none
    width = -(-width // multiple) * multiple
    input_ids = np.full((len(rows), width), pad_id, dtype=np.int64)
    mask = np.zeros((len(rows), width), dtype=np.int64)
    for i, r in enumerate(rows):
        input_ids[i, : len(ids[r])] = ids[r]
        mask[i, : len(ids[r])] = 1
    return torch.from_numpy(input_ids).to(device), torch.from_numpy(mask).to(device)


def _pool_decoder(hidden: torch.Tensor, mask: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
                  pool: Any = None, workers: int = 1, screen: _Screen | None = None) -> torch.Tensor:
    """max over tokens of ``hidden @ weight.T + bias`` per document, in cache-sized blocks → [B, V] float32.

    With a thread ``pool`` (CPU) the document groups are spread over its ``workers``, single-threaded:
    each block is a few ms of work, and an OpenMP barrier after every one of them stalls whenever
    the machine is shared; independent workers never wait for each other. With a ``screen`` the
    blocks run in bf16 and only the candidates they leave are recomputed from the float32
    ``weight``; non-candidates come back as 0 (weight 0).
    """
    import torch

    n_docs, length, _ = hidden.shape
    vocab = weight.shape[0]
    # Padding positions copy the first token: duplicates cannot change a max, so no mask pass.
    hidden = torch.where(mask.unsqueeze(-1).bool(), hidden, hidden[:, :1]).to(weight.dtype).contiguous()
    bias = torch.zeros(vocab, device=hidden.device) if bias is None else bias.float()
    block_weight, block_hidden, margin = weight, hidden, None
    if screen is not None:
        block_weight, w_norm = screen.weight, screen.norms
        block_hidden = hidden.to(block_weight.dtype)
        margin = SCREEN_MARGIN * hidden.float().norm(dim=-1).amax(dim=1)  # [B], times ‖w_j‖ per term
    cpu = hidden.device.type == "cpu"
    rows_target, elements = (BLOCK_ROWS, BLOCK_ELEMENTS) if cpu else (n_docs * length, 64 * BLOCK_ELEMENTS)
    docs = max(1, rows_target // max(length, 1))
    cols = min(vocab, max(128, elements // (docs * max(length, 1))))
    pooled = torch.empty(n_docs, vocab, dtype=torch.float32, device=hidden.device)

    def refine(d0: int) -> None:
        """Screened rows → exact float32 (max + bias) on the candidates, 0 elsewhere."""
        rows = pooled[d0 : d0 + docs]
        candidates = rows + bias + margin[d0 : d0 + docs, None] * w_norm > 0
        screen.counts.append((int(candidates.sum()), candidates.numel()))  # list.append: thread-safe
        step = max(128, elements // max(length, 1))  # [length, step] float32 logits at a time
        for i in range(rows.shape[0]):
            idx = torch.nonzero(candidates[i]).squeeze(1)
            exact = torch.empty(len(idx), dtype=torch.float32, device=hidden.device)
            for c0 in range(0, len(idx), step):
                part = idx[c0 : c0 + step]
                exact[c0 : c0 + step] = torch.mm(hidden[d0 + i], weight[part].T).amax(dim=0) + bias[part]
            rows[i].zero_()
            rows[i, idx] = exact

    @torch.inference_mode()  # thread-local, like the thread count
    def work(starts: list[int], single_threaded: bool = False) -> None:
        if single_threaded:
            torch.set_num_threads(1)
        buf = torch.empty(docs * length * cols, dtype=block_weight.dtype, device=hidden.device)
        for d0 in starts:
            x = block_hidden[d0 : d0 + docs]
            rows = x.shape[0] * length
            x2 = x.reshape(rows, -1)
            for v0 in range(0, vocab, cols):
                w = block_weight[v0 : v0 + cols]
                out = buf[: rows * w.shape[0]].view(rows, w.shape[0])
                torch.mm(x2, w.T, out=out)
                pooled[d0 : d0 + docs, v0 : v0 + cols] = out.view(x.shape[0], length, -1).amax(dim=1)
            if screen is not None:
                refine(d0)

    starts = list(range(0, n_docs, docs))
    if pool is not None and len(starts) > 1:
        threads = torch.get_num_threads()
        try:
            list(pool.map(work, [starts[i::workers] for i in range(workers)], [True] * workers))
        finally:
            torch.set_num_threads(threads)  # the setting is process-wide
    else:
        work(starts)
    if screen is None:
        pooled += bias
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
    """log1p(relu(·)) of each row's positive entries as (ids ascending, weights), found on the device.

    ``log1p(x) > 0`` exactly when ``x > 0`` in float32, so the ids are the positive pre-activations.
    """
    import torch

    row, col = torch.nonzero(pooled > 0, as_tuple=True)  # row-major: ids ascend within a row
    weights = torch.log1p(pooled[row, col]).cpu().numpy().astype(np.float32, copy=False)
    ids = col.to(torch.int32).cpu().numpy()
    ends = np.cumsum(torch.bincount(row, minlength=pooled.shape[0]).cpu().numpy())
    starts = np.concatenate([[0], ends[:-1]])
    return [(ids[a:b], weights[a:b]) for a, b in zip(starts, ends)]


def encode(
    model: Any,
    tokenizer: Any,
    texts: Sequence[str] | Tokenized,
    *,
    max_length: int,
    batch_size: int = 32,
    progress: str | None = None,
    precision: str = "float32",
    screen: bool | None = None,
) -> list[tuple[np.ndarray, np.ndarray]]:
    """SPLADE vectors, one ``(token_ids int32 ascending, weights float32 > 0)`` per text, in input order.

    ``model`` is any ``*ForMaskedLM`` (run on its device, in eval mode, its training flag restored);
    texts (or a ``Tokenized`` from ``tokenize``) are truncated to ``max_length`` tokens.
    ``precision='bfloat16'`` autocasts the forward and the decoder to bfloat16 (weights change in the
    third significant digit); 'float32' keeps the model's dtype and matches ``reference_encode``.
    ``screen`` (None: where the CPU has bf16 dot products) screens a float32 decoder in bf16 and
    recomputes the candidates in float32: same vectors, ~2× faster. ``progress`` is a tqdm
    description, or None for silence. On CPU the decoder blocks run on ``torch.get_num_threads()``
    single-threaded workers (the process-wide thread count is set to 1 while they run, then restored).
    """
    import torch

    autocast = PRECISIONS[precision]
    if isinstance(texts, Tokenized):
        _check_inputs([], max_length, batch_size)
        if texts.max_length != max_length:
            raise BenchmarkError(f"texts were tokenised with max_length={texts.max_length}, not {max_length}; "
                                 "tokenize them again with the same max_length")
        tokens = texts.ids
    else:
        tokens = _tokenize(tokenizer, _check_inputs(texts, max_length, batch_size), max_length)
    if not tokens:
        return []
    device = next(model.parameters()).device
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    lengths = np.array([len(x) for x in tokens])
    order = np.argsort(-lengths, kind="stable")  # longest first: peak memory shows up at once

    decoder = _decoder(model)
    dtype = getattr(torch, autocast) if autocast else None
    weight = bias = None
    if decoder is not None:
        weight = decoder.weight.detach()
        weight = weight.to(dtype) if dtype is not None else weight
        bias = None if decoder.bias is None else decoder.bias.detach()
    screened = None
    if weight is not None and weight.dtype == torch.float32 and (has_fast_bf16(device) if screen is None else screen):
        screened = _Screen(weight.to(torch.bfloat16), weight.norm(dim=1))
    multiple = WIDTH_MULTIPLE.get(device.type, 1)

    threads = torch.get_num_threads()
    pool = None
    if device.type == "cpu" and threads > 1 and decoder is not None:
        from concurrent.futures import ThreadPoolExecutor

        pool = ThreadPoolExecutor(threads, thread_name_prefix="splade-head")
    bar = None
    if progress is not None:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(tokens), desc=progress, unit="doc")
    results: list[tuple[np.ndarray, np.ndarray]] = [None] * len(tokens)  # type: ignore[list-item]
    hook = decoder.register_forward_pre_hook(_capture) if decoder is not None else None
    was_training = model.training
    model.eval()
    try:
        with torch.inference_mode(), torch.autocast(device.type, dtype=dtype, enabled=dtype is not None):
            for start in range(0, len(tokens), batch_size):
                rows = order[start : start + batch_size]
                input_ids, mask = _pad(tokens, rows, pad_id, device, multiple)
                batch = {"input_ids": input_ids, "attention_mask": mask}
                if decoder is not None:
                    hidden = None
                    try:
                        model(**batch)
                    except _Captured as captured:
                        hidden = captured.hidden
                    if hidden is None:
                        raise BenchmarkError(f"{type(model).__name__} never called its output embeddings; "
                                             "cannot pool its MLM head")
                    pooled = _pool_decoder(hidden, mask, weight, bias, pool, threads, screened)
                    if screened is not None and screen is None and not screened.worthwhile():
                        screened = None  # dense vectors: plain float32 is cheaper from here on
                else:
                    pooled = _pool_logits(model(**batch).logits, mask.bool())
                pooled[torch.from_numpy(lengths[rows] == 0).to(pooled.device)] = 0.0
                for r, vector in zip(rows, _sparse_rows(pooled)):
                    results[r] = vector
                if bar is not None:
                    bar.update(len(rows))
    finally:
        if hook is not None:
            hook.remove()
        model.train(was_training)
        if pool is not None:
            pool.shutdown()
        if bar is not None:
            bar.close()
    return results


def reference_encode(model: Any, tokenizer: Any, texts: Sequence[str], *, max_length: int) -> torch.Tensor:
    """The textbook SPLADE: one right-padded batch, full [n, L, V] logits → dense [n, V] float32.

    Memory-hungry on purpose; the oracle that ``encode`` is tested against.
    """
    import torch

    texts = _check_inputs(texts, max_length)
    device = next(model.parameters()).device
    batch = tokenizer(texts, padding=True, truncation=True, max_length=max_length, return_tensors="pt",
                      padding_side="right").to(device)
    was_training = model.training
    model.eval()
    try:
        with torch.inference_mode():
            logits = model(**batch).logits.float()
    finally:
        model.train(was_training)
    weights = torch.log1p(torch.relu(logits)) * batch["attention_mask"].unsqueeze(-1)
    return weights.amax(dim=1)


def quantise(weights: np.ndarray, scale: int = QUANT_SCALE) -> np.ndarray:
    """Integer impacts ``round(w · scale)`` as int32, for Anserini (which truncates float impacts).

    The product is taken in float64 from the float32 weight, then rounded half to even — the same as
    Python's ``round`` used by Pyserini's own SPLADE encoders. So 0.004 → 0, 1.234 → 123, and exact
    halves go to the even neighbour: 0.125 → 12, 0.375 → 38. (0.005 is 0.0049999999 in float32 → 0.)
    Weights below 0.5/scale become 0: callers drop those terms (``quantise_vector`` does).
    """
    if not isinstance(scale, (int, np.integer)) or isinstance(scale, bool) or scale < 1:
        raise BenchmarkError(f"scale must be a positive int, got {scale!r}; "
                             f"the pipeline uses QUANT_SCALE={QUANT_SCALE}")
    w = np.asarray(weights)
    if w.size and not np.isfinite(w).all():
        raise BenchmarkError("weights contain NaN or inf; the model produced non-finite logits")
    return np.rint(w.astype(np.float64) * int(scale)).astype(np.int32)


def quantise_vector(ids: np.ndarray, weights: np.ndarray, scale: int = QUANT_SCALE) -> tuple[np.ndarray, np.ndarray]:
    """``quantise`` one vector and drop the terms that round to 0 (impact 0 means absent)."""
    q = quantise(weights, scale)
    keep = q > 0
    return np.asarray(ids)[keep], q[keep]
