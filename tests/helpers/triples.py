"""Real training triples for the training tests: BEIR SciFact train, from the offline ir_datasets cache."""

from __future__ import annotations

import random


def scifact_triples(n: int) -> list[dict[str, str]]:
    """``n`` (query, relevant doc, random doc) triples, one per judged query, in qrels order (seeded)."""
    import ir_datasets

    ds = ir_datasets.load("beir/scifact/train")
    queries = {q.query_id: q.text for q in ds.queries_iter()}
    store = ds.docs_store()
    doc_ids = sorted(d.doc_id for d in ds.docs_iter())
    rng = random.Random(0)
    out, seen = [], set()
    for qrel in ds.qrels_iter():
        if qrel.relevance > 0 and qrel.query_id not in seen:
            seen.add(qrel.query_id)
            pos, neg = store.get(qrel.doc_id), store.get(rng.choice(doc_ids))
            out.append(
                {
                    "query": queries[qrel.query_id],
                    "positive": f"{pos.title} {pos.text}",
                    "negative": f"{neg.title} {neg.text}",
                }
            )
        if len(out) == n:
            return out
    raise AssertionError(f"SciFact train has fewer than {n} judged queries")
