"""A backbone or train stage's model: ``model/``, a ``*ForMaskedLM`` checkpoint with its tokenizer as
Hugging Face ``save_pretrained`` writes them (what training, encoding and export load)."""

from __future__ import annotations

from pathlib import Path

MODEL = "model"


def model_path(folder: Path | str) -> Path:
    return Path(folder) / MODEL
