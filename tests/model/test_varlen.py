"""Packed (varlen) encoder forwards: the same hidden states and vectors as the padded forward.

tiny-modernbert has ModernBERT's layer pattern (a global layer, then sliding windows of ±32 tokens),
and the texts here run from 4 to 250 tokens, so the window, the restart of positions at every
document and the packing boundaries are all exercised. Off by one in the window, the hidden
states move by ~1e-3, three orders above the tolerance.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from benchmark.common.errors import BenchmarkError
from benchmark.model import varlen
from benchmark.model.loader import resolve_backbone
from benchmark.model.synthetic import ensure
from benchmark.retrieval.impact_vectors import load_model
from benchmark.splade.encoder import encode
from benchmark.splade.forward import _decoder
from helpers.forwards import dense, hidden_states, rounding_tolerance, vector_bound

TEXTS = [
    "cells divide",
    " ".join(["protein folding in the cell"] * 9),
    " ".join(["energy"] * 120),
    " ".join(["the immune system trains on vaccines and pathogens"] * 30),
    "insulin and glucose",
]


@pytest.fixture(scope="module")
def models():
    folder = ensure("tiny-modernbert")  # built into the cache when no earlier test has
    return {attn: load_model(folder, attn) for attn in ("varlen", "sdpa", "eager")}


def _hidden(model, tokenizer):
    return hidden_states(model, tokenizer, TEXTS)


@pytest.fixture(scope="module")
def tolerance(models) -> float:
    """Packed and padded attention sum in other orders, as eager and SDPA do (``rounding_tolerance``)."""
    sdpa, mask, _ = _hidden(*models["sdpa"])
    return rounding_tolerance(sdpa, _hidden(*models["eager"])[0], mask)


def test_packed_hidden_states_equal_the_padded_ones(models, tolerance):
    packed, mask, lengths = _hidden(*models["varlen"])
    padded, padded_mask, _ = _hidden(*models["sdpa"])
    assert models["varlen"][0].config._attn_implementation == "varlen"
    assert max(lengths) > 2 * 32 + 1 and min(lengths) < 32  # longer and shorter than the window
    assert torch.equal(mask, padded_mask)
    assert float((packed - padded)[mask].abs().max()) <= tolerance


def test_packed_encode_gives_the_padded_vectors(models, tolerance):
    """Within ``vector_bound`` of the hidden states' tolerance."""
    weight = _decoder(models["varlen"][0]).weight.detach()
    rows = [
        dense(encode(m, tok, TEXTS, max_length=256, batch_size=2), weight.shape[0])
        for m, tok in (models["varlen"], models["sdpa"])
    ]
    assert rows[1].any(axis=1).all()  # every document has terms
    assert np.abs(rows[0] - rows[1]).max() <= vector_bound(tolerance, weight)


def test_varlen_refuses_what_it_cannot_pack(models):
    with pytest.raises(BenchmarkError, match="packs modernbert models, not 'bert'.*sdpa"):
        load_model(resolve_backbone("bert-tiny"), "varlen")
    model, tokenizer = models["varlen"]
    batch = tokenizer(TEXTS[:2], padding=True, return_tensors="pt")
    with pytest.raises(BenchmarkError, match="needs a packed batch"):
        model(**batch)


def test_suite_names_the_valid_attention_implementations():
    import dataclasses

    from benchmark.suites import load_suite

    suite = load_suite("smoke")
    bad = dataclasses.replace(
        suite, encode=dataclasses.replace(suite.encode, attn_implementation="flash", precision="fp8")
    )
    problems = " | ".join(bad.problems())
    assert "encode.attn_implementation = 'flash'; valid: sdpa, eager" in problems and "varlen" in problems
    assert "encode.precision = 'fp8'; valid: float32, bfloat16" in problems


def test_flash_runs_in_the_autocast_type_and_refuses_float32():
    """The CUDA branch's dtype rule, checked on CPU tensors under CPU autocast."""
    q32 = torch.zeros(4, 2, 8)
    assert varlen.flash_dtype(q32.bfloat16()) == torch.bfloat16
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert varlen.flash_dtype(q32) == torch.bfloat16  # rotary leaves float32 q under autocast
    with pytest.raises(BenchmarkError, match='no torch.float32 kernel.*precision = "bfloat16"'):
        varlen.flash_dtype(q32)
