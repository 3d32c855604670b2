"""``train_splade``: one SPLADE training run on sentence-transformers' SparseEncoderTrainer.

The run is resumable: checkpoints go to ``out_dir/checkpoints`` and a call on a folder that
holds one continues from the last (optimizer, scheduler, RNG and data position included), so a
killed run and an uninterrupted one end with the same weights. On finish ``out_dir`` holds

* ``model/``: the published ``*ForMaskedLM`` and its tokenizer (``AutoModelForMaskedLM.from_pretrained``):
  the last step's weights, or the best held-out dev MRR@10's (recipe ``checkpoint``);
* ``telemetry.csv`` / ``telemetry.png``: one row per logging step (see ``telemetry.COLUMNS``);
* ``record.json``: what :func:`train_splade` returns;

and the checkpoints and the streamed examples are deleted. A finished folder is not trained again:
its record is returned.

The outcome (``ok`` / ``degraded`` / ``collapsed``, see ``benchmark.training.detector``) is a
result: a non-finite step stops training at once; any other trigger lets the run train to its end
(its model is encoded and evaluated like any other) unless the recipe sets ``stop_on_collapse``.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

import torch
from sentence_transformers.sparse_encoder import (
    SparseEncoder,
    SparseEncoderTrainer,
    SparseEncoderTrainingArguments,
)
from sentence_transformers.sparse_encoder.callbacks.splade_callbacks import SpladeRegularizerWeightSchedulerCallback
from sentence_transformers.sparse_encoder.data_collator import SparseEncoderDataCollator
from transformers import PrinterCallback, ProgressCallback, TrainerCallback, set_seed
from transformers.trainer_utils import get_last_checkpoint

from benchmark.common import kill_points
from benchmark.common.atomic import write_json
from benchmark.common.errors import BenchmarkError
from benchmark.training.detector import DEV_DROP, TRIGGERS, OutcomeDetector, outcome, published_drop
from benchmark.training.dev import DevBatch
from benchmark.training.examples import NoDuplicatesPermutedBatchSampler, PermutedBatchSampler, prepare_examples
from benchmark.training.losses import Probe, build_loss
from benchmark.training.max_pool import SpladeMLM
from benchmark.training.recipe import LOSS_COLUMNS, Recipe
from benchmark.training.telemetry import plot_png, telemetry_rows, write_csv

#: example column → the Transformer task whose max length it is truncated to
COLUMN_TASKS = {"query": "query", "positive": "document", "negative": "document"}
#: ranking loss → batch sampler (in-batch negatives must not contain the query's own positive)
LOSS_SAMPLERS = {"infonce": NoDuplicatesPermutedBatchSampler, "marginmse": PermutedBatchSampler}
EXAMPLES_DIR = "examples"
BEST_DIR = re.compile(r"best-(\d+)")


def _check_head_as_saved(init_dir: Path, auto_model: Any) -> None:
    """Fail if the vocabulary projection differs from the one stored in ``init_dir``.

    transformers re-ties the projection to the input embeddings when ``tie_word_embeddings`` is
    true; a rescaled (untied) head silently replaced by the embeddings would train the baseline.
    """
    from safetensors import safe_open

    weight = auto_model.get_output_embeddings().weight
    names = {n for n, p in auto_model.named_parameters(remove_duplicate=False) if p is weight}
    for path in sorted(init_dir.glob("*.safetensors")):
        with safe_open(str(path), "pt") as fh:
            for name in names & set(fh.keys()):
                stored = fh.get_tensor(name)
                if not torch.equal(stored.to(weight.dtype), weight.detach().cpu()):
                    raise BenchmarkError(
                        f"{init_dir}: the loaded MLM-head projection differs from the saved {name!r} (re-tied to the "
                        "input embeddings?); save the backbone with config.tie_word_embeddings = false"
                    )


class _Best:
    """The best held-out dev MRR@10 after step 0, and its weights in ``out_dir/best-<step>``.

    A newer best is saved at once; older folders are deleted only once a checkpoint newer than the
    new best exists, so a resumed run always finds the best as of its checkpoint.
    """

    def __init__(self, out_dir: Path, enabled: bool, main: bool) -> None:
        self.out_dir, self.enabled, self.main = out_dir, enabled, main
        self.step: int | None = None
        self.mrr = -1.0

    def folders(self) -> dict[int, Path]:
        found = {}
        for path in self.out_dir.glob("best-*"):
            match = BEST_DIR.fullmatch(path.name)
            if match and path.is_dir():
                found[int(match.group(1))] = path
        return found

    def replay(self, rows: Sequence[dict[str, Any]]) -> None:
        """On (re)start: the best as of the checkpoint's rows; drop folders from beyond it."""
        self.step, self.mrr = None, -1.0
        for row in rows:
            if row.get("step", 0) > 0 and isinstance(row.get("dev_mrr"), float) and row["dev_mrr"] > self.mrr:
                self.step, self.mrr = int(row["step"]), row["dev_mrr"]
        if not (self.enabled and self.main):
            return
        if self.step is not None and self.step not in self.folders():
            raise BenchmarkError(
                f"{self.out_dir}: the checkpoint names step {self.step} as the best dev MRR@10, but "
                f"best-{self.step}/ is missing; delete the folder to train again"
            )
        for step, path in self.folders().items():
            if step != self.step:
                shutil.rmtree(path)

    def offer(self, step: int, mrr: float, model: SparseEncoder) -> None:
        if step <= 0 or mrr <= self.mrr:
            return
        self.step, self.mrr = step, mrr
        if self.enabled and self.main:
            _save_model(model, self.out_dir / f"best-{step}")

    def prune(self) -> None:
        """After a checkpoint: only the current best's folder is needed from now on."""
        if self.enabled and self.main:
            for step, path in self.folders().items():
                if step != self.step:
                    shutil.rmtree(path, ignore_errors=True)


