"""The triples stage: (query, positive, negative[, score]) examples for training, by the recipe's ``negatives``.

- ``bm25``: hard negatives mined from the harness's own BM25 run on the training topics;
- ``official-triples``: an ir_datasets docpairs collection (MS MARCO ``train/triples-small``);
- ``dataset-hard-negatives``: a Hugging Face dataset with query/positive/negative[/score] columns,
  or with query_id/positive_id/negative_id[/score] joined to the texts of the same hub dataset's
  ``corpus`` (passage_id, passage) and ``queries`` (query_id, query) subsets, as
  ``sentence-transformers/msmarco:bert-ensemble-margin-mse`` needs (for MarginMSE).

Every source is streamed to ``triples.jsonl``: memory does not grow with the number of triples (the
BM25 miner holds its corpus's texts, the id join a sorted id index of the corpus and the queries).
Training reads the file by path (``benchmark.formats.triples``), streamed as well.
"""

from __future__ import annotations

import hashlib
import itertools
import random
from collections.abc import Callable, Iterator
from itertools import islice
from pathlib import Path
from typing import Any

import numpy as np

from benchmark.common.errors import BenchmarkError
from benchmark.data import dataset_cache
from benchmark.formats import documents as corpus, qrels, query_texts as topics, trec_run
from benchmark.formats.triples import triples_path, write_triples


def _write(out: Path, triples: Iterator[dict[str, Any]]) -> int:
    n = write_triples(triples_path(out), triples)
    if n == 0:
        triples_path(out).unlink()
        raise BenchmarkError(
            f"no training triples could be made in {out}; the training data needs queries with relevant documents"
        )
    return n


def mine_bm25(
    parents: dict[str, Path], out: Path, *, depth: int = 50, seed: int = 42, limit: int = 0, **_: Any
) -> dict[str, Any]:
    """One triple per (query, relevant doc); the negative is drawn from BM25's top ``depth`` non-relevant hits."""
    queries = dict(topics.read_queries(Path(parents["topics"]) / topics.QUERIES))
    positives: dict[str, list[str]] = {}
    for judgement in qrels.read_qrels(Path(parents["topics"]) / qrels.QRELS):
        if judgement.relevance > 0:
            positives.setdefault(judgement.query_id, []).append(judgement.doc_id)
    run = trec_run.read_run(Path(parents["run"]) / trec_run.RUN)
    texts = dict(corpus.read_docs(corpus.docs_path(parents["corpus"])))

    def triples() -> Iterator[dict[str, str]]:
        for qid in sorted(positives):
            pos = set(positives[qid])
            pool = [d for d, _ in run.get(qid, [])[:depth] if d not in pos]
            if not pool:
                continue
            rng = random.Random(int(hashlib.sha1(f"{seed}:{qid}".encode()).hexdigest()[:8], 16))
            for docid in positives[qid]:
                yield {"query": queries[qid], "positive": texts[docid], "negative": texts[rng.choice(pool)]}

    n = _write(out, islice(triples(), limit or None))
    return {"negatives": "bm25", "triples": n, "depth": depth, "seed": seed}


def official_triples(parents: dict[str, Path], out: Path, *, dataset: str, limit: int = 0, **_: Any) -> dict[str, Any]:
    """The collection's own (query, positive, negative) id triples, resolved to text, in file order."""
    import ir_datasets

    ds = ir_datasets.load(dataset)
    if not ds.has_docpairs():
        raise BenchmarkError(
            f"dataset {dataset!r} has no docpairs (training triples); use e.g. msmarco-passage/train/triples-small"
        )
    with dataset_cache.cache_lock():  # the queries only: a training set's qrels are not needed here
        queries = {q.query_id: q.text for q in ds.queries_iter()}
    docs = dataset_cache.docs_store(ds)

    def triples() -> Iterator[dict[str, str]]:
        for pair in ds.docpairs_iter():
            yield {
                "query": queries[pair.query_id],
                "positive": docs.get(pair.doc_id_a).text,
                "negative": docs.get(pair.doc_id_b).text,
            }

    n = _write(out, islice(triples(), limit or None))
    return {"negatives": "official-triples", "triples": n, "dataset": dataset}


#: text columns of a triples dataset, and the id columns joined to the texts of its corpus / queries subsets
TEXT_COLUMNS = ("query", "positive", "negative")
ID_COLUMNS = ("query_id", "positive_id", "negative_id")
#: rows joined at a time
JOIN_BATCH = 10_000


