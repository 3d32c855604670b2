"""A trained model exported as a sentence-transformers SparseEncoder folder: ``SparseEncoder(path)`` gives
the harness's SPLADE vectors (within the rounding bound of a float32 forward), Pyserini's
``SpladeQueryEncoder(path)`` its query weights (in Pyserini's quantisation), and the folder carries
modules.json, the suite's max length and a model card. The runs folder is laid out as the pipeline
lays it out (train/<id>/model, search → encode/queries configs), with bert-tiny as the trained model."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
import torch

from benchmark.report import model_export as export
from benchmark.report.build import publish
from benchmark.report.results import ConditionResult, SuiteResults
from benchmark.retrieval.impact_vectors import load_model
from benchmark.splade.encoder import encode
from benchmark.splade.forward import _decoder
from benchmark.splade.impacts import QUANT_SCALE
from helpers import ROOT
from helpers.forwards import hidden_states, rounding_tolerance, vector_bound

TEXTS = [
    "cells divide",
    " ".join(["protein folding in the cell"] * 9),
    "insulin and glucose",
    " ".join(["the immune system trains on vaccines and pathogens"] * 20),
    "brca1 mutation and cancer risk",
]
QUERIES = ["what causes cancer", "insulin resistance in muscle cells"]
DOC_LEN, QUERY_LEN = 256, 64
TRAIN, SEARCH, ENCODE, ENCODE_Q = (
    "train-0123456789ab",
    "search-0123456789ab",
    "encode-0123456789ab",
    "queries-0123456789ab",
)


def train_stage(runs) -> None:
    """The train stage's config.json as the store writes it: finished, every file with its size and sha256."""
    from benchmark.stages.store import COMPLETE, output_files

    folder = runs / "train" / TRAIN
    (folder / "config.json").write_text(
        json.dumps({"id": TRAIN, "kind": "train", "status": COMPLETE, "outputs": output_files(folder), "record": {}})
    )


@pytest.fixture(scope="module")
def exported(tmp_path_factory, bert_tiny):
    root = tmp_path_factory.mktemp("export")
    runs = root / "runs"
    shutil.copytree(bert_tiny, runs / "train" / TRAIN / "model")
    train_stage(runs)
    for kind, stage, body in (
        ("search", SEARCH, {"parents": {"docs": ENCODE, "queries": ENCODE_Q, "index": "index-x"}}),
        ("encode", ENCODE, {"config": {"max_length": DOC_LEN}, "parents": {}}),
        ("queries", ENCODE_Q, {"config": {"max_length": QUERY_LEN}, "parents": {}}),
    ):
        (runs / kind / stage).mkdir(parents=True)
        (runs / kind / stage / "config.json").write_text(json.dumps(body))
    c = ConditionResult(
        key="evaluate-1",
        dataset="beir/scifact/test",
        system="splade",
        backbone="bert-tiny",
        variant="x4",
        factor="4",
        method="head-norm",
        trained=True,
        seed=42,
        outcome="degraded",
        outcome_reason="dev_mrr_drop",
        outcome_step=26,
        metrics={"nDCG@10": 0.6123, "R@100": 0.9},
        queries=300,
        scale=4.0,
        command="python -m benchmark.run --suite hand --variants x4 --seeds 42",
        train_id=TRAIN,
        search_id=SEARCH,
        evaluate_id="evaluate-1",
    )
    folder = publish(
        SuiteResults(
            suite="hand",
            measures=["nDCG@10", "R@100"],
            conditions=[c],
            seeds=[42],
            training="Training: recipe smoke (one short epoch).",
        ),
        root / "results" / "hand",
    )
    lines: list[str] = []
    [path] = export.export_suite(folder, runs, root / "exports", say=lines.append)
    assert lines == [f"exported {path}"]
    return path


