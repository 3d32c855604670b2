"""The compute budget of a plan's GPU stages, and its wall time on N GPUs under the Ray executor.

The figures are the README's ("Compute budget of the ``paper`` suite"), measured by
``python -m benchmark.perf budget-probe`` on one H200: per backbone, encode throughput at 64/128/256 tokens and
the total encode hours over the paper's corpora, and the seconds of one training step with
documents of 128 and 256 tokens (real MS MARCO batches fall between the two). Corpus sizes and mean
document lengths are the BEIR paper's (Table 1); tokens ≈ 1.3 × words, capped at 256. Every range
below is low–high: 128-token steps with the throughput-bucket encode time, 256-token steps with
the README's per-model encode hours (see ``encode_seconds``).

The estimate replays what the Ray executor does on N GPUs: the training runs are submitted at
once, in plan order (Ray starts them first come, first served, ``workers`` GPUs each, assuming
linear data-parallel scaling); once a model is trained, its corpora's shards (``shard_size``
documents, one GPU each) queue behind whatever is waiting. CPU stages (mining the negatives,
Lucene indexing and search, evaluation) are not measured and not counted: they run on CPU
workers beside the GPU work, and the last corpus's index and search follow the last encode.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ModelFigures:
    """One backbone's row of the README's budget table."""

    encode_docs_per_s: tuple[float, float, float]  # at 64 / 128 / 256 tokens
    encode_hours: float  # every corpus of the paper suite, once
    train_step_s: tuple[float, float]  # documents of 128 / 256 tokens


#: README, "Compute budget of the paper suite" (one H200; steps at 256 tokens marked * there are the
#: 128-token time × 1.8).
FIGURES: dict[str, ModelFigures] = {
    "bert-base-uncased": ModelFigures((2000, 2421, 1753), 6.0, (0.15, 0.26)),
    "modernbert-base": ModelFigures((1026, 1064, 844), 13.4, (0.26, 0.50)),
    "modernbert-large": ModelFigures((1206, 900, 543), 15.4, (0.44, 0.79)),
    "ettin-17m": ModelFigures((1359, 1339, 1269), 10.6, (0.11, 0.18)),
    "ettin-32m": ModelFigures((1761, 1674, 1352), 8.5, (0.12, 0.22)),
    "ettin-68m": ModelFigures((1351, 1314, 1076), 10.8, (0.19, 0.34)),
    "ettin-150m": ModelFigures((1250, 1045, 778), 13.4, (0.28, 0.50)),
    "ettin-400m": ModelFigures((1269, 899, 555), 15.4, (0.45, 0.81)),
    "ettin-1b": ModelFigures((775, 550, 320), 25.2, (0.78, 1.41)),
}

#: corpus (a corpus stage's source) → (documents, mean words per document), BEIR paper Table 1.
CORPORA: dict[str, tuple[int, float]] = {
    "msmarco-passage": (8_841_823, 55.98),
    "beir/trec-covid": (171_332, 160.77),
    "beir/nfcorpus": (3_633, 232.26),
    "beir/nq": (2_681_468, 78.88),
    "beir/hotpotqa": (5_233_329, 46.30),
    "beir/fiqa": (57_638, 132.32),
    "beir/arguana": (8_674, 166.80),
    "beir/webis-touche2020/v2": (382_545, 292.37),
    "beir/dbpedia-entity": (4_635_922, 49.68),
    "beir/scidocs": (25_657, 176.19),
    "beir/climate-fever": (5_416_593, 84.76),
    "beir/scifact": (5_183, 213.63),
    "beir/quora": (522_931, 11.44),
    "beir/fever": (5_416_568, 84.76),
}
TOKENS_PER_WORD = 1.3


def _rate(figures: ModelFigures, words: float) -> float:
    """Documents per second at the corpus's mean length: the nearest of the three measured buckets."""
    tokens = min(256.0, TOKENS_PER_WORD * words)
    bucket = 0 if tokens <= 96 else 1 if tokens <= 192 else 2
    return figures.encode_docs_per_s[bucket]


