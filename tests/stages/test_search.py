"""The search stage copies Anserini's run lines unread where they are what ``format_run`` would write."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmark.formats.trec_run import format_run
from benchmark.retrieval import lucene
from benchmark.stages.search import copyable


def _index(tmp_path: Path, docs: dict[str, dict[str, int]]) -> Path:
    coll = tmp_path / "coll"
    coll.mkdir()
    (coll / "docs.jsonl").write_text(
        "".join(json.dumps({"id": d, "contents": "", "vector": v}) + "\n" for d, v in docs.items())
    )
    lucene.build_impact_index(coll, tmp_path / "idx", threads=1)
    return tmp_path / "idx"


@pytest.mark.slow  # a JVM indexes and searches
def test_copied_run_lines_are_format_runs_bytes_and_the_rest_are_read(tmp_path):
    """Hand-computed scores: "plain" scores d1 = 3·2 = 6, d2 = 1·2 = 2; "self" hits its own id (5·1) and
    "d1" (3·1); "past" sums 4096·4096 + 1 past 2**24 (Lucene rounds it); "empty" has no hits. Only the
    lines that nothing would change are copied, and each copied text is format_run's for the same hits."""
    docs = {"d1": {"a": 3}, "d2": {"a": 1}, "self": {"b": 5}, "big": {"c": 4096, "d": 1}}
    queries = {
        "plain": {"a": 2},
        "self": {"b": 1, "a": 1},
        "past": {"c": 4096, "d": 1},
        "empty": {},
    }
    index = _index(tmp_path, docs)
    lines = lucene.impact_run_lines(index, queries, k=10, threads=1)
    assert list(lines) == list(queries)  # the order asked
    hits = lucene.impact_search(index, queries, k=10, threads=1)
    assert hits["plain"] == [("d1", 6.0), ("d2", 2.0)] and hits["self"] == [("self", 5.0), ("d1", 3.0), ("d2", 1.0)]
    for q in queries:
        assert "".join(lines[q]) == format_run({q: hits[q]}), q
        assert [lucene.run_line_hit(line) for line in lines[q]] == hits[q], q
    assert sorted(copyable(lines, remove_query=True)) == ["plain"]
    assert sorted(copyable(lines, remove_query=False)) == ["plain", "self"]
    assert copyable(lines, remove_query=False)["plain"] == format_run({"plain": hits["plain"]})
