"""``train_splade``: one SPLADE training run on sentence-transformers' SparseEncoderTrainer.

The run is resumable: checkpoints go to ``out_dir/checkpoints`` and a call on a folder that
holds one continues from the last (optimizer, scheduler, RNG and data position included), so a
killed run and an uninterrupted one end with the same weights. On finish ``out_dir`` holds

* ``model/``: the trained ``*ForMaskedLM`` and its tokenizer (``AutoModelForMaskedLM.from_pretrained``);
* ``telemetry.csv`` / ``telemetry.png``: one row per logging step (see ``telemetry.COLUMNS``);
* ``record.json``: what :func:`train_splade` returns;

and the checkpoints are deleted. A finished folder is not trained again: its record is returned.
Collapse (NaN loss, all-zero or too-dense vectors) stops training early; the collapsed model is
saved all the same and the record says ``status: "collapsed"``.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from sentence_transformers.base.sampler import BatchSamplers
from sentence_transformers.sparse_encoder import (
    SparseEncoder,
    SparseEncoderTrainer,
    SparseEncoderTrainingArguments,
)
from sentence_transformers.sparse_encoder.callbacks.splade_callbacks import SpladeRegularizerWeightSchedulerCallback
from sentence_transformers.sparse_encoder.data_collator import SparseEncoderDataCollator
from transformers import PrinterCallback, TrainerCallback, set_seed
from transformers.trainer_utils import get_last_checkpoint

from benchmark import faults
from benchmark.atomic import write_json
from benchmark.errors import BenchmarkError
from benchmark.training.losses import Probe, build_loss
from benchmark.training.pooling import SpladeMLM
from benchmark.training.recipe import LOSS_COLUMNS, Recipe
from benchmark.training.telemetry import CollapseDetector, plot_png, telemetry_rows, write_csv

#: example column → the Transformer task whose max length it is truncated to
COLUMN_TASKS = {"query": "query", "positive": "document", "negative": "document"}
#: ranking loss → batch sampler (in-batch negatives must not contain the query's own positive)
LOSS_SAMPLERS = {"infonce": BatchSamplers.NO_DUPLICATES, "marginmse": BatchSamplers.BATCH_SAMPLER}


def _check_examples(examples: Sequence[dict[str, Any]], columns: tuple[str, ...], recipe: Recipe) -> None:
    if not isinstance(examples, Sequence) or isinstance(examples, (str, bytes)):
        raise BenchmarkError(f"examples must be a list of dicts with keys {', '.join(columns)}, got {type(examples).__name__}")
    if len(examples) < recipe.batch_size:
        raise BenchmarkError(
            f"{len(examples)} training examples are fewer than one batch (batch_size = {recipe.batch_size} in recipe "
            f"{recipe.name!r}); provide more examples or override batch_size"
        )
    for i, example in enumerate(examples):
        if not isinstance(example, dict) or any(c not in example for c in columns):
            keys = sorted(example) if isinstance(example, dict) else type(example).__name__
            raise BenchmarkError(f"examples[{i}] has {keys}; recipe loss {recipe.loss!r} needs keys {', '.join(columns)}")
        for column in columns:
            value = example[column]
            ok = isinstance(value, (int, float)) and not isinstance(value, bool) if column == "score" else isinstance(value, str)
            if not ok:
                kind = "a number" if column == "score" else "a str"
                raise BenchmarkError(f"examples[{i}][{column!r}] is {type(value).__name__} {value!r:.40}, expected {kind}")


def _fingerprint(
    recipe: Recipe, examples: Sequence[dict[str, Any]], columns: tuple[str, ...], seed: int, world: int
) -> dict[str, Any]:
    """What must not change between a run and its resume (examples: count + a sample hash)."""
    stride = max(1, len(examples) // 1000)
    digest = hashlib.sha256()
    for example in examples[::stride]:
        digest.update(json.dumps([example[c] for c in columns]).encode())
    return {
        "recipe": recipe.hyperparameters(),
        "seed": seed,
        "world_size": world,
        "examples": len(examples),
        "examples_sample_sha256": digest.hexdigest(),
    }


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


class _Telemetry:
    """Builds the telemetry row of a logging step and runs the collapse detector on it."""

    def __init__(self, probe: Probe, loss: Any, decoder: torch.nn.Linear, detector: CollapseDetector) -> None:
        self.probe = probe
        self.loss = loss
        self.decoder = decoder
        self.detector = detector
        self.offset = 0.0  # seconds trained before this session (resume)
        self.session_start = time.perf_counter()

    def head_norm(self) -> float:
        return float(self.decoder.weight.detach().float().norm())

    def row(self, step: int, logs: dict[str, Any]) -> dict[str, Any]:
        row = self.probe.flush()
        row["lambda_q"] = float(self.loss.query_regularizer_weight or 0.0)
        row["lambda_d"] = float(self.loss.document_regularizer_weight)
        row["head_norm"] = self.head_norm()
        row["seconds"] = self.offset + time.perf_counter() - self.session_start
        self.detector.check_row({**logs, **row, "step": step})
        return row


class _SpladeTrainer(SparseEncoderTrainer):
    """SparseEncoderTrainer that adds the telemetry to each training log entry.

    Entries go to ``state.log_history``, which checkpoints store: a resumed run keeps its table.
    """

    def __init__(self, *args: Any, telemetry: _Telemetry, **kwargs: Any) -> None:
        self.telemetry = telemetry
        super().__init__(*args, **kwargs)

    def add_model_card_callback(self, default_args_dict: dict[str, Any]) -> None:
        """No model card: the output is a bare ``*ForMaskedLM``, and building the card costs time."""

    def log(self, logs: dict[str, float], start_time: float | None = None) -> None:
        if "loss" in logs:
            logs.update(self.telemetry.row(self.state.global_step, logs))
            if self.telemetry.detector.reason is not None:
                self.control.should_training_stop = True
        super().log(logs, start_time)


class _CollapseCallback(TrainerCallback):
    """Stops at the first non-finite step; forces a log on the last step; restores state on resume."""

    def __init__(self, telemetry: _Telemetry) -> None:
        self.telemetry = telemetry

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        rows = telemetry_rows(state.log_history)
        self.telemetry.detector.replay(rows)
        self.telemetry.offset = float(rows[-1]["seconds"]) if rows else 0.0
        self.telemetry.session_start = time.perf_counter()

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
        faults.point("train:checkpoint")  # the kill-anywhere tests stop here, after a whole checkpoint


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
        max_grad_norm=recipe.max_grad_norm,
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
    """transformers' load reports, warnings and progress bars, only when progress is wanted."""
    from benchmark.backbone import quiet_transformers

    return contextlib.nullcontext() if progress else quiet_transformers()


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


