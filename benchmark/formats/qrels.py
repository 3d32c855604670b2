"""A topics stage's relevance judgements: ``qrels.txt`` in TREC format (``query_id 0 doc_id relevance``)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from benchmark.common.atomic import write_lines

QRELS = "qrels.txt"


@dataclass(frozen=True)
class Qrel:
    query_id: str
    doc_id: str
    relevance: int


def read_qrels(path: Path | str) -> Iterator[Qrel]:
    """Every judgement in file order; blank lines are skipped (as ir_measures reads qrels)."""
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                qid, _, docid, relevance = line.split()
                yield Qrel(qid, docid, int(relevance))


def write_qrels(path: Path | str, qrels: Iterable[Qrel]) -> int:
    return write_lines(path, (f"{q.query_id} 0 {q.doc_id} {q.relevance}" for q in qrels))
