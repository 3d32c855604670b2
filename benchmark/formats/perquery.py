"""An evaluate stage's per-query values: ``perquery.tsv``, ``measure<TAB>query_id<TAB>value`` under a
header line, one row per measure and judged query (0 where the run has none, as trec_eval -c). The
significance tests and the results' ``perquery.csv.gz`` read it."""

from __future__ import annotations

import csv
from collections.abc import Iterable
from pathlib import Path
from typing import NamedTuple

from benchmark.common.atomic import write_csv

PERQUERY = "perquery.tsv"
COLUMNS = ("measure", "query_id", "value")

#: measure → query id → value
PerQuery = dict[str, dict[str, float]]


class Value(NamedTuple):
    measure: str
    query_id: str
    value: float


def perquery_path(folder: Path | str) -> Path:
    return Path(folder) / PERQUERY


def read_perquery(path: Path | str) -> PerQuery:
    out: PerQuery = {}
    with open(path, encoding="utf-8") as fh:
        rows = csv.reader(fh, delimiter="\t")
        next(rows)
        for measure, qid, value in rows:
            out.setdefault(measure, {})[qid] = float(value)
    return out


def write_perquery(path: Path | str, values: Iterable[Value]) -> None:
    write_csv(path, (v._asdict() for v in values), COLUMNS, delimiter="\t")
