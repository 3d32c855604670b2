"""Lucene impact scores are exactly the integer dot products of the quantised vectors we wrote."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from benchmark.formats.trec_run import read_run


def _stage_dirs(runs: Path, kind: str) -> list[Path]:
    return sorted(p for p in (runs / kind).iterdir() if not p.name.startswith("."))


def _load_vectors(encode_dir: Path, queries_dir: Path) -> tuple[dict[str, dict[str, int]], dict[str, dict[str, int]]]:
    docs = {}
    for shard in sorted((encode_dir / "docs").glob("part-*.jsonl")):
        for line in shard.read_text().splitlines():
            row = json.loads(line)
            docs[row["id"]] = row["vector"]
    queries = {}
    for line in (queries_dir / "queries.jsonl").read_text().splitlines():
        row = json.loads(line)
        queries[row["id"]] = row["vector"]
    return docs, queries


def _dot(q: dict[str, int], d: dict[str, int]) -> int:
    return sum(w * d.get(t, 0) for t, w in q.items())


@pytest.mark.slow  # the pipeline end to end through Lucene (JVM)
def test_impact_scores_equal_integer_dot_products(untrained_splade):
    runs = untrained_splade["runs"]
    (encode_dir,) = _stage_dirs(runs, "encode")
    (queries_dir,) = _stage_dirs(runs, "queries")
    docs, queries = _load_vectors(encode_dir, queries_dir)
    assert all(isinstance(w, int) and w > 0 for v in docs.values() for w in v.values())
    impact_search = [
        p
        for p in _stage_dirs(runs, "search")
        if json.loads((p / "config.json").read_text())["record"]["type"] == "impact"
    ]
    (search_dir,) = impact_search
    run = read_run(search_dir / "run.trec")
    sampled = random.Random(0).sample(sorted(run), 10)
    checked = 0
    for qid in sampled:
        hits = run[qid]
        for docid, score in hits:
            assert score == float(_dot(queries[qid], docs[docid])), (qid, docid)
            checked += 1
        # Top-10 agrees with an independent exhaustive ranking, ties aside: same score sequence,
        # and every returned document has the score the exhaustive ranking gives it.
        exhaustive = sorted((_dot(queries[qid], v) for v in docs.values()), reverse=True)
        expected_top = [s for s in exhaustive[:10] if s > 0]
        assert [s for _, s in hits[:10]] == [float(s) for s in expected_top]
    assert checked > 100
