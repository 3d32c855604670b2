"""benchmark.splade: the fast encoder gives the textbook SPLADE vectors, and quantisation is exact.

Identity of the encode paths and exactness of their values: ``test_encode_paths.py``.
"""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch
from torch import nn

import benchmark.splade.forward as splade_forward
from benchmark.common.errors import BenchmarkError
from benchmark.splade.encoder import encode, reference_encode
from benchmark.splade.forward import tokenize
from benchmark.splade.impacts import QUANT_SCALE, quantise, quantise_vector
from helpers.tiny_models import tiny_bert, tiny_modernbert


def _load(path):
    from transformers import AutoModelForMaskedLM, AutoTokenizer

    return AutoModelForMaskedLM.from_pretrained(path).eval(), AutoTokenizer.from_pretrained(path)


@pytest.fixture(scope="module")
def bert(tmp_path_factory):
    return _load(tiny_bert(tmp_path_factory.mktemp("bert")))


@pytest.fixture(scope="module")
def modernbert(tmp_path_factory):
    return _load(tiny_modernbert(tmp_path_factory.mktemp("modernbert")))


def _texts(tokenizer, n: int, seed: int, max_words: int = 90) -> list[str]:
    """Random word strings of very different lengths (empty, one word, some past max_length)."""
    rng = random.Random(seed)
    words = [w for w in tokenizer.get_vocab() if w.isalpha() and w.isascii()]
    lengths = [0, 1, 2, max_words] + [rng.randint(1, max_words) for _ in range(n - 4)]
    rng.shuffle(lengths)
    return [" ".join(rng.choice(words) for _ in range(k)) for k in lengths]


def _dense(vectors, vocab_size: int) -> torch.Tensor:
    out = torch.zeros(len(vectors), vocab_size)
    for i, (ids, weights) in enumerate(vectors):
        assert ids.dtype == np.int32 and weights.dtype == np.float32
        assert np.all(np.diff(ids) > 0) and np.all(weights > 0)
        out[i, torch.from_numpy(ids).long()] = torch.from_numpy(weights)
    return out


def _assert_same(ours: torch.Tensor, ref: torch.Tensor) -> None:
    """float32 within 1e-5, and equal impacts except where w·scale sits within 1e-3 of a .5 boundary."""
    torch.testing.assert_close(ours, ref, rtol=1e-5, atol=1e-5)
    q_ours, q_ref = quantise(ours.numpy()), quantise(ref.numpy())
    scaled = ref.numpy().astype(np.float64) * QUANT_SCALE
    on_boundary = np.abs(scaled - np.floor(scaled) - 0.5) < 1e-3
    assert np.array_equal(q_ours[~on_boundary], q_ref[~on_boundary])
    assert (ref > 0).sum() > 100  # the comparison is not vacuous


@pytest.mark.parametrize("batch_size", [1, 4, 5, 32])
def test_bert_matches_reference(bert, batch_size):
    model, tokenizer = bert
    texts = _texts(tokenizer, 13, seed=batch_size)
    ref = reference_encode(model, tokenizer, texts, max_length=64)
    ours = encode(model, tokenizer, texts, max_length=64, batch_size=batch_size)
    _assert_same(_dense(ours, model.config.vocab_size), ref)


@pytest.mark.parametrize("batch_size", [3, 8])
def test_modernbert_matches_reference(modernbert, batch_size):
    model, tokenizer = modernbert
    texts = _texts(tokenizer, 11, seed=10 + batch_size, max_words=150)
    ref = reference_encode(model, tokenizer, texts, max_length=96)
    ours = encode(model, tokenizer, texts, max_length=96, batch_size=batch_size)
    _assert_same(_dense(ours, model.config.vocab_size), ref)


def _random_mlm(kind: str, tokenizer):
    """RoBERTa and DistilBERT put an activation function between their head modules."""
    import transformers

    torch.manual_seed(0)
    if kind == "roberta":
        config = transformers.RobertaConfig(
            vocab_size=len(tokenizer),
            hidden_size=32,
            num_hidden_layers=1,
            num_attention_heads=2,
            intermediate_size=64,
            pad_token_id=0,
            max_position_embeddings=80,
        )
        return transformers.RobertaForMaskedLM(config).eval()
    config = transformers.DistilBertConfig(
        vocab_size=len(tokenizer), dim=32, n_layers=1, n_heads=2, hidden_dim=64, max_position_embeddings=80
    )
    return transformers.DistilBertForMaskedLM(config).eval()


