"""A sentence-transformers folder (``SparseEncoder.save``): what its ``modules.json`` says, checked
against what this harness computes.

The harness loads a backbone folder as one ``*ForMaskedLM`` and encodes queries and documents alike
with SPLADE's ``max_t log(1 + relu(logit))`` (benchmark.splade). A SparseEncoder folder also holds
that model at its root, but its modules may say otherwise: sum pooling, another activation, an
inference-free query side (a Router over a static embedding), prompts, a shorter max_seq_length.
Loading the root and ignoring them would score another model than the folder describes, so a folder
whose modules ask for anything else is refused in one line before any stage runs; its length is
honoured by refusing encode lengths past it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

MODULES = "modules.json"
# modules.json types (last dotted part) that run the folder's root checkpoint as an MLM
MLM_MODULES = ("MLMTransformer", "Transformer")
POOLING = {"pooling_strategy": "max", "activation_function": "relu"}  # what benchmark.splade computes
FIX = (
    "pass the folder of a plain SPLADE SparseEncoder (an MLM transformer, then SpladePooling max/relu) or its "
    "*ForMaskedLM checkpoint"
)


def _json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def modules_problem(name: str, folder: Path) -> str | None:
    """Why the folder's sentence-transformers modules are not what the harness computes, or None
    (also None for a folder without ``modules.json``: a plain checkpoint)."""
    folder = Path(folder)
    if not (folder / MODULES).is_file():
        return None
    where = f"backbone {name!r}: folder {folder} is a sentence-transformers model whose {MODULES}"
    modules = _json(folder / MODULES)
    if not isinstance(modules, list) or not all(isinstance(m, dict) for m in modules):
        return f"{where} is not a JSON list of modules; save it again with SparseEncoder.save, or {FIX}"
    kinds = [str(m.get("type", "")).rsplit(".", 1)[-1] for m in modules]
    if (
        len(kinds) != 2
        or kinds[0] not in MLM_MODULES
        or kinds[1] != "SpladePooling"
        or modules[0].get("path", "") != ""
    ):
        return (
            f"{where} lists {', '.join(kinds) or 'no modules'}, not an MLM transformer at the folder's root followed "
            f"by SpladePooling (e.g. an inference-free SPLADE's Router encodes queries without the model), and this "
            f"harness encodes queries and documents with the root MLM; {FIX}"
        )
    task = (_json(folder / "sentence_bert_config.json") or {}).get("transformer_task", "fill-mask")
    if kinds[0] == "Transformer" and task != "fill-mask":
        return (
            f"{where} runs its Transformer for {task!r}, not 'fill-mask', so its root is not used as an MLM "
            f"(sentence_bert_config.json); {FIX}"
        )
    pooling = _json(folder / str(modules[1].get("path", "")) / "config.json") or {}
    for key, want in POOLING.items():
        got = pooling.get(key, want)
        if got != want:
            return (
                f"{where} pools with SpladePooling {key} = {got!r}, but this harness computes SPLADE's "
                f"{', '.join(f'{k} = {v!r}' for k, v in POOLING.items())} (max_t log(1 + relu(logit))); {FIX}"
            )
    prompts = (_json(folder / "config_sentence_transformers.json") or {}).get("prompts") or {}
    used = {k: v for k, v in prompts.items() if v} if isinstance(prompts, dict) else {}
    if used:
        return (
            f"backbone {name!r}: folder {folder} is a SparseEncoder that prepends prompts {used} "
            f"(config_sentence_transformers.json), which this harness does not add; remove them or {FIX}"
        )
    return None


def max_seq_length(folder: Path) -> int | None:
    """The SparseEncoder's max_seq_length (``sentence_bert_config.json``, else its tokenizer's
    ``model_max_length``), or None for a folder without ``modules.json``."""
    folder = Path(folder)
    if not (folder / MODULES).is_file():
        return None
    for file, key in (("sentence_bert_config.json", "max_seq_length"), ("tokenizer_config.json", "model_max_length")):
        value = (_json(folder / file) or {}).get(key)
        if (
            isinstance(value, int) and not isinstance(value, bool) and 0 < value < 10**9
        ):  # not transformers' 'unbounded'
            return value
    return None


def length_problems(name: str, folder: Path, lengths: dict[str, int]) -> list[str]:
    """Encode lengths (``{"max_doc_length": 256, ...}``) past the SparseEncoder's max_seq_length."""
    limit = max_seq_length(folder)
    if limit is None:
        return []
    return [
        f"[encode] {key} = {value} exceeds backbone {name!r}'s SparseEncoder max_seq_length {limit} "
        f"(folder {folder}); set {key} = {limit} or less in the suite's [encode]"
        for key, value in lengths.items()
        if value > limit
    ]
