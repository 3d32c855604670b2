"""Every encode path (screen) publishes the same vectors, bit for bit, and they are the canonical ones.

The canonical value of a term is ``fl32(fl64(max_t h_t·w_j + b_j))`` (exact real, rounded to float64
then float32); the weight is ``fl32(log1p(value))`` in float64. The oracle here computes it with
``math.fsum`` (exact) from the hidden states the model produces for the same batch.
"""

from __future__ import annotations

import copy
import itertools
import math

import numpy as np
import pytest
import torch

from benchmark.splade import probe, screens
from benchmark.splade.encoder import encode, reference_encode
from benchmark.splade.forward import _capture, _Captured, _pad, tokenize
from benchmark.splade.impacts import quantise
from benchmark.splade.pooling import _sparse_rows
from benchmark.splade.screens import SCREENS
from helpers.tiny_models import tiny_modernbert

PATHS = list(SCREENS)


def _load(path):
    from transformers import AutoModelForMaskedLM, AutoTokenizer

    return AutoModelForMaskedLM.from_pretrained(path).eval(), AutoTokenizer.from_pretrained(path)


@pytest.fixture(scope="module")
def real_bert_tiny(bert_tiny):
    return _load(bert_tiny)


@pytest.fixture(scope="module")
def scifact_docs():
    """Eight real SciFact abstracts (the start of the corpus) and one very short text."""
    from benchmark.data.datasets import load_source

    docs, _, _ = load_source("beir/scifact/test")
    return [text for _, text in itertools.islice(docs, 8)] + ["BRCA1"]


def _same(a, b) -> bool:
    return len(a) == len(b) and all(np.array_equal(x[0], y[0]) and np.array_equal(x[1], y[1]) for x, y in zip(a, b))


def _hidden(model, tokenizer, texts, max_length):
    """The decoder inputs of ``texts`` as one batch, in encode's order and padding (longest first)."""
    tokens = tokenize(tokenizer, texts, max_length).ids
    order = np.argsort(-np.array([len(t) for t in tokens]), kind="stable")
    ids, mask = _pad(tokens, order, tokenizer.pad_token_id, torch.device("cpu"))
    hook = model.get_output_embeddings().register_forward_pre_hook(_capture)
    try:
        with torch.inference_mode():
            model(input_ids=ids, attention_mask=mask)
    except _Captured as captured:
        hidden = captured.hidden
    finally:
        hook.remove()
    return order, [hidden[i, : int(mask[i].sum())].numpy() for i in range(len(order))]


def _oracle(model, tokenizer, texts, max_length, vectors, slack=1e-6):
    """Check ``vectors`` against exact sums: every returned weight, and every term that could be positive."""
    weight = model.get_output_embeddings().weight.detach().numpy()
    bias = model.get_output_embeddings().bias.detach().numpy()
    order, hiddens = _hidden(model, tokenizer, texts, max_length)
    checked = 0
    for row, h in zip(order, hiddens):
        approx = (h.astype(np.float64) @ weight.astype(np.float64).T).max(axis=0) + bias
        # float64 is within ~1e-12 of exact here; anything above -slack is checked exactly
        ids, weights = vectors[row]
        got = dict(zip(ids.tolist(), weights.tolist()))
        for j in np.nonzero(approx > -slack)[0].tolist():
            exact = max(
                math.fsum([*(t.astype(np.float64) * weight[j].astype(np.float64)).tolist(), float(bias[j])]) for t in h
            )
            value = np.float32(exact)
            want = np.float32(np.log1p(np.float64(value))) if value > 0 else None
            assert got.pop(j, None) == want, (row, j, exact)
            checked += 1
        assert not got, f"terms returned that are not positive: {sorted(got)[:5]}"
    return checked


def test_every_path_gives_the_same_vectors_on_scifact(real_bert_tiny, scifact_docs, batch_size=4):
    model, tokenizer = real_bert_tiny
    outs = {p: encode(model, tokenizer, scifact_docs, max_length=128, batch_size=batch_size, path=p) for p in PATHS}
    for p in PATHS[1:]:
        assert _same(outs[p], outs[PATHS[0]]), p
    ref = reference_encode(model, tokenizer, scifact_docs, max_length=128)
    ours = torch.zeros_like(ref)
    for i, (ids, w) in enumerate(outs[PATHS[0]]):
        ours[i, torch.from_numpy(ids).long()] = torch.from_numpy(w)
    # reference_encode: float32 logits from a blocked sgemm (error ≤ γ_128·‖h‖‖w‖ ≈ 7.6e-6·60) then a
    # float32 log1p; the canonical value is the correctly rounded one: they differ by a few float32 ulps.
    torch.testing.assert_close(ours, ref, rtol=1e-5, atol=1e-5)
    assert (ref > 0).sum() > 1000


def test_vectors_are_the_exact_sums(real_bert_tiny, scifact_docs):
    model, tokenizer = real_bert_tiny
    texts = scifact_docs[:3]
    vectors = encode(model, tokenizer, texts, max_length=64, batch_size=8, path="bf16")
    assert _oracle(model, tokenizer, texts, 64, vectors) > 300


