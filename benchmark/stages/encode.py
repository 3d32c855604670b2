"""The encode stage: a SPLADE model turns a corpus into integer impact vectors.

``docs/part-NNNNN.jsonl`` are Pyserini JsonVectorCollection shards (``{token: impact}``, impacts
``round(w · QUANT_SCALE)``), each with its per-term document frequencies; ``df.npy`` sums them (for
FLOPS). Shards appear whole, so a killed encode resumes at the first missing one.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from benchmark.formats.checkpoint import model_path
from benchmark.stages.records import CorpusRecord, EncodeRecord
from benchmark.stages.store import Context, Inputs, StageKind, added_field


class Encode(StageKind["Encode.Config", EncodeRecord]):
    name = "encode"
    VERSION = 2  # 2: canonical exact values on every encoder path (float64 enclosure, float64 log1p)
    Record = EncodeRecord
    parents = ("model", "corpus")
    resumable = True
    device = "gpu"
    counted = (("documents", "corpus", "encoded"),)
    sources = (
        "benchmark.formats.checkpoint",
        "benchmark.formats.documents",
        "benchmark.formats.query_texts",
        "benchmark.formats.vectors",
        "benchmark.model.heads",
        "benchmark.model.varlen",
        "benchmark.splade.encoder",
        "benchmark.splade.forward",
        "benchmark.splade.impacts",
        "benchmark.splade.pooling",
        "benchmark.splade.probe",
        "benchmark.splade.screens",
        "benchmark.retrieval.impact_vectors",
        "benchmark.stages.encode",
    )

    @dataclass(frozen=True)
    class Config:
        max_length: int = 256
        batch_size: int = 32
        shard_size: int = 10000
        precision: str = "float32"
        attn_implementation: str = "sdpa"
        compile: str = added_field("none")  # benchmark.retrieval.impact_vectors.COMPILERS

    @classmethod
    def describe(cls, config: Config) -> str:
        from benchmark.splade.impacts import QUANT_SCALE

        body = "" if config.compile == "none" else f", body compiled ({config.compile})"
        return (
            f"max length {config.max_length}, impacts round(w·{QUANT_SCALE}), {config.precision}, "
            f"{config.attn_implementation} attention{body}"
        )

    @classmethod
    def run(cls, config: Config, inputs: Inputs, out: Path, ctx: Context) -> EncodeRecord:
        from benchmark.retrieval.impact_vectors import encode_docs_stage

        # the parent is a backbone stage or a train stage: both keep their checkpoint in model/
        return EncodeRecord.from_json(
            encode_docs_stage(
                model_path(inputs.path("model")),
                inputs.path("corpus"),
                out,
                max_length=config.max_length,
                batch_size=config.batch_size,
                shard_size=config.shard_size,
                precision=config.precision,
                attn_implementation=config.attn_implementation,
                compile=config.compile,
                progress=ctx.progress,
                cluster=getattr(ctx, "cluster", None),
            )
        )

    @classmethod
    def space_needed(cls, config: Config, inputs: Inputs, out: Path) -> int | None:
        """The finished shards (vectors and their stats), extrapolated to every shard of the corpus,
        plus ``df.npy`` (one stats file's size)."""
        import math

        from benchmark.formats.vectors import SHARD_GLOB, SHARDS

        folder, documents = out / SHARDS, inputs.record("corpus", CorpusRecord).documents
        pairs = [
            (p.stat().st_size, p.with_suffix(".stats.npz").stat().st_size)
            for p in (folder.glob(SHARD_GLOB) if folder.is_dir() else ())
            if p.with_suffix(".stats.npz").is_file()
        ]
        if not pairs or not documents:
            return None
        per_shard = sum(a + b for a, b in pairs) / len(pairs)
        return int(per_shard * math.ceil(documents / config.shard_size) + max(b for _, b in pairs))
