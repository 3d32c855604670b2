"""SPLADE training: recipes, the chunked pooling, resume, telemetry, streamed examples, seeds and
the best checkpoint. The outcome rules have their own file (test_outcomes.py).

Training runs use a tiny random BERT (hidden 32, vocabulary 30522) on SciFact train triples
(query, relevant doc, random other doc) with max lengths 16, so each run takes a few seconds.
"""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import pytest
import torch
from transformers import AutoModelForMaskedLM, AutoTokenizer, TrainerCallback

from benchmark.common.errors import BenchmarkError
from benchmark.training.detector import DENSE
from benchmark.training.loop import train_splade
from benchmark.training.outcomes import COLLAPSED, DEGRADED, OK
from benchmark.training.recipe import LOSS_COLUMNS, RECIPES, load_recipe
from benchmark.training.telemetry import COLUMNS
from helpers.tiny_models import tiny_bert, tiny_modernbert
from helpers.triples import scifact_triples

# 4 of the 24 fixture queries are held out as the dev batch (8 in-batch candidates)
TINY = {
    "batch_size": 4,
    "query_max_length": 16,
    "doc_max_length": 16,
    "chunk_size": 4,
    "learning_rate": 1e-3,
    "dev_queries": 4,
    "dev_steps": 2,
    "logging_steps": 2,
}


@pytest.fixture(scope="module")
def triples() -> list[dict[str, str]]:
    """24 (query, relevant doc, random doc) triples from BEIR SciFact train, one per query."""
    return scifact_triples(24)


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
    assert (infonce.loss, infonce.learning_rate, infonce.batch_size, infonce.lambda_q, infonce.lambda_d) == (
        "infonce",
        2e-5,
        128,
        3e-4,
        1e-4,
    )
    assert (marginmse.loss, marginmse.lambda_q, marginmse.lambda_d, marginmse.max_steps) == (
        "marginmse",
        0.5,
        0.4,
        150000,
    )
    smoke = load_recipe("smoke")
    assert (smoke.dataset, smoke.query_max_length, smoke.doc_max_length, smoke.batch_size) == (
        "beir/scifact/train",
        32,
        64,
        32,
    )
    # as published: naver/splade's trainer does not clip gradients; attention pinned; naver keeps the
    # best validation checkpoint, the smoke recipe (no source) its last
    for name in RECIPES:
        recipe = load_recipe(name)
        assert "max_grad_norm = " in RECIPES[name].read_text()  # explicit in every recipe
        assert (recipe.max_grad_norm, recipe.attn_implementation, recipe.stop_on_collapse) == (0.0, "sdpa", False)
    assert (infonce.checkpoint, marginmse.checkpoint, smoke.checkpoint) == ("best", "best", "last")
    assert marginmse.dataset == "sentence-transformers/msmarco:bert-ensemble-margin-mse"
    assert "Hofstätter" in marginmse.description and "not EnsembleDistil" in marginmse.description


def test_unknown_recipe_lists_the_options() -> None:
    with pytest.raises(
        BenchmarkError,
        match=r"unknown recipe 'smok' \(did you mean 'smoke'\?\); valid: .*msmarco-infonce, msmarco-marginmse, smoke",
    ):
        load_recipe("smok")


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (("learning_rate = 3e-4", "lr = 3e-4"), r"bad\.toml: unknown key 'lr'.*Remove or rename it"),
        (("batch_size = 32", 'batch_size = "32"'), r"bad\.toml\.batch_size must be int, got str '32'"),
        (("lambda_q = 1e-3", "lambda_q = true"), r"bad\.toml\.lambda_q must be float, got bool"),
        (
            ("dense_fraction = 0.5", "dense_fraction = 1.5"),
            r"bad\.toml: dense_fraction = 1\.5 must be in \(0, 1\]; fix the value",
        ),
        (
            ('attn_implementation = "sdpa"', 'attn_implementation = "flash"'),
            r"bad\.toml: attn_implementation = 'flash' must be one of sdpa, eager, flash_attention_2",
        ),
        (('checkpoint = "last"', 'checkpoint = "final"'), r"bad\.toml: checkpoint = 'final' must be one of last, best"),
        (("dev_steps = 4", "dev_steps = 3"), r"bad\.toml: dev_steps = 3 must be a multiple of logging_steps = 2"),
        (("stop_on_collapse = false", "stop_on_collapse = 0"), r"bad\.toml\.stop_on_collapse must be bool, got int"),
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

    from benchmark.training.max_pool import SpladeMLM

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


