"""Rescaling the MLM head once, at initialisation, before SPLADE training.

Backbones whose MLM head produces large logits (ModernBERT, Ettin) start SPLADE with
``log(1+relu(·))`` switched on across most of the vocabulary, and training collapses. The paper's fix
multiplies the MLM-head projection by a constant α = 1/k once, before training, the same k for every
backbone (k = 16 headline), "without modifying the model architecture or training objective": the
weights' values change, no module is added, and the optimiser trains the rescaled weights. That is
the method ``once`` (the default).

Three things vary, each in one table:

- the spec (:class:`Rescale`): how α is chosen. ``none``, a ``factor``, or ``match`` (α = target /
  statistic, the target being a reference backbone's statistic or a number);
- the method (``METHODS``): which weights carry α.
  ``once`` (the paper's): the decoder matrix and its bias × α in place. On a tied head the decoder
  *is* the input embedding matrix, so the shared matrix is scaled. Where the word embedding alone
  passes through a LayerNorm (ModernBERT, Ettin: ``HeadLayout.embeddings == "word"``) the encoder's
  input moves only through that LayerNorm's ε: a row x of variance σ² becomes
  (x − μ)/√(σ² + ε/α²) instead of (x − μ)/√(σ² + ε), the same direction at r = √((σ² + ε)/(σ² + ε/α²))
  times the size (:func:`embedding_scale`); a LayerNorm-ed pre-norm layer sees the direction, the residual
  stream the size, and ModernBERT's layer 0 (``attn_norm`` is ``Identity``) the size too. Both r and the
  encoder output's drift on a shipped sample are recorded per backbone. Where word, position and type
  embeddings are summed before the LayerNorm (BERT), scaling the shared matrix changes the input
  itself (bert-tiny trained to chance), so the planner gives such a backbone ``untie`` instead and
  labels the arm an extension: the paper's BERT-SPLADE is its unrescaled baseline.
  This harness's extensions, kept for comparison: ``untie`` gives the head its own scaled copy,
  adding vocab × hidden parameters; ``projection`` keeps W at its pretrained scale and multiplies
  W·h by a constant α in every forward (stored in the checkpoint's config as
  ``mlm_projection_scale``, applied by :func:`attach_projection_scale`): the same logits at step 0,
  but Adam's steps ignore the gradient's scale, so the projection then moves about k× more slowly in
  logit space than the rescaled weights do (on a shared matrix behind a LayerNorm, ``once`` equals
  ``projection`` with k× the learning rate and wd/k on that matrix); ``head-norm`` scales the head
  LayerNorm's γ, β and the decoder bias (same logits at step 0, trains differently again); ``tied``
  scales the decoder matrix in place whatever the architecture (on BERT: the input embeddings too);
- the match statistic (``STATISTICS``, mode ``match``, this harness's extension: the paper uses a
  fixed k): ``frobenius`` ‖αW‖_F (the MLM-head L2 norm the paper reports), ``row-rms``
  (‖αW‖_F/√V, the typical row norm) or ``logit-std`` (the spread of the MLM logits over the
  vocabulary on a fixed SciFact sample). The weight statistics read the effective projection
  (α of ``projection`` included); they do not see the head's LayerNorm gain, the hidden size, or a
  ``head-norm`` rescaling.

Bias: with ``scale_bias=True`` (the default) the decoder bias is multiplied by α too, so every logit
is α × its former value at step 0: which vocabulary entries are positive (the support of relu, hence of
the SPLADE vector) is unchanged and only the magnitudes move. Left unscaled, a bias of the pretrained
size would dominate the shrunken W·h and change which terms are active, a second intervention. ``scale_bias=False``
keeps the shifted variant for ablations.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchmark.common.errors import BenchmarkError, unknown
from benchmark.common.registry import Registry
from benchmark.model.checkpoints import registered_key
from benchmark.model.heads import PROJECTION_SCALE, attach_projection_scale, projection_scale
from benchmark.model.loader import load_backbone

if TYPE_CHECKING:
    import torch
    from torch import nn
    from transformers import PreTrainedTokenizerBase

    from benchmark.model.heads import MLMHead

RESCALE_MODES = ("none", "factor", "match")
DEFAULT_METHOD = "once"
#: The paper's headline k (α = 1/k) and its range of factors.
PAPER_K = 16
PAPER_K_GRID = (1, 2, 4, 8, 16, 32)
DEFAULT_MATCH_STAT = "logit-std"
# logit-std reads the first SAMPLE_MAX_LENGTH tokens of each sample text (special tokens included).
SAMPLE_MAX_LENGTH = 128


# --- methods: which weights carry α -------------------------------------------------------------


@dataclass(frozen=True)
class Method:
    """How α reaches the logits. ``apply(head, α, scale_bias)`` runs under ``torch.no_grad``."""

    apply: Callable[[MLMHead, float, bool], None]
    adds_parameters: bool
    summary: str
    paper: bool = False  # the paper's method; every other one is this harness's extension
    changes: str = "head_norm"  # the head_snapshot statistic this method moves (what the norms plot shows)

    @property
    def origin(self) -> str:
        return "the paper's method" if self.paper else "this harness's extension"


def _scale_biases(head: MLMHead, factor: float) -> None:
    """Each distinct tensor holding the decoder bias, once (BERT and RoBERTa alias it when tied)."""
    seen: set[int] = set()
    for _, param in head.bias_params():
        if id(param) not in seen:
            seen.add(id(param))
            param.mul_(factor)


def _head_norm(head: MLMHead, factor: float, scale_bias: bool) -> None:
    # logits = W(γ⊙n + β) + b, with n the normalised hidden state: α on γ, β and b is α on every logit.
    norm = head.norm
    if norm.weight is None:
        raise BenchmarkError(f"the head LayerNorm of {type(head.model).__name__} has no gain γ; use method 'tied'")
    norm.weight.mul_(factor)
    if norm.bias is not None:
        norm.bias.mul_(factor)
    if scale_bias:
        _scale_biases(head, factor)


def _tied(head: MLMHead, factor: float, scale_bias: bool) -> None:
    head.weight.mul_(factor)  # when tied, this *is* the input embedding matrix
    if scale_bias:
        _scale_biases(head, factor)


def _untie(head: MLMHead, factor: float, scale_bias: bool) -> None:
    from torch import nn

    if not head.tied:
        return _tied(head, factor, scale_bias)
    model = head.model
    # The head gets its own copy, the embeddings stay put, and the config says so, so that
    # save/load keeps them apart. That also drops transformers' decoder.bias ↔ alias tie (BERT,
    # RoBERTa): each alias gets its own tensor, saved with equal values.
    head.decoder.weight = nn.Parameter(head.weight.detach().clone() * factor)
    model.config.tie_word_embeddings = False
    bias_factor = factor if scale_bias else 1.0
    for path, param in head.bias_params():
        head.set_param(path, nn.Parameter(param.detach().clone() * bias_factor))


def embedding_scale(head: MLMHead, factor: float) -> tuple[float, float] | None:
    """What scaling a shared matrix by ``factor`` does to the word-embedding LayerNorm's output: each row x
    of variance σ² comes out multiplied by r = √((σ² + ε)/(σ² + ε/α²)), its direction unchanged (exact for
    a LayerNorm; its shift β, where there is one, does not move). Returns (smallest r, median r) over the
    vocabulary; None where the head is not tied to a word embedding normalised alone. r is near 1 only
    where σ² ≫ ε/α² (r ≥ 0.99 needs σ² ≥ 12,558 ε at α = 1/16, a row std of 0.35 for ε = 1e-5); rows at
    the 0.02 std of a fresh initialisation come out at about a third of their size."""
    import torch

    norm = head.embedding_norm
    if not head.tied or norm is None:
        return None
    var = head.weight.detach().double().var(dim=1, correction=0)
    eps = float(norm.eps)
    r = torch.sqrt((var + eps) / (var + eps / factor**2))
    return float(r.min()), float(torch.quantile(r, 0.5))


def encoder_drift(
    model: nn.Module, tokenizer: PreTrainedTokenizerBase, change: Callable[[], None], texts: Sequence[str] | None = None
) -> float:
    """Relative L2 change of the encoder's last hidden states over the real tokens of ``texts`` (default:
    16 of the shipped SciFact abstracts, 128 tokens) when ``change()`` is applied to ``model``."""
    import torch

    from benchmark.data.samples import scifact_abstracts

    enc = tokenizer(
        list(texts or scifact_abstracts()[:16]), padding=True, truncation=True, max_length=128, return_tensors="pt"
    ).to(next(model.parameters()).device)
    mask = enc["attention_mask"].bool()

    def hidden() -> torch.Tensor:
        with torch.inference_mode():
            return model(**enc, output_hidden_states=True).hidden_states[-1][mask].double()

    before = hidden()
    change()
    return float((hidden() - before).norm() / before.norm())


def _once(head: MLMHead, factor: float, scale_bias: bool) -> None:
    # the paper's operation: the values × α once; the optimiser then trains the rescaled weights
    if head.tied and head.embedding_norm is None:
        raise BenchmarkError(
            f"method 'once' would scale the shared matrix of {type(head.model).__name__}, whose word embeddings are "
            "summed with position embeddings before their LayerNorm, so the encoder's input would change; use method "
            "'untie' (an untied scaled copy, this harness's extension)"
        )
    _tied(head, factor, scale_bias)


def _projection(head: MLMHead, factor: float, scale_bias: bool) -> None:
    # logits = α·(W h) + α·b = W(α h) + (α b): α on the input keeps W (tied: the input embeddings) as is
    config = head.model.config
    setattr(config, PROJECTION_SCALE, projection_scale(config) * factor)
    if scale_bias:
        _scale_biases(head, factor)
    attach_projection_scale(head.model)


METHODS: Registry[Method] = Registry("rescale method", fix="Set method in [splade.rescale] or pass one of these")
METHODS.register(
    "once",
    Method(
        _once,
        False,
        "decoder matrix and bias × α once, then trained as they are (tied: the shared matrix, behind "
        "the word-embedding LayerNorm); no parameter added",
        paper=True,
    ),
)
METHODS.register(
    "projection",
    Method(
        _projection,
        False,
        "constant α on W·h in every forward (config mlm_projection_scale), decoder bias × α; "
        "no parameter added, input embeddings unchanged; trains the head about k× more slowly than 'once'",
        changes="projection_norm",
    ),
)
METHODS.register(
    "head-norm",
    Method(
        _head_norm,
        False,
        "head LayerNorm γ, β and decoder bias × α; no parameter added, ties kept",
        changes="head_gain",
    ),
)
METHODS.register("tied", Method(_tied, False, "vocabulary matrix × α in place (tied: the input embeddings too)"))
METHODS.register(
    "untie", Method(_untie, True, "an untied copy of the vocabulary matrix × α; adds vocab × hidden parameters")
)


# --- match statistics ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Statistic:
    """A scale of the MLM head: ``measure(model, tokenizer)``; α = target / statistic."""

    measure: Callable[[nn.Module, PreTrainedTokenizerBase | None], float]
    needs_text: bool
    summary: str


def frobenius(tensor: torch.Tensor) -> float:
    """Frobenius (L2) norm, accumulated in float64."""
    import torch

    return float(torch.linalg.norm(tensor.detach().double()))


def _frobenius(model: nn.Module, tokenizer: Any = None) -> float:
    from benchmark.model.heads import mlm_head

    return frobenius(mlm_head(model).weight) * projection_scale(model)


def _row_rms(model: nn.Module, tokenizer: Any = None) -> float:
    from benchmark.model.heads import mlm_head

    weight = mlm_head(model).weight
    return frobenius(weight) * projection_scale(model) / math.sqrt(weight.shape[0])


def sample_logits(
    model: nn.Module,
    tokenizer: PreTrainedTokenizerBase,
    texts: Sequence[str] | None = None,
    max_length: int = SAMPLE_MAX_LENGTH,
    batch_size: int = 8,
) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """(logits [batch, tokens, vocab], attention mask [batch, tokens]) over ``texts``, batch by batch.

    ``texts`` defaults to the shipped SciFact abstracts. Batches are small because the logits of one
    batch take batch × tokens × vocab floats (8 × 128 × 50k ≈ 200 MB).
    """
    import torch

    from benchmark.data.samples import scifact_abstracts

    texts = list(scifact_abstracts() if texts is None else texts)
    device = next(model.parameters()).device
    for start in range(0, len(texts), batch_size):
        enc = tokenizer(
            texts[start : start + batch_size], padding=True, truncation=True, max_length=max_length, return_tensors="pt"
        )
        mask = enc["attention_mask"].to(device)
        with torch.inference_mode():
            logits = model(input_ids=enc["input_ids"].to(device), attention_mask=mask).logits
        yield logits, mask


def token_logit_std(logits: torch.Tensor, mask: torch.Tensor) -> tuple[float, int]:
    """(sum over real tokens of the std of their logits over the vocabulary, number of real tokens).

    Population std (÷V) per token in the logits' dtype (one fused pass; float32 keeps ~1e-6 relative,
    ample for a scale), summed in float64. Multiplying the logits by a power of two multiplies it
    exactly, as every step is a rounding that commutes with powers of two.
    """
    import torch

    var, _ = torch.var_mean(logits, dim=-1, correction=0)  # [batch, tokens]
    real = mask.bool()
    return float(var[real].sqrt().double().sum()), int(real.sum())


def logit_std(model: nn.Module, tokenizer: PreTrainedTokenizerBase, texts: Sequence[str] | None = None) -> float:
    """Mean over the sample's tokens of the std of the MLM logits over the vocabulary."""
    total, count = 0.0, 0
    for logits, mask in sample_logits(model, tokenizer, texts):
        s, n = token_logit_std(logits, mask)
        total, count = total + s, count + n
    return total / count


