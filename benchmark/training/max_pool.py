"""SPLADE max pooling fused with the MLM vocabulary projection, for training.

Why not sentence-transformers' ``Transformer(transformer_task="fill-mask") + SpladePooling``:
the Transformer returns the full [B, L, V] logits before SpladePooling sees them (its
``chunk_size`` only chunks the pooling of logits that already exist), and autograd then keeps
[B, L, V] activations (logits, relu, log1p) alive for the backward. For a 50k vocabulary, a batch
of 128 × 256 tokens that is 6.6 GB per tensor.

Here the vocabulary projection runs ``chunk_size`` tokens at a time inside one autograd Function
that keeps only the running max and its token index ([B, V]). log1p∘relu is monotone, so
``max_t log1p(relu(x_t)) = log1p(relu(max_t x_t))`` and the backward needs no recomputation: the
gradient of the pooled value flows to the one arg-max token, ``d/dx log1p(relu(x)) = exp(-w)``
for ``w = log1p(x) > 0``. So the logit gradient is a sparse matrix with one entry per active
(vector, term), and the backward is two sparse-dense products (measured on bert-tiny, 48 × 64
tokens, 65% of the vocabulary active: 0.1 s instead of 1.3 s). Peak extra memory is one
[B, chunk, V] block. Values and gradients equal SpladePooling(max, relu) on the masked logits
up to float32 summation order (and exact ties between tokens).
"""

from __future__ import annotations

from typing import Any

import torch
from sentence_transformers.base.modules.transformer import Transformer
from torch import nn

from benchmark.model.heads import projection_scale


class _SpladeMaxPool(torch.autograd.Function):
    """``log1p(relu(max_t mask_t · (hidden_t @ weight.T + bias)))`` without a [B, L, V] tensor."""

    @staticmethod
    def forward(
        ctx: Any, hidden: torch.Tensor, mask: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, chunk: int
    ) -> torch.Tensor:
        batch, length, _ = hidden.shape
        best = torch.zeros(batch, weight.shape[0], dtype=torch.float32, device=hidden.device)
        where = torch.zeros(batch, weight.shape[0], dtype=torch.int32, device=hidden.device)
        blocks = _LogitBlocks(hidden, weight, bias, chunk)
        for start in range(0, length, chunk):
            logits = blocks.at(start)  # [B, n, V] float32
            # masked positions contribute 0, exactly like SpladePooling's ``logits * mask`` (in place)
            logits.mul_(mask[:, start : start + chunk, None])
            values = logits.amax(dim=1)
            better = (values > best) | values.isnan()  # keep NaN visible for collapse detection
            best = torch.where(better, values, best)
            where = torch.where(better, _first_index_of(logits, values) + start, where)
        pooled = torch.log1p(best)  # best >= 0: relu is implied by starting from 0
        ctx.save_for_backward(hidden, weight, pooled, where)
        ctx.has_bias = bias is not None
        return pooled

    @staticmethod
    def backward(ctx: Any, grad_pooled: torch.Tensor) -> tuple[Any, ...]:
        hidden, weight, pooled, where = ctx.saved_tensors
        batch, length, width = hidden.shape
        # d log1p(relu(x)) / dx at the arg-max token: 1 / (1 + x) = exp(-pooled) where x > 0, else 0
        active = pooled > 0
        b, v = active.nonzero(as_tuple=True)
        g = grad_pooled[b, v].float() * torch.exp(-pooled[b, v])
        # The logit gradient is a sparse [B·L, V] matrix: one entry per active (vector, term), at
        # the arg-max token. Two sparse-dense products give the hidden and projection gradients at
        # a cost proportional to the active terms, not to B·L·V.
        rows = b * length + where[b, v].long()
        grad = torch.sparse_coo_tensor(
            torch.stack([rows, v]), g, (batch * length, weight.shape[0]), check_invariants=False
        )
        grad_hidden = grad_weight = grad_bias = None
        if ctx.needs_input_grad[0]:
            grad_hidden = torch.sparse.mm(grad, weight.float()).view(batch, length, width).to(hidden.dtype)
        if ctx.needs_input_grad[2]:
            grad_weight = torch.sparse.mm(grad.t(), hidden.reshape(-1, width).float()).to(weight.dtype)
        if ctx.has_bias and ctx.needs_input_grad[3]:
            grad_bias = torch.zeros(weight.shape[0], dtype=torch.float32, device=weight.device).index_add_(0, v, g)
            grad_bias = grad_bias.to(weight.dtype)
        return grad_hidden, None, grad_weight, grad_bias, None


