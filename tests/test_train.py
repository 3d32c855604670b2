"""SPLADE training: recipes, the chunked pooling, resume, telemetry and collapse.

Training runs use a tiny random BERT (hidden 32, vocabulary 30522) on SciFact train triples
(query, relevant doc, random other doc) with max lengths 16, so each run takes a few seconds.
"""

from __future__ import annotations

import csv
import json
import math
import random
from pathlib import Path

import pytest
import torch
from _tiny_models import tiny_bert, tiny_modernbert
from transformers import AutoModelForMaskedLM, AutoTokenizer, TrainerCallback

from benchmark.errors import BenchmarkError
from benchmark.train import RECIPES, load_recipe, train_splade
from benchmark.training.recipe import LOSS_COLUMNS
from benchmark.training.telemetry import COLUMNS, DENSE, NAN, ZERO, CollapseDetector

TINY = {"batch_size": 4, "query_max_length": 16, "doc_max_length": 16, "chunk_size": 4, "learning_rate": 1e-3}


@pytest.fixture(scope="module")
def triples() -> list[dict[str, str]]:
    """24 (query, relevant doc, random doc) triples from BEIR SciFact train, one per query."""
    import ir_datasets

    ds = ir_datasets.load("beir/scifact/train")
    queries = {q.query_id: q.text for q in ds.queries_iter()}
    store = ds.docs_store()
    doc_ids = sorted(d.doc_id for d in ds.docs_iter())
    rng = random.Random(0)
    out, seen = [], set()
    for qrel in ds.qrels_iter():
        if qrel.relevance > 0 and qrel.query_id not in seen:
            seen.add(qrel.query_id)
            pos, neg = store.get(qrel.doc_id), store.get(rng.choice(doc_ids))
            out.append({"query": queries[qrel.query_id], "positive": f"{pos.title} {pos.text}", "negative": f"{neg.title} {neg.text}"})
        if len(out) == 24:
            return out
    raise AssertionError("SciFact train has fewer than 24 judged queries")


@pytest.fixture(scope="module")
def bert_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_bert(tmp_path_factory.mktemp("models"))


def _weights(folder: Path) -> dict[str, torch.Tensor]:
    return AutoModelForMaskedLM.from_pretrained(folder).state_dict()


def _csv(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def _head_variant(src: Path, dst: Path, weight_scale: float, bias: float) -> Path:
    """A copy of ``src`` whose MLM head is hand-set: projection × weight_scale, vocabulary bias = bias."""
    model = AutoModelForMaskedLM.from_pretrained(src)
    model.config.tie_word_embeddings = False
    untied = AutoModelForMaskedLM.from_config(model.config)
    untied.load_state_dict(model.state_dict())
    decoder = untied.get_output_embeddings()
    with torch.no_grad():
        decoder.weight.mul_(weight_scale)
        decoder.bias.fill_(bias)
        untied.cls.predictions.bias.fill_(bias)
    untied.save_pretrained(dst)
    AutoTokenizer.from_pretrained(src).save_pretrained(dst)
    return dst


# ---------------------------------------------------------------- recipes


def test_packaged_recipes_load_and_cite_a_source() -> None:
    assert {"msmarco-infonce", "msmarco-marginmse", "smoke"} <= set(RECIPES)
    for name in RECIPES:
        recipe = load_recipe(name)
        assert recipe.name == name
        assert RECIPES[name].read_text().startswith("# ")  # the source comment
    infonce, marginmse = load_recipe("msmarco-infonce"), load_recipe("msmarco-marginmse")
    assert (infonce.loss, infonce.learning_rate, infonce.batch_size, infonce.lambda_q, infonce.lambda_d) == ("infonce", 2e-5, 128, 3e-4, 1e-4)
    assert (marginmse.loss, marginmse.lambda_q, marginmse.lambda_d, marginmse.max_steps) == ("marginmse", 0.5, 0.4, 150000)
    smoke = load_recipe("smoke")
    assert (smoke.dataset, smoke.query_max_length, smoke.doc_max_length, smoke.batch_size) == ("beir/scifact/train", 32, 64, 32)


def test_unknown_recipe_lists_the_options() -> None:
    with pytest.raises(BenchmarkError, match=r"unknown recipe 'smok' \(did you mean 'smoke'\?\); valid: .*msmarco-infonce, msmarco-marginmse, smoke"):
        load_recipe("smok")


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (("learning_rate = 3e-4", "lr = 3e-4"), r"bad\.toml: unknown key 'lr'.*Remove or rename it"),
        (("batch_size = 32", 'batch_size = "32"'), r"bad\.toml\.batch_size must be int, got str '32'"),
        (("lambda_q = 1e-3", "lambda_q = true"), r"bad\.toml\.lambda_q must be float, got bool"),
        (("dense_fraction = 0.5", "dense_fraction = 1.5"), r"bad\.toml: dense_fraction = 1\.5 must be in \(0, 1\]; fix the value"),
        (('loss = "infonce"', 'loss = "kl"'), r"bad\.toml: unknown loss 'kl'; valid: infonce, marginmse"),
        (("save_steps = 10\n", ""), r"bad\.toml: missing required key 'save_steps'; add it"),
    ],
)
def test_recipe_file_errors_name_key_file_and_fix(tmp_path: Path, edit: tuple[str, str], message: str) -> None:
    text = RECIPES["smoke"].read_text()
    assert edit[0] in text
    bad = tmp_path / "bad.toml"
    bad.write_text(text.replace(edit[0], edit[1]))
    with pytest.raises(BenchmarkError, match=message):
        load_recipe(bad)