def _corpus_key(source: str) -> str | None:
    for key in sorted(CORPORA, key=len, reverse=True):
        if source == key or source.startswith(key + "/"):
            return key
    return None


def encode_seconds(backbone: str, source: str, end: int = 1) -> float | None:
    """GPU seconds to encode one corpus with one model. The README gives two figures that disagree by
    ~1.6×: its encoding total (≈ 130–160 GPU-h for the 18 runs) is what the throughput buckets give
    (``end`` 0, the low end), its per-model column (6.0 h for bert-base, …) sums to ~237 GPU-h (``end``
    1, the high end: the buckets' split of each corpus, scaled to the column)."""
    figures, key = FIGURES.get(backbone), _corpus_key(source)
    if figures is None or key is None:
        return None
    n, w = CORPORA[key]
    seconds = n / _rate(figures, w)
    if end == 0:
        return seconds
    paper = sum(n / _rate(figures, w) for n, w in CORPORA.values())  # Climate-FEVER's 5.4M documents are
    return seconds * figures.encode_hours * 3600 / paper  # FEVER's, but their own corpus stage: encoded twice


@dataclass(frozen=True)
class Estimate:
    gpus: int
    wall_hours: tuple[float, float]  # low / high step times
    gpu_hours: tuple[float, float]
    critical_hours: tuple[float, float]  # with unlimited GPUs
    critical_path: str
    missing: tuple[str, ...]  # what has no figure (not counted)


def _model_of(stage: Any) -> str | None:
    """The backbone behind a train or backbone stage."""
    if stage.kind.name == "train":
        stage = stage.parents["init"]
    return stage.config.backbone if stage.kind.name == "backbone" else None


def _jobs(plan: Any, end: int) -> tuple[list[tuple[Any, float]], dict[str, list[float]], list[str], dict[str, str]]:
    """(trainings with their GPU seconds, model stage id → its shards' GPU seconds, what lacks a figure,
    model stage id → backbone)."""
    trains: list[tuple[Any, float]] = []
    shards: dict[str, list[float]] = {}
    models: dict[str, str] = {}
    missing: list[str] = []
    for stage in plan.stages():
        if stage.kind.name == "train":
            backbone = _model_of(stage)
            figures = FIGURES.get(backbone or "")
            if figures is None:
                missing.append(f"training {backbone}")
                continue
            steps = int(stage.config.recipe.max_steps or 0)
            if steps <= 0:
                missing.append(f"training {backbone} (no max_steps)")
                continue
            trains.append((stage, steps * figures.train_step_s[end]))
            models[stage.id] = backbone or ""
        elif stage.kind.name == "encode":
            model, corpus = stage.parents["model"], stage.parents["corpus"]
            backbone = _model_of(model)
            seconds = encode_seconds(backbone or "", corpus.config.source, end)
            if seconds is None:
                missing.append(f"encoding {corpus.config.source} with {backbone}")
                continue
            docs = CORPORA[_corpus_key(corpus.config.source) or ""][0]
            if corpus.config.max_docs:
                seconds *= min(1.0, corpus.config.max_docs / docs)
                docs = min(docs, corpus.config.max_docs)
            count = max(1, math.ceil(docs / stage.config.shard_size))
            shards.setdefault(model.id, []).extend([seconds / count] * count)
            models.setdefault(model.id, backbone or "")
    return trains, shards, sorted(set(missing)), models