def test_folder_is_a_sparse_encoder_with_a_model_card(exported):
    assert exported.name == "splade-bert-tiny-x4-head-norm-4-seed42"
    modules = json.loads((exported / "modules.json").read_text())
    assert [m["type"].rsplit(".", 1)[1] for m in modules] == ["MLMTransformer", "SpladePooling"]
    pooling = json.loads((exported / modules[1]["path"] / "config.json").read_text())
    assert (pooling["pooling_strategy"], pooling["activation_function"]) == ("max", "relu")
    assert json.loads((exported / "sentence_bert_config.json").read_text())["max_seq_length"] == DOC_LEN
    card = (exported / "README.md").read_text()
    assert card.startswith("---\nlibrary_name: sentence-transformers\n")
    for text in (
        "MLM-head rescale: method `head-norm`, factor 4 (applied: ×4)",
        "- Training: recipe smoke (one short epoch). Seed 42.",
        "Training outcome: degraded at step 26 (dev_mrr_drop)",
        "| scifact (`beir/scifact/test`) | 0.6123 | 0.9000 | 300 |",
        "python -m benchmark.run --suite hand --variants x4 --seeds 42",
        "queries 64 tokens",
    ):
        assert text in card, text


def test_sparse_encoder_reproduces_the_harness_vectors(exported, bert_tiny):
    """|Δw| ≤ the bound the hidden states' rounding implies (``vector_bound`` of 4× the SDPA–eager gap) plus
    ST's own float32 decoder matmul (γ_K·‖h‖·‖w_j‖ ≤ 2·K·u·max‖h‖·max‖w_j‖) and its float32 log1p (u·w)."""
    from sentence_transformers import SparseEncoder

    model, tokenizer = load_model(bert_tiny, "sdpa")
    harness = encode(model, tokenizer, TEXTS, max_length=DOC_LEN, batch_size=8)
    weight = _decoder(model).weight.detach()
    sdpa, mask, _ = hidden_states(model, tokenizer, TEXTS)
    tolerance = rounding_tolerance(sdpa, hidden_states(*load_model(bert_tiny, "eager"), TEXTS)[0], mask)
    u, k = 2.0**-24, weight.shape[1]
    bound = (
        vector_bound(tolerance, weight)
        + 2 * k * u * float(sdpa[mask].norm(dim=-1).max()) * float(weight.norm(dim=1).max())
        + 2 * u * max(float(w.max()) for _, w in harness)
    )
    encoder = SparseEncoder(str(exported), device="cpu")
    assert encoder.max_seq_length == DOC_LEN
    got = encoder.encode_document(TEXTS, convert_to_tensor=True).to_dense().numpy()
    want = np.zeros_like(got)
    for i, (ids, ws) in enumerate(harness):
        want[i, ids] = ws
    assert want.any(axis=1).all()
    assert np.abs(got - want).max() <= bound
    # and the indexed impacts round(100·w) agree wherever w is not within the bound of a rounding boundary
    near = np.abs((want * QUANT_SCALE) % 1 - 0.5) <= bound * QUANT_SCALE
    indexed = (want > 0) | (got > 0)
    assert (near & indexed).sum() < 0.5 * indexed.sum()  # most indexed terms are compared (~2·bound·100 are not)
    assert np.array_equal(np.rint(got * QUANT_SCALE)[~near], np.rint(want * QUANT_SCALE)[~near])


def test_pyserini_query_encoder_loads_it(exported, bert_tiny):
    """Pyserini's SPLADE query encoder on the folder: its weights are round(w / 5 · 256) of the harness's
    query vectors (within half a unit plus the rounding bound of the previous test, 1e-3 here)."""
    from benchmark.retrieval.lucene import start_jvm

    start_jvm()  # pyserini.encode starts the JVM on import: the JDK the harness found
    from pyserini.encode import SpladeQueryEncoder

    model, tokenizer = load_model(bert_tiny, "sdpa")
    encoder = SpladeQueryEncoder(str(exported))
    scale = 256 / 5  # Pyserini's quantisation: weight_range 5 over quant_range 256
    for text, (ids, ws) in zip(QUERIES, encode(model, tokenizer, QUERIES, max_length=QUERY_LEN)):
        theirs = encoder.encode(text, max_length=QUERY_LEN)
        ours = dict(zip(tokenizer.convert_ids_to_tokens(ids.tolist()), (float(w) * scale for w in ws)))
        assert ours and all(abs(theirs.get(t, 0) - v) <= 0.5 + 1e-3 * scale for t, v in ours.items())
        assert all(ours.get(t, 0.0) >= 0.5 - 1e-3 * scale for t, q in theirs.items() if q >= 1)


