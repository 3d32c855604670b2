"""Search comparison: ``benchmark.retrieval.lucene.impact_search`` against Pyserini's pre-encoded
``LuceneImpactSearcher``.

Uses the ``encode`` part's float32 vectors (quantised) for both the index and the queries.
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchmark.common.errors import BenchmarkError
from benchmark.perf.encode_speed import quantised, scifact
from benchmark.perf.report import Row
from benchmark.perf.workers import load

if TYPE_CHECKING:
    from benchmark.formats.trec_run import Hits


def part_search(args: argparse.Namespace, work: Path) -> tuple[list[Row], list[str]]:
    import numpy as np
    import scipy.sparse as sp
    from transformers import AutoTokenizer

    from benchmark.retrieval import lucene
    from benchmark.retrieval.impact_vectors import vocabulary_terms
    from benchmark.splade.impacts import QUANT_SCALE

    name = "enc-ours-float32"
    if not (work / f"{name}.docs.npz").exists():
        raise BenchmarkError("--only search needs the encode part's vectors; run with --only encode,search")
    docs = quantised(sp.load_npz(work / f"{name}.docs.npz"), QUANT_SCALE).tocsr()
    qmat = quantised(sp.load_npz(work / f"{name}.queries.npz"), QUANT_SCALE).tocsr()
    doc_ids = [str(d) for d in np.load(work / "doc_ids.npy")]
    _, _, queries, qrels = scifact(args.docs)
    terms = vocabulary_terms(AutoTokenizer.from_pretrained(args.model), docs.shape[1])

    def vec(m: Any, i: int) -> dict[str, int]:
        row = m.getrow(i)
        return {terms[j]: int(w) for j, w in zip(row.indices.tolist(), row.data.tolist())}

    coll, index = work / "collection", work / "index"
    for folder in (coll, index):  # Anserini would add to an existing index
        shutil.rmtree(folder, ignore_errors=True)
    coll.mkdir()
    with open(coll / "part-00000.jsonl", "w") as fh:
        for i, doc_id in enumerate(doc_ids):
            fh.write(json.dumps({"id": doc_id, "contents": "", "vector": vec(docs, i)}) + "\n")
    qvecs = {qid: vec(qmat, i) for i, qid in enumerate(queries)}
    t = time.perf_counter()
    lucene.build_impact_index(coll, index, threads=args.threads)
    index_s = time.perf_counter() - t
    cached = work / "queries-cached.jsonl"
    with open(cached, "w") as fh:  # Pyserini's own pre-encoded query format
        for qid, v in qvecs.items():
            fh.write(json.dumps({"id": qid, "contents": qid, "vector": v}) + "\n")

    lucene.start_jvm()
    from pyserini.search.lucene import LuceneImpactSearcher

    opened: list[float] = []

    def pyserini_path(threads: int) -> Hits:
        t = time.perf_counter()
        searcher = LuceneImpactSearcher(str(index), str(cached))
        opened.append(time.perf_counter() - t)
        live = [q for q in qvecs if any(t in searcher.idf for t in qvecs[q])]
        hits = searcher.batch_search(live, live, k=1000, threads=threads)
        searcher.close()
        return {q: [(h.docid, float(h.score)) for h in hits.get(q, [])] for q in qvecs}

    def ours_path(threads: int) -> Hits:
        return lucene.impact_search(index, qvecs, k=1000, threads=threads)

    systems = {"pyserini pre-encoded": pyserini_path, "ours impact_search": ours_path}
    for fn in systems.values():  # JIT and page-cache warm-up, untimed
        fn(1)
    rows, lines = [], [f"impact index of {len(doc_ids)} docs built in {index_s:.1f} s"]
    for threads in (1, 2):
        best = {name: float("inf") for name in systems}
        hits: dict[str, Hits] = {}  # system → its hits
        opened.clear()
        for rep in range(args.search_repeat):  # alternate the order: neither side always runs first
            for name in list(systems) if rep % 2 == 0 else list(systems)[::-1]:
                t = time.perf_counter()
                hits[name] = systems[name](threads)
                best[name] = min(best[name], time.perf_counter() - t)
        ref = hits["pyserini pre-encoded"]
        for name in systems:
            same = all([d for d, _ in hits[name][q]] == [d for d, _ in ref[q]] for q in qvecs)
            note = f"queries/s incl. opening the searcher; same rankings as Pyserini: {same}"
            if name == "pyserini pre-encoded":
                note += f"; opening alone {min(opened):.2f} s"
            rows.append(
                Row(
                    "search",
                    f"{name} ({threads} thr)",
                    len(qvecs),
                    best[name],
                    len(qvecs) / best[name],
                    load=f"{load():.1f}",
                    note=note,
                )
            )
        rows[-2].ratio, rows[-1].ratio = 1.0, rows[-1].docs_per_s / rows[-2].docs_per_s
    import ir_measures

    ours = lucene.impact_search(index, qvecs, k=1000, threads=args.threads)
    run = {q: {d: s for d, s in h} for q, h in ours.items()}
    ndcg = ir_measures.calc_aggregate([ir_measures.nDCG @ 10], qrels, run)[ir_measures.nDCG @ 10]
    lines.append(f"Lucene nDCG@10 (ours float32 vectors): {ndcg:.4f}; k=1000; best of {args.search_repeat} runs")
    return rows, lines
