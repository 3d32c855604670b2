"""Standard exports of a suite's scores, rendered from its results alone: one MTEB-style result JSON
per condition (``mteb/<run tag>/<Task>.json``, the layout of MTEB's results repository), so MTEB and
BEIR tooling read the numbers without this harness. The TREC runs (``trec/``) and the per-query
values (``perquery.csv.gz``) are written with the results; see ``benchmark.report.results``."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from benchmark.common.atomic import write_json
from benchmark.common.confine import confined
from benchmark.report.results import ConditionResult, SuiteResults, run_tag

MTEB_DIR = "mteb"
#: ir_measures measure → MTEB's score key (with the cutoff appended): nDCG@10 → ndcg_at_10, RR@10 → mrr_at_10
MEASURE_TO_MTEB = {"nDCG": "ndcg_at", "RR": "mrr_at", "R": "recall_at", "P": "precision_at", "AP": "map_at"}
#: BEIR dataset (ir_datasets id without the split) → MTEB task name
BEIR_TO_MTEB = {
    "beir/arguana": "ArguAna",
    "beir/climate-fever": "ClimateFEVER",
    "beir/cqadupstack": "CQADupstackRetrieval",
    "beir/dbpedia-entity": "DBPedia",
    "beir/fever": "FEVER",
    "beir/fiqa": "FiQA2018",
    "beir/hotpotqa": "HotpotQA",
    "beir/msmarco": "MSMARCO",
    "msmarco-passage": "MSMARCO",
    "beir/nfcorpus": "NFCorpus",
    "beir/nq": "NQ",
    "beir/quora": "QuoraRetrieval",
    "beir/scidocs": "SCIDOCS",
    "beir/scifact": "SciFact",
    "beir/trec-covid": "TRECCOVID",
    "beir/webis-touche2020": "Touche2020",
}
SPLITS = ("test", "dev", "train")
_MEASURE = re.compile(r"(?P<name>[A-Za-z]+)@(?P<cutoff>\d+)")


def mteb_key(measure: str) -> str | None:
    """MTEB's name for an ir_measures measure; None for one MTEB has no name for (R(rel=2)@1000)."""
    m = _MEASURE.fullmatch(measure)
    if m is None or m.group("name") not in MEASURE_TO_MTEB:
        return None
    return f"{MEASURE_TO_MTEB[m.group('name')]}_{m.group('cutoff')}"


def task_and_split(dataset: str) -> tuple[str, str]:
    """("SciFact", "test") for beir/scifact/test; an unknown id keeps its own name."""
    parts = dataset.split("/")
    split = next((p for p in reversed(parts) if p in SPLITS), "test")
    for n in range(len(parts), 0, -1):
        name = "/".join(parts[:n])
        if name in BEIR_TO_MTEB:
            return BEIR_TO_MTEB[name], split
    return re.sub(r"[^\w.-]", "_", dataset), split


def mteb_result(c: ConditionResult, main: str) -> dict[str, Any]:
    task, split = task_and_split(c.dataset)
    scores: dict[str, Any] = {key: value for m, value in c.metrics.items() if (key := mteb_key(m)) is not None}
    scores["main_score"] = c.metrics.get(main, next(iter(c.metrics.values())))
    scores["hf_subset"] = "default"
    scores["languages"] = ["eng-Latn"]
    scores["ir_measures"] = dict(c.metrics)  # every measure under its ir_measures name, those MTEB lacks included
    return {
        "dataset_revision": None,
        "task_name": task,
        "mteb_version": None,
        "evaluation_time": None,
        "kg_co2_emissions": None,
        "scores": {split: [scores]},
    }


def write_mteb(results: SuiteResults, folder: Path) -> list[str]:
    """One MTEB-style JSON per system and task (its splits together, as MTEB stores them); returns the
    files written, relative to ``folder``. Files of systems no longer in the results are removed."""
    settings = results.settings()
    files: dict[str, dict[str, Any]] = {}
    for c in results.conditions:
        if not c.scored:
            continue
        main = settings.measure_for.get(c.dataset) or settings.measure or results.measures[0]
        result = mteb_result(c, main)
        name = f"{MTEB_DIR}/{run_tag(c)}/{result['task_name']}.json"
        if name in files:
            files[name]["scores"].update(result["scores"])
        else:
            files[name] = result
    for name, result in files.items():
        path = confined(folder, name, "an MTEB export named by a system of results.json")
        path.parent.mkdir(parents=True, exist_ok=True)
        write_json(path, result)
    root = Path(folder) / MTEB_DIR
    if root.is_dir():
        for stale in root.glob("*/*.json"):
            if str(stale.relative_to(folder)) not in files:
                stale.unlink()
        for empty in root.iterdir():
            if empty.is_dir() and not any(empty.iterdir()):
                empty.rmdir()
    return sorted(files)