def test_export_errors_name_the_missing_runs(tmp_path, exported):
    folder = exported.parents[1] / "results"
    code = export.main(
        [
            "--suite",
            "hand",
            "--results-dir",
            str(folder),
            "--runs-dir",
            str(tmp_path / "nowhere"),
            "--out",
            str(tmp_path / "out"),
        ]
    )
    assert code == 2 and not (tmp_path / "out").exists()
    assert export.main(["--suite", "nope", "--results-dir", str(folder)]) == 2


def test_fold_for_export_is_identity_without_a_projection_scale(bert_tiny):
    model, _ = load_model(bert_tiny, "sdpa")
    before = {k: v.clone() for k, v in model.state_dict().items()}
    folded = export.fold_for_export(model)
    assert folded is model and all(torch.equal(before[k], v) for k, v in folded.state_dict().items())


def test_fold_for_export_carries_the_projection_scale_into_plain_weights(bert_tiny, tmp_path):
    """The paper's method keeps α = 1/16 as a constant the harness's loader applies; the exported model
    holds it in the head LayerNorm's γ, β, so a plain from_pretrained gives the harness's logits. α is a
    power of two, so every product is exact and the logits are bit-identical."""
    from transformers import AutoModelForMaskedLM

    from benchmark.model.heads import PROJECTION_SCALE, projection_scale
    from benchmark.model.rescale import Rescale, apply_rescale

    model, tokenizer = load_model(bert_tiny, "sdpa")
    apply_rescale(model, Rescale(mode="factor", factor=1 / 16, method="projection"))
    batch = tokenizer(["a scientific claim about cells", "sparse retrieval"], padding=True, return_tensors="pt")
    with torch.inference_mode():
        harness = model(**batch).logits
    export.fold_for_export(model)
    assert projection_scale(model) == 1.0 and getattr(model.config, PROJECTION_SCALE) == 1.0
    model.save_pretrained(tmp_path / "folded")
    plain = AutoModelForMaskedLM.from_pretrained(tmp_path / "folded").eval()  # no harness hook
    with torch.inference_mode():
        assert torch.equal(model(**batch).logits, harness)
        assert torch.equal(plain(**batch).logits, harness)


# --------------------------------------------------------------------------- what is not exported, in one line


def _export_line(capsys, exported, runs, out) -> str:
    root = exported.parents[1]
    capsys.readouterr()
    code = export.main(
        ["--suite", "hand", "--results-dir", str(root / "results"), "--runs-dir", str(runs), "--out", str(out)]
    )
    err = capsys.readouterr().err
    assert code == 2, err
    lines = [line for line in err.splitlines() if line.startswith("error:")]  # transformers' progress bars aside
    assert "Traceback" not in err and len(lines) == 1, err
    return lines[0]


def _runs_copy(exported, tmp_path):
    runs = tmp_path / "runs"
    shutil.copytree(exported.parents[1] / "runs", runs)
    weights = runs / "train" / TRAIN / "model" / "model.safetensors"
    weights.chmod(0o644)
    return runs, weights


