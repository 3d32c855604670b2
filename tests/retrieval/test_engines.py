"""Search engines beside Lucene: a registry, one-line refusals, and exact engines equal to Lucene's exact
integer scores (ties may be ordered differently)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmark.common.errors import BenchmarkError
from benchmark.formats.lucene_index import index_path
from benchmark.formats.vectors import SHARD_GLOB, read_vector_map, read_vectors
from benchmark.retrieval import engines, lucene

pytest.importorskip("pyterrier_pisa")  # the `engines` extra (scripts/setup.sh installs it)
pytest.importorskip("seismic")
pytest.importorskip("numba")

EXACT = [f"pisa:{p.name}" for p in engines.choose("pisa").engine.points] + ["exhaustive:taat"]
DOCS = {"d1": {"a": 3, "b": 1}, "d2": {"a": 2, "c": 5}, "d3": {"a": 1, "b": 2, "c": 1}, "d4": {"a": 4}, "d5": {}}


def _collection(folder: Path, docs: dict[str, dict[str, int]]) -> Path:
    folder.mkdir(parents=True)
    (folder / "part-00000.jsonl").write_text(
        "".join(json.dumps({"id": d, "contents": "", "vector": v}) + "\n" for d, v in docs.items())
    )
    return folder


def _scores(hits: dict[str, list[tuple[str, float]]]) -> dict[str, list[float]]:
    return {q: [s for _, s in ranked] for q, ranked in hits.items()}


def test_the_registry_refuses_a_second_engine_of_one_name():
    with pytest.raises(ValueError, match="already registered"):
        engines.register(engines.choose("pisa").engine)


def test_an_unknown_engine_is_one_line_naming_the_valid_ones_and_the_fix():
    with pytest.raises(BenchmarkError) as err:
        engines.choose_all(["lucene", "pissa"])
    message = str(err.value)
    assert "\n" not in message and "'pissa'" in message and "did you mean 'pisa'" in message
    assert "valid: exhaustive, lucene, pisa, seismic" in message and "--engines" in message


def test_an_unknown_operating_point_names_the_engines_points():
    with pytest.raises(BenchmarkError) as err:
        engines.choose("pisa:wand")
    message = str(err.value)
    assert "\n" not in message and "pisa:maxscore, pisa:block-max-maxscore, pisa:block-max-wand, pisa:taat" in message


def test_an_engine_whose_package_is_missing_names_the_package_to_install(monkeypatch):
    monkeypatch.setattr(engines.ENGINES["seismic"], "module", "seismic_absent_for_this_test")
    with pytest.raises(BenchmarkError) as err:
        engines.choose("seismic")
    message = str(err.value)
    assert (
        "\n" not in message
        and "pip install pyseismic-lsr" in message
        and "lucene, pisa, seismic, exhaustive" in message
    )


def test_an_approximate_engine_is_refused_where_exact_scores_are_required():
    assert engines.require_exact("pisa", "the check").point.exact
    with pytest.raises(BenchmarkError) as err:
        engines.require_exact("seismic", "the exactness check")
    message = str(err.value)
    assert "\n" not in message and "seismic:qc10-hf0.8 (approximate)" in message and "pisa:maxscore" in message


def test_specs_are_canonical_and_labelled():
    assert [c.spec for c in engines.choose_all(["lucene", "pisa:maxscore", "pisa", "seismic:qc10-hf0.8"])] == [
        "lucene",
        "pisa",
        "seismic",
    ]
    assert engines.choose("pisa:block-max-wand").label == "pisa:block-max-wand"
    assert engines.choose("seismic:qc20-hf0.9").label == "seismic:qc20-hf0.9 (approximate)"


@pytest.mark.parametrize("spec", EXACT)
def test_an_exact_engine_gives_the_hand_computed_integer_dot_products(tmp_path, spec):
    """Searched as the build left the folder, opened again: PISA's without its uncompressed inputs."""
    from benchmark.retrieval.engines import exhaustive, pisa

    choice = engines.choose(spec)
    coll = _collection(tmp_path / "coll", DOCS)
    assert choice.engine.build(coll, tmp_path / "idx", 1) == {"documents": 4, "unique_terms": 3}
    assert not [name for name in pisa.UNCOMPRESSED if (tmp_path / "idx" / name).exists()]  # searched without them
    pisa._context.cache_clear()  # the search below opens the folder as it was left
    exhaustive._open.cache_clear()
    queries = {"q1": {"a": 10, "b": 1}, "tie": {"a": 1, "b": 1}, "absent": {"zz": 3, "c": 2}, "empty": {}}
    timing: dict[str, float] = {}
    hits = choice.engine.search(tmp_path / "idx", queries, 10, choice.point, 1, timing)
    assert hits == {
        "q1": [("d4", 40.0), ("d1", 31.0), ("d2", 20.0), ("d3", 12.0)],  # 10·4; 10·3+1·1; 10·2; 10·1+1·2
        "tie": [("d1", 4.0), ("d4", 4.0), ("d3", 3.0), ("d2", 2.0)],  # 3+1 = 4 ties 4: by document id
        "absent": [("d2", 10.0), ("d3", 2.0)],  # 2·5; 2·1
        "empty": [],
    }
    assert timing["engine_s"] > 0


