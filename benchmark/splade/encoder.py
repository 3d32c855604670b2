"""``encode``: SPLADE vectors of texts, by one of three paths; ``reference_encode``: the textbook oracle.

The path depends on the head and the precision, and ``record["path"]`` names what ran:

* screened (a screen of ``SCREENS``): a float32 ``nn.Linear`` head; the exact float32 vectors,
  whichever screen (``benchmark.splade.screens``), picked by measurement when none is given;
* plain (the head's dtype, e.g. 'bfloat16'): autocast or a non-float32 head, pooled in the model's
  own arithmetic;
* logits ('logits'): a head that is not a plain Linear; the full logits, max-pooled.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from benchmark.common.errors import BenchmarkError
from benchmark.common.registry import Registry
from benchmark.splade.forward import (
    WIDTH_MULTIPLE,
    Tokenized,
    _capture,
    _check_inputs,
    _decoder,
    _forward,
    _pad,
    _tokenize,
)
from benchmark.splade.pooling import _pool_logits, _pool_plain, _pool_screened, _sparse_rows, _Stats
from benchmark.splade.probe import _choose, _start_path, _sync
from benchmark.splade.screens import SCREENS, _Batch, _exact_reductions, _float32_matmul_unit, _Terms

if TYPE_CHECKING:
    import torch

#: Compute precision → autocast dtype name (None: the model's own dtype, no autocast).
PRECISIONS: Registry[str | None] = Registry("precision", fix="Pass precision='float32' or 'bfloat16'")
PRECISIONS.register("float32", None)
PRECISIONS.register("bfloat16", "bfloat16")


@dataclass
class _Run:
    """What every batch of one encode shares."""

    model: Any
    tokens: list[np.ndarray]
    pad_id: int
    device: Any
    multiple: int
    pool: Any
    workers: int
    dtype: Any
    weight: torch.Tensor | None
    bias: torch.Tensor | None
    terms: _Terms | None
    unit32: float
    record: dict[str, Any]
    stats: _Stats


def encode_screened(run: _Run, rows: np.ndarray) -> tuple[torch.Tensor, float]:
    """One batch through a screen and the exact recompute; the first batch measures the screens when
    no path was given. Returns the pooled values and the time the forward ended."""
    hidden, mask = _forward(
        run.model, run.tokens, rows, run.pad_id, run.device, run.multiple, run.pool, run.workers, run.dtype
    )
    t1 = _sync(run.device)
    assert run.terms is not None  # the screened path always has its terms (see _head)
    prepared = _Batch.of(hidden, mask)
    if run.record["path"] is None:
        run.record.update(_choose(prepared, run.terms, run.pool, run.workers, run.unit32, list(SCREENS)))
    return _pool_screened(
        prepared, run.terms, SCREENS[run.record["path"]], run.pool, run.workers, run.unit32, run.stats
    ), t1


def encode_plain(run: _Run, rows: np.ndarray) -> tuple[torch.Tensor, float]:
    """One batch pooled in the head's own dtype: no screen, no recompute."""
    hidden, mask = _forward(
        run.model, run.tokens, rows, run.pad_id, run.device, run.multiple, run.pool, run.workers, run.dtype
    )
    t1 = _sync(run.device)
    return _pool_plain(hidden, mask, run.weight, run.bias, run.pool, run.workers), t1


def encode_logits(run: _Run, rows: np.ndarray) -> tuple[torch.Tensor, float]:
    """One batch through the whole model, its logits max-pooled: a head that cannot be captured."""
    input_ids, mask = _pad(run.tokens, rows, run.pad_id, run.device, run.multiple)
    logits = run.model(input_ids=input_ids, attention_mask=mask).logits
    t1 = _sync(run.device)
    return _pool_logits(logits, mask.bool()), t1


#: Kind of path → how it encodes one batch.
PATHS: dict[str, Callable[[_Run, np.ndarray], tuple[Any, float]]] = {
    "screened": encode_screened,
    "plain": encode_plain,
    "logits": encode_logits,
}


