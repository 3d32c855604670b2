"""SPLADE impact vectors as Pyserini reads them: an encode stage's ``docs/part-NNNNN.jsonl``
(JsonVectorCollection shards, ``{"id", "contents": "", "vector": {term: impact}}`` per line) and a
queries stage's ``queries.jsonl`` (``{"id", "vector"}`` per line). Impacts are integers, quantised
before they are written (Anserini truncates float impacts). Beside them, per-term counts as NumPy
arrays over the vocabulary, for FLOPS: the encode stage's document frequencies ``df.npy`` and the
queries stage's query frequencies ``qf.npy``."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

from benchmark.common.atomic import write_jsonl

SHARDS = "docs"  # the JsonVectorCollection folder, what the impact index reads
SHARD = "part-{:05d}.jsonl"
SHARD_GLOB = "part-*.jsonl"
QUERIES = "queries.jsonl"
DF = "df.npy"
QF = "qf.npy"


class Vector(NamedTuple):
    id: str
    vector: dict[str, int]


def shard_path(folder: Path | str, n: int) -> Path:
    """Shard ``n`` inside a JsonVectorCollection folder."""
    return Path(folder) / SHARD.format(n)


def read_vectors(path: Path | str) -> Iterator[Vector]:
    """The rows of one shard or of ``queries.jsonl``."""
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            row = json.loads(line)
            yield Vector(row["id"], row["vector"])


def read_collection(folder: Path | str) -> Iterator[Vector]:
    """The rows of every shard of a JsonVectorCollection folder, shard by shard in name order (document order)."""
    for shard in sorted(Path(folder).glob(SHARD_GLOB)):
        yield from read_vectors(shard)


def read_vector_map(path: Path | str) -> dict[str, dict[str, int]]:
    """id → vector, of ``queries.jsonl`` (or one shard)."""
    return {row.id: row.vector for row in read_vectors(path)}


def read_counts(path: Path | str) -> Any:
    """``df.npy`` or ``qf.npy``: an integer array over the vocabulary."""
    import numpy as np

    return np.load(path)


def write_doc_vectors(path: Path | str, rows: Iterable[Vector]) -> int:
    """One shard; ``contents`` is empty (an impact index stores no text)."""
    return write_jsonl(path, ({"id": r.id, "contents": "", "vector": r.vector} for r in rows))


def write_query_vectors(path: Path | str, rows: Iterable[Vector]) -> int:
    return write_jsonl(path, ({"id": r.id, "vector": r.vector} for r in rows))