@pytest.mark.parametrize("spec", EXACT)
def test_an_exact_engines_run_lines_are_the_lines_format_run_prints_from_its_hits(tmp_path, spec):
    """An engine's output printed as lines without a hit tuple: byte for byte what ``format_run`` prints from
    ``search``'s hits. Ties go by document id (``b``: d0, d10, d3 and d9 at 2, where PISA's own order is its
    internal number, d0 last); a sum past 2**24 prints as its float32 integer (70,001 · 301 = 21,070,301 rounds
    to an even neighbour); ids past ASCII are printed as they are; a query without hits and an empty one stay
    empty; two threads asked for."""
    from benchmark.formats.trec_run import format_run

    docs = DOCS | {"d10": {"b": 2}, "d9": {"b": 2}, "d0": {"b": 2}, "big": {"x": 70_001}, "dé": {"ü": 4}}
    choice = engines.choose(spec)
    choice.engine.build(_collection(tmp_path / "coll", docs), tmp_path / "idx", 1)
    queries = {"q1": {"a": 10, "b": 1}, "none": {"zz": 3}, "b": {"b": 1}, "empty": {}, "x": {"x": 301}, "qé": {"ü": 1}}
    queries |= {f"more{i}": {"a": i} for i in range(1, 40)}  # enough for PISA's threads to finish out of order
    timing: dict[str, float] = {}
    lines = choice.engine.run_lines(tmp_path / "idx", queries, 10, choice.point, 2, timing)
    hits = choice.engine.search(tmp_path / "idx", queries, 10, choice.point, 2)
    assert lines is not None and list(lines) == list(queries) and timing["engine_s"] > 0 and timing["writer_s"] > 0
    assert {q: "".join(block) for q, block in lines.items()} == {q: format_run({q: hits[q]}) for q in queries}
    assert "".join(lines["b"]) == (
        "b Q0 d0 1 2.000000 benchmark\n"
        "b Q0 d10 2 2.000000 benchmark\n"
        "b Q0 d3 3 2.000000 benchmark\n"
        "b Q0 d9 4 2.000000 benchmark\n"
        "b Q0 d1 5 1.000000 benchmark\n"
    )
    assert "".join(lines["x"]) in ("x Q0 big 1 21070300.000000 benchmark\n", "x Q0 big 1 21070302.000000 benchmark\n")
    assert "".join(lines["qé"]) == "qé Q0 dé 1 4.000000 benchmark\n"
    assert lines["none"] == lines["empty"] == []


@pytest.mark.parametrize("spec", [*EXACT, "seismic:qc10-hf0.8"])
def test_an_engine_keeps_a_cased_vocabularys_tokens_apart(tmp_path, spec):
    """A BPE vocabulary (ModernBERT's) has ``ĠX`` beside ``Ġx`` and ``The`` beside ``the``, and tokens of
    punctuation: each is its own term. PISA lowercased a pretokenised query's terms, so ``ĠX`` scored on
    ``Ġx``'s postings (a dense ModernBERT's scores fell 0.1 % short of Lucene's); by hand, every query below
    matches exactly the document holding its own token. Seismic too: on two documents it keeps every posting
    (it cuts lists past 3,500), so its approximate search returns every match here."""
    docs = {"d1": {"The": 3, "Ġx": 5, ".": 7, "a b": 1}, "d2": {"the": 4, "ĠX": 6, "x.y": 2}}
    choice = engines.choose(spec)
    choice.engine.build(_collection(tmp_path / "coll", docs), tmp_path / "idx", 1)
    queries = {"upper": {"The": 2}, "lower": {"the": 2}, "gx": {"ĠX": 1}, "dot": {".": 3}, "both": {"Ġx": 1, "ĠX": 1}}
    assert choice.engine.search(tmp_path / "idx", queries, 10, choice.point) == {
        "upper": [("d1", 6.0)],
        "lower": [("d2", 8.0)],
        "gx": [("d2", 6.0)],
        "dot": [("d1", 21.0)],
        "both": [("d2", 6.0), ("d1", 5.0)],
    }


@pytest.mark.parametrize("spec", [*EXACT, "seismic:qc10-hf0.8"])
def test_a_batch_gives_each_query_its_own_hits(tmp_path, spec):
    """300 queries in one call, each matching only its own document (by hand: q_i finds d_i at 1·(i+1)), one of
    them with an id of 120 characters. Seismic's batch had returned its lists in another order than the
    queries went in (about half the batches): taken in the order sent, queries got others' hits."""
    n = 300
    docs = {f"d{i:03d}": {f"t{i}": i + 1} for i in range(n)}
    choice = engines.choose(spec)
    choice.engine.build(_collection(tmp_path / "coll", docs), tmp_path / "idx", 1)
    long = "q" * 120
    queries = {(long if i == 7 else f"q{i:03d}"): {f"t{i}": 1} for i in range(n)}
    for _ in range(5):  # the order came back shuffled in about half the batches: five make a miss unlikely
        hits = choice.engine.search(tmp_path / "idx", queries, 10, choice.point, 2)
        assert hits == {q: [(f"d{i:03d}", float(i + 1))] for i, q in enumerate(queries)}


