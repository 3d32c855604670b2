"""Tiny random-weight MLM checkpoints (BERT, ModernBERT) saved to disk for tests.

Each factory writes a ``*ForMaskedLM`` plus a tokenizer that ``AutoTokenizer`` loads offline and
returns the folder, so tests exercise the same ``from_pretrained`` path as real backbones.
The tokenizer vocabulary is built from the bert-tiny WordPiece vocabulary and always has exactly
``vocab_size`` entries, so every logit column maps to a token string (``benchmark.model.synthetic``).
"""

from __future__ import annotations

from pathlib import Path

from benchmark.model.loader import resolve_backbone
from benchmark.model.synthetic import save_random_mlm, wordpiece_tokenizer

BERT_TINY = Path(resolve_backbone("bert-tiny"))  # as the pipeline finds it ($BENCHMARK_MODEL_DIR, set by conftest)


def save_tokenizer(path: Path, vocab_size: int = 30522) -> Path:
    """Save a BERT WordPiece tokenizer with exactly ``vocab_size`` tokens into ``path``."""
    path.mkdir(parents=True, exist_ok=True)
    wordpiece_tokenizer(vocab_size).save_pretrained(path)
    return path


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
    save_random_mlm(BertForMaskedLM(config), path)
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
    save_random_mlm(ModernBertForMaskedLM(config), path)
    return path
