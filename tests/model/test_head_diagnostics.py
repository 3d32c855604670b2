"""MLM-head diagnostics: hand-computed norms, SPLADE pooling, and the norms CLI."""

from __future__ import annotations

import csv
import io
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from benchmark.data.samples import scifact_abstracts
from benchmark.model.head_diagnostics import (
    COLUMNS,
    head_stats,
    main,
    sample_pass,
    splade_logits,
    splade_reps,
    splade_stats,
)
from benchmark.model.loader import load_backbone
from benchmark.model.rescale import Rescale, apply_rescale
from helpers import ROOT as REPO
from helpers.tiny_models import BERT_TINY, tiny_modernbert


@pytest.fixture(scope="module")
def modernbert(tmp_path_factory) -> Path:
    return tiny_modernbert(tmp_path_factory.mktemp("models"), vocab_size=4096)


def test_head_stats_by_hand():
    from transformers import BertConfig, BertForMaskedLM

    config = BertConfig(
        vocab_size=8,
        hidden_size=4,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=8,
        tie_word_embeddings=False,
    )
    model = BertForMaskedLM(config)
    decoder = model.cls.predictions.decoder
    with torch.no_grad():
        decoder.weight.zero_()
        decoder.weight[0, :2] = torch.tensor([3.0, 4.0])  # row norm 5
        decoder.weight[1, 3] = 12.0  # row norm 12
        decoder.bias.zero_()
        decoder.bias[:3] = torch.tensor([1.0, 2.0, 2.0])  # norm 3
        model.get_input_embeddings().weight.fill_(0.5)  # 8x4 of 0.5: norm sqrt(32 * 0.25) = sqrt(8)
        model.cls.predictions.transform.LayerNorm.weight.copy_(torch.tensor([1.0, 1.0, 7.0, 7.0]))  # rms 5
    assert head_stats(model) == {
        "tied": False,
        "params": sum(p.numel() for p in model.parameters()),
        "frobenius": 13.0,  # sqrt(9 + 16 + 144)
        "row_rms": 13.0 / math.sqrt(8),
        "head_gain": 5.0,
        "bias_norm": 3.0,
        "embedding_norm": math.sqrt(8.0),
    }


def test_splade_reps_by_hand():
    logits = torch.tensor([[[-1.0, 0.5, 2.0], [3.0, -2.0, 0.0]], [[1.0, -1.0, 0.0], [9.0, 9.0, 9.0]]])
    mask = torch.tensor([[1, 1], [1, 0]])  # the 9s are padding and must not count
    expected = torch.tensor([[math.log(4.0), math.log(1.5), math.log(3.0)], [math.log(2.0), 0.0, 0.0]])
    torch.testing.assert_close(splade_reps(logits, mask), expected)


DOCS = scifact_abstracts()[:3]


def test_sample_pass_by_hand(modernbert):
    model, tokenizer = load_backbone(str(modernbert))
    out = sample_pass(model, tokenizer, DOCS)
    logits, mask = splade_logits(model, tokenizer, DOCS)
    reps = splade_reps(logits, mask).double()
    real = logits[mask.bool()].double()
    # The statistic takes each token's variance in float32 (var_mean): a sequential reduction of
    # V = 4096 terms is within θ_V ≈ 4096·2^-24 = 2.4e-4 of the float64 one here, std half of that.
    assert out["logit_std"] == pytest.approx(float(real.std(dim=-1, correction=0).mean()), rel=1.3e-4)
    # Both sides sum the same n = 3 × 4096 non-negative float64 terms in other orders: θ_n each, 2.7e-12.
    assert out["act_mean"] == pytest.approx(float(reps.mean()), rel=3e-12)
    assert out["doc_nnz"] == float((reps > 0).sum(dim=1).double().mean())
    # Column means of 3 terms, squared, summed over 4096 (non-negative): θ_4100 ≈ 4.6e-13 each side.
    assert out["doc_flops"] == pytest.approx(float((reps.mean(dim=0) ** 2).sum()), rel=1e-12)
    assert out["logit_max"] == float(real.max())
    assert out["hidden"].shape == (int(mask.sum()), 64)


