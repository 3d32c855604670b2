"""The corpus stage: a collection's documents as a Pyserini JsonCollection (``corpus/docs.jsonl``).

Query sets that share documents share this stage (MS MARCO dev, DL19 and DL20 encode and index the
8.8M passages once per model). A subset (``max_docs``) keeps every document its topics judge.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmark.stages.records import CorpusRecord
from benchmark.stages.store import Context, Inputs, StageKind


class Corpus(StageKind["Corpus.Config", CorpusRecord]):
    name = "corpus"
    VERSION = 1
    Record = CorpusRecord
    optional_parents = ("topics",)  # with max_docs: the judged documents to keep
    sources = (
        "benchmark.common.idset",
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
        "benchmark.stages.corpus",
    )

    @dataclass(frozen=True)
    class Config:
        source: str  # the dataset that owns the documents (ir_datasets docs parent, or a local folder)
        max_docs: int | None = None
        seed: int = 0

    @classmethod
    def external(cls, config: Config) -> dict[str, Any]:
        from benchmark.data.datasets import corpus_fingerprint

        fingerprint = corpus_fingerprint(config.source)
        return {"content": fingerprint} if fingerprint is not None else {}

    @classmethod
    def describe(cls, config: Config) -> str:
        return config.source + (f" (max_docs={config.max_docs})" if config.max_docs else "")

    @classmethod
    def run(cls, config: Config, inputs: Inputs, out: Path, ctx: Context) -> CorpusRecord:
        from benchmark.data.datasets import judged_docs, materialise_corpus

        keep = judged_docs(inputs.path("topics")) if "topics" in inputs else frozenset()
        return CorpusRecord.from_json(
            materialise_corpus(
                config.source, out, config.max_docs, config.seed, keep, ctx.progress, inputs.external.get("content")
            )
        )

    @classmethod
    def record_problem(cls, meta: Mapping[str, Any], folder: Path, deep: bool) -> str | None:
        """Under --verify: the document and empty-document counts the index is checked against, recounted."""
        if not deep:
            return None
        from benchmark.data.datasets import corpus_record_problem

        return corpus_record_problem(dict(meta.get("record", {})), folder)
