"""A sentence-transformers folder (``SparseEncoder.save``): what its ``modules.json`` says, checked
against what this harness computes.

The harness loads a backbone folder as one ``*ForMaskedLM`` and encodes queries and documents alike
with SPLADE's ``max_t log(1 + relu(logit))`` (benchmark.splade). A SparseEncoder folder also holds
that model at its root, but its modules may say otherwise: sum pooling, another activation, an
inference-free query side (a Router over a static embedding), prompts, a shorter max_seq_length.
Loading the root and ignoring them would score another model than the folder describes, so a folder
whose modules ask for anything else is refused in one line before any stage runs; its length is
honoured by refusing encode lengths past it. Its configuration files are read through allowlists
(``SETTINGS``): a key known not to change scores is accepted with any value, one that does is accepted
only at the value this harness computes (``max_active_dims`` unset, dot similarity, no prompt), and an
unknown key is refused, since sentence-transformers may apply it.
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
    return settings_problem(name, folder)


_ANY = object()  # a key known not to change scores: any value
#: file → key → the one value this harness computes (``_ANY``: any value). SentenceTransformer's own keys
#: (sentence-transformers 5–6): versions and model type are provenance; max_seq_length is honoured apart
#: (``length_problems``); ``max_active_dims`` keeps each vector's top k and prompts prepend text, neither of
#: which this harness does; ``chunk_size`` only batches SpladePooling's computation.
SETTINGS: dict[str, dict[str, Any]] = {
    "config_sentence_transformers.json": {
        "__version__": _ANY,
        "requirements": _ANY,
        "model_type": "SparseEncoder",
        "similarity_fn_name": (None, "dot"),
        "max_active_dims": None,
        "default_prompt_name": None,
        "prompts": _ANY,  # its non-empty prompts are refused in modules_problem
    },
    "sentence_bert_config.json": {
        "max_seq_length": _ANY,
        "do_lower_case": False,
        "transformer_task": _ANY,  # checked in modules_problem
        "modality_config": ({"text": {"method": "forward", "method_output_name": "logits"}},),
        "module_output_name": "token_embeddings",
    },
    "pooling": {
        "pooling_strategy": "max",
        "activation_function": "relu",
        "embedding_dimension": _ANY,
        "word_embedding_dimension": _ANY,
        "chunk_size": _ANY,
    },
}


def _allowed(want: Any, got: Any) -> bool:
    if want is _ANY:
        return True
    return got in want if isinstance(want, tuple) else got == want


def settings_problem(name: str, folder: Path) -> str | None:
    """The first setting of a SparseEncoder folder's configuration that is not on its file's allowlist, or
    is there with a value that changes scores from what this harness computes; None for a plain checkpoint."""
    folder = Path(folder)
    modules = _json(folder / MODULES)
    if not isinstance(modules, list) or len(modules) < 2 or not isinstance(modules[1], dict):
        return None  # modules_problem names it
    files = {
        "config_sentence_transformers.json": "config_sentence_transformers.json",
        "sentence_bert_config.json": "sentence_bert_config.json",
        "pooling": str(Path(str(modules[1].get("path", ""))) / "config.json"),
    }
    for table, file in files.items():
        data = _json(folder / file)
        if data is None:
            continue
        if not isinstance(data, dict):
            return (
                f"backbone {name!r}: folder {folder}'s {file} is not a JSON object; save it again with "
                "SparseEncoder.save"
            )
        allow = SETTINGS[table]
        for key, value in data.items():
            if key not in allow:
                return (
                    f"backbone {name!r}: folder {folder}'s {file} sets {key!r}, which this harness does not know "
                    f"to leave scores unchanged (known: {', '.join(allow)}); remove it, or {FIX}"
                )
            if not _allowed(allow[key], value):
                want = allow[key]
                wants = " or ".join(map(repr, want)) if isinstance(want, tuple) else repr(want)
                return (
                    f"backbone {name!r}: folder {folder}'s {file} sets {key} = {value!r}, which changes its scores "
                    f"from what this harness computes ({key} = {wants}); remove it, or {FIX}"
                )
    return None


def shapes_problem(name: str, folder: Path) -> str | None:
    """Where config.json's ``vocab_size`` or ``hidden_size`` disagrees with the word embeddings in the
    weights' safetensors headers (read without loading a tensor), or None."""
    folder = Path(folder)
    config = _json(folder / "config.json")
    if not isinstance(config, dict):
        return None
    for path in sorted(folder.glob("*.safetensors")):
        try:
            with open(path, "rb") as fh:
                header = json.loads(fh.read(int.from_bytes(fh.read(8), "little")))
        except (OSError, ValueError):
            return None  # checkpoint_problems names a damaged header
        for key, tensor in header.items() if isinstance(header, dict) else ():
            if not key.endswith("word_embeddings.weight") and not key.endswith("tok_embeddings.weight"):
                continue
            shape = tensor.get("shape") if isinstance(tensor, dict) else None
            if not isinstance(shape, list) or len(shape) != 2:
                continue
            for field, got in (("vocab_size", shape[0]), ("hidden_size", shape[1])):
                want = config.get(field)
                if isinstance(want, int) and want != got:
                    return (
                        f"backbone {name!r}: folder {folder}'s config.json gives {field} = {want}, but {path.name} "
                        f"holds {key} of shape {shape} ({field} {got}); save the checkpoint again with "
                        "save_pretrained, or correct config.json"
                    )
            return None
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