def train_splade(
    init_dir: Path,
    examples: Sequence[dict[str, Any]],
    recipe: Recipe,
    out_dir: Path,
    *,
    seed: int = 42,
    progress: bool = True,
    overrides: dict[str, Any] | None = None,
    callbacks: Sequence[TrainerCallback] = (),
) -> dict[str, Any]:
    """Train SPLADE from the MLM checkpoint ``init_dir`` on ``examples``; see the module doc.

    ``examples``: dicts with ``query``, ``positive``, ``negative`` (and ``score`` = CE(pos) - CE(neg)
    for MarginMSE). ``overrides``: recipe keys to replace, validated like the recipe file.
    ``callbacks``: extra ``transformers.TrainerCallback`` objects (tests use them to interrupt).
    """
    recipe = recipe.with_overrides(overrides)
    init_dir, out_dir = Path(init_dir), Path(out_dir)
    columns = LOSS_COLUMNS[recipe.loss]
    if recipe.max_examples:
        examples = examples[: recipe.max_examples]
    _check_examples(examples, columns, recipe)
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
        raise BenchmarkError(f"batch_size = {recipe.batch_size} does not split over {world} processes; override batch_size")
    args.per_device_train_batch_size = recipe.batch_size // world

    out_dir.mkdir(parents=True, exist_ok=True)
    fingerprint = _fingerprint(recipe, examples, columns, seed, world)
    fingerprint_path = out_dir / "fingerprint.json"
    last = get_last_checkpoint(str(ckpt_dir)) if ckpt_dir.is_dir() else None
    if last and fingerprint_path.is_file() and json.loads(fingerprint_path.read_text()) != fingerprint:
        raise BenchmarkError(
            f"{out_dir} holds checkpoints of a different run (recipe, seed, examples or world size changed); "
            "delete the folder or use another out_dir"
        )
    if args.process_index == 0:
        write_json(fingerprint_path, fingerprint)

    set_seed(seed)
    with _quiet(progress):
        module = SpladeMLM(
            str(init_dir),
            chunk_size=recipe.chunk_size or None,
            query_length=recipe.query_max_length,
            document_length=recipe.doc_max_length,
            model_kwargs={"dtype": torch.float32},  # fp32 master weights; bf16 comes from autocast
        )
    _check_head_as_saved(init_dir, module.auto_model)
    model = SparseEncoder(modules=[module])
    probe = Probe()
    loss = build_loss(model, recipe.loss, recipe.lambda_q, recipe.lambda_d, recipe.mnrl_scale, probe)
    detector = CollapseDetector(module.get_embedding_dimension(), recipe.dense_fraction, recipe.dense_patience)
    telemetry = _Telemetry(probe, loss, module.decoder, detector)
    head_norm_initial = telemetry.head_norm()

    from datasets import Dataset

    dataset = Dataset.from_dict({c: [e[c] for e in examples] for c in columns})
    trainer = _SpladeTrainer(
        model=model,
        args=args,
        train_dataset=dataset,
        loss=loss,
        data_collator=SparseEncoderDataCollator(preprocess_fn=model.preprocess, router_mapping=COLUMN_TASKS),
        callbacks=[
            SpladeRegularizerWeightSchedulerCallback(loss, recipe.lambda_schedule, recipe.lambda_warmup_ratio),
            _CollapseCallback(telemetry),
            *callbacks,
        ],
        telemetry=telemetry,
    )
    if not progress:
        trainer.remove_callback(PrinterCallback)  # it prints every log dict when tqdm is off
    resumed_from = json.loads((Path(last) / "trainer_state.json").read_text())["global_step"] if last else None
    with _quiet(progress):
        output = trainer.train(resume_from_checkpoint=last)

    rows = telemetry_rows(trainer.state.log_history)
    final = rows[-1] if rows else {}
    session_steps = trainer.state.global_step - (resumed_from or 0)
    runtime = output.metrics.get("train_runtime", 0.0)
    record = {
        "status": "collapsed" if detector.reason else "ok",
        "collapse_step": detector.step,
        "collapse_reason": detector.reason,
        "collapse_detail": detector.detail,
        "steps": trainer.state.global_step,
        "max_steps": trainer.state.max_steps,
        "examples": len(examples),
        "train_seconds": float(final.get("seconds", runtime)),
        "steps_per_second": session_steps / runtime if runtime else None,
        "examples_per_second": session_steps * recipe.batch_size / runtime if runtime else None,
        "final_loss": final.get("loss"),
        "final_nnz_q": final.get("nnz_q"),
        "final_nnz_d": final.get("nnz_d"),
        "final_flops": final.get("flops"),
        "head_norm_initial": head_norm_initial,
        "head_norm_final": telemetry.head_norm(),
        "recipe": recipe.name,
        "hyperparameters": recipe.hyperparameters(),
        "lambda_q": recipe.lambda_q,
        "lambda_d": recipe.lambda_d,
        "seed": seed,
        "world_size": world,
        "precision": "bf16" if bf16 else "fp32",
        "resumed_from_step": resumed_from,
        "init_dir": str(init_dir),
    }
    if trainer.is_world_process_zero():
        with _quiet(progress):
            _save_model(model, out_dir / "model")
        faults.point("train:saved")
        write_csv(rows, out_dir / "telemetry.csv")
        plot_png(rows, out_dir / "telemetry.png", f"{recipe.name}: {init_dir.name} ({record['status']})", detector.step)
        write_json(record_path, record)
        shutil.rmtree(ckpt_dir, ignore_errors=True)
    if world > 1:
        torch.distributed.barrier()
    return record

