"""``lucene``: Anserini's impact search (``benchmark.retrieval.lucene``), the default and the exact reference."""

from __future__ import annotations

from pathlib import Path

from benchmark.formats.trec_run import Hits
from benchmark.retrieval.engines import Engine, Point, register


class Lucene(Engine):
    name = "lucene"
    points = (Point("exact", True),)

    def build(self, shards: Path, index: Path, threads: int) -> dict[str, int]:
        from benchmark.retrieval import lucene

        lucene.build_impact_index(shards, index, threads)
        return lucene.index_stats(index)

    def search(
        self,
        index: Path,
        queries: dict[str, dict[str, int]],
        k: int,
        point: Point,
        threads: int = 1,
        timing: dict[str, float] | None = None,
    ) -> Hits:
        from benchmark.retrieval import lucene

        inner: dict[str, float] = {}
        hits = lucene.impact_search(index, queries, k=k, threads=threads, timing=inner)
        if timing is not None:
            for key in ("lucene", "engine"):
                for unit in ("_s", "_cpu_s"):
                    timing[key + unit] = timing.get(key + unit, 0.0) + inner.get("lucene" + unit, 0.0)
        return hits


register(Lucene())
