"""The index stage: a Lucene index. ``bm25`` indexes a corpus stage's JsonCollection; ``impact`` an
encode stage's JsonVectorCollection shards, with ``--impact --pretokenized``. An impact index of another
search engine (``engine``, ``benchmark.retrieval.engines``) is built from the same shards into the same
folder: the same kind of artefact (one encode stage's vectors, ready to search), in that engine's format."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from benchmark.formats.documents import COLLECTION
from benchmark.formats.lucene_index import index_path
from benchmark.formats.vectors import SHARDS
from benchmark.stages.records import DocumentsRecord, IndexRecord, StageRecord
from benchmark.stages.store import Context, Inputs, StageKind, added_field


def _bm25_input(folder: Path) -> Path:
    return Path(folder) / COLLECTION


def _impact_input(folder: Path) -> Path:
    return Path(folder) / SHARDS


def _builder(index_type: str) -> Callable[..., None]:
    from benchmark.retrieval import lucene

    return {"bm25": lucene.build_bm25_index, "impact": lucene.build_impact_index}[index_type]


#: index type → (parent stage kind, the parent's collection folder)
INDEX_TYPE_TO_SOURCE: dict[str, tuple[str, Callable[[Path], Path]]] = {
    "bm25": ("corpus", _bm25_input),
    "impact": ("encode", _impact_input),
}


class Index(StageKind["Index.Config", IndexRecord]):
    name = "index"
    VERSION = 1
    Record = IndexRecord
    parents = ("source",)
    sources = (
        "benchmark.formats.documents",
        "benchmark.formats.lucene_index",
        "benchmark.formats.vectors",
        "benchmark.retrieval.engines",
        "benchmark.retrieval.engines._run_text",
        "benchmark.retrieval.engines._taat",
        "benchmark.retrieval.engines.exhaustive",
        "benchmark.retrieval.engines.lucene",
        "benchmark.retrieval.engines.pisa",
        "benchmark.retrieval.engines.seismic",
        "benchmark.retrieval.lucene",
        "benchmark.stages.index",
    )

    @dataclass(frozen=True)
    class Config:
        type: str  # bm25 | impact
        # impact only: the search engine whose index this is (benchmark.retrieval.engines); Lucene's keeps its id
        engine: str = added_field("lucene")
        # the engine's ``revision`` (benchmark.retrieval.engines.Engine): an index of an earlier revision is
        # another stage, never reused
        engine_revision: int = added_field(0)

    @classmethod
    def describe(cls, config: Config) -> str:
        return config.type + (f" ({config.engine})" if config.engine != "lucene" else "")

    @classmethod
    def run(cls, config: Config, inputs: Inputs, out: Path, ctx: Context) -> IndexRecord:
        from benchmark.common import kill_points
        from benchmark.common.errors import BenchmarkError
        from benchmark.retrieval import lucene

        _, collection = INDEX_TYPE_TO_SOURCE[config.type]
        problem = cls.nothing_to_index(config.type, inputs.record("source", DocumentsRecord), inputs.path("source"))
        if problem:
            raise BenchmarkError(problem)
        target = index_path(out)
        if target.exists():  # a half-built Lucene index is never reused
            shutil.rmtree(target)
        if config.engine != "lucene":
            from benchmark.retrieval import engines

            stats = engines.choose(config.engine).engine.build(collection(inputs.path("source")), target, ctx.threads)
            kill_points.point("index:built")
        else:
            _builder(config.type)(collection(inputs.path("source")), target, ctx.threads)
            kill_points.point("index:built")
            stats = lucene.index_stats(target)
        if stats["documents"] == 0:
            raise BenchmarkError(f"the {config.type} index holds no documents; check the {inputs.path('source')} stage")
        engine = {"engine": config.engine} if config.engine != "lucene" else {}
        return IndexRecord.from_json({"type": config.type, **stats, **engine})

    @classmethod
    def space_needed(cls, config: Config, inputs: Inputs, out: Path) -> int | None:
        """About the source collection's size: Lucene's postings without stored text or positions take
        less than the JSON they come from."""
        from benchmark.common.disk import disk_usage

        _, collection = INDEX_TYPE_TO_SOURCE[config.type]
        return disk_usage(collection(inputs.path("source")))

    @staticmethod
    def nothing_to_index(index_type: str, source: DocumentsRecord, folder: Path) -> str | None:
        """One line, before the JVM starts, when every document of the source is empty: an impact
        index of a model whose impacts all round to 0 (a collapsed model, or a head scaled so far that
        the weights vanish or overflow) would hold no document and rank nothing."""
        documents, empty = source.documents, source.empty_documents
        if not documents or empty < documents:
            return None
        if index_type == "impact":
            return (
                f"all {documents} documents encoded to empty vectors in {folder} (every impact rounds to 0 when "
                "quantised): the model is collapsed or its MLM head is scaled out of range (a "
                "--rescale-factor far from 1); use a factor nearer 1, or train it with a recipe that does not "
                "collapse"
            )
        return f"all {documents} documents of {folder} have no text; the corpus has nothing to index"

    @classmethod
    def consistent(cls, record: StageRecord, parents: Mapping[str, StageRecord]) -> str | None:
        source = parents.get("source")
        if not isinstance(source, DocumentsRecord) or "documents" in source.absent:
            return None
        expected = source.documents - source.empty_documents  # Lucene skips empty documents
        held = getattr(record, "documents", None)
        if held != expected:
            return f"the index holds {held} documents, but its source has {expected} to index"
        return None