class _TextsById:
    """Texts of a memory-mapped ``datasets`` subset by id: a sorted index of the ids (8 bytes each for
    integer ids), the texts themselves read from the Arrow file as needed."""

    def __init__(self, subset: Any, id_column: str, text_column: str, where: str) -> None:
        missing = [c for c in (id_column, text_column) if c not in subset.column_names]
        if missing:
            raise BenchmarkError(
                f"{where} has columns {', '.join(subset.column_names)}; the id join needs {id_column} and {text_column}"
            )
        self.subset, self.text_column, self.where = subset, text_column, where
        ids = np.asarray(subset.data.column(id_column).to_numpy(zero_copy_only=False))
        self.order = np.argsort(ids, kind="stable")
        self.sorted_ids = ids[self.order]

    def __call__(self, ids: list[Any]) -> list[str]:
        wanted = np.asarray(ids, dtype=self.sorted_ids.dtype)
        pos = np.minimum(np.searchsorted(self.sorted_ids, wanted), len(self.sorted_ids) - 1)
        found = self.sorted_ids[pos] == wanted
        if not found.all():
            raise BenchmarkError(
                f"id {ids[int(np.argmin(found))]!r} is not in {self.where}; the triples and their "
                "texts must come from the same dataset"
            )
        return self.subset[self.order[pos].tolist()][self.text_column]


def _arrow_batches(hub: str, subset: str | None, batch_size: int) -> Iterator[Any]:
    """The ``train`` split's data files, read as Arrow record batches one at a time (local paths or
    ``hf://`` URLs, through fsspec). ``datasets``' own streaming and Arrow-cache builders keep tens of
    bytes per row while they run; reading the Parquet row groups / JSON lines here stays flat."""
    import fsspec
    import pyarrow.parquet as pq
    from datasets import load_dataset_builder

    from benchmark.formats.json_lines import json_lines_batches

    files = load_dataset_builder(hub, subset).config.data_files.get("train") or []
    if not files:
        raise BenchmarkError(f"dataset {hub}:{subset} has no train split; name a subset with one")
    for url in files:
        name = str(url).split("?")[0]
        with fsspec.open(url, "rb") as fh:
            if name.endswith(".parquet"):
                yield from pq.ParquetFile(fh).iter_batches(batch_size=batch_size)
            elif name.endswith((".jsonl", ".json")):
                yield from json_lines_batches(fh, batch_size)
            else:
                raise BenchmarkError(
                    f"{name}: only Parquet and JSON-lines triples files can be streamed; convert the subset to Parquet"
                )


def _text_rows(batches: Iterator[Any]) -> Iterator[dict[str, Any]]:
    for batch in batches:
        columns = [c for c in (*TEXT_COLUMNS, "score") if c in batch.schema.names]
        values = {c: batch.column(c).to_pylist() for c in columns}
        for i in range(batch.num_rows):
            yield {c: values[c][i] for c in columns}


def _joined(batches: Iterator[Any], hub: str, corpus_subset: str, queries_subset: str) -> Iterator[dict[str, Any]]:
    """Id triples → text triples, one record batch at a time."""
    from datasets import load_dataset

    passages = _TextsById(
        load_dataset(hub, corpus_subset, split="train"), "passage_id", "passage", f"{hub}:{corpus_subset}"
    )
    queries = _TextsById(
        load_dataset(hub, queries_subset, split="train"), "query_id", "query", f"{hub}:{queries_subset}"
    )
    for batch in batches:
        texts = {
            "query": queries(batch.column("query_id").to_pylist()),
            "positive": passages(batch.column("positive_id").to_pylist()),
            "negative": passages(batch.column("negative_id").to_pylist()),
        }
        scores = batch.column("score").to_pylist() if "score" in batch.schema.names else None
        for i in range(batch.num_rows):
            row = {k: texts[k][i] for k in TEXT_COLUMNS}
            if scores is not None:
                row["score"] = scores[i]
            yield row


def hf_triples(
    parents: dict[str, Path],
    out: Path,
    *,
    dataset: str,
    limit: int = 0,
    corpus_subset: str = "corpus",
    queries_subset: str = "queries",
    **_: Any,
) -> dict[str, Any]:
    """A Hugging Face dataset ``hub_id[:subset]``, streamed: text triples as they are, id triples joined
    to the texts of the hub dataset's ``corpus_subset`` and ``queries_subset`` (see the module doc)."""
    hub, _sep, subset = dataset.partition(":")
    batches = _arrow_batches(hub, subset or None, JOIN_BATCH)
    first = next(batches, None)
    columns = list(first.schema.names) if first is not None else []
    batches = itertools.chain([first] if first is not None else [], batches)
    record: dict[str, Any] = {"negatives": "dataset-hard-negatives", "dataset": dataset, "columns": columns}
    if all(c in columns for c in TEXT_COLUMNS):
        triples = _text_rows(batches)
    elif all(c in columns for c in ID_COLUMNS):
        triples = _joined(batches, hub, corpus_subset, queries_subset)
        record["texts_from"] = {"passages": f"{hub}:{corpus_subset}", "queries": f"{hub}:{queries_subset}"}
    else:
        raise BenchmarkError(
            f"dataset {dataset!r} has columns {', '.join(columns) or '(none)'}; training needs "
            f"{', '.join(TEXT_COLUMNS)} or the ids {', '.join(ID_COLUMNS)} (and score for MarginMSE)"
        )
    record["triples"] = _write(out, islice(triples, limit or None))
    return record


NEGATIVES_TO_MINER: dict[str, Callable[..., dict[str, Any]]] = {
    "bm25": mine_bm25,
    "official-triples": official_triples,
    "dataset-hard-negatives": hf_triples,
}