@pytest.mark.parametrize("kind", ["roberta", "distilbert"])
def test_other_families_match_reference(bert, kind):
    tokenizer = bert[1]
    model = _random_mlm(kind, tokenizer)
    texts = _texts(tokenizer, 9, seed=3)
    keep = [t for t in texts]
    ref = reference_encode(model, tokenizer, keep, max_length=48)
    ours = encode(model, tokenizer, keep, max_length=48, batch_size=4)
    _assert_same(_dense(ours, model.config.vocab_size), ref)


class _ScaledLinear(nn.Linear):
    """A decoder that is not a plain nn.Linear (as a custom head would be): forces the logits fallback."""

    def forward(self, x):
        return super().forward(x) * 2.0


def test_non_linear_decoder_falls_back_to_chunked_logits(bert):
    model, tokenizer = _load_copy(bert)
    old = model.get_output_embeddings()
    new = _ScaledLinear(old.in_features, old.out_features)
    new.load_state_dict(old.state_dict())
    model.set_output_embeddings(new)
    texts = _texts(tokenizer, 7, seed=5)
    ref = reference_encode(model, tokenizer, texts, max_length=64)
    ours = encode(model, tokenizer, texts, max_length=64, batch_size=3)
    _assert_same(_dense(ours, model.config.vocab_size), ref)


def _load_copy(pair):
    import copy

    return copy.deepcopy(pair[0]), pair[1]


def test_real_bert_tiny_matches_reference(bert_tiny):
    model, tokenizer = _load(bert_tiny)
    texts = [
        "Vitamin D deficiency is associated with an increased risk of tuberculosis.",
        "",
        "Microglia are the resident macrophages of the central nervous system " * 12,
        "BRCA1 mutations",
        "The effect of aspirin on cardiovascular events in patients with type 2 diabetes: a randomized trial.",
    ]
    ref = reference_encode(model, tokenizer, texts, max_length=128)
    ours = encode(model, tokenizer, texts, max_length=128, batch_size=2)
    _assert_same(_dense(ours, model.config.vocab_size), ref)
    # Order is the input order even though batches run longest first.
    alone = encode(model, tokenizer, texts[3:4], max_length=128)
    assert np.array_equal(alone[0][0], ours[3][0])


def test_thread_pool_path_matches_reference_and_restores_threads(bert):
    """With several torch threads the decoder blocks go to single-threaded workers."""
    model, tokenizer = bert
    texts = _texts(tokenizer, 13, seed=21)
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        ref = reference_encode(model, tokenizer, texts, max_length=64)
        ours = encode(model, tokenizer, texts, max_length=64, batch_size=13)
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)
    _assert_same(_dense(ours, model.config.vocab_size), ref)


def test_bfloat16_is_close_and_float32_is_default(bert_tiny):
    model, tokenizer = _load(bert_tiny)
    texts = ["Vitamin D deficiency is associated with an increased risk of tuberculosis."] * 3
    ref = reference_encode(model, tokenizer, texts, max_length=64)
    ours = _dense(encode(model, tokenizer, texts, max_length=64, precision="bfloat16"), model.config.vocab_size)
    assert (ours - ref).abs().max().item() < 0.1  # bf16 keeps 8 bits of mantissa
    assert next(model.parameters()).dtype == torch.float32  # the model itself is untouched


def test_pretokenized_input_gives_the_same_vectors(bert):
    model, tokenizer = bert
    texts = _texts(tokenizer, 11, seed=51)
    direct = encode(model, tokenizer, texts, max_length=40, batch_size=4)
    ahead = encode(model, tokenizer, tokenize(tokenizer, texts, 40), max_length=40, batch_size=4)
    assert all(np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1]) for a, b in zip(direct, ahead))
    with pytest.raises(BenchmarkError, match="tokenised with max_length=40, not 64"):
        encode(model, tokenizer, tokenize(tokenizer, texts, 40), max_length=64)