def _shift_bias(model, tokenizer, text, max_length, target):
    """A copy of ``model`` whose bias puts max_t h_t·w_j + b_j of ``text`` (alone) at ``target(j)``."""
    model = copy.deepcopy(model)
    _, (h,) = _hidden(model, tokenizer, [text], max_length)
    decoder = model.get_output_embeddings()
    top = (torch.from_numpy(h).double() @ decoder.weight.detach().double().T).amax(dim=0)
    with torch.no_grad():
        decoder.bias.copy_((target - top).float())
    return model


def test_half_impact_boundaries_are_decided_the_same_by_every_path(real_bert_tiny):
    """Terms whose weight·100 sits within a few float32 ulps of k + ½: the last bit decides the impact."""
    model, tokenizer = real_bert_tiny
    text = "Vitamin D deficiency is associated with an increased risk of tuberculosis."
    vocab = model.config.vocab_size
    gen = torch.Generator().manual_seed(0)
    halves = (torch.randint(0, 300, (vocab,), generator=gen).double() + 0.5) / 100
    target = torch.expm1(halves) * (1 + 4e-7 * torch.randn(vocab, generator=gen, dtype=torch.float64))
    boundary = _shift_bias(model, tokenizer, text, 64, target)
    outs = {p: encode(boundary, tokenizer, [text], max_length=64, path=p) for p in PATHS}
    for p in PATHS[1:]:
        assert _same(outs[p], outs[PATHS[0]]), p
    ids, weights = outs[PATHS[0]][0]
    assert len(ids) > 0.99 * vocab
    impacts = quantise(weights)
    scaled = weights.astype(np.float64) * 100
    # every term sits on a .5 boundary, up to the float32 rounding of the shifted bias (|b| < 16: ulp ≤ 2⁻¹⁹,
    # i.e. 2e-4 in w·100) and the 4e-7 relative jitter (8e-5 at w·100 = 300)
    assert np.abs(scaled - np.floor(scaled) - 0.5).max() < 5e-4
    assert len(set((impacts - np.floor(scaled)).tolist())) == 2  # rounded both ways: the test bites
    assert _oracle(boundary, tokenizer, [text], 64, outs["float32"], slack=0) > 0.99 * vocab


def test_relu_kink_terms_are_kept_by_every_path_and_lost_without_margin(real_bert_tiny, monkeypatch):
    """Terms within ±1e-4 of 0: a screen that drops its error bound loses true terms."""
    model, tokenizer = real_bert_tiny
    text = "Microglia are the resident macrophages of the central nervous system."
    gen = torch.Generator().manual_seed(1)
    kink = _shift_bias(
        model, tokenizer, text, 64, 1e-4 * torch.randn(model.config.vocab_size, generator=gen, dtype=torch.float64)
    )
    outs = {p: encode(kink, tokenizer, [text], max_length=64, path=p) for p in PATHS}
    for p in PATHS[1:]:
        assert _same(outs[p], outs[PATHS[0]]), p
    assert 10000 < len(outs["float32"][0][0]) < 20000  # about half the vocabulary just above the kink
    monkeypatch.setattr(screens, "SAFETY", 0.0)  # every margin becomes 0
    for p in ("bf16", "fp16", "int8"):
        lost = len(outs["float32"][0][0]) - len(encode(kink, tokenizer, [text], max_length=64, path=p)[0][0])
        assert lost > 100, p


@pytest.mark.parametrize("hidden", [128, 768])
@pytest.mark.parametrize("name", PATHS)
def test_screen_error_stays_within_its_proven_bound(name, hidden):
    """The premise of every screen on this CPU's kernels: |screen logit − exact| ≤ its bound."""
    torch.manual_seed(hidden)
    norms = torch.logspace(-2, 2, 4 * 64)[torch.randperm(4 * 64)].view(4, 64, 1)  # four decades
    h = torch.randn(4, 64, hidden) * norms + torch.randn(hidden)  # a shared component, as trained models have
    aligned = h.reshape(-1, hidden)[torch.randint(0, 256, (512,))] + 0.1 * torch.randn(512, hidden)
    w = torch.cat([torch.randn(512, hidden) * 0.05, aligned * 0.01])  # |logit| ≈ ‖h‖‖w‖ for half of them
    batch = screens._Batch.of(h, torch.ones(4, 64, dtype=torch.long))
    terms = screens._Terms.of(w, torch.zeros(len(w)))
    exact = batch.centred.reshape(-1, hidden).double() @ w.double().T
    with torch.inference_mode():
        ratio = probe._measured_error(SCREENS[name], batch, terms, slice(0, 4), hidden, 0.0, exact)
    assert ratio <= 1.0
    # the bound is not idle: bf16/fp16/int8 input rounding reaches 0.1–0.4 of it here (int8's ℓ1 terms
    # are a worst case too); float32's γ_k·Σ|h_i w_i| is a worst case that rounding (a random walk,
    # ~√k·u) reaches ~1/√k of: 0.06 at k = 128, 0.009 at 768
    assert ratio > (0.001 if name == "float32" else 0.05)


