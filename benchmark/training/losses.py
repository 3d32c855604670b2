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
  statistics of every step (detached, on device, no host sync) for the telemetry.
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

from benchmark.registry import Registry


def world_size() -> int:
    return torch.distributed.get_world_size() if torch.distributed.is_available() and torch.distributed.is_initialized() else 1


class Probe:
    """Per-step statistics accumulated between two logging steps (tensors stay on device)."""

    SUMS = ("ranking_loss", "flops_reg_q", "flops_reg_d", "flops", "nnz_q", "nnz_d")
    MAXES = ("max_q", "max_d")

    def __init__(self) -> None:
        self.seen: dict[str, Tensor] = {}
        self.finite: Tensor | None = None
        self._reset()

    def _reset(self) -> None:
        self.sums: dict[str, Tensor] = {}
        self.maxes: dict[str, Tensor] = {}
        self.steps = 0

    def observe(self, side: str, embeddings: Tensor, value: Tensor) -> None:
        """Called by a regulariser with the (global) batch of one side ('q' or 'd')."""
        self.seen[side] = embeddings.detach()
        self.seen[f"flops_reg_{side}"] = value.detach().float()

    def end_step(self, losses: dict[str, Tensor]) -> None:
        q, d = self.seen.get("q"), self.seen.get("d")
        base = losses["base_loss"].detach().float()
        step = {"ranking_loss": base}
        finite = torch.isfinite(base)
        for side, emb in (("q", q), ("d", d)):
            if emb is None:
                continue
            active = emb > 0
            step[f"nnz_{side}"] = active.sum(1).float().mean()
            step[f"flops_reg_{side}"] = self.seen[f"flops_reg_{side}"]
            self.maxes[f"max_{side}"] = torch.maximum(self.maxes.get(f"max_{side}", emb.new_zeros(())).float(), emb.max().float())
            finite = finite & torch.isfinite(emb).all()
        if q is not None and d is not None:
            # FLOPS as defined by Paria et al.: expected number of multiplications per (q, d) pair,
            # sum_j P(q_j > 0) P(d_j > 0), estimated on this batch
            step["flops"] = ((q > 0).float().mean(0) * (d > 0).float().mean(0)).sum()
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
            # the ranking loss is per rank (each rank's own queries); the rest saw the gathered batch
            loss = self.sums["ranking_loss"].clone()
            torch.distributed.all_reduce(loss)
            self.sums["ranking_loss"] = loss / world_size()
        keys = [k for k in (*self.SUMS, *self.MAXES) if k in self.sums or k in self.maxes]
        values = torch.stack([(self.sums[k] / self.steps) if k in self.sums else self.maxes[k] for k in keys]).tolist()
        self._reset()
        return dict(zip(keys, values))


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

    def forward(self, sentence_features: Iterable[dict[str, Tensor]], labels: Tensor | None = None) -> dict[str, Tensor]:
        losses = super().forward(sentence_features, labels)
        if self.model.training:
            self.probe.end_step(losses)
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


def build_loss(model: Any, loss: str, lambda_q: float, lambda_d: float, mnrl_scale: float, probe: Probe) -> MonitoredSpladeLoss:
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
