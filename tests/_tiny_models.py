"""Tiny random-weight MLM checkpoints (BERT, ModernBERT) saved to disk for tests.

Each factory writes a ``*ForMaskedLM`` plus a tokenizer that ``AutoTokenizer`` loads offline and
returns the folder, so tests exercise the same ``from_pretrained`` path as real backbones.
The tokenizer vocabulary is built from the bert-tiny WordPiece vocabulary and always has exactly
``vocab_size`` entries, so every logit column maps to a token string.
"""

from __future__ import annotations

from pathlib import Path

from benchmark.backbone import resolve_backbone

BERT_TINY = Path(resolve_backbone("bert-tiny"))  # as the pipeline finds it ($BENCHMARK_MODEL_DIR, set by conftest)
BERT_SPECIALS = 104  # [PAD], [unused0..98], [UNK], [CLS], [SEP], [MASK] in the BERT vocabulary


def _wordpiece_vocab(vocab_size: int) -> list[str]:
    """The bert-tiny vocabulary cut or padded to ``vocab_size`` tokens (special ids kept)."""
    from transformers import AutoTokenizer

    vocab = AutoTokenizer.from_pretrained(BERT_TINY).get_vocab()
    tokens = sorted(vocab, key=vocab.get)
    if vocab_size >= len(tokens):
        return tokens + [f"[extra{i}]" for i in range(vocab_size - len(tokens))]
    specials = tokens[:BERT_SPECIALS]
    chars = [t for t in tokens[BERT_SPECIALS:] if len(t) == 1]
    pieces = [t for t in tokens if t.startswith("##") and len(t) == 3]
    base = specials + chars + pieces
    if vocab_size < len(base):
        raise ValueError(f"vocab_size must be >= {len(base)} to cover every character, got {vocab_size}")
    seen = set(base)
    words = [t for t in tokens[BERT_SPECIALS:] if t not in seen]
    return base + words[: vocab_size - len(base)]


def save_tokenizer(path: Path, vocab_size: int = 30522) -> Path:
    """Save a BERT WordPiece tokenizer with exactly ``vocab_size`` tokens into ``path``."""
    from transformers import BertTokenizer

    path.mkdir(parents=True, exist_ok=True)
    tokens = _wordpiece_vocab(vocab_size)
    tokenizer = BertTokenizer(vocab={t: i for i, t in enumerate(tokens)}, model_max_length=512)
    tokenizer.save_pretrained(path)
    return path


def _save(model, path: Path) -> None:
    """Give the vocabulary bias non-zero values (random init leaves it at 0) and save quietly."""
    import torch

    from benchmark.checkpoints import quiet_transformers

    bias = model.get_output_embeddings().bias
    with torch.no_grad():
        bias.copy_(torch.randn(bias.shape) * 0.1)
    with quiet_transformers():
        model.eval().save_pretrained(path)


def tiny_bert(tmp_path: Path, name: str = "tiny-bert", seed: int = 0, tie: bool = True) -> Path:
    """A random BertForMaskedLM (hidden 32, 2 layers) with the bert-tiny tokenizer (vocab 30522)."""
    import torch
    from transformers import BertConfig, BertForMaskedLM

    path = Path(tmp_path) / name
    config = BertConfig(
        vocab_size=30522,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=128,
        tie_word_embeddings=tie,
    )
    torch.manual_seed(seed)
    _save(BertForMaskedLM(config), path)
    save_tokenizer(path, config.vocab_size)
    return path


def tiny_modernbert(
    tmp_path: Path, vocab_size: int = 50368, name: str = "tiny-modernbert", seed: int = 0, tie: bool = True
) -> Path:
    """A random ModernBertForMaskedLM (hidden 64, 2 layers) with a WordPiece tokenizer of ``vocab_size``.

    Special-token ids follow the BERT vocabulary ([PAD]=0, [CLS]=101, [SEP]=102) so any
    ``vocab_size`` >= 2098 works; the default matches the real ModernBERT / Ettin vocabulary size.
    """
    import torch
    from transformers import ModernBertConfig, ModernBertForMaskedLM

    path = Path(tmp_path) / name
    config = ModernBertConfig(
        vocab_size=vocab_size,
        hidden_size=64,
        intermediate_size=96,
        num_hidden_layers=2,
        num_attention_heads=2,
        max_position_embeddings=512,
        local_attention=64,
        pad_token_id=0,
        bos_token_id=101,
        cls_token_id=101,
        eos_token_id=102,
        sep_token_id=102,
        tie_word_embeddings=tie,
    )
    torch.manual_seed(seed)
    _save(ModernBertForMaskedLM(config), path)
    save_tokenizer(path, vocab_size)
    return path
