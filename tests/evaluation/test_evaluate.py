"""Evaluation through ir_measures on inline TREC qrels and runs, with hand-computed values."""

from __future__ import annotations

import math

import pytest

from benchmark.common.errors import BenchmarkError
from benchmark.evaluation.measures import evaluate_stage, parse_measures
from benchmark.formats.perquery import perquery_path, read_perquery

QRELS = "q1 0 d1 1\nq1 0 d3 2\nq2 0 d2 1\nq3 0 d9 1\n"
RUN = "q1 Q0 d2 1 3.0 t\nq1 Q0 d1 2 2.0 t\nq1 Q0 d3 3 1.0 t\nq2 Q0 d2 1 5.0 t\n"  # q3 is judged but has no hits


@pytest.fixture
def data_dir(tmp_path):
    d = tmp_path / "data"
    d.mkdir()
    (d / "qrels.txt").write_text(QRELS)
    (d / "docids.txt").write_text("".join(f"d{i}\n" for i in range(1, 10)))
    return d


def test_values_match_hand_computation(tmp_path, data_dir):
    (tmp_path / "run.trec").write_text(RUN)
    out = tmp_path / "eval"
    out.mkdir()
    record = evaluate_stage(tmp_path / "run.trec", data_dir, data_dir, ["RR@10", "nDCG@10", "R@100"], out)
    per = read_perquery(perquery_path(out))
    assert per["RR@10"] == {"q1": 0.5, "q2": 1.0, "q3": 0.0}
    # q1: trec_eval's linear gains 0,1,2 at ranks 1..3 -> DCG = 1/log2(3) + 2/log2(4); ideal = 2 + 1/log2(3)
    dcg = 1 / math.log2(3) + 2 / math.log2(4)
    idcg = 2 / math.log2(2) + 1 / math.log2(3)
    assert per["nDCG@10"]["q1"] == pytest.approx(dcg / idcg, abs=1e-9)
    # aggregates: mean over all judged queries, 0 for q3 (trec_eval -c)
    assert record["metrics"]["RR@10"] == pytest.approx(0.5)
    assert record["metrics"]["R@100"] == pytest.approx(2 / 3)
    assert record["queries"] == 3 and record["run_queries"] == 2


def test_unknown_measure_names_value_and_fix():
    with pytest.raises(BenchmarkError, match=r"unknown measure\(s\) 'nDCG@ten'.*nDCG@10"):
        parse_measures(["nDCG@10", "nDCG@ten"])


def test_run_with_documents_outside_corpus(tmp_path, data_dir):
    (tmp_path / "run.trec").write_text("q1 Q0 zzz 1 1.0 t\n")
    with pytest.raises(BenchmarkError, match="absent from the corpus.*'zzz'.*--force"):
        evaluate_stage(tmp_path / "run.trec", data_dir, data_dir, ["RR@10"], tmp_path)


def test_measures_are_normalised_to_the_canonical_spelling():
    from benchmark.evaluation.measures import normalise_measure

    assert normalise_measure("nDCG(cutoff=10)") == "nDCG@10"
    assert normalise_measure("RR@10 ") == "RR@10" and normalise_measure(" RR@10") == "RR@10"
    assert normalise_measure("R(rel=2)@1000") == "R(rel=2)@1000"
    # invalid ones stay as written, so that the error quotes the user's own spelling
    assert normalise_measure("nDCG@1e3") == "nDCG@1e3" and normalise_measure("nDCG@ten") == "nDCG@ten"


def test_suite_measures_are_canonical_everywhere(tmp_path):
    """Measures, per-dataset measures, the headline measure and expected scores all use one spelling."""
    from benchmark.suites import load_suite

    path = tmp_path / "spell.toml"
    path.write_text(
        'name = "spell"\ndescription = "d"\ndatasets = ["beir/scifact/test", "beir/nfcorpus/test"]\n'
        'measures = ["nDCG(cutoff=10)", "RR@10 ", "nDCG@10"]\n[dataset_measures]\n"beir/nfcorpus/test" = [" R@100"]\n'
        '[bm25]\n[table]\nmeasure = "nDCG(cutoff=10)"\n[table.measure_for]\n"beir/nfcorpus/test" = "R(cutoff=100)"\n'
        '[[expected]]\ndataset = "beir/scifact/test"\nsystem = "bm25"\nmeasure = "RR(cutoff=10)"\nvalue = 0.5\n'
    )
    suite = load_suite(str(path))
    assert suite.measures == ["nDCG@10", "RR@10"]
    assert suite.dataset_measures == {"beir/nfcorpus/test": ["R@100"]}
    assert suite.table.measure == "nDCG@10" and suite.table.measure_for == {"beir/nfcorpus/test": "R@100"}
    assert suite.expected[0].measure == "RR@10"


@pytest.mark.parametrize(
    "measure, problem",
    [
        (
            "nDCG@10.5",
            "measure 'nDCG@10.5' has cutoff 10.5; a cutoff is a positive integer written in digits (e.g. nDCG@10)",
        ),
        ("P@1e3", "measure 'P@1e3' has cutoff 1000.0; a cutoff is a positive integer written in digits (e.g. P@10)"),
        (
            "RBP(p=2)",
            "measure 'RBP(p=2)' has an invalid parameter p=2; use ir_measures strings such as nDCG@10, RR@10, R@100, "
            "R@1000, AP, R(rel=2)@1000",
        ),
        (
            "NumQ",
            "measure 'NumQ' is a total over queries, but the tables report means over the judged queries; "
            "use a per-query measure (e.g. R@1000, nDCG@10)",
        ),
    ],
)
def test_measure_problems(measure, problem):
    from benchmark.evaluation.measures import measure_problems

    assert measure_problems(["nDCG@10", measure]) == [problem]
