"""A slice of the paper's dress rehearsal: the ModernBERT family (built from its real config class) and
the real bert-tiny, baseline and rescaled, trained, encoded, indexed, searched and tabulated."""

from __future__ import annotations

import json

import pytest

from benchmark.training.outcomes import TRAINING_OUTCOMES
from helpers.pipeline import run_cli


@pytest.mark.slow  # trains every backbone family
def test_paper_mini_slice_runs_every_stage_on_modernbert(tmp_path):
    runs, results = tmp_path / "runs", tmp_path / "results"
    assert (
        run_cli(
            "--suite",
            "paper-mini",
            "--backbones",
            "tiny-modernbert,bert-tiny",
            "--datasets",
            "beir/nfcorpus/test",
            "--max-docs",
            "150",
            "--max-queries",
            "5",
            "--runs-dir",
            str(runs),
            "--results-dir",
            str(results),
        )
        == 0
    )
    folder = results / "paper-mini@datasets=nfcorpus,backbones=tiny-modernbert,bert-tiny,max-docs=150,max-queries=5"
    data = json.loads((folder / "results.json").read_text())
    rows = {(c["backbone"], c["variant"]) for c in data["conditions"] if c["system"] == "splade"}
    # the paper's operation (once × 1/16; bert-tiny's tie to summed embeddings makes it an untied copy) and the
    # constant multiplier (rescaled-projection, an extension) for both backbones
    arms = ("baseline", "rescaled", "rescaled-projection")
    assert rows == {(b, v) for b in ("tiny-modernbert", "bert-tiny") for v in arms}
    trained = [c for c in data["conditions"] if c["system"] == "splade"]
    assert all(c["outcome"] in TRAINING_OUTCOMES for c in trained)
    assert all(c["metrics"] or c["stopped_early"] for c in trained)  # scored unless stopped at a collapse
    backbones = [
        json.loads((p / "config.json").read_text())["record"]
        for p in (runs / "backbone").iterdir()
        if not p.name.startswith(".")
    ]
    once = next(
        r for r in backbones if r["backbone"] == "tiny-modernbert" and r["method"] == "once" and r["factor"] != 1.0
    )
    assert (once["model_type"], once["factor"]) == ("modernbert", 1 / 16)
    assert once["params_before"] == once["params_after"] and once["tied_after"]
    assert once["embedding_norm_after"] == once["embedding_norm_before"] / 16  # the shared matrix, exactly (2^-4)
    copy = next(
        r for r in backbones if r["backbone"] == "bert-tiny" and r["factor"] != 1.0 and r["method"] != "projection"
    )
    assert copy["method"] == "untie" and copy["params_after"] > copy["params_before"] and not copy["tied_after"]
    # the projection's α travels into the trained checkpoints of the two projection arms, and only into theirs
    scales = [
        json.loads((p / "model" / "config.json").read_text()).get("mlm_projection_scale")
        for p in (runs / "train").iterdir()
        if not p.name.startswith(".")
    ]
    assert sorted(scales, key=str) == [0.0625, 0.0625, None, None, None, None]
    table = (folder / "table.md").read_text()
    assert "SPLADE tiny-modernbert rescaled [once ×0.0625 = 1/16, shared matrix" in table and "max-docs=150" in table
    assert "SPLADE bert-tiny rescaled [untie ×0.0625 = 1/16, untied copy +" in table
    assert (folder / "index.html").is_file()


def test_synthetic_backbone_builds_in_an_empty_cache(tmp_path, monkeypatch):
    """A fresh machine builds the synthetic backbones; the vocabulary bias leaves ACTIVE_FRACTION active.

    Exact: the bias is minus the 0.99 quantile of the calibration logits, and a rounded difference
    has the sign of the exact one, so exactly the logits above the quantile stay above 0.
    """
    import torch
    from transformers import AutoModelForMaskedLM, AutoTokenizer

    from benchmark.model.synthetic import ACTIVE_FRACTION, CALIBRATION_TEXTS, ensure

    monkeypatch.setenv("BENCHMARK_CACHE_DIR", str(tmp_path / "cache"))
    folder = ensure("tiny-ettin")
    assert (
        folder.is_relative_to(tmp_path) and json.loads((folder / "SYNTHETIC.json").read_text())["key"] == "tiny-ettin"
    )
    model, tokenizer = AutoModelForMaskedLM.from_pretrained(folder).eval(), AutoTokenizer.from_pretrained(folder)
    batch = tokenizer(list(CALIBRATION_TEXTS), padding=True, return_tensors="pt")
    with torch.no_grad():
        logits = model(**batch).logits[batch["attention_mask"].bool()].float().flatten()[:1_000_000]
    assert int((logits > 0).sum()) == round(ACTIVE_FRACTION * logits.numel())
