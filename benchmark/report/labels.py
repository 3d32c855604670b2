"""How a table names its rows and pairs them: labels, row ids, and the baseline and BM25 a row is compared
with; below both the tables and the judgements against other runs, which each need them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from benchmark.pipeline.systems import BM25, RowKey, is_baseline, system

__all__ = ["baseline_of", "bm25_of", "is_baseline", "row_id", "system_label", "trained_here"]


def system_label(name: str, backbone: str, variant: str, trained: bool) -> str:
    """A row's name, as its system gives it."""
    return system(name).label(RowKey(name, backbone, variant, trained))


def row_id(key: RowKey) -> str:
    """A row as text (HTML attributes, CSV): system|backbone|variant|trained (a published model: published)."""
    key = RowKey(*key)
    return "|".join([key.system, key.backbone, key.variant, system(key.system).state(key)])


def trained_here(key: RowKey) -> bool:
    """A row of a system that trains, trained: what the training judgements, outcomes and plots are about."""
    return system(key[0]).trains and bool(key[3])


def baseline_of(key: RowKey, rows: Mapping[RowKey, Any]) -> RowKey | None:
    """The row a row's Δ is taken against, for a system that has one: the same backbone and training,
    unrescaled."""
    name, backbone, variant, trained = key
    if not system(name).has_baseline or is_baseline(variant):
        return None
    for other in rows:
        if other[0] == name and other[1] == backbone and other[3] == trained and is_baseline(other[2]):
            return other
    return None


def bm25_of(key: RowKey, rows: Mapping[RowKey, Any]) -> RowKey | None:
    """The BM25 row a row is also tested against (same queries, no training), for a system that is."""
    if not system(key[0]).against_bm25:
        return None
    return next((other for other in rows if other[0] == BM25), None)
