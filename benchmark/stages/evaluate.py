"""The evaluate stage: ir_measures on a search stage's run, per query (``perquery.tsv``, for the
significance tests) and aggregated over every judged query (0 where the run has none, as trec_eval -c)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmark.formats.trec_run import RUN
from benchmark.stages.records import EvaluateRecord
from benchmark.stages.store import Context, Inputs, StageKind


class Evaluate(StageKind["Evaluate.Config", EvaluateRecord]):
    name = "evaluate"
    VERSION = 2  # 2: perquery.tsv through the one CSV writer (\n line ends)
    Record = EvaluateRecord
    parents = ("run", "topics", "corpus")
    counted = (("queries", "topics", "evaluated"),)
    sources = (
        "benchmark.common.idset",
        "benchmark.formats.documents",
        "benchmark.formats.perquery",
        "benchmark.formats.qrels",
        "benchmark.formats.trec_run",
        "benchmark.evaluation.measures",
        "benchmark.stages.evaluate",
    )

    @dataclass(frozen=True)
    class Config:
        measures: tuple[str, ...]  # ir_measures strings, canonical and sorted

    @classmethod
    def describe(cls, config: Config) -> str:
        return ", ".join(config.measures)

    @classmethod
    def run(cls, config: Config, inputs: Inputs, out: Path, ctx: Context) -> EvaluateRecord:
        from benchmark.evaluation.measures import evaluate_stage

        return EvaluateRecord.from_json(
            evaluate_stage(
                Path(inputs.path("run")) / RUN, inputs.path("topics"), inputs.path("corpus"), list(config.measures), out
            )
        )

    @classmethod
    def record_problem(cls, meta: Mapping[str, Any], folder: Path, deep: bool) -> str | None:
        """The recorded means must be those of the per-query values beside them (read on every reuse: small)."""
        from benchmark.evaluation.measures import record_problem

        return record_problem(meta.get("record", {}), folder)
