"""``[encode] compile = "inductor"``: the documents' encoder body through ``torch.compile``.

Fused kernels round differently, so a compiled body gives the eager vectors within rounding, not
bit for bit, and the setting enters the encode stage's id (only when set: the published ids stay).
Its own vectors must not depend on the batch size or the thread count, as the eager ones do not:
the cache and a cluster's byte-identical shards rely on that. One inductor build of bert-tiny
takes about 12 s on 2 cores.
"""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
import torch

from benchmark.common.errors import BenchmarkError
from benchmark.retrieval.impact_vectors import compile_body, encode_docs_stage, load_model, to_vector, vocabulary_terms
from benchmark.splade.encoder import encode
from benchmark.splade.forward import _decoder
from benchmark.stages.encode import Encode
from benchmark.stages.store import _config_dict
from helpers.forwards import dense, hidden_states, rounding_tolerance, vector_bound

TEXTS = [
    "cells divide",
    " ".join(["protein folding in the cell"] * 9),
    " ".join(["energy"] * 120),
    " ".join(["the immune system trains on vaccines and pathogens"] * 20),
    "insulin and glucose",
    "microglia in the nervous system",
    "aspirin trial",
    "brca1 mutation and cancer risk",
] * 2


@pytest.fixture(scope="module")
def models(bert_tiny):
    return {
        name: load_model(bert_tiny, attn, compile)
        for name, attn, compile in (
            ("compiled", "sdpa", "inductor"),
            ("sdpa", "sdpa", "none"),
            ("eager", "eager", "none"),
        )
    }


def test_compiled_body_gives_the_eager_vectors_within_rounding(models):
    """Hidden states within ``rounding_tolerance`` (fused kernels sum in other orders, as SDPA and eager
    attention do), vectors within the ``vector_bound`` it implies."""
    model, tokenizer = models["compiled"]
    assert isinstance(model.base_model, torch._dynamo.eval_frame.OptimizedModule)
    assert not isinstance(_decoder(model), torch._dynamo.eval_frame.OptimizedModule)  # the head stays eager
    sdpa, mask, _ = hidden_states(*models["sdpa"], TEXTS)
    tolerance = rounding_tolerance(sdpa, hidden_states(*models["eager"], TEXTS)[0], mask)
    compiled, compiled_mask, _ = hidden_states(model, tokenizer, TEXTS)
    assert torch.equal(compiled_mask, mask)
    assert float((compiled - sdpa)[mask].abs().max()) <= tolerance
    weight = _decoder(model).weight.detach()
    rows = [
        dense(encode(m, t, TEXTS, max_length=256, batch_size=8), weight.shape[0])
        for m, t in (models["compiled"], models["sdpa"])
    ]
    assert rows[1].any(axis=1).all()
    assert np.abs(rows[0] - rows[1]).max() <= vector_bound(tolerance, weight)


def test_compiled_vectors_do_not_depend_on_batch_or_threads(models):
    model, tokenizer = models["compiled"]
    threads = torch.get_num_threads()
    runs = []
    try:
        for n_threads, batch in ((2, 8), (1, 16)):  # multiples of benchmark.splade.forward.BODY_DOCS
            torch.set_num_threads(n_threads)
            runs.append(encode(model, tokenizer, TEXTS, max_length=256, batch_size=batch))
    finally:
        torch.set_num_threads(threads)
    assert all(np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1]) for a, b in zip(*runs))


def test_compiled_stage_writes_the_compiled_vectors_and_says_so(tmp_path, models, bert_tiny, monkeypatch):
    compiled, real = [], torch.compile
    monkeypatch.setattr(
        torch, "compile", lambda module, **kw: compiled.append((type(module).__name__, kw)) or real(module, **kw)
    )
    (tmp_path / "data" / "corpus").mkdir(parents=True)
    with open(tmp_path / "data" / "corpus" / "docs.jsonl", "w") as fh:
        for i, text in enumerate(TEXTS):
            fh.write(json.dumps({"id": f"d{i}", "contents": text}) + "\n")
    record = encode_docs_stage(
        bert_tiny,
        tmp_path / "data",
        tmp_path / "out",
        max_length=256,
        batch_size=8,
        shard_size=100,
        compile="inductor",
        progress=False,
    )
    assert record["compile"] == "inductor"
    assert compiled == [("BertModel", {"dynamic": True, "backend": "inductor"})]  # the body, once
    model, tokenizer = models["compiled"]
    terms = vocabulary_terms(tokenizer, int(model.config.vocab_size))
    expected = {
        f"d{i}": to_vector(ids, ws, terms)[1]
        for i, (ids, ws) in enumerate(encode(model, tokenizer, TEXTS, max_length=256, batch_size=8))
    }
    written = {}
    for line in (tmp_path / "out" / "docs" / "part-00000.jsonl").read_text().splitlines():
        row = json.loads(line)
        written[row["id"]] = row["vector"]
    assert written == expected


def test_compile_enters_the_id_only_when_set():
    """What the id hashes: the published ids of uncompiled encodes stay, a compiled one gets its own."""
    plain, compiled = Encode.Config(), Encode.Config(compile="inductor")
    assert "compile" not in _config_dict(plain) and _config_dict(compiled)["compile"] == "inductor"
    assert _config_dict(plain) == {
        "max_length": 256,
        "batch_size": 32,
        "shard_size": 10000,
        "precision": "float32",
        "attn_implementation": "sdpa",
    }
    assert "body compiled (inductor)" in Encode.describe(compiled)


def test_unknown_compilers_are_refused_in_one_line():
    from benchmark.suites import load_suite

    suite = load_suite("smoke")
    bad = dataclasses.replace(suite, encode=dataclasses.replace(suite.encode, compile="tvm"))
    assert "encode.compile = 'tvm'; valid: none, inductor" in " | ".join(bad.problems())
    with pytest.raises(BenchmarkError, match="compile = 'tvm'; valid: none, inductor"):
        compile_body(None, "tvm")