class _Telemetry:
    """Builds the telemetry row of a logging step, runs the outcome rules on it, and evaluates the
    held-out dev batch on the steps that call for it."""

    def __init__(
        self,
        probe: Probe,
        loss: Any,
        decoder: torch.nn.Linear,
        detector: OutcomeDetector,
        dev: DevBatch | None,
        recipe: Recipe,
        best: _Best,
        autocast: Any,
    ) -> None:
        self.probe = probe
        self.loss = loss
        self.decoder = decoder
        self.detector = detector
        self.dev = dev
        self.recipe = recipe
        self.best = best
        self.autocast = autocast
        self.offset = 0.0  # seconds trained before this process started (resume)
        self.process_start = time.perf_counter()
        self.reported: set[str] = set()  # triggers already written to a row's event

    def head_norm(self) -> float:
        return float(self.decoder.weight.detach().float().norm())

    def evaluate_dev(self, model: SparseEncoder) -> list[float]:
        assert self.dev is not None  # called only when there is a dev batch
        return self.dev.reciprocal_ranks(model, batch_size=self.recipe.batch_size, autocast=self.autocast)

    def row(self, step: int, logs: dict[str, Any]) -> dict[str, Any]:
        row: dict[str, Any] = self.probe.flush()
        row["lambda_q"] = float(self.loss.query_regularizer_weight or 0.0)
        row["lambda_d"] = float(self.loss.document_regularizer_weight)
        row["head_norm"] = self.head_norm()
        row["seconds"] = self.offset + time.perf_counter() - self.process_start
        self.detector.check_row({**logs, **row, "step": step})
        fired = [t for t in TRIGGERS if t in self.detector.fired and t not in self.reported]  # a non-finite step too
        self.reported.update(fired)
        row["event"] = ";".join(fired)
        return row


