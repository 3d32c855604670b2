"""ir_datasets' files, built once across processes.

ir_datasets makes its files on first use (a zip extracted, a document store filled) with no lock
between processes, and it counts a document store as built once it holds one document. Two processes
on a fresh cache (two runs, torchrun ranks, Ray workers, test workers) could read a half-built store
(a corpus cut short, silently) or fill one together (a corrupt store: "Invalid size" from lz4). Every
first use here runs under one exclusive lock per cache; once built, the files are only read.
"""

from __future__ import annotations

import contextlib
import fcntl
from collections.abc import Iterator
from typing import Any

LOCK_NAME = ".benchmark-build.lock"


@contextlib.contextmanager
def cache_lock() -> Iterator[None]:
    """An exclusive lock on the ir_datasets cache, in the folder ir_datasets itself uses."""
    import ir_datasets

    with open(ir_datasets.util.home_path() / LOCK_NAME, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def docs_iter(ds: Any) -> Iterator[Any]:
    """``ds.docs_iter()``, started under the lock: a store that ir_datasets fills on first use is
    filled whole before any document is read; a corpus read from its source file is not copied."""
    with cache_lock():
        docs = iter(ds.docs_iter())
        first = next(docs, None)
    if first is not None:
        yield first
        yield from docs


def docs_store(ds: Any) -> Any:
    """``ds.docs_store()`` for lookups, filled under the lock."""
    with cache_lock():
        store = ds.docs_store()
        if hasattr(store, "build"):
            store.build()
    return store


def topics(ds: Any) -> tuple[list[Any], list[Any]]:
    """(queries, qrels) of ``ds``, extracted under the lock."""
    with cache_lock():
        queries = list(ds.queries_iter()) if ds.has_queries() else []
        qrels = list(ds.qrels_iter()) if ds.has_qrels() else []
    return queries, qrels
