"""BM25 in Lucene: one row, the lexical reference every other row is tested against."""

from __future__ import annotations

from typing import Any

from benchmark.pipeline.systems.base import BM25, Build, Condition, RowKey, System
from benchmark.stages import Index, Search
from benchmark.stages.store import Stage
from benchmark.suites import Bm25


class Bm25System(System):
    order = 10
    name = BM25
    against_bm25 = False

    def present(self, suite: Any, opts: Any) -> bool:
        return suite.bm25 is not None

    def conditions(self, build: Build) -> list[Condition]:
        suite = build.suite
        if suite.bm25 is None:
            return []
        out = []
        for name in build.datasets:
            search = self.search(build, name)
            out.append(
                Condition(
                    name,
                    BM25,
                    evaluate=build.evaluate(search, name),
                    search=search,
                    command=build.command(systems=BM25, datasets=name),
                )
            )
        return out

    @staticmethod
    def search(build: Build, name: str) -> Stage:
        """The BM25 search of ``name`` under the suite's k1 and b (a reranker's first stage builds the same)."""
        suite = build.suite
        topics, corpus = build.data(name)
        idx = Stage(Index, Index.Config("bm25"), {"source": corpus})
        bm25 = suite.bm25 or Bm25()
        config = Search.Config(suite.k, bm25.k1, bm25.b, suite.removes_query(name))
        return Stage(Search, config, {"index": idx, "queries": topics})

    def label(self, key: RowKey) -> str:
        return "BM25"


SYSTEM = Bm25System()