def _simulate(trains: list[tuple[Any, float]], shards: dict[str, list[float]], gpus: int, workers: int) -> float:
    """Makespan (seconds) of first-come-first-served scheduling on ``gpus`` GPUs: the trainings first,
    in plan order, then each model's shards as its training ends (untrained models' at once)."""
    workers = max(1, min(workers, gpus))
    trained = {stage.id for stage, _ in trains}
    queue: list[tuple[str, Any, float]] = [("train", stage, seconds / workers) for stage, seconds in trains]
    queue += [("encode", None, s) for mid, items in shards.items() if mid not in trained for s in items]
    events: list[tuple[float, int, str, Any]] = []  # (finish time, tie-break, kind, train stage)
    free, clock, head, started = gpus, 0.0, 0, 0
    while True:
        while head < len(queue):  # start queued jobs in order while their GPUs are free
            kind, stage, seconds = queue[head]
            need = workers if kind == "train" else 1
            if need > free:
                break
            free -= need
            started += 1
            heapq.heappush(events, (clock + seconds, started, kind, stage))
            head += 1
        if not events:
            return clock
        clock, _, kind, stage = heapq.heappop(events)
        free += workers if kind == "train" else 1
        if kind == "train":
            queue += [("encode", None, s) for s in shards.get(stage.id, [])]


def estimate(plan: Any, gpus: int, workers: int = 1) -> Estimate | None:
    """Wall and GPU hours of the plan's GPU stages on ``gpus`` GPUs, or None when nothing has a figure."""
    out = []
    for end in (0, 1):
        trains, shards, missing, models = _jobs(plan, end)
        if not trains and not shards:
            return None
        work = sum(s for _, s in trains) + sum(sum(v) for v in shards.values())
        path = max(
            ((s / max(1, min(workers, gpus)) + max(shards.get(t.id, [0.0])), t) for t, s in trains),
            default=(max((max(v) for v in shards.values()), default=0.0), None),
            key=lambda x: x[0],
        )
        out.append((_simulate(trains, shards, gpus, workers), work, path, missing, models))
    (wall_lo, work_lo, (crit_lo, stage), missing, models), (wall_hi, work_hi, (crit_hi, _), _, _) = out
    if stage is not None:
        longest = max(shards.get(stage.id, [0.0]))
        text = (
            f"mining (CPU) → train {models[stage.id]} ({(crit_lo - longest) / 3600:.1f}–"
            f"{(crit_hi - longest) / 3600:.1f} h on {max(1, min(workers, gpus))} GPU) → its longest encode shard "
            f"({longest / 60:.1f} min) → index → search → evaluate (CPU)"
        )
    else:
        text = "encode shards (no training) → index → search → evaluate (CPU)"
    return Estimate(
        gpus,
        (wall_lo / 3600, wall_hi / 3600),
        (work_lo / 3600, work_hi / 3600),
        (crit_lo / 3600, crit_hi / 3600),
        text,
        tuple(missing),
    )


def describe_estimate(plan: Any, gpus: int, train: Any = None) -> str:
    """What ``--dry-run --executor ray --gpus N`` prints after the stage list."""
    workers = getattr(train, "workers", 1) if train is not None else 1
    est = estimate(plan, gpus, workers)
    if est is None:
        return "wall-time estimate: none (no backbone of this plan is in the README's budget table)"
    lines = [
        f"estimate on {gpus} GPU(s) (README budget figures, one H200 each; low–high as in benchmark.pipeline.budget):",
        f"  GPU work: {est.gpu_hours[0]:.0f}–{est.gpu_hours[1]:.0f} GPU-h (training + document encoding)",
        f"  critical path: {est.critical_path}: {_hours(est.critical_hours)}",
        f"  estimated wall time: {_hours(est.wall_hours)} "
        f"(lower bound max(critical path, work / GPUs): "
        f"{_hours(tuple(max(c, w / gpus) for c, w in zip(est.critical_hours, est.gpu_hours)))})",
        "  not counted: CPU stages (mining, Lucene indexing and search, evaluation), query encoding, cluster start-up",
    ]
    if est.missing:
        lines.append(f"  no figure for: {', '.join(est.missing)}")
    return "\n".join(lines)


def _hours(pair: Iterable[float]) -> str:
    lo, hi = pair
    fmt = (lambda h: f"{h:.1f} h") if hi < 48 else (lambda h: f"{h / 24:.1f} d")
    return f"{fmt(lo)}–{fmt(hi)}"
