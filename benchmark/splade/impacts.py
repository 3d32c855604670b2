"""Integer impacts: Anserini's impact indexing truncates float weights, so the pipeline writes
``round(w · QUANT_SCALE)`` itself."""

from __future__ import annotations

import numpy as np

from benchmark.common.errors import BenchmarkError

QUANT_SCALE = 100


def quantise(weights: np.ndarray, scale: int = QUANT_SCALE) -> np.ndarray:
    """Integer impacts ``round(w · scale)`` as int32, for Anserini (which truncates float impacts).

    The product is taken in float64 from the float32 weight, then rounded half to even — the same as
    Python's ``round`` used by Pyserini's own SPLADE encoders. So 0.004 → 0, 1.234 → 123, and exact
    halves go to the even neighbour: 0.125 → 12, 0.375 → 38. (0.005 is 0.0049999999 in float32 → 0.)
    Weights below 0.5/scale become 0: callers drop those terms (``quantise_vector`` does).
    """
    if not isinstance(scale, (int, np.integer)) or isinstance(scale, bool) or scale < 1:
        raise BenchmarkError(
            f"scale must be a positive int, got {scale!r}; the pipeline uses QUANT_SCALE={QUANT_SCALE}"
        )
    w = np.asarray(weights)
    if w.size and not np.isfinite(w).all():
        raise BenchmarkError("weights contain NaN or inf; the model produced non-finite logits")
    return np.rint(w.astype(np.float64) * int(scale)).astype(np.int32)


def quantise_vector(ids: np.ndarray, weights: np.ndarray, scale: int = QUANT_SCALE) -> tuple[np.ndarray, np.ndarray]:
    """``quantise`` one vector and drop the terms that round to 0 (impact 0 means absent)."""
    q = quantise(weights, scale)
    keep = q > 0
    return np.asarray(ids)[keep], q[keep]