def test_overrides_are_validated() -> None:
    smoke = load_recipe("smoke")
    assert smoke.with_overrides({"max_steps": 5, "learning_rate": 1}).learning_rate == 1.0
    with pytest.raises(BenchmarkError, match=r"overrides: unknown key 'max_step' \(did you mean 'max_steps'\?\)"):
        smoke.with_overrides({"max_step": 5})
    with pytest.raises(BenchmarkError, match=r"overrides\.batch_size must be int, got float 4\.5"):
        smoke.with_overrides({"batch_size": 4.5})


# ---------------------------------------------------------------- pooling


def _reference_and_ours(folder: Path, chunk: int):
    from sentence_transformers.base.modules.transformer import Transformer
    from sentence_transformers.sparse_encoder import SparseEncoder
    from sentence_transformers.sparse_encoder.modules import SpladePooling

    from benchmark.training.pooling import SpladeMLM

    ref = SparseEncoder(modules=[Transformer(str(folder), transformer_task="fill-mask"), SpladePooling("max")])
    ours = SparseEncoder(modules=[SpladeMLM(str(folder), chunk_size=chunk)])
    ours.load_state_dict(ref.state_dict())
    for model in (ref, ours):
        model.train()
        for module in model.modules():
            if isinstance(module, torch.nn.Dropout):
                module.p = 0.0
    return ref, ours


TEXTS = ["the cat sat on the mat", "a dog", "protein folding in yeast cells is slow and costly to measure"]


def test_chunked_pooling_equals_sentence_transformers_splade(bert_dir: Path) -> None:
    """Same vectors and same gradients as Transformer(fill-mask) + SpladePooling(max)."""
    ref, ours = _reference_and_ours(bert_dir, chunk=3)
    features = ref.preprocess(TEXTS)
    e_ref = ref(dict(features))["sentence_embedding"]
    e_ours = ours(dict(features))["sentence_embedding"]
    assert e_ours.shape == (3, 30522)
    torch.testing.assert_close(e_ours, e_ref, rtol=1e-5, atol=1e-6)  # matmul blocking differs
    weights = torch.randn(e_ref.shape, generator=torch.Generator().manual_seed(0))
    (e_ref * weights).sum().backward()
    (e_ours * weights).sum().backward()
    for (name, p_ref), (_, p_ours) in zip(ref.named_parameters(), ours.named_parameters()):
        scale = float(p_ref.grad.abs().max())  # float32 sums in another order: compare relative to the size
        torch.testing.assert_close(p_ours.grad, p_ref.grad, rtol=1e-4, atol=1e-5 * scale + 1e-8, msg=name)


