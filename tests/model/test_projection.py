"""The paper's rescaling, method ``projection``: the MLM-head projection × α with tied heads kept tied.

logits = α·(W h) + α·b, with α on the projection's input (a constant in the config) and the bias × α
in place. Checked on bert-tiny (real, pretrained) and tiny-modernbert: the parameter count and the
input embeddings do not move, the logits are α × the original (bit-exact for α = 2^-j, within the
float32 dot-product bound otherwise), α survives save → load through every harness loader, and the
encoder's impacts are those of the scaled model's own logits.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from benchmark.common.errors import BenchmarkError
from benchmark.model.heads import PROJECTION_SCALE, attach_projection_scale, mlm_head
from benchmark.model.loader import load_backbone
from benchmark.model.rescale import METHODS, Rescale, apply_rescale, count_parameters, measure
from benchmark.retrieval.impact_vectors import load_model
from benchmark.splade.encoder import encode, reference_encode
from benchmark.stages.backbone import prepare_backbone
from helpers.tiny_models import BERT_TINY, tiny_modernbert

TEXTS = ["the quick brown fox jumps over the lazy dog", "capital of france", "sparse retrieval with an mlm head"]
U32 = 2.0**-24  # unit roundoff of float32


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> dict[str, str]:
    return {
        "bert-tiny": str(BERT_TINY),
        "modernbert": str(tiny_modernbert(tmp_path_factory.mktemp("m"), vocab_size=4096)),
    }


def logits_and_input(model, tokenizer, texts=TEXTS) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(logits, the decoder's input h as the model's own forward gives it, the attention mask)."""
    seen = []
    decoder = model.get_output_embeddings()
    hook = decoder.register_forward_pre_hook(lambda m, args: seen.append(args[0].detach().clone()))
    enc = tokenizer(texts, padding=True, return_tensors="pt")
    try:
        with torch.inference_mode():
            out = model(input_ids=enc["input_ids"], attention_mask=enc["attention_mask"]).logits
    finally:
        hook.remove()
    return out, seen[0], enc["attention_mask"]


def test_once_is_the_papers_method_and_the_default_projection_an_extension():
    assert METHODS["once"].paper and [m for m in METHODS if METHODS[m].paper] == ["once"]
    assert all(METHODS[m].origin == "this harness's extension" for m in METHODS if m != "once")
    assert (
        Rescale().method == "once" and not METHODS["once"].adds_parameters and not METHODS["projection"].adds_parameters
    )
    assert "k = 16" in Rescale("factor", factor=1 / 16).description
    assert "the paper's method" in Rescale("factor", factor=1 / 16).description
    assert "this harness's extension" in Rescale("factor", factor=1 / 16, method="projection").description
    assert "this harness's extension" in Rescale("factor", factor=0.25, method="head-norm").description


@pytest.mark.parametrize("family", ["bert-tiny", "modernbert"])
@pytest.mark.parametrize("k", [16, 3])
def test_projection_keeps_parameters_and_embeddings_and_scales_logits(models, family, k):
    model, tokenizer = load_backbone(models[family])
    head = mlm_head(model)
    assert head.tied  # every backbone of the paper ties the projection to the input embeddings
    embeddings = model.get_input_embeddings().weight.detach().clone()
    params, state = count_parameters(model), {n: p.detach().clone() for n, p in model.named_parameters()}
    before, hidden, _ = logits_and_input(model, tokenizer)
    alpha = 1.0 / k
    record = apply_rescale(model, Rescale("factor", factor=alpha, method="projection"), tokenizer)
    after, hidden_after, _ = logits_and_input(model, tokenizer)

    assert count_parameters(model) == params == record["params_before"] == record["params_after"]
    assert mlm_head(model).tied and torch.equal(model.get_input_embeddings().weight, embeddings)
    # the body, the head transform and its LayerNorm are untouched: the decoder now sees fl(α h)
    assert torch.equal(hidden_after, hidden * alpha)
    changed = {n for n, p in model.named_parameters() if not torch.equal(p, state[n])}
    assert changed == {n for n, p in model.named_parameters() if p is mlm_head(model).bias}  # only the bias (once)
    assert record["projection_scale_after"] == alpha and record["projection_norm_after"] == pytest.approx(
        alpha * record["projection_norm_before"], rel=1e-15
    )
    assert record["head_norm_after"] == record["head_norm_before"]  # W itself is not divided

    if k == 16:  # α = 2^-4: every rounding commutes with a power of two, so the logits are α × exactly
        assert torch.equal(after, before * alpha)
    else:
        # ẑ = fl(W h + b) has |ẑ - z| <= γ_{H+1} (|W||h| + |b|) (Higham, Accuracy and Stability, §3.1), for
        # any summation order; the scaled run adds α rounded to float32, fl(α h) and fl(α b), and the
        # reference fl(α ẑ), one rounding u each: |ẑ' - fl(α ẑ)| <= α (2 γ_{H+1} + 3u) (|W||h| + |b|) + u α |ẑ|.
        w, b = mlm_head(model).weight.double(), (mlm_head(model).bias.double() / alpha)
        h_dim = w.shape[1]
        gamma = (h_dim + 1) * U32 / (1 - (h_dim + 1) * U32)
        magnitude = hidden.double().abs() @ w.abs().T + b.abs()
        bound = alpha * (2 * gamma + 3 * U32) * magnitude + U32 * alpha * before.double().abs()
        err = (after.double() - (before * alpha).double()).abs()
        assert bool((err <= bound).all()), float((err - bound).max())
        assert float(err.max()) > 0 or k == 1  # not trivially exact: the bound is what is tested


