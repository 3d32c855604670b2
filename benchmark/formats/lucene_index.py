"""An index stage's Lucene index: ``index/``, as Anserini's indexer writes it (what search opens)."""

from __future__ import annotations

from pathlib import Path

INDEX = "index"


def index_path(folder: Path | str) -> Path:
    return Path(folder) / INDEX