def test_chunked_pooling_never_builds_batch_by_length_by_vocab(tmp_path: Path) -> None:
    """On a 50k vocabulary (tiny ModernBERT) no tensor of forward or backward reaches B·L·V."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class LargestTensor(TorchDispatchMode):
        largest = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            for t in out if isinstance(out, (tuple, list)) else [out]:
                if isinstance(t, torch.Tensor) and not t.is_sparse:
                    self.largest = max(self.largest, t.numel())
            return out

    folder = tiny_modernbert(tmp_path, vocab_size=50368)
    ref, ours = _reference_and_ours(folder, chunk=4)
    texts = [" ".join(["word"] * 60), *TEXTS]
    features = ref.preprocess(texts)
    batch, length = features["input_ids"].shape
    blv = batch * length * 50368
    largest = {}
    for name, model in (("ref", ref), ("ours", ours)):
        with LargestTensor() as mode:
            embedding = model(dict(features))["sentence_embedding"]
            embedding.sum().backward()
        largest[name] = mode.largest
        assert embedding.shape == (batch, 50368)
    assert largest["ref"] >= blv  # the check sees the full logits when they exist
    # at most one [B, chunk, V] block, or a tensor the size of the [V, H] projection (its gradient)
    hidden = ours[0].auto_model.config.hidden_size
    assert largest["ours"] == max(batch * 4, hidden) * 50368 < blv / 3
    e_ref, e_ours = (m(dict(features))["sentence_embedding"] for m in (ref, ours))
    torch.testing.assert_close(e_ours, e_ref, rtol=1e-5, atol=1e-6)  # matmul blocking differs


# ---------------------------------------------------------------- training, resume, outputs


class _Kill(Exception):
    """Stands in for a killed process."""


class _KillAfterSave(TrainerCallback):
    def __init__(self, step: int) -> None:
        self.step = step

    def on_save(self, args, state, control, **kwargs):
        if state.global_step == self.step:
            raise _Kill


def test_resumed_run_ends_with_the_same_model(tmp_path: Path, bert_dir: Path, triples: list[dict]) -> None:
    settings = {**TINY, "max_steps": 6, "logging_steps": 2, "save_steps": 2, "lambda_q": 1e-2, "lambda_d": 1e-2}
    recipe = load_recipe("smoke")
    straight = train_splade(bert_dir, triples, recipe, tmp_path / "a", progress=False, overrides=settings)

    with pytest.raises(_Kill):
        train_splade(bert_dir, triples, recipe, tmp_path / "b", progress=False, overrides=settings, callbacks=[_KillAfterSave(4)])
    assert (tmp_path / "b" / "checkpoints" / "checkpoint-4").is_dir()
    assert not (tmp_path / "b" / "record.json").exists()
    resumed = train_splade(bert_dir, triples, recipe, tmp_path / "b", progress=False, overrides=settings)

    assert (straight["status"], straight["steps"], straight["resumed_from_step"]) == ("ok", 6, None)
    assert (resumed["status"], resumed["steps"], resumed["resumed_from_step"]) == ("ok", 6, 4)
    a, b = _weights(tmp_path / "a" / "model"), _weights(tmp_path / "b" / "model")
    assert a.keys() == b.keys()
    for name in a:
        torch.testing.assert_close(b[name], a[name], rtol=0, atol=0, msg=name)
    assert any(not torch.equal(a[n], w) for n, w in _weights(bert_dir).items())  # it did train

    # outputs: the model + tokenizer load, telemetry has every column, checkpoints are gone
    out = tmp_path / "a"
    AutoTokenizer.from_pretrained(out / "model")
    assert sorted(p.name for p in out.iterdir()) == ["fingerprint.json", "model", "record.json", "telemetry.csv", "telemetry.png"]
    rows_a, rows_b = _csv(out / "telemetry.csv"), _csv(tmp_path / "b" / "telemetry.csv")
    assert tuple(rows_a[0]) == COLUMNS
    assert [r["step"] for r in rows_a] == [r["step"] for r in rows_b] == ["1", "2", "4", "6"]
    for ra, rb in zip(rows_a, rows_b):
        for column in ("loss", "ranking_loss", "flops_reg_q", "flops_reg_d", "nnz_q", "nnz_d", "grad_norm", "lambda_q"):
            assert math.isclose(float(ra[column]), float(rb[column]), rel_tol=1e-6), (ra["step"], column)
    last = rows_a[-1]
    assert float(last["lambda_q"]) == float(last["lambda_d"]) == 1e-2  # the warm-up ended (2 of 6 steps)
    assert float(rows_a[0]["lambda_q"]) == 0.0  # quadratic warm-up starts at 0
    assert math.isclose(float(last["loss"]), straight["final_loss"], rel_tol=1e-9)
    assert 0 < float(last["nnz_q"]) <= 30522 and float(last["head_norm"]) > 0 and float(last["grad_norm"]) > 0
    assert straight["hyperparameters"]["max_steps"] == 6 and straight["recipe"] == "smoke"
    assert (straight["lambda_q"], straight["lambda_d"], straight["examples"]) == (1e-2, 1e-2, 24)
    assert json.loads((out / "record.json").read_text()) == straight
    # a finished folder is not trained again
    assert train_splade(bert_dir, triples, recipe, out, progress=False, overrides=settings) == straight


def test_untied_rescaled_head_is_loaded_as_saved(tmp_path: Path, bert_dir: Path) -> None:
    from benchmark.training.loop import _check_head_as_saved
    from benchmark.training.pooling import SpladeMLM

    folder = _head_variant(bert_dir, tmp_path / "scaled", weight_scale=0.25, bias=0.0)
    embeddings = AutoModelForMaskedLM.from_pretrained(bert_dir).get_input_embeddings().weight
    module = SpladeMLM(str(folder))
    assert module.auto_model.config.tie_word_embeddings is False
    torch.testing.assert_close(module.decoder.weight, embeddings * 0.25, rtol=0, atol=0)
    _check_head_as_saved(folder, module.auto_model)
    with torch.no_grad():
        module.decoder.weight.mul_(4.0)  # what a silent re-tie would look like
    with pytest.raises(BenchmarkError, match=r"differs from the saved 'cls\.predictions\.decoder\.weight'.*tie_word_embeddings = false"):
        _check_head_as_saved(folder, module.auto_model)


def test_examples_are_checked(tmp_path: Path, bert_dir: Path, triples: list[dict]) -> None:
    recipe = load_recipe("smoke")
    with pytest.raises(BenchmarkError, match=r"examples\[1\] has \['positive', 'query'\]; recipe loss 'infonce' needs keys query, positive, negative"):
        train_splade(bert_dir, [triples[0], {"query": "q", "positive": "p"}, *triples], recipe, tmp_path, overrides=TINY)
    with pytest.raises(BenchmarkError, match=r"3 training examples are fewer than one batch \(batch_size = 4"):
        train_splade(bert_dir, triples[:3], recipe, tmp_path, overrides=TINY)
    with pytest.raises(BenchmarkError, match=r"examples\[0\]\['score'\] is str"):
        train_splade(bert_dir, [{**t, "score": "1"} for t in triples], recipe, tmp_path, overrides={**TINY, "loss": "marginmse"})
    assert LOSS_COLUMNS["marginmse"] == ("query", "positive", "negative", "score")


def test_marginmse_trains(tmp_path: Path, bert_dir: Path, triples: list[dict]) -> None:
    examples = [{**t, "score": 2.0} for t in triples]
    record = train_splade(bert_dir, examples, load_recipe("msmarco-marginmse"), tmp_path, progress=False,
                          overrides={**TINY, "max_steps": 2, "logging_steps": 1})
    assert (record["status"], record["steps"], record["recipe"]) == ("ok", 2, "msmarco-marginmse")
    assert math.isfinite(record["final_loss"])


# ---------------------------------------------------------------- collapse


def _row(step: int, nnz_q: float = 40.0, nnz_d: float = 100.0, loss: float = 1.0) -> dict:
    return {"step": step, "loss": loss, "ranking_loss": loss, "nnz_q": nnz_q, "nnz_d": nnz_d}


def test_collapse_detector_on_synthetic_telemetry() -> None:
    detector = CollapseDetector(vocab_size=1000, dense_fraction=0.5, dense_patience=3)
    assert detector.check_row(_row(1)) is None
    assert detector.check_row(_row(2, nnz_d=600)) is None  # dense 1
    assert detector.check_row(_row(3, nnz_d=600)) is None  # dense 2
    assert detector.check_row(_row(4, nnz_d=500)) is None  # exactly 0.5 is not denser: run resets
    assert detector.check_row(_row(5, nnz_q=501)) is None
    assert detector.check_row(_row(6, nnz_q=900)) is None
    assert detector.check_row(_row(7, nnz_d=700)) == DENSE
    assert (detector.step, detector.reason) == (7, DENSE)
    assert detector.detail == "vectors denser than 0.5 of the vocabulary for 3 logging steps (step 7: nnz_q=40.0, nnz_d=700.0 of 1000)"
    assert detector.check_row(_row(8, loss=math.nan)) == DENSE  # the first reason stays

    zero = CollapseDetector(1000, 0.5, 3)
    assert zero.check_row(_row(1, nnz_q=0.5)) is None
    assert zero.check_row(_row(2, nnz_d=0.0)) == ZERO
    assert zero.detail == "every document vector is all-zero at step 2"
    assert CollapseDetector(1000, 0.5, 3).check_row(_row(3, nnz_q=0.0)) == ZERO

    nan = CollapseDetector(1000, 0.5, 3)
    assert nan.check_finite(4, True) is None
    assert nan.check_finite(5, False) == NAN and nan.step == 5
    assert CollapseDetector(1000, 0.5, 3).check_row(_row(9, loss=math.inf)) == NAN

    resumed = CollapseDetector(1000, 0.5, 3)
    resumed.replay([_row(1, nnz_d=600), _row(2, nnz_d=600)])
    assert (resumed.reason, resumed.dense_run) == (None, 2)
    assert resumed.check_row(_row(3, nnz_d=600)) == DENSE


@pytest.mark.parametrize(
    ("weight_scale", "bias", "reason", "step"),
    [
        (1.0, math.inf, NAN, 1),  # infinite logits: inf scores, NaN InfoNCE
        (0.0, -100.0, ZERO, 1),  # every logit negative: nothing survives relu
        (0.0, 10.0, DENSE, 2),  # every logit positive: all 30522 terms active, 2 logging steps in a row
    ],
)
def test_forced_collapse_is_a_result(tmp_path: Path, bert_dir: Path, triples: list[dict], weight_scale: float, bias: float, reason: str, step: int) -> None:
    folder = _head_variant(bert_dir, tmp_path / "head", weight_scale, bias)
    overrides = {**TINY, "max_steps": 6, "logging_steps": 1, "save_steps": 100, "dense_patience": 2}
    record = train_splade(folder, triples, load_recipe("smoke"), tmp_path / "run", progress=False, overrides=overrides)
    assert (record["status"], record["collapse_reason"], record["collapse_step"], record["steps"]) == ("collapsed", reason, step, step)
    rows = _csv(tmp_path / "run" / "telemetry.csv")
    assert [int(r["step"]) for r in rows] == list(range(1, step + 1))
    assert AutoModelForMaskedLM.from_pretrained(tmp_path / "run" / "model").config.vocab_size == 30522
    assert not (tmp_path / "run" / "checkpoints").exists()