def test_padded_widths_match_reference(bert, monkeypatch):
    """Widths rounded up to 16 (as on CUDA): the extra padding never reaches a vector."""
    model, tokenizer = bert
    monkeypatch.setitem(splade_forward.WIDTH_MULTIPLE, "cpu", 16)
    texts = _texts(tokenizer, 13, seed=31)
    ref = reference_encode(model, tokenizer, texts, max_length=61)
    ours = encode(model, tokenizer, texts, max_length=61, batch_size=4)
    _assert_same(_dense(ours, model.config.vocab_size), ref)


def test_model_state_and_edge_cases(bert):
    model, tokenizer = bert
    model.train()
    try:
        a = encode(model, tokenizer, ["dropout must be off"], max_length=16)
        b = encode(model, tokenizer, ["dropout must be off"], max_length=16)
        assert model.training  # restored
    finally:
        model.eval()
    assert np.array_equal(a[0][1], b[0][1])
    assert encode(model, tokenizer, [], max_length=16) == []


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"texts": "one string"}, "wrap it in a list"),
        ({"texts": ["ok", 3]}, r"texts\[1\] is int"),
        ({"max_length": 0}, "max_length must be a positive int"),
        ({"batch_size": 0}, "batch_size must be a positive int"),
        ({"precision": "fp8"}, "unknown precision 'fp8'"),
    ],
)
def test_bad_input_is_one_clear_error(bert, kwargs, match):
    model, tokenizer = bert
    args = {"texts": ["ok"], "max_length": 16, **kwargs}
    with pytest.raises(BenchmarkError, match=match):
        encode(model, tokenizer, **args)


@pytest.mark.slow  # peak memory at a 50k vocabulary: the longest test that does not train
def test_large_vocabulary_peak_memory_is_bounded(modernbert):
    """Batch 64 × 512 on a 50368 vocabulary: full logits would be 6.6 GB; the chunked head needs MBs."""
    model, tokenizer = modernbert
    filler = " ".join(_texts(tokenizer, 12, seed=7, max_words=200))
    texts = [t + " " + filler for t in _texts(tokenizer, 64, seed=8)]  # all past 512 tokens
    features = tokenizer(texts, truncation=True, max_length=512)
    assert min(len(ids) for ids in features["input_ids"]) == 512
    with open("/proc/self/clear_refs", "w") as fh:  # reset VmHWM to the current RSS
        fh.write("5")
    before = _status("VmRSS")
    encode(model, tokenizer, texts, max_length=512, batch_size=64)
    peak = _status("VmHWM") - before
    full_logits_mb = 64 * 512 * model.config.vocab_size * 4 / 2**20
    assert full_logits_mb > 6000
    assert peak < 400, f"encode raised peak RSS by {peak:.0f} MB"


def _status(key: str) -> float:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(key + ":"):
                return int(line.split()[1]) / 1024
    raise AssertionError(key)


def test_quantise_hand_values():
    w = np.array([0.004, 0.005, 0.015, 0.125, 0.375, 1.234, 2.5, 0.0], dtype=np.float32)
    # float32(0.005) = 0.00499999988 → 0.4999… → 0; float32(0.015) = 0.01499999966 → 1;
    # 12.5 and 37.5 are exact halves → the even neighbour (as Python's round in Pyserini).
    assert quantise(w).tolist() == [0, 0, 1, 12, 38, 123, 250, 0]
    assert quantise(w).dtype == np.int32
    assert quantise(np.array([0.5, 1.5, 2.5]), scale=1).tolist() == [0, 2, 2]
    assert quantise(np.array([1.234], dtype=np.float32), scale=1000).tolist() == [1234]
    ids, q = quantise_vector(np.array([3, 7, 9], dtype=np.int32), np.array([0.004, 0.5, 0.02], dtype=np.float32))
    assert ids.tolist() == [7, 9] and q.tolist() == [50, 2]


@pytest.mark.parametrize("scale", [0, -1, 1.5, True])
def test_quantise_rejects_bad_scale(scale):
    with pytest.raises(BenchmarkError, match="scale must be a positive int"):
        quantise(np.array([1.0]), scale)


def test_quantise_rejects_non_finite():
    with pytest.raises(BenchmarkError, match="NaN or inf"):
        quantise(np.array([1.0, np.nan]))
