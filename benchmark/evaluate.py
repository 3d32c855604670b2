"""The evaluate stage: ir_measures on a run file, aggregate and per-query (for significance tests)."""

from __future__ import annotations

import csv
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmark import faults
from benchmark.data import qrels_path, read_docids
from benchmark.errors import BenchmarkError

PERQUERY = "perquery.tsv"
MEASURE_HELP = "use ir_measures strings such as nDCG@10, RR@10, R@100, R@1000, AP, R(rel=2)@1000"


def parse_measures(names: Sequence[str]) -> list[Any]:
    """ir_measures measure objects; every bad string is reported at once."""
    import ir_measures

    parsed, bad = [], []
    for name in names:
        try:
            parsed.append(ir_measures.parse_measure(name))
        except Exception:
            bad.append(name)
    if bad:
        raise BenchmarkError(f"unknown measure(s) {', '.join(map(repr, bad))}; {MEASURE_HELP}")
    return parsed


def measure_problems(names: Sequence[str]) -> list[str]:
    try:
        parse_measures(names)
    except BenchmarkError as exc:
        return [str(exc)]
    return []


def evaluate_stage(run_file: Path, topics_dir: Path, corpus_dir: Path, measures: Sequence[str], out: Path) -> dict[str, Any]:
    import ir_measures

    parsed = parse_measures(measures)
    run = list(ir_measures.read_trec_run(str(run_file)))
    corpus = set(read_docids(corpus_dir))
    foreign = sorted({d.doc_id for d in run} - corpus)
    if foreign:
        raise BenchmarkError(
            f"run file {run_file} ranks {len(foreign)} document(s) absent from the corpus of {corpus_dir}, e.g. {foreign[0]!r}; "
            "the run was made against another collection: rerun its search stage with --force"
        )
    qrels = list(ir_measures.read_trec_qrels(str(qrels_path(topics_dir))))
    judged = sorted({q.query_id for q in qrels})
    per_query: dict[tuple[str, str], float] = {}
    for m in ir_measures.iter_calc(parsed, qrels, run):
        per_query[(str(m.measure), m.query_id)] = float(m.value)
    tmp = out / f".{PERQUERY}.tmp"
    with open(tmp, "w", encoding="utf-8", newline="") as fh:
        w = csv.writer(fh, delimiter="\t")
        w.writerow(["measure", "query_id", "value"])
        for measure in parsed:
            for qid in judged:  # a judged query the system returned nothing for scores 0, as trec_eval -c
                w.writerow([str(measure), qid, per_query.get((str(measure), qid), 0.0)])
    os.replace(tmp, out / PERQUERY)
    faults.point("evaluate:written")
    # Mean over every judged query, 0 where the run has none (trec_eval -c, as Pyserini's BEIR 2CR).
    aggregate = {str(m): sum(per_query.get((str(m), q), 0.0) for q in judged) / len(judged) for m in parsed}
    return {"metrics": aggregate, "queries": len(judged),
            "run_queries": len({d.query_id for d in run})}


def read_perquery(eval_dir: Path) -> dict[str, dict[str, float]]:
    """measure → {query_id: value}."""
    out: dict[str, dict[str, float]] = {}
    with open(Path(eval_dir) / PERQUERY, encoding="utf-8") as fh:
        rows = csv.reader(fh, delimiter="\t")
        next(rows)
        for measure, qid, value in rows:
            out.setdefault(measure, {})[qid] = float(value)
    return out
