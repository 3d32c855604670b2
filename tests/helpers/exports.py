"""bert-tiny exported by the harness's own exporter, standing in for a published SparseEncoder
(tests/pipeline/test_published.py, tests/model/test_published_identity.py)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

EXPORT = "splade-bert-tiny-baseline-seed42"  # the exporter's name for a trained bert-tiny baseline, seed 42


def export_bert_tiny(bert_tiny: Path, root: Path) -> Path:
    """bert-tiny through the harness's exporter, as a trained baseline (seed 42) would be exported."""
    from benchmark.report import model_export
    from benchmark.report.build import publish
    from benchmark.report.results import ConditionResult, SuiteResults

    runs = root / "runs"
    train, search, encode, queries = (
        "train-0123456789ab",
        "search-0123456789ab",
        "encode-0123456789ab",
        "queries-0123456789ab",
    )
    shutil.copytree(bert_tiny, runs / "train" / train / "model")
    from benchmark.stages.store import COMPLETE, output_files

    folder = runs / "train" / train  # its config.json as the store writes it: every file with its size and sha256
    (folder / "config.json").write_text(
        json.dumps({"id": train, "kind": "train", "status": COMPLETE, "outputs": output_files(folder), "record": {}})
    )
    for kind, stage, body in (
        ("search", search, {"parents": {"docs": encode, "queries": queries}}),
        ("encode", encode, {"config": {"max_length": 512}, "parents": {}}),
        ("queries", queries, {"config": {"max_length": 256}, "parents": {}}),
    ):
        (runs / kind / stage).mkdir(parents=True)
        (runs / kind / stage / "config.json").write_text(json.dumps(body))
    c = ConditionResult(
        key="evaluate-1",
        dataset="beir/scifact/test",
        system="splade",
        backbone="bert-tiny",
        variant="baseline",
        factor="1",
        trained=True,
        seed=42,
        metrics={"nDCG@10": 0.5},
        queries=300,
        train_id=train,
        search_id=search,
        evaluate_id="evaluate-1",
    )
    folder = publish(
        SuiteResults(suite="hand", measures=["nDCG@10"], conditions=[c], seeds=[42]), root / "results" / "hand"
    )
    [path] = model_export.export_suite(folder, runs, root / "exports", say=lambda line: None)
    assert path.name == EXPORT and (path / "modules.json").is_file()
    return path
