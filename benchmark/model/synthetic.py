"""Tiny random-weight backbones built from each family's real config class, for dress rehearsals.

Offline there are no ModernBERT or Ettin weights, but the paper's pipeline must still go through
each family's real architecture: ``BertForMaskedLM`` and ``ModernBertForMaskedLM`` (Ettin encoders
are ModernBERT checkpoints with other sizes). Each entry here is a config class and the sizes of a
real model scaled down, with the layer pattern kept (ModernBERT: global attention every third
layer, sliding windows in between, no biases, an embedding LayerNorm, a decoder bias).

The tokenizer is the bert-tiny WordPiece vocabulary cut or padded to the model's vocabulary size,
so every logit column is a token. The weights are random (fixed seed), so the vocabulary bias is
set to the constant that leaves ``ACTIVE_FRACTION`` of the terms active on a sample text, about the
density of a trained SPLADE model: shards and indexes stay small, and head rescaling (which scales
the bias too) leaves that support unchanged. These models test the plumbing, not the paper's claim.

A synthetic backbone is written once into the cache (``$BENCHMARK_CACHE_DIR/synthetic/<key>-<digest>``)
and is then an ordinary local ``*ForMaskedLM`` folder.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmark.common.fingerprint import cache_dir
from benchmark.common.registry import Registry
from benchmark.model.checkpoints import checkpoint_fingerprint, quiet_transformers, resolve_checkpoint

SEED = 0
ACTIVE_FRACTION = 0.01
TOKENIZER_SOURCE = "bert-tiny"
BERT_SPECIALS = 104  # [PAD], [unused0..98], [UNK], [CLS], [SEP], [MASK] in the BERT vocabulary
VERSION = 1  # bump when the construction below changes (it is part of the fingerprint)
#: The texts the vocabulary bias is calibrated on (part of the construction: changing them changes the models).
CALIBRATION_TEXTS: tuple[str, ...] = (
    "The mitochondria is the powerhouse of the cell and produces most of its chemical energy.",
    "Paris is the capital and most populous city of France, situated on the river Seine.",
    "Photosynthesis converts light energy into chemical energy stored in glucose molecules.",
    "The Great Wall of China was built over many centuries to protect against invasions.",
    "Vaccines train the immune system to recognise and fight specific pathogens.",
    "Python is a high-level programming language known for its readable syntax.",
    "The stock market fell sharply after the central bank raised interest rates.",
    "Jupiter is the largest planet in the solar system and has dozens of moons.",
    "Regular exercise lowers blood pressure and reduces the risk of heart disease.",
    "The novel follows a young sailor who is shipwrecked on a remote island.",
    "Climate change is driving rising sea levels and more frequent extreme weather.",
    "Insulin regulates blood sugar by signalling cells to absorb glucose.",
)


@dataclass(frozen=True)
class Synthetic:
    """A config class and its keyword arguments: a real model's architecture at tiny size."""

    config_class: str  # a transformers config class name
    model_class: str
    kwargs: dict[str, Any] = field(default_factory=dict)
    like: str = ""  # the real model whose shape this scales down
    # calibrate the bias on whole documents instead: this many non-zeros after max-pooling over the first
    # doc_tokens tokens of CALIBRATION_TEXTS read as one document (a trained SPLADE's ~200 per document)
    doc_nnz: int | None = None
    doc_tokens: int = 512

    def fingerprint(self) -> dict[str, Any]:
        extra = {"doc_nnz": self.doc_nnz, "doc_tokens": self.doc_tokens} if self.doc_nnz is not None else {}
        return {
            "synthetic": self.config_class,
            "kwargs": self.kwargs,
            "seed": SEED,
            "active": ACTIVE_FRACTION,
            "version": VERSION,
            "tokenizer": checkpoint_fingerprint(TOKENIZER_SOURCE),
            **extra,
        }


_MODERNBERT_SPECIALS = {
    "pad_token_id": 0,
    "bos_token_id": 101,
    "cls_token_id": 101,
    "eos_token_id": 102,
    "sep_token_id": 102,
}

SYNTHETIC: Registry[Synthetic] = Registry("synthetic backbone")
SYNTHETIC.register(
    "tiny-bert",
    Synthetic(
        "BertConfig",
        "BertForMaskedLM",
        like="bert-base-uncased (12 layers, 768 hidden, 12 heads)",
        kwargs={
            "vocab_size": 30522,
            "hidden_size": 64,
            "num_hidden_layers": 2,
            "num_attention_heads": 2,
            "intermediate_size": 256,
            "max_position_embeddings": 512,
        },
    ),
)
SYNTHETIC.register(
    "tiny-modernbert",
    Synthetic(
        "ModernBertConfig",
        "ModernBertForMaskedLM",
        like="ModernBERT-base (22 layers, 768 hidden, 12 heads, 1152 MLP)",
        kwargs={
            "vocab_size": 50368,
            "hidden_size": 96,
            "num_hidden_layers": 3,
            "num_attention_heads": 3,
            "intermediate_size": 144,
            "local_attention": 64,
            "max_position_embeddings": 512,
            **_MODERNBERT_SPECIALS,
        },
    ),
)
SYNTHETIC.register(
    "tiny-ettin",
    Synthetic(
        "ModernBertConfig",
        "ModernBertForMaskedLM",
        like="Ettin-17m (7 layers, 256 hidden, 4 heads, 384 MLP)",
        kwargs={
            "vocab_size": 50368,
            "hidden_size": 64,
            "num_hidden_layers": 4,
            "num_attention_heads": 2,
            "intermediate_size": 96,
            "local_attention": 64,
            "max_position_embeddings": 512,
            **_MODERNBERT_SPECIALS,
        },
    ),
)

