"""Where each architecture keeps its MLM head, looked up by ``config.model_type``.

SPLADE reads the vocabulary logits of the MLM head, and the rescaling fix multiplies the head's
vocabulary projection, so both need the same attribute paths. They differ per family (BERT nests
them under ``cls.predictions``, ModernBERT/Ettin keep ``head`` + ``decoder`` at the top), hence a
table rather than attribute sniffing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from benchmark.common.errors import BenchmarkError
from benchmark.common.registry import Registry

if TYPE_CHECKING:
    import torch
    from torch import nn


@dataclass(frozen=True)
class HeadLayout:
    """Dotted attribute paths of an MLM head inside a ``*ForMaskedLM`` model.

    transform: modules between the encoder output and the vocabulary projection, as state-dict
               prefixes for the missing-head check; they are never applied in sequence here
               (RoBERTa's and DistilBERT's activation sits in their forward, between them).
    decoder:   the ``nn.Linear`` hidden → vocabulary (the "MLM-head projection" that gets rescaled).
    biases:    every parameter that holds the decoder's vocabulary bias; BERT and RoBERTa keep an
               alias (``cls.predictions.bias`` / ``lm_head.bias``) tied to ``decoder.bias``, and
               both must change together or the saved checkpoint disagrees with the live model.
    norm:      the head's last LayerNorm, right before the decoder. Its gain γ (and shift β, where it
               has one; ModernBERT's has none) sets the scale of what the decoder sees, so scaling
               γ, β and the decoder bias by α scales the logits by α without touching the decoder.
    embeddings: what the encoder does with a tied matrix's rows. ``"word"``: the word embedding alone
               goes through a LayerNorm (``embedding_norm``), so scaling the shared matrix by α moves
               the encoder's input only through that LayerNorm's ε (ModernBERT, Ettin); ``"sum"``:
               word, position (and type) embeddings are summed before the LayerNorm (BERT, RoBERTa,
               DistilBERT), so scaling the word rows changes the input itself.
    embedding_norm: the LayerNorm applied to the word embedding alone (``embeddings == "word"``).
    """

    transform: tuple[str, ...]
    decoder: str
    biases: tuple[str, ...]
    norm: str
    embeddings: str = "sum"
    embedding_norm: str = ""

    @property
    def prefixes(self) -> tuple[str, ...]:
        """State-dict prefixes of all head parameters (to spot head weights missing at load time)."""
        return (*self.transform, self.decoder, *self.biases)


MODEL_TYPE_TO_HEAD: Registry[HeadLayout] = Registry(
    "model_type", fix="Add its MLM-head layout to MODEL_TYPE_TO_HEAD in benchmark/model/heads.py"
)
MODEL_TYPE_TO_HEAD.register(
    "bert",
    HeadLayout(
        ("cls.predictions.transform",),
        "cls.predictions.decoder",
        ("cls.predictions.decoder.bias", "cls.predictions.bias"),
        "cls.predictions.transform.LayerNorm",
    ),
)
# Ettin encoders are ModernBERT checkpoints (model_type "modernbert").
MODEL_TYPE_TO_HEAD.register(
    "modernbert", HeadLayout(("head",), "decoder", ("decoder.bias",), "head.norm", "word", "model.embeddings.norm")
)
MODEL_TYPE_TO_HEAD.register(
    "roberta",
    HeadLayout(
        ("lm_head.dense", "lm_head.layer_norm"),
        "lm_head.decoder",
        ("lm_head.decoder.bias", "lm_head.bias"),
        "lm_head.layer_norm",
    ),
)
MODEL_TYPE_TO_HEAD.register(
    "distilbert",
    HeadLayout(
        ("vocab_transform", "vocab_layer_norm"), "vocab_projector", ("vocab_projector.bias",), "vocab_layer_norm"
    ),
)


def head_layout(model_or_config: Any) -> HeadLayout:
    """The head layout for a model or a config (anything with ``model_type`` or ``config.model_type``)."""
    config = getattr(model_or_config, "config", model_or_config)
    return MODEL_TYPE_TO_HEAD[getattr(config, "model_type", None) or "<none>"]


def _get(model: nn.Module, path: str) -> Any:
    obj: Any = model
    for part in path.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            raise BenchmarkError(
                f"{type(model).__name__} has no attribute {path!r}; the head layout for "
                f"model_type {model.config.model_type!r} does not match this transformers version"
            )
    return obj


def _set(model: nn.Module, path: str, value: Any) -> None:
    parent, _, name = path.rpartition(".")
    setattr(_get(model, parent) if parent else model, name, value)


@dataclass(frozen=True)
class MLMHead:
    """Live handles on one model's MLM head."""

    model: nn.Module
    layout: HeadLayout

    @property
    def transform(self) -> tuple[nn.Module, ...]:
        return tuple(_get(self.model, p) for p in self.layout.transform)

    @property
    def norm(self) -> nn.LayerNorm:
        """The LayerNorm whose output the decoder projects (γ = ``norm.weight``, β = ``norm.bias`` or None)."""
        return _get(self.model, self.layout.norm)

    @property
    def decoder(self) -> nn.Linear:
        return _get(self.model, self.layout.decoder)

    @property
    def weight(self) -> torch.nn.Parameter:
        """The vocabulary projection [vocab_size, hidden_size]."""
        return self.decoder.weight

    @property
    def bias(self) -> torch.nn.Parameter | None:
        """The vocabulary bias actually used in forward (``decoder.bias``), or None."""
        return self.decoder.bias

    def bias_params(self) -> list[tuple[str, torch.nn.Parameter]]:
        """Every (path, parameter) holding the decoder bias, aliases included, skipping absent ones."""
        out = []
        for path in self.layout.biases:
            parent, _, name = path.rpartition(".")
            param = getattr(_get(self.model, parent) if parent else self.model, name, None)
            if param is not None:
                out.append((path, param))
        return out

    @property
    def tied(self) -> bool:
        """True when the projection is the very tensor of the input embeddings."""
        return self.weight is self.model.get_input_embeddings().weight

    @property
    def embedding_norm(self) -> nn.LayerNorm | None:
        """The LayerNorm that normalises the word embedding alone (None where embeddings are summed first)."""
        return _get(self.model, self.layout.embedding_norm) if self.layout.embeddings == "word" else None

    def set_param(self, path: str, value: torch.nn.Parameter) -> None:
        _set(self.model, path, value)


