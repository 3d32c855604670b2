"""The topics stage: the judged queries of one query set (``queries.tsv``) and their qrels (``qrels.txt``)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmark.stages.records import TopicsRecord
from benchmark.stages.store import Inputs, StageKind


class Topics(StageKind):
    name = "topics"
    VERSION = 1
    Record = TopicsRecord
    sources = (
        "benchmark.common.snapshot",
        "benchmark.formats.documents",
        "benchmark.formats.qrels",
        "benchmark.formats.query_texts",
        "benchmark.data.datasets",
        "benchmark.stages.topics",
    )

    @dataclass(frozen=True)
    class Config:
        dataset: str  # an ir_datasets id, or a local BEIR folder as an absolute PATH@split
        max_queries: int | None = None
        seed: int = 0

    @classmethod
    def external(cls, config: Config) -> dict[str, Any]:
        from benchmark.data.datasets import DatasetRef

        ref = DatasetRef(config.dataset)
        return {"content": ref.key()} if ref.local is not None else {}

    @classmethod
    def describe(cls, config: Config) -> str:
        return config.dataset + (f" (max_queries={config.max_queries})" if config.max_queries else "")

    @classmethod
    def run(cls, config: Config, inputs: Inputs, out: Path, ctx: Any) -> TopicsRecord:
        from benchmark.data.datasets import materialise_topics

        return TopicsRecord.from_json(
            materialise_topics(config.dataset, out, config.max_queries, config.seed, inputs.external.get("content"))
        )
