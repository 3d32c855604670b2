"""The paper's operation, ``once``: the MLM head's weights × α once, then trained as they are.

On the ModernBERT and Ettin shapes the decoder is the word-embedding matrix behind a LayerNorm that sees
it alone, so scaling the shared matrix moves the encoder's input only through that LayerNorm's ε (a
derived, per-row exact drift); BERT sums its embeddings first, so its arm is an untied scaled copy. The
first AdamW step then moves the rescaled weights by the same amount per element as the unscaled ones
(Adam ignores the gradient's scale), so in logit space ``once`` moves 1/α times as far as the constant
multiplier ``projection``, and as far as an untied scaled copy.
"""

from __future__ import annotations

import math

import pytest
import torch

from benchmark.model.checkpoints import ARCHITECTURES
from benchmark.model.heads import MODEL_TYPE_TO_HEAD, mlm_head
from benchmark.model.loader import backbone_architecture, load_backbone
from benchmark.model.rescale import Rescale, apply_rescale, count_parameters, record_tag, tie_handling

ALPHA = 1 / 16
TEXTS = [
    "what causes the tides",
    "the moon's gravity pulls the oceans",
    "insulin regulates blood sugar",
    "cells absorb glucose when insulin signals them",
]


@pytest.mark.parametrize("key", ["tiny-modernbert", "tiny-ettin", "bert-tiny"])
def test_registry_facts_match_the_loaded_architecture(key: str) -> None:
    """What the planner decides from (tied decoder, word embedding normalised alone) is what the model
    does: the decoder is the input embedding tensor, and only ModernBERT's embeddings are norm(word)."""
    arch = backbone_architecture(key)
    model, _ = load_backbone(key)
    head = mlm_head(model)
    assert arch is not None and arch.tied == head.tied is True
    assert arch.model_type == model.config.model_type
    embeddings = model.get_input_embeddings()
    ids = torch.tensor([[5, 17, 99]])
    if MODEL_TYPE_TO_HEAD[arch.model_type].embeddings == "word":
        norm = head.embedding_norm
        expected = norm(embeddings(ids))
        assert torch.equal(model.model.embeddings(input_ids=ids), expected)  # eval: dropout is the identity
        assert tie_handling(key) == "shared"
    else:
        assert head.embedding_norm is None and tie_handling(key) == "untie"
    for name in ARCHITECTURES:  # the registered checkpoints: every one of the paper's is tied
        assert ARCHITECTURES[name].tied and ARCHITECTURES[name].model_type in MODEL_TYPE_TO_HEAD


@pytest.mark.parametrize("key", ["tiny-modernbert", "tiny-ettin"])
def test_the_shared_matrix_moves_the_input_only_in_size_and_within_the_recorded_drift(key: str) -> None:
    """Scaling the shared matrix by α multiplies the embedding LayerNorm's output of a row x of variance σ²
    by exactly r = √((σ² + ε)/(σ² + ε/α²)) and keeps its direction (ModernBERT's LayerNorm has no shift β).
    Measured on every vocabulary row in float64, the ratio equals r to 1e-9 relative (float64 rounding of
    the norms is ~1e-15) and the cosine is 1 to 1e-12. r is far from 1 on these random-weight models (rows
    at the 0.02 std of an initialisation: σ² ≈ 4e-4 < ε/α² = 2.56e-3); what reaches the encoder's output,
    through pre-norm layers that see the direction, is small: recorded, and below 1 % on both shapes
    (0.74 % and 0.47 % measured at α = 1/16)."""
    model, tokenizer = load_backbone(key)
    model.double()
    head = mlm_head(model)
    norm = head.embedding_norm
    rows = head.weight.detach().clone()
    before = norm(rows)
    record = apply_rescale(model, Rescale("factor", factor=ALPHA), tokenizer)
    after = norm(head.weight.detach())
    assert head.tied and torch.equal(head.weight, model.get_input_embeddings().weight)  # one matrix, scaled
    var = rows.var(dim=1, correction=0)
    r = torch.sqrt((var + norm.eps) / (var + norm.eps / ALPHA**2))
    torch.testing.assert_close(after.norm(dim=1) / before.norm(dim=1), r, rtol=1e-9, atol=0)
    cosine = torch.nn.functional.cosine_similarity(after, before, dim=1)
    torch.testing.assert_close(cosine, torch.ones_like(cosine), rtol=0, atol=1e-12)
    assert record["embedding_scale_min"] == pytest.approx(float(r.min()), rel=1e-12)
    assert record["embedding_scale_median"] == pytest.approx(float(torch.quantile(r, 0.5)), rel=1e-9)
    assert record["embedding_scale_median"] < 0.5  # far from 1 here: ε/α² dominates rows of initialisation scale
    assert record["params_after"] == record["params_before"]  # no parameter added
    assert 0 < record["encoder_drift"] < 0.01
    assert record_tag(record).startswith("once ×0.0625 = 1/16, shared matrix (input ×0.")