def test_seismic_finds_each_querys_hits_in_a_batch_returned_in_any_order(tmp_path, monkeypatch):
    """The real index's batch, its lists handed back reversed (the shuffle above, made certain): every query
    still gets its own document."""
    from benchmark.retrieval.engines import seismic as module

    docs = {f"d{i}": {f"t{i}": i + 1} for i in range(6)}
    choice = engines.choose("seismic")
    choice.engine.build(_collection(tmp_path / "coll", docs), tmp_path / "idx", 1)
    real = module._load

    class Reversed:
        def __init__(self, index: object) -> None:
            self.index = index

        def batch_search(self, *args: object, **kwargs: object) -> list[object]:
            return list(reversed(self.index.batch_search(*args, **kwargs)))  # type: ignore[attr-defined]

    monkeypatch.setattr(module, "_load", lambda path: Reversed(real(path)))
    queries = {f"q{i}": {f"t{i}": 1} for i in range(6)}
    hits = choice.engine.search(tmp_path / "idx", queries, 10, choice.point)
    assert hits == {f"q{i}": [(f"d{i}", float(i + 1))] for i in range(6)}


@pytest.mark.parametrize("spec", ["pisa", "exhaustive"])
def test_an_exact_engine_keeps_impacts_past_16_bits_and_sums_past_float32_as_lucene_does(tmp_path, spec):
    """No requantisation: an impact of 70,000 goes in as it is (BMP's u16 scores could not hold it)."""
    coll = _collection(tmp_path / "coll", {"a": {"x": 70_000, "y": 1}, "b": {"x": 3}})
    choice = engines.choose(spec)
    choice.engine.build(coll, tmp_path / "idx", 1)
    hits = choice.engine.search(tmp_path / "idx", {"q": {"x": 2, "y": 5}}, 10, choice.point)
    assert hits == {"q": [("a", 140_005.0), ("b", 6.0)]}


def test_the_exhaustive_engine_sums_a_score_past_32_bits_in_64(tmp_path):
    """70,000 · 70,000 + 3 · 1 = 4,900,000,003 is past 2**32 (in 32 bits it would wrap to 605,032,707); the
    exact sum is printed at its float32 value, as Lucene prints a sum past 2**24, and hits printed alike go by
    id: ``a0``'s 4,900,000,002 prints as 4,900,000,256 too. A query whose largest possible score stays under
    2**32 (``small``) takes the 32-bit accumulators, by the same hand sums, ties by id (140,015 twice)."""
    docs = {"a": {"x": 70_000, "y": 3}, "b": {"x": 3}, "c": {"y": 1}, "z1": {"x": 70_000, "y": 3}}
    coll = _collection(tmp_path / "coll", docs | {"a0": {"x": 70_000, "y": 2}})
    choice = engines.choose("exhaustive")
    choice.engine.build(coll, tmp_path / "idx", 1)
    queries = {"big": {"x": 70_000, "y": 1}, "small": {"x": 2, "y": 5}}
    hits = choice.engine.search(tmp_path / "idx", queries, 10, choice.point)
    assert hits == {
        "big": [("a", 4_900_000_256.0), ("a0", 4_900_000_256.0), ("z1", 4_900_000_256.0), ("b", 210_000.0), ("c", 1.0)],
        "small": [("a", 140_015.0), ("z1", 140_015.0), ("a0", 140_010.0), ("b", 6.0), ("c", 5.0)],
    }
    lines = choice.engine.run_lines(tmp_path / "idx", queries, 10, choice.point)
    assert "".join(lines["big"]).splitlines()[:3] == [
        "big Q0 a 1 4900000256.000000 benchmark",
        "big Q0 a0 2 4900000256.000000 benchmark",
        "big Q0 z1 3 4900000256.000000 benchmark",
    ]


def test_an_exhaustive_index_of_another_layout_is_refused_in_one_line(tmp_path):
    from benchmark.retrieval.engines import exhaustive

    choice = engines.choose("exhaustive")
    choice.engine.build(_collection(tmp_path / "coll", DOCS), tmp_path / "idx", 1)
    meta = json.loads((tmp_path / "idx" / exhaustive.META).read_text())
    (tmp_path / "idx" / exhaustive.META).write_text(json.dumps(meta | {"format": exhaustive.FORMAT + 1}))
    exhaustive._open.cache_clear()
    with pytest.raises(BenchmarkError) as err:
        choice.engine.search(tmp_path / "idx", {"q": {"a": 1}}, 10, choice.point)
    message = str(err.value)
    assert "\n" not in message and "build it again" in message


