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
from _tiny_models import BERT_TINY, tiny_modernbert
from safetensors.torch import load_file

from benchmark.backbone import load_backbone
from benchmark.norms import COLUMNS, head_stats, main, splade_reps, splade_stats
from benchmark.rescale import Rescale, apply_rescale

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def modernbert(tmp_path_factory) -> Path:
    return tiny_modernbert(tmp_path_factory.mktemp("models"), vocab_size=4096)


def test_head_stats_by_hand():
    from transformers import BertConfig, BertForMaskedLM

    config = BertConfig(vocab_size=8, hidden_size=4, num_hidden_layers=1, num_attention_heads=2, intermediate_size=8, tie_word_embeddings=False)
    model = BertForMaskedLM(config)
    decoder = model.cls.predictions.decoder
    with torch.no_grad():
        decoder.weight.zero_()
        decoder.weight[0, :2] = torch.tensor([3.0, 4.0])  # row norm 5
        decoder.weight[1, 3] = 12.0  # row norm 12
        decoder.bias.zero_()
        decoder.bias[:3] = torch.tensor([1.0, 2.0, 2.0])  # norm 3
        model.get_input_embeddings().weight.fill_(0.5)  # 8x4 of 0.5: norm sqrt(32 * 0.25) = sqrt(8)
    assert head_stats(model) == {
        "tied": False,
        "head_norm": 13.0,  # sqrt(9 + 16 + 144)
        "row_norm_mean": 17.0 / 8,
        "row_norm_max": 12.0,
        "bias_norm": 3.0,
        "embedding_norm": math.sqrt(8.0),
    }


def test_splade_reps_by_hand():
    logits = torch.tensor([[[-1.0, 0.5, 2.0], [3.0, -2.0, 0.0]], [[1.0, -1.0, 0.0], [9.0, 9.0, 9.0]]])
    mask = torch.tensor([[1, 1], [1, 0]])  # the 9s are padding and must not count
    expected = torch.tensor([[math.log(4.0), math.log(1.5), math.log(3.0)], [math.log(2.0), 0.0, 0.0]])
    torch.testing.assert_close(splade_reps(logits, mask), expected)


def test_rescale_keeps_support_and_scales_logits(modernbert):
    model, tokenizer = load_backbone(str(modernbert))
    before = splade_stats(model, tokenizer)
    apply_rescale(model, Rescale("factor", factor=0.25))
    after = splade_stats(model, tokenizer)
    # scale_bias=True: logits are exactly 0.25x, so the same vocabulary entries stay active.
    assert after["doc_nnz"] == before["doc_nnz"] and after["query_nnz"] == before["query_nnz"]
    assert after["logit_max"] == before["logit_max"] * 0.25
    assert after["logit_mean"] == pytest.approx(before["logit_mean"] * 0.25, rel=1e-12)
    assert after["act_mean"] < before["act_mean"]


def test_cli_rescale_on_bert_tiny(tmp_path):
    """The issue's acceptance check: --rescale 0.25 reports head_norm x 0.25 and the same embedding norm."""
    env = {**os.environ, "BENCHMARK_MODEL_DIR": str(BERT_TINY.parent), "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "benchmark.norms", "--backbones", "bert-tiny", "--rescale", "0.25", "--format", "csv", "--results-dir", str(tmp_path)]
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    (row,) = list(csv.DictReader(io.StringIO(proc.stdout)))
    emb = load_file(BERT_TINY / "model.safetensors")["bert.embeddings.word_embeddings.weight"].double()
    norm = math.sqrt(float((emb**2).sum()))  # bert-tiny's head is tied to these embeddings
    assert row["backbone"] == "bert-tiny" and row["rescale"] == "x0.25" and float(row["factor"]) == 0.25
    assert float(row["head_norm_before"]) == pytest.approx(norm, rel=1e-12)
    assert float(row["head_norm"]) == float(row["head_norm_before"]) * 0.25
    assert float(row["embedding_norm"]) == float(row["head_norm_before"])
    assert row["tied"] == "False" and row["vocab_size"] == "30522"
    assert (tmp_path / "norms" / "norms.csv").read_text() == proc.stdout
    assert (tmp_path / "norms" / "norms.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert sorted(p.name for p in (tmp_path / "norms").iterdir()) == ["norms.csv", "norms.png"]


def test_cli_uncached_hub_id_is_one_line(tmp_path):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf"), "OMP_NUM_THREADS": "1"}
    env.pop("BENCHMARK_MODEL_DIR", None)
    cmd = [sys.executable, "-m", "benchmark.norms", "--backbones", "ettin-17m", "--results-dir", str(tmp_path)]
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr == (
        "error: backbone 'ettin-17m': jhu-clsp/ettin-encoder-17m is not in the local Hugging Face cache and the "
        "hub is unreachable; put the checkpoint in $BENCHMARK_MODEL_DIR/ettin-17m/ or download it once online "
        "and set HF_HUB_OFFLINE=1\n"
    )


def test_cli_table_and_match(tmp_path, modernbert, capsys):
    assert main(["--backbones", str(modernbert), "--match-norm", "5", "--results-dir", str(tmp_path)]) == 0
    header, row = capsys.readouterr().out.splitlines()
    assert header.split() == list(COLUMNS)
    assert row.split()[:4] == ["tiny-modernbert", "match:5", row.split()[2], "modernbert"]
    (saved,) = list(csv.DictReader(open(tmp_path / "norms" / "norms.csv")))
    assert float(saved["head_norm"]) == pytest.approx(5.0, rel=1e-6)


@pytest.mark.parametrize(
    "args, message",
    [
        (["--rescale", "nan"], "error: rescale factor must be a positive finite number, got nan"),
        (["--rescale", "-1"], "error: rescale factor must be a positive finite number, got -1.0"),
        (["--match-norm", "0"], "error: rescale match norm must be a positive finite number, got 0.0"),
    ],
)
def test_cli_bad_rescale(tmp_path, modernbert, capsys, args, message):
    assert main(["--backbones", str(modernbert), *args, "--results-dir", str(tmp_path)]) == 2
    assert capsys.readouterr().err == message + "\n"
    assert not (tmp_path / "norms").exists()


def test_cli_unknown_backbone(tmp_path, capsys):
    assert main(["--backbones", "ettin-17", "--results-dir", str(tmp_path)]) == 2
    assert capsys.readouterr().err.startswith("error: unknown backbone 'ettin-17' (did you mean 'ettin-17m'?); valid: ")