def test_measurement_chooses_a_path_and_reports_it(real_bert_tiny, scifact_docs, monkeypatch):
    model, tokenizer = real_bert_tiny
    monkeypatch.setattr(probe, "PROBE_MIN_ROWS", 0)
    info: dict = {}
    measured = encode(model, tokenizer, scifact_docs, max_length=128, batch_size=16, info=info)
    assert _same(measured, encode(model, tokenizer, scifact_docs, max_length=128, batch_size=16, path="float32"))
    assert info["measured"] and info["path"] in SCREENS and info["rejected"] == {}
    assert set(info["timings"]) <= set(SCREENS) and info["path"] in info["timings"]
    assert info["timings"][info["path"]] == min(info["timings"].values()) > 0
    # bert-tiny on SciFact: ~250 of 30522 terms are non-zero; candidates are those plus the margin's
    assert 0.005 < info["candidates_fraction"] < 0.05
    assert info["docs"] == len(scifact_docs) and info["head_gflop_per_doc"] > 0.1


def test_a_screen_outside_its_bound_or_failing_is_rejected(real_bert_tiny, scifact_docs, monkeypatch):
    model, tokenizer = real_bert_tiny
    monkeypatch.setattr(probe, "PROBE_MIN_ROWS", 0)
    bf16 = SCREENS["bf16"]
    slack = bf16.slack
    monkeypatch.setattr(bf16, "slack", lambda *a, **k: slack(*a, **k) * 1e-3)  # a bound that does not hold

    def broken(*args):
        raise RuntimeError("no kernel")

    monkeypatch.setattr(SCREENS["int8"], "block", broken)
    info: dict = {}
    measured = encode(model, tokenizer, scifact_docs, max_length=128, batch_size=16, info=info)
    assert "proven bound" in info["rejected"]["bf16"] and "no kernel" in info["rejected"]["int8"]
    assert info["path"] in ("float32", "fp16")
    assert _same(measured, encode(model, tokenizer, scifact_docs, max_length=128, batch_size=16, path="float32"))


def test_dense_model_every_path_matches_reference(tmp_path, monkeypatch):
    """Random ModernBERT weights give dense vectors (about half the vocabulary): same vectors anyway."""
    model, tokenizer = _load(tiny_modernbert(tmp_path, vocab_size=4096))
    texts = ["vitamin deficiency risk " * k for k in (1, 3, 7, 12)]
    outs = {p: encode(model, tokenizer, texts, max_length=48, batch_size=2, path=p) for p in PATHS}
    for p in PATHS[1:]:
        assert _same(outs[p], outs[PATHS[0]]), p
    monkeypatch.setattr(probe, "PROBE_MIN_ROWS", 0)
    info: dict = {}
    assert _same(encode(model, tokenizer, texts, max_length=48, batch_size=2, info=info), outs["float32"])
    assert info["candidates_fraction"] > 0.25
    ref = reference_encode(model, tokenizer, texts, max_length=48)
    ours = torch.zeros_like(ref)
    for i, (ids, w) in enumerate(outs["float32"]):
        ours[i, torch.from_numpy(ids).long()] = torch.from_numpy(w)
    torch.testing.assert_close(ours, ref, rtol=1e-5, atol=1e-5)  # as above: a few float32 ulps


def test_log1p_weights_do_not_depend_on_their_position():
    """The weights' log1p gives each value the same result wherever it sits (no scalar tail)."""
    values = np.random.default_rng(0).uniform(0, 12, 10007).astype(np.float32)
    pooled = torch.from_numpy(values).view(1, -1)
    ((_, whole),) = _sparse_rows(pooled)
    pieces = np.concatenate([_sparse_rows(pooled[:, i : i + 37])[0][1] for i in range(0, 10007, 37)])
    single = np.array([np.float32(math.log1p(float(v))) for v in values])
    assert np.array_equal(whole, pieces) and np.array_equal(whole, single)


def test_unknown_path_and_bfloat16_path_are_clear_errors(real_bert_tiny):
    from benchmark.common.errors import BenchmarkError

    model, tokenizer = real_bert_tiny
    with pytest.raises(BenchmarkError, match="unknown encode path 'fp8'"):
        encode(model, tokenizer, ["x"], max_length=8, path="fp8")
    with pytest.raises(BenchmarkError, match="precision='bfloat16'"):
        encode(model, tokenizer, ["x"], max_length=8, path="bf16", precision="bfloat16")


def test_vectors_do_not_depend_on_threads_or_batch_size(real_bert_tiny, scifact_docs):
    """Forwards run in sub-batches of BODY_DOCS documents whatever the thread count: same hidden states."""
    model, tokenizer = real_bert_tiny
    before = torch.get_num_threads()
    outs = []
    try:
        for threads, batch_size in ((1, 8), (2, 16), (2, 8)):
            torch.set_num_threads(threads)
            outs.append(encode(model, tokenizer, scifact_docs, max_length=96, batch_size=batch_size, path="bf16"))
            assert torch.get_num_threads() == threads
    finally:
        torch.set_num_threads(before)
    assert _same(outs[0], outs[1]) and _same(outs[0], outs[2])
