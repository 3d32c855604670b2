"""Backbone registry, resolution, loading guards and the MLM-head table."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from benchmark.common.errors import BenchmarkError
from benchmark.model.checkpoints import BACKBONES, registered_key
from benchmark.model.heads import MODEL_TYPE_TO_HEAD, head_layout, mlm_head
from benchmark.model.loader import backbone_key, load_backbone, resolve_backbone
from benchmark.model.rescale import METHODS, Rescale, apply_rescale
from benchmark.stages.backbone import prepare_backbone
from helpers.tiny_models import BERT_TINY, tiny_bert, tiny_modernbert

MODEL_DIR = str(BERT_TINY.parent)


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("models")
    return {"bert": tiny_bert(root), "modernbert": tiny_modernbert(root, vocab_size=4096)}


def test_registry_is_a_table_of_hub_ids():
    assert dict(BACKBONES.items()) == {
        "bert-tiny": "prajjwal1/bert-tiny",
        "bert-base-uncased": "google-bert/bert-base-uncased",
        "modernbert-base": "answerdotai/ModernBERT-base",
        "modernbert-large": "answerdotai/ModernBERT-large",
        "ettin-17m": "jhu-clsp/ettin-encoder-17m",
        "ettin-32m": "jhu-clsp/ettin-encoder-32m",
        "ettin-68m": "jhu-clsp/ettin-encoder-68m",
        "ettin-150m": "jhu-clsp/ettin-encoder-150m",
        "ettin-400m": "jhu-clsp/ettin-encoder-400m",
        "ettin-1b": "jhu-clsp/ettin-encoder-1b",
    }


def test_resolve_prefers_model_dir_then_hub(monkeypatch):
    monkeypatch.setenv("BENCHMARK_MODEL_DIR", MODEL_DIR)
    assert resolve_backbone("bert-tiny") == str(BERT_TINY)
    assert resolve_backbone("prajjwal1/bert-tiny") == str(BERT_TINY)  # registered hub id → same folder
    assert resolve_backbone("ettin-17m") == "jhu-clsp/ettin-encoder-17m"  # not in the folder → hub id
    assert resolve_backbone("someone/some-mlm") == "someone/some-mlm"
    monkeypatch.delenv("BENCHMARK_MODEL_DIR")
    assert resolve_backbone("bert-tiny") == "prajjwal1/bert-tiny"


def test_registered_key_needs_no_filesystem():
    assert registered_key("bert-base-uncased") == registered_key("google-bert/bert-base-uncased") == "bert-base-uncased"
    assert registered_key("someone/some-mlm") is None and registered_key("/runs/x/bert-tiny") is None


def test_backbone_key_labels():
    assert backbone_key("ettin-150m") == "ettin-150m"
    assert backbone_key("jhu-clsp/ettin-encoder-150m") == "ettin-150m"
    assert backbone_key("someone/some-mlm") == "some-mlm"
    assert backbone_key("/runs/x/backbone/") == "backbone"


def test_unknown_backbone_lists_valid_keys():
    with pytest.raises(BenchmarkError) as err:
        resolve_backbone("modernbert-bse")
    msg = str(err.value)
    assert msg.startswith(
        "unknown backbone 'modernbert-bse' (did you mean 'modernbert-base'?); valid: bert-base-uncased, bert-tiny, "
        "ettin-150m"
    )
    assert "BENCHMARK_MODEL_DIR" in msg and "\n" not in msg


def test_missing_folder_is_named(tmp_path):
    with pytest.raises(BenchmarkError, match="backbone folder .*nope' does not exist"):
        load_backbone(str(tmp_path / "nope"))


def test_load_real_bert_tiny(monkeypatch):
    monkeypatch.setenv("BENCHMARK_MODEL_DIR", MODEL_DIR)
    model, tokenizer = load_backbone("bert-tiny")
    assert type(model).__name__ == "BertForMaskedLM"
    assert not model.training
    assert {p.dtype for p in model.parameters()} == {torch.float32}
    assert len(tokenizer) == model.config.vocab_size == 30522
    head = mlm_head(model)
    assert head.tied and head.decoder is model.cls.predictions.decoder
    assert head.weight.shape == (30522, 128)
    # The bias really comes from the checkpoint's cls.predictions.bias (not a fresh zero vector).
    bias = load_file(BERT_TINY / "model.safetensors")["cls.predictions.bias"]
    assert torch.equal(head.bias.detach(), bias)


def test_load_via_model_dir_key(tmp_path, models, monkeypatch):
    (tmp_path / "modernbert-base").symlink_to(models["modernbert"], target_is_directory=True)
    monkeypatch.setenv("BENCHMARK_MODEL_DIR", str(tmp_path))
    model, tokenizer = load_backbone("modernbert-base")
    assert model.config.model_type == "modernbert"
    assert mlm_head(model).decoder is model.decoder
    assert len(tokenizer) == 4096


def test_headless_checkpoint_raises(tmp_path):
    from transformers import BertConfig, BertModel

    BertModel(
        BertConfig(vocab_size=2200, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32)
    ).save_pretrained(tmp_path / "headless")
    with pytest.raises(
        BenchmarkError, match=r"has no MLM head: the checkpoint is a BertModel; SPLADE needs a \*ForMaskedLM"
    ):
        load_backbone(str(tmp_path / "headless"))


@pytest.mark.parametrize(
    "family, dropped",
    [("bert", "cls.predictions.transform.dense.weight"), ("modernbert", "head.dense.weight")],
)
def test_missing_head_weights_raise(tmp_path, models, family, dropped):
    import shutil

    path = tmp_path / family
    shutil.copytree(models[family], path)
    tensors = load_file(path / "model.safetensors")
    del tensors[dropped]
    save_file(tensors, path / "model.safetensors", metadata={"format": "pt"})
    with pytest.raises(BenchmarkError) as err:
        load_backbone(str(path))
    assert str(err.value) == (
        f"backbone {str(path)!r} ({path}): MLM-head weights missing from the checkpoint and newly "
        f"initialised: {dropped}; use a checkpoint saved from a *ForMaskedLM model"
    )


def test_unmapped_model_type_lists_supported(tmp_path):
    from transformers import GPT2Config

    GPT2Config(n_layer=1, n_embd=8, n_head=2).save_pretrained(tmp_path / "gpt2")
    with pytest.raises(
        BenchmarkError, match=r"unknown model_type 'gpt2'.*valid: bert, distilbert, modernbert, roberta"
    ):
        load_backbone(str(tmp_path / "gpt2"))


def test_folder_without_config(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(BenchmarkError, match="is not a loadable checkpoint"):
        load_backbone(str(tmp_path / "empty"))


def test_head_table_matches_transformers_modules():
    """Every mapped layout resolves on a real (tiny) model of its family, decoder = output embeddings."""
    from transformers import AutoModelForMaskedLM, BertConfig, DistilBertConfig, ModernBertConfig, RobertaConfig

    configs = {
        "bert": BertConfig(
            vocab_size=50, hidden_size=8, num_hidden_layers=1, num_attention_heads=2, intermediate_size=16
        ),
        "modernbert": ModernBertConfig(
            vocab_size=50,
            hidden_size=8,
            intermediate_size=16,
            num_hidden_layers=1,
            num_attention_heads=2,
            pad_token_id=0,
            bos_token_id=1,
            eos_token_id=2,
            cls_token_id=1,
            sep_token_id=2,
        ),
        "roberta": RobertaConfig(
            vocab_size=50,
            hidden_size=8,
            num_hidden_layers=1,
            num_attention_heads=2,
            intermediate_size=16,
            pad_token_id=1,
        ),
        "distilbert": DistilBertConfig(vocab_size=50, dim=8, n_layers=1, n_heads=2, hidden_dim=16),
    }
    assert set(MODEL_TYPE_TO_HEAD) == set(configs)
    for model_type, config in configs.items():
        model = AutoModelForMaskedLM.from_config(config)
        head = mlm_head(model)
        assert head.layout is head_layout(config)
        assert head.decoder is model.get_output_embeddings()
        assert head.weight.shape == (50, 8)
        assert len(head.transform) == len(head.layout.transform)
        assert head.bias_params()[0][1] is head.bias
        # The norm is the head's last LayerNorm: its output is exactly what the decoder reads.
        seen = {}
        head.norm.register_forward_hook(lambda module, args, out: seen.setdefault("norm", out))  # noqa: B023
        head.decoder.register_forward_pre_hook(lambda module, args: seen.setdefault("decoder", args[0]))  # noqa: B023
        with torch.no_grad():
            model(input_ids=torch.tensor([[3, 4, 5]]))
        assert isinstance(head.norm, torch.nn.LayerNorm) and torch.equal(seen["norm"], seen["decoder"])
        assert (head.norm.bias is None) == (model_type == "modernbert")  # ModernBERT: norm_bias = False


def test_foreign_tokenizer_raises(tmp_path):
    from helpers.tiny_models import save_tokenizer

    path = tiny_modernbert(tmp_path, vocab_size=4096)
    save_tokenizer(path, 30522)  # a tokenizer with more ids than the MLM head has rows
    with pytest.raises(BenchmarkError, match="tokenizer has 30522 tokens but the MLM head only 4096"):
        load_backbone(str(path))


# --- the backbone stage: rescale, save, reload --------------------------------------------------------

TEXTS = ["the quick brown fox jumps over the lazy dog", "capital of france"]


def _logits(model, tokenizer) -> torch.Tensor:
    enc = tokenizer(TEXTS, padding=True, return_tensors="pt")
    with torch.inference_mode():
        return model(input_ids=enc["input_ids"], attention_mask=enc["attention_mask"]).logits


@pytest.mark.parametrize("method", list(METHODS))
@pytest.mark.parametrize("family", ["bert", "modernbert"])
def test_prepare_backbone_round_trip(tmp_path, models, family, method):
    """save_pretrained → from_pretrained gives the rescaled model's logits bit for bit, ties as they were;
    'once' on BERT's head, tied to summed embeddings, is refused in one line (the planner runs 'untie')."""
    spec = Rescale("factor", factor=0.25, method=method)
    live, tokenizer = load_backbone(str(models[family]))
    if (family, method) == ("bert", "once"):
        with pytest.raises(
            BenchmarkError, match="^method 'once' would scale the shared matrix of BertForMaskedLM.*use method 'untie'"
        ) as err:
            prepare_backbone(str(models[family]), spec, tmp_path / "backbone")
        assert "\n" not in str(err.value)
        assert spec.canonical_for(str(models[family])).method == "untie"
        return
    expected = apply_rescale(live, spec)
    out = tmp_path / "backbone"
    record = prepare_backbone(str(models[family]), spec, out)
    assert record["backbone"] == f"tiny-{family}" and record["source"] == str(models[family])
    assert record["model_type"] == family and record["factor"] == 0.25 and record["method"] == method
    assert record["rescale"] == {
        "mode": "factor",
        "factor": 0.25,
        "match": None,
        "scale_bias": True,
        "method": method,
        "match_stat": "logit-std",
    }
    assert {k: record[k] for k in expected} == expected
    reloaded, tok2 = load_backbone(str(out))  # re-checks that no head weight is missing
    assert torch.equal(_logits(reloaded, tok2), _logits(live, tokenizer))
    head = mlm_head(reloaded)
    assert head.tied == record["tied_after"] == (method != "untie")
    assert sum(p.numel() for p in reloaded.parameters()) == record["params_after"]
    if head.tied:  # BERT's bias alias stays the very same tensor as decoder.bias
        assert all(p is head.bias for _, p in head.bias_params())
    else:
        assert all(torch.equal(p, head.bias) for _, p in head.bias_params())
    assert sorted(p.name for p in out.iterdir()) == [
        "config.json",
        "model.safetensors",
        "tokenizer.json",
        "tokenizer_config.json",
    ]


