"""benchmark.perf: bad arguments fail before any work; the training triples are deterministic and sound; each
cited measurement's subcommand runs on the CPU."""

from __future__ import annotations

import json

import pytest

from benchmark.perf.perf_cli import main
from benchmark.perf.train_speed import triples


def test_bad_arguments_are_one_line_before_any_work(capsys, tmp_path):
    assert main(["--only", "encode,trian", "--out", str(tmp_path)]) == 2
    assert "unknown perf part 'trian' (did you mean 'train'?)" in capsys.readouterr().err
    assert main(["--only", "train", "--train-steps", "0", "--out", str(tmp_path)]) == 2
    assert "--train-steps must be a positive integer" in capsys.readouterr().err
    assert main(["--only", "encode", "--path", "fp8", "--out", str(tmp_path)]) == 2
    assert "unknown encode path 'fp8'" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())


def test_training_triples_are_deterministic_with_off_topic_negatives():
    from benchmark.data.datasets import load_source

    a, b = triples(40), triples(40)
    assert a == b and len(a) == 40
    docs, queries, qrels = load_source("beir/scifact/train")
    text = dict(docs)
    relevant: dict[str, set[str]] = {}
    for q in qrels:
        if q.relevance > 0:
            relevant.setdefault(queries[q.query_id], set()).add(text[q.doc_id])
    assert len({t["query"] for t in a}) == 40
    assert all(t["positive"] in relevant[t["query"]] and t["negative"] not in relevant[t["query"]] for t in a)


# --- the subcommands whose numbers the README and the budget cite: each runs on the CPU at tiny sizes


def test_subcommands_refuse_bad_arguments_in_one_line(capsys, tmp_path):
    assert main(["matmul-shapes", "--dtypes", "float32,fp8"]) == 2
    assert "unknown dtype 'fp8'" in capsys.readouterr().err
    assert main(["skip-bounds", "--ranks", "0"]) == 2
    assert "--ranks must be comma-separated positive integers, got '0'" in capsys.readouterr().err
    assert main(["budget-probe", "--backbones", "etin-17m"]) == 2
    assert "unknown backbone 'etin-17m' (did you mean 'ettin-17m'?)" in capsys.readouterr().err
    assert main(["rescale-study", "norms", "--models", "0", "--out", str(tmp_path)]) == 2
    assert "--models must be a positive integer" in capsys.readouterr().err
    assert main(["gpu-profile", "--dry-run", "--only", "encode_nope", "--out", str(tmp_path / "g.json")]) == 2
    assert "unknown measurement 'encode_nope'" in capsys.readouterr().out


def test_matmul_shapes_smoke(tmp_path, monkeypatch):
    """Every shape and the int8 branch (``torch._int_mm``), on a 2,048-term vocabulary: at 30,522 the
    int8 product alone took 10 of the test's 12 s on a CPU without VNNI (2.4 GFLOP/s)."""
    from benchmark.perf import matmul_shapes

    monkeypatch.setattr(matmul_shapes, "VOCAB", 2048)
    out = tmp_path / "matmul.json"
    assert (
        main(["matmul-shapes", "--dtypes", "float32,int8", "--rounds", "1", "--threads", "1", "--out", str(out)]) == 0
    )
    result = json.loads(out.read_text())
    for shape in ("whole_vocabulary_new_output_gflops", "whole_vocabulary_gflops", "screen_blocks_gflops"):
        assert set(result[shape]) == {"float32", "int8"} and all(v > 0 for v in result[shape].values())


def test_skip_bounds_smoke(tmp_path):
    """Every bound is >= the exact maximum logit, so it can only leave more terms alive than the floor."""
    out = tmp_path / "skip.json"
    assert (
        main(
            [
                "skip-bounds",
                "--docs",
                "2",
                "--max-length",
                "32",
                "--groups",
                "16",
                "--block-sizes",
                "4096",
                "--ranks",
                "8",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    result = json.loads(out.read_text())
    alive = result["alive_fraction"]
    assert set(alive) == {"exact (floor)", "ball", "box", "box/16 tokens", "vocab-blocks/4096 terms", "pca/rank 8"}
    assert all(alive[name] >= alive["exact (floor)"] > 0 for name in alive)
    assert result["docs"] == 2 and 0 <= result["int8_screen_candidates_fraction"] <= 1
    assert result["head_cost_with_skip"]["pca/rank 8"] == pytest.approx(8 / result["hidden"] + alive["pca/rank 8"])


def test_rescale_study_smoke(tmp_path):
    """The reference backbone is matched to itself: α = 1 by every statistic."""
    from benchmark.model.rescale import METHODS

    assert main(["rescale-study", "match", "--sample", "2", "--models", "3", "--out", str(tmp_path)]) == 0
    assert main(["rescale-study", "norms", "--sample", "2", "--models", "1", "--out", str(tmp_path)]) == 0
    match = (tmp_path / "match.md").read_text().splitlines()
    assert [r.split(" | ")[0] for r in match if r.startswith("| bert") or r.startswith("| BERT")] == [
        "| bert-tiny (pretrained)",
        "| bert-tiny, head gain x0.5",
        "| BERT V30522 H32",
    ]
    assert next(r for r in match if r.startswith("| bert-tiny (pretrained)")).endswith("| 1 | 1 | 1 |")
    norms = [r for r in (tmp_path / "norms.md").read_text().splitlines() if r.startswith("| bert-tiny |")]
    assert len(norms) == 2 * len(METHODS)


def test_gpu_profile_dry_run_smoke(tmp_path):
    out = tmp_path / "gpu_profile.json"
    assert (
        main(
            [
                "gpu-profile",
                "--dry-run",
                "--docs",
                "8",
                "--out",
                str(out),
                "--only",
                "encode_modernbert_sdpa_bf16,encode_modernbert_sdpa_float32",
            ]
        )
        == 0
    )
    data = json.loads(out.read_text())
    assert not data["errors"] and set(data["measurements"]) == {
        "encode_modernbert_sdpa_bf16",
        "encode_modernbert_sdpa_float32",
    }
    assert all(m["docs_per_s"] > 0 for m in data["measurements"].values())
    assert data["measurements"]["encode_modernbert_sdpa_bf16"]["path"] == "bfloat16"


@pytest.mark.slow  # it trains (one step per document length)
def test_budget_probe_smoke(capsys):
    assert (
        main(
            [
                "budget-probe",
                "--backbones",
                "ettin-17m",
                "--steps",
                "1",
                "--batch",
                "2",
                "--lengths",
                "16",
                "--doc-lengths",
                "16",
            ]
        )
        == 0
    )
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert lines[0]["gpu"] == "cpu" and lines[1]["backbone"] == "ettin-17m"
    assert {k for k in lines[1] if k.startswith(("enc_", "train_"))} == {
        "enc_float32_16",
        "enc_bfloat16_16",
        "train_s_q32_d16",
    }
    assert lines[1]["train_s_q32_d16"] > 0
