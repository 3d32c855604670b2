"""Rescaling the MLM-head projection once, at initialisation, before SPLADE training.

Backbones whose vocabulary projection has a large L2 norm (ModernBERT, Ettin) start SPLADE with
huge logits, so ``log(1+relu(·))`` activates most of the vocabulary and training collapses. The
fix multiplies the projection by a constant α before training: only weights change, so there is
no runtime cost and the saved checkpoint is an ordinary ``*ForMaskedLM``.

Bias: with ``scale_bias=True`` (the default) the decoder bias is multiplied by α too, so every
logit becomes exactly α × the original logit. Which vocabulary entries are positive (the support
of relu, hence of the SPLADE vector) and the ranking of logits are then unchanged; only their
magnitude shrinks. Scaling the weight alone would shift logits towards the bias and change which
terms are active at initialisation, mixing two effects. ``scale_bias=False`` keeps that variant
available for ablations.
"""

from __future__ import annotations

import math
import os
import shutil
from dataclasses import asdict, dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchmark import faults
from benchmark.errors import BenchmarkError, unknown

if TYPE_CHECKING:
    import torch
    from torch import nn

RESCALE_MODES = ("none", "factor", "match")


def _positive_number(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise BenchmarkError(f"{what} must be a positive number, got {value!r}")
    if not math.isfinite(value) or value <= 0:
        raise BenchmarkError(f"{what} must be a positive finite number, got {value!r}")
    return float(value)


def _as_number(value: Any) -> Any:
    """'12.5' → 12.5 (a CLI norm target); any other string stays a backbone name."""
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return value
    return value


@dataclass(frozen=True)
class Rescale:
    """How to rescale the MLM-head projection.

    mode "none": leave the head as is. mode "factor": multiply by ``factor``. mode "match": pick
    α = target / current head norm, where ``match`` is a reference backbone (its head's Frobenius
    norm) or a number (the norm itself).
    """

    mode: str = "none"
    factor: float | None = None
    match: str | float | None = None
    scale_bias: bool = True

    def __post_init__(self) -> None:
        if self.mode not in RESCALE_MODES:
            raise unknown("rescale mode", self.mode, RESCALE_MODES)
        if not isinstance(self.scale_bias, bool):
            raise BenchmarkError(f"rescale scale_bias must be true or false, got {self.scale_bias!r}")
        if self.mode == "none":
            if self.factor is not None or self.match is not None:
                raise BenchmarkError("rescale mode 'none' takes no factor and no match target; use mode 'factor' or 'match'")
        elif self.mode == "factor":
            if self.match is not None:
                raise BenchmarkError("rescale mode 'factor' takes no match target; use mode 'match' for a norm target")
            object.__setattr__(self, "factor", _positive_number(self.factor, "rescale factor"))
        else:
            if self.factor is not None:
                raise BenchmarkError("rescale mode 'match' computes its factor; drop the factor or use mode 'factor'")
            match = _as_number(self.match)
            if isinstance(match, str):
                if not match:
                    raise BenchmarkError("rescale match target is empty; give a backbone name or a norm value")
            else:
                match = _positive_number(match, "rescale match norm")
            object.__setattr__(self, "match", match)

    @classmethod
    def from_options(
        cls, factor: float | None = None, match: str | float | None = None, scale_bias: bool = True
    ) -> Rescale:
        """Build from the CLI pair ``--rescale FACTOR`` / ``--match-norm REF_OR_NUMBER`` (at most one)."""
        if factor is not None and match is not None:
            raise BenchmarkError("give either a rescale factor or a match-norm target, not both")
        if factor is not None:
            return cls("factor", factor=factor, scale_bias=scale_bias)
        if match is not None:
            return cls("match", match=match, scale_bias=scale_bias)
        return cls(scale_bias=scale_bias)

    @property
    def label(self) -> str:
        """Short tag for tables and run names: 'none', 'x0.25', 'match:bert-base-uncased', 'match:6.5'."""
        if self.mode == "none":
            return "none"
        text = f"x{self.factor:g}" if self.mode == "factor" else (
            f"match:{self.match:g}" if isinstance(self.match, float) else f"match:{self.match}"
        )
        return text if self.scale_bias else f"{text}-nobias"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def frobenius(tensor: torch.Tensor) -> float:
    """Frobenius (L2) norm, accumulated in float64."""
    import torch

    return float(torch.linalg.norm(tensor.detach().double()))


@lru_cache(maxsize=8)
def reference_head_norm(name: str) -> float:
    """Frobenius norm of the MLM-head projection of backbone ``name`` (loaded once per process)."""
    from benchmark.backbone import load_backbone
    from benchmark.heads import mlm_head

    model, _ = load_backbone(name)
    return frobenius(mlm_head(model).weight)


def resolve_factor(spec: Rescale, head_norm: float) -> tuple[float, float | None]:
    """The factor α for ``spec`` given the current head norm, and the target norm in match mode."""
    if spec.mode == "none":
        return 1.0, None
    if spec.mode == "factor":
        return float(spec.factor), None  # type: ignore[arg-type]
    target = spec.match if isinstance(spec.match, float) else reference_head_norm(str(spec.match))
    if head_norm <= 0:
        raise BenchmarkError("cannot match the head norm: the MLM-head projection is all zeros")
    return target / head_norm, target


def _scale_head(model: nn.Module, factor: float, scale_bias: bool) -> bool:
    """Multiply the projection (and optionally its bias) by ``factor``; returns True if it untied."""
    import torch
    from torch import nn

    from benchmark.heads import mlm_head

    head = mlm_head(model)
    untie = head.tied
    with torch.no_grad():
        if untie:
            # A tied projection *is* the input embedding matrix: give the head its own copy so the
            # embeddings stay put, and record it in the config so save/load keeps them apart.
            head.decoder.weight = nn.Parameter(head.weight.detach().clone() * factor)
            model.config.tie_word_embeddings = False
        else:
            head.weight.mul_(factor)
        bias_factor = factor if scale_bias else 1.0
        if untie:
            # tie_word_embeddings=False also drops transformers' decoder.bias ↔ alias tie (BERT,
            # RoBERTa), so each alias gets its own tensor and both are saved with equal values.
            for path, param in head.bias_params():
                head.set_param(path, nn.Parameter(param.detach().clone() * bias_factor))
        elif scale_bias:
            seen: set[int] = set()
            for _, param in head.bias_params():
                if id(param) not in seen:
                    seen.add(id(param))
                    param.mul_(bias_factor)
    return untie


def apply_rescale(model: nn.Module, spec: Rescale) -> dict[str, Any]:
    """Rescale ``model``'s MLM head in place per ``spec``; returns the record of what changed.

    A factor of exactly 1.0 leaves the model untouched (still tied if it was).
    """
    from benchmark.heads import mlm_head

    head = mlm_head(model)
    head_before = frobenius(head.weight)
    bias_before = frobenius(head.bias) if head.bias is not None else 0.0
    tied_before = head.tied
    factor, target = resolve_factor(spec, head_before)
    untied = _scale_head(model, factor, spec.scale_bias) if factor != 1.0 else False
    head = mlm_head(model)
    return {
        "mode": spec.mode,
        "label": spec.label,
        "factor": factor,
        "match": spec.match,
        "target_norm": target,
        "scale_bias": spec.scale_bias,
        "head_norm_before": head_before,
        "head_norm_after": frobenius(head.weight),
        "bias_norm_before": bias_before,
        "bias_norm_after": frobenius(head.bias) if head.bias is not None else 0.0,
        "embedding_norm": frobenius(model.get_input_embeddings().weight),
        "tied_before": tied_before,
        "untied": untied,
    }


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
    interrupted run never leaves a half-saved backbone. Returns the record for the run config.
    """
    from benchmark.backbone import backbone_key, load_backbone, quiet_transformers, resolve_backbone

    out_dir = Path(out_dir)
    model, tokenizer = load_backbone(name)
    record: dict[str, Any] = {
        "backbone": backbone_key(name),
        "source": resolve_backbone(name),
        "model_type": model.config.model_type,
        "vocab_size": int(model.config.vocab_size),
        "hidden_size": int(model.config.hidden_size),
        "rescale": spec.to_dict(),
        **apply_rescale(model, spec),
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