def _logit_std(model: nn.Module, tokenizer: Any = None) -> float:
    if tokenizer is None:
        raise BenchmarkError("match statistic 'logit-std' needs the backbone's tokenizer")
    return logit_std(model, tokenizer)


STATISTICS: Registry[Statistic] = Registry(
    "rescale match statistic", fix="Set match_stat in [splade.rescale] or pass one of these"
)
STATISTICS.register("frobenius", Statistic(_frobenius, False, "Frobenius norm of the projection ‖αW‖_F"))
STATISTICS.register("row-rms", Statistic(_row_rms, False, "RMS of the projection's row norms, ‖αW‖_F/√vocab"))
STATISTICS.register(
    "logit-std",
    Statistic(_logit_std, True, "std of the MLM logits over the vocabulary, mean over a SciFact sample's tokens"),
)


def measure(stat: str, model: nn.Module, tokenizer: PreTrainedTokenizerBase | None = None) -> float:
    """The match statistic ``stat`` of ``model`` as it is now."""
    return STATISTICS[stat].measure(model, tokenizer)


# --- the spec -----------------------------------------------------------------------------------


def _positive_number(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise BenchmarkError(f"{what} must be a positive number, got {value!r}")
    if not math.isfinite(value) or value <= 0:
        raise BenchmarkError(f"{what} must be a positive finite number, got {value!r}")
    return float(value)


def _as_number(value: Any) -> Any:
    """'12.5' → 12.5 (a CLI target); any other string stays a backbone name."""
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return value
    return value


def _same_backbone(a: str, b: str) -> bool:
    """Whether two backbone names (keys, registered hub ids or folders) name the same checkpoint."""
    if a == b:
        return True
    key_a, key_b = registered_key(a), registered_key(b)
    if key_a is not None or key_b is not None:
        return key_a == key_b
    pa, pb = Path(a).expanduser(), Path(b).expanduser()
    return pa.is_dir() and pb.is_dir() and pa.resolve() == pb.resolve()


@dataclass(frozen=True)
class Rescale:
    """How to rescale the MLM head.

    mode "none": the head as is. "factor": multiply the logits by ``factor``. "match": α = target /
    ``match_stat`` of this backbone, where ``match`` is a reference backbone (its statistic) or a
    number (the target itself). ``method`` says which weights carry α (``METHODS``).
    """

    mode: str = "none"
    factor: float | None = None
    match: str | float | None = None
    scale_bias: bool = True
    method: str = DEFAULT_METHOD
    match_stat: str = DEFAULT_MATCH_STAT

    def __post_init__(self) -> None:
        if self.mode not in RESCALE_MODES:
            raise unknown("rescale mode", self.mode, RESCALE_MODES)
        METHODS[self.method]  # unknown → one line listing the valid ones
        STATISTICS[self.match_stat]
        if not isinstance(self.scale_bias, bool):
            raise BenchmarkError(f"rescale scale_bias must be true or false, got {self.scale_bias!r}")
        if self.mode == "none":
            if self.factor is not None or self.match is not None:
                raise BenchmarkError(
                    "rescale mode 'none' takes no factor and no match target; use mode 'factor' or 'match'"
                )
        elif self.mode == "factor":
            if self.match is not None:
                raise BenchmarkError("rescale mode 'factor' takes no match target; use mode 'match' for a target")
            object.__setattr__(self, "factor", _positive_number(self.factor, "rescale factor"))
        else:
            if self.factor is not None:
                raise BenchmarkError("rescale mode 'match' computes its factor; drop the factor or use mode 'factor'")
            match = _as_number(self.match)
            if isinstance(match, str):
                if not match:
                    raise BenchmarkError("rescale match target is empty; give a backbone name or a number")
            else:
                match = _positive_number(match, "rescale match target")
            object.__setattr__(self, "match", match)

    @classmethod
    def from_options(
        cls,
        factor: float | None = None,
        match: str | float | None = None,
        scale_bias: bool = True,
        method: str = DEFAULT_METHOD,
        match_stat: str = DEFAULT_MATCH_STAT,
        default: tuple[str, float | None, str | float | None] = ("none", None, None),
    ) -> Rescale:
        """The one rule from a factor and a match target to a spec: a factor gives mode ``factor``, a match
        target mode ``match`` (at most one of them), neither the ``default`` (mode, factor, match): the
        suite's ``[splade.rescale]`` for the planner, no rescaling for the head diagnostics.

        Args:
            factor: ``--rescale-factor FACTOR``, α itself.
            match: ``--match-norm REF_OR_NUMBER``, a reference backbone or a target number.
            scale_bias: whether the decoder bias is scaled with the weights.
            method: a key of ``METHODS``.
            match_stat: a key of ``STATISTICS`` (read in mode ``match`` only).
            default: (mode, factor, match) when neither is given; the field the mode does not read is dropped.
        """
        if factor is not None and match is not None:
            raise BenchmarkError(
                f"give either a rescale factor ({factor:g}) or a match target ({match}), not both; "
                "drop --rescale-factor or --match-norm"
            )
        mode, factor, match = (
            ("factor", factor, None) if factor is not None else ("match", None, match) if match is not None else default
        )
        return cls(
            mode,
            factor=factor if mode == "factor" else None,
            match=match if mode == "match" else None,
            scale_bias=scale_bias,
            method=method,
            match_stat=match_stat,
        )

    @property
    def label(self) -> str:
        """Tag for tables: 'none', 'x0.25@head-norm', 'x2-nobias@tied', 'x0.25@untie+params',
        'match:bert-base-uncased/logit-std@head-norm', 'match:6.5/frobenius@tied'."""
        if self.mode == "none":
            return "none"
        if self.mode == "factor":
            text = f"x{self.factor:g}"
        else:
            target = f"{self.match:g}" if isinstance(self.match, float) else self.match
            text = f"match:{target}/{self.match_stat}"
        extra = "+params" if METHODS[self.method].adds_parameters else ""
        return f"{text}{'' if self.scale_bias else '-nobias'}@{self.method}{extra}"

    @property
    def k(self) -> float | None:
        """1/α for a factor spec (the paper's k: α = 1/k), else None."""
        return 1.0 / self.factor if self.mode == "factor" and self.factor else None

    @property
    def description(self) -> str:
        """One line for plans and reports: the amount, the method, whose method it is, and whether it adds
        parameters."""
        if self.mode == "none":
            return "MLM head as pretrained"
        if self.mode == "factor":
            k = self.k
            what = f"logits × {self.factor:g}" + (
                f" (k = {k:g}, α = 1/k)" if k is not None and k > 1 and k == round(k) else ""
            )
        else:
            what = f"{self.match_stat} matched to {self.match}"
        bias = "" if self.scale_bias else ", decoder bias kept"
        method = METHODS[self.method]
        return f"{what} via {self.method} ({method.origin}: {method.summary}){bias}"

    def is_identity_for(self, backbone: str) -> bool:
        """True when applying this spec to ``backbone`` leaves it bit-for-bit as loaded.

        ``none``, a factor of 1, or ``match`` naming the backbone itself (α = 1 by definition). A
        numeric target equal to the backbone's statistic is only known after measuring, so it is not.
        A method that adds parameters (``untie``) at a factor of 1 is not: the untied unscaled copy is
        the control that separates untying from scaling.
        """
        if self.mode == "none":
            return True
        if self.mode == "factor":
            return self.factor == 1.0 and not METHODS[self.method].adds_parameters
        return isinstance(self.match, str) and _same_backbone(self.match, backbone)

    def canonical_for(self, backbone: str) -> Rescale:
        """The spec with fields that cannot change ``backbone``'s weights reset: equal for equal models.

        Identity specs become ``Rescale()``; ``factor`` drops ``match_stat``; a reference backbone is
        named by its registry key. Stage configs built from this share one stage per distinct model.
        """
        if self.is_identity_for(backbone):
            return Rescale()
        # 'once' on a head tied to summed embeddings (BERT) cannot scale the shared matrix: an untied copy instead
        method = "untie" if self.method == "once" and tie_handling(backbone) == "untie" else self.method
        if self.mode == "factor":
            return Rescale("factor", factor=self.factor, scale_bias=self.scale_bias, method=method)
        match = (registered_key(self.match) or self.match) if isinstance(self.match, str) else self.match
        return Rescale("match", match=match, scale_bias=self.scale_bias, method=method, match_stat=self.match_stat)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def tie_handling(backbone: str) -> str | None:
    """How ``once`` reaches ``backbone``'s head, from its architecture facts (no weights loaded): "head"
    (an untied decoder, scaled in place), "shared" (tied to a word embedding normalised alone: the
    shared matrix is scaled), "untie" (tied to embeddings summed before their LayerNorm: an untied
    scaled copy, this harness's extension); None when unknown before loading."""
    from benchmark.model.heads import MODEL_TYPE_TO_HEAD
    from benchmark.model.loader import backbone_architecture

    arch = backbone_architecture(backbone)
    if arch is None or arch.model_type not in MODEL_TYPE_TO_HEAD:
        return None
    if not arch.tied:
        return "head"
    return "shared" if MODEL_TYPE_TO_HEAD[arch.model_type].embeddings == "word" else "untie"


def tie_note(backbone: str) -> str:
    """One line for the dry run: what ``once`` does to ``backbone``'s head and what it costs in parameters."""
    from benchmark.model.loader import backbone_architecture

    arch = backbone_architecture(backbone)
    handling = tie_handling(backbone)
    model = f"{arch.model_type}, " if arch is not None else ""
    if handling == "head":
        return f"MLM head ({model}decoder not tied): 'once' scales the decoder in place; no parameter added"
    if handling == "shared":
        return (
            f"MLM head ({model}tied to word embeddings that a LayerNorm normalises alone): 'once' scales the shared "
            "matrix; each token's embedding keeps its direction and shrinks through that LayerNorm's epsilon "
            "(recorded, "
            "with the encoder output's drift); no parameter added"
        )
    if handling == "untie":
        size = _untied_copy_size(backbone)
        added = (
            f"+{size:,} parameters (vocab × hidden + vocab: the bias's alias becomes its own tensor)"
            if size
            else "+vocab × hidden + vocab parameters"
        )
        return (
            f"MLM head ({model}tied to word embeddings summed with position and type embeddings before the "
            f"LayerNorm): scaling the shared matrix would change the input, so 'once' runs as 'untie', an untied "
            f"scaled copy, {added}, this harness's extension (the paper's BERT is its unrescaled baseline)"
        )
    return "MLM head: architecture known only once loaded ('once' refuses a tie to summed embeddings then)"


def _untied_copy_size(backbone: str) -> int | None:
    """What an untied copy adds, as the backbone record counts it: the copy (vocab × hidden) and the decoder
    bias, an alias of the head's bias in BERT and RoBERTa, which becomes a tensor of its own (+vocab)."""
    from benchmark.model.loader import backbone_architecture, local_config

    arch = backbone_architecture(backbone)
    if arch is not None and arch.vocab_size and arch.hidden_size:
        return arch.vocab_size * (arch.hidden_size + 1)
    config = local_config(backbone)
    try:
        return int(config["vocab_size"]) * (int(config["hidden_size"]) + 1) if config else None
    except (KeyError, TypeError, ValueError):  # the count is stated once the backbone stage has run
        return None


def rescale_tag(
    method: str,
    factor: float | str | None,
    mode: str = "factor",
    *,
    match_stat: str | None = None,
    stat_before: float | None = None,
    stat_after: float | None = None,
    params_added: int | None = None,
    embedding_scale_median: float | None = None,
    encoder_drift: float | None = None,
) -> str:
    """How a head was rescaled, in the words of table rows, the dry run and results.json: the one label of
    a rescale, from what is known of it. As planned: the method and the factor (a matched factor as the
    string ``match:<target>``); as the backbone stage recorded it: also the matched statistic before and
    after, the parameters added, and what a shared matrix did to the embeddings and the encoder's output.

    'once ×0.0625 = 1/16' (the paper's method); 'projection ×0.0625 = 1/16, extension'; 'untie ×0.0625 =
    1/16, untied copy +vocab × hidden parameters, extension' (planned; recorded: the count); 'head-norm
    match:bert-base-uncased, extension' (planned), 'head-norm, logit-std 0.1523 → 2.66 (×17.5),
    extension' (recorded); '' for an untouched head.
    """
    if mode in (None, "none") or not method or factor is None:
        return ""
    try:
        value = float(factor)
    except ValueError:  # planned, a factor known once measured
        return f"{method} {factor}, extension"
    if value == 1.0 and not (method in METHODS and METHODS[method].adds_parameters):
        return ""
    paper = method in METHODS and METHODS[method].paper and mode == "factor"
    extension = "" if paper else ", extension"
    if mode == "match":
        return f"{method}, {match_stat} {stat_before:.4g} → {stat_after:.4g} (×{value:.4g}){extension}"
    k = 1.0 / value if value > 0 else 0.0
    how = ""
    if params_added is None:  # planned: what the method adds by its nature
        if method in METHODS and METHODS[method].adds_parameters:
            how = ", untied copy +vocab × hidden parameters"
    elif params_added > 0:
        how = f", untied copy +{params_added:,} parameters"
    elif method == "once" and embedding_scale_median is not None:
        # the median row's embedding size (direction kept) and the encoder output's drift; docs/rescaling.md
        how = f", shared matrix (input ×{embedding_scale_median:.2g}"
        how += f", output {100 * encoder_drift:.2g} %)" if encoder_drift is not None else ")"
    return f"{method} ×{value:g}" + (f" = 1/{k:g}" if k > 1 and k == round(k) else "") + how + extension


def record_tag(record: Mapping[str, Any]) -> str:
    """``rescale_tag`` of a backbone stage's record (``apply_rescale``'s keys)."""
    return rescale_tag(
        record.get("method") or "",
        record.get("factor"),
        record.get("mode") or "none",
        match_stat=record.get("match_stat"),
        stat_before=record.get("stat_before"),
        stat_after=record.get("stat_after"),
        params_added=(record.get("params_after") or 0) - (record.get("params_before") or 0),
        embedding_scale_median=record.get("embedding_scale_median"),
        encoder_drift=record.get("encoder_drift"),
    )


# --- applying it --------------------------------------------------------------------------------


@lru_cache(maxsize=8)
def reference_statistic(name: str, stat: str) -> float:
    """Match statistic ``stat`` of backbone ``name`` as loaded (each loaded once per process)."""
    model, tokenizer = load_backbone(name)
    return measure(stat, model, tokenizer)


def resolve_factor(
    spec: Rescale, model: nn.Module, tokenizer: PreTrainedTokenizerBase | None = None
) -> tuple[float, float | None, float | None]:
    """(α, the model's statistic, the target) for ``spec``; the last two are None unless mode is match."""
    if spec.mode == "none":
        return 1.0, None, None
    if spec.mode == "factor":
        return float(spec.factor), None, None  # type: ignore[arg-type]
    current = measure(spec.match_stat, model, tokenizer)
    target = spec.match if isinstance(spec.match, float) else reference_statistic(str(spec.match), spec.match_stat)
    if not current > 0:
        raise BenchmarkError(
            f"cannot match {spec.match_stat}: it is {current!r} for this backbone (an all-zero MLM head?)"
        )
    return target / current, current, target


def count_parameters(model: nn.Module) -> int:
    """Distinct parameter elements: a tied matrix counts once (as ``num_parameters`` counts)."""
    return sum(p.numel() for p in model.parameters())


#: head_snapshot keys a method can move (Method.changes), as plots and tables name them.
SNAPSHOT_LABELS = {"projection_norm": "‖αW‖_F", "head_gain": "rms(γ)", "head_norm": "‖W‖_F"}


def head_snapshot(model: nn.Module) -> dict[str, Any]:
    """What a method may change: parameter count, tie, decoder/bias/embedding norms, head gain rms(γ),
    and the projection's constant α with the effective projection norm ‖αW‖_F."""
    from benchmark.model.heads import mlm_head

    head = mlm_head(model)
    gamma = head.norm.weight
    scale = projection_scale(model)
    return {
        "params": count_parameters(model),
        "tied": head.tied,
        "head_norm": frobenius(head.weight),
        "projection_scale": scale,
        "projection_norm": frobenius(head.weight) * scale,
        "bias_norm": frobenius(head.bias) if head.bias is not None else 0.0,
        "head_gain": frobenius(gamma) / math.sqrt(gamma.numel()) if gamma is not None else 1.0,
        "embedding_norm": frobenius(model.get_input_embeddings().weight),
    }


def apply_rescale(model: nn.Module, spec: Rescale, tokenizer: PreTrainedTokenizerBase | None = None) -> dict[str, Any]:
    """Rescale ``model``'s MLM head in place per ``spec``; returns the record of what changed.

    A factor of exactly 1 leaves the model untouched, except with a method that adds parameters: ``untie``
    × 1 gives the head an untied unscaled copy (the same logits at step 0, its own parameters).
    In match mode the statistic is measured again afterwards (``stat_after``): equal to the target up
    to rounding for ``projection``, ``head-norm`` and ``untie``; for ``tied`` the encoder's input moved too.

    Args:
        model: a ``*ForMaskedLM`` whose head ``benchmark.model.heads`` knows.
        spec: how α is chosen and which weights carry it.
        tokenizer: the model's tokenizer; needed by match statistics that read text (``logit-std``).

    Returns:
        The backbone stage's rescale keys (``benchmark.stages.records.BackboneRecord``): mode, method, α as
        ``factor``, the matched statistic before and after, the input drift of a shared matrix, and every
        ``head_snapshot`` statistic before and after.
    """
    import torch

    from benchmark.model.heads import mlm_head

    before = head_snapshot(model)
    factor, stat_before, target = resolve_factor(spec, model, tokenizer)
    scale = embedding_scale(mlm_head(model), factor) if spec.method in ("once", "tied") and factor != 1.0 else None
    drift = None

    def change() -> None:
        with torch.no_grad():
            METHODS[spec.method].apply(mlm_head(model), factor, spec.scale_bias)

    if factor != 1.0 and scale is not None and tokenizer is not None:
        drift = encoder_drift(model, tokenizer, change)
    elif factor != 1.0 or METHODS[spec.method].adds_parameters:
        change()
    after = head_snapshot(model)
    return {
        "mode": spec.mode,
        "method": spec.method,
        "origin": METHODS[spec.method].origin,
        "changes": METHODS[spec.method].changes,
        "match_stat": spec.match_stat if spec.mode == "match" else None,
        "label": spec.label,
        "factor": factor,
        "match": spec.match,
        "scale_bias": spec.scale_bias,
        "adds_parameters": after["params"] > before["params"],
        "stat_before": stat_before,
        "target": target,
        "stat_after": measure(spec.match_stat, model, tokenizer) if spec.mode == "match" else None,
        **({"embedding_scale_min": scale[0], "embedding_scale_median": scale[1]} if scale is not None else {}),
        **({"encoder_drift": drift} if drift is not None else {}),
        **{f"{k}_before": v for k, v in before.items()},
        **{f"{k}_after": v for k, v in after.items()},
    }
