"""Training triples as published and streamed: the MarginMSE recipe's id join, the O(1)-memory
shuffling, and peak memory that does not grow with the size of the triples source.

The Hugging Face source is a local folder with the three-subset layout of
``sentence-transformers/msmarco`` (``bert-ensemble-margin-mse``: query_id, positive_id, negative_id,
score; ``corpus``: passage_id, passage; ``queries``: query_id, query), declared in its README like
the hub dataset, and loaded offline by ``datasets`` itself.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

from benchmark.common.errors import BenchmarkError
from benchmark.data.negatives import hf_triples
from benchmark.formats.triples import triples_path
from benchmark.training.examples import NoDuplicatesPermutedBatchSampler, Permutation, PermutedBatchSampler
from benchmark.training.loop import train_splade
from benchmark.training.outcomes import DEGRADED, OK
from benchmark.training.recipe import load_recipe
from helpers import HELPERS, ROOT, TESTS
from helpers.tiny_models import tiny_bert

SUBSET = "bert-ensemble-margin-mse"
README = """---
configs:
- config_name: bert-ensemble-margin-mse
  data_files:
  - split: train
    path: bert-ensemble-margin-mse/train.parquet
- config_name: corpus
  data_files:
  - split: train
    path: corpus/train.parquet
- config_name: queries
  data_files:
  - split: train
    path: queries/train.parquet
