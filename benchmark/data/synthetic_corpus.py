"""A synthetic BEIR folder of any size, drawn from a real collection: the scale rehearsal's data.

The words of each document are drawn from the source collection's word frequencies, and its length from
the source's document lengths; so Lucene's analyser, the tokenizer and the postings see a real
vocabulary (Zipfian, with the source's rare terms) at sizes the source does not have. Each query is
drawn from one target document (its length from the source's query lengths, each word from the target
with probability ``FROM_TARGET``, else from the collection) and judges that document relevant: every
query has an answer that BM25 can find, as in a real test collection.

The folder is a plain BEIR folder (``corpus.jsonl``, ``queries.jsonl``, ``qrels/test.tsv``), read by the
pipeline like any other; it is written once, atomically, and named by what it was drawn from.
"""

from __future__ import annotations

import json
import os
import shutil
from collections import Counter
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from benchmark.common.errors import BenchmarkError

FROM_TARGET = 0.7  # a query word comes from its target document with this probability, else from the collection
SPLIT = "test"
VERSION = 1  # bump when the drawing below changes (part of the folder's name)
CHUNK = 10_000  # documents drawn per numpy call


@dataclass(frozen=True)
class Recipe:
    """What a synthetic folder is drawn from: its name is a digest of this."""

    documents: int
    queries: int
    source: str = "beir/scifact"
    seed: int = 0

    def check(self) -> None:
        if self.documents < 1 or self.queries < 1:
            raise BenchmarkError(
                f"a synthetic collection needs at least one document and one query, got "
                f"{self.documents} documents and {self.queries} queries; pass positive sizes"
            )
        if self.queries > self.documents:
            raise BenchmarkError(
                f"{self.queries} queries need as many target documents, but the collection has "
                f"{self.documents}; pass --queries <= --docs"
            )

    def name(self) -> str:
        import hashlib

        digest = hashlib.sha256(json.dumps({**asdict(self), "version": VERSION}, sort_keys=True).encode()).hexdigest()
        return f"synthetic-{self.documents}-{digest[:10]}"


@dataclass
class Source:
    """The statistics a synthetic collection is drawn from."""

    words: np.ndarray  # the source's distinct words (object array)
    probabilities: np.ndarray  # their frequencies in the source's documents
    doc_lengths: np.ndarray  # words per source document
    query_lengths: np.ndarray  # words per source query


def read_source(name: str) -> Source:
    """Word frequencies and lengths of a dataset's documents and queries (ir_datasets id or local folder)."""
    from benchmark.data.datasets import load_source

    docs, queries, _ = load_source(name)
    counts: Counter[str] = Counter()
    doc_lengths = []
    for _, text in docs:
        tokens = text.split()
        if tokens:
            counts.update(tokens)
            doc_lengths.append(len(tokens))
    query_lengths = [len(q.split()) for q in queries.values() if q.split()]
    if not counts or not query_lengths:
        raise BenchmarkError(f"dataset {name!r} has no words to draw from; give a source with documents and queries")
    words = sorted(counts)
    freq = np.array([counts[w] for w in words], dtype=np.float64)
    return Source(np.array(words, dtype=object), freq / freq.sum(), np.array(doc_lengths), np.array(query_lengths))


def draw_documents(source: Source, n: int, rng: np.random.Generator) -> Iterator[tuple[str, list[str]]]:
    """(id, words) of ``n`` documents, in chunks of ``CHUNK`` (one numpy draw each)."""
    width = len(str(n - 1))
    for start in range(0, n, CHUNK):
        size = min(CHUNK, n - start)
        lengths = rng.choice(source.doc_lengths, size=size)
        flat = source.words[rng.choice(len(source.words), size=int(lengths.sum()), p=source.probabilities)]
        offsets = np.concatenate([[0], np.cumsum(lengths)])
        for i in range(size):
            yield f"d{start + i:0{width}d}", list(flat[offsets[i] : offsets[i + 1]])


def write(recipe: Recipe, parent: Path, progress: bool = True) -> Path:
    """The folder for ``recipe`` under ``parent``, drawn now unless it exists; its path."""
    recipe.check()
    target = Path(parent) / recipe.name()
    if (target / "corpus.jsonl").is_file():
        return target
    source = read_source(recipe.source)
    rng = np.random.default_rng(recipe.seed)
    targets = np.sort(rng.choice(recipe.documents, size=recipe.queries, replace=False))
    tmp = target.with_name(f".{target.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    (tmp / "qrels").mkdir(parents=True)
    from benchmark.common.bars import bar

    queries: list[tuple[str, str, str]] = []  # (query id, text, target document id)
    next_target = 0
    with open(tmp / "corpus.jsonl", "w", encoding="utf-8") as fh:
        for index, (doc_id, words) in enumerate(
            bar(
                draw_documents(source, recipe.documents, rng),
                total=recipe.documents,
                desc="synthetic corpus",
                unit="doc",
                disable=not progress,
                mininterval=2,
            )
        ):
            half = max(1, len(words) // 8)  # the first eighth is the title
            fh.write(
                json.dumps({"_id": doc_id, "title": " ".join(words[:half]), "text": " ".join(words[half:])}) + "\n"
            )
            if next_target < len(targets) and targets[next_target] == index:
                queries.append((f"q{next_target}", _query(words, source, rng), doc_id))
                next_target += 1
    with open(tmp / "queries.jsonl", "w", encoding="utf-8") as fh:
        for qid, text, _ in queries:
            fh.write(json.dumps({"_id": qid, "text": text}) + "\n")
    with open(tmp / "qrels" / f"{SPLIT}.tsv", "w", encoding="utf-8") as fh:
        fh.write("query-id\tcorpus-id\tscore\n")
        for qid, _, doc_id in queries:
            fh.write(f"{qid}\t{doc_id}\t1\n")
    (tmp / "RECIPE.json").write_text(
        json.dumps({**asdict(recipe), "version": VERSION, "from_target": FROM_TARGET}, indent=2) + "\n"
    )
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.replace(tmp, target)
    except OSError:  # drawn by another process meanwhile: the same recipe gives the same folder
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def _query(words: list[str], source: Source, rng: np.random.Generator) -> str:
    length = int(rng.choice(source.query_lengths))
    from_target = rng.random(length) < FROM_TARGET
    drawn = source.words[rng.choice(len(source.words), size=length, p=source.probabilities)]
    picked = [words[int(rng.integers(len(words)))] if t else str(w) for t, w in zip(from_target, drawn, strict=True)]
    return " ".join(picked)


def describe(folder: Path) -> dict[str, Any]:
    """The recipe a synthetic folder was drawn from (its RECIPE.json)."""
    return dict(json.loads((Path(folder) / "RECIPE.json").read_text()))
