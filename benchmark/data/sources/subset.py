"""The cuts ``max_queries`` and ``max_docs`` make: deterministic subsets, the same on every machine and
Python version, whatever the source. A cut of the queries keeps judged ones; a cut of the documents keeps
every document the kept queries judge and fills up with the others in hash order."""

from __future__ import annotations

import hashlib
import heapq
from collections.abc import Iterable, Set as AbstractSet

from benchmark.common.errors import BenchmarkError


def rank(key: str, seed: int) -> str:
    """A stable pseudo-random order: the same subset on every machine and Python version."""
    return hashlib.sha1(f"{seed}:{key}".encode()).hexdigest()


def check_limit(name: str, value: int | None) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise BenchmarkError(f"{name} = {value!r} must be a positive integer (or None for everything)")


def cut_queries(judged: Iterable[str], max_queries: int | None, seed: int) -> list[str]:
    """The judged query ids kept: all of them, sorted, or the first ``max_queries`` in ``rank`` order."""
    judged = sorted(judged)
    return sorted(judged, key=lambda q: rank(q, seed))[:max_queries] if max_queries else judged


def first_by_rank(ids: Iterable[str], room: int, seed: int, keep: AbstractSet[str]) -> set[str]:
    """The ``room`` distinct ids outside ``keep`` that come first in ``rank`` order, held in memory bounded
    by ``room``: a cut of an 8.8M-passage corpus to a CI subset never holds the corpus's ids."""
    top: list[tuple[int, str]] = []  # the cut so far as a heap, the last in rank order on top (negated)
    held: set[str] = set()
    if room <= 0:
        return held  # the judged documents fill the cut: the corpus is not read for it
    for doc_id in ids:
        if doc_id in keep or doc_id in held:
            continue  # a repeat of an id put out of the cut ranks after its top, so it stays out too
        key = -int(rank(doc_id, seed), 16)
        if len(top) < room:
            heapq.heappush(top, (key, doc_id))
            held.add(doc_id)
        elif key > top[0][0]:
            held.discard(heapq.heapreplace(top, (key, doc_id))[1])
            held.add(doc_id)
    return held