# The scale rehearsal's encoder (``python -m benchmark.perf scale``): bert-base's vocabulary and a one-layer
# body. The CPU head costs tokens × vocabulary whatever the body, so the rehearsal encodes the first
# SCALE_DOC_TOKENS tokens of each document, calibrated to a trained model's ~200 non-zeros per document:
# the shards, the impact index and the searches downstream get realistic sizes at a fraction of the cost.
SCALE_DOC_TOKENS = 32
SYNTHETIC.register(
    "scale-bert",
    Synthetic(
        "BertConfig",
        "BertForMaskedLM",
        like="bert-base-uncased's vocabulary (1 layer, 16 hidden)",
        doc_nnz=200,
        doc_tokens=SCALE_DOC_TOKENS,
        kwargs={
            "vocab_size": 30522,
            "hidden_size": 16,
            "num_hidden_layers": 1,
            "num_attention_heads": 1,
            "intermediate_size": 32,
            "max_position_embeddings": 512,
        },
    ),
)


def folder(key: str) -> Path:
    """Where ``key``'s checkpoint lives once built (named by its recipe, so a change makes a new one)."""
    spec = SYNTHETIC[key]
    digest = hashlib.sha256(json.dumps(spec.fingerprint(), sort_keys=True, default=str).encode()).hexdigest()[:12]
    return cache_dir().parent / "synthetic" / f"{key}-{digest}"


def wordpiece_vocab(vocab_size: int) -> list[str]:
    """The bert-tiny vocabulary cut or padded to exactly ``vocab_size`` tokens (special tokens and characters kept)."""
    from transformers import AutoTokenizer

    vocab = AutoTokenizer.from_pretrained(resolve_checkpoint(TOKENIZER_SOURCE)).get_vocab()
    tokens = sorted(vocab, key=vocab.get)
    if vocab_size >= len(tokens):
        return tokens + [f"[extra{i}]" for i in range(vocab_size - len(tokens))]
    base = tokens[:BERT_SPECIALS] + [
        t for t in tokens[BERT_SPECIALS:] if len(t) == 1 or (t.startswith("##") and len(t) == 3)
    ]
    if vocab_size < len(base):
        raise ValueError(f"vocab_size must be >= {len(base)} to cover every character, got {vocab_size}")
    seen = set(base)
    return base + [t for t in tokens[BERT_SPECIALS:] if t not in seen][: vocab_size - len(base)]


def wordpiece_tokenizer(vocab_size: int) -> Any:
    """A BERT WordPiece tokenizer of exactly ``vocab_size`` tokens (every logit column is a token)."""
    from transformers import BertTokenizer

    return BertTokenizer(vocab={t: i for i, t in enumerate(wordpiece_vocab(vocab_size))}, model_max_length=512)


def save_random_mlm(model: Any, path: Path, bias_std: float = 0.1) -> Path:
    """Save a random-weight ``*ForMaskedLM`` with a random vocabulary bias (init leaves it at 0) and a
    WordPiece tokenizer of its vocabulary size: a loadable checkpoint for tests and studies."""
    import torch

    bias = model.get_output_embeddings().bias
    with torch.no_grad():
        bias.copy_(torch.randn(bias.shape) * bias_std)
    path = Path(path)
    with quiet_transformers():
        model.eval().save_pretrained(path)
        wordpiece_tokenizer(model.config.vocab_size).save_pretrained(path)
    return path


def ensure(key: str) -> Path:
    """Build ``key``'s checkpoint into the cache if it is not there yet; return its folder."""
    target = folder(key)
    if (target / "config.json").is_file():
        return target
    import torch
    import transformers

    spec = SYNTHETIC[key]
    config = getattr(transformers, spec.config_class)(**spec.kwargs)
    torch.manual_seed(SEED)
    model = getattr(transformers, spec.model_class)(config).eval()
    tokenizer = wordpiece_tokenizer(config.vocab_size)
    decoder = model.get_output_embeddings()
    with torch.no_grad():  # bias: the constant that leaves ACTIVE_FRACTION of the logits on CALIBRATION_TEXTS above 0
        decoder.bias.zero_()
        if spec.doc_nnz is not None:  # or doc_nnz terms of the max-pooled document above 0
            batch = tokenizer(
                [" ".join(CALIBRATION_TEXTS)], return_tensors="pt", truncation=True, max_length=spec.doc_tokens
            )
            pooled = model(**batch).logits[0].float().amax(dim=0)
            decoder.bias.fill_(-float(pooled.sort(descending=True).values[spec.doc_nnz]))
        else:
            batch = tokenizer(list(CALIBRATION_TEXTS), padding=True, return_tensors="pt")
            logits = model(**batch).logits[batch["attention_mask"].bool()]
            decoder.bias.fill_(-float(torch.quantile(logits.float().flatten()[:1_000_000], 1 - ACTIVE_FRACTION)))
    tmp = target.with_name(f".{target.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    with quiet_transformers():
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
    (tmp / "SYNTHETIC.json").write_text(
        json.dumps({"key": key, "like": spec.like, **spec.fingerprint()}, indent=2, default=str)
    )
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.replace(tmp, target)
    except OSError:  # built by another process meanwhile
        shutil.rmtree(tmp, ignore_errors=True)
    return target
