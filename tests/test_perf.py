"""benchmark.perf: bad arguments fail before any work; the training triples are deterministic and sound."""

from __future__ import annotations

from benchmark.perf.cli import main
from benchmark.perf.train import triples


def test_bad_arguments_are_one_line_before_any_work(capsys, tmp_path):
    assert main(["--only", "encode,trian", "--out", str(tmp_path)]) == 2
    assert "unknown perf part 'trian' (did you mean 'train'?)" in capsys.readouterr().err
    assert main(["--only", "train", "--train-steps", "0", "--out", str(tmp_path)]) == 2
    assert "--train-steps must be a positive integer" in capsys.readouterr().err
    assert main(["--only", "encode", "--path", "fp8", "--out", str(tmp_path)]) == 2
    assert "unknown encode path 'fp8'" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())


def test_training_triples_are_deterministic_with_off_topic_negatives():
    from benchmark.data import load_source

    a, b = triples(40), triples(40)
    assert a == b and len(a) == 40
    docs, queries, qrels = load_source("beir/scifact/train")
    text = dict(docs)
    relevant: dict[str, set[str]] = {}
    for q in qrels:
        if q.relevance > 0:
            relevant.setdefault(queries[q.query_id], set()).add(text[q.doc_id])
    assert len({t["query"] for t in a}) == 40
    assert all(t["positive"] in relevant[t["query"]] and t["negative"] not in relevant[t["query"]] for t in a)