def test_weights_changed_at_the_same_size_are_not_exported(exported, tmp_path, capsys):
    """4 MB of the trained weights zeroed in place: the model card would claim the scores of other weights."""
    runs, weights = _runs_copy(exported, tmp_path)
    size = weights.stat().st_size
    with open(weights, "r+b") as fh:
        fh.seek(size // 4)
        fh.write(b"\0" * (4 << 20))
    assert weights.stat().st_size == size
    line = _export_line(capsys, exported, runs, tmp_path / "out")
    assert (
        f"train stage {runs / 'train' / TRAIN} is damaged (model/model.safetensors differs from its recorded sha256)"
        in line
    )
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_a_truncated_model_is_one_line(exported, tmp_path, capsys):
    runs, weights = _runs_copy(exported, tmp_path)
    size = weights.stat().st_size
    with open(weights, "r+b") as fh:
        fh.truncate(size // 2)
    line = _export_line(capsys, exported, runs, tmp_path / "out")
    assert f"(model/model.safetensors is {size // 2} bytes, recorded {size})" in line, line


def test_an_out_that_is_a_file_is_one_line(exported, tmp_path, capsys):
    out = tmp_path / "out"
    out.write_text("not a folder")
    line = _export_line(capsys, exported, exported.parents[1] / "runs", out)
    assert (
        line
        == f"error: export folder {str(out)!r} is not writable ({out} is a file); fix its permissions or pass --out DIR"
    )
    assert out.read_text() == "not a folder"


@pytest.fixture
def read_only_folder(tmp_path):
    """A folder no write reaches: a read-only tmpfs as root (who writes through a mode of 0o555), else 0o555."""
    import os
    import subprocess

    folder = tmp_path / "ro"
    folder.mkdir()
    if os.geteuid() != 0:
        folder.chmod(0o555)
        yield folder
        folder.chmod(0o755)
        return
    proc = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", str(folder)], capture_output=True, text=True
    )
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a read-only tmpfs here: {proc.stderr.strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)


def test_a_read_only_out_is_one_line(exported, tmp_path, capsys, read_only_folder):
    line = _export_line(capsys, exported, exported.parents[1] / "runs", read_only_folder)
    assert line.startswith(f"error: export folder {str(read_only_folder)!r} is not writable ("), line
    assert line.endswith("); fix its permissions or pass --out DIR"), line


def test_a_full_disk_while_exporting_is_one_line_and_leaves_nothing(exported, tmp_path, capsys, small_disk):
    out = small_disk / "exports"
    out.mkdir()
    with open(small_disk / "filler", "wb") as fh:  # leave 2 MiB: the 17 MiB of bert-tiny's weights do not fit
        fh.write(b"\0" * (shutil.disk_usage(small_disk).free - (2 << 20)))
    line = _export_line(capsys, exported, exported.parents[1] / "runs", out)
    assert line == (
        f"error: cannot write the export to {out} (No space left on device); free space there or pass --out "
        "DIR on a larger disk, and export again (nothing half-written was left there)"
    )
    assert list(out.iterdir()) == []  # no hidden half-written folder


KILLED_WHILE_SAVING = """
import os, signal, sys
from sentence_transformers import SparseEncoder
real = SparseEncoder.save
def save(self, path, *args, **kwargs):  # killed once the folder is half written, before it is moved into place
    real(self, path, *args, **kwargs)
    os.kill(os.getpid(), signal.SIGKILL)
SparseEncoder.save = save
from benchmark.report import model_export
sys.exit(model_export.main(sys.argv[1:]))
"""


def test_a_killed_exports_leftover_is_removed_by_the_next_export(exported, tmp_path):
    """A SIGKILL while saving leaves the hidden temporary folder; the next export into the same folder
    removes it (its writer no longer runs)."""
    import os
    import subprocess
    import sys

    out = tmp_path / "out"
    root = exported.parents[1]
    argv = [
        "--suite",
        "hand",
        "--results-dir",
        str(root / "results"),
        "--runs-dir",
        str(root / "runs"),
        "--out",
        str(out),
    ]
    killed = subprocess.run(
        [sys.executable, "-c", KILLED_WHILE_SAVING, *argv],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=300,
    )
    assert killed.returncode == -9, killed.stderr
    assert [p.name for p in out.iterdir() if p.name.startswith(".")], "the kill left nothing to remove"
    assert export.main(argv) == 0
    assert sorted(p.name for p in out.iterdir()) == [exported.name]


def _argv(exported, out, runs=None) -> list[str]:
    root = exported.parents[1]
    return ["--suite", "hand", "--results-dir", str(root / "results"), "--runs-dir", str(runs or root / "runs")] + [
        "--out",
        str(out),
    ]


def test_an_existing_folder_the_export_did_not_make_is_refused_and_kept(exported, tmp_path, capsys):
    """A user's folder at the export's name: refused in one line before any model is written, its file kept
    (the export used to delete the whole folder and replace it, exit 0)."""
    out = tmp_path / "out"
    (out / exported.name).mkdir(parents=True)
    (out / exported.name / "notes.txt").write_text("mine")
    line = _export_line(capsys, exported, exported.parents[1] / "runs", out)
    assert line == (
        f"error: export target {out / exported.name} exists and is not an export (no {export.MADE}); nothing "
        "exported. Move it away or pass another --out"
    )
    assert [p.name for p in (out / exported.name).iterdir()] == ["notes.txt"]
    assert sorted(p.name for p in out.iterdir()) == [exported.name]  # no scratch left beside it


def test_an_earlier_export_of_the_same_model_is_replaced_and_files_added_to_it_are_kept(exported, tmp_path, capsys):
    out = tmp_path / "out"
    assert export.main(_argv(exported, out)) == 0
    made = json.loads((out / exported.name / export.MADE).read_text())
    assert made["train_id"] == TRAIN and "model.safetensors" in made["files"] and "README.md" in made["files"]
    (out / exported.name / "README.md").write_text("edited card")  # a file it made: replaced
    assert export.main(_argv(exported, out)) == 0
    assert (out / exported.name / "README.md").read_text() == (exported / "README.md").read_text()
    (out / exported.name / "extra.bin").write_text("user data")  # a file it did not make: the folder is kept
    line = _export_line(capsys, exported, exported.parents[1] / "runs", out)
    assert "holds files the export did not make (extra.bin)" in line, line
    assert (out / exported.name / "extra.bin").read_text() == "user data"


def test_an_out_inside_the_runs_or_a_results_folder_is_refused(exported, capsys):
    root = exported.parents[1]
    runs_out = root / "runs" / "train" / TRAIN
    line = _export_line(capsys, exported, root / "runs", runs_out)
    assert line == (
        f"error: --out {str(runs_out)!r} is inside the runs folder --runs-dir ({root / 'runs'}), whose contents "
        "the harness replaces; pass --out exports (the default) or another folder outside it"
    )
    results_out = root / "results" / "hand"
    line = _export_line(capsys, exported, root / "runs", results_out)
    assert line.startswith(f"error: --out {str(results_out)!r} is inside the results folder --results-dir"), line
    assert not any(p.name.startswith("splade") for p in runs_out.iterdir())
    assert not any(p.name.startswith("splade") for p in results_out.iterdir())


def test_an_exports_files_get_the_users_umask(exported, tmp_path):
    """Weights others on the machine can load: 0644 files and 0755 folders under umask 022 (were 0600)."""
    import os
    import stat

    out = tmp_path / "out"
    old = os.umask(0o022)
    try:
        assert export.main(_argv(exported, out)) == 0
    finally:
        os.umask(old)
    modes = {str(p.relative_to(out)): stat.S_IMODE(p.stat().st_mode) for p in [out / exported.name, *out.rglob("*")]}
    assert modes[exported.name] == 0o755
    assert modes[f"{exported.name}/model.safetensors"] == 0o644
    assert set(modes.values()) == {0o755, 0o644}, modes


def test_the_model_card_states_the_per_query_mean_not_the_recorded_one(exported, tmp_path, capsys):
    """A results folder whose results.json says nDCG@10 0.9999 while its per-query values average 0.6000:
    the card gives 0.6000 over the 2 queries (it used to copy 0.9999)."""
    import dataclasses

    from benchmark.report.results import read_results

    root = exported.parents[1]
    results = read_results(root / "results" / "hand")
    [c] = results.conditions
    edited = dataclasses.replace(c, metrics={"nDCG@10": 0.9999, "R@100": 1.0})
    results.conditions = [edited]
    results.perquery = {c.key: {"nDCG@10": {"q1": 0.5, "q2": 0.7}, "R@100": {"q1": 1.0, "q2": 1.0}}}
    folder = publish(results, tmp_path / "results" / "hand")
    assert json.loads((folder / "results.json").read_text())["conditions"][0]["metrics"]["nDCG@10"] == 0.9999
    capsys.readouterr()
    out = tmp_path / "out"
    argv = _argv(exported, out)
    argv[argv.index("--results-dir") + 1] = str(tmp_path / "results")
    assert export.main(argv) == 0
    card = (out / exported.name / "README.md").read_text()
    assert "| scifact (`beir/scifact/test`) | 0.6000 | 1.0000 | 2 |" in card and "0.9999" not in card
    assert "gives nDCG@10 = 0.9999" in capsys.readouterr().err
