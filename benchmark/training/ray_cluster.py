"""Data-parallel training on a Ray cluster: one function on N Ray Train workers, one DDP process group.

Ray Train's ``TorchTrainer`` places the workers (across nodes), sets ``RANK``/``WORLD_SIZE``/
``LOCAL_RANK``/``MASTER_ADDR`` and initialises ``torch.distributed`` (gloo on CPU, NCCL on GPU), which
is what ``train_splade`` already runs under with torchrun: the HF Trainer splits the global batch
over the ranks, the FLOPS regulariser is taken over the global batch (``GlobalFlopsLoss``), and rank 0
saves. A worker that dies makes Ray Train restart the group, and ``train_splade`` resumes from its
last checkpoint in the stage's partial folder.
"""

from __future__ import annotations

import contextlib
import pickle
import shutil
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from benchmark.common.errors import BenchmarkError


def fit(
    fn: Callable[..., Any],
    args: Sequence[Any],
    *,
    workers: int,
    cpus: float = 1.0,
    gpus: float = 0.0,
    memory_gb: float = 0.0,
    storage: Path,
    retries: int = 3,
) -> Any:
    """``fn(*args)`` on ``workers`` Ray Train workers (each ``cpus`` CPUs, ``gpus`` GPUs); rank 0's result.

    ``storage`` must be a folder every node can write (Ray Train keeps its run state there); the run's
    own subfolder is removed afterwards.
    """
    import ray.train
    from ray.train import FailureConfig, RunConfig, ScalingConfig
    from ray.train.torch import TorchConfig, TorchTrainer

    name = f"run-{uuid.uuid4().hex[:12]}"
    result = Path(storage) / name / "rank0-result.pkl"
    threads = max(1, int(cpus))

    def loop(_config: dict[str, Any]) -> None:
        import torch

        from benchmark.common.atomic import atomic_path

        torch.set_num_threads(threads)
        value = fn(*args)
        if ray.train.get_context().get_world_rank() == 0:
            result.parent.mkdir(parents=True, exist_ok=True)
            with atomic_path(result) as tmp:
                Path(tmp).write_bytes(pickle.dumps(value))

    per_worker: dict[str, float] = {"CPU": cpus}
    if gpus:
        per_worker["GPU"] = gpus
    if memory_gb:
        per_worker["memory"] = memory_gb * 2**30
    Path(storage).mkdir(parents=True, exist_ok=True)
    trainer = TorchTrainer(
        loop,
        scaling_config=ScalingConfig(num_workers=workers, use_gpu=gpus > 0, resources_per_worker=per_worker),
        torch_config=TorchConfig(backend="nccl" if gpus else "gloo"),
        run_config=RunConfig(
            name=name, storage_path=str(Path(storage).resolve()), failure_config=FailureConfig(max_failures=retries)
        ),
    )
    try:
        trainer.fit()
        try:
            return pickle.loads(result.read_bytes())
        except OSError:
            raise BenchmarkError(
                f"Ray Train finished without rank 0's result ({result}); is {storage} on a "
                "filesystem every node mounts?"
            ) from None
    finally:
        shutil.rmtree(Path(storage) / name, ignore_errors=True)
        with contextlib.suppress(OSError):
            Path(storage).rmdir()  # when no other run uses it
