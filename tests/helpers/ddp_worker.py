"""Worker for tests/training/test_ddp.py: two training steps of SPLADE, dumping each step's gradients.

``python tests/helpers/ddp_worker.py INIT_DIR OUT_DIR`` trains in one process; under
``torchrun --nproc_per_node 2`` the same global batch of 8 is split 4 + 4 over two gloo processes.
Each variant writes ``OUT_DIR/<variant>/`` (the usual training outputs) and, on rank 0,
``OUT_DIR/<variant>/grads.pt``: per optimiser step, every parameter's gradient after the DDP
all-reduce, before the optimiser step (clipping disabled so the raw gradient is compared).

The gradients are zeroed once dumped (and weight decay is 0), so AdamW leaves the weights exactly
as they were: step 2 runs from the same weights in both runs. Otherwise Adam's normalised step
turns float noise in a gradient (±1e-9 where the exact value is 0) into a move of ±lr, and step 2
would compare two different models. The optimiser step itself is a deterministic function of the
all-reduced gradient, so equal gradients at every step are what "trains like one process" needs.

Variants: ``global`` is the code under test. ``local`` swaps in sentence-transformers' per-rank
FlopsLoss (what GlobalFlopsLoss replaces) to show that the comparison can fail.
"""

from __future__ import annotations

import csv
import sys
from pathlib import Path

import torch
from transformers import TrainerCallback

from benchmark.training.loop import train_splade
from benchmark.training.recipe import load_recipe

# λ at full strength from step 2 on (warm-up ends after 1 of 2 steps), so the FLOPS gradients count
OVERRIDES = {
    "batch_size": 8,
    "max_steps": 2,
    "logging_steps": 1,
    "save_steps": 100,
    "learning_rate": 1e-3,
    "max_grad_norm": 0.0,
    "weight_decay": 0.0,
    "warmup_ratio": 0.0,
    "lambda_q": 0.05,
    "lambda_d": 0.05,
    "lambda_warmup_ratio": 0.5,
    "query_max_length": 16,
    "doc_max_length": 16,
    "chunk_size": 4,
    "dev_queries": 0,  # all 8 triples train (no held-out dev batch)
}
# The data order (and so which 4 triples rank 0 gets) follows the seed. The per-rank FLOPS control in
# test_ddp.py needs rank 0's shard to differ from the global batch by more than the float bound
# (1.95e-3): under seed 2 its document FLOPS regulariser is 6.5e-3 off the global one (under 42,
# 43, 44 or 1, from 3e-4 to 1e-3: too close to tell apart from rounding).
SEED = 2
WORDS = "protein cell gene tumor virus brain heart blood drug trial mouse risk dose liver lung bone".split()


def examples() -> list[dict[str, str]]:
    """8 (query, positive, negative) triples with distinct texts (no duplicate is ever resampled)."""
    out = []
    for i in range(8):
        a, b, c = WORDS[i], WORDS[(i + 3) % 16], WORDS[(i + 8) % 16]
        out.append(
            {"query": f"{a} {b}", "positive": f"{a} {b} study of {a} in {c}", "negative": f"{c} {WORDS[15 - i]} review"}
        )
    return out


class DumpGrads(TrainerCallback):
    def __init__(self) -> None:
        self.steps: list[dict[str, torch.Tensor]] = []

    def on_pre_optimizer_step(self, args, state, control, model=None, **kwargs):
        self.steps.append({n: p.grad.detach().clone() for n, p in model.named_parameters() if p.grad is not None})
        for p in model.parameters():  # freeze: the next step starts from the same weights (module doc)
            if p.grad is not None:
                p.grad.zero_()


def per_rank_flops(self, embeddings: torch.Tensor) -> torch.Tensor:
    """sentence-transformers' FlopsLoss: the mean over the local rows only."""
    value = torch.sum(torch.mean(embeddings, dim=0) ** 2)
    self.probe.observe(self.side, embeddings, value)
    return value


def run(init_dir: Path, out_dir: Path, variant: str = "global") -> None:
    if variant == "local":
        from benchmark.training.losses import GlobalFlopsLoss

        GlobalFlopsLoss.compute_loss_from_embeddings = per_rank_flops
    dump = DumpGrads()
    train_splade(
        init_dir,
        examples(),
        load_recipe("smoke"),
        out_dir / variant,
        seed=SEED,
        progress=False,
        overrides=OVERRIDES,
        callbacks=[dump],
    )
    rank = torch.distributed.get_rank() if torch.distributed.is_initialized() else 0
    if rank == 0:
        torch.save(dump.steps, out_dir / variant / "grads.pt")


# What tests/training/test_ddp.py and tests/system/test_ray.py compare between one process and two.
COMPARED = (
    "loss",
    "ranking_loss",
    "flops_reg_q",
    "flops_reg_d",
    "flops",
    "nnz_q",
    "nnz_d",
    "max_q",
    "max_d",
    "grad_norm",
    "lambda_q",
)


def _rows(folder: Path) -> list[dict[str, float]]:
    with open(folder / "telemetry.csv", newline="") as fh:
        # numeric columns only: r2 (MarginMSE), dev_mrr and event are empty in these InfoNCE rows
        return [{k: float(v) for k, v in row.items() if v != "" and k != "event"} for row in csv.DictReader(fh)]


def _max_relative_difference(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> float:
    assert a.keys() == b.keys()
    return max(
        float((a[n] - b[n]).abs().max()) / (float(b[n].abs().max()) + 1e-12) for n in a if b[n].abs().max() > 1e-6
    )


if __name__ == "__main__":
    init, out = Path(sys.argv[1]), Path(sys.argv[2])
    for name in sys.argv[3:] or ["global"]:
        run(init, out, name)