@pytest.mark.parametrize("with_bias", [True, False])
@pytest.mark.parametrize("width,chunk", [(24, 8), (768, 8), (768, 40)])
def test_pooling_blocks_are_linears_bits_and_the_first_arg_max(with_bias: bool, width: int, chunk: int) -> None:
    """The forward's fast parts are exact: each block is ``linear``'s output over that block (the call
    the pooling made before it was fused; the same call on both sides, so the equality holds whatever
    kernels the CPU class dispatches to), and the pooled values and arg-max tokens are those of
    ``max(dim=1)`` over the masked logits, the first token on ties (numpy's argmax, whose
    first-occurrence rule is documented). Non-contiguous blocks, a short last block, one block of the
    whole length, with and without bias, at hidden 24 and 768."""
    from benchmark.training.max_pool import _LogitBlocks, _SpladeMaxPool

    g = torch.Generator().manual_seed(0)
    batch, length, vocab = 6, 37, 3001
    hidden = torch.randn(batch, length, width, generator=g)
    hidden[:, [5, 9, 20]] = hidden[:, 3:4]  # tokens with equal logits in one block (3, 5) and across blocks
    weight = torch.randn(vocab, width, generator=g) * 0.3 / (width / 24) ** 0.5  # logits of one size at every width
    bias = torch.randn(vocab, generator=g) * 0.1 if with_bias else None
    mask = (torch.arange(length)[None, :] < torch.tensor([37, 30, 21, 9, 5, 1])[:, None]).float()

    blocks = _LogitBlocks(hidden, weight, bias, chunk)
    for start in range(0, length, chunk):
        assert torch.equal(blocks.at(start), torch.nn.functional.linear(hidden[:, start : start + chunk], weight, bias))

    class Ctx:
        def save_for_backward(self, *tensors: torch.Tensor) -> None:
            self.saved = tensors

    ctx = Ctx()
    pooled = _SpladeMaxPool.forward(ctx, hidden, mask, weight, bias, chunk)
    # the logits as the forward's blocks compute them (linear over each block, as before the buffer)
    logits = torch.cat(
        [torch.nn.functional.linear(hidden[:, s : s + chunk], weight, bias) for s in range(0, length, chunk)], 1
    )
    logits = (logits * mask[..., None]).numpy()
    best = logits.max(axis=1)
    first = (logits == best[:, None, :]).argmax(axis=1)
    assert torch.equal(pooled, torch.log1p(torch.relu(torch.from_numpy(best))))
    active = pooled > 0
    assert torch.equal(ctx.saved[3][active], torch.from_numpy(first).to(torch.int32)[active])
    assert int((torch.from_numpy(first)[active] == 3).sum()) > 0  # the tie at tokens 3, 5, 9, 20 went to 3


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


