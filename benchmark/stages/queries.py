"""The queries stage: a SPLADE model turns a query set into ``queries.jsonl`` of ``{token: impact}``,
with ``qf.npy`` (per-term query frequencies, for FLOPS)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from benchmark.formats.checkpoint import model_path
from benchmark.stages.records import QueriesRecord
from benchmark.stages.store import Context, Inputs, StageKind


class Queries(StageKind["Queries.Config", QueriesRecord]):
    name = "queries"
    VERSION = 2  # 2: canonical exact values on every encoder path (float64 enclosure, float64 log1p)
    Record = QueriesRecord
    parents = ("model", "topics")
    device = "gpu"
    counted = (("queries", "topics", "encoded"),)
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
        "benchmark.stages.queries",
    )

    @dataclass(frozen=True)
    class Config:
        max_length: int = 64
        batch_size: int = 32
        precision: str = "float32"
        attn_implementation: str = "sdpa"

    @classmethod
    def describe(cls, config: Config) -> str:
        from benchmark.splade.impacts import QUANT_SCALE

        return (
            f"max length {config.max_length}, impacts round(w·{QUANT_SCALE}), {config.precision}, "
            f"{config.attn_implementation} attention"
        )

    @classmethod
    def run(cls, config: Config, inputs: Inputs, out: Path, ctx: Context) -> QueriesRecord:
        from benchmark.retrieval.impact_vectors import encode_queries_stage

        return QueriesRecord.from_json(
            encode_queries_stage(
                model_path(inputs.path("model")),
                inputs.path("topics"),
                out,
                max_length=config.max_length,
                batch_size=config.batch_size,
                precision=config.precision,
                attn_implementation=config.attn_implementation,
                progress=ctx.progress,
            )
        )