def test_prepare_real_bert_tiny_head_norm(tmp_path, monkeypatch):
    monkeypatch.setenv("BENCHMARK_MODEL_DIR", MODEL_DIR)
    record = prepare_backbone("bert-tiny", Rescale("factor", factor=0.25, method="head-norm"), tmp_path / "bb")
    saved = load_file(tmp_path / "bb" / "model.safetensors")
    source = load_file(BERT_TINY / "model.safetensors")
    norm = "cls.predictions.transform.LayerNorm"
    # bert-tiny stores the legacy LayerNorm names gamma/beta, and transformers saves them back so.
    changed = {f"{norm}.gamma", f"{norm}.beta", "cls.predictions.bias"}
    assert set(saved) == set(source)  # tied: no separate decoder matrix or decoder.bias written
    for key, value in saved.items():  # a power of two: exact
        assert torch.equal(value, source[key] * 0.25 if key in changed else source[key]), key
    assert record["backbone"] == "bert-tiny" and record["vocab_size"] == 30522 and record["hidden_size"] == 128
    assert record["params_before"] == record["params_after"] == 4_416_698 and record["tied_after"]
    # bert-tiny's head LayerNorm gain: rms(γ) (its mean is about 5.8)
    gamma = source[f"{norm}.gamma"].double()
    assert record["head_gain_before"] == pytest.approx(
        float(gamma.pow(2).mean().sqrt()), rel=1e-12
    )  # 128 terms: θ_128 ≈ 1.4e-14
    assert record["head_gain_after"] == record["head_gain_before"] * 0.25


def test_prepare_refuses_foreign_folder(tmp_path, models):
    out = tmp_path / "notes"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    with pytest.raises(BenchmarkError, match="exists and is not a saved backbone"):
        prepare_backbone(str(models["bert"]), Rescale(), out)
    assert (out / "keep.txt").read_text() == "mine"
    assert [p.name for p in tmp_path.iterdir()] == ["notes"]  # no temp folder left behind
