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
def _digits(out, p, v):  # type: ignore[no-untyped-def]
    """``v`` (> 0) in decimal at ``out[p:]``; returns the end."""
    width = 0
    m = v
    while m > 0:
        m //= 10
        width += 1
    for j in range(width - 1, -1, -1):
        out[p + j] = 48 + v % 10
        v //= 10
    return p + width


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
def run_text(qid, printed, numbers, docbytes, docstarts, tail, out):  # type: ignore[no-untyped-def]
    """One query's ranked hits (``ranked``) as the run lines ``format_run`` prints, in UTF-8 at the front of
    ``out``; returns their length in bytes and a sum of each id's first byte. Every hit's id is located and
    touched before any is copied, so the cache misses on a large collection's ids overlap rather than follow one
    another; the sum is returned so that the compiler cannot drop the touches (with ``sum & 0`` it did, and the
    misses came one at a time while the lines were written: 0.13 against 0.05 ms a query at 1M documents)."""
    n = numbers.shape[0]
    first = np.empty(n, np.int64)
    last = np.empty(n, np.int64)
    for i in range(n):
        first[i] = docstarts[numbers[i]]
        last[i] = docstarts[numbers[i] + 1]
    touched = 0
    for i in range(n):
        touched += docbytes[first[i]]
    p = 0
    for i in range(n):
        for b in qid:
            out[p] = b
            p += 1
        out[p] = 32  # " Q0 "
        out[p + 1] = 81
        out[p + 2] = 48
        out[p + 3] = 32
        p += 4
        for j in range(first[i], last[i]):
            out[p] = docbytes[j]
            p += 1
        out[p] = 32
        p = _digits(out, p + 1, i + 1)
        out[p] = 32
        p = _digits(out, p + 1, printed[i])
        for b in tail:
            out[p] = b
            p += 1
    return p, touched


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
