"""Fixed text samples that ship with the package (sources and licences in ATTRIBUTION.md).

The ``logit-std`` match statistic and the norms diagnostics measure a backbone's MLM logits on real
retrieval text. Shipping the text keeps that number reproducible offline and independent of which
datasets a machine has cached.

    python -m benchmark.data.samples   # rebuild scifact_abstracts.jsonl from the ir_datasets cache
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from functools import lru_cache
from importlib import resources
from pathlib import Path

SCIFACT_FILE = "scifact_abstracts.jsonl"
SCIFACT_DATASET = "beir/scifact"
SCIFACT_SIZE = 256
# Abstracts longer than this (title + text, characters) are skipped: the sample stays a few hundred KB,
# and only the first tokens of each text are read anyway (benchmark.model.rescale.SAMPLE_MAX_LENGTH).
SCIFACT_MAX_CHARS = 2000


def select_scifact(docs: Iterable[tuple[str, str, str]], size: int = SCIFACT_SIZE) -> list[dict[str, str]]:
    """``size`` documents (doc_id, title, text) ordered by sha256(doc_id): a fixed, unbiased pick."""
    kept = [
        (hashlib.sha256(i.encode()).hexdigest(), i, t, x) for i, t, x in docs if len(t) + len(x) <= SCIFACT_MAX_CHARS
    ]
    kept.sort()
    return [{"doc_id": i, "title": t, "text": x} for _, i, t, x in kept[:size]]


def sample_path() -> Path:
    """The shipped sample's file (its content digest enters the ids of backbones matched on it)."""
    return Path(str(resources.files(__name__).joinpath(SCIFACT_FILE)))


@lru_cache(maxsize=1)
def scifact_abstracts() -> tuple[str, ...]:
    """The shipped SciFact abstracts as ``title + " " + text`` (as the corpus stage joins them)."""
    raw = sample_path().read_text(encoding="utf-8")
    rows = [json.loads(line) for line in raw.splitlines() if line]
    return tuple(f"{r['title']} {r['text']}" for r in rows)


def build(out: Path) -> int:
    """Write the sample from the ``beir/scifact`` corpus in the ir_datasets cache; returns the count."""
    import ir_datasets

    from benchmark.common.atomic import write_jsonl
    from benchmark.data import dataset_cache

    docs = ((d.doc_id, d.title, d.text) for d in dataset_cache.docs_iter(ir_datasets.load(SCIFACT_DATASET)))
    return write_jsonl(out, select_scifact(docs))
