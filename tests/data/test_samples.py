"""The shipped SciFact sample: rebuilt from the offline corpus it is byte for byte the same, with its attribution."""

from __future__ import annotations

import json
import random
from importlib import resources

from benchmark.data.samples import SCIFACT_FILE, SCIFACT_MAX_CHARS, SCIFACT_SIZE, scifact_abstracts, select_scifact


def _shipped() -> list[dict[str, str]]:
    text = resources.files("benchmark.data.samples").joinpath(SCIFACT_FILE).read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines()]


def test_selection_rebuilds_the_shipped_file():
    import ir_datasets

    docs = [(d.doc_id, d.title, d.text) for d in ir_datasets.load("beir/scifact").docs_iter()]
    assert len(docs) == 5183
    random.Random(0).shuffle(docs)  # the pick depends on the ids only, not on the corpus order
    assert select_scifact(docs) == _shipped()


def test_sample_shape_and_attribution():
    rows = _shipped()
    assert len(rows) == SCIFACT_SIZE == len({r["doc_id"] for r in rows})
    assert all(len(r["title"]) + len(r["text"]) <= SCIFACT_MAX_CHARS for r in rows)
    assert scifact_abstracts()[0] == f"{rows[0]['title']} {rows[0]['text']}"
    folder = resources.files("benchmark.data.samples")
    assert len(folder.joinpath(SCIFACT_FILE).read_bytes()) < 400_000  # "a few hundred KB at most"
    attribution = folder.joinpath("ATTRIBUTION.md").read_text(encoding="utf-8")
    assert "ODC-By 1.0" in attribution and "github.com/allenai/scifact" in attribution