def test_rescale_keeps_support_and_scales_logits(modernbert):
    model, tokenizer = load_backbone(str(modernbert))
    before = splade_stats(model, tokenizer, DOCS)
    apply_rescale(model, Rescale("factor", factor=0.25, method="projection"))
    after = splade_stats(model, tokenizer, DOCS)
    # scale_bias=True: logits are exactly 0.25x, so the same vocabulary entries stay active.
    assert after["doc_nnz"] == before["doc_nnz"] and after["query_nnz"] == before["query_nnz"]
    assert after["logit_max"] == before["logit_max"] * 0.25 and after["logit_std"] == before["logit_std"] * 0.25
    assert after["logit_mean"] == before["logit_mean"] * 0.25  # power of two: every sum scales exactly
    assert after["act_mean"] < before["act_mean"]


def _cli(tmp_path, *args):
    env = {**os.environ, "BENCHMARK_MODEL_DIR": str(BERT_TINY.parent), "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    cmd = [
        sys.executable,
        "-m",
        "benchmark.model.head_diagnostics",
        *args,
        "--format",
        "csv",
        "--results-dir",
        str(tmp_path),
    ]
    return subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)


def test_cli_three_methods_on_bert_tiny(tmp_path):
    """--rescale 0.25 with each method: which one made each row, and what it cost."""
    proc = _cli(
        tmp_path,
        "--backbones",
        "bert-tiny",
        "--rescale",
        "0.25",
        "--method",
        "head-norm",
        "tied",
        "untie",
        "--sample",
        "4",
    )
    assert proc.returncode == 0, proc.stderr
    rows = {r["method"]: r for r in csv.DictReader(io.StringIO(proc.stdout))}
    assert [r["rescale"] for r in rows.values()] == ["x0.25@head-norm", "x0.25@tied", "x0.25@untie+params"]
    emb = load_file(BERT_TINY / "model.safetensors")["bert.embeddings.word_embeddings.weight"].double()
    norm = math.sqrt(float((emb**2).sum()))  # bert-tiny's head is tied to these embeddings
    params = 4_416_698
    for _method, row in rows.items():
        assert row["backbone"] == "bert-tiny" and float(row["factor"]) == 0.25 and row["vocab_size"] == "30522"
        assert float(row["frobenius_before"]) == pytest.approx(norm, rel=9e-10)  # θ_n, n = 3.9M float64 terms
        assert float(row["row_rms_before"]) == float(row["frobenius_before"]) / math.sqrt(30522)
        assert row["tied_before"] == "True" and int(row["params_before"]) == params
    hn, tied, untie = rows["head-norm"], rows["tied"], rows["untie"]
    # head-norm: nothing added, tie kept, decoder matrix untouched; gain, logits and logit-std × 0.25 exactly.
    assert hn["tied"] == "True" and int(hn["params"]) == params and hn["frobenius"] == hn["frobenius_before"]
    assert float(hn["head_gain"]) == float(hn["head_gain_before"]) * 0.25
    assert float(hn["logit_scale"]) == 0.25 and float(hn["logit_dev"]) == 0.0 and float(hn["hidden_drift"]) == 0.0
    # tied: the shared matrix shrinks (embeddings too), nothing added, and the encoder's input moved.
    assert tied["tied"] == "True" and int(tied["params"]) == params
    assert float(tied["embedding_norm"]) == float(tied["frobenius"]) == float(tied["frobenius_before"]) * 0.25
    assert float(tied["hidden_drift"]) > 0 and float(tied["logit_dev"]) > 0
    # untie: exact like head-norm, but one more vocab × hidden matrix (+ the bias alias).
    assert untie["tied"] == "False" and int(untie["params"]) == params + 30522 * 128 + 30522
    assert float(untie["embedding_norm"]) == float(untie["frobenius_before"])
    assert float(untie["frobenius"]) == float(untie["frobenius_before"]) * 0.25
    assert float(untie["logit_scale"]) == 0.25 and float(untie["hidden_drift"]) == 0.0
    assert (tmp_path / "norms" / "norms.csv").read_text() == proc.stdout
    assert (tmp_path / "norms" / "norms.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert sorted(p.name for p in (tmp_path / "norms").iterdir()) == ["norms.csv", "norms.png"]


def test_cli_uncached_hub_id_is_one_line(tmp_path):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf"), "OMP_NUM_THREADS": "1"}
    env.pop("BENCHMARK_MODEL_DIR", None)
    cmd = [
        sys.executable,
        "-m",
        "benchmark.model.head_diagnostics",
        "--backbones",
        "ettin-17m",
        "--results-dir",
        str(tmp_path),
    ]
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr == (
        "error: backbone 'ettin-17m': jhu-clsp/ettin-encoder-17m is not in the local Hugging Face cache and the "
        "hub is off (HF_HUB_OFFLINE=1); put the checkpoint in $BENCHMARK_MODEL_DIR/ettin-17m/ (now unset), or "
        "download it once with network access (hf download jhu-clsp/ettin-encoder-17m) and run with HF_HUB_OFFLINE=1\n"
    )


def test_cli_table_and_match(tmp_path, modernbert, capsys):
    args = [
        "--backbones",
        str(modernbert),
        "--match-norm",
        "5",
        "--match-stat",
        "frobenius",
        "--method",
        "tied",
        "--sample",
        "2",
    ]
    assert main([*args, "--results-dir", str(tmp_path)]) == 0
    header, row = capsys.readouterr().out.splitlines()
    assert header.split() == list(COLUMNS)
    assert row.split()[:4] == ["tiny-modernbert", "match:5/frobenius@tied", "tied", row.split()[3]]
    (saved,) = list(csv.DictReader(open(tmp_path / "norms" / "norms.csv")))
    assert float(saved["frobenius"]) == pytest.approx(5.0, rel=2**-23)  # float32 entries, each rounded after × α


@pytest.mark.parametrize(
    "args, message",
    [
        (["--rescale", "nan"], "error: rescale factor must be a positive finite number, got nan"),
        (["--rescale", "-1"], "error: rescale factor must be a positive finite number, got -1.0"),
        (["--match-norm", "0"], "error: rescale match target must be a positive finite number, got 0.0"),
        (
            ["--rescale", "2", "--method", "tied", "untied"],
            "error: unknown rescale method 'untied' (did you mean 'untie'?); valid: head-norm, once, projection, "
            "tied, untie. Set method in [splade.rescale] or pass one of these",
        ),
        (
            ["--match-norm", "3", "--match-stat", "rms"],
            "error: unknown rescale match statistic 'rms' (did you mean 'row-rms'?); valid: frobenius, logit-std, "
            "row-rms. Set match_stat in [splade.rescale] or pass one of these",
        ),
        (["--sample", "0"], "error: --sample must be between 1 and 256 (the shipped abstracts), got 0"),
    ],
)
def test_cli_bad_rescale(tmp_path, modernbert, capsys, args, message):
    assert main(["--backbones", str(modernbert), *args, "--results-dir", str(tmp_path)]) == 2
    assert capsys.readouterr().err == message + "\n"
    assert not (tmp_path / "norms").exists()


def test_cli_unknown_backbone(tmp_path, capsys):
    assert main(["--backbones", "ettin-17", "--results-dir", str(tmp_path)]) == 2
    assert capsys.readouterr().err.startswith("error: unknown backbone 'ettin-17' (did you mean 'ettin-17m'?); valid: ")