def test_the_exhaustive_engine_crosses_its_document_ranges(tmp_path):
    """70,000 documents, past one range of 2**16: document i holds term ``t`` at weight 1 + i mod 1,000 and
    the last three also ``u``: by hand, ``t``'s top 5 are five of the 70 documents at 1,000 (i mod 1,000 =
    999; which five of the tied may differ from Lucene's), ``tu``'s the last three at 1,000 + 2·7, 999 + 14
    and 998 + 14 and two of those, and ``u``'s the three that hold it, at 7 (``u`` first seen in the second
    range, a range at a time as the index is built)."""
    from benchmark.formats import vectors

    n = 70_000
    folder = tmp_path / "coll"
    folder.mkdir()
    vectors.write_doc_vectors(
        vectors.shard_path(folder, 0),
        (vectors.Vector(f"d{i}", {"t": 1 + i % 1000} | ({"u": 7} if i >= n - 3 else {})) for i in range(n)),
    )
    choice = engines.choose("exhaustive")
    choice.engine.build(folder, tmp_path / "idx", 1)
    hits = choice.engine.search(
        tmp_path / "idx", {"t": {"t": 1}, "tu": {"t": 1, "u": 2}, "u": {"u": 1}}, 5, choice.point
    )
    assert [s for _, s in hits["t"]] == [1000.0] * 5 and all(d.endswith("999") for d, _ in hits["t"])
    assert len({d for d, _ in hits["t"]}) == 5 and [d for d, _ in hits["t"]] == sorted(d for d, _ in hits["t"])
    assert hits["tu"][:3] == [("d69999", 1014.0), ("d69998", 1013.0), ("d69997", 1012.0)]
    assert [s for _, s in hits["tu"][3:]] == [1000.0] * 2 and all(d.endswith("999") for d, _ in hits["tu"][3:])
    assert hits["u"] == [("d69997", 7.0), ("d69998", 7.0), ("d69999", 7.0)]
    files = ["docids.json", "idrank.npy", "impacts.npy", "largest.npy", "local.npy", "meta.json", "starts.npy"]
    assert sorted(p.name for p in (tmp_path / "idx").iterdir()) == [*files, "terms.json"]  # no scratch file left


def test_the_compiled_run_writer_prints_lines_and_returns_the_touched_ids_first_bytes():
    """``numbered`` by hand: a query id and a document id longer than one 16-byte move, an id past ASCII, a
    score past 32 bits; and the sum of the ids' first bytes ("b" 98 + "é" 195 + "x" 120), which it adds to
    ``touched`` so that the compiler keeps the loop touching every id before any is copied (folded into
    ``sum & 0``, the loop was dropped and the ids' cache misses came one at a time)."""
    import numpy as np

    from benchmark.retrieval.engines import _run_text

    ids = _run_text.padded("a1bbé".encode() + b"x" * 21)
    starts = np.array([0, 2, 4, 6, 27], dtype=np.int64)
    tail = b".000000 benchmark\n"
    prefix = b"q" * 17 + b" Q0 "
    printed, numbers = np.array([1 << 40, 12, 3], dtype=np.int64), np.array([3, 1, 2], dtype=np.int64)
    out = np.full(_run_text.room(3, 3 * 21, len(prefix), len(tail)), 255, dtype=np.uint8)
    touched = np.zeros(1, dtype=np.int64)
    end = _run_text.numbered(
        printed,
        numbers,
        ids,
        starts,
        touched,
        _run_text.padded(prefix),
        len(prefix),
        _run_text.padded(tail),
        len(tail),
        out,
    )
    q = "q" * 17
    assert out[:end].tobytes().decode() == (
        f"{q} Q0 {'x' * 21} 1 1099511627776.000000 benchmark\n"
        f"{q} Q0 bb 2 12.000000 benchmark\n"
        f"{q} Q0 é 3 3.000000 benchmark\n"
    )
    assert touched[0] == ord("x") + ord("b") + "é".encode()[0] == 120 + 98 + 195


