"""The ``exhaustive`` engine's compiled search: numba, imported only when that engine searches.

Module-level functions, so numba caches their machine code on disk (where it may write) and a new process
loads it instead of compiling again.
"""

from __future__ import annotations

import numba
import numpy as np

from benchmark.retrieval.engines.exhaustive import RANGE_BITS


@numba.njit(nogil=True, cache=True)
def keep(scores, numbers, n, k):  # type: ignore[no-untyped-def]
    """The k best of n candidates moved to the front (a selection, then a compaction in place); returns the
    k-th score, which a later candidate must beat (one equal to it cannot change the k scores)."""
    theta = np.partition(scores[:n].copy(), n - k)[n - k]
    ties = k  # how many scores equal to theta are kept: those past the k - (how many beat it) are dropped
    for i in range(n):
        if scores[i] > theta:
            ties -= 1
    m = 0
    for i in range(n):  # writes only where it has read (m <= i)
        if scores[i] > theta or (scores[i] == theta and ties > 0):
            if scores[i] == theta:
                ties -= 1
            scores[m] = scores[i]
            numbers[m] = numbers[i]
            m += 1
    return theta


@numba.njit(nogil=True, cache=True)
def top_k(terms, weights, starts, local, impacts, ranges, documents, k, acc, scores, numbers):  # type: ignore[no-untyped-def]
    """The k best documents' scores and numbers in the first entries of ``scores`` and ``numbers``, in no
    order; returns how many (fewer than k where fewer documents match)."""
    theta = 0
    n = 0
    cap = scores.shape[0]
    for r in range(ranges):
        base = r << RANGE_BITS
        touched = False
        for i in range(terms.shape[0]):
            w = weights[i]
            s = starts[terms[i] * ranges + r]
            e = starts[terms[i] * ranges + r + 1]
            if s < e:
                touched = True
            for j in range(s, e):
                acc[local[j]] += w * impacts[j]
        if not touched:
            continue
        for d in range(min(1 << RANGE_BITS, documents - base)):
            v = acc[d]
            if v > theta:
                if n == cap:
                    theta = keep(scores, numbers, n, k)
                    n = k
                if v > theta:
                    scores[n] = v
                    numbers[n] = base + d
                    n += 1
            acc[d] = 0
    if n > k:
        keep(scores, numbers, n, k)
        n = k
    return n


@numba.njit(nogil=True, cache=True)
def ranked(scores, numbers, idrank):  # type: ignore[no-untyped-def]
    """The k best in ranked order, as ``ranked`` orders hits: by score at its float32 value (as Lucene and PISA
    print it), best first, ties by document id (``idrank``, each id's place in sorted order). Returns (printed
    scores, document numbers)."""
    n = numbers.shape[0]
    printed = np.empty(n, np.int64)
    key = np.empty(n, np.int64)
    wide = False
    for i in range(n):
        p = np.int64(np.float32(scores[i]))
        printed[i] = p
        if p >= 1 << 32:
            wide = True
        key[i] = -p * (1 << 31) + idrank[numbers[i]]  # one key while a score fits 32 bits (an id's place 31)
    if wide:
        order = np.argsort(idrank[numbers], kind="mergesort")  # by id, then stably by score
        order = order[np.argsort(-printed[order], kind="mergesort")]
    else:
        order = np.argsort(key)
    return printed[order], numbers[order]


@numba.njit(nogil=True, cache=True)
def scatter(source, by_range, starts, out):  # type: ignore[no-untyped-def]
    """Postings stored a range at a time (each range's by term) copied to the index's order, by term and then by
    range: term t's postings in range r go to ``starts[t * ranges + r]``."""
    ranges, n_terms = by_range.shape
    p = 0
    for r in range(ranges):
        for t in range(n_terms):
            d = starts[t * ranges + r]
            for j in range(by_range[r, t]):
                out[d + j] = source[p + j]
            p += by_range[r, t]
