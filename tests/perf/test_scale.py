"""The scale rehearsal and the streaming it keeps in place: ids at 16 bytes, runs searched, evaluated and
exported a block at a time, the JVM's heap capped; the synthetic collection and backbone it runs on."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from benchmark.common.errors import BenchmarkError
from helpers import HELPERS


def probe(*args: str, **env: str) -> dict:
    proc = subprocess.run(
        [sys.executable, str(HELPERS / "scale_probe.py"), *map(str, args)],
        capture_output=True,
        text=True,
        env=dict(os.environ, **env),
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


# --------------------------------------------------------------------------- ids


@pytest.mark.parametrize("buffer", [7, 1 << 16], ids=["spilled", "in-memory"])
def test_idset_answers_membership_exactly(monkeypatch, buffer):
    from benchmark.common import idset

    monkeypatch.setattr(idset, "BUFFER", buffer)  # 7: hundreds of spills into the bucket files
    s = idset.IdSet([f"d{i}" for i in range(1000)] + ["d3", "d999", "d3"])
    assert len(s) == 1000 and s.repeats().tolist() == [1000, 1001, 1002]  # each repeat by its ordinal
    assert all(f"d{i}" in s for i in range(1000))
    assert not any(f"d{i}" in s for i in range(1000, 3000))
    assert "" not in s and 3 not in s
    asked = [f"d{i}" for i in range(0, 3000, 7)] + ["d3", "d3", "", "elsewhere"]
    assert s.missing(asked) == {f"d{i}" for i in range(1001, 3000, 7)} | {"", "elsewhere"}
    with pytest.raises(RuntimeError, match="add every id first"):
        s.add("late")


def test_idset_compares_the_low_word_where_high_words_coincide():
    """Two stored digests with one high word (a 64-bit coincidence): each is found, a third low word is not."""
    from benchmark.common.idset import _member

    high, low = np.array([5, 5, 5, 9], dtype=np.uint64), np.array([1, 7, 8, 3], dtype=np.uint64)
    asked = np.array([[5, 7], [5, 1], [5, 8], [5, 2], [9, 3], [9, 4], [4, 0], [10, 3]], dtype=np.uint64)
    assert _member(high, low, asked).tolist() == [True, True, True, False, True, False, False, False]


def test_idset_removes_its_spilled_files(monkeypatch, tmp_path):
    from benchmark.common import idset

    monkeypatch.setattr(idset, "BUFFER", 10)
    s = idset.IdSet((f"d{i}" for i in range(100)), spill=tmp_path)
    assert len(s) == 100 and [p.name for p in next(tmp_path.iterdir()).iterdir()] == ["sorted"]  # buckets merged
    s.discard()
    assert not any(tmp_path.iterdir())
    idset.IdSet((f"d{i}" for i in range(100)), spill=tmp_path)  # collected at once: its files go with it
    assert not any(tmp_path.iterdir())


@pytest.mark.slow
def test_idset_memory_stays_flat_in_the_number_of_ids():
    """Built from streamed ids and asked about 100,000: 100,000 ids grew the process by 23.9 MB and 1,000,000
    by 24.2 MB (measured here; a buffer, one bucket and the block asked). The 16-byte columns held in memory
    (the code before spilling) grew 34.7 → 82.5 MB. The bound, 4 MB between the two sizes, is a quarter of
    what any in-memory set of 128-bit digests must add for 900,000 more ids (14.4 MB)."""
    small, large = probe("ids", 100_000), probe("ids", 1_000_000)
    assert small["result"] == {"distinct": 100_000, "absent": 50_000}
    assert large["result"] == {"distinct": 1_000_000, "absent": 50_000}
    assert large["peak_growth_kb"] - small["peak_growth_kb"] < 4 * 1024, (small, large)


def test_a_local_folder_is_read_whole_once_per_content(tmp_path, monkeypatch):
    """Every stage of a run is its own process under the scale rehearsal (and under Ray), and each plans the
    run: a clean folder's verdict is kept in the cache, so a million-document corpus is read once, not
    once per process (the marker's folder was never made, so every process read it again)."""
    from benchmark.data import datasets
    from benchmark.data.sources import beir_folder

    folder = tmp_path / "beir"
    (folder / "qrels").mkdir(parents=True)
    (folder / "corpus.jsonl").write_text("".join(json.dumps({"_id": f"d{i}", "text": "x"}) + "\n" for i in range(5)))
    (folder / "queries.jsonl").write_text(json.dumps({"_id": "q1", "text": "x"}) + "\n")
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\n")
    monkeypatch.setenv("BENCHMARK_CACHE_DIR", str(tmp_path / "cache"))
    reads = []
    real = beir_folder.read_local_corpus
    monkeypatch.setattr(beir_folder, "read_local_corpus", lambda f: (reads.append(f), real(f))[1])
    for _ in range(2):
        beir_folder._VALIDATED.clear()  # as a new process
        assert datasets.validate_dataset(f"{folder}@test") is None
    assert len(reads) == 1
    (folder / "corpus.jsonl").write_text((folder / "corpus.jsonl").read_text() + '{"_id": "d1", "text": "y"}\n')
    beir_folder._VALIDATED.clear()
    assert "duplicate document id 'd1'" in datasets.validate_dataset(f"{folder}@test")  # new content: read again


# --------------------------------------------------------------------------- the corpus stage in flat memory


def test_a_sources_repeated_ids_are_dropped_after_the_pass_first_kept(tmp_path, monkeypatch):
    """An ir_datasets corpus may repeat an id: the first document of each is kept and the rest counted, as
    when the ids were held in memory; the repeats are found once every id is in, so the files are written again."""
    from benchmark.common import idset
    from benchmark.data import datasets
    from benchmark.formats import documents as docs_format

    monkeypatch.setattr(idset, "BUFFER", 3)  # the repeats found across spilled buckets
    docs = [("a", "one"), ("b", " "), ("a", "again"), ("c", "three"), ("b", "x"), ("d", ""), ("a", "y")]
    monkeypatch.setattr(datasets, "_iter_corpus", lambda source, pinned: iter(docs))
    record = datasets.materialise_corpus("some/source", tmp_path, keep=frozenset({"c", "z"}), progress=False)
    assert record == {
        "source": "some/source",
        "documents": 4,
        "empty_documents": 2,
        "judged_docs_missing": 1,
        "repeated_ids_skipped": 3,
    }
    assert list(docs_format.read_docs(docs_format.docs_path(tmp_path))) == [
        docs_format.Doc("a", "one"),
        docs_format.Doc("b", " "),
        docs_format.Doc("c", "three"),
        docs_format.Doc("d", ""),
    ]
    assert docs_format.read_docids(docs_format.docids_path(tmp_path)) == ["a", "b", "c", "d"]


def test_a_local_folders_first_repeat_is_named_after_the_pass(tmp_path, monkeypatch):
    from benchmark.common import idset
    from benchmark.data.sources.beir_folder import read_local_corpus

    monkeypatch.setattr(idset, "BUFFER", 2)
    (tmp_path / "corpus.jsonl").write_text(
        "".join(json.dumps({"_id": i, "text": "x"}) + "\n" for i in ["a", "b", "c", "d", "c", "b", "e"])
    )
    with pytest.raises(BenchmarkError, match=r"corpus\.jsonl:5: duplicate document id 'c'; ids must be unique"):
        list(read_local_corpus(tmp_path))


def test_a_cut_takes_the_first_distinct_ids_in_rank_order():
    """A cut keeps the judged documents and fills up with the others in hash order, as sorting every id would;
    here the sorted list is the reference, over ids that repeat and judged ids present or absent."""
    import random

    from benchmark.data.sources.subset import first_by_rank as _first_by_rank, rank as _rank

    rng = random.Random(5)
    ids = [f"d{rng.randrange(3000)}" for _ in range(6000)]  # about 2,600 distinct, most of them repeated
    keep = frozenset({"d1", "d17", "d2999", "absent"})
    for seed in (0, 3):
        ranked = sorted({d for d in ids if d not in keep}, key=lambda d: _rank(d, seed))
        for room in (-2, 0, 1, 50, 2500, 5000):
            assert _first_by_rank(iter(ids), room, seed, keep) == set(ranked[: max(0, room)]), (seed, room)


@pytest.mark.slow
@pytest.mark.parametrize("max_docs", [None, 1000], ids=["whole", "cut"])
def test_corpus_memory_stays_flat_in_the_number_of_documents(tmp_path, max_docs):
    """The corpus stage of a local folder at 10,000 and 100,000 documents, with the id set's buffer at 2,048 so
    that both sizes spill many times; whole, and cut to 1,000 documents. Whole, its ids held in memory (the
    code before spilling) grew the process by 11.0 MB and 53.3 MB; spilled, by 6.0 and 6.6 MB (measured
    here). Cut, every id sorted by hash (the code before the bounded cut) grew it by 6.6 and 22.2 MB; the
    cut kept in a heap as the ids stream by, by 6.0 and 6.6 MB. The bound, 4 MB between the two sizes, is
    a tenth and a quarter of the old codes' growth (42.3 and 15.6 MB) and six times the new code's."""
    from benchmark.data.synthetic_corpus import Recipe, write

    grew = {}
    for n in (10_000, 100_000):
        folder = write(Recipe(n, 100), tmp_path / f"data-{n}", progress=False)
        (tmp_path / f"out-{n}").mkdir()
        got = probe(
            "corpus", folder, tmp_path / f"out-{n}", *([max_docs] if max_docs else []), SCALE_PROBE_IDSET_BUFFER="2048"
        )
        assert got["result"]["documents"] == (max_docs or n) and got["result"]["judged_docs_missing"] == 0
        grew[n] = got["peak_growth_kb"]
    assert grew[100_000] - grew[10_000] < 4 * 1024, grew


# --------------------------------------------------------------------------- evaluation a block at a time

QRELS = "".join(f"q{q} 0 d{q} 1\nq{q} 0 d{q + 1} 2\n" for q in range(9))


def _run_lines(grouped: bool) -> list[str]:
    lines = [f"q{q} Q0 d{(q + r) % 12} {r + 1} {10 - r}.0 t" for q in range(9) for r in range(5)]
    if not grouped:  # q0's lines come back after q1's: a --run file sorted by score, say
        lines = lines[5:10] + lines[:5] + lines[10:]
    return lines


@pytest.mark.parametrize("grouped", [True, False], ids=["grouped", "ungrouped"])
def test_blocks_give_the_values_of_one_whole_evaluation(tmp_path, monkeypatch, grouped):
    import ir_measures

    from benchmark.evaluation import measures
    from benchmark.formats.perquery import perquery_path, read_perquery

    data = tmp_path / "data"
    data.mkdir()
    (data / "qrels.txt").write_text(QRELS)
    (data / "docids.txt").write_text("".join(f"d{i}\n" for i in range(12)))
    run = tmp_path / "run.trec"
    run.write_text("\n".join(_run_lines(grouped)) + "\n")
    monkeypatch.setattr(measures, "BLOCK", 2)  # five blocks over nine queries
    out = tmp_path / "eval"
    out.mkdir()
    record = measures.evaluate_stage(run, data, data, ["RR@10", "nDCG@10"], out)
    qrels = [ir_measures.Qrel(q, d, int(r)) for q, _, d, r in map(str.split, QRELS.splitlines())]
    whole = {
        (str(m.measure), m.query_id): m.value
        for m in ir_measures.iter_calc(
            [ir_measures.RR @ 10, ir_measures.nDCG @ 10],
            qrels,
            [ir_measures.ScoredDoc(r.split()[0], r.split()[2], float(r.split()[4])) for r in _run_lines(True)],
        )
    }
    per = read_perquery(perquery_path(out))
    assert {(m, q): v for m, values in per.items() for q, v in values.items()} == whole
    assert record["run_queries"] == 9 and record["queries"] == 9


def test_a_foreign_document_in_a_later_block_is_refused(tmp_path, monkeypatch):
    from benchmark.evaluation import measures

    data = tmp_path / "data"
    data.mkdir()
    (data / "qrels.txt").write_text(QRELS)
    (data / "docids.txt").write_text("".join(f"d{i}\n" for i in range(12)))
    run = tmp_path / "run.trec"
    run.write_text("\n".join(_run_lines(True) + ["q8 Q0 elsewhere 6 1.0 t"]) + "\n")
    monkeypatch.setattr(measures, "BLOCK", 2)
    with pytest.raises(BenchmarkError, match="1 document.*absent from the corpus.*'elsewhere'"):
        measures.evaluate_stage(run, data, data, ["RR@10"], tmp_path)


def _big_run(tmp_path: Path, queries: int, depth: int, documents: int) -> tuple[Path, Path]:
    data = tmp_path / "data"
    data.mkdir()
    (data / "qrels.txt").write_text("".join(f"q{q} 0 d{q * 7 % documents} 1\n" for q in range(queries)))
    (data / "docids.txt").write_text("".join(f"d{i}\n" for i in range(documents)))
    run = tmp_path / "run.trec"
    with open(run, "w") as fh:
        for q in range(queries):
            fh.write(
                "".join(
                    f"q{q} Q0 d{(q * 31 + r * 17) % documents} {r + 1} {depth - r}.000000 benchmark\n"
                    for r in range(depth)
                )
            )
    return run, data


@pytest.mark.slow
def test_evaluate_memory_stays_at_a_block(tmp_path):
    """2,000 queries × 1,000 hits over 50,000 documents. Held whole (the code before blocks), the run's 2M
    ScoredDocs and the id set grew the process by 784 MB; blocks of 100 queries, by 67 MB (both measured
    here). The bound, 150 MB, leaves a block twice its room and fails the whole run held at once."""
    run, data = _big_run(tmp_path, 2000, 1000, 50_000)
    (tmp_path / "eval").mkdir()
    got = probe("evaluate", run, data, data, tmp_path / "eval")
    assert got["result"]["run_queries"] == 2000
    assert got["peak_growth_kb"] < 150 * 1024, got


# --------------------------------------------------------------------------- search a batch at a time


@pytest.fixture(scope="module")
def small_index(tmp_path_factory):
    """A BM25 index of 3,000 synthetic documents and 1,500 queries (SciFact's words and lengths)."""
    from benchmark.data.sources.beir_folder import read_local_corpus, read_local_topics
    from benchmark.data.synthetic_corpus import Recipe, write
    from benchmark.formats import documents as docs_format, query_texts
    from benchmark.retrieval import lucene

    root = tmp_path_factory.mktemp("scale-index")
    folder = write(Recipe(3000, 1500), root / "data", progress=False)
    corpus = root / "corpus"
    docs_format.write_corpus(corpus, (docs_format.Doc(i, t) for i, t in read_local_corpus(folder)))
    from benchmark.formats.lucene_index import index_path

    lucene.build_bm25_index(corpus / docs_format.COLLECTION, index_path(root / "index"), threads=1)
    topics = root / "topics"
    topics.mkdir()
    queries, _ = read_local_topics(folder, "test")
    query_texts.write_queries(topics / query_texts.QUERIES, (query_texts.Query(q, t) for q, t in queries.items()))
    return root


def test_batched_search_writes_the_run_of_one_batch(small_index, tmp_path, monkeypatch):
    from benchmark.formats.trec_run import RUN
    from benchmark.stages import Context, search as search_stage
    from benchmark.stages.store import Inputs

    inputs = Inputs(
        {"index": small_index / "index", "queries": small_index / "topics"},
        {"index": {"kind": "index", "record": {"type": "bm25"}}, "queries": {"kind": "topics"}},
    )
    config = search_stage.Search.Config(k=100, k1=0.9, b=0.4)
    runs = []
    for batch in (10**6, 7):  # one batch; then 215 batches, the last of 2 queries
        monkeypatch.setattr(search_stage, "BATCH", batch)
        out = tmp_path / str(batch)
        out.mkdir()
        record = search_stage.Search.run(config, inputs, out, Context(threads=1, progress=False))
        runs.append((out / RUN).read_bytes())
        assert record.queries == 1500
    assert runs[0] == runs[1] and runs[0].count(b"\n") > 1500 * 90  # a query of rare words matches fewer than 100


@pytest.mark.slow
def test_search_memory_stays_at_a_batch(small_index, tmp_path):
    """1,500 queries × 1,000 hits. Held whole with Java's default heap (the code before batches), the hits
    and the JVM's results grew the process by 5.1 GB; batches of 250 queries under the 1 GB heap cap, by
    1.2 GB (both measured here: the JVM fills its heap before it collects). The bound, 2 GB, is the cap
    plus the JVM's own memory and one batch in Python, and fails the uncapped, unbatched search."""
    got = probe("search", small_index / "index", small_index / "topics", tmp_path)
    assert got["result"]["queries"] == 1500
    assert got["peak_growth_kb"] < 2 * 1024 * 1024, got


def test_jvm_heap_is_capped_and_a_bad_value_is_one_line():
    from benchmark.retrieval.lucene import DEFAULT_JVM_HEAP, jvm_heap

    assert jvm_heap({}) == DEFAULT_JVM_HEAP and jvm_heap({"BENCHMARK_JVM_HEAP": "512m"}) == "512m"
    with pytest.raises(
        BenchmarkError, match=r"BENCHMARK_JVM_HEAP='lots' is not a Java heap size.*e\.g\. BENCHMARK_JVM_HEAP=1g"
    ):
        jvm_heap({"BENCHMARK_JVM_HEAP": "lots"})


# --------------------------------------------------------------------------- exports


def test_streamed_export_has_the_bytes_of_the_whole(tmp_path):
    from benchmark.report.results import tagged_run, write_tagged_run

    run, _ = _big_run(tmp_path, 30, 1000, 500)  # 30,000 lines: three blocks of 10,000
    whole = gzip.compress(
        "".join(" ".join([*line.split()[:5], "mine"]) + "\n" for line in run.read_text().splitlines()).encode(), mtime=0
    )
    with open(tmp_path / "out.gz", "wb") as fh:
        write_tagged_run(run, "mine", fh)
    assert gzip.decompress((tmp_path / "out.gz").read_bytes()) == gzip.decompress(whole)
    assert (tmp_path / "out.gz").read_bytes() == tagged_run(run, "mine")


# --------------------------------------------------------------------------- the synthetic collection and backbone


def test_synthetic_collection_is_a_strict_beir_folder_drawn_from_its_source(tmp_path):
    from benchmark.data.datasets import load_source, validate_dataset
    from benchmark.data.sources.beir_folder import read_local_corpus, read_local_topics
    from benchmark.data.synthetic_corpus import Recipe, write

    folder = write(Recipe(400, 60), tmp_path, progress=False)
    assert validate_dataset(f"{folder}@test") is None
    docs = dict(read_local_corpus(folder))
    queries, qrels = read_local_topics(folder, "test")
    assert len(docs) == 400 and len(queries) == 60 and len(qrels) == 60
    source_docs, _, _ = load_source("beir/scifact")
    vocabulary, lengths = set(), set()
    for _, text in source_docs:
        vocabulary.update(text.split())
        lengths.add(len(text.split()))
    assert all(set(t.split()) <= vocabulary and len(t.split()) in lengths for t in docs.values())
    # each query judges the document it was drawn from: most of its words are that document's (FROM_TARGET = 0.7)
    shared = [
        sum(w in set(docs[q.doc_id].split()) for w in queries[q.query_id].split()) / len(queries[q.query_id].split())
        for q in qrels
    ]
    assert sum(shared) / len(shared) > 0.6
    again = write(Recipe(400, 60), tmp_path / "again", progress=False)
    assert (again / "corpus.jsonl").read_bytes() == (folder / "corpus.jsonl").read_bytes()


def test_synthetic_collection_refuses_more_queries_than_documents(tmp_path):
    from benchmark.data.synthetic_corpus import Recipe, write

    with pytest.raises(BenchmarkError, match="7 queries need as many target documents.*--queries <= --docs"):
        write(Recipe(5, 7), tmp_path)


def test_scale_backbone_has_a_trained_models_density_per_document():
    """The bias leaves doc_nnz = 200 maxima above 0 on the calibration document at 32 tokens, as the model's
    own float32 forward computes them; the encoder's canonical values (a float64 enclosure of the same
    maxima) may put the few terms within rounding of the threshold on the other side."""
    from benchmark.model.synthetic import CALIBRATION_TEXTS, SCALE_DOC_TOKENS, SYNTHETIC, ensure
    from benchmark.retrieval.impact_vectors import load_model
    from benchmark.splade.encoder import encode

    model, tokenizer = load_model(ensure("scale-bert"))
    assert model.config.vocab_size == 30522 and SYNTHETIC["scale-bert"].doc_nnz == 200
    ((ids, weights),) = encode(model, tokenizer, [" ".join(CALIBRATION_TEXTS)], max_length=SCALE_DOC_TOKENS)
    assert 195 <= len(ids) <= 205


# --------------------------------------------------------------------------- the rehearsal


def test_exponent_and_projection_follow_the_measurements():
    from benchmark.perf.scale import Measurement, affine, exponent, project, summarise

    assert exponent([(10, 3.0), (100, 30.0), (1000, 300.0)]) == pytest.approx(1.0)
    assert exponent([(10, 1.0), (100, 100.0)]) == pytest.approx(2.0)
    assert affine([(1000, 12.0), (2000, 22.0), (4000, 42.0)]) == pytest.approx((2.0, 0.01))
    rows = [Measurement(n, 100, "index", "bm25", n / 1000, n / 1000, 100.0, 0.0, 50 * n) for n in (1000, 10_000)]
    rows += [
        Measurement(n, 100, "search", "bm25", 5.0 + n / 1000, 5.0 + n / 1000, 300.0, 0.0, 7000) for n in (1000, 10_000)
    ]
    assert summarise(rows)[0]["time_exponent"] == pytest.approx(1.0)
    index, search = project(rows, 100_000, 1000)
    assert index["core_hours"] == pytest.approx(100 / 3600) and index["peak_gb"] == pytest.approx(100 / 1024)
    assert index["disk_gb"] == pytest.approx(50 * 100_000 / 1e9)
    # per query: (5 s fixed + 1 ms per document) for 100 queries, at 10 times the queries
    assert search["core_hours"] == pytest.approx((5.0 + 100) * 10 / 3600)
    assert search["disk_gb"] == pytest.approx(70 * 1000 / 1e9)
    # memory grows by what the stage added, not by whole peaks whose starts differ (torch planned or not):
    # 10 MB above a 300 MB start, then 100 MB above a 50 MB start, is ×10 a decade: 50 + 1,000 MB at 100,000
    grown = [
        Measurement(1000, 100, "corpus", "", 1.0, 1.0, 310.0, 0.0, 100, start_mb=300.0),
        Measurement(10_000, 100, "corpus", "", 1.0, 1.0, 150.0, 0.0, 100, start_mb=50.0),
    ]
    assert project(grown, 100_000, 100)[0]["peak_gb"] == pytest.approx(1050 / 1024)
    # 90 MB added over 9,000 more documents: 10,485.76 bytes a document
    assert summarise(grown)[0]["added_per_doc"] == pytest.approx(90 * 2**20 / 9000)
    assert summarise(grown[:1])[0]["added_per_doc"] is None


def test_beir13_is_projected_corpus_by_corpus(tmp_path):
    """Each BEIR query searches its own corpus: BEIR-13's search time is the sum over its 13 corpora of
    (fixed + per-document cost at that corpus's size) × its queries, not one 24.6M-document corpus's."""
    from benchmark.perf.scale import BEIR13, Measurement, write_outputs

    # 5 s per 100 queries fixed, plus 1 ms per document per 100 queries
    rows = [
        Measurement(n, 100, "search", "bm25", 5.0 + n / 1000, 5.0 + n / 1000, 300.0, 0.0, 7000, start_mb=50.0)
        for n in (1000, 10_000)
    ]
    write_outputs(rows, tmp_path, "this machine", [])
    line = next(x for x in (tmp_path / "scale.md").read_text().splitlines() if x.startswith("| BEIR-13"))
    expected = sum((5.0 + d / 1000) * q / 100 for d, q in BEIR13) / 3600
    assert sum(q for _, q in BEIR13) == 33_234
    assert (
        line.split(" | ")[3] == f"{expected:.1f}"
        and f"{expected:.1f}" != f"{(5.0 + 24_561_473 / 1000) * 332.34 / 3600:.1f}"
    )


@pytest.mark.slow
def test_rehearsal_runs_every_stage_in_its_own_process(tmp_path):
    from benchmark.perf.scale import rehearse, write_outputs

    rows = rehearse(300, 40, tmp_path / "work", "beir/scifact", threads=1, doc_tokens=32, log=lambda _: None)
    stages = {(m.stage, m.system) for m in rows}
    assert stages == {
        ("corpus", ""),
        ("topics", ""),
        ("index", "bm25"),
        ("search", "bm25"),
        ("evaluate", "bm25"),
        ("backbone", "splade"),
        ("encode", "splade"),
        ("queries", "splade"),
        ("index", "splade"),
        ("search", "splade"),
        ("evaluate", "splade"),
        ("report", ""),
    }
    assert all(m.cpu_s > 0 and m.wall_s > 0 and m.peak_mb > 0 and m.documents == 300 for m in rows)
    index = [m for m in rows if m.stage == "index"]
    assert all(m.child_peak_mb > 0 for m in index)  # the indexer JVM is a child, measured apart
    assert all(m.disk_bytes > 0 for m in rows)
    # a measurement deleted is measured again by computing its finished stage anew, not timed as a reuse (0 s)
    gone = next((tmp_path / "work" / "measured").glob("300-search-*.json"))
    gone.unlink()
    again = rehearse(300, 40, tmp_path / "work", "beir/scifact", threads=1, doc_tokens=32, log=lambda _: None)
    assert gone.is_file() and [m.cpu_s for m in again if m.stage != "search"] == [
        m.cpu_s for m in rows if m.stage != "search"
    ]
    before = {(m.stage, m.system): m.cpu_s for m in rows}
    remeasured = [m for m in again if m.cpu_s != before[(m.stage, m.system)]]
    assert len(remeasured) == 1 and remeasured[0].stage == "search" and remeasured[0].cpu_s > 0.2
    # each measurement keeps the minute it was written; one from before the field is dated by its file
    assert all(m.measured_at and len(m.measured_at) == 16 for m in again)
    assert remeasured[0].measured_at == max(m.measured_at for m in again)
    record = json.loads(gone.read_text())
    del record["measured_at"]
    gone.write_text(json.dumps(record))
    os.utime(gone, (1_700_000_000, 1_700_000_000))  # 2023-11-14 22:13:20 UTC
    dated = rehearse(300, 40, tmp_path / "work", "beir/scifact", threads=1, doc_tokens=32, log=lambda _: None)
    assert [m.measured_at for m in dated if m.stage == "search" and m.cpu_s == remeasured[0].cpu_s] == [
        "2023-11-14 22:13"
    ]
    write_outputs(dated, tmp_path / "dated", "this machine", [])
    # the span's end is now the latest of the others: the re-measured search may have run in a later minute
    latest = max(m.measured_at for m in again if m is not remeasured[0])
    assert f"Measured 2023-11-14 22:13 to {latest} UTC" in (tmp_path / "dated" / "scale.md").read_text()
    searches = [m for m in rows if m.stage == "search"]
    assert all(m.lucene_ms_per_query is not None and m.lucene_ms_per_query > 0 for m in searches)
    assert all(m.lucene_ms_per_query is None for m in rows if m.stage != "search")
    files = write_outputs(rows, tmp_path / "out", "this machine", [])
    assert [f.name for f in files] == ["scale.csv", "scale.md", "scale.png"]
    text = (tmp_path / "out" / "scale.md").read_text()
    assert "| encode | splade |" in text and "MS MARCO" in text and "| added B/doc |" in text
    assert "| documents | BM25 ms/q | SPLADE impact ms/q |" in text and "\n| 300 | " in text


def test_a_relative_work_folder_is_planned_as_a_path(tmp_path, monkeypatch):
    """``--work runs/scale`` (the default) once planned ``runs/scale/data/…@test``, which reads as an
    ir_datasets id and was refused: the folders go to the run as absolute paths."""
    from benchmark.perf.scale import run_args

    monkeypatch.chdir(tmp_path)
    args = run_args(Path("work/data/synthetic-1"), Path("work"), threads=1, doc_tokens=32)
    dataset = args[args.index("--datasets") + 1]
    assert dataset == f"{tmp_path}/work/data/synthetic-1@test"
    assert args[args.index("--runs-dir") + 1] == f"{tmp_path}/work/runs"


def test_a_child_of_the_rehearsal_plans_as_benchmark_run_does(tmp_path, capsys):
    """Each child plans through ``benchmark.pipeline.command.prepare``, the function ``python -m benchmark.run``
    plans with (no environment variable, no import of ``perf`` from the run): its stages are that run's."""
    from benchmark.data.synthetic_corpus import Recipe, write
    from benchmark.perf.scale import CHILD, main, run_args
    from benchmark.pipeline.command import parse_args, prepare

    folder = write(Recipe(50, 5, "beir/scifact"), tmp_path / "data", progress=False)
    args = run_args(folder, tmp_path, 1, 32, splade=False)
    assert main([CHILD, "plan", *args, "--dry-run"]) == 0
    rows = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    plan, *_ = prepare(parse_args([*args, "--dry-run"]))
    assert sorted(r["id"] for r in rows) == sorted(s.id for s in plan.stages())
    assert sorted(r["kind"] for r in rows) == ["corpus", "evaluate", "index", "search", "topics"]
    assert main([CHILD, f"nope-1={tmp_path / 'x.json'}", *args]) == 2
    assert "the rehearsal names stage 'nope-1', which this plan does not have" in capsys.readouterr().err
    assert not (tmp_path / "x.json").exists()
