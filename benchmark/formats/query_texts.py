"""A topics stage's queries: ``queries.tsv``, ``query_id<TAB>text`` per line (text on one line)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import NamedTuple

from benchmark.common.atomic import write_lines

QUERIES = "queries.tsv"


class Query(NamedTuple):
    query_id: str
    text: str


def read_queries(path: Path | str) -> Iterator[Query]:
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            qid, _, text = line.rstrip("\n").partition("\t")
            yield Query(qid, text)


def write_queries(path: Path | str, queries: Iterable[Query]) -> int:
    return write_lines(path, (f"{q.query_id}\t{q.text}" for q in queries))
