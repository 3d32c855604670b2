"""The held-out dev batch: MRR@10 of held-out training queries among their in-batch candidates.

Training cannot see whether its model still ranks; the loss only says how it ranks the batch it is
fitting. So a fixed batch of held-out queries (their triples never reach the optimiser, see
``benchmark.training.examples``) is ranked every ``dev_steps`` steps, at step 0 and at the end: each
query's positive among the positives and negatives of all dev queries, as in-batch InfoNCE sees them.

Scores are what the index would compute: dot products of quantised impacts
(``benchmark.splade.impacts.quantise`` semantics: ``round(w · QUANT_SCALE)`` half to even), in float64 so
integer sums are exact. Ties count against the query (its positive ranks below every candidate that
scores as high), so a model that scores every candidate alike (all-zero vectors) ranks nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

#: RR@10: a positive ranked below this depth scores 0
DEPTH = 10


@dataclass(frozen=True)
class DevBatch:
    """Held-out queries, the distinct candidate texts, and each query's positive (index into candidates)."""

    queries: list[str]
    candidates: list[str]
    relevant: list[int]

    @classmethod
    def from_rows(cls, rows: Sequence[dict[str, Any]]) -> DevBatch:
        """One (query, positive, negative) row per held-out query; candidates in first-seen order."""
        index: dict[str, int] = {}
        for row in rows:
            for text in (row["positive"], row["negative"]):
                index.setdefault(text, len(index))
        return cls([r["query"] for r in rows], list(index), [index[r["positive"]] for r in rows])

    def keys(self) -> list[str]:
        """A short content key per query (its candidates' texts included): runs trained on the same
        triples share their dev batch, so their per-query values pair by key across backbones."""
        import hashlib

        def key(i: int) -> str:
            text = "\x1f".join([self.queries[i], self.candidates[self.relevant[i]], *self.candidates])
            return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]

        return [key(i) for i in range(len(self.queries))]

    def to_dict(self) -> dict[str, Any]:
        return {"queries": self.queries, "candidates": self.candidates, "relevant": self.relevant}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> DevBatch:
        return cls(list(data["queries"]), list(data["candidates"]), [int(i) for i in data["relevant"]])

    def reciprocal_ranks(self, model: Any, *, batch_size: int, autocast: Any = None) -> list[float]:
        """Per-query RR@10 of ``model`` (a SparseEncoder; run in eval mode, its mode restored)."""
        queries = _encode(model, self.queries, "query", batch_size, autocast)
        docs = _encode(model, self.candidates, "document", batch_size, autocast)
        return reciprocal_ranks(queries, docs, self.relevant)


def impacts(reps: Any) -> Any:
    """Quantised impacts as the index stores them (float64); non-finite weights are not indexable (0)."""
    import torch

    from benchmark.splade.impacts import QUANT_SCALE

    out = torch.nan_to_num_(reps.double(), nan=0.0, posinf=0.0, neginf=0.0)
    return out.mul_(QUANT_SCALE).round_()  # half to even, as numpy's rint in quantise


def reciprocal_ranks(queries: Any, docs: Any, relevant: Sequence[int]) -> list[float]:
    """RR@10 of each query's relevant candidate under quantised dot products, ties against the query."""
    import torch

    scores = impacts(queries) @ impacts(docs).T
    rows = torch.arange(len(relevant), device=scores.device)
    target = scores[rows, torch.as_tensor(list(relevant), device=scores.device)]
    rank = (scores >= target[:, None]).sum(dim=1)  # the positive itself counts once: rank >= 1
    rr = torch.where(rank <= DEPTH, 1.0 / rank.double(), torch.zeros_like(rank, dtype=torch.float64))
    return rr.cpu().tolist()


def _encode(model: Any, texts: Sequence[str], task: str, batch_size: int, autocast: Any) -> Any:
    import torch

    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    out = []
    try:
        with torch.no_grad(), torch.autocast(device.type, dtype=autocast, enabled=autocast is not None):
            for start in range(0, len(texts), batch_size):
                features = model.preprocess(list(texts[start : start + batch_size]), task=task)
                features = {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in features.items()}
                out.append(model(features)["sentence_embedding"].float())
    finally:
        model.train(was_training)
    return torch.cat(out)
