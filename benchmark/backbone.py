"""Backbones: short names → checkpoints, loaded as ``*ForMaskedLM`` with a proven MLM head.

SPLADE's term weights are the MLM head's logits, so a backbone whose head was silently
re-initialised by ``from_pretrained`` (headless checkpoint, renamed keys) would train and evaluate
without complaint and report garbage. Loading therefore fails unless every head weight came from
the checkpoint.

Resolution order for a name: a registered key (``$BENCHMARK_MODEL_DIR/<key>/`` first, then its hub
id), an existing local folder, a hub id ``owner/name``. Nothing is guessed from name patterns.
"""

from __future__ import annotations

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
    """A local folder or a hub id for ``name`` (a key, a hub id, or a path)."""
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


def backbone_key(name: str) -> str:
    """A short label for tables and paths: the registry key, else the folder or repository name."""
    key = _registered_key(name)
    if key is not None:
        return key
    return Path(name.rstrip("/\\")).name or name


def _is_local(source: str) -> bool:
    return Path(source).is_dir()


def _load_error(name: str, source: str, exc: Exception) -> BenchmarkError:
    if _is_local(source):
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return BenchmarkError(f"backbone {name!r}: folder {source} is not a loadable checkpoint ({first})")
    key = backbone_key(name)
    return BenchmarkError(
        f"backbone {name!r}: {source} is not in the local Hugging Face cache and the hub is unreachable; "
        f"put the checkpoint in ${MODEL_DIR_ENV}/{key}/ or download it once online and set HF_HUB_OFFLINE=1"
    )


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

    config = load_config(name)
    source = resolve_backbone(name)
    try:
        with quiet_transformers():
            model, info = AutoModelForMaskedLM.from_pretrained(
                source, config=config, dtype=torch.float32, output_loading_info=True
            )
            tokenizer = AutoTokenizer.from_pretrained(source)
    except (OSError, ValueError) as exc:
        raise _load_error(name, source, exc) from None
    missing = _missing_head_keys(info, head_layout(config).prefixes)
    if missing:
        shown = ", ".join(missing[:4]) + (f" (+{len(missing) - 4} more)" if len(missing) > 4 else "")
        raise BenchmarkError(
            f"backbone {name!r} ({source}): MLM-head weights missing from the checkpoint and newly "
            f"initialised: {shown}; use a checkpoint saved from a *ForMaskedLM model"
        )
    if len(tokenizer) > config.vocab_size:
        raise BenchmarkError(
            f"backbone {name!r} ({source}): tokenizer has {len(tokenizer)} tokens but the MLM head only "
            f"{config.vocab_size}; the tokenizer does not belong to this checkpoint"
        )
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