def _jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.mark.slow  # it trains
def test_resumed_run_ends_with_the_same_model(tmp_path: Path, bert_dir: Path, triples: list[dict]) -> None:
    """Streamed from triples.jsonl, killed after the step-4 checkpoint and resumed: same model, same
    telemetry, same outcome (the trigger streak started before the kill), same best checkpoint."""
    from sentence_transformers.sparse_encoder import SparseEncoder

    from benchmark.training.dev import DevBatch
    from benchmark.training.max_pool import SpladeMLM

    settings = {
        **TINY,
        "max_steps": 6,
        "save_steps": 2,
        "lambda_q": 1e-2,
        "lambda_d": 1e-2,
        "trigger_patience": 2,
        "checkpoint": "best",
    }
    recipe = load_recipe("smoke")
    source = _jsonl(tmp_path / "triples.jsonl", triples)
    straight = train_splade(bert_dir, source, recipe, tmp_path / "a", progress=False, overrides=settings)

    with pytest.raises(_Kill):
        train_splade(
            bert_dir, source, recipe, tmp_path / "b", progress=False, overrides=settings, callbacks=[_KillAfterSave(4)]
        )
    assert (tmp_path / "b" / "checkpoints" / "checkpoint-4").is_dir()
    assert not (tmp_path / "b" / "record.json").exists()
    resumed = train_splade(bert_dir, source, recipe, tmp_path / "b", progress=False, overrides=settings)

    # the random tiny BERT is dense (about 26k of 30522 terms indexed), scores at chance and maps every
    # query to the same terms; λ is final from step 3 (warm-up: 2 of 6 steps), so the rows at steps 4
    # and 6 are armed and every trigger fires at step 6 (patience 2); the resumed run counted row 4
    # before the kill
    for record, resumed_from in ((straight, None), (resumed, 4)):
        assert (record["outcome"], record["outcome_reason"], record["outcome_step"], record["steps"]) == (
            COLLAPSED,
            DENSE,
            6,
            6,
        )
        assert record["triggers"] == {"dense": 6, "degenerate_support": 6, "chance_ranking": 6}
        assert (record["stopped_early"], record["triggers_armed_step"], record["resumed_from_step"]) == (
            False,
            4,
            resumed_from,
        )
    timing = ("train_seconds", "steps_per_second", "examples_per_second", "resumed_from_step")
    assert {k: v for k, v in straight.items() if k not in timing} == {
        k: v for k, v in resumed.items() if k not in timing
    }
    a, b = _weights(tmp_path / "a" / "model"), _weights(tmp_path / "b" / "model")
    assert a.keys() == b.keys()
    for name in a:
        torch.testing.assert_close(b[name], a[name], rtol=0, atol=0, msg=name)
    assert any(not torch.equal(a[n], w) for n, w in _weights(bert_dir).items())  # it did train

    # outputs: the model + tokenizer load, telemetry has every column, checkpoints and examples are gone
    out = tmp_path / "a"
    AutoTokenizer.from_pretrained(out / "model")
    assert sorted(p.name for p in out.iterdir()) == [
        "fingerprint.json",
        "model",
        "record.json",
        "telemetry.csv",
        "telemetry.png",
    ]
    rows_a, rows_b = _csv(out / "telemetry.csv"), _csv(tmp_path / "b" / "telemetry.csv")
    assert tuple(rows_a[0]) == COLUMNS
    assert [r["step"] for r in rows_a] == [r["step"] for r in rows_b] == ["0", "1", "2", "4", "6"]
    assert [r["event"] for r in rows_a] == ["", "", "", "", "dense;degenerate_support;chance_ranking"]
    assert [r["dev_mrr"] != "" for r in rows_a] == [
        True,
        False,
        True,
        True,
        True,
    ]  # step 0, every dev_steps = 2, the end
    for ra, rb in zip(rows_a[1:], rows_b[1:]):
        for column in (
            "loss",
            "ranking_loss",
            "flops_reg_q",
            "flops_reg_d",
            "nnz_q",
            "nnz_d",
            "grad_norm",
            "lambda_q",
            "low_support_q",
            "query_cosine",
        ):
            assert math.isclose(float(ra[column]), float(rb[column]), rel_tol=1e-6), (ra["step"], column)
    assert [ra["dev_mrr"] for ra in rows_a] == [rb["dev_mrr"] for rb in rows_b]
    last = rows_a[-1]
    assert float(last["lambda_q"]) == float(last["lambda_d"]) == 1e-2  # the warm-up ended (2 of 6 steps)
    assert float(rows_a[1]["lambda_q"]) == 0.0  # quadratic warm-up starts at 0
    assert math.isclose(float(last["loss"]), straight["final_loss"], rel_tol=1e-9)
    assert 0 < float(last["nnz_q"]) <= 30522 and float(last["head_norm"]) > 0 and float(last["grad_norm"]) > 0
    assert straight["hyperparameters"]["max_steps"] == 6 and straight["recipe"] == "smoke"
    # 24 triples of 24 queries, the first 4 held out; attention and clipping as the recipe pins them
    assert (straight["lambda_q"], straight["lambda_d"], straight["examples"]) == (1e-2, 1e-2, 20)
    assert (straight["dev_queries"], straight["dev_candidates"], straight["examples_source"]) == (4, 8, str(source))
    assert (straight["attn_implementation"], straight["max_grad_norm"], straight["seed"]) == ("sdpa", 0.0, 42)

    # checkpoint "best": the published weights are those of the best dev MRR@10 after step 0, and
    # re-evaluating them gives that value (same code, same machine: equal, not close)
    dev_values = {int(r["step"]): float(r["dev_mrr"]) for r in rows_a if r["dev_mrr"] and r["step"] != "0"}
    best_step = max(dev_values, key=lambda s: (dev_values[s], -s))
    assert (straight["checkpoint"], straight["checkpoint_step"], straight["dev_mrr_best_step"]) == (
        "best",
        best_step,
        best_step,
    )
    assert straight["dev_mrr_initial"] == float(rows_a[0]["dev_mrr"]) and straight["dev_mrr_final"] == dev_values[6]
    published = SparseEncoder(
        modules=[SpladeMLM(str(out / "model"), chunk_size=4, query_length=16, document_length=16)]
    )
    rr = DevBatch.from_rows(triples[:4]).reciprocal_ranks(published, batch_size=4)
    assert sum(rr) / len(rr) == straight["dev_mrr_best"] == dev_values[best_step]
    # the outcome and the per-query values the report compares are those of the published checkpoint, not the last
    assert straight["dev_rr_published"] == rr and straight["dev_mrr_published"] == dev_values[best_step]

    assert json.loads((out / "record.json").read_text()) == straight
    # a finished folder is not trained again
    assert train_splade(bert_dir, source, recipe, out, progress=False, overrides=settings) == straight


