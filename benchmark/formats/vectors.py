"""SPLADE impact vectors as Pyserini reads them: an encode stage's ``docs/part-NNNNN.jsonl``
(JsonVectorCollection shards, ``{"id", "contents": "", "vector": {term: impact}}`` per line) and a
queries stage's ``queries.jsonl`` (``{"id", "vector"}`` per line). Impacts are integers, quantised
before they are written (Anserini truncates float impacts)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import NamedTuple

from benchmark.common.atomic import write_jsonl

SHARDS = "docs"  # the JsonVectorCollection folder, what the impact index reads
SHARD = "part-{:05d}.jsonl"
SHARD_GLOB = "part-*.jsonl"
QUERIES = "queries.jsonl"


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


def write_doc_vectors(path: Path | str, rows: Iterable[Vector]) -> int:
    """One shard; ``contents`` is empty (an impact index stores no text)."""
    return write_jsonl(path, ({"id": r.id, "contents": "", "vector": r.vector} for r in rows))


def write_query_vectors(path: Path | str, rows: Iterable[Vector]) -> int:
    return write_jsonl(path, ({"id": r.id, "vector": r.vector} for r in rows))