#: (log key, label, format): the one line each logging step prints, instead of the Trainer's whole dict
LOG_LINE = (
    ("loss", "loss", ".4g"),
    ("ranking_loss", "ranking", ".4g"),
    ("flops_reg_q", "FLOPS reg q", ".3g"),
    ("flops_reg_d", "d", ".3g"),
    ("nnz_q", "nnz q", ".0f"),
    ("nnz_d", "d", ".0f"),
    ("grad_norm", "grad", ".3g"),
    ("learning_rate", "lr", ".2g"),
    ("dev_mrr", "dev RR@10", ".4f"),
)


def log_line(step: int, max_steps: int, logs: dict[str, Any]) -> str:
    """``step 10/26 · loss 1.079 · ranking 1.07 · FLOPS reg q 3.82 d 6.59 · nnz q 43 d 88 · …``."""
    parts = [f"step {step}/{max_steps}"]
    for key, label, fmt in LOG_LINE:
        value = logs.get(key)
        if isinstance(value, (int, float)):
            text = f"{label} {value:{fmt}}"
            if label == "d":  # the document side joins its query side: "nnz q 43 d 88"
                parts[-1] += " " + text
            else:
                parts.append(text)
    if logs.get("event"):
        parts.append(f"event {logs['event']}")
    return " · ".join(parts)


class _CompactProgress(TrainerCallback):
    """The Trainer's progress bar (on a terminal; elsewhere a line every few seconds,
    ``benchmark.common.bars``), with one compact line per logging step (``log_line``)."""

    def __init__(self) -> None:
        self.training_bar: Any = None
        self.current_step = 0

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        from benchmark.common.bars import bar

        self.current_step = state.global_step  # a resumed run starts where its checkpoint left off
        if state.is_world_process_zero:
            self.training_bar = bar(total=state.max_steps, desc="train", unit="step", initial=state.global_step)

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if state.is_world_process_zero and self.training_bar is not None:
            self.training_bar.update(state.global_step - self.current_step)
        self.current_step = state.global_step

    def on_log(self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **kwargs: Any) -> None:
        if state.is_world_process_zero and self.training_bar is not None and logs and "loss" in logs:
            self.training_bar.write(log_line(state.global_step, state.max_steps, logs))

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.training_bar is not None:
            self.training_bar.close()
            self.training_bar = None


class _SpladeTrainer(SparseEncoderTrainer):
    """SparseEncoderTrainer that adds the telemetry (and, on dev steps, the dev MRR@10) to each
    training log entry. Entries go to ``state.log_history``, which checkpoints store: a resumed run
    keeps its table."""

    def __init__(self, *args: Any, telemetry: _Telemetry, **kwargs: Any) -> None:
        self.telemetry = telemetry
        super().__init__(*args, **kwargs)

    def add_model_card_callback(self, default_args_dict: dict[str, Any]) -> None:
        """No model card: the output is a bare ``*ForMaskedLM``, and building the card costs time."""

    def log(self, logs: dict[str, float], start_time: float | None = None) -> None:
        if "loss" not in logs:
            super().log(logs, start_time)
            return
        t, step = self.telemetry, self.state.global_step
        logs.update(t.row(step, logs))
        if t.recipe.stop_on_collapse and t.detector.reason is not None:
            self.control.should_training_stop = True
        last = self.control.should_training_stop or step >= self.state.max_steps
        rr = None
        if t.dev is not None and t.detector.non_finite_step is None and (last or step % t.recipe.dev_steps == 0):
            rr = t.evaluate_dev(self.model)
            logs["dev_mrr"] = sum(rr) / len(rr)
            t.best.offer(step, logs["dev_mrr"], self.model)
        super().log(logs, start_time)
        if rr is not None:  # per-query values: in the history (checkpoints) but not printed
            self.state.log_history[-1]["dev_rr"] = rr


