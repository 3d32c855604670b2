"""Evaluation through ir_measures on inline TREC qrels and runs, with hand-computed values."""

from __future__ import annotations

import math

import pytest

from benchmark.errors import BenchmarkError
from benchmark.evaluate import evaluate_stage, parse_measures, read_perquery

QRELS = "q1 0 d1 1\nq1 0 d3 2\nq2 0 d2 1\nq3 0 d9 1\n"
RUN = ("q1 Q0 d2 1 3.0 t\nq1 Q0 d1 2 2.0 t\nq1 Q0 d3 3 1.0 t\n"
       "q2 Q0 d2 1 5.0 t\n")  # q3 is judged but has no hits


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
    per = read_perquery(out)
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
