"""SpladeLoss with a global-batch FLOPS regulariser and a probe that records what it saw.

The ranking losses are sentence-transformers' own (SparseMultipleNegativesRankingLoss with
``gather_across_devices=True``, SparseMarginMSELoss); SpladeLoss and its λ warm-up callback are
used as they are. Two thin subclasses add what that stack lacks:

* :class:`GlobalFlopsLoss`: ST's FlopsLoss is ``sum_j (mean_i w_ij)^2`` over the rows of the
  *local* batch. Under DDP each rank then regularises its own shard and DDP averages, which
  optimises ``mean_r sum_j (mean_{i in r} w_ij)^2``; by Jensen that is larger than the FLOPS of
  the global batch, so an N-GPU run is pushed sparser than a mono-GPU run with the same global
  batch (and the gap grows with N). Gathering the rows with gradients first makes every rank
  compute the global value; the gather's backward sums the gradients from all ranks, and DDP's
  mean over ranks of those sums is exactly the gradient of the global FLOPS.
* :class:`MonitoredSpladeLoss`: records the loss parts, the FLOPS values and the activation
  statistics of every step (detached, on device, no host sync) for the telemetry and the outcome
  rules (``benchmark.training.detector``). Terms are counted as the index sees them: a weight counts
  when its quantised impact is at least 1 (``indexed_threshold``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch
from sentence_transformers.sparse_encoder.losses import (
    FlopsLoss,
    SparseMarginMSELoss,
    SparseMultipleNegativesRankingLoss,
    SpladeLoss,
)
from sentence_transformers.util import all_gather_with_grad
from torch import Tensor

from benchmark.common.registry import Registry
from benchmark.training.detector import SUPPORT_MAX_TERMS


def world_size() -> int:
    return (
        torch.distributed.get_world_size()
        if torch.distributed.is_available() and torch.distributed.is_initialized()
        else 1
    )


def indexed_threshold() -> float:
    """The smallest float32 weight the index keeps: ``benchmark.splade.impacts.quantise`` gives it impact >= 1.

    ``quantise`` rounds ``w · QUANT_SCALE`` half to even in float64 and is monotone in ``w``, so
    ``w >= indexed_threshold()`` is exactly ``quantise(w) >= 1`` for every float32 ``w``.
    """
    import numpy as np

    from benchmark.splade.impacts import QUANT_SCALE, quantise

    def kept(w: np.float32) -> bool:
        return int(quantise(np.array([w], dtype=np.float32))[0]) >= 1

    w = np.float32(0.5 / QUANT_SCALE)
    up, down = np.float32(np.inf), np.float32(0.0)
    while not kept(w):
        w = np.nextafter(w, up)
    while kept(np.nextafter(w, down)):
        w = np.nextafter(w, down)
    return float(w)


def mean_pairwise_cosine(vectors: Tensor) -> Tensor:
    """Mean cosine over pairs of different rows; an all-zero row has cosine 0 with every other row."""
    n = vectors.shape[0]
    if n < 2:
        return vectors.new_zeros(())
    norms = vectors.norm(dim=1, keepdim=True)
    unit = torch.where(norms > 0, vectors / norms.clamp_min(torch.finfo(vectors.dtype).tiny), torch.zeros_like(vectors))
    gram = unit @ unit.T
    return (gram.sum() - gram.diagonal().sum()) / (n * (n - 1))


class Probe:
    """Per-step statistics accumulated between two logging steps (tensors stay on device).

    Non-zeros, FLOPS and support count indexed terms (impact >= 1 after quantisation). ``ss_res`` /
    ``ss_tot``: MarginMSE's residual and total sums of squares of the teacher margins, for R².
    """

    SUMS = ("ranking_loss", "flops_reg_q", "flops_reg_d", "flops", "nnz_q", "nnz_d", "low_support_q", "query_cosine")
    MAXES = ("max_q", "max_d")
    GLOBAL_SUMS = ("ss_res", "ss_tot")  # summed over ranks at flush

    def __init__(self) -> None:
        self.seen: dict[str, Tensor] = {}
        self.finite: Tensor | None = None
        self.threshold = indexed_threshold()
        self._reset()

    def _reset(self) -> None:
        self.sums: dict[str, Tensor] = {}
        self.maxes: dict[str, Tensor] = {}
        self.steps = 0

    def observe(self, side: str, embeddings: Tensor, value: Tensor) -> None:
        """Called by a regulariser with the (global) batch of one side ('q' or 'd')."""
        self.seen[side] = embeddings.detach()
        self.seen[f"flops_reg_{side}"] = value.detach().float()

    def end_step(self, losses: dict[str, Tensor], labels: Tensor | None = None) -> None:
        q, d = self.seen.get("q"), self.seen.get("d")
        base = losses["base_loss"].detach().float()
        step = {"ranking_loss": base}
        finite = torch.isfinite(base)
        indexed = {}
        for side, emb in (("q", q), ("d", d)):
            if emb is None:
                continue
            emb = emb.float()
            indexed[side] = emb >= self.threshold
            counts = indexed[side].sum(1)
            step[f"nnz_{side}"] = counts.float().mean()
            step[f"flops_reg_{side}"] = self.seen[f"flops_reg_{side}"]
            self.maxes[f"max_{side}"] = torch.maximum(
                self.maxes.get(f"max_{side}", emb.new_zeros(())).float(), emb.max()
            )
            finite = finite & torch.isfinite(emb).all()
            if side == "q":
                step["low_support_q"] = (counts <= SUPPORT_MAX_TERMS).float().mean()
                step["query_cosine"] = mean_pairwise_cosine(torch.where(indexed[side], emb, 0.0))
        if "q" in indexed and "d" in indexed:
            # FLOPS as defined by Paria et al.: expected number of multiplications per (q, d) pair,
            # sum_j P(q_j indexed) P(d_j indexed), estimated on this batch
            step["flops"] = (indexed["q"].float().mean(0) * indexed["d"].float().mean(0)).sum()
        if labels is not None:
            teacher = labels.detach().float().reshape(-1)
            step["ss_res"] = base * teacher.numel()  # MarginMSE is the mean squared margin error
            step["ss_tot"] = ((teacher - teacher.mean()) ** 2).sum()
        for key, value in step.items():
            self.sums[key] = self.sums[key] + value if key in self.sums else value
        self.finite = finite
        self.steps += 1
        self.seen = {}

    def flush(self) -> dict[str, float]:
        """Means (maxima for max_*) since the last flush, as floats; one host sync."""
        if not self.steps:
            return {}
        if world_size() > 1:
            # the ranking loss and MarginMSE's sums are per rank (each rank's own queries); the rest
            # saw the gathered batch
            for key in ("ranking_loss", *self.GLOBAL_SUMS):
                if key in self.sums:
                    total = self.sums[key].clone()
                    torch.distributed.all_reduce(total)
                    self.sums[key] = total / world_size() if key == "ranking_loss" else total
        keys = [k for k in (*self.SUMS, *self.MAXES) if k in self.sums or k in self.maxes]
        values = [(self.sums[k] / self.steps) if k in self.sums else self.maxes[k] for k in keys]
        ss = [self.sums[k] for k in self.GLOBAL_SUMS if k in self.sums]
        floats = torch.stack([*values, *ss]).tolist()
        row = dict(zip(keys, floats[: len(keys)]))
        if ss:
            ss_res, ss_tot = floats[len(keys) :]
            row["r2"] = 1.0 - ss_res / ss_tot if ss_tot > 0 else None
        self._reset()
        return row


class GlobalFlopsLoss(FlopsLoss):
    """FLOPS regulariser ``sum_j (mean_i w_ij)^2`` over the global batch (see module doc)."""

    def __init__(self, model: Any, probe: Probe, side: str) -> None:
        super().__init__(model)
        self.probe = probe
        self.side = side

    def compute_loss_from_embeddings(self, embeddings: Tensor) -> Tensor:
        if world_size() > 1:
            embeddings = all_gather_with_grad(embeddings)
        value = torch.sum(torch.mean(embeddings.float(), dim=0) ** 2)
        self.probe.observe(self.side, embeddings, value)
        return value


class MonitoredSpladeLoss(SpladeLoss):
    """SpladeLoss that hands every step's loss parts to a :class:`Probe`."""

    def __init__(self, *args: Any, probe: Probe, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.probe = probe

    def forward(
        self, sentence_features: Iterable[dict[str, Tensor]], labels: Tensor | None = None
    ) -> dict[str, Tensor]:
        losses = super().forward(sentence_features, labels)
        if self.model.training:
            self.probe.end_step(losses, labels if isinstance(self.loss, SparseMarginMSELoss) else None)
        return losses


def _infonce(model: Any, scale: float) -> torch.nn.Module:
    # gather_across_devices: in-batch negatives from every rank, so an N-GPU step sees the same
    # negatives as a mono-GPU step on the global batch (ST all-gathers with gradients)
    return SparseMultipleNegativesRankingLoss(model, scale=scale, gather_across_devices=world_size() > 1)


def _marginmse(model: Any, scale: float) -> torch.nn.Module:
    return SparseMarginMSELoss(model)


#: recipe ``loss`` → ranking-loss factory (model, mnrl_scale)
RANKING_LOSSES: Registry[Any] = Registry("loss", fix="Set loss to one of these in the recipe")
RANKING_LOSSES.register("infonce", _infonce)
RANKING_LOSSES.register("marginmse", _marginmse)


def build_loss(
    model: Any, loss: str, lambda_q: float, lambda_d: float, mnrl_scale: float, probe: Probe
) -> MonitoredSpladeLoss:
    """SpladeLoss(ranking loss, λ_d · FLOPS(docs) + λ_q · FLOPS(queries)), FLOPS on the global batch."""
    return MonitoredSpladeLoss(
        model,
        loss=RANKING_LOSSES[loss](model, mnrl_scale),
        document_regularizer_weight=lambda_d,
        query_regularizer_weight=lambda_q,
        document_regularizer=GlobalFlopsLoss(model, probe, "d"),
        query_regularizer=GlobalFlopsLoss(model, probe, "q"),
        probe=probe,
    )