def test_projection_survives_save_and_every_loader(models, tmp_path):
    record = prepare_backbone(
        models["modernbert"], Rescale("factor", factor=1 / 16, method="projection"), tmp_path / "model"
    )
    assert record["method"] == "projection" and record["origin"] == "this harness's extension"
    config = json.loads((tmp_path / "model" / "config.json").read_text())
    assert config[PROJECTION_SCALE] == 1 / 16
    reference, tokenizer = load_backbone(models["modernbert"])
    expected = logits_and_input(reference, tokenizer)[0] / 16
    for load in (lambda: load_backbone(str(tmp_path / "model")), lambda: load_model(tmp_path / "model")):
        model, tok = load()
        assert torch.equal(logits_and_input(model, tok)[0], expected)
    from benchmark.training.max_pool import SpladeMLM

    module = SpladeMLM(str(tmp_path / "model"), chunk_size=4)
    features = module.tokenize(TEXTS)
    with torch.inference_mode():
        pooled = module(features)["sentence_embedding"]
    model, tok = load_backbone(str(tmp_path / "model"))
    torch.testing.assert_close(pooled, reference_encode(model, tok, TEXTS, max_length=512), rtol=0, atol=1e-6)
    # loading twice, or attaching again, applies α once
    assert attach_projection_scale(model) == 1 / 16
    assert torch.equal(logits_and_input(model, tok)[0], expected)


def test_encoder_impacts_equal_the_scaled_models_own_logits(models, tmp_path):
    prepare_backbone(models["bert-tiny"], Rescale("factor", factor=1 / 16, method="projection"), tmp_path / "model")
    model, tokenizer = load_model(tmp_path / "model")
    vectors = encode(model, tokenizer, TEXTS, max_length=64, batch_size=2)
    dense = reference_encode(model, tokenizer, TEXTS, max_length=64).numpy()  # the model's own (scaled) logits
    for (ids, weights), row in zip(vectors, dense):
        # same support; weights within the float32 band tests/splade/test_splade.py's encoder-vs-reference check
        # uses (the encoder's exact head and the reference's BLAS sum in different orders)
        assert np.array_equal(ids, np.flatnonzero(row))
        np.testing.assert_allclose(weights, row[ids], rtol=1e-5, atol=1e-5)
    assert sum(len(ids) for ids, _ in vectors) > 30  # not vacuous
    unscaled = reference_encode(*load_backbone(models["bert-tiny"]), TEXTS, max_length=64).numpy()
    assert (dense < unscaled).sum() > 0 and (dense <= unscaled).all()  # log1p(relu(z/16)) <= log1p(relu(z))


def test_a_model_that_lost_its_scale_is_refused(models, tmp_path):
    from transformers import AutoModelForMaskedLM, AutoTokenizer

    prepare_backbone(models["bert-tiny"], Rescale("factor", factor=1 / 16, method="projection"), tmp_path / "model")
    plain = AutoModelForMaskedLM.from_pretrained(tmp_path / "model").eval()  # not a harness loader: no α hook
    with pytest.raises(BenchmarkError, match="mlm_projection_scale = 0.0625 but the loaded MLM head applies 1"):
        encode(plain, AutoTokenizer.from_pretrained(tmp_path / "model"), TEXTS, max_length=16)


def test_match_statistics_see_the_projection_scale(models):
    model, tokenizer = load_backbone(models["bert-tiny"])
    frob = measure("frobenius", model)
    record = apply_rescale(
        model, Rescale("match", match=frob / 8, match_stat="frobenius", method="projection"), tokenizer
    )
    assert record["factor"] == pytest.approx(1 / 8, rel=1e-15)
    assert record["stat_after"] == pytest.approx(frob / 8, rel=1e-15)


def test_record_tag_names_method_factor_and_matched_statistic(models):
    from benchmark.model.rescale import record_tag

    model, tokenizer = load_backbone(models["bert-tiny"])
    assert record_tag(apply_rescale(model, Rescale(), tokenizer)) == ""
    assert (
        record_tag(apply_rescale(model, Rescale("factor", factor=1 / 16, method="projection"), tokenizer))
        == "projection ×0.0625 = 1/16, extension"
    )
    model, tokenizer = load_backbone(models["bert-tiny"])
    assert (
        record_tag(apply_rescale(model, Rescale("factor", factor=4, method="head-norm"))) == "head-norm ×4, extension"
    )
    model, tokenizer = load_backbone(models["bert-tiny"])
    frob = measure("frobenius", model)
    record = apply_rescale(
        model, Rescale("match", match=frob / 8, match_stat="frobenius", method="projection"), tokenizer
    )
    assert record_tag(record) == f"projection, frobenius {frob:.4g} → {frob / 8:.4g} (×0.125), extension"