def _splade_loss(model, tokenizer) -> torch.Tensor:
    enc = tokenizer(TEXTS, padding=True, return_tensors="pt")
    logits = model(**enc).logits * enc["attention_mask"][..., None]
    reps = torch.log1p(torch.relu(logits)).amax(dim=1)
    q, d = reps[0::2], reps[1::2]
    return torch.nn.functional.cross_entropy(q @ d.T, torch.arange(len(q))) + 1e-3 * (reps.mean(0) ** 2).sum()


def _first_step(key: str, spec: Rescale) -> tuple[float, int, float]:
    """(relative change of the effective projection α·W after one AdamW step, non-zero gradient elements of
    the decoder matrix, ‖effective projection‖)."""
    from benchmark.model.heads import projection_scale

    torch.manual_seed(0)
    model, tokenizer = load_backbone(key)
    model.train()
    for module in model.modules():  # no dropout: the three runs must see the same forward
        if isinstance(module, torch.nn.Dropout):
            module.p = 0.0
    apply_rescale(model, spec)
    head = mlm_head(model)
    scale = projection_scale(model)
    before = head.weight.detach().clone()
    # ε far below every gradient element: the first step is then lr · sign(g) per element (m̂ = g, √v̂ = |g|)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, eps=1e-30, weight_decay=0.0)
    _splade_loss(model, tokenizer).backward()
    nonzero = int((head.weight.grad != 0).sum())
    opt.step()
    delta = (head.weight.detach() - before).double() * scale
    effective = float(before.double().norm()) * scale
    return float(delta.norm()) / effective, nonzero, effective


def test_first_adam_step_moves_the_rescaled_weights_as_an_untied_copy_and_k_times_the_multiplier() -> None:
    """tiny ModernBERT, α = 1/16. Derived: with ε ≪ |g|, every element with a gradient moves by lr, so the
    effective projection's relative change is lr · √n / ‖αW‖ (n: elements with a gradient), within float32
    rounding of ‖·‖ (1e-5 relative). projection moves W by the same lr per element but its effective
    projection is α·W: α times the relative change of once (the gradient supports agree within 1 %). The untied copy
    sees only the head's gradient
    (the shared matrix also takes the embedding path's rows: n_copy ≤ n_proj ≤ n_copy + tokens · H), so
    r_once / r_copy = √(n_once / n_copy) ∈ [1, √(1 + (tokens · H + |n_once − n_proj|) / n_copy)]."""
    key = "tiny-modernbert"
    r_once, n_once, w_once = _first_step(key, Rescale("factor", factor=ALPHA, method="once"))
    r_proj, n_proj, w_proj = _first_step(key, Rescale("factor", factor=ALPHA, method="projection"))
    r_copy, n_copy, w_copy = _first_step(key, Rescale("factor", factor=ALPHA, method="untie"))
    lr = 1e-3
    assert r_once == pytest.approx(lr * math.sqrt(n_once) / w_once, rel=1e-5)
    assert r_proj == pytest.approx(ALPHA * lr * math.sqrt(n_proj) / w_proj, rel=1e-5)
    assert r_copy == pytest.approx(lr * math.sqrt(n_copy) / w_copy, rel=1e-5)
    # the same logits at step 0 up to the input drift, which moves a few near-zero logits across relu's kink
    # (here 10 of ~9,700 vocabulary rows), so the supports agree to within 1 %; the readings then differ
    # by 1/α · √(n_once / n_proj) in logit space
    assert w_once == pytest.approx(w_proj, rel=1e-6) and abs(n_once - n_proj) <= 0.01 * n_proj
    assert r_once / r_proj == pytest.approx(math.sqrt(n_once / n_proj) / ALPHA, rel=2e-5)
    assert 0.99 / ALPHA < r_once / r_proj < 1.01 / ALPHA
    model, tokenizer = load_backbone(key)
    tokens = len(set(tokenizer(TEXTS)["input_ids"][0] + sum(tokenizer(TEXTS)["input_ids"][1:], [])))
    hidden = model.config.hidden_size
    # same logits as the copy (projection): the shared matrix adds the embedding rows of the input tokens
    assert n_copy <= n_proj <= n_copy + tokens * hidden
    extra = tokens * hidden + abs(n_once - n_proj)
    assert 1.0 <= r_once / r_copy <= math.sqrt(1 + extra / n_copy) * (1 + 1e-5)


def test_parameter_count_per_arm() -> None:
    """once and projection add no parameter; the untied copy adds exactly vocab × hidden, and its row says so."""
    for method, added in (("once", 0), ("projection", 0), ("untie", 1)):
        model, _ = load_backbone("tiny-modernbert")
        before = count_parameters(model)
        record = apply_rescale(model, Rescale("factor", factor=ALPHA, method=method))
        size = model.config.vocab_size * model.config.hidden_size
        assert count_parameters(model) - before == added * size
        assert (f"+{size:,} parameters" in record_tag(record)) == bool(added)
