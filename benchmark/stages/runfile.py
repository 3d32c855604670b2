"""The run-file stage: a TREC run made elsewhere (``--run NAME=PATH``), copied into ``run.trec`` so that
the evaluate stage scores it as it scores a search stage's run."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmark.stages.records import RunFileRecord, TopicsRecord
from benchmark.stages.store import Context, Inputs, StageKind


class RunFile(StageKind["RunFile.Config", RunFileRecord]):
    name = "runfile"
    VERSION = 1
    Record = RunFileRecord
    parents = ("topics", "corpus")
    sources = (
        "benchmark.common.idset",
        "benchmark.common.snapshot",
        "benchmark.formats.documents",
        "benchmark.formats.trec_run",
        "benchmark.evaluation.external_runs",
        "benchmark.stages.runfile",
    )

    @dataclass(frozen=True)
    class Config:
        path: str  # absolute; its content enters the id

    @classmethod
    def external(cls, config: Config) -> dict[str, Any]:
        from benchmark.common.fingerprint import file_digest

        return {"content": file_digest(config.path)}

    @classmethod
    def record_problem(cls, meta: Mapping[str, Any], folder: Path, deep: bool) -> str | None:
        """``run.trec`` is a byte copy of the file its id names: its recorded sha256 is that content."""
        from benchmark.formats.trec_run import RUN

        recorded = (meta.get("outputs") or {}).get(RUN, [None, None])[1]
        planned = (meta.get("external") or {}).get("content")
        if recorded and planned and recorded != planned:
            return (
                f"its {RUN} is not the run file its id was computed from (sha256 {recorded[:16]}, id's {planned[:16]})"
            )
        return None

    @classmethod
    def describe(cls, config: Config) -> str:
        return Path(config.path).name

    @classmethod
    def run(cls, config: Config, inputs: Inputs, out: Path, ctx: Context) -> RunFileRecord:
        from benchmark.common.idset import IdSet
        from benchmark.evaluation.external_runs import materialise_run
        from benchmark.formats.documents import docids_path, iter_docids

        dataset = inputs.record("topics", TopicsRecord).dataset or "the dataset"
        return RunFileRecord.from_json(
            materialise_run(
                Path(config.path),
                IdSet(iter_docids(docids_path(inputs.path("corpus")))),
                dataset,
                out,
                inputs.external.get("content"),
            )
        )