def test_the_compiled_run_writer_puts_each_run_of_tied_scores_in_id_order():
    """``by_score`` on hits best first with ties in another order (PISA's): each tied run comes out as ``ranked``
    puts it, by id as Python orders strings (a prefix first; "Z" before "a" before "é"), in a short run (insertion)
    and in a run of 40 (merges); ranks count on across the runs, past 9 and 99."""
    import numpy as np

    from benchmark.formats.trec_run import format_run
    from benchmark.retrieval.engines import _run_text, ranked

    rng = np.random.default_rng(7)
    long_run = [f"d{i}" for i in rng.permutation(40)]
    hits = [("b", 9), ("ab", 9), ("a", 9), ("é", 9), ("Z", 9), ("c", 7), *[(d, 5) for d in long_run]]
    hits += [(f"w{i}", 4 - i // 30) for i in range(70)]  # runs of 30, 30 and 10 (merges, insertion)
    names = [d for d, _ in hits]
    ids = _run_text.padded("\0".join(names).encode())
    first, last = np.empty(len(names), np.int64), np.empty(len(names), np.int64)
    assert _run_text.separated(ids, len(names), 0, first, last)
    printed = np.array([s for _, s in hits], dtype=np.int64)
    tail = b".000000 benchmark\n"
    out = np.empty(_run_text.room(len(hits), int(last[-1]), 5, len(tail)), dtype=np.uint8)
    end = _run_text.by_score(
        printed, first, last, ids, _run_text.padded(b"q Q0 "), 5, _run_text.padded(tail), len(tail), out
    )
    text = out[:end].tobytes().decode()
    assert text == format_run({"q": ranked([(d, float(s)) for d, s in hits])})
    assert text.splitlines()[:6] == [
        f"q Q0 {d} {r} 9.000000 benchmark" for r, d in enumerate("Z a ab b é".split(), 1)
    ] + ["q Q0 c 6 7.000000 benchmark"]


def test_the_compiled_writer_finds_joined_ids_and_says_when_an_id_holds_the_separator():
    import numpy as np

    from benchmark.retrieval.engines import _run_text

    first, last = np.empty(3, np.int64), np.empty(3, np.int64)
    assert _run_text.separated(_run_text.padded(b"a\0bb\0"), 3, 0, first, last)
    assert first.tolist() == [0, 2, 5] and last.tolist() == [1, 4, 5]  # the last id empty
    assert not _run_text.separated(_run_text.padded(b"a\0b\0c\0d"), 3, 0, first, last)  # one id is "c\0d"
    assert not _run_text.separated(_run_text.padded(b"a\0b"), 3, 0, first, last)  # two ids, not three


def test_pisas_run_lines_place_ids_that_hold_the_separator(tmp_path, monkeypatch):
    """Where the ids' join cannot be split by its separator (an id holds "\\0"), each id's place comes from its
    own length: the lines are still what ``format_run`` prints from ``search``'s hits."""
    from benchmark.formats.trec_run import format_run
    from benchmark.retrieval.engines import _run_text

    choice = engines.choose("pisa:taat")
    choice.engine.build(_collection(tmp_path / "coll", DOCS | {"dé": {"a": 4}}), tmp_path / "idx", 1)
    queries = {"q1": {"a": 10, "b": 1}, "tie": {"a": 1, "b": 1}, "none": {"zz": 1}}
    hits = choice.engine.search(tmp_path / "idx", queries, 10, choice.point)
    monkeypatch.setattr(_run_text, "separated", lambda *args: False)
    lines = choice.engine.run_lines(tmp_path / "idx", queries, 10, choice.point)
    assert lines is not None and {q: "".join(block) for q, block in lines.items()} == {
        q: format_run({q: hits[q]}) for q in queries
    }
    assert "".join(lines["q1"]).startswith("q1 Q0 d4 1 40.000000 benchmark\nq1 Q0 dé 2 40.000000 benchmark\n")


def test_pisa_without_numba_leaves_its_run_to_the_search_stage(tmp_path, monkeypatch):
    """PISA's compiled writer needs numba; without it ``run_lines`` says it has no such path (None), and the search
    stage prints ``search``'s hits instead: the same lines, more slowly."""
    import sys

    choice = engines.choose("pisa")
    choice.engine.build(_collection(tmp_path / "coll", DOCS), tmp_path / "idx", 1)
    monkeypatch.setitem(sys.modules, "benchmark.retrieval.engines._run_text", None)  # its import now fails
    monkeypatch.delattr(engines, "_run_text", raising=False)  # (once imported, it is also the package's attribute)
    assert choice.engine.run_lines(tmp_path / "idx", {"q": {"a": 1}}, 10, choice.point) is None


def test_recall_of_the_exact_top_k_counts_tied_substitutes_as_kept():
    exact = {"q": [("a", 9.0), ("b", 5.0), ("c", 5.0), ("d", 1.0)]}
    assert engines.recall_of_exact(exact, {"q": [("a", 9.0), ("c", 5.0)]}, 2) == 1.0  # c ties b at the 2nd
    assert engines.recall_of_exact(exact, {"q": [("a", 9.0), ("d", 1.0)]}, 2) == 0.5
    assert engines.recall_of_exact(exact, {"q": []}, 2) == 0.0
    assert engines.recall_of_exact({"q": exact["q"][:2]}, {"q": [("a", 9.0), ("x", 5.0)]}, 2) == 1.0  # x ties b


def _lucene_impact_index(runs: Path) -> Path:
    """The pipeline's one Lucene impact index (other tests of the session's pipeline may add other engines')."""
    stages = [p for p in sorted((runs / "index").iterdir()) if not p.name.startswith(".")]
    configs = {p: json.loads((p / "config.json").read_text()) for p in stages}
    (found,) = [
        p
        for p, c in configs.items()
        if c["record"]["type"] == "impact" and c["config"].get("engine", "lucene") == "lucene"
    ]
    return found


@pytest.mark.slow  # the untrained bert-tiny pipeline on a SciFact slice (JVM, encode)
def test_exact_engines_equal_lucene_on_real_encoded_vectors_and_a_dense_models_queries(untrained_splade, tmp_path):
    """bert-tiny's real integer impacts on a SciFact slice: every exact point's top-1000 score lists equal
    Lucene's, query by query. The dense queries are what a collapsed model sends: each the sum of 40 of the
    slice's document vectors, thousands of terms (past Lucene's 1,024-clause default)."""
    from benchmark.formats.trec_run import format_run

    runs = untrained_splade["runs"]
    (encode_dir,) = [p for p in sorted((runs / "encode").iterdir()) if not p.name.startswith(".")]
    (queries_dir,) = [p for p in sorted((runs / "queries").iterdir()) if not p.name.startswith(".")]
    lucene_index = index_path(_lucene_impact_index(runs))
    queries = read_vector_map(queries_dir / "queries.jsonl")
    docs = [row.vector for shard in sorted((encode_dir / "docs").glob(SHARD_GLOB)) for row in read_vectors(shard)]
    for i in range(3):
        dense: dict[str, int] = {}
        for vector in docs[i * 40 : (i + 1) * 40]:
            for term, weight in vector.items():
                dense[term] = dense.get(term, 0) + weight
        queries[f"dense{i}"] = dense
    assert min(len(queries[f"dense{i}"]) for i in range(3)) > 1024
    reference = lucene.impact_search(lucene_index, queries, k=1000, threads=1)
    assert lucene.past_float32(reference) == []  # exact integers throughout, so equality is the test
    assert sum(len(v) for v in reference.values()) > 10_000
    # the search stage's default producer, Anserini's run writer, gives these hits in this order
    assert not lucene.run_writer_fits(queries)  # the dense queries go in memory
    sparse = {q: v for q, v in queries.items() if not q.startswith("dense")}
    assert lucene.run_writer_fits(sparse)
    assert lucene.impact_search_to_run(lucene_index, sparse, k=1000, threads=1) == {q: reference[q] for q in sparse}
    for spec in EXACT:
        choice = engines.choose(spec)
        folder = tmp_path / choice.engine.name
        if not folder.exists():
            choice.engine.build(encode_dir / "docs", folder, 1)
        hits = choice.engine.search(folder, queries, 1000, choice.point)
        assert _scores(hits) == _scores(reference), spec
        lines = choice.engine.run_lines(folder, queries, 1000, choice.point)  # the search stage's path
        assert lines is not None
        assert {q: "".join(b) for q, b in lines.items()} == {q: format_run({q: hits[q]}) for q in queries}, spec
    seismic = engines.choose("seismic")
    seismic.engine.build(encode_dir / "docs", tmp_path / "seismic", 1)
    approximate = seismic.engine.search(tmp_path / "seismic", queries, 1000, seismic.point)
    assert 0.0 < engines.recall_of_exact(reference, approximate, 10) <= 1.0


def test_the_frontiers_synthetic_documents_keep_a_real_collections_sparsity(tmp_path):
    """Every drawn document has a real document's length, real terms and real weights (drawn, not made up)."""
    from benchmark.perf.engines import synthetic

    real = {"a": {"x": 3, "y": 7}, "b": {"x": 2, "z": 9, "w": 1}, "c": {"y": 4}}
    source = _collection(tmp_path / "real", real)
    folder, _ = synthetic(source, {}, 50, tmp_path / "work")
    drawn = [row.vector for row in read_vectors(folder / "part-00000.jsonl")]
    assert len(drawn) == 50
    assert {len(v) for v in drawn} <= {1, 2, 3}
    assert set().union(*drawn) <= {"x", "y", "z", "w"} and set().union(*(v.values() for v in drawn)) <= {
        1,
        2,
        3,
        4,
        7,
        9,
    }


def test_a_term_weighted_draw_gives_each_term_only_its_own_real_weights(tmp_path, capsys):
    """``term``: x only ever weighs 3 or 2 and y 7 or 4, as in the source (a pooled draw gives x one of the six
    real weights, 3 or 2 with probability 2/6, so x keeps to its own in its ~270 documents with probability
    (1/3)^270); the pooled draw keeps its earlier recipe and folder name, so a committed command finds the same
    documents; a WEIGHTS not offered is one line."""
    from benchmark.perf.engines import main, synthetic

    real = {"a": {"x": 3, "y": 7}, "b": {"x": 2, "z": 9, "w": 1}, "c": {"y": 4}}
    own = {"x": {3, 2}, "y": {7, 4}, "z": {9}, "w": {1}}
    source = _collection(tmp_path / "real", real)
    by_term, _ = synthetic(source, {}, 400, tmp_path / "work", weights="term")
    pooled, _ = synthetic(source, {}, 400, tmp_path / "work")
    assert by_term.name.startswith("synthetic-400-term-") and pooled.name.startswith("synthetic-400-")
    assert json.loads((pooled / "drawn.json").read_text()) == {
        "source": str(source.resolve()),
        "documents": 400,
        "seed": 0,
        "length": 1.0,
    }
    seen: dict[str, set[int]] = {}
    for folder in (by_term, pooled):
        seen = {}
        for row in read_vectors(folder / "part-00000.jsonl"):
            for t, w in row.vector.items():
                seen.setdefault(t, set()).add(w)
        if folder == by_term:
            assert all(seen[t] <= own[t] for t in seen) and seen["x"] == {3, 2}
    assert not seen["x"] <= own["x"]  # the pooled draw: x took another term's weight
    code = main(["--real", f"r={source},{source},cranfield", "--synthetic", "s=r,100,5,own", "--out", str(tmp_path)])
    assert code == 2
    assert capsys.readouterr().out.strip() == (
        "error: --synthetic s=r,100,5,own: LENGTH must be one positive number and WEIGHTS one of pooled, term "
        "(e.g. s=r,100,5,term draws documents 5 times a real one's length, each term with its own weights)"
    )


def test_the_maxscore_floor_by_hand(tmp_path):
    """d1 {x:3, y:7}, d2 {x:2, z:9}, d3 {y:4}: df x 2, y 2, z 1; largest impacts 3, 7, 9. q1 {x, y, z} (weights 1)
    scores d2 11, d1 10, d3 4: at k = 2, θ = 10, and x and y bound a document to 3 + 7 = 10 ≤ θ, so only z's 1
    posting of 5 is read. q2 {y:2} scores 14 and 8, θ = 8 < 14: both postings read. q3 {z:1} has 1 hit < k: θ = 0,
    its posting read. (1 + 2 + 1) / (5 + 2 + 1) = 1/2; q1 alone 1/5."""
    from benchmark.perf.engines import maxscore_floor, scan

    source = _collection(tmp_path / "real", {"d1": {"x": 3, "y": 7}, "d2": {"x": 2, "z": 9}, "d3": {"y": 4}})
    documents, df, top = scan(source)
    assert (documents, df, top) == (3, {"x": 2, "y": 2, "z": 1}, {"x": 3, "y": 7, "z": 9})
    queries = {"q1": {"x": 1, "y": 1, "z": 1}, "q2": {"y": 2}, "q3": {"z": 1}}
    exact = {"q1": [("d2", 11.0), ("d1", 10.0), ("d3", 4.0)], "q2": [("d1", 14.0), ("d3", 8.0)], "q3": [("d2", 9.0)]}
    assert maxscore_floor(queries, exact, 2, df, top) == 4 / 8
    assert maxscore_floor({"q1": queries["q1"]}, exact, 2, df, top) == 1 / 5
    assert maxscore_floor({"q1": queries["q1"]}, exact, 3, df, top) == 3 / 5  # θ = 4: only x (3 ≤ 4) probed


def test_draws_from_two_sources_at_one_size_keep_their_own_documents(tmp_path):
    """Each draw has its own folder: drawing 50 documents from a second source left the first source's draw
    in place (it had been drawn again over the first, which a later run then searched as the wrong corpus);
    the first source's draw is found again as it was, its file untouched."""
    from benchmark.perf.engines import synthetic

    one = _collection(tmp_path / "one", {"a": {"x": 3}, "b": {"y": 7}})
    two = _collection(tmp_path / "two", {"c": {"z": 5}})
    first, _ = synthetic(one, {}, 50, tmp_path / "work")
    before = (first / "part-00000.jsonl").stat().st_mtime_ns
    second, _ = synthetic(two, {}, 50, tmp_path / "work")
    assert first != second
    assert set().union(*(r.vector for r in read_vectors(second / "part-00000.jsonl"))) == {"z"}
    assert synthetic(one, {}, 50, tmp_path / "work")[0] == first
    assert (first / "part-00000.jsonl").stat().st_mtime_ns == before
    assert set().union(*(r.vector for r in read_vectors(first / "part-00000.jsonl"))) == {"x", "y"}


def test_the_frontier_reads_the_judgments_of_a_local_folder(tmp_path):
    """The scale rehearsal's synthetic collection is a local BEIR folder, named ``PATH@split`` as the pipeline
    names it; its qrels come back as ir_measures judgments (two by hand), and a folder without the split is
    one line before any collection is read."""
    from benchmark.perf.engines import _qrels

    folder = tmp_path / "coll"
    folder.mkdir()
    (folder / "corpus.jsonl").write_text('{"_id": "d1", "text": "a"}\n{"_id": "d2", "text": "b"}\n')
    (folder / "queries.jsonl").write_text('{"_id": "q1", "text": "a"}\n')
    (folder / "qrels").mkdir()
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\nq1\td2\t2\n")
    assert sorted((q.query_id, q.doc_id, q.relevance) for q in _qrels(f"{folder}@test")) == [
        ("q1", "d1", 1),
        ("q1", "d2", 2),
    ]
    with pytest.raises(BenchmarkError) as err:
        _qrels(f"{folder}@dev")
    assert "\n" not in str(err.value) and "dev" in str(err.value)


def test_the_frontier_table_labels_approximate_points(tmp_path):
    from benchmark.perf.engines import COLUMNS, write

    row = dict.fromkeys(COLUMNS, 0) | {"collection": "c", "engine": "seismic", "point": "qc10-hf0.8", "exact": False}
    row.update({"nDCG@10": 0.5, "delta_nDCG@10": -0.01, "RR@10": 0.4, "delta_RR@10": 0.0, "index_bytes": 2_000_000})
    write([row], tmp_path, ["Machine: test."])
    table = (tmp_path / "engines.md").read_text()
    assert "| c | 0 | 0.00 | 0.000 | seismic:qc10-hf0.8 | approximate |" in table and "0.5000 (-0.0100)" in table
    assert (tmp_path / "engines.csv").read_text().splitlines()[0] == ",".join(COLUMNS)
    assert (tmp_path / "engines.png").stat().st_size > 0
    # another depth: its own files, no recall of a top-1000 it never searched
    write([row | {"recall_exact@1000": None}], tmp_path, ["Machine: test."], k=10)
    assert "| 0.0000 | – |" in (tmp_path / "engines-top10.md").read_text()
    assert (tmp_path / "engines.md").read_text() == table


def test_engines_add_labelled_rows_and_keep_lucenes_stage_ids():
    """``--engines lucene,pisa`` keeps every Lucene stage of the plain plan (same ids) and adds one row per
    SPLADE model searched with PISA, labelled, in its own index and search stages."""
    from benchmark.pipeline.plan import Options, build_plan
    from benchmark.suites import load_suite

    suite = load_suite("smoke")
    plain = build_plan(suite, Options())
    both = build_plan(suite, Options(engines=["lucene", "pisa"]))
    ids = {c.search.id for c in plain.conditions if c.search is not None}
    assert ids <= {c.search.id for c in both.conditions if c.search is not None}
    pisa = [c for c in both.conditions if c.engine]
    assert [c.variant for c in pisa] == ["baseline · pisa:maxscore"] * 2  # trained and untrained
    assert all(c.engine == "pisa:maxscore" and c.row()["engine"] == "pisa:maxscore" for c in pisa)
    assert all(c.search.config.engine == "pisa" and c.search.parents["index"].config.engine == "pisa" for c in pisa)
    # a row's command narrows the run to that row's own engine, which plans exactly that engine's rows
    assert "--engines pisa:maxscore" in pisa[0].command
    alone = build_plan(suite, Options(engines=["pisa:maxscore"]))
    assert {c.search.id for c in alone.conditions if c.engine} == {c.search.id for c in pisa}
    problems: list[str] = []
    build_plan(suite, Options(engines=["lucene", "bmp"]), problems)
    assert len(problems) == 1 and "unknown search engine 'bmp'" in problems[0]


def test_the_frontiers_effectiveness_averages_only_the_searched_queries():
    """Two judged queries, one searched: the mean is that query's own RR@10 (1/2, its relevant document
    ranked second), not the 1/4 that averaging in the unsearched query at 0 would give."""
    import ir_measures

    from benchmark.perf.engines import _effectiveness

    qrels = [ir_measures.Qrel("q1", "d1", 1), ir_measures.Qrel("q2", "d9", 1)]
    hits = {"q1": [("d0", 9.0), ("d1", 8.0)]}
    assert _effectiveness(hits, qrels)["RR@10"] == 0.5
    assert _effectiveness({"q3": [("d1", 1.0)]}, qrels) == {}


def test_a_denser_synthetic_setting_draws_longer_documents_and_states_its_flops(tmp_path, capsys):
    """LENGTH × 3 draws each document from three times a real length (a repeat kept once, so at most the
    vocabulary); FLOPS is Σ_j p_q(j)·p_d(j) of the collection as searched, here by hand: terms x and y in
    1/2 and 1/2 of the queries, in 2/3 and 2/3 of the documents: 1/2·2/3 + 1/2·2/3 = 2/3."""
    from benchmark.perf.engines import collection_flops, main, synthetic

    real = {"a": {"x": 3, "y": 7}, "b": {"x": 2, "z": 9, "w": 1}, "c": {"y": 4}}
    source = _collection(tmp_path / "real", real)
    assert collection_flops(source, {"q1": {"x": 1}, "q2": {"y": 5, "v": 2}}) == (3, 2 / 3)
    plain, _ = synthetic(source, {}, 200, tmp_path / "work")
    dense, _ = synthetic(source, {}, 200, tmp_path / "work", length=3.0)
    assert dense != plain and dense.name.startswith("synthetic-200-x3-") and plain.name.startswith("synthetic-200-")
    lengths = [[len(r.vector) for r in read_vectors(f / "part-00000.jsonl")] for f in (plain, dense)]
    assert max(lengths[0]) <= 3 and max(lengths[1]) <= 4 and sum(lengths[1]) > 1.5 * sum(lengths[0])
    assert main(["--real", f"r={source},{source},cranfield", "--k", "5", "--out", str(tmp_path)]) == 2
    assert capsys.readouterr().out.strip() == (
        "error: --k 5: the depth must be from 10 to 1000 (e.g. --k 10 or the default 1000)"
    )
    assert collection_flops(source, {})[0] == 3
    code = main(["--real", f"r={source},{source},cranfield", "--synthetic", "s=r,100,-2", "--out", str(tmp_path)])
    assert code == 2
    out = capsys.readouterr().out.strip()
    assert out == (
        "error: --synthetic s=r,100,-2: LENGTH must be one positive number and WEIGHTS one of pooled, term (e.g. "
        "s=r,100,5,term draws documents 5 times a real one's length, each term with its own weights)"
    )
