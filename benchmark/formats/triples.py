"""A triples stage's training examples: ``triples.jsonl``, one JSON object a line with the texts
``query``, ``positive`` and ``negative``, and ``score`` (a teacher's margin) where the source has one.
Training streams it by path (``benchmark.training.examples``), never loading it whole."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from benchmark.common.atomic import write_jsonl

TRIPLES = "triples.jsonl"


def triples_path(folder: Path | str) -> Path:
    return Path(folder) / TRIPLES


def write_triples(path: Path | str, rows: Iterable[dict[str, Any]]) -> int:
    """Returns how many rows were written."""
    return write_jsonl(path, rows)


def read_triples(path: Path | str) -> list[dict[str, Any]]:
    """Every row in memory: for small files and tests only; training streams the file."""
    with open(path, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh]
