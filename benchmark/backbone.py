"""Backbones: short names → checkpoints, loaded as ``*ForMaskedLM`` with a proven MLM head.

SPLADE's term weights are the MLM head's logits, so a backbone whose head was silently
re-initialised by ``from_pretrained`` (headless checkpoint, renamed keys) would train and evaluate
without complaint and report garbage. Loading therefore fails unless every head weight came from
the checkpoint.

Resolution order for a name: a registered key (``$BENCHMARK_MODEL_DIR/<key>/`` first, then its hub
id), an existing local folder, a hub id ``owner/name``. Nothing is guessed from name patterns.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchmark import faults
from benchmark.errors import BenchmarkError, unknown
from benchmark.registry import Registry

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

    from benchmark.rescale import Rescale

MODEL_DIR_ENV = "BENCHMARK_MODEL_DIR"

BACKBONES: Registry[str] = Registry(
    "backbone",
    fix=f"Use one of these keys, a hub id 'owner/name', or a local *ForMaskedLM folder (see ${MODEL_DIR_ENV})",
)
for _key, _hub_id in {
    "bert-tiny": "prajjwal1/bert-tiny",
    "bert-base-uncased": "google-bert/bert-base-uncased",
    "modernbert-base": "answerdotai/ModernBERT-base",
    "modernbert-large": "answerdotai/ModernBERT-large",
    "ettin-17m": "jhu-clsp/ettin-encoder-17m",
    "ettin-32m": "jhu-clsp/ettin-encoder-32m",
    "ettin-68m": "jhu-clsp/ettin-encoder-68m",
    "ettin-150m": "jhu-clsp/ettin-encoder-150m",
    "ettin-400m": "jhu-clsp/ettin-encoder-400m",
    "ettin-1b": "jhu-clsp/ettin-encoder-1b",
}.items():
    BACKBONES.register(_key, _hub_id)

_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*$")


def _registered_key(name: str) -> str | None:
    """The registry key for a key or a registered hub id, else None."""
    if name in BACKBONES:
        return name
    for key, hub_id in BACKBONES.items():
        if hub_id == name:
            return key
    return None


def _model_dir_entry(key: str) -> Path | None:
    root = os.environ.get(MODEL_DIR_ENV)
    if not root:
        return None
    folder = Path(root).expanduser() / key
    return folder if (folder / "config.json").is_file() else None


def resolve_backbone(name: str) -> str:
    """A local folder or a hub id for ``name`` (a key, a synthetic key, a hub id, or a path)."""
    from benchmark.synthetic import SYNTHETIC, folder

    if name in SYNTHETIC:
        return str(folder(name))  # built on first load (benchmark.synthetic.ensure)
    key = _registered_key(name)
    if key is not None:
        local = _model_dir_entry(key)
        return str(local) if local is not None else BACKBONES[key]
    path = Path(name).expanduser()
    if path.is_dir():
        return str(path)
    if _HUB_ID.match(name):
        return name
    if "/" in name or os.sep in name or name.startswith((".", "~")):
        raise BenchmarkError(f"backbone folder {name!r} does not exist; pass an existing *ForMaskedLM folder")
    raise unknown(BACKBONES.kind, name, BACKBONES, BACKBONES.fix)


# Files that carry a tokenizer's vocabulary (fast, WordPiece, BPE, SentencePiece). A folder without
# any of them still "loads": transformers builds a tokenizer of the special tokens alone, and every
# word becomes [UNK].
TOKENIZER_FILES = ("tokenizer.json", "vocab.txt", "vocab.json", "spiece.model", "sentencepiece.bpe.model",
                   "tokenizer.model", "sentencepiece.model")
WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin", "pytorch_model.bin.index.json")
HUB_TIMEOUT = 10.0  # seconds for the hub to answer whether a model exists (see benchmark.data.PROBE_TIMEOUT)


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
        return [f"{where} has no config.json, so it is not a saved checkpoint; pass a folder written by "
                "save_pretrained of a *ForMaskedLM model"]
    except (OSError, ValueError) as exc:
        return [f"{where}: config.json is not valid JSON ({exc}); save the checkpoint again"]
    problems = []
    if not any((folder / f).is_file() for f in WEIGHT_FILES):
        problems.append(f"{where} has no weights (none of {', '.join(WEIGHT_FILES)}); save the model into it with save_pretrained")
    for path in sorted(folder.glob("*.safetensors")):
        problem = _safetensors_problem(path)
        if problem:
            problems.append(f"{where}: {path.name} is truncated or corrupt ({problem}); copy or save the checkpoint again")
    if not any((folder / f).is_file() for f in TOKENIZER_FILES):
        problems.append(
            f"{where} has no tokenizer files (none of {', '.join(TOKENIZER_FILES)}); transformers would build a tokenizer "
            "of special tokens only and read every word as [UNK]. Save the model's own tokenizer into it: "
            "AutoTokenizer.from_pretrained(ORIGINAL).save_pretrained(FOLDER)")
    return problems


def tokenizer_problem(name: str, source: str, tokens: int, vocab_size: int) -> str | None:
    """The tokenizer must index into the MLM head: never past its rows, and covering most of them.

    Heads are often padded past the tokenizer (ModernBERT: 50368 rows for 50280 tokens, a multiple of
    64), but padding to a multiple of m adds fewer than m rows, a fraction of a percent of any real
    vocabulary (ModernBERT 0.2 %, Phi-2 1.8 %). A tokenizer built without vocabulary files has only
    its special tokens (5 of BERT's 30522). Half the rows sits far from both cases.
    """
    if tokens > vocab_size:
        return (f"backbone {name!r} ({source}): tokenizer has {tokens} tokens but the MLM head only {vocab_size}; "
                "the tokenizer does not belong to this checkpoint")
    if 2 * tokens < vocab_size:
        return (f"backbone {name!r} ({source}): tokenizer has {tokens} tokens, fewer than half the MLM head's {vocab_size} "
                "rows, so it is not this model's tokenizer (a folder without vocabulary files gets one of special tokens "
                "only); save the model's own tokenizer into the folder")
    return None


def _hub_problem(name: str, source: str) -> str | None:
    """None when the hub id is in the local Hugging Face cache or the hub says it exists."""
    from huggingface_hub import try_to_load_from_cache

    if isinstance(try_to_load_from_cache(source, "config.json"), str):
        return None
    if _hub_offline():
        return str(_load_error(name, source, None))
    try:
        from huggingface_hub import HfApi

        HfApi().model_info(source, timeout=HUB_TIMEOUT)
    except Exception as exc:  # hub errors (not found, gated) and network errors alike: one line
        return str(_load_error(name, source, exc))
    return None


def backbone_problems(name: str, deep: bool = False) -> list[str]:
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
    elif not deep or not _HUB_ID.match(source):
        return []  # nothing on disk yet and not a hub id (a folder built on first load): loading checks it
    else:
        problem = _hub_problem(name, source)
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
    key = _registered_key(name)
    if key is not None:
        return key
    return Path(name.rstrip("/\\")).name or name


def _is_local(source: str) -> bool:
    return Path(source).is_dir()


def _load_error(name: str, source: str, exc: Exception | None) -> BenchmarkError:
    first = (str(exc).strip().splitlines() or [type(exc).__name__])[0] if exc is not None else ""
    if _is_local(source):
        return BenchmarkError(f"backbone {name!r}: folder {source} is not a loadable checkpoint ({first})")
    # $BENCHMARK_MODEL_DIR/<key>/ is consulted only for registered keys: suggest it only for them.
    key = _registered_key(name)
    local = (f"put the checkpoint in ${MODEL_DIR_ENV}/{key}/ (now {os.environ.get(MODEL_DIR_ENV) or 'unset'}), "
             if key is not None else "pass a local *ForMaskedLM folder, ")
    if exc is None or _hub_offline():
        why = "is not in the local Hugging Face cache and the hub is off (HF_HUB_OFFLINE=1)"
    elif "RepositoryNotFound" in type(exc).__name__ or "404" in first:
        why = "does not exist on the Hugging Face hub (or is private)"
    else:
        why = f"is not in the local Hugging Face cache and the hub could not provide it ({type(exc).__name__})"
    return BenchmarkError(f"backbone {name!r}: {source} {why}; {local}or download it once with network access "
                          f"(hf download {source}) and run with HF_HUB_OFFLINE=1")


@contextmanager
def quiet_transformers() -> Iterator[None]:
    """Silence transformers' load reports and progress bars (our own errors say what matters)."""
    from transformers.utils import logging as hf_logging

    verbosity = hf_logging.get_verbosity()
    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        hf_logging.set_verbosity(verbosity)
        if bars:
            hf_logging.enable_progress_bar()


def load_config(name: str) -> Any:
    """The checkpoint's config, checked to have a mapped MLM head; BenchmarkError otherwise."""
    source = resolve_backbone(name)  # bad names fail before the heavy import
    from benchmark.synthetic import SYNTHETIC, ensure

    if name in SYNTHETIC:
        ensure(name)

    from transformers import AutoConfig

    from benchmark.heads import head_layout

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


def _missing_head_keys(info: dict, prefixes: tuple[str, ...]) -> list[str]:
    keys = {k if isinstance(k, str) else k[0] for k in info.get("missing_keys", ())}
    keys |= {k if isinstance(k, str) else k[0] for k in info.get("mismatched_keys", ())}
    return sorted(k for k in keys if k.startswith(prefixes))


def load_backbone(name: str) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """Load ``name`` as a float32 ``*ForMaskedLM`` in eval mode plus its tokenizer.

    Raises BenchmarkError when any MLM-head weight is missing from the checkpoint (it would be
    newly initialised), when the checkpoint has no MLM head, or when it cannot be found offline.
    """
    import torch
    from transformers import AutoModelForMaskedLM, AutoTokenizer

    from benchmark.heads import head_layout

    from safetensors import SafetensorError

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
    from benchmark.rescale import attach_projection_scale

    attach_projection_scale(model)  # a harness checkpoint's projection α (method 'projection') is never lost
    return model.float().eval(), tokenizer


def registered_key(name: str) -> str | None:
    """The registry key for a registered key or hub id, else None (no filesystem or hub look-up)."""
    return _registered_key(name)


def _replace_dir(tmp: Path, out_dir: Path) -> None:
    """Move a finished ``tmp`` folder onto ``out_dir``, replacing only a previous checkpoint."""
    if out_dir.exists():
        if out_dir.is_dir() and (not any(out_dir.iterdir()) or (out_dir / "config.json").is_file()):
            shutil.rmtree(out_dir)
        else:
            shutil.rmtree(tmp, ignore_errors=True)
            raise BenchmarkError(f"{out_dir} exists and is not a saved backbone; choose an empty or new folder")
    os.replace(tmp, out_dir)


def prepare_backbone(name: str, spec: Rescale, out_dir: Path) -> dict[str, Any]:
    """Load ``name``, rescale its MLM head per ``spec``, save model + tokenizer into ``out_dir``.

    The folder is written next to ``out_dir`` first and moved into place when complete, so an
    interrupted run never leaves a half-saved backbone. Returns the record for the stage's config:
    the backbone, the spec, and ``benchmark.rescale.apply_rescale``'s record (method, factor,
    params/tied/norms before and after, and the match statistic in match mode).
    """
    from benchmark.rescale import apply_rescale

    out_dir = Path(out_dir)
    model, tokenizer = load_backbone(name)
    record: dict[str, Any] = {
        "backbone": backbone_key(name),
        "source": resolve_backbone(name),
        "model_type": model.config.model_type,
        "vocab_size": int(model.config.vocab_size),
        "hidden_size": int(model.config.hidden_size),
        "rescale": spec.to_dict(),
        **apply_rescale(model, spec, tokenizer),
    }
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = out_dir.parent / f".{out_dir.name}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    with quiet_transformers():
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
    faults.point("backbone:saved")
    _replace_dir(tmp, out_dir)
    return record
