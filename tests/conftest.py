"""Shared fixtures: the offline material (../shared), and one small pipeline run reused by several tests."""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from helpers.beir import write_scifact_slice
from helpers.pipeline import run_cli

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"


def _offline_env() -> None:
    """Make the tests runnable outside .ci/run too: use ../shared like scripts/offline.sh does."""
    if "IR_DATASETS_HOME" not in os.environ and (SHARED / "ir_datasets_home").is_dir():
        copy = ROOT / ".cache" / "ir_datasets_home"
        if not (copy / ".complete").exists():
            shutil.rmtree(copy, ignore_errors=True)
            shutil.copytree(SHARED / "ir_datasets_home", copy)
            (copy / ".complete").touch()
        os.environ["IR_DATASETS_HOME"] = str(copy)
    if "BENCHMARK_MODEL_DIR" not in os.environ and (SHARED / "models").is_dir():
        os.environ["BENCHMARK_MODEL_DIR"] = str(SHARED / "models")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


_offline_env()
# Two test workers share two cores, each running torch's OpenMP threads, so a thread that waits for
# work spins on a core the other worker needs (libgomp spins before it sleeps). PASSIVE sleeps at
# once; it changes no result, only idle time. Two trainings side by side: 146 s → 80 s each; one
# alone: 59 s → 64 s (README, Tests). Read when torch starts: set before any test module imports it,
# and inherited by the runs the tests start.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

#: The ir_datasets ids the tests read. ir_datasets fills a document store on first use; the harness does
#: that under a lock (benchmark.data.dataset_cache), but some tests read ir_datasets directly.
DATASETS = (
    "beir/scifact/test",
    "beir/scifact/train",
    "beir/nfcorpus/test",
    "beir/nfcorpus/dev",
    "beir/nfcorpus/train",
    "cranfield",
)


def pytest_configure(config: pytest.Config) -> None:
    """In the controlling process, before any worker starts: build the datasets' files once, so that no
    two workers fill one store together (on a fresh cache that gave corrupt stores)."""
    if hasattr(config, "workerinput") or "IR_DATASETS_HOME" not in os.environ:
        return
    import ir_datasets

    from benchmark.data import dataset_cache

    for name in DATASETS:
        try:
            with contextlib.redirect_stderr(io.StringIO()):  # ir_datasets' progress bars, before pytest's capture
                ds = ir_datasets.load(name)
                dataset_cache.topics(ds)
                next(dataset_cache.docs_iter(ds), None)  # the store is filled before the first document
        except Exception:  # noqa: BLE001  (not in this cache: the tests that need it say so themselves)
            continue


#: The longest modules, longest first (per-module times in the README). The test command runs two
#: xdist workers that take whole modules in this order (``--dist loadfile --no-loadscope-reorder``), so
#: the long ones start at once and the short ones fill in around them; the rest keep their order.
LONGEST_FIRST = (
    "test_ray.py",
    "test_determinism.py",
    "test_outcomes.py",
    "test_paper_mini.py",
    "test_kill.py",
    "test_triples.py",
    "test_perf.py",
    "test_torchrun.py",
    "test_damage.py",
    "test_interrupt.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {name: n for n, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: each module's order is kept


@pytest.fixture(autouse=True)
def _torch_threads():
    """Restore torch's process-wide intra-op thread count after each test: the perf tools set it, and a
    worker runs many modules, whose cached stages record the count they ran with."""
    import torch  # the collected modules import it already

    before = torch.get_num_threads()
    yield
    if torch.get_num_threads() != before:
        torch.set_num_threads(before)


@pytest.fixture(scope="session")
def bert_tiny() -> Path:
    from helpers.tiny_models import BERT_TINY

    return BERT_TINY


@pytest.fixture(scope="session")
def untrained_splade(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """BM25 + untrained SPLADE bert-tiny through the whole pipeline, on the SciFact subset.

    Computed once per test session: the first xdist worker to need it builds it in the session's
    shared temporary folder under a lock, and each worker gets its own copy (its tests add stages
    and results to it)."""
    import fcntl

    worker = os.environ.get("PYTEST_XDIST_WORKER")
    shared = tmp_path_factory.getbasetemp().parent if worker else tmp_path_factory.getbasetemp()
    built = shared / "untrained-splade"
    with open(shared / "untrained-splade.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (built / ".complete").exists():
            shutil.rmtree(built, ignore_errors=True)
            _build_untrained_splade(built)
            (built / ".complete").touch()
    base = tmp_path_factory.mktemp("pipeline")
    shutil.copytree(built, base, dirs_exist_ok=True, ignore=shutil.ignore_patterns(".complete"))
    return {"suite": base / "mini.toml", "runs": base / "runs", "results": base / "results" / "mini"}


def _build_untrained_splade(base: Path) -> None:
    base.mkdir(parents=True)
    suite = base / "mini.toml"
    suite.write_text(
        'name = "mini"\ndescription = "BM25 and untrained SPLADE on a SciFact slice"\n'
        'datasets = ["beir/scifact/test"]\nmeasures = ["nDCG@10", "RR@10", "R@100"]\nmax_docs = 600\nmax_queries = 30\n'
        '[bm25]\n[splade]\nbackbones = ["bert-tiny"]\n[encode]\nmax_doc_length = 128\nmax_query_length = '
        "32\nshard_size = 250\n"
    )
    runs, results = base / "runs", base / "results"
    assert (
        run_cli("--suite", str(suite), "--runs-dir", str(runs), "--results-dir", str(results)) == 0
    )  # SUBSET, declared


@pytest.fixture(scope="session")
def scifact_slice(tmp_path_factory):
    """A 200-document SciFact test slice as a local BEIR folder, built once per session (read-only use:
    tests that change it work on a copy)."""
    return write_scifact_slice(tmp_path_factory.mktemp("slice") / "scifact-slice")


@pytest.fixture
def small_disk(tmp_path):
    """A 48 MiB tmpfs, for a real ENOSPC from a real filesystem (skipped where mounting needs root)."""
    mount = tmp_path / "disk"
    mount.mkdir()
    proc = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=48m", "tmpfs", str(mount)], capture_output=True, text=True
    )
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root): {proc.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)
