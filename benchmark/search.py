"""The search stage: top-k retrieval from an index into a TREC run file."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmark import faults, lucene
from benchmark.data import read_queries
from benchmark.encode import read_query_vectors
from benchmark.errors import BenchmarkError
from benchmark.atomic import write_text
from benchmark.stage import CONFIG, read_meta

RUN = "run.trec"
RUN_TAG = "benchmark"

# How to read the queries for each index type, and how to search it.
INDEX_TYPE_TO_SEARCH: dict[str, tuple[Callable[[Path], dict], Callable[..., lucene.Hits]]] = {
    "bm25": (read_queries, lucene.bm25_search),
    "impact": (read_query_vectors, lucene.impact_search),
}


def index_type(index_dir: Path) -> str:
    """The type recorded by the index stage; a foreign folder gets a clear error."""
    try:
        kind = read_meta(index_dir)["record"]["type"]
    except (OSError, ValueError, KeyError, TypeError):
        raise BenchmarkError(f"{index_dir} is not an index stage folder (no valid {CONFIG}); rebuild it with --force") from None
    if kind not in INDEX_TYPE_TO_SEARCH:
        raise BenchmarkError(f"{index_dir} has unknown index type {kind!r}; valid: {', '.join(INDEX_TYPE_TO_SEARCH)}")
    return kind


def format_run(hits: lucene.Hits) -> str:
    lines = []
    for qid, ranked in hits.items():
        for rank, (docid, score) in enumerate(ranked, 1):
            lines.append(f"{qid} Q0 {docid} {rank} {score:.6f} {RUN_TAG}")
    return "\n".join(lines) + ("\n" if lines else "")


def search_stage(index_dir: Path, queries_dir: Path, out: Path, k: int = 1000, threads: int = 2,
                 **params: float) -> dict[str, Any]:
    """``params`` are the ranking function's own (BM25's k1 and b)."""
    kind = index_type(index_dir)
    read, search = INDEX_TYPE_TO_SEARCH[kind]
    queries = read(queries_dir)
    hits = search(Path(index_dir) / "index", queries, k=k, threads=threads, **params)
    write_text(out / RUN, format_run(hits))
    faults.point("search:written")
    record = {"type": kind, "queries": len(queries), "k": k, "queries_without_hits": sum(1 for v in hits.values() if not v)}
    if kind == "impact":
        from benchmark.encode import sparsity

        record.update(sparsity(read_meta(index_dir)["record"]["source"], queries_dir))
    return record


def read_run(path: Path) -> dict[str, list[tuple[str, float]]]:
    run: dict[str, list[tuple[str, float]]] = {}
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            qid, _, docid, _, score, _ = line.split()
            run.setdefault(qid, []).append((docid, float(score)))
    return run
