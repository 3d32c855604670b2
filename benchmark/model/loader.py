"""Backbones: short names → checkpoints, loaded as ``*ForMaskedLM`` with a proven MLM head.

SPLADE's term weights are the MLM head's logits, so a backbone whose head was silently
re-initialised by ``from_pretrained`` (headless checkpoint, renamed keys) would train and evaluate
without complaint and report garbage. Loading therefore fails unless every head weight came from
the checkpoint.

A name is a synthetic key (``benchmark.model.synthetic``, built on first load) or any name that
``benchmark.model.checkpoints`` resolves: a registered key, a local folder, a hub id.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchmark.common.errors import BenchmarkError
from benchmark.model.checkpoints import (
    ARCHITECTURES,
    HUB_ID,
    MODEL_DIR_ENV,
    Architecture,
    checkpoint_fingerprint,
    config_architecture,
    quiet_transformers,
    registered_key,
    resolve_checkpoint,
)
from benchmark.model.heads import attach_projection_scale, head_layout
from benchmark.model.synthetic import SYNTHETIC, ensure, folder

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase


def resolve_backbone(name: str) -> str:
    """A local folder or a hub id for ``name`` (a key, a synthetic key, a hub id, or a path)."""
    if name in SYNTHETIC:
        return str(folder(name))  # built on first load (benchmark.model.synthetic.ensure)
    return resolve_checkpoint(name)


def backbone_architecture(name: str) -> Architecture | None:
    """What ``name``'s rescaling depends on (model type, tied decoder), without loading weights: a
    synthetic recipe's config class, a local folder's (or ``$BENCHMARK_MODEL_DIR`` entry's) config.json,
    else the registry's facts; None for an unregistered hub id (judged on the loaded model instead)."""
    config = local_config(name)
    if config is not None:
        return config_architecture(config)
    key = registered_key(name)
    return ARCHITECTURES[key] if key is not None else None


def local_config(name: str) -> dict[str, Any] | None:
    """``name``'s config as data without importing transformers: a synthetic recipe's keyword arguments
    (with its model type), a local folder's config.json; None for a hub id."""
    if name in SYNTHETIC:
        spec = SYNTHETIC[name]
        return {"model_type": SYNTHETIC_MODEL_TYPES[spec.config_class], **spec.kwargs}
    try:
        source = resolve_checkpoint(name)
    except BenchmarkError:
        return None
    path = Path(source) / "config.json"
    try:
        return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None
    except (OSError, ValueError):
        return None


#: the model type of each config class a synthetic backbone is built from
SYNTHETIC_MODEL_TYPES = {"BertConfig": "bert", "ModernBertConfig": "modernbert"}


def backbone_fingerprint(name: str) -> dict[str, Any]:
    """What ``name`` stands for now: a synthetic backbone's recipe, else its checkpoint's content or commit."""
    if name in SYNTHETIC:
        return SYNTHETIC[name].fingerprint()
    return checkpoint_fingerprint(name)


# Files that carry a tokenizer's vocabulary (fast, WordPiece, BPE, SentencePiece). A folder without
# any of them still "loads": transformers builds a tokenizer of the special tokens alone, and every
# word becomes [UNK].
TOKENIZER_FILES = (
    "tokenizer.json",
    "vocab.txt",
    "vocab.json",
    "spiece.model",
    "sentencepiece.bpe.model",
    "tokenizer.model",
    "sentencepiece.model",
)
WEIGHT_FILES = (
    "model.safetensors",
    "model.safetensors.index.json",
    "pytorch_model.bin",
    "pytorch_model.bin.index.json",
)
HUB_TIMEOUT = 10.0  # seconds for the hub to answer whether a model exists (see benchmark.data.datasets.PROBE_TIMEOUT)


def _hub_offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").strip().upper() in {"1", "ON", "YES", "TRUE"}


def _safetensors_problem(path: Path) -> str | None:
    """A safetensors file is 8 bytes of header length, a JSON header, then the tensors the header
    places; it must end exactly where the last tensor does (safetensors refuses anything else)."""
    try:
        size = path.stat().st_size
        with open(path, "rb") as fh:
            prefix = fh.read(8)
            if len(prefix) < 8:
                return f"{size} bytes, shorter than the 8-byte header length"
            length = int.from_bytes(prefix, "little")
            if length > size - 8:
                return f"{size} bytes, shorter than its {length}-byte header"
            header = json.loads(fh.read(length))
        end = max((int(t["data_offsets"][1]) for k, t in header.items() if k != "__metadata__"), default=0)
    except (OSError, ValueError, KeyError, TypeError, IndexError, AttributeError) as exc:
        return f"unreadable header ({type(exc).__name__})"
    if size != 8 + length + end:
        return f"{size} bytes, but its header describes {8 + length + end}"
    return None


def checkpoint_problems(name: str, folder: Path) -> list[str]:
    """What makes a local checkpoint folder unusable, from its files alone (nothing is imported)."""
    where = f"backbone {name!r}: folder {folder}"
    try:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
        if not isinstance(config, dict):
            raise ValueError("not a JSON object")
    except FileNotFoundError:
        return [
            f"{where} has no config.json, so it is not a saved checkpoint; pass a folder written by "
            "save_pretrained of a *ForMaskedLM model"
        ]
    except (OSError, ValueError) as exc:
        return [f"{where}: config.json is not valid JSON ({exc}); save the checkpoint again"]
    from benchmark.model.st_modules import modules_problem, shapes_problem

    problems = [p for p in [modules_problem(name, folder), shapes_problem(name, folder)] if p]
    if not any((folder / f).is_file() for f in WEIGHT_FILES):
        problems.append(
            f"{where} has no weights (none of {', '.join(WEIGHT_FILES)}); save the model into it with save_pretrained"
        )
    for path in sorted(folder.glob("*.safetensors")):
        problem = _safetensors_problem(path)
        if problem:
            problems.append(
                f"{where}: {path.name} is truncated or corrupt ({problem}); copy or save the checkpoint again"
            )
    if not any((folder / f).is_file() for f in TOKENIZER_FILES):
        problems.append(
            f"{where} has no tokenizer files (none of {', '.join(TOKENIZER_FILES)}); transformers would build a "
            f"tokenizer "
            "of special tokens only and read every word as [UNK]. Save the model's own tokenizer into it: "
            "AutoTokenizer.from_pretrained(ORIGINAL).save_pretrained(FOLDER)"
        )
    return problems


def pickle_problem(name: str, path: Path, exc: Exception) -> str:
    """One line for weights that torch.load's weights-only unpickler refused: the pickle holds objects
    other than tensors, and unpickling those can run any code, so the harness never does."""
    text = re.sub(r"\x1b\[[0-9;]*m", "", str(exc))
    detail = next((line.strip() for line in text.splitlines() if "Unsupported global" in line), "")
    detail = re.sub(r"\. Please use .*", "", detail.replace("WeightsUnpickler error: ", "")) or type(exc).__name__
    return (
        f"backbone {name!r}: {path} is a pickle holding more than tensors ({detail}); it is not unpickled, since "
        "that can run code. If you trust it, load it once with torch.load(..., weights_only=False) and save the model "
        "with save_pretrained(FOLDER) (safetensors)"
    )


def _pickled_weights_problem(name: str, folder: Path) -> str | None:
    """Pickled weights (``pytorch_model*.bin``, read only where no safetensors exist) opened as
    transformers opens them, weights-only, on the meta device: refused objects are found before any
    stage runs, not as a traceback in the backbone stage."""
    if any(folder.glob("*.safetensors")) or (folder / "model.safetensors.index.json").is_file():
        return None
    import pickle

    import torch

    for path in sorted(folder.glob("pytorch_model*.bin")):
        try:
            torch.load(path, map_location="meta", weights_only=True)
        except pickle.UnpicklingError as exc:
            return pickle_problem(name, path, exc)
        except Exception as exc:  # not a torch file at all, truncated: one line too
            return (
                f"backbone {name!r}: {path} is not a loadable torch file ({type(exc).__name__}: {exc}); save the "
                f"checkpoint again"
            )
    return None


def tokenizer_problem(name: str, source: str, tokens: int, vocab_size: int) -> str | None:
    """The tokenizer must index into the MLM head: never past its rows, and covering most of them.

    Heads are often padded past the tokenizer (ModernBERT: 50368 rows for 50280 tokens, a multiple of
    64), but padding to a multiple of m adds fewer than m rows, a fraction of a percent of any real
    vocabulary (ModernBERT 0.2 %, Phi-2 1.8 %). A tokenizer built without vocabulary files has only
    its special tokens (5 of BERT's 30522). Half the rows sits far from both cases.
    """
    if tokens > vocab_size:
        return (
            f"backbone {name!r} ({source}): tokenizer has {tokens} tokens but the MLM head only {vocab_size}; "
            "the tokenizer does not belong to this checkpoint"
        )
    if 2 * tokens < vocab_size:
        return (
            f"backbone {name!r} ({source}): tokenizer has {tokens} tokens, fewer than half the MLM head's {vocab_size} "
            "rows, so it is not this model's tokenizer (a folder without vocabulary files gets one of special tokens "
            "only); save the model's own tokenizer into the folder"
        )
    return None


def _hub_problem(name: str, source: str, published: bool = False) -> str | None:
    """None when the hub id is in the local Hugging Face cache or the hub says it exists."""
    from huggingface_hub import try_to_load_from_cache

    if isinstance(try_to_load_from_cache(source, "config.json"), str):
        return None
    if _hub_offline():
        from benchmark.common.errors import Unavailable

        folder = "SparseEncoder folder (benchmark export writes one)" if published else "*ForMaskedLM folder"
        return Unavailable(
            str(_load_error(name, source, None, published)),
            kind="model",
            name=name,
            short=f"{'model' if published else 'backbone'} {name!r}: not in the local Hugging Face cache; "
            f"download it once with network access (hf download {source}) or pass a local {folder}",
        )
    try:
        from huggingface_hub import HfApi

        HfApi().model_info(source, timeout=HUB_TIMEOUT)
    except Exception as exc:  # hub errors (not found, gated) and network errors alike: one line
        return str(_load_error(name, source, exc, published))
    return None


def backbone_problems(name: str, deep: bool = False, published: bool = False) -> list[str]:
    """Everything that would make ``name`` fail to load, or load wrongly, found before any stage runs.

    Always: the name, and a local folder's files (config, weights, complete safetensors, tokenizer
    files). With ``deep`` (a real run, not a dry run): a hub id must be cached or known to the hub,
    and config and tokenizer are loaded to check the head and the tokenizer's size.
    """
    try:
        source = resolve_backbone(name)
    except BenchmarkError as exc:
        return [str(exc)]
    if _is_local(source):
        problems = checkpoint_problems(name, Path(source))
        if problems or not deep:
            return problems
        pickled = _pickled_weights_problem(name, Path(source))
        if pickled:
            return [pickled]
    elif not deep or not HUB_ID.match(source):
        return []  # nothing on disk yet and not a hub id (a folder built on first load): loading checks it
    else:
        problem = _hub_problem(name, source, published)
        if problem:
            return [problem]
    from transformers import AutoTokenizer

    try:
        config = load_config(name)
        with quiet_transformers():
            tokenizer = AutoTokenizer.from_pretrained(source)
    except BenchmarkError as exc:
        return [str(exc)]
    except (OSError, ValueError) as exc:
        return [str(_load_error(name, source, exc))]
    problem = tokenizer_problem(name, source, len(tokenizer), config.vocab_size)
    return [problem] if problem else []


def backbone_key(name: str) -> str:
    """A short label for tables and paths: the registry key, else the folder or repository name."""
    key = registered_key(name)
    if key is not None:
        return key
    return Path(name.rstrip("/\\")).name or name


def _is_local(source: str) -> bool:
    return Path(source).is_dir()


def _load_error(name: str, source: str, exc: Exception | None, published: bool = False) -> BenchmarkError:
    first = (str(exc).strip().splitlines() or [type(exc).__name__])[0] if exc is not None else ""
    if _is_local(source):
        return BenchmarkError(f"backbone {name!r}: folder {source} is not a loadable checkpoint ({first})")
    # $BENCHMARK_MODEL_DIR/<key>/ is consulted only for registered keys: suggest it only for them.
    key = registered_key(name)
    local = (
        f"put the checkpoint in ${MODEL_DIR_ENV}/{key}/ (now {os.environ.get(MODEL_DIR_ENV) or 'unset'}), "
        if key is not None
        else "pass a local SparseEncoder folder (benchmark export writes one), "
        if published
        else "pass a local *ForMaskedLM folder, "
    )
    if exc is None or _hub_offline():
        why = "is not in the local Hugging Face cache and the hub is off (HF_HUB_OFFLINE=1)"
    elif "RepositoryNotFound" in type(exc).__name__ or "404" in first:
        why = "does not exist on the Hugging Face hub (or is private)"
    else:
        why = f"is not in the local Hugging Face cache and the hub could not provide it ({type(exc).__name__})"
    return BenchmarkError(
        f"{'model' if published else 'backbone'} {name!r}: {source} {why}; {local}or download it once with network "
        f"access (hf download {source}) and run with HF_HUB_OFFLINE=1"
    )


def load_config(name: str) -> Any:
    """The checkpoint's config, checked to have a mapped MLM head; BenchmarkError otherwise."""
    source = resolve_backbone(name)  # bad names fail before the heavy import
    if name in SYNTHETIC:
        ensure(name)

    from transformers import AutoConfig

    try:
        with quiet_transformers():
            config = AutoConfig.from_pretrained(source)
    except (OSError, ValueError) as exc:
        raise _load_error(name, source, exc) from None
    head_layout(config)  # unknown model_type → BenchmarkError listing the supported ones
    architectures = list(getattr(config, "architectures", None) or [])
    if architectures and not any("ForMaskedLM" in a or "ForPreTraining" in a for a in architectures):
        raise BenchmarkError(
            f"backbone {name!r} ({source}) has no MLM head: the checkpoint is a {', '.join(architectures)}; "
            "SPLADE needs a *ForMaskedLM checkpoint"
        )
    return config


def _missing_head_keys(info: dict[str, Any], prefixes: tuple[str, ...]) -> list[str]:
    keys = {k if isinstance(k, str) else k[0] for k in info.get("missing_keys", ())}
    keys |= {k if isinstance(k, str) else k[0] for k in info.get("mismatched_keys", ())}
    return sorted(k for k in keys if k.startswith(prefixes))


def load_backbone(name: str) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """Load ``name`` as a float32 ``*ForMaskedLM`` in eval mode plus its tokenizer.

    Args:
        name: a registered backbone key (``bert-tiny``, ``modernbert-base``, …), a hub id, or a local folder.

    Returns:
        The model and its tokenizer.

    Raises:
        BenchmarkError: any MLM-head weight is missing from the checkpoint (it would be newly
            initialised), the checkpoint has no MLM head, or it cannot be found offline.
    """
    import pickle

    import torch
    from safetensors import SafetensorError
    from transformers import AutoModelForMaskedLM, AutoTokenizer

    config = load_config(name)
    source = resolve_backbone(name)
    if _is_local(source):
        problems = checkpoint_problems(name, Path(source))
        if problems:
            raise BenchmarkError(problems[0])
    try:
        with quiet_transformers():
            model, info = AutoModelForMaskedLM.from_pretrained(
                source, config=config, dtype=torch.float32, output_loading_info=True
            )
            tokenizer = AutoTokenizer.from_pretrained(source)
    except (OSError, ValueError, SafetensorError) as exc:
        raise _load_error(name, source, exc) from None
    except pickle.UnpicklingError as exc:  # weights-only torch.load refused a pickle (a hub checkpoint)
        raise BenchmarkError(pickle_problem(name, Path(source), exc)) from None
    missing = _missing_head_keys(info, head_layout(config).prefixes)
    if missing:
        shown = ", ".join(missing[:4]) + (f" (+{len(missing) - 4} more)" if len(missing) > 4 else "")
        raise BenchmarkError(
            f"backbone {name!r} ({source}): MLM-head weights missing from the checkpoint and newly "
            f"initialised: {shown}; use a checkpoint saved from a *ForMaskedLM model"
        )
    problem = tokenizer_problem(name, source, len(tokenizer), config.vocab_size)
    if problem:
        raise BenchmarkError(problem)

    attach_projection_scale(model)  # a harness checkpoint's projection α (method 'projection') is never lost
    return model.float().eval(), tokenizer
