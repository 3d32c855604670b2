"""The triples stage: (query, positive, negative[, score]) training examples, by the recipe's ``negatives``
(``benchmark.data.negatives``): BM25-mined hard negatives, a collection's own triples, or a Hugging Face dataset."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from benchmark.stages.records import TriplesRecord
from benchmark.stages.store import Context, Inputs, StageKind


class Triples(StageKind["Triples.Config", TriplesRecord]):
    name = "triples"
    VERSION = 2  # 2: Hugging Face triples joined to their corpus and queries subsets
    Record = TriplesRecord
    optional_parents = ("topics", "corpus", "run")  # BM25 mining: the training topics, their corpus, a BM25 run
    sources = (
        "benchmark.formats.documents",
        "benchmark.formats.json_lines",
        "benchmark.formats.qrels",
        "benchmark.formats.query_texts",
        "benchmark.formats.trec_run",
        "benchmark.formats.triples",
        "benchmark.data.negatives",
        "benchmark.stages.triples",
    )

    @dataclass(frozen=True)
    class Config:
        negatives: str  # bm25 | official-triples | dataset-hard-negatives
        dataset: str | None = None  # the source of official/HF triples
        depth: int | None = None  # BM25: negatives drawn from the top `depth` non-relevant hits
        seed: int = 42
        limit: int = 0  # at most this many triples (0: all)

    @classmethod
    def describe(cls, config: Config) -> str:
        if config.negatives == "bm25":
            return f"BM25 negatives from top-{config.depth}"
        return f"{config.negatives} from {config.dataset}"

    @classmethod
    def run(cls, config: Config, inputs: Inputs, out: Path, ctx: Context) -> TriplesRecord:
        from benchmark.data.negatives import NEGATIVES_TO_MINER

        options = {k: v for k, v in vars(config).items() if k != "negatives" and v is not None}
        return TriplesRecord.from_json(NEGATIVES_TO_MINER[config.negatives](dict(inputs.paths), out, **options))