class _OutcomeCallback(TrainerCallback):
    """Step-0 dev MRR; stops at the first non-finite step; forces a log on the last step; restores
    the detector, the best checkpoint and the clock on resume."""

    def __init__(self, telemetry: _Telemetry) -> None:
        self.telemetry = telemetry

    def on_train_begin(self, args: Any, state: Any, control: Any, model: Any = None, **kwargs: Any) -> None:
        t = self.telemetry
        rows = telemetry_rows(state.log_history)
        t.detector.replay(rows)
        t.reported = set(t.detector.fired)
        t.best.replay(rows)
        trained = [r for r in rows if r.get("step", 0) > 0]
        t.offset = float(trained[-1]["seconds"]) if trained else 0.0
        if t.dev is not None and not any(r.get("step") == 0 for r in rows):
            rr = t.evaluate_dev(model)
            state.log_history.insert(0, {"step": 0, "dev_mrr": sum(rr) / len(rr), "dev_rr": rr})
        t.process_start = time.perf_counter()

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        finite = self.telemetry.probe.finite
        if finite is not None:
            flag = finite.to(torch.int32).reshape(1)
            if torch.distributed.is_available() and torch.distributed.is_initialized():
                torch.distributed.all_reduce(flag, op=torch.distributed.ReduceOp.MIN)  # every rank stops together
            if self.telemetry.detector.check_finite(state.global_step, bool(flag.item())):
                control.should_training_stop = True
        if control.should_training_stop or state.global_step >= state.max_steps:
            control.should_log = True  # the last row covers the last steps

    def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.telemetry.best.prune()
        kill_points.point("train:checkpoint")  # the kill-anywhere tests stop here, after a whole checkpoint


def _training_args(
    recipe: Recipe, ckpt_dir: Path, seed: int, progress: bool, cuda: bool, bf16: bool
) -> SparseEncoderTrainingArguments:
    return SparseEncoderTrainingArguments(
        output_dir=str(ckpt_dir),
        per_device_train_batch_size=recipe.batch_size,  # divided by the world size below
        learning_rate=recipe.learning_rate,
        num_train_epochs=recipe.epochs,
        max_steps=recipe.max_steps if recipe.max_steps > 0 else -1,
        warmup_steps=recipe.warmup_ratio,  # a float in [0, 1) is a ratio of the total steps
        lr_scheduler_type=recipe.lr_scheduler,
        weight_decay=recipe.weight_decay,
        max_grad_norm=recipe.max_grad_norm,  # 0: the Trainer skips clipping (the norm is still logged)
        logging_steps=recipe.logging_steps,
        logging_first_step=True,
        logging_nan_inf_filter=False,  # a NaN loss must reach the telemetry, not be averaged away
        save_strategy="steps",
        save_steps=recipe.save_steps,
        save_total_limit=1,
        seed=seed,
        data_seed=seed,
        bf16=bf16,
        use_cpu=not cuda,
        ddp_backend="gloo" if not cuda and int(os.environ.get("WORLD_SIZE", "1")) > 1 else None,  # CPU DDP (torchrun)
        dataloader_drop_last=True,  # equal shards: the cross-rank gathers need equal batch sizes
        batch_sampler=LOSS_SAMPLERS[recipe.loss],
        router_mapping=COLUMN_TASKS,  # query / document max lengths
        report_to="none",
        disable_tqdm=not progress,
    )


def _quiet(progress: bool) -> contextlib.AbstractContextManager[None]:
    """transformers' own bars ("Loading weights", "Writing model shards") never; its load reports and
    warnings only when progress is wanted."""
    from benchmark.model.checkpoints import quiet_transformers

    return quiet_transformers(reports=not progress)