@pytest.mark.slow  # it trains
def test_two_seeds_give_two_runs(tmp_path: Path, bert_dir: Path, triples: list[dict]) -> None:
    """The seed reaches the data order and the model; the record keeps it."""
    settings = {**TINY, "max_steps": 2, "save_steps": 100, "dev_queries": 0, "logging_steps": 1, "dev_steps": 1}
    runs = {
        seed: train_splade(
            bert_dir, triples, load_recipe("smoke"), tmp_path / str(seed), seed=seed, progress=False, overrides=settings
        )
        for seed in (42, 43)
    }
    assert [runs[s]["seed"] for s in (42, 43)] == [42, 43]
    assert runs[42]["final_loss"] != runs[43]["final_loss"]
    a, b = _weights(tmp_path / "42" / "model"), _weights(tmp_path / "43" / "model")
    assert any(not torch.equal(a[n], b[n]) for n in a)


def test_untied_rescaled_head_is_loaded_as_saved(tmp_path: Path, bert_dir: Path) -> None:
    from benchmark.training.loop import _check_head_as_saved
    from benchmark.training.max_pool import SpladeMLM

    folder = _head_variant(bert_dir, tmp_path / "scaled", weight_scale=0.25, bias=0.0)
    embeddings = AutoModelForMaskedLM.from_pretrained(bert_dir).get_input_embeddings().weight
    module = SpladeMLM(str(folder))
    assert module.auto_model.config.tie_word_embeddings is False
    torch.testing.assert_close(module.decoder.weight, embeddings * 0.25, rtol=0, atol=0)
    _check_head_as_saved(folder, module.auto_model)
    with torch.no_grad():
        module.decoder.weight.mul_(4.0)  # what a silent re-tie would look like
    with pytest.raises(
        BenchmarkError, match=r"differs from the saved 'cls\.predictions\.decoder\.weight'.*tie_word_embeddings = false"
    ):
        _check_head_as_saved(folder, module.auto_model)


