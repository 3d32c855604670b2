"""Training comparison: ``train_splade`` against stock sentence-transformers, same everything else.

Both train the same model on the same SciFact train triples with the same recipe values (the
``smoke`` recipe's learning rate, warm-up, λ_q/λ_d and their schedule, InfoNCE scale), batch, max
length (queries and documents alike: stock ST has one), steps, seed and threads, each in its own
process. Stock ST is ``MLMTransformer`` + ``SpladePooling('max')`` (no chunking) under
``SpladeLoss(SparseMultipleNegativesRankingLoss)`` and ``SparseEncoderTrainer``. Both draw their
batches with our keyed sampler (a ``batch_sampler`` class ST accepts as it is) and ours holds out no
dev queries, so both see the same rows in the same order.

The losses are the same function computed in different summation orders (ours pools the
vocabulary projection in chunks of tokens), so the curves agree to rounding at first and drift
apart as the differences feed back through the updates. The tolerance comes from a control run:
ours again without chunking (``chunk_size = 0``: the same math as the chunked run, another order).
ST's curve must stay within twice the control's spread from ours (plus float32 rounding of the loss).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from benchmark.perf.report import Row, load_text, relate
from benchmark.perf.workers import spawn, status_mb

TRAIN_DATASET = "beir/scifact/train"
RECIPE = "smoke"
#: float32 rounding of a loss value (a sum of a few hundred terms): a few units of 2⁻²⁴ relative
LOSS_ROUNDING = 1e-6


def triples(n: int) -> list[dict[str, str]]:
    """``n`` (query, relevant document, negative) triples from SciFact train, deterministic.

    The negative of a query is the relevant document of the next query (in id order) that is not
    relevant to it: on-topic biomedical text, cheap and reproducible (no BM25 index to build).
    """
    from benchmark.data.datasets import load_source

    docs, queries, qrels = load_source(TRAIN_DATASET)
    relevant: dict[str, set[str]] = {}
    for qrel in qrels:
        if qrel.relevance > 0:
            relevant.setdefault(qrel.query_id, set()).add(qrel.doc_id)
    qids = sorted(q for q in relevant if q in queries)
    positive = {q: min(relevant[q]) for q in qids}
    needed = set(positive.values())
    texts = {doc_id: text for doc_id, text in docs if doc_id in needed}
    out = []
    for i, q in enumerate(qids):
        neg = next(
            positive[qids[(i + k) % len(qids)]]
            for k in range(1, len(qids))
            if positive[qids[(i + k) % len(qids)]] not in relevant[q]
        )
        out.append({"query": queries[q], "positive": texts[positive[q]], "negative": texts[neg]})
        if len(out) == n:
            break
    return out


def _meter(spec: dict[str, Any]) -> Any:
    """A TrainerCallback: per-step losses and end times, and a torch.profiler table of one step."""
    import torch
    from transformers import TrainerCallback

    class Meter(TrainerCallback):
        def __init__(self) -> None:
            self.losses: list[float] = []
            self.ends: list[float] = []
            self.cpu_ends: list[float] = []
            self.profile: list[dict[str, Any]] = []
            self.profiled_step = spec["profile_step"]
            self.rss_start = float("nan")
            self._prof: Any = None  # a torch.profiler.profile while the profiled step runs

        def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            self.rss_start = status_mb("VmRSS")
            self.ends.append(time.perf_counter())
            self.cpu_ends.append(time.process_time())

        def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            if state.global_step + 1 == self.profiled_step:
                self._prof = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU])
                self._prof.__enter__()

        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            self.ends.append(time.perf_counter())
            self.cpu_ends.append(time.process_time())
            if self._prof is not None:
                self._prof.__exit__(None, None, None)
                events = sorted(self._prof.key_averages(), key=lambda e: -e.self_cpu_time_total)
                total = sum(e.self_cpu_time_total for e in events) or 1
                self.profile = [
                    {
                        "op": e.key,
                        "self_ms": e.self_cpu_time_total / 1000,
                        "share": e.self_cpu_time_total / total,
                        "calls": e.count,
                    }
                    for e in events[:12]
                ]
                self._prof = None

        def on_log(
            self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **kwargs: Any
        ) -> None:
            if logs and "loss" in logs:
                self.losses.append(float(logs["loss"]))

    return Meter()


def _train_ours(spec: dict[str, Any], examples: list[dict[str, str]], meter: Any) -> None:
    from benchmark.training.loop import train_splade
    from benchmark.training.recipe import load_recipe

    overrides = {
        "max_steps": spec["steps"],
        "batch_size": spec["batch_size"],
        "logging_steps": 1,
        "save_steps": spec["steps"] + 1,
        "query_max_length": spec["max_length"],
        "doc_max_length": spec["max_length"],
        "max_examples": 0,
        "chunk_size": spec["chunk_size"],
        "dev_queries": 0,
    }  # no held-out rows: both sides train on the same rows, in the same order
    train_splade(
        Path(spec["model"]),
        examples,
        load_recipe(RECIPE),
        Path(spec["out"] + ".run"),
        seed=spec["seed"],
        progress=False,
        overrides=overrides,
        callbacks=[meter],
    )


def _train_st(spec: dict[str, Any], examples: list[dict[str, str]], meter: Any) -> None:
    import logging

    from datasets import Dataset
    from sentence_transformers import SparseEncoder
    from sentence_transformers.sparse_encoder import SparseEncoderTrainer, SparseEncoderTrainingArguments
    from sentence_transformers.sparse_encoder.callbacks.splade_callbacks import SpladeRegularizerWeightSchedulerCallback
    from sentence_transformers.sparse_encoder.losses import SparseMultipleNegativesRankingLoss, SpladeLoss
    from sentence_transformers.sparse_encoder.modules import MLMTransformer, SpladePooling
    from transformers import set_seed

    from benchmark.training.examples import NoDuplicatesPermutedBatchSampler
    from benchmark.training.recipe import load_recipe

    logging.getLogger("sentence_transformers").setLevel(logging.ERROR)
    recipe = load_recipe(RECIPE)
    set_seed(spec["seed"])
    from benchmark.model.rescale import attach_projection_scale

    mlm = MLMTransformer(spec["model"], max_seq_length=spec["max_length"])
    attach_projection_scale(mlm.auto_model)  # a checkpoint rescaled by 'projection' carries α in its config
    model = SparseEncoder(modules=[mlm, SpladePooling(pooling_strategy="max")], device="cpu")
    loss = SpladeLoss(
        model,
        loss=SparseMultipleNegativesRankingLoss(model, scale=recipe.mnrl_scale),
        document_regularizer_weight=recipe.lambda_d,
        query_regularizer_weight=recipe.lambda_q,
    )
    args = SparseEncoderTrainingArguments(
        output_dir=spec["out"] + ".run",
        per_device_train_batch_size=spec["batch_size"],
        learning_rate=recipe.learning_rate,
        max_steps=spec["steps"],
        warmup_steps=recipe.warmup_ratio,
        lr_scheduler_type=recipe.lr_scheduler,
        weight_decay=recipe.weight_decay,
        max_grad_norm=recipe.max_grad_norm,
        logging_steps=1,
        save_strategy="no",
        seed=spec["seed"],
        data_seed=spec["seed"],
        use_cpu=True,
        dataloader_drop_last=True,
        batch_sampler=NoDuplicatesPermutedBatchSampler,
        report_to="none",
        disable_tqdm=True,
    )
    columns = ("query", "positive", "negative")
    dataset = Dataset.from_dict({c: [e[c] for e in examples] for c in columns})
    trainer = SparseEncoderTrainer(
        model=model,
        args=args,
        train_dataset=dataset,
        loss=loss,
        callbacks=[
            SpladeRegularizerWeightSchedulerCallback(loss, recipe.lambda_schedule, recipe.lambda_warmup_ratio),
            meter,
        ],
    )
    trainer.train()


SYSTEMS = {"ours": _train_ours, "st": _train_st}


def train_worker(spec: dict[str, Any]) -> dict[str, Any]:
    import torch

    torch.set_num_threads(spec["threads"])
    examples = json.loads(Path(spec["examples"]).read_text())
    meter = _meter(spec)
    cpu = time.process_time()
    SYSTEMS[spec["system"]](spec, examples, meter)
    cpu = time.process_time() - cpu
    # step intervals (data loading included), without the first (warm-up) and the profiled one
    measured = [i for i in range(2, len(meter.ends)) if i != meter.profiled_step]
    intervals = [meter.ends[i] - meter.ends[i - 1] for i in measured]
    cpu_intervals = [meter.cpu_ends[i] - meter.cpu_ends[i - 1] for i in measured]
    return {
        "losses": meter.losses,
        "intervals": intervals,
        "cpu_intervals": cpu_intervals,
        "profile": meter.profile,
        "cpu_s": cpu,
        "rss_start_mb": meter.rss_start,
        "peak_mb": status_mb("VmHWM"),
        "steps": len(meter.ends) - 1,
        "batch_size": spec["batch_size"],
    }


def _median(xs: list[float]) -> float:
    return sorted(xs)[len(xs) // 2] if xs else float("nan")


def _rate(r: dict[str, Any]) -> tuple[float, float, float]:
    """(samples/s from the median step, the steps' wall seconds, CPU ms per sample from the median step).

    Medians: on a shared machine a burst of load stretches a few steps; the median step does not see it.
    """
    return (
        r["batch_size"] / _median(r["intervals"]),
        sum(r["intervals"]),
        1000 * _median(r["cpu_intervals"]) / r["batch_size"],
    )


def _profile_line(name: str, r: dict[str, Any]) -> str:
    top = ", ".join(f"{p['op']} {100 * p['share']:.0f} %" for p in r["profile"][:6])
    return f"train: one step of {name} (torch.profiler, self CPU time): {top}"


def part_train(args: argparse.Namespace, work: Path) -> tuple[list[Row], list[str]]:
    examples = triples(args.train_steps * args.train_batch + args.train_batch)
    (work / "triples.json").write_text(json.dumps(examples))
    base = {
        "kind": "train",
        "model": str(args.model),
        "examples": str(work / "triples.json"),
        "steps": args.train_steps,
        "batch_size": args.train_batch,
        "max_length": args.train_length,
        "threads": args.threads,
        "seed": 42,
        "profile_step": min(5, args.train_steps),
        "chunk_size": 16,
    }
    systems = {
        "sentence-transformers": ("st", {**base, "system": "st"}),
        "ours": ("ours", {**base, "system": "ours"}),
        "ours unchunked (control)": ("control", {**base, "system": "ours", "chunk_size": 0}),
    }
    results = {}
    for name, (short, spec) in systems.items():
        print(f"[perf] train {args.train_steps} steps × batch {args.train_batch}: {name}", flush=True)
        results[name] = spawn(spec, work, f"train-{short}")
    rows = []
    for name, r in results.items():
        rate, wall, cpu_ms = _rate(r)
        n = args.train_batch * len(r["intervals"])
        rows.append(
            Row(
                "train",
                name,
                n,
                wall,
                rate,
                cpu_ms,
                r["peak_mb"],
                r["peak_mb"] - r["rss_start_mb"],
                load=load_text(r),
                note=f"{r['steps']} steps; items/s and CPU ms from the median of steps "
                f"2..{r['steps']} (the profiled one left out)",
            )
        )
    relate(rows, rows[0])
    st, ours, control = (results[n]["losses"] for n in systems)
    k = min(len(st), len(ours), len(control), 20)
    spread = [abs(a - b) for a, b in zip(ours[:k], control[:k])]
    tolerance = [2 * max(spread[: i + 1]) + LOSS_ROUNDING * abs(ours[i]) for i in range(k)]
    gaps = [abs(a - b) for a, b in zip(ours[:k], st[:k])]
    within = all(g <= t for g, t in zip(gaps, tolerance))
    fmt = lambda xs: " ".join(f"{x:.5f}" for x in xs)  # noqa: E731
    lines = [
        f"train: ours is {rows[1].ratio:.2f}× sentence-transformers' samples/s at {rows[1].mem_ratio:.2f}× its peak "
        f"memory (goal ≥ 2× at ≤ 0.5×), and uses {rows[0].cpu_ms_per_doc / rows[1].cpu_ms_per_doc:.2f}× less CPU "
        f"per sample; bert-tiny, SciFact train triples, batch {args.train_batch}, max length {args.train_length}, "
        f"{args.threads} threads, {RECIPE} recipe values",
        f"train: first {k} losses, sentence-transformers: {fmt(st[:k])}",
        f"train: first {k} losses, ours: {fmt(ours[:k])}",
        f"train: first {k} losses, ours unchunked (control): {fmt(control[:k])}",
        f"train: loss curves {'agree' if within else 'DIFFER'}: |ours − ST| ≤ 2·(largest |ours − control| so far) "
        f"+ {LOSS_ROUNDING:g}·|loss| at every step (max gap {max(gaps):.2e}, step 1 gap {gaps[0]:.2e}; control "
        f"spread max {max(spread):.2e})"
        if k
        else "train: no losses logged",
        _profile_line("sentence-transformers", results["sentence-transformers"]),
        _profile_line("ours", results["ours"]),
    ]
    return rows, lines
