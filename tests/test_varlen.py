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

from benchmark import splade, varlen
from benchmark.backbone import resolve_backbone
from benchmark.encode import load_model
from benchmark.errors import BenchmarkError

TEXTS = ["cells divide", " ".join(["protein folding in the cell"] * 9), " ".join(["energy"] * 120),
         " ".join(["the immune system trains on vaccines and pathogens"] * 30), "insulin and glucose"]


@pytest.fixture(scope="module")
def models():
    folder = resolve_backbone("tiny-modernbert")
    return {attn: load_model(folder, attn) for attn in ("varlen", "sdpa", "eager")}


def _hidden(model, tokenizer):
    tokens = splade._tokenize(tokenizer, TEXTS, 256)
    rows = np.arange(len(tokens))
    hook = splade._decoder(model).register_forward_pre_hook(splade._capture)
    try:
        with torch.inference_mode():
            hidden, mask = splade._hidden_batch(model, tokens, rows, tokenizer.pad_token_id, torch.device("cpu"), 1)
    finally:
        hook.remove()
    return hidden, mask.bool(), [len(t) for t in tokens]


@pytest.fixture(scope="module")
def tolerance(models) -> float:
    """Packed and padded attention sum in other orders, as eager and SDPA do: 4× their gap, and at
    least 16 float32 units of the largest hidden value (should the two stock forwards agree exactly)."""
    sdpa, mask, _ = _hidden(*models["sdpa"])
    eager, _, _ = _hidden(*models["eager"])
    gap = float((eager - sdpa)[mask].abs().max())
    return max(4 * gap, 16 * 2.0**-24 * float(sdpa[mask].abs().max()))


def test_packed_hidden_states_equal_the_padded_ones(models, tolerance):
    packed, mask, lengths = _hidden(*models["varlen"])
    padded, padded_mask, _ = _hidden(*models["sdpa"])
    assert models["varlen"][0].config._attn_implementation == "varlen"
    assert max(lengths) > 2 * 32 + 1 and min(lengths) < 32  # longer and shorter than the window
    assert torch.equal(mask, padded_mask)
    assert float((packed - padded)[mask].abs().max()) <= tolerance


def test_packed_encode_gives_the_padded_vectors(models, tolerance):
    """|Δ logit| ≤ ‖Δh‖·‖w_j‖ ≤ √K·max|Δh|·max‖w_j‖, and log1p∘relu is 1-Lipschitz."""
    model, tokenizer = models["varlen"]
    weight = splade._decoder(model).weight.detach()
    bound = tolerance * weight.shape[1] ** 0.5 * float(weight.norm(dim=1).max())
    dense = []
    for m, tok in (models["varlen"], models["sdpa"]):
        vectors = splade.encode(m, tok, TEXTS, max_length=256, batch_size=2)
        rows = np.zeros((len(TEXTS), weight.shape[0]))
        for i, (ids, ws) in enumerate(vectors):
            rows[i, ids] = ws
        dense.append(rows)
    assert dense[1].any(axis=1).all()  # every document has terms
    assert np.abs(dense[0] - dense[1]).max() <= bound


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
    bad = dataclasses.replace(suite, encode=dataclasses.replace(suite.encode, attn_implementation="flash",
                                                                precision="fp8"))
    problems = " | ".join(bad.problems())
    assert "encode.attn_implementation = 'flash'; valid: sdpa, eager" in problems and "varlen" in problems
    assert "encode.precision = 'fp8'; valid: float32, bfloat16" in problems


def test_flash_runs_in_the_autocast_type_and_refuses_float32():
    """The CUDA branch's dtype rule, checked on CPU tensors under CPU autocast."""
    q32 = torch.zeros(4, 2, 8)
    assert varlen.flash_dtype(q32.bfloat16()) == torch.bfloat16
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert varlen.flash_dtype(q32) == torch.bfloat16  # rotary leaves float32 q under autocast
    with pytest.raises(BenchmarkError, match="no torch.float32 kernel.*precision = \"bfloat16\""):
        varlen.flash_dtype(q32)