def _head(decoder: Any, dtype: Any, path: str | None, rows: int, device: Any) -> tuple[str, Any, Any, Any, str | None]:
    """(kind of path, weight, bias, terms, the record's path) for this head and precision."""
    import torch

    if decoder is None:
        return "logits", None, None, None, "logits"  # a head that is not a plain Linear: full logits, no screen
    weight = decoder.weight.detach()
    bias = None if decoder.bias is None else decoder.bias.detach()
    if dtype is not None or weight.dtype != torch.float32:
        weight = weight.to(dtype) if dtype is not None else weight
        return "plain", weight, bias, None, str(weight.dtype).removeprefix("torch.")  # the model's arithmetic
    return "screened", weight, bias, _Terms.of(weight, bias), _start_path(path, rows, device)


def _tokens(tokenizer: Any, texts: Sequence[str] | Tokenized, max_length: int, batch_size: int) -> list[np.ndarray]:
    if isinstance(texts, Tokenized):
        _check_inputs([], max_length, batch_size)
        if texts.max_length != max_length:
            raise BenchmarkError(
                f"texts were tokenised with max_length={texts.max_length}, not {max_length}; "
                "tokenize them again with the same max_length"
            )
        return texts.ids
    return _tokenize(tokenizer, _check_inputs(texts, max_length, batch_size), max_length)


def encode(
    model: Any,
    tokenizer: Any,
    texts: Sequence[str] | Tokenized,
    *,
    max_length: int,
    batch_size: int = 32,
    progress: str | None = None,
    precision: str = "float32",
    path: str | None = None,
    info: dict[str, Any] | None = None,
) -> list[tuple[np.ndarray, np.ndarray]]:
    """SPLADE vectors, one ``(token_ids int32 ascending, weights float32 > 0)`` per text, in input order.

    The screen (``path``) only decides how fast the head runs: the vectors are the same either way. On
    CPU the forwards and the decoder blocks run on ``torch.get_num_threads()`` single-threaded workers
    (the process-wide thread count is set to 1 while they run, then restored).

    Args:
        model: any ``*ForMaskedLM``, run on its device in eval mode (its training flag restored).
        tokenizer: the model's tokenizer.
        texts: the texts, or a ``Tokenized`` from ``tokenize``.
        max_length: texts are truncated to this many tokens.
        batch_size: texts per forward.
        progress: a tqdm description, or None for silence.
        precision: 'float32' keeps the model's dtype and gives the float32 vectors, exact to the last bit
            (see ``benchmark.splade.screens``); 'bfloat16' autocasts the forward and the decoder to
            bfloat16 (weights change in the third significant digit).
        path: a screen of ``SCREENS`` to force, or None to measure them on the first batch (encodes under
            ``PROBE_MIN_ROWS`` tokens take a default).
        info: when given, receives what the encode did: ``path``, ``measured``, ``timings`` ({screen: head
            seconds per document} from the measurement), ``rejected``, ``candidates_fraction`` (share of
            (document, term) pairs recomputed exactly), ``forward_s``, ``head_s``, ``head_gflop_per_doc``,
            ``docs``, ``tokens``.
    """
    import torch

    autocast = PRECISIONS[precision]
    if path is not None:
        SCREENS[path]  # noqa: B018 (an unknown name raises the standard error)
        if autocast is not None:
            raise BenchmarkError(
                f"path={path!r} selects a float32 screen, but precision={precision!r}; "
                "pass path=None with precision='bfloat16'"
            )
    tokens = _tokens(tokenizer, texts, max_length, batch_size)
    if not tokens:
        if info is not None:
            info.update({"path": path, "measured": False, "timings": {}, "candidates_fraction": None, "docs": 0})
        return []
    device = next(model.parameters()).device
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    lengths = np.array([len(x) for x in tokens])
    order = np.argsort(-lengths, kind="stable")  # longest first: peak memory shows up at once

    decoder = _decoder(model)
    from benchmark.model.heads import check_projection_scale

    check_projection_scale(model)  # the captured head input must carry the projection's α
    dtype = getattr(torch, autocast) if autocast else None
    kind, weight, bias, terms, first_path = _head(decoder, dtype, path, int(lengths.sum()), device)
    record: dict[str, Any] = {"measured": False, "timings": {}, "rejected": {}, "path": first_path}
    unit32 = _float32_matmul_unit(device)
    threads = torch.get_num_threads()
    pool = None
    if device.type == "cpu" and threads > 1:
        from concurrent.futures import ThreadPoolExecutor

        pool = ThreadPoolExecutor(threads, thread_name_prefix="splade-head")
    run = _Run(
        model,
        tokens,
        pad_id,
        device,
        WIDTH_MULTIPLE.get(device.type, 1),
        pool,
        threads,
        dtype,
        weight,
        bias,
        terms,
        unit32,
        record,
        _Stats(),
    )
    encode_batch = PATHS[kind]
    bar = None
    if progress is not None:
        from benchmark.common.bars import bar as progress_bar

        bar = progress_bar(total=len(tokens), desc=progress, unit="doc")
    results: list[tuple[np.ndarray, np.ndarray]] = [None] * len(tokens)  # type: ignore[list-item]
    hook = decoder.register_forward_pre_hook(_capture) if decoder is not None else None
    was_training = model.training
    model.eval()
    try:
        with (
            torch.inference_mode(),
            torch.autocast(device.type, dtype=dtype, enabled=dtype is not None),
            _exact_reductions(device),
        ):
            for start in range(0, len(tokens), batch_size):
                rows = order[start : start + batch_size]
                t0 = _sync(device)
                pooled, t1 = encode_batch(run, rows)
                pooled[torch.from_numpy(lengths[rows] == 0).to(pooled.device)] = 0.0
                for r, vector in zip(rows, _sparse_rows(pooled)):
                    results[r] = vector
                t2 = _sync(device)
                run.stats.forward_s += t1 - t0
                run.stats.head_s += t2 - t1
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
    if info is not None:
        _report(info, run, int(lengths.sum()))
    return results