def _save_model(model: SparseEncoder, out: Path) -> None:
    """The trained ``*ForMaskedLM`` + tokenizer, written to a temp folder then renamed."""
    tmp = out.with_name(f".{out.name}.tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    module = model[0]
    module.auto_model.save_pretrained(str(tmp))
    module.tokenizer.save_pretrained(str(tmp))
    if out.exists():
        shutil.rmtree(out)
    os.replace(tmp, out)


def _mean(values: Sequence[float] | None) -> float | None:
    return sum(values) / len(values) if values else None


def _barrier(world: int) -> None:
    if world > 1:
        torch.distributed.barrier()


def train_splade(
    init_dir: Path,
    examples: Path | str | Sequence[dict[str, Any]],
    recipe: Recipe,
    out_dir: Path,
    *,
    seed: int = 42,
    progress: bool = True,
    overrides: dict[str, Any] | None = None,
    callbacks: Sequence[TrainerCallback] = (),
) -> dict[str, Any]:
    """Train SPLADE from the MLM checkpoint ``init_dir`` on ``examples``; see the module doc.

    A finished ``out_dir`` (its ``record.json`` beside a saved model) is returned as it is; a partial one
    resumes from its last checkpoint.

    Args:
        init_dir: a saved ``*ForMaskedLM`` and its tokenizer (a backbone stage's ``model/``).
        examples: the triples stage's ``triples.jsonl`` (streamed, never held in memory), or a list of dicts
            (tests), each with ``query``, ``positive``, ``negative`` (and ``score`` = CE(pos) - CE(neg) for
            MarginMSE).
        recipe: the training recipe (``benchmark.training.recipe``).
        out_dir: where the model, ``record.json`` and the telemetry go.
        seed: the training run's seed.
        progress: show the trainer's progress bar.
        overrides: recipe keys to replace, validated like the recipe file (a suite variant's λ).
        callbacks: extra ``transformers.TrainerCallback`` objects (tests use them to interrupt).

    Returns:
        The train stage's record: the outcome (ok, degraded, collapsed) and why, the held-out dev values,
        and the telemetry summary (``benchmark.stages.records.TrainRecord`` reads it).
    """
    recipe = recipe.with_overrides(overrides)
    init_dir, out_dir = Path(init_dir), Path(out_dir)
    columns = LOSS_COLUMNS[recipe.loss]
    record_path = out_dir / "record.json"
    if record_path.is_file() and (out_dir / "model" / "config.json").is_file():
        return json.loads(record_path.read_text())
    if not (init_dir / "config.json").is_file():
        raise BenchmarkError(f"init_dir {str(init_dir)!r} holds no config.json; pass a saved *ForMaskedLM folder")

    cuda = torch.cuda.is_available()
    bf16 = cuda and torch.cuda.is_bf16_supported()  # fp16 would overflow SPLADE's unnormalised scores
    ckpt_dir = out_dir / "checkpoints"
    args = _training_args(recipe, ckpt_dir, seed, progress, cuda, bf16)
    world = args.world_size  # initialises torch.distributed under torchrun
    if recipe.batch_size % world:
        raise BenchmarkError(
            f"batch_size = {recipe.batch_size} does not split over {world} processes; override batch_size"
        )
    args.per_device_train_batch_size = recipe.batch_size // world
    main = args.process_index == 0

    # the examples: streamed to a memory-mapped file by the main process, opened by every process
    prepare: dict[str, Any] = dict(
        loss=recipe.loss,
        dev_queries=recipe.dev_queries,
        max_examples=recipe.max_examples,
        work_dir=out_dir / EXAMPLES_DIR,
    )
    if main:
        data = prepare_examples(examples, columns, **prepare)
    _barrier(world)
    if not main:
        data = prepare_examples(examples, columns, build=False, **prepare)
    if data.rows < recipe.batch_size:
        held = f" after holding out {recipe.dev_queries} dev queries" if recipe.dev_queries else ""
        raise BenchmarkError(
            f"{data.rows} training examples{held} are fewer than one batch (batch_size = {recipe.batch_size} in recipe "
            f"{recipe.name!r}); provide more examples or override batch_size"
        )

    out_dir.mkdir(parents=True, exist_ok=True)
    fingerprint = {
        "recipe": recipe.hyperparameters(),
        "seed": seed,
        "world_size": world,
        "examples": data.rows,
        "examples_sha256": data.source_sha256,
    }
    fingerprint_path = out_dir / "fingerprint.json"
    last = get_last_checkpoint(str(ckpt_dir)) if ckpt_dir.is_dir() else None
    if last and fingerprint_path.is_file() and json.loads(fingerprint_path.read_text()) != fingerprint:
        raise BenchmarkError(
            f"{out_dir} holds checkpoints of a different run (recipe, seed, examples or world size changed); "
            "delete the folder or use another out_dir"
        )
    if main:
        write_json(fingerprint_path, fingerprint)

    set_seed(seed)
    with _quiet(progress):
        module = SpladeMLM(
            str(init_dir),
            chunk_size=recipe.chunk_size or None,
            query_length=recipe.query_max_length,
            document_length=recipe.doc_max_length,
            # fp32 master weights (bf16 comes from autocast); attention pinned, not transformers' default
            model_kwargs={"dtype": torch.float32, "attn_implementation": recipe.attn_implementation},
        )
    attn = module.auto_model.config._attn_implementation
    if attn != recipe.attn_implementation:
        raise BenchmarkError(
            f"{init_dir}: loaded with attention {attn!r}, not the recipe's {recipe.attn_implementation!r}; "
            "pick an attn_implementation this model and transformers support"
        )
    _check_head_as_saved(init_dir, module.auto_model)
    model = SparseEncoder(modules=[module])
    vocab = module.get_embedding_dimension()
    probe = Probe()
    loss = build_loss(model, recipe.loss, recipe.lambda_q, recipe.lambda_d, recipe.mnrl_scale, probe)
    detector = OutcomeDetector(  # in-batch candidates: a positive and a negative per query of the global batch
        loss=recipe.loss,
        vocab_size=vocab,
        candidates=2 * recipe.batch_size,
        dense_fraction=recipe.dense_fraction,
        patience=recipe.trigger_patience,
        lambda_q=recipe.lambda_q,
        lambda_d=recipe.lambda_d,
    )
    best = _Best(out_dir, enabled=recipe.checkpoint == "best", main=main)
    telemetry = _Telemetry(
        probe, loss, module.decoder, detector, data.dev, recipe, best, torch.bfloat16 if bf16 else None
    )
    head_norm_initial = telemetry.head_norm()

    trainer = _SpladeTrainer(
        model=model,
        args=args,
        train_dataset=data.dataset(),
        loss=loss,
        data_collator=SparseEncoderDataCollator(preprocess_fn=model.preprocess, router_mapping=COLUMN_TASKS),
        callbacks=[
            SpladeRegularizerWeightSchedulerCallback(loss, recipe.lambda_schedule, recipe.lambda_warmup_ratio),
            _OutcomeCallback(telemetry),
            *callbacks,
        ],
        telemetry=telemetry,
    )
    if not progress:
        trainer.remove_callback(PrinterCallback)  # it prints every log dict when tqdm is off
    else:
        trainer.remove_callback(ProgressCallback)
        trainer.add_callback(_CompactProgress)
    resumed_from = json.loads((Path(last) / "trainer_state.json").read_text())["global_step"] if last else None
    with _quiet(progress):
        output = trainer.train(resume_from_checkpoint=last)

    rows = telemetry_rows(trainer.state.log_history)
    trained = [r for r in rows if r.get("step", 0) > 0]
    final = trained[-1] if trained else {}
    steps = trainer.state.global_step
    dev_rows = [r for r in rows if "dev_rr" in r]
    publish_best = recipe.checkpoint == "best" and best.step is not None
    published: int = cast(int, best.step) if publish_best else steps  # publish_best: best.step is not None
    drop = published_drop(dev_rows, published) if data.dev is not None else None
    dev_rr = {int(r["step"]): r["dev_rr"] for r in dev_rows}
    # the logged states up to the published step: what the collapse rules see of the published model
    published_rows = [r for r in trained if r.get("step", 0) <= published and "ranking_loss" in r]
    result, reason, outcome_step, detail = outcome(detector, drop, published, steps, published_rows)
    if reason == DEV_DROP:
        marked = next((r for r in trained if r.get("step") == published), final)
        if marked:
            marked["event"] = ";".join(e for e in (marked.get("event"), DEV_DROP) if e)
    process_steps = steps - (resumed_from or 0)
    runtime = output.metrics.get("train_runtime", 0.0)
    record = {
        "outcome": result,
        "outcome_reason": reason,
        "outcome_step": outcome_step,
        "outcome_detail": detail,
        "stopped_early": steps < trainer.state.max_steps,
        "triggers": dict(sorted(detector.fired.items(), key=lambda kv: kv[1])),  # trigger → first step it fired
        "triggers_armed_step": detector.armed_step,
        "status": result,  # the outcome under its former key, until every reader uses "outcome"
        "steps": steps,
        "max_steps": trainer.state.max_steps,
        "examples": data.rows,
        "examples_source": data.source,
        "dev_queries": len(data.dev.queries) if data.dev else 0,
        "dev_candidates": len(data.dev.candidates) if data.dev else 0,
        "dev_mrr_initial": dev_rows[0]["dev_mrr"] if dev_rows and dev_rows[0]["step"] == 0 else None,
        "dev_mrr_final": _mean(dev_rr.get(steps)),  # at the last step
        "dev_mrr_published": drop.final if drop else None,  # of the published checkpoint: what degraded judges
        "dev_mrr_drop_se": drop.se if drop else None,
        "dev_mrr_best": best.mrr if best.step is not None else None,
        "dev_mrr_best_step": best.step,
        # per-query RR@10 at step 0 and of the published checkpoint, paired across runs by query key
        # (the report compares a run with its baseline arm and with the BERT reference on them)
        "dev_query_keys": data.dev.keys() if data.dev else [],
        "dev_rr_initial": dev_rr.get(0, []),
        "dev_rr_published": dev_rr.get(published, []),
        "checkpoint": recipe.checkpoint,
        "checkpoint_step": published,
        "vocab_size": vocab,
        "train_seconds": float(final.get("seconds", runtime)),
        "steps_per_second": process_steps / runtime if runtime else None,
        "examples_per_second": process_steps * recipe.batch_size / runtime if runtime else None,
        "final_loss": final.get("loss"),
        "final_nnz_q": final.get("nnz_q"),
        "final_nnz_d": final.get("nnz_d"),
        "final_flops": final.get("flops"),
        "final_low_support_q": final.get("low_support_q"),
        "final_query_cosine": final.get("query_cosine"),
        "head_norm_initial": head_norm_initial,
        "head_norm_final": telemetry.head_norm(),
        "recipe": recipe.name,
        "hyperparameters": recipe.hyperparameters(),
        "lambda_q": recipe.lambda_q,
        "lambda_d": recipe.lambda_d,
        "max_grad_norm": recipe.max_grad_norm,
        "attn_implementation": attn,
        "seed": seed,
        "world_size": world,
        "precision": "bf16" if bf16 else "fp32",
        "resumed_from_step": resumed_from,
        "init_dir": str(init_dir),
    }
    if trainer.is_world_process_zero():
        model_dir = out_dir / "model"
        if publish_best:
            if model_dir.exists():
                shutil.rmtree(model_dir)
            os.replace(out_dir / f"best-{best.step}", model_dir)
        else:
            with _quiet(progress):
                _save_model(model, model_dir)
        kill_points.point("train:saved")
        write_csv(rows, out_dir / "telemetry.csv")
        label = f"{result}: {reason}" if reason else ""
        plot_png(
            rows,
            out_dir / "telemetry.png",
            f"{recipe.name}: {init_dir.name} ({result})",
            outcome_step,
            label,
            detector.armed_step,
        )
        write_json(record_path, record)
        shutil.rmtree(ckpt_dir, ignore_errors=True)
        shutil.rmtree(out_dir / EXAMPLES_DIR, ignore_errors=True)
        for path in best.folders().values():
            shutil.rmtree(path, ignore_errors=True)
    _barrier(world)
    return record