---
"""
WORDS = "protein cell gene tumor virus brain heart blood drug trial mouse risk dose liver lung bone skin fat".split()


def _msmarco_like(root: Path, rows: int, texts: int = 1000) -> Path:
    """The three subsets; ids are not row numbers (passage i has id 7i, query i has id 100000 + i)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    for sub in (SUBSET, "corpus", "queries"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    (root / "README.md").write_text(README)
    words = [" ".join(WORDS[(i + k) % len(WORDS)] for k in range(1 + i % 5)) for i in range(texts)]
    pq.write_table(
        pa.table(
            {"passage_id": [7 * i for i in range(texts)], "passage": [f"passage {i} {w}" for i, w in enumerate(words)]}
        ),
        root / "corpus" / "train.parquet",
    )
    pq.write_table(
        pa.table(
            {"query_id": [100000 + i for i in range(texts)], "query": [f"query {i} {w}" for i, w in enumerate(words)]}
        ),
        root / "queries" / "train.parquet",
    )
    i = np.arange(rows, dtype=np.int64)
    pq.write_table(
        pa.table(
            {
                "query_id": 100000 + i % texts,
                "positive_id": 7 * (i % texts),
                "negative_id": 7 * ((31 * i + 5) % texts),
                "score": (i % 13 - 6.5).astype(np.float64),
            }
        ),
        root / SUBSET / "train.parquet",
        row_group_size=10_000,
    )
    return root


@pytest.fixture
def hf_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``datasets`` writes its Arrow cache here, not under the home folder."""
    import datasets

    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", str(tmp_path / "hf-cache"))
    return tmp_path / "hf-cache"


@pytest.mark.slow  # trains
def test_marginmse_recipe_joins_ids_to_texts_and_trains(tmp_path: Path, hf_cache: Path) -> None:
    root = _msmarco_like(tmp_path / "msmarco", rows=40, texts=40)
    out = tmp_path / "triples"
    out.mkdir()
    record = hf_triples({}, out, dataset=f"{root}:{SUBSET}")
    assert record == {
        "negatives": "dataset-hard-negatives",
        "dataset": f"{root}:{SUBSET}",
        "columns": ["query_id", "positive_id", "negative_id", "score"],
        "texts_from": {"passages": f"{root}:corpus", "queries": f"{root}:queries"},
        "triples": 40,
    }
    rows = [json.loads(line) for line in triples_path(out).read_text().splitlines()]
    # row 3: query id 100003, positive id 21 (passage 3), negative id 7·((31·3 + 5) mod 40) = 126 (passage 18)
    assert rows[3] == {
        "query": "query 3 tumor virus brain heart",
        "positive": "passage 3 tumor virus brain heart",
        "negative": "passage 18 protein cell gene tumor",
        "score": -3.5,
    }

    # the packaged recipe, cut to two steps, trains on the stage's file as it is
    overrides = {
        "batch_size": 4,
        "query_max_length": 16,
        "doc_max_length": 16,
        "chunk_size": 4,
        "max_steps": 2,
        "logging_steps": 1,
        "save_steps": 100,
        "dev_queries": 4,
        "dev_steps": 1,
    }
    init = tiny_bert(tmp_path / "models")
    result = train_splade(
        init, triples_path(out), load_recipe("msmarco-marginmse"), tmp_path / "run", progress=False, overrides=overrides
    )
    assert (result["recipe"], result["steps"], result["examples"], result["dev_queries"]) == (
        "msmarco-marginmse",
        2,
        36,
        4,
    )
    assert (result["max_grad_norm"], result["checkpoint"], result["checkpoint_step"]) == (
        0.0,
        "best",
        result["dev_mrr_best_step"],
    )
    assert result["outcome"] in (OK, DEGRADED) and result["triggers"] == {} and math.isfinite(result["final_loss"])

    # a subset with the texts themselves (here JSON lines) is taken as it is, extra columns dropped
    texts = tmp_path / "texts"
    (texts / "t").mkdir(parents=True)
    (texts / "README.md").write_text(
        "---\nconfigs:\n- config_name: t\n  data_files:\n  - split: train\n    path: t/train.jsonl\n---\n"
    )
    given = [
        {"query": f"q{i}", "positive": f"p{i}", "negative": f"n{i}", "score": i / 2, "source": "x"} for i in range(3)
    ]
    (texts / "t" / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in given))
    (tmp_path / "t-out").mkdir()
    assert hf_triples({}, tmp_path / "t-out", dataset=f"{texts}:t", limit=2)["triples"] == 2
    assert [json.loads(line) for line in triples_path(tmp_path / "t-out").read_text().splitlines()] == [
        {k: r[k] for k in ("query", "positive", "negative", "score")} for r in given[:2]
    ]

    # a subset with neither texts nor ids is refused by name
    (root / "README.md").write_text(README.replace(f"{SUBSET}/train.parquet", "corpus/train.parquet", 1))
    with pytest.raises(
        BenchmarkError,
        match=r"has columns passage_id, passage; training needs query, positive, negative "
        r"or the ids query_id, positive_id, negative_id",
    ):
        hf_triples({}, out, dataset=f"{root}:{SUBSET}")


def test_shuffling_holds_no_state_per_row() -> None:
    """A permutation of a billion rows, batches drawn from it: O(1) memory (torch.randperm would
    hold 4 GB). The permutation is a bijection, fixed by its key, different for another key."""
    for n in (1, 2, 3, 17, 1000):
        assert sorted(Permutation(n, 42, 0)) == list(range(n))
    assert list(Permutation(1000, 42, 0)) == list(Permutation(1000, 42, 0))
    assert list(Permutation(1000, 42, 0)) != list(Permutation(1000, 43, 0)) != list(Permutation(1000, 42, 1))

    class Rows:
        """A virtual table of ``n`` rows computed on demand; ``queries`` distinct queries if given."""

        column_names = ["query", "positive", "negative"]

        def __init__(self, n: int, queries: int = 0) -> None:
            self.n, self.queries = n, queries

        def __len__(self) -> int:
            return self.n

        def __getitem__(self, i: int) -> dict[str, str]:
            return {"query": f"q{i % self.queries if self.queries else i}", "positive": f"p{i}", "negative": f"n{i}"}

    for sampler_class in (PermutedBatchSampler, NoDuplicatesPermutedBatchSampler):
        tracemalloc.start()
        sampler = sampler_class(Rows(10**9), batch_size=128, drop_last=True, valid_label_columns=["score"], seed=42)
        batches = iter(sampler)
        first = [next(batches) for _ in range(4)]
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert len(sampler) == 10**9 // 128 and all(len(b) == 128 for b in first)
        assert peak < 1 << 20, peak  # 1 MiB: a few batches of Python ints; any per-row array is GBs here

    # no text twice in a batch; a conflicting row waits for a later batch; the epoch has len() batches
    sampler = NoDuplicatesPermutedBatchSampler(
        Rows(64, queries=8), batch_size=8, drop_last=True, valid_label_columns=["score"], seed=1
    )
    batches = list(sampler)
    assert len(batches) == len(sampler) == 8
    for batch in batches:
        assert len({i % 8 for i in batch}) == 8  # 8 distinct queries in every batch


def _probe(*args: str, env: dict[str, str]) -> dict[str, int]:
    proc = subprocess.run(
        [sys.executable, str(HELPERS / "memory_probe.py"), *args], env=env, capture_output=True, text=True, timeout=900
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.slow  # trains
def test_peak_memory_does_not_grow_with_the_triples_source(tmp_path: Path) -> None:
    """The triples stage (the id join) and the start of training, on 250k and on 1M triples: the
    peak resident set (kernel high-water mark) must not grow with the extra 750k rows.

    Bound: 16 bytes per extra row (11.4 MiB). Holding the rows costs far more: three str objects
    of at least 49 bytes each per triple, over 100 MiB; a list of row indices 36 bytes per row.
    Below that the measurement is noise: repeated runs of the same size differ by up to 5 MB (the
    memory-mapped Arrow pages the first batch touches, allocator state), 7 bytes per row here. So an
    8-byte index per row would pass unseen; the samplers' own test above shows they keep none."""
    env = {
        **os.environ,
        "HF_DATASETS_CACHE": str(tmp_path / "hf-cache"),
        "OMP_NUM_THREADS": "1",
        "PYTHONPATH": os.pathsep.join([str(ROOT), str(TESTS)]),
    }
    init = tiny_bert(tmp_path / "models")
    grown = {}
    for rows in (250_000, 1_000_000):
        root = _msmarco_like(tmp_path / f"src{rows}", rows)
        out = tmp_path / f"triples{rows}"
        grown[rows] = _probe("mine", f"{root}:{SUBSET}", str(out), env=env)
        assert sum(1 for _ in open(triples_path(out), "rb")) == rows
        grown[rows].update(_probe("train", str(init), str(triples_path(out)), str(tmp_path / f"run{rows}"), env=env))
    print("peak growth (kB) by source rows:", grown)
    bound_kb = 16 * 750_000 / 1024
    for phase in ("mine", "examples", "start"):
        assert grown[1_000_000][phase] - grown[250_000][phase] < bound_kb, (phase, grown)
