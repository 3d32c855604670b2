"""FLOPS of a sparse retrieval run, from the encodings' term counts.

Its own module so that the search stage, which records it, locks its source (``Search.sources``): a
change here changes the recorded bytes, so it must change the stage's VERSION.
"""

from __future__ import annotations

from typing import Any


def flops(df: Any, documents: int, qf: Any, queries: int) -> float:
    """FLOPS = Σ_j p_q(j)·p_d(j), with p the fraction of queries (documents) where term j is non-zero:
    the expected number of multiplications of one query–document dot product (Paria et al., 2020).

    The counts' dot product is an exact integer, so the value does not depend on BLAS threads."""
    import numpy as np

    return int(np.dot(np.asarray(qf, dtype=np.int64), np.asarray(df, dtype=np.int64))) / (
        max(queries, 1) * max(documents, 1)
    )
