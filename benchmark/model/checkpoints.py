"""Checkpoints by name: the backbone registry, what a name resolves to, and what it stands for now.

A name is a registered key (``$BENCHMARK_MODEL_DIR/<key>/`` first, then its hub id), an existing
local folder, or a hub id ``owner/name``; nothing is guessed from name patterns. Its fingerprint
(a local folder's content digest, or a hub id at its commit) enters stage ids, so replacing the
checkpoint behind a name gives new stages. Synthetic backbones (``benchmark.model.synthetic``) are built
on top of this module and resolved by ``benchmark.model.loader``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmark.common.errors import BenchmarkError, unknown
from benchmark.common.fingerprint import tree_digest
from benchmark.common.registry import Registry

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


@dataclass(frozen=True)
class Architecture:
    """What a registered backbone's rescaling depends on, known before its weights are loaded.

    model_type: its transformers ``model_type`` (the MLM-head layout, and whether its embeddings are
                normalised alone or summed first: ``benchmark.model.heads``); tied: its decoder is the input
                embedding matrix (``tie_word_embeddings``, true for every backbone of the paper).
    """

    model_type: str
    tied: bool = True
    source: str = ""
    vocab_size: int | None = None  # where known: an untied copy adds vocab × hidden parameters
    hidden_size: int | None = None


#: Architecture facts per registered key. Ettin encoders are ModernBERT checkpoints (model_type
#: "modernbert"): ModernBertForMaskedLM ties its decoder to ``tok_embeddings`` unless the config says
#: otherwise, and its embeddings are ``norm(tok_embeddings(ids))``, with no position or type rows summed in.
ARCHITECTURES: Registry[Architecture] = Registry("backbone architecture", fix="Register it in benchmark/checkpoints.py")
_BERT_SIZES = {"bert-tiny": (30522, 128), "bert-base-uncased": (30522, 768)}
for _key in BACKBONES:
    _family = "bert" if _key.startswith("bert") else "modernbert"
    ARCHITECTURES.register(
        _key,
        Architecture(
            _family,
            True,
            "BertForMaskedLM: decoder tied to word_embeddings; embeddings = LayerNorm(word + position + type)"
            if _family == "bert"
            else "ModernBertForMaskedLM (Ettin: the same class): decoder tied to tok_embeddings; "
            "embeddings = LayerNorm(tok_embeddings)",
            *_BERT_SIZES.get(_key, (None, None)),
        ),
    )


def config_architecture(config: Any) -> Architecture:
    """The facts read from a loaded or parsed config (``model_type``, ``tie_word_embeddings``, default true)."""
    get = config.get if isinstance(config, dict) else lambda k, d=None: getattr(config, k, d)
    tied = get("tie_word_embeddings", True)
    return Architecture(str(get("model_type", "") or ""), True if tied is None else bool(tied), "config")


HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*$")


def registered_key(name: str) -> str | None:
    """The registry key for a registered key or hub id, else None (no filesystem or hub look-up)."""
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


def resolve_checkpoint(name: str) -> str:
    """A local folder or a hub id for ``name`` (a registered key, a hub id, or a path; not a synthetic key)."""
    key = registered_key(name)
    if key is not None:
        local = _model_dir_entry(key)
        return str(local) if local is not None else BACKBONES[key]
    path = Path(name).expanduser()
    if path.is_dir():
        return str(path)
    if HUB_ID.match(name):
        return name
    if "/" in name or os.sep in name or name.startswith((".", "~")):
        raise BenchmarkError(f"backbone folder {name!r} does not exist; pass an existing *ForMaskedLM folder")
    raise unknown(BACKBONES.kind, name, BACKBONES, BACKBONES.fix)


def checkpoint_fingerprint(name: str) -> dict[str, Any]:
    """What a (non-synthetic) name stands for now: a local folder's content digest, or a hub id at its commit.

    A hub id is pinned to the commit in the local Hugging Face cache, else (online) the hub's
    current one; offline and uncached it stays unresolved (the stage cannot run then anyway).
    """
    try:
        source = resolve_checkpoint(name)
    except BenchmarkError:
        return {"name": name, "unresolved": True}  # validation reports it
    if Path(source).is_dir():
        return {"digest": tree_digest(source)}
    return {"hub": source, "revision": hub_revision(source)}


def hub_revision(repo_id: str) -> str | None:
    """The commit of ``repo_id``: the local cache's snapshot, else (online) the hub's current one."""
    try:
        from huggingface_hub import snapshot_download

        return Path(snapshot_download(repo_id, local_files_only=True)).name  # the snapshot folder is the commit
    except Exception:
        pass
    if os.environ.get("HF_HUB_OFFLINE") in ("1", "true", "True"):
        return None
    try:
        from huggingface_hub import HfApi

        return HfApi().model_info(repo_id, timeout=10).sha
    except Exception:
        return None


@contextmanager
def quiet_transformers(reports: bool = True) -> Iterator[None]:
    """Silence transformers' progress bars ("Loading weights", "Writing model shards": one per load and
    save, noise in any log) and, with ``reports``, its load reports (our own errors say what matters)."""
    from transformers.utils import logging as hf_logging

    verbosity = hf_logging.get_verbosity()
    bars = hf_logging.is_progress_bar_enabled()
    if reports:
        hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        hf_logging.set_verbosity(verbosity)
        if bars:
            hf_logging.enable_progress_bar()