def test_examples_are_checked(tmp_path: Path, bert_dir: Path, triples: list[dict]) -> None:
    recipe = load_recipe("smoke")
    with pytest.raises(
        BenchmarkError,
        match=r"examples\[1\] has \['positive', 'query'\]; recipe loss 'infonce' needs keys query, positive, negative",
    ):
        train_splade(
            bert_dir, [triples[0], {"query": "q", "positive": "p"}, *triples], recipe, tmp_path, overrides=TINY
        )
    with pytest.raises(
        BenchmarkError,
        match=r"3 training examples after holding out 4 dev queries are fewer than one batch \(batch_size = 4",
    ):
        train_splade(bert_dir, triples[:7], recipe, tmp_path / "few", overrides=TINY)
    with pytest.raises(
        BenchmarkError, match=r"a list of 3 examples has 3 distinct queries, fewer than dev_queries = 4 to hold out"
    ):
        train_splade(bert_dir, triples[:3], recipe, tmp_path / "dev", overrides=TINY)
    with pytest.raises(BenchmarkError, match=r"examples\[0\]\['score'\] is str"):
        train_splade(
            bert_dir, [{**t, "score": "1"} for t in triples], recipe, tmp_path, overrides={**TINY, "loss": "marginmse"}
        )
    assert LOSS_COLUMNS["marginmse"] == ("query", "positive", "negative", "score")
    # a triples file: the line (or row) and the key are named, before any model is loaded
    good = json.dumps(triples[0])
    cases = [
        (f"{good}\nnot json\n", r"triples\.jsonl: line 2 is not JSON"),
        (
            f'{good}\n{{"query": "q", "positive": "p"}}\n',
            r"triples\.jsonl: line 2 has \['positive', 'query'\]; recipe loss 'infonce' needs keys query, positive, "
            r"negative",
        ),
        (
            f'{good}\n\n{{"query": 3, "positive": "p", "negative": "n"}}\n',
            r"triples\.jsonl: line 3\['query'\] is int 3, expected a str",
        ),
    ]
    for text, message in cases:
        (tmp_path / "triples.jsonl").write_text(text)
        with pytest.raises(BenchmarkError, match=message):
            train_splade(bert_dir, tmp_path / "triples.jsonl", recipe, tmp_path / "bad", overrides=TINY)
    with pytest.raises(
        BenchmarkError, match=r"triples file '.*missing\.jsonl' does not exist; run the triples stage first"
    ):
        train_splade(bert_dir, tmp_path / "missing.jsonl", recipe, tmp_path / "bad", overrides=TINY)


@pytest.mark.slow  # it trains
def test_marginmse_trains(tmp_path: Path, bert_dir: Path, triples: list[dict]) -> None:
    examples = [{**t, "score": float(i % 5)} for i, t in enumerate(triples)]
    record = train_splade(
        bert_dir,
        examples,
        load_recipe("msmarco-marginmse"),
        tmp_path,
        progress=False,
        overrides={**TINY, "max_steps": 2, "logging_steps": 1, "dev_steps": 1, "checkpoint": "last"},
    )
    # two logging rows: fewer than the recipe's patience (10), so no trigger; whether the random model's
    # dev MRR fell (degraded) is the held-out rule's business, tested in test_outcomes.py
    assert (record["steps"], record["recipe"], record["triggers"]) == (2, "msmarco-marginmse", {})
    assert record["outcome"] in (OK, DEGRADED) and math.isfinite(record["final_loss"])
    rows = _csv(tmp_path / "telemetry.csv")
    assert all(math.isfinite(float(r["r2"])) for r in rows[1:])  # R² of the margins, for the chance trigger