def mlm_head(model: nn.Module) -> MLMHead:
    """Handles on the MLM head of a ``*ForMaskedLM`` model; BenchmarkError for unmapped types."""
    head = MLMHead(model, head_layout(model))
    head.decoder  # noqa: B018  (the property's lookup fails early when the layout does not match the model)
    return head


# --- the projection's constant α (benchmark.model.rescale's ``projection``, this harness's extension) ---

#: Config attribute holding the projection's constant multiplier α (transformers keeps it in config.json).
PROJECTION_SCALE = "mlm_projection_scale"


def projection_scale(model_or_config: Any) -> float:
    """α of method ``projection`` recorded in a model's config (1.0 when absent)."""
    config = getattr(model_or_config, "config", model_or_config)
    value = getattr(config, PROJECTION_SCALE, None)
    if value is None:
        return 1.0
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise BenchmarkError(f"config.{PROJECTION_SCALE} must be a positive finite number, got {value!r}")
    return float(value)


class _ScaleInput:
    """Decoder forward pre-hook: the projection's input × α (a picklable callable, not a lambda)."""

    def __init__(self, factor: float) -> None:
        self.factor = factor

    def __call__(self, module: Any, args: tuple[Any, ...]) -> tuple[Any, ...]:
        return (args[0] * self.factor, *args[1:])


def applied_projection_scale(model: nn.Module) -> float:
    """The α the decoder of ``model`` applies now (1.0 without the hook)."""
    decoder = model.get_output_embeddings()
    installed = getattr(decoder, "_benchmark_projection_scale", None)
    return installed[0] if installed is not None else 1.0


def attach_projection_scale(model: nn.Module) -> float:
    """Make ``model``'s forward apply its config's ``mlm_projection_scale`` α; returns α.

    The one function every loader of a harness checkpoint calls (backbone, training, encoding,
    norms). The decoder gets a pre-hook that multiplies its input by α, prepended so that hooks
    registered later (the encoder's capture of the decoder input) see α·h. Idempotent.
    """
    factor = projection_scale(model)
    decoder = model.get_output_embeddings()
    installed = getattr(decoder, "_benchmark_projection_scale", None)
    if installed is not None:
        if installed[0] == factor:
            return factor
        installed[1].remove()
        del decoder._benchmark_projection_scale
    if factor != 1.0:
        handle = decoder.register_forward_pre_hook(_ScaleInput(factor), prepend=True)
        decoder._benchmark_projection_scale = (factor, handle)
    return factor


def check_projection_scale(model: nn.Module, where: str = "model") -> float:
    """α of ``model``, refusing a model whose config says α but whose forward does not apply it."""
    factor, applied = projection_scale(model), applied_projection_scale(model)
    if factor != applied:
        raise BenchmarkError(
            f"{where}: config.{PROJECTION_SCALE} = {factor:g} but the loaded MLM head applies {applied:g}; load "
            "harness checkpoints with benchmark.retrieval.impact_vectors.load_model or "
            "benchmark.model.loader.load_backbone "
            "(or call benchmark.model.heads.attach_projection_scale(model) after from_pretrained)"
        )
    return factor
