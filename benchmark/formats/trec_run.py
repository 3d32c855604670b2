"""A ranking in TREC run format: ``run.trec``, ``QID Q0 DOCID RANK SCORE TAG`` per line.

A search stage writes it from its hits (scores to 6 decimals, tag ``benchmark``); a run made elsewhere
(``--run``) is copied as it is, so rows keep each column as written: copying or retagging a run keeps
its score strings.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import NamedTuple

from benchmark.common.atomic import write_text

RUN = "run.trec"
TAG = "benchmark"
#: what ``format_run`` prints after an integer score's digits (``{score:.6f} {tag}``): engines that print
#: integer dot products as lines themselves end each line with it
INTEGER_TAIL = f".000000 {TAG}\n"
FORMAT = "'QID Q0 DOCID RANK SCORE TAG' (6 columns separated by whitespace)"

#: query id → [(doc id, score)], best first: what a search returns and mining reads
Hits = dict[str, list[tuple[str, float]]]


class RunLine(NamedTuple):
    query_id: str
    q0: str
    doc_id: str
    rank: str
    score: str
    tag: str


class RunLineError(ValueError):
    """A non-blank line without the six columns: its number, its column count and its text."""

    def __init__(self, number: int, columns: int, line: str) -> None:
        super().__init__(f"line {number} has {columns} column(s); a TREC run line is {FORMAT}")
        self.number, self.columns, self.line = number, columns, line


def read_run_lines(path: Path | str) -> Iterator[tuple[int, RunLine]]:
    """(line number, row) of every non-blank line; a line without six columns raises ``RunLineError``."""
    with open(path, encoding="utf-8") as fh:
        for number, line in enumerate(fh, 1):
            fields = line.split()
            if not fields:
                continue
            if len(fields) != 6:
                raise RunLineError(number, len(fields), line)
            yield number, RunLine(*fields)


#: what C's atoi and atof (trec_eval's readers) read in full: ASCII digits, a sign, a point, an exponent.
#: Python's int() and float() also take '99_999' and other scripts' digits ('٥'), which atof reads as 99 and 0.
INTEGER = re.compile(r"[+-]?[0-9]+", re.ASCII)
DECIMAL = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?", re.ASCII)


def line_problem(row: RunLine) -> str | None:
    """Why a row's rank or score is not what TREC tools read (an integer; a finite decimal number, written in
    ASCII digits as C's atof reads it whole), or None."""
    if not INTEGER.fullmatch(row.rank):
        return f"rank {row.rank!r} is not an integer in ASCII digits; a TREC run line is {FORMAT}"
    if not DECIMAL.fullmatch(row.score) or not math.isfinite(float(row.score)):
        return (
            f"score {row.score!r} is not a finite number in ASCII decimal digits (as C's atof, which TREC tools use, "
            f"reads it whole); a TREC run line is {FORMAT}"
        )
    return None


def read_run(path: Path | str) -> Hits:
    run: Hits = {}
    for _, row in read_run_lines(path):
        run.setdefault(row.query_id, []).append((row.doc_id, float(row.score)))
    return run


def format_line(row: RunLine) -> str:
    return " ".join(row)


def format_run(hits: Mapping[str, list[tuple[str, float]]], tag: str = TAG) -> str:
    lines = []
    for qid, ranked in hits.items():
        for rank, (docid, score) in enumerate(ranked, 1):
            lines.append(f"{qid} Q0 {docid} {rank} {score:.6f} {tag}")
    return "\n".join(lines) + ("\n" if lines else "")


def write_run(path: Path | str, hits: Mapping[str, list[tuple[str, float]]], tag: str = TAG) -> None:
    write_text(path, format_run(hits, tag))
