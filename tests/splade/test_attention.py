"""The attention implementation is pinned in encoding, and each one gives the SPLADE formula.

``benchmark.splade.encoder.encode`` captures the MLM decoder's input with a hook and pools it in blocks,
assuming the padded [batch, length, hidden] layout. Under both ``eager`` and ``sdpa`` attention a
tiny random ModernBERT (sliding-window layers included), loaded through ``load_model``, must give
what its own full forward gives, one unpadded text at a time: ``max_t log1p(relu(logits_t))``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from benchmark.retrieval.impact_vectors import load_model
from benchmark.splade.encoder import encode
from helpers.tiny_models import tiny_modernbert

# lengths from 1 token to past the 64-token sliding window (tiny_modernbert: local_attention = 64),
# batched by encode with padding
TEXTS = [
    "a",
    "protein folding in yeast cells",
    " ".join(["gene expression of the tumor virus in the brain and heart"] * 4),
    " ".join(f"w{i}" for i in range(90)),
    "risk dose",
]


@pytest.mark.parametrize("attn", ["eager", "sdpa"])
def test_encode_equals_the_reference_formula(tmp_path: Path, attn: str) -> None:
    folder = tiny_modernbert(tmp_path, vocab_size=4096)
    model, tokenizer = load_model(folder, attn_implementation=attn)
    assert model.config._attn_implementation == attn
    vectors = encode(model, tokenizer, TEXTS, max_length=128, batch_size=3)
    vocab = model.config.vocab_size
    for text, (ids, weights) in zip(TEXTS, vectors):
        batch = tokenizer([text], truncation=True, max_length=128, return_tensors="pt")
        with torch.inference_mode():
            logits = model(**batch).logits[0].float()  # [length, vocab], no padding
        reference = torch.log1p(torch.relu(logits)).amax(dim=0)
        ours = torch.zeros(vocab)
        ours[torch.as_tensor(ids, dtype=torch.long)] = torch.as_tensor(weights)
        # float32 both ways, summed in another order (blocked decoder matmul, padded attention rows):
        # each logit is a 64-term dot product after two layers, a few ulps of its terms' sum (u =
        # 6e-8; measured at most 1.5e-7 absolute on weights up to 0.52); any token attended across
        # padding or a wrong position would move weights by O(0.01) or more
        torch.testing.assert_close(ours, reference, rtol=1e-5, atol=1e-6)
        assert int((reference > 0).sum()) == len(ids)  # the same support: no term gained or lost


def test_load_model_refuses_an_unknown_attention(tmp_path: Path) -> None:
    folder = tiny_modernbert(tmp_path, vocab_size=4096)
    with pytest.raises(ValueError, match="attn_implementation"):
        load_model(folder, attn_implementation="no-such-kernel")