class _LogitBlocks:
    """``linear(hidden[:, start : start + chunk], weight, bias)`` as float32, block by block.

    Each block is ``linear``'s own output, a fresh tensor: the same call the pooling made before it was
    fused, so its bits are that call's on every CPU class. A reused buffer filled by ``addmm``/``mm``
    saved page faults, but those kernels match ``linear`` bit for bit only on some CPU classes (on an
    Intel Xeon with AMX they differ at hidden 768), so the train stage's output would have depended on
    the machine's kernels rather than on the code."""

    def __init__(self, hidden: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, chunk: int) -> None:
        self.hidden, self.weight, self.bias, self.chunk = hidden, weight, bias, chunk

    def at(self, start: int) -> torch.Tensor:
        block = self.hidden[:, start : start + self.chunk]
        return torch.nn.functional.linear(block, self.weight, self.bias).float()  # autocast applies


def _first_index_of(logits: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
    """The first token whose logit equals its column's max: ``logits.max(dim=1)``'s index, which
    the reduction with indices computes 10× slower than ``amax`` (0 where the max is NaN)."""
    index = torch.zeros(values.shape, dtype=torch.int32, device=values.device)
    for token in range(logits.shape[1] - 1, -1, -1):  # the last write is the first token
        index.masked_fill_(logits[:, token] == values, token)
    return index


def splade_max_pool(
    hidden: torch.Tensor, mask: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, chunk_size: int | None
) -> torch.Tensor:
    """SPLADE vectors [B, V] (float32) from decoder inputs [B, L, H]; ``chunk_size`` tokens per block.

    ``chunk_size`` None or 0 takes the plain autograd path over the full [B, L, V] logits (the
    reference the chunked path is tested against).
    """
    mask = mask.to(torch.float32)
    if not chunk_size:
        logits = torch.nn.functional.linear(hidden, weight, bias).float() * mask[..., None]
        return torch.log1p(torch.relu(logits)).max(dim=1).values
    return _SpladeMaxPool.apply(hidden, mask, weight, bias, int(chunk_size))


def _module_path(root: nn.Module, target: nn.Module) -> tuple[nn.Module, str]:
    """The parent module and attribute name under which ``target`` sits inside ``root``."""
    for name, module in root.named_modules():
        if module is target and name:
            parent, _, attr = name.rpartition(".")
            return (root.get_submodule(parent) if parent else root), attr
    raise ValueError(f"{type(target).__name__} is not a submodule of {type(root).__name__}")


class SpladeMLM(Transformer):
    """A ``*ForMaskedLM`` whose output is the SPLADE vector, pooled chunk-wise (see module doc).

    Everything else (loading, tokenisation, saving, query/document max lengths) is
    sentence-transformers' Transformer with ``transformer_task="fill-mask"``. During forward the
    vocabulary projection (``get_output_embeddings()``) is swapped for an identity, so the model's
    own forward returns the MLM head's transformed hidden states [B, L, H]; the projection's
    weight and bias are then applied by :func:`splade_max_pool`. The swap is undone before
    forward returns, so saving writes the real head.
    """

    config_keys: list[str] = [*Transformer.config_keys, "chunk_size"]

    def __init__(self, model_name_or_path: str, *, chunk_size: int | None = 16, **kwargs: Any) -> None:
        kwargs.setdefault("transformer_task", "fill-mask")
        kwargs.setdefault("unpad_inputs", False)  # the pooling needs the padded [B, L] layout
        super().__init__(model_name_or_path, **kwargs)
        self.chunk_size = chunk_size
        from benchmark.model.heads import attach_projection_scale

        # α of method 'projection' (config.mlm_projection_scale): the model's own forward applies it
        # through the decoder; forward below, which bypasses the decoder, applies it to the head input
        attach_projection_scale(self.auto_model)

    @property
    def decoder(self) -> nn.Linear:
        decoder = self.auto_model.get_output_embeddings()
        if not isinstance(decoder, nn.Linear):
            raise TypeError(f"{type(self.auto_model).__name__}.get_output_embeddings() is not an nn.Linear")
        return decoder

    def forward(self, features: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        decoder = self.decoder
        parent, attr = _module_path(self.auto_model, decoder)
        setattr(parent, attr, nn.Identity())
        try:
            features = super().forward(features, **kwargs)
        finally:
            setattr(parent, attr, decoder)
        hidden = features.pop("token_embeddings")
        scale = projection_scale(self.auto_model)
        if (
            scale != 1.0
        ):  # α(W h) = W(α h): the projection's constant multiplier, exactly as the decoder hook applies it
            hidden = hidden * scale
        features["sentence_embedding"] = splade_max_pool(
            hidden, features["attention_mask"], decoder.weight, decoder.bias, self.chunk_size
        )
        return features

    def get_embedding_dimension(self) -> int:
        return self.decoder.out_features
