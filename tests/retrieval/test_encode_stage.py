"""benchmark.retrieval.impact_vectors: shards written by the writer processes equal shards written in line."""

from __future__ import annotations

import json

import numpy as np

from benchmark.formats.vectors import SHARD
from benchmark.retrieval import impact_vectors as encode_mod
from benchmark.retrieval.impact_vectors import encode_docs_stage, read_shard_stats

WORDS = (
    "vitamin deficiency tuberculosis risk microglia macrophage nervous system aspirin trial brca1 "
    "mutation cancer cell protein gene expression patients randomized cohort"
).split()


def _corpus(root, n: int):
    rng = np.random.default_rng(0)
    (root / "corpus").mkdir(parents=True)
    with open(root / "corpus" / "docs.jsonl", "w") as fh:
        for i in range(n):
            text = " ".join(rng.choice(WORDS, size=int(rng.integers(1, 40))))
            fh.write(json.dumps({"id": f"d{i}", "contents": text}) + "\n")
    return root


def _read(docs_dir) -> tuple[dict[str, dict], np.ndarray]:
    vectors = {}
    for part in sorted(docs_dir.glob("part-*.jsonl")):
        for line in part.read_text().splitlines():
            row = json.loads(line)
            vectors[row["id"]] = row["vector"]
    df = sum(read_shard_stats(p)[0] for p in sorted(docs_dir.glob("part-*.jsonl")))
    return vectors, df


def test_pooled_shards_equal_inline_shards(tmp_path, bert_tiny, monkeypatch):
    corpus = _corpus(tmp_path / "data", 47)
    kw = {"max_length": 48, "batch_size": 8, "progress": False}
    pools = []
    make_pool = encode_mod._writer_pool
    monkeypatch.setattr(encode_mod, "_writer_pool", lambda *a: pools.append(make_pool(*a)) or pools[-1])
    one = encode_docs_stage(bert_tiny, corpus, tmp_path / "one", shard_size=100, **kw)
    assert pools == []  # a single shard is written in line: no processes to start
    many = encode_docs_stage(bert_tiny, corpus, tmp_path / "many", shard_size=10, **kw)
    assert len(pools) == 1
    assert sorted(p.name for p in (tmp_path / "many" / "docs").glob("part-*.jsonl")) == [
        SHARD.format(i) for i in range(5)
    ]
    v_one, df_one = _read(tmp_path / "one" / "docs")
    v_many, df_many = _read(tmp_path / "many" / "docs")
    assert len(v_one) == 47 and v_one == v_many
    assert np.array_equal(df_one, df_many) and np.array_equal(np.load(tmp_path / "many" / "df.npy"), df_one)
    assert sum(one.pop("encoder")["paths"].values()) == 1  # what the encoder measured, per shard: not an output
    many.pop("encoder")
    assert one == many and one["documents"] == 47 and one["doc_nnz"] > 10
    assert not (tmp_path / "many" / "encoder").exists()  # the per-shard notes are folded into the record
