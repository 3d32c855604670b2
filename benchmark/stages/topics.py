"""The topics stage: the judged queries of one query set (``queries.tsv``) and their qrels (``qrels.txt``)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmark.stages.records import TopicsRecord
from benchmark.stages.store import Context, Inputs, StageKind


class Topics(StageKind["Topics.Config", TopicsRecord]):
    name = "topics"
    VERSION = 1
    Record = TopicsRecord
    sources = (
        "benchmark.common.snapshot",
        "benchmark.formats.documents",
        "benchmark.formats.qrels",
        "benchmark.formats.query_texts",
        "benchmark.data.datasets",
        "benchmark.data.sources",
        "benchmark.data.sources.base",
        "benchmark.data.sources.beir_folder",
        "benchmark.data.sources.ir_datasets_id",
        "benchmark.data.sources.subset",
        "benchmark.stages.topics",
    )

    @dataclass(frozen=True)
    class Config:
        dataset: str  # a dataset as its source places it (an ir_datasets id, a local BEIR folder as PATH@split)
        max_queries: int | None = None
        seed: int = 0

    @classmethod
    def external(cls, config: Config) -> dict[str, Any]:
        from benchmark.common.errors import BenchmarkError
        from benchmark.data.sources import parse

        try:
            ref = parse(config.dataset)
        except BenchmarkError:  # a name in no known form: validation refuses it before any stage runs
            return {}
        return {"content": ref.key()} if ref.digest() is not None else {}

    @classmethod
    def describe(cls, config: Config) -> str:
        return config.dataset + (f" (max_queries={config.max_queries})" if config.max_queries else "")

    @classmethod
    def run(cls, config: Config, inputs: Inputs, out: Path, ctx: Context) -> TopicsRecord:
        from benchmark.data.datasets import materialise_topics

        return TopicsRecord.from_json(
            materialise_topics(config.dataset, out, config.max_queries, config.seed, inputs.external.get("content"))
        )