def _report(info: dict[str, Any], run: _Run, n_tokens: int) -> None:
    """What the encode did, into ``info``: the record (path, measurement), then the counts and times."""
    stats, weight = run.stats, run.weight
    vocab = int(weight.shape[0]) if weight is not None else None
    hidden_size = int(weight.shape[1]) if weight is not None else None
    docs = len(run.tokens)
    info.update(run.record)
    info.update(
        {
            "candidates_fraction": stats.candidates / stats.terms if stats.terms else None,
            "docs": docs,
            "tokens": n_tokens,
            "threads": run.workers,
            "device": str(run.device),
            "forward_s": stats.forward_s,
            "head_s": stats.head_s,
            "head_gflop_per_doc": 2 * n_tokens * cast(int, hidden_size) * vocab / docs / 1e9 if vocab else None,
        }
    )


def reference_encode(model: Any, tokenizer: Any, texts: Sequence[str], *, max_length: int) -> torch.Tensor:
    """The textbook SPLADE: one right-padded batch, full [n, L, V] logits → dense [n, V] float32.

    Memory-hungry on purpose; the oracle that ``encode`` is tested against.
    """
    import torch

    texts = _check_inputs(texts, max_length)
    device = next(model.parameters()).device
    batch = tokenizer(
        texts, padding=True, truncation=True, max_length=max_length, return_tensors="pt", padding_side="right"
    ).to(device)
    was_training = model.training
    model.eval()
    try:
        with torch.inference_mode():
            logits = model(**batch).logits.float()
    finally:
        model.train(was_training)
    weights = torch.log1p(torch.relu(logits)) * batch["attention_mask"].unsqueeze(-1)
    return weights.amax(dim=1)
