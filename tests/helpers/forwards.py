"""Comparing an encoder forward with the stock padded one (packed documents, a compiled body).

Such a forward sums in another order, so it equals the stock one within rounding only. The scale of
that rounding is measured, not assumed: the gap between the two stock forwards (SDPA and eager
attention), which differ in the same way.
"""

from __future__ import annotations

import numpy as np
import torch

from benchmark.splade.forward import _capture, _decoder, _hidden_batch, _tokenize


def hidden_states(model, tokenizer, texts: list[str]) -> tuple[torch.Tensor, torch.Tensor, list[int]]:
    """(hidden [n, L, H], mask [n, L] as bool, token counts): the MLM head's input for ``texts``, one batch."""
    tokens = _tokenize(tokenizer, texts, 256)
    hook = _decoder(model).register_forward_pre_hook(_capture)
    try:
        with torch.inference_mode():
            hidden, mask = _hidden_batch(
                model, tokens, np.arange(len(tokens)), tokenizer.pad_token_id, torch.device("cpu"), 1
            )
    finally:
        hook.remove()
    return hidden, mask.bool(), [len(t) for t in tokens]


def rounding_tolerance(sdpa: torch.Tensor, eager: torch.Tensor, mask: torch.Tensor) -> float:
    """4× the gap between the two stock forwards' hidden states, and at least 16 float32 units of the
    largest hidden value (should the two agree exactly)."""
    gap = float((eager - sdpa)[mask].abs().max())
    return max(4 * gap, 16 * 2.0**-24 * float(sdpa[mask].abs().max()))


def vector_bound(tolerance: float, weight: torch.Tensor) -> float:
    """How far SPLADE weights can move when hidden states move by ``tolerance``: |Δ logit| ≤ ‖Δh‖·‖w_j‖
    ≤ √K·max|Δh|·max‖w_j‖, and max-pooling and log1p∘relu are 1-Lipschitz."""
    return tolerance * weight.shape[1] ** 0.5 * float(weight.norm(dim=1).max())


def dense(vectors: list[tuple[np.ndarray, np.ndarray]], vocab: int) -> np.ndarray:
    """``splade.encode``'s sparse vectors as one [n, vocab] array."""
    rows = np.zeros((len(vectors), vocab))
    for i, (ids, ws) in enumerate(vectors):
        rows[i, ids] = ws
    return rows
