"""How a table names its rows and pairs them: labels, row ids, and the baseline and BM25 a row is compared
with; below both the tables and the judgements against other runs, which each need them."""

from __future__ import annotations

from typing import Any

from benchmark.report.results import RowKey

BASELINE = "baseline"
PUBLISHED = "published"  # a SPLADE model trained elsewhere, evaluated as it is (never "untrained")


def system_label(system: str, backbone: str, variant: str, trained: bool) -> str:
    if system == "bm25":
        return "BM25"
    if system == "run":  # a --run file: its name
        return f"{variant} (run file)"
    if system == PUBLISHED:  # trained elsewhere: not a starting point the harness left untrained
        return f"SPLADE {backbone} (published)"
    label = f"SPLADE {backbone} {variant}"
    return label if trained else f"{label} (untrained)"


def row_id(key: RowKey) -> str:
    """A row as text (HTML attributes, CSV): system|backbone|variant|trained (a published model: published)."""
    return "|".join(
        [key[0], key[1], key[2], PUBLISHED if key[0] == PUBLISHED else "trained" if key[3] else "untrained"]
    )


def is_baseline(variant: str) -> bool:
    """``baseline``, or a shared label that includes it (``baseline = x1``)."""
    return BASELINE in (part.strip() for part in variant.split("="))


def baseline_of(key: RowKey, rows: dict[RowKey, Any]) -> RowKey | None:
    """The row a SPLADE row's Δ is taken against: the same backbone and training, unrescaled."""
    system, backbone, variant, trained = key
    if system != "splade" or is_baseline(variant):
        return None
    for other in rows:
        if other[0] == system and other[1] == backbone and other[3] == trained and is_baseline(other[2]):
            return other
    return None


def bm25_of(key: RowKey, rows: dict[RowKey, Any]) -> RowKey | None:
    """The BM25 row a SPLADE row is also tested against (same queries, no training)."""
    if key[0] == "bm25":
        return None
    return next((other for other in rows if other[0] == "bm25"), None)
