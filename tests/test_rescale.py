"""Init-time MLM-head rescaling: exact logits scaling, untouched embeddings, save/load."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
from _tiny_models import BERT_TINY, tiny_bert, tiny_modernbert
from safetensors.torch import load_file

from benchmark.backbone import load_backbone
from benchmark.errors import BenchmarkError
from benchmark.heads import mlm_head
from benchmark.rescale import Rescale, apply_rescale, prepare_backbone

TEXTS = ["the quick brown fox jumps over the lazy dog", "capital of france"]


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("models")
    return {"bert": tiny_bert(root), "modernbert": tiny_modernbert(root, vocab_size=4096)}


def logits(model, tokenizer, texts=TEXTS) -> torch.Tensor:
    enc = tokenizer(texts, padding=True, return_tensors="pt")
    with torch.inference_mode():
        return model(input_ids=enc["input_ids"], attention_mask=enc["attention_mask"]).logits


# --- the spec ---------------------------------------------------------------------------------


@pytest.mark.parametrize("bad", [0, 0.0, -1.5, float("nan"), float("inf"), "2", True, None])
def test_bad_factor_names_value(bad):
    with pytest.raises(BenchmarkError) as err:
        Rescale("factor", factor=bad)
    assert str(err.value).startswith("rescale factor must be a positive")
    assert str(err.value).endswith(f"number, got {bad!r}")


def test_bad_match_and_modes():
    with pytest.raises(BenchmarkError) as err:
        Rescale("scale", factor=2.0)
    assert str(err.value) == "unknown rescale mode 'scale'; valid: factor, match, none"
    with pytest.raises(BenchmarkError, match="rescale match norm must be a positive finite number, got -3.0"):
        Rescale("match", match="-3")
    with pytest.raises(BenchmarkError, match="mode 'none' takes no factor"):
        Rescale(factor=0.5)
    with pytest.raises(BenchmarkError, match="not both"):
        Rescale.from_options(factor=0.5, match="bert-tiny")


def test_labels_and_parsing():
    assert Rescale().label == "none"
    assert Rescale.from_options(factor=0.25).label == "x0.25"
    assert Rescale.from_options(factor=2, scale_bias=False).label == "x2-nobias"
    assert Rescale.from_options(match="12.5") == Rescale("match", match=12.5)
    assert Rescale.from_options(match="12.5").label == "match:12.5"
    assert Rescale.from_options(match="bert-base-uncased").label == "match:bert-base-uncased"
    assert Rescale("factor", factor=3).factor == 3.0 and isinstance(Rescale("factor", factor=3).factor, float)


# --- applying it ------------------------------------------------------------------------------


@pytest.mark.parametrize("family", ["bert", "modernbert"])
def test_logits_scale_exactly(models, family):
    model, tokenizer = load_backbone(str(models[family]))
    embeddings = model.get_input_embeddings().weight.detach().clone()
    before = logits(model, tokenizer)
    record = apply_rescale(model, Rescale("factor", factor=0.25))
    # A power of two is exact in floating point: every logit is exactly a quarter.
    assert torch.equal(logits(model, tokenizer), before * 0.25)
    assert torch.equal(model.get_input_embeddings().weight, embeddings)
    assert record["tied_before"] and record["untied"] and not mlm_head(model).tied
    assert model.config.tie_word_embeddings is False
    assert record["head_norm_after"] == record["head_norm_before"] * 0.25
    assert record["embedding_norm"] == pytest.approx(float(torch.linalg.norm(embeddings.double())), rel=1e-15)


def test_logits_scale_float64_any_factor(models):
    model, tokenizer = load_backbone(str(models["modernbert"]))
    model.double()
    before = logits(model, tokenizer)
    apply_rescale(model, Rescale("factor", factor=0.3))
    torch.testing.assert_close(logits(model, tokenizer), before * 0.3, rtol=1e-12, atol=1e-15)


def test_keep_bias_scales_projection_only(models):
    model, tokenizer = load_backbone(str(models["bert"]))
    bias = mlm_head(model).bias.detach().clone()
    before = logits(model, tokenizer)
    record = apply_rescale(model, Rescale("factor", factor=0.5, scale_bias=False))
    assert torch.equal(mlm_head(model).bias, bias)
    assert record["bias_norm_after"] == record["bias_norm_before"]
    torch.testing.assert_close(logits(model, tokenizer) - bias, (before - bias) * 0.5, rtol=1e-5, atol=1e-6)


def test_factor_one_is_identity(models):
    model, tokenizer = load_backbone(str(models["bert"]))
    state = {k: v.clone() for k, v in model.state_dict().items()}
    before = logits(model, tokenizer)
    record = apply_rescale(model, Rescale("factor", factor=1.0))
    assert record["factor"] == 1.0 and not record["untied"] and mlm_head(model).tied
    assert all(torch.equal(v, state[k]) for k, v in model.state_dict().items())
    assert torch.equal(logits(model, tokenizer), before)


def test_untied_head_scales_in_place(tmp_path):
    model, _ = load_backbone(str(tiny_bert(tmp_path, tie=False)))
    weight = mlm_head(model).weight
    expected = weight.detach().clone() * 4
    record = apply_rescale(model, Rescale("factor", factor=4))
    assert mlm_head(model).weight is weight and torch.equal(weight, expected)
    assert not record["tied_before"] and not record["untied"]


def test_match_number(models):
    model, _ = load_backbone(str(models["modernbert"]))
    record = apply_rescale(model, Rescale("match", match=10.0))
    assert record["target_norm"] == 10.0
    assert record["factor"] == 10.0 / record["head_norm_before"]
    assert record["head_norm_after"] == pytest.approx(10.0, rel=1e-6)


def test_match_reference_backbone(models, monkeypatch):
    monkeypatch.setenv("BENCHMARK_MODEL_DIR", str(BERT_TINY.parent))
    # bert-tiny ties its head to the word embeddings: its head norm is sqrt(sum w^2) of that matrix.
    emb = load_file(BERT_TINY / "model.safetensors")["bert.embeddings.word_embeddings.weight"].double()
    expected = math.sqrt(float((emb**2).sum()))
    model, _ = load_backbone(str(models["modernbert"]))
    record = apply_rescale(model, Rescale("match", match="bert-tiny"))
    assert record["target_norm"] == pytest.approx(expected, rel=1e-12)
    assert record["head_norm_after"] == pytest.approx(expected, rel=1e-6)


@pytest.mark.parametrize("family", ["bert", "modernbert"])
def test_prepare_backbone_round_trip(tmp_path, models, family):
    original, tokenizer = load_backbone(str(models[family]))
    before = logits(original, tokenizer)
    out = tmp_path / "backbone"
    record = prepare_backbone(str(models[family]), Rescale("factor", factor=0.25), out)
    assert record["backbone"] == f"tiny-{family}" and record["source"] == str(models[family])
    assert record["model_type"] == family and record["factor"] == 0.25
    assert record["rescale"] == {"mode": "factor", "factor": 0.25, "match": None, "scale_bias": True}
    # load_backbone re-checks that no head weight is missing (e.g. BERT's decoder.bias alias).
    reloaded, tok2 = load_backbone(str(out))
    assert torch.equal(logits(reloaded, tok2), before * 0.25)
    assert torch.equal(reloaded.get_input_embeddings().weight, original.get_input_embeddings().weight)
    head = mlm_head(reloaded)
    assert not head.tied
    assert all(torch.equal(p, head.bias) for _, p in head.bias_params())
    assert sorted(p.name for p in out.iterdir()) == ["config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"]


def test_prepare_real_bert_tiny(tmp_path, monkeypatch):
    monkeypatch.setenv("BENCHMARK_MODEL_DIR", str(BERT_TINY.parent))
    record = prepare_backbone("bert-tiny", Rescale("factor", factor=0.25), tmp_path / "bb")
    saved = load_file(tmp_path / "bb" / "model.safetensors")
    source = load_file(BERT_TINY / "model.safetensors")
    emb = source["bert.embeddings.word_embeddings.weight"]
    assert torch.equal(saved["bert.embeddings.word_embeddings.weight"], emb)
    assert torch.equal(saved["cls.predictions.decoder.weight"], emb * 0.25)
    assert torch.equal(saved["cls.predictions.decoder.bias"], source["cls.predictions.bias"] * 0.25)
    assert torch.equal(saved["cls.predictions.bias"], source["cls.predictions.bias"] * 0.25)
    assert record["backbone"] == "bert-tiny" and record["vocab_size"] == 30522 and record["hidden_size"] == 128
    assert record["head_norm_before"] == pytest.approx(math.sqrt(float((emb.double() ** 2).sum())), rel=1e-12)


def test_prepare_refuses_foreign_folder(tmp_path, models):
    out = tmp_path / "notes"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    with pytest.raises(BenchmarkError, match="exists and is not a saved backbone"):
        prepare_backbone(str(models["bert"]), Rescale(), out)
    assert (out / "keep.txt").read_text() == "mine"
    assert [p.name for p in tmp_path.iterdir()] == ["notes"]  # no temp folder left behind
