"""MLM-head rescaling: the spec, the three methods, the match statistics."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from benchmark.common.errors import BenchmarkError
from benchmark.model.heads import mlm_head
from benchmark.model.loader import load_backbone
from benchmark.model.rescale import METHODS, STATISTICS, Rescale, apply_rescale, logit_std, measure, token_logit_std
from helpers.tiny_models import BERT_TINY, tiny_bert, tiny_modernbert

TEXTS = ["the quick brown fox jumps over the lazy dog", "capital of france"]
FAMILIES = ["bert", "modernbert"]
U64 = 2.0**-53  # unit roundoff of float64


@pytest.fixture(autouse=True)
def short_sample(monkeypatch):
    """logit-std reads 16 of the shipped abstracts here (the full 256 cost ~10 s a pass on 2 cores);
    every property tested (homogeneity, matching) holds for any fixed sample."""
    from benchmark.data import samples

    full = samples.scifact_abstracts()
    monkeypatch.setattr(samples, "scifact_abstracts", lambda: full[:16])


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("models")
    return {"bert": tiny_bert(root), "modernbert": tiny_modernbert(root, vocab_size=4096)}


def logits(model, tokenizer, texts=TEXTS) -> torch.Tensor:
    enc = tokenizer(texts, padding=True, return_tensors="pt")
    with torch.inference_mode():
        return model(input_ids=enc["input_ids"], attention_mask=enc["attention_mask"]).logits


def state(model) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def pretrained_like_head_norm(model) -> None:
    """Random init leaves the head LayerNorm at γ = 1, β = 0; give it gains and shifts to scale."""
    norm = mlm_head(model).norm
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        norm.weight.copy_(torch.rand(norm.weight.shape, generator=generator) * 6 + 0.5)
        if norm.bias is not None:
            norm.bias.copy_(torch.randn(norm.bias.shape, generator=generator) * 0.5)


# --- the spec ---------------------------------------------------------------------------------


@pytest.mark.parametrize("bad", [0, 0.0, -1.5, float("nan"), float("inf"), "2", True, None])
def test_bad_factor_names_value(bad):
    with pytest.raises(BenchmarkError) as err:
        Rescale("factor", factor=bad)
    assert str(err.value).startswith("rescale factor must be a positive")
    assert str(err.value).endswith(f"number, got {bad!r}")


def test_bad_mode_method_statistic_are_one_line():
    with pytest.raises(BenchmarkError) as err:
        Rescale("scale", factor=2.0)
    assert str(err.value) == "unknown rescale mode 'scale'; valid: factor, match, none"
    with pytest.raises(BenchmarkError) as err:
        Rescale("factor", factor=2.0, method="headnorm")
    assert str(err.value) == (
        "unknown rescale method 'headnorm' (did you mean 'head-norm'?); valid: head-norm, once, projection, tied, "
        "untie. "
        "Set method in [splade.rescale] or pass one of these"
    )
    with pytest.raises(BenchmarkError) as err:
        Rescale("match", match="bert-tiny", match_stat="l2")
    assert str(err.value) == (
        "unknown rescale match statistic 'l2'; valid: frobenius, logit-std, row-rms. "
        "Set match_stat in [splade.rescale] or pass one of these"
    )
    with pytest.raises(BenchmarkError, match="rescale match target must be a positive finite number, got -3.0"):
        Rescale("match", match="-3")
    with pytest.raises(BenchmarkError, match="mode 'none' takes no factor"):
        Rescale(factor=0.5)
    with pytest.raises(BenchmarkError, match="not both"):
        Rescale.from_options(factor=0.5, match="bert-tiny")


def test_registries():
    assert list(METHODS) == ["once", "projection", "head-norm", "tied", "untie"]
    assert [m for m in METHODS if METHODS[m].paper] == ["once"]
    assert [m for m in METHODS if METHODS[m].adds_parameters] == ["untie"]
    assert list(STATISTICS) == ["frobenius", "row-rms", "logit-std"]
    assert Rescale().method == "once" and Rescale().match_stat == "logit-std"


def test_labels_name_the_method():
    assert Rescale().label == "none"
    assert Rescale.from_options(factor=0.25).label == "x0.25@once"
    assert Rescale.from_options(factor=0.25, method="head-norm").label == "x0.25@head-norm"
    assert Rescale.from_options(factor=2, scale_bias=False, method="tied").label == "x2-nobias@tied"
    assert Rescale.from_options(factor=0.25, method="untie").label == "x0.25@untie+params"
    assert Rescale.from_options(match="12.5") == Rescale("match", match=12.5)
    assert Rescale.from_options(match="12.5", match_stat="frobenius").label == "match:12.5/frobenius@once"
    assert (
        Rescale.from_options(match="bert-base-uncased", method="head-norm").label
        == "match:bert-base-uncased/logit-std@head-norm"
    )
    assert Rescale("factor", factor=3).factor == 3.0 and isinstance(Rescale("factor", factor=3).factor, float)
    assert "adds vocab × hidden parameters" in Rescale("factor", factor=0.5, method="untie").description
    assert "no parameter added" in Rescale("factor", factor=0.5).description


def test_one_rule_from_factor_and_match_to_a_spec():
    """The planner's 'rescaled' arm and the head diagnostics build their spec by the same rule: a factor gives
    mode factor, a match target mode match, neither the default (the suite's), both a one-line error."""
    suite = ("factor", 1 / 16, "bert-base-uncased")
    assert Rescale.from_options(default=suite) == Rescale("factor", factor=0.0625)  # the match of mode factor dropped
    assert Rescale.from_options(default=("match", 0.0625, "bert-base-uncased"), match_stat="frobenius") == Rescale(
        "match", match="bert-base-uncased", match_stat="frobenius"
    )
    assert Rescale.from_options(0.25, default=suite, method="tied") == Rescale("factor", factor=0.25, method="tied")
    assert Rescale.from_options(match="3", default=suite) == Rescale("match", match=3.0)
    assert Rescale.from_options() == Rescale()
    with pytest.raises(BenchmarkError) as err:
        Rescale.from_options(0.5, "3", default=suite)
    assert str(err.value) == (
        "give either a rescale factor (0.5) or a match target (3), not both; drop --rescale-factor or --match-norm"
    )


def test_one_tag_for_a_rescale_as_planned_and_as_recorded():
    from benchmark.model.rescale import rescale_tag

    assert rescale_tag("once", "0.0625") == rescale_tag("once", 1 / 16) == "once ×0.0625 = 1/16"
    assert rescale_tag("projection", "0.25") == "projection ×0.25 = 1/4, extension"
    assert rescale_tag("head-norm", "4") == "head-norm ×4, extension"
    assert rescale_tag("untie", "0.0625") == "untie ×0.0625 = 1/16, untied copy +vocab × hidden parameters, extension"
    assert (
        rescale_tag("untie", 0.0625, params_added=2_000)
        == "untie ×0.0625 = 1/16, untied copy +2,000 parameters, extension"
    )
    assert (
        rescale_tag("once", 0.0625, params_added=0, embedding_scale_median=0.5, encoder_drift=0.25)
        == "once ×0.0625 = 1/16, shared matrix (input ×0.5, output 25 %)"
    )
    assert (
        rescale_tag("once", 0.0625, params_added=0, embedding_scale_median=0.5)
        == "once ×0.0625 = 1/16, shared matrix (input ×0.5)"
    )
    assert rescale_tag("head-norm", "match:bert-base-uncased") == "head-norm match:bert-base-uncased, extension"
    assert (
        rescale_tag("once", 17.5, "match", match_stat="logit-std", stat_before=0.1523, stat_after=2.665)
        == "once, logit-std 0.1523 → 2.665 (×17.5), extension"
    )  # a matched factor is this harness's extension
    assert rescale_tag("", "0.5") == rescale_tag("once", 1.0) == rescale_tag("once", 0.5, "none") == ""
    assert rescale_tag("untie", 1.0) == "untie ×1, untied copy +vocab × hidden parameters, extension"


def test_identity_and_canonical_form(tmp_path):
    assert Rescale().is_identity_for("bert-tiny")
    # untie × 1 is the untied unscaled control: not the baseline, a model of its own
    assert not Rescale("factor", factor=1, method="untie").is_identity_for("bert-tiny")
    assert Rescale("factor", factor=1, method="untie").canonical_for("bert-tiny") == Rescale(
        "factor", factor=1.0, method="untie"
    )
    assert Rescale("factor", factor=1, method="once").canonical_for("bert-tiny") == Rescale()
    assert not Rescale("factor", factor=0.5).is_identity_for("bert-tiny")
    assert Rescale("match", match="bert-base-uncased").is_identity_for("bert-base-uncased")
    assert Rescale("match", match="google-bert/bert-base-uncased").is_identity_for("bert-base-uncased")
    assert not Rescale("match", match="bert-base-uncased").is_identity_for("modernbert-base")
    assert not Rescale("match", match=3.0).is_identity_for("bert-tiny")  # known only after measuring
    (tmp_path / "a").mkdir()
    (tmp_path / "b").symlink_to(tmp_path / "a", target_is_directory=True)
    assert Rescale("match", match=str(tmp_path / "a")).is_identity_for(str(tmp_path / "b"))
    assert not Rescale("match", match=str(tmp_path / "a")).is_identity_for("bert-tiny")
    # Every identity spec has one canonical form, so equal models get one stage.
    for spec in (
        Rescale(),
        Rescale("factor", factor=1.0, method="tied", scale_bias=False),
        Rescale("match", match="bert-tiny", match_stat="frobenius"),
    ):
        assert spec.canonical_for("bert-tiny") == Rescale()
    assert Rescale("factor", factor=0.5, match_stat="frobenius").canonical_for("x") == Rescale("factor", factor=0.5)
    assert Rescale("match", match="google-bert/bert-base-uncased").canonical_for("ettin-17m") == Rescale(
        "match", match="bert-base-uncased"
    )


# --- head-norm: exact α × logits, nothing added, nothing untied ---------------------------------


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("alpha", [0.25, 4.0])
def test_head_norm_power_of_two_is_bit_exact(models, family, dtype, alpha):
    model, tokenizer = load_backbone(str(models[family]))
    model.to(dtype)
    pretrained_like_head_norm(model)
    before_state, before = state(model), logits(model, tokenizer)
    record = apply_rescale(model, Rescale("factor", factor=alpha, method="head-norm"))
    # Multiplying γ, β and the bias by a power of two scales every rounded intermediate exactly.
    assert torch.equal(logits(model, tokenizer), before * alpha)
    head = mlm_head(model)
    norm = head.layout.norm
    changed = {k for k, v in model.state_dict().items() if not torch.equal(v, before_state[k])}
    assert changed == {f"{norm}.weight", *([f"{norm}.bias"] if head.norm.bias is not None else []), *head.layout.biases}
    assert head.tied and record["tied_before"] and record["tied_after"]
    assert record["params_after"] == record["params_before"] == sum(p.numel() for p in model.parameters())
    assert not record["adds_parameters"]
    assert record["head_norm_after"] == record["head_norm_before"]
    assert record["head_gain_after"] == record["head_gain_before"] * alpha
    assert record["bias_norm_after"] == record["bias_norm_before"] * alpha


def test_modernbert_head_norm_has_no_shift(models):
    model, _ = load_backbone(str(models["modernbert"]))
    assert mlm_head(model).norm is model.head.norm and model.head.norm.bias is None  # norm_bias = False
    assert mlm_head(model).bias is model.decoder.bias  # decoder_bias = True: scaled with γ


def _decoder_magnitude(model, tokenizer) -> torch.Tensor:
    """M = Σ_k |W_jk| m_k + |b_j| with m_k = (|x_k| + |μ|)·rstd·|γ_k| + |β_k| at every token (float64).

    x is the head LayerNorm's input. m_k bounds every term the LayerNorm's affine step can form,
    in any association ((x−μ)·rstd·γ + β, or x·(rstd·γ) + (β − μ·rstd·γ)).
    """
    head = mlm_head(model)
    norm = head.norm
    seen = []
    hook = norm.register_forward_pre_hook(lambda module, args: seen.append(args[0]))
    logits(model, tokenizer)
    hook.remove()
    (x,) = seen
    mu = x.mean(dim=-1, keepdim=True)
    rstd = torch.rsqrt(x.var(dim=-1, correction=0, keepdim=True) + norm.eps)
    m = (x.abs() + mu.abs()) * rstd * norm.weight.abs()
    if norm.bias is not None:
        m = m + norm.bias.abs()
    return m @ head.weight.abs().T + head.bias.abs()


@pytest.mark.parametrize("family", FAMILIES)
def test_head_norm_any_factor_within_float64_rounding(models, family):
    model, tokenizer = load_backbone(str(models[family]))
    model.double()
    pretrained_like_head_norm(model)
    alpha = 0.3
    before = logits(model, tokenizer)
    magnitude = _decoder_magnitude(model, tokenizer)
    apply_rescale(model, Rescale("factor", factor=alpha, method="head-norm"))
    hidden = model.config.hidden_size
    # Bound, u = 2^-53 and θ_n = n·u/(1 − n·u): the encoder, μ and rstd are bit-identical in both
    # runs (the encoder is untouched). The rescaled run uses fl(αγ), fl(αβ), fl(αb), each within u
    # of exact. Each affine output takes ≤ 4 roundings from the shared x, μ, rstd, so it is within
    # θ_4·m_k of its exact value (m_k as in _decoder_magnitude); each logit is an (H+1)-term dot
    # product, within θ_{H+1}·M_j of exact. Baseline and rescaled are each that close to their
    # exact values, which differ by at most u·α·M_j, so
    #     |z' − α z| ≤ α·M·(2θ_{H+1} + 2θ_4 + u)(1 + u) ≤ 1.01·(2H + 11)·u·α·M.
    # Dropping α from γ, β or b would move logits by O(M), 10^13 times more than this.
    tolerance = 1.01 * (2 * hidden + 11) * U64 * alpha * magnitude
    deviation = (logits(model, tokenizer) - before * alpha).abs()
    assert bool((deviation <= tolerance).all()), float((deviation / tolerance).max())
    assert float(deviation.max()) > 0  # 0.3 is not a power of two: some rounding shows


@pytest.mark.parametrize("family", FAMILIES)
def test_scale_bias_false_keeps_decoder_bias(models, family):
    model, tokenizer = load_backbone(str(models[family]))
    model.double()
    pretrained_like_head_norm(model)
    bias = mlm_head(model).bias.detach().clone()
    before = logits(model, tokenizer)
    magnitude = _decoder_magnitude(model, tokenizer)
    record = apply_rescale(model, Rescale("factor", factor=0.5, scale_bias=False, method="head-norm"))
    assert torch.equal(mlm_head(model).bias, bias)
    assert record["bias_norm_after"] == record["bias_norm_before"]
    # 0.5 is a power of two, so W·(αy) is exactly α·W·y; each run then rounds the (H+1)-term sum
    # with b (≤ θ_{H+1}·M, M as in _decoder_magnitude) and the subtraction of b (≤ u·M):
    # |(z' − b) − α(z − b)| ≤ 2(θ_{H+1} + u)·M ≤ 1.01·(2H + 4)·u·M.
    tolerance = 1.01 * (2 * model.config.hidden_size + 4) * U64 * magnitude
    deviation = ((logits(model, tokenizer) - bias) - (before - bias) * 0.5).abs()
    assert bool((deviation <= tolerance).all()), float((deviation / tolerance).max())


# --- tied: the shared matrix in place --------------------------------------------------------------


@pytest.mark.parametrize("family", FAMILIES)
def test_tied_scales_shared_matrix_in_place(models, family):
    model, tokenizer = load_backbone(str(models[family]))
    embeddings = model.get_input_embeddings().weight
    original = embeddings.detach().clone()
    record = apply_rescale(model, Rescale("factor", factor=0.25, method="tied"))
    head = mlm_head(model)
    assert head.weight is embeddings and torch.equal(embeddings, original * 0.25)
    assert record["params_after"] == record["params_before"] and record["tied_after"]
    assert record["embedding_norm_after"] == record["embedding_norm_before"] * 0.25
    assert record["head_norm_after"] == record["head_norm_before"] * 0.25
    assert record["head_gain_after"] == record["head_gain_before"]


def test_tied_modernbert_embedding_norm_absorbs_the_scale_up_to_eps(tmp_path):
    """With ε = 0 the embedding LayerNorm removes α exactly: hidden states unchanged, logits exactly α×."""
    import json

    path = tiny_modernbert(tmp_path, vocab_size=4096)
    config = json.loads((path / "config.json").read_text())
    (path / "config.json").write_text(json.dumps({**config, "norm_eps": 0.0}))
    model, tokenizer = load_backbone(str(path))
    enc = tokenizer(TEXTS, padding=True, return_tensors="pt")
    with torch.inference_mode():
        hidden = model.model(**enc).last_hidden_state
    before = logits(model, tokenizer)
    apply_rescale(model, Rescale("factor", factor=0.25, method="tied"))
    with torch.inference_mode():
        assert torch.equal(model.model(**enc).last_hidden_state, hidden)
    # mean, variance and 1/sqrt of a power-of-two-scaled input scale exactly (α² = 2^-4).
    assert torch.equal(logits(model, tokenizer), before * 0.25)


def test_tied_modernbert_embedding_output_scales_by_the_eps_ratio(models):
    """LN(αe) = LN(e)·r per token, r = sqrt(σ²+ε)/sqrt(σ²+ε/α²): the only trace of α that is left."""
    model, tokenizer = load_backbone(str(models["modernbert"]))
    model.double()
    ids = tokenizer(TEXTS, padding=True, return_tensors="pt")["input_ids"]
    embeddings = model.model.embeddings
    eps = embeddings.norm.eps
    with torch.inference_mode():
        words = embeddings.tok_embeddings(ids)
        before = embeddings(input_ids=ids)
        apply_rescale(model, Rescale("factor", factor=0.25, method="tied"))
        after = embeddings(input_ids=ids)
    var = words.var(dim=-1, correction=0, keepdim=True)
    ratio = torch.sqrt((var + eps) / (var + eps / 0.25**2))
    assert float(ratio.min()) < 0.99  # ε = 1e-5 against σ² ≈ 0.02² of the random embeddings: a visible move
    # Both runs compute (e − μ)·rstd·γ from bit-identical e − μ scaled by 2^-2 (exact), so they differ
    # only through rstd: ≤ 3 roundings each side, plus the ratio's own H-term variance (θ_H) and
    # 3 roundings: ≤ (H + 12)·u relative; 4× margin.
    hidden = model.config.hidden_size
    torch.testing.assert_close(after, before * ratio, rtol=4 * (hidden + 12) * U64, atol=0.0)


def test_tied_bert_changes_the_input_sum(models):
    model, tokenizer = load_backbone(str(models["bert"]))
    enc = tokenizer(TEXTS, padding=True, return_tensors="pt")
    emb = model.bert.embeddings
    positions, types = (
        emb.position_embeddings.weight.detach().clone(),
        emb.token_type_embeddings.weight.detach().clone(),
    )
    with torch.inference_mode():
        before = emb(input_ids=enc["input_ids"], token_type_ids=enc["token_type_ids"])
        apply_rescale(model, Rescale("factor", factor=0.25, method="tied"))
        after = emb(input_ids=enc["input_ids"], token_type_ids=enc["token_type_ids"])
    # word + position + type: only the first term scales, so LayerNorm cannot divide α out.
    assert torch.equal(emb.position_embeddings.weight, positions) and torch.equal(
        emb.token_type_embeddings.weight, types
    )
    assert float(torch.linalg.norm(after - before) / torch.linalg.norm(before)) > 0.1


# --- untie: the ablation that adds a matrix --------------------------------------------------------


@pytest.mark.parametrize("family", FAMILIES)
def test_untie_adds_a_matrix_and_scales_exactly(models, family):
    model, tokenizer = load_backbone(str(models[family]))
    embeddings = model.get_input_embeddings().weight.detach().clone()
    before = logits(model, tokenizer)
    record = apply_rescale(model, Rescale("factor", factor=0.25, method="untie"))
    assert torch.equal(logits(model, tokenizer), before * 0.25)
    assert torch.equal(model.get_input_embeddings().weight, embeddings)
    assert record["tied_before"] and not record["tied_after"] and not mlm_head(model).tied
    assert model.config.tie_word_embeddings is False and record["adds_parameters"]
    vocab, hidden = embeddings.shape
    # BERT's bias alias (cls.predictions.bias) becomes a tensor of its own too, as transformers counts it.
    alias = vocab if family == "bert" else 0
    assert record["params_after"] == record["params_before"] + vocab * hidden + alias


def test_untie_on_an_untied_head_scales_in_place(tmp_path):
    model, _ = load_backbone(str(tiny_bert(tmp_path, tie=False)))
    weight = mlm_head(model).weight
    expected = weight.detach().clone() * 4
    record = apply_rescale(model, Rescale("factor", factor=4, method="untie"))
    assert mlm_head(model).weight is weight and torch.equal(weight, expected)
    assert not record["tied_before"] and record["params_after"] == record["params_before"]


@pytest.mark.parametrize("family", FAMILIES)
def test_untie_times_one_is_an_untied_unscaled_copy(models, family):
    """The control that separates untying from scaling: its own copy (vocab × (hidden + 1) more on BERT,
    whose bias alias becomes a tensor too), the baseline's logits bit for bit at step 0, the embeddings
    no longer the decoder."""
    model, tokenizer = load_backbone(str(models[family]))
    embeddings = model.get_input_embeddings().weight
    before = logits(model, tokenizer)
    record = apply_rescale(model, Rescale("factor", factor=1.0, method="untie"))
    assert torch.equal(logits(model, tokenizer), before)
    assert not mlm_head(model).tied and mlm_head(model).weight is not embeddings
    assert torch.equal(mlm_head(model).weight, embeddings)
    vocab, hidden = embeddings.shape
    alias = vocab if family == "bert" else 0
    assert record["params_after"] == record["params_before"] + vocab * hidden + alias
    assert record["label"] == "x1@untie+params" and record["factor"] == 1.0
    from benchmark.model.rescale import record_tag

    assert record_tag(record) == f"untie ×1, untied copy +{vocab * hidden + alias:,} parameters, extension"


@pytest.mark.parametrize("method", [m for m in METHODS if not METHODS[m].adds_parameters])
def test_factor_one_is_identity_for_every_method(models, method):
    model, tokenizer = load_backbone(str(models["bert"]))
    before_state, before = state(model), logits(model, tokenizer)
    record = apply_rescale(model, Rescale("factor", factor=1.0, method=method))
    assert record["factor"] == 1.0 and record["tied_after"] and mlm_head(model).tied
    assert all(torch.equal(v, before_state[k]) for k, v in model.state_dict().items())
    assert torch.equal(logits(model, tokenizer), before)


def test_record_keys(models):
    model, tokenizer = load_backbone(str(models["modernbert"]))
    record = apply_rescale(model, Rescale("factor", factor=0.5, method="tied"), tokenizer)
    assert {"method", "factor", "params_before", "params_after", "tied_before", "tied_after"} <= set(record)
    assert record["method"] == "tied" and record["label"] == "x0.5@tied" and record["mode"] == "factor"
    assert record["stat_before"] is record["target"] is record["stat_after"] is record["match_stat"] is None


# --- statistics and matching -----------------------------------------------------------------------


def test_logit_std_reads_the_whole_shipped_sample(models, monkeypatch):
    from benchmark.data import samples
    from benchmark.model.rescale import SAMPLE_MAX_LENGTH, sample_logits

    monkeypatch.undo()  # the full sample, as the match statistic defines it
    model, tokenizer = load_backbone(str(models["modernbert"]))
    masks = [mask for _, mask in sample_logits(model, tokenizer)]
    assert len(samples.scifact_abstracts()) == sum(len(m) for m in masks) == 256
    assert max(m.shape[1] for m in masks) == SAMPLE_MAX_LENGTH  # abstracts are longer: truncated


def test_token_logit_std_by_hand():
    batch = torch.tensor([[[0.0, 2.0], [1.0, 1.0]], [[3.0, 5.0], [9.0, 9.0]]])
    mask = torch.tensor([[1, 1], [1, 0]])
    # population std over the vocabulary per real token: 1, 0, 1; the padding token does not count.
    assert token_logit_std(batch, mask) == (2.0, 3)


def test_weight_statistics_by_hand(models):
    model, _ = load_backbone(str(models["modernbert"]))
    weight = mlm_head(model).weight.detach().double()
    frob = math.sqrt(float((weight**2).sum()))
    # Two float64 sums of n = 262k squares in different orders: each within θ_n ≈ n·u = 2.9e-11.
    assert measure("frobenius", model) == pytest.approx(frob, rel=6e-11)
    assert measure("row-rms", model) == pytest.approx(frob / 64, rel=6e-11)  # vocab 4096 = 64²
    with pytest.raises(BenchmarkError, match="'logit-std' needs the backbone's tokenizer"):
        measure("logit-std", model)


@pytest.mark.parametrize("method", list(METHODS))
@pytest.mark.parametrize("stat", list(STATISTICS))
def test_match_number(models, method, stat):
    model, tokenizer = load_backbone(str(models["modernbert"]))
    model.double()
    current = measure(stat, model, tokenizer)
    record = apply_rescale(model, Rescale("match", match=2 * current, method=method, match_stat=stat), tokenizer)
    assert record["match_stat"] == stat and record["stat_before"] == current and record["target"] == 2 * current
    assert record["factor"] == 2.0
    if stat != "logit-std":
        # head-norm does not touch the decoder matrix, which is all a weight statistic reads.
        assert record["stat_after"] == (current if method == "head-norm" else 2 * current)
    elif method in ("tied", "once"):
        # The encoder's input moved: each token's embedding-LayerNorm output is multiplied by
        # r = sqrt((σ²+ε)/(σ²+ε/α²)) (test above). ModernBERT is pre-norm with a final LayerNorm, so
        # no more than that relative move of its input reaches the logits' spread.
        eps, words = model.model.embeddings.norm.eps, model.get_input_embeddings().weight.detach() / 2
        var = words.var(dim=-1, correction=0)
        move = float((torch.sqrt((var + eps) / (var + eps / 4)) - 1).abs().max())
        assert 0 < abs(record["stat_after"] / (2 * current) - 1) <= move
    else:
        assert record["stat_after"] == 2 * current  # logits exactly 2×, and std(2z) = 2·std(z) exactly


def test_match_logit_std_of_a_reference_backbone(tmp_path, models):
    reference = tiny_modernbert(tmp_path, vocab_size=2500, name="reference", seed=3)
    ref_model, ref_tok = load_backbone(str(reference))
    target = logit_std(ref_model, ref_tok)
    model, tokenizer = load_backbone(str(models["modernbert"]))
    model.double()
    record = apply_rescale(model, Rescale("match", match=str(reference), method="head-norm"), tokenizer)
    assert record["target"] == target and record["factor"] == target / record["stat_before"]
    # float64 logits are α× the original within 1.01·(2H + 11)·u·α·M (the head-norm bound above),
    # and a std moves by at most the largest move of its inputs. For Gaussian-like rows
    # M/std ≈ √H·2/π ≈ 5 (H = 64), so ≈ 1e-13 relative; 1e-10 leaves a 10³ margin for heavier rows.
    assert record["stat_after"] == pytest.approx(target, rel=1e-10)


def test_match_frobenius_of_real_bert_tiny(models, monkeypatch):
    monkeypatch.setenv("BENCHMARK_MODEL_DIR", str(BERT_TINY.parent))
    # bert-tiny ties its head to the word embeddings: its head norm is sqrt(sum w^2) of that matrix.
    emb = load_file(BERT_TINY / "model.safetensors")["bert.embeddings.word_embeddings.weight"].double()
    expected = math.sqrt(float((emb**2).sum()))
    model, _ = load_backbone(str(models["modernbert"]))
    record = apply_rescale(model, Rescale("match", match="bert-tiny", method="tied", match_stat="frobenius"))
    # Two float64 sums of n = 3.9M squares in different orders: each within θ_n ≈ n·u = 4.3e-10.
    assert record["target"] == pytest.approx(expected, rel=9e-10)
    # The matrix is float32: each of its 262k entries is rounded after × α (≤ 2^-24 relative each).
    assert record["head_norm_after"] == pytest.approx(expected, rel=2**-23)
