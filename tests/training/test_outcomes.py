"""Training outcomes: ok / degraded / collapsed, decided by training, not by the detector.

The rules (benchmark.training.detector) are tested on synthetic telemetry rows, one trigger at a
time; then on real training runs: forced heads (non-finite, empty, all-dense vectors) on a tiny
random BERT, a tiny random ModernBERT that is dense at initialisation (it must not trip while λ
warms up), the real bert-tiny with its MLM head ×16 (flagged) and ×1 (ok), and a run trained on
inverted labels (degraded on its held-out queries).
"""

from __future__ import annotations

import csv
import math
import random
from pathlib import Path

import numpy as np
import pytest
import torch
from transformers import AutoModelForMaskedLM, AutoTokenizer

from benchmark.splade.impacts import quantise
from benchmark.training.detector import (
    CHANCE,
    DENSE,
    DEV_DROP,
    NON_FINITE,
    SUPPORT,
    DevDrop,
    OutcomeDetector,
    outcome,
    published_drop,
)
from benchmark.training.dev import reciprocal_ranks
from benchmark.training.loop import train_splade
from benchmark.training.losses import indexed_threshold, mean_pairwise_cosine
from benchmark.training.outcomes import COLLAPSED, DEGRADED, OK
from benchmark.training.recipe import load_recipe
from helpers.tiny_models import tiny_bert, tiny_modernbert
from helpers.triples import scifact_triples

# ---------------------------------------------------------------- the rules, on synthetic rows


def _row(step: int, lam: float = 1.0, **values: float) -> dict:
    """A healthy, armed telemetry row (λ final = 1.0) unless ``values`` say otherwise."""
    row = {
        "step": step,
        "loss": 1.0,
        "ranking_loss": 1.0,
        "nnz_q": 40.0,
        "nnz_d": 100.0,
        "low_support_q": 0.0,
        "query_cosine": 0.2,
        "lambda_q": lam,
        "lambda_d": lam,
    }
    return {**row, **values}


def _detector(loss: str = "infonce", patience: int = 3) -> OutcomeDetector:
    return OutcomeDetector(
        loss=loss, vocab_size=1000, candidates=64, dense_fraction=0.5, patience=patience, lambda_q=1.0, lambda_d=1.0
    )


def test_density_trigger_is_armed_only_after_the_warm_up() -> None:
    det = _detector()
    for step in range(1, 11):  # dense during the whole warm-up: never counts
        assert det.check_row(_row(step, lam=0.01 * step, nnz_d=900.0)) == []
    assert (det.reason, det.armed_step) == (None, None)
    assert det.check_row(_row(11, nnz_d=600.0)) == []  # armed: 1
    assert det.check_row(_row(12, nnz_d=600.0)) == []  # 2
    assert det.check_row(_row(13, nnz_d=500.0)) == []  # exactly 0.5 of the vocabulary is not denser: reset
    assert det.check_row(_row(14, nnz_q=501.0)) == []
    assert det.check_row(_row(15, nnz_q=900.0)) == []
    assert det.check_row(_row(16, nnz_d=700.0)) == [DENSE]
    assert (det.reason, det.step, det.armed_step) == (DENSE, 16, 11)
    assert det.detail == (
        "700.0 indexed terms per vector (query 40.0, document 700.0) > 0.5 of the 1000 vocabulary "
        "for 3 logging steps (step 16)"
    )
    assert det.check_row(_row(17, loss=math.nan)) == [NON_FINITE]  # recorded, but the first reason stays
    assert (det.reason, det.fired) == (DENSE, {DENSE: 16, NON_FINITE: 17})


@pytest.mark.parametrize(
    ("values", "holds"),
    [
        ({"low_support_q": 0.05}, True),  # 5 % of queries with <= 2 indexed terms: the rule's bound, inclusive
        ({"low_support_q": 0.0499}, False),
        ({"query_cosine": 0.9001}, True),  # different queries share their terms
        ({"query_cosine": 0.9}, False),  # the bound is strict
    ],
)
def test_degenerate_support_trigger(values: dict, holds: bool) -> None:
    det = _detector(patience=2)
    assert det.check_row(_row(1, **values)) == []
    assert det.check_row(_row(2, **values)) == ([SUPPORT] if holds else [])


def test_chance_level_ranking_trigger() -> None:
    # InfoNCE over 64 in-batch candidates: chance loss ln 64 = 4.1589; the trigger is 0.95 of it = 3.9509
    bound = 0.95 * math.log(64)
    det = _detector(patience=1)
    assert det.check_row(_row(1, ranking_loss=bound - 1e-9)) == []
    assert det.check_row(_row(2, ranking_loss=bound)) == [CHANCE]
    assert det.detail == "in-batch InfoNCE 3.951 >= 0.95 x ln(64) = 3.951 (chance level) for 1 logging steps (step 2)"
    # MarginMSE: the student's margins explain none of the teacher's (R² <= 0); no variance: no verdict
    mse = _detector("marginmse", patience=1)
    assert mse.check_row(_row(1, ranking_loss=50.0, r2=0.01)) == []
    assert mse.check_row(_row(2, ranking_loss=50.0, r2=None)) == []
    assert mse.check_row(_row(3, ranking_loss=50.0, r2=0.0)) == [CHANCE]


def test_non_finite_stops_at_once_even_during_warm_up() -> None:
    det = _detector(patience=5)
    assert det.check_finite(3, True) is False
    assert det.check_finite(4, False) is True  # stop now
    assert (det.reason, det.step, det.non_finite_step) == (NON_FINITE, 4, 4)
    row_only = _detector(patience=5)
    assert row_only.check_row(_row(7, lam=0.0, loss=math.inf)) == [NON_FINITE]


def test_ties_and_replay() -> None:
    det = _detector(patience=2)
    both = {"nnz_d": 900.0, "ranking_loss": 10.0}  # dense and at chance on the same rows
    det.check_row(_row(1, **both))
    assert det.check_row(_row(2, **both)) == [DENSE, CHANCE]
    assert det.reason == DENSE  # same step: the representation-level cause is reported first
    # an earlier step wins over the order
    early = _detector(patience=2)
    early.check_row(_row(1, ranking_loss=10.0))
    early.check_row(_row(2, ranking_loss=10.0, nnz_d=900.0))
    early.check_row(_row(3, nnz_d=900.0))
    assert (early.reason, early.fired) == (CHANCE, {CHANCE: 2, DENSE: 3})
    # a resumed detector continues the streak from the replayed rows
    resumed = _detector(patience=3)
    resumed.replay([{"step": 0, "dev_mrr": 0.5}, _row(1, nnz_d=900.0), _row(2, nnz_d=900.0)])
    assert (resumed.reason, resumed.runs[DENSE]) == (None, 2)
    assert resumed.check_row(_row(3, nnz_d=900.0)) == [DENSE]


def test_degraded_needs_a_one_sided_t_test_at_its_false_positive_rate() -> None:
    # per-query RR at step 0 and at the end: drops 0.5, 0, 0, 1 → mean 0.375, sample variance
    # (0.125² + 2·0.375² + 0.625²)/3 = 0.6875/3, standard error sqrt(0.6875/3/4) = 0.23936; 1.57 standard
    # errors, below t(0.95, 3) = 2.35336 (the one-sided 5 % quantile of Student's t with 3 degrees of freedom)
    drop = DevDrop.of([1.0, 0.5, 0.0, 1.0], [0.5, 0.5, 0.0, 0.0])
    assert (drop.initial, drop.final, drop.queries) == (0.625, 0.25, 4)
    assert drop.se == pytest.approx(math.sqrt(0.6875 / 3 / 4), rel=1e-12)  # float rounding only
    assert drop.threshold == pytest.approx(2.353363434801823 * drop.se, rel=1e-9)  # scipy's quantile to ~1e-12
    assert not drop.degraded  # beyond one standard error (the former rule marked it), not beyond t · SE
    # drops 0.5, 0.5, 0.5, 1, 0.5 → mean 0.6, sample variance 0.05, SE 0.1; t(0.95, 4) = 2.13185 → 0.2132
    drop = DevDrop.of([1.0] * 5, [0.5, 0.5, 0.5, 0.0, 0.5])
    assert drop.se == pytest.approx(0.1, rel=1e-12) and drop.degraded
    detector = _detector()
    result, reason, step, detail = outcome(detector, drop, 26)
    assert (result, reason, step) == (DEGRADED, DEV_DROP, 26)
    assert "5 % of unchanged runs" in detail and "t(0.95, 4)" in detail
    assert outcome(detector, DevDrop.of([1.0, 0.5, 0.0], [1.0, 0.5, 0.0]), 26) == (OK, None, None, None)  # no change
    assert not DevDrop.of([0.5, 0.5, 0.0], [1.0, 0.5, 0.0]).degraded  # it improved
    assert outcome(detector, None, 26) == (OK, None, None, None)  # no held-out signal: nothing to degrade from
    detector.check_finite(3, False)
    assert outcome(detector, drop, 3)[:3] == (COLLAPSED, NON_FINITE, 3)  # collapse wins


def test_degraded_marks_unchanged_runs_at_its_stated_rate() -> None:
    """4,000 simulated unchanged runs (64 dev queries, per-query differences drawn symmetric around 0 from a
    normal distribution, where the t-test is exact): the fraction marked degraded is DEGRADED_FPR within
    4 binomial standard deviations (sqrt(0.05 · 0.95 / 4000) = 0.0034). One standard error, the former
    threshold, marks about 16 % of them, far outside."""
    from benchmark.training.detector import DEGRADED_FPR

    rng = np.random.default_rng(0)
    runs, queries = 4000, 64
    start = rng.uniform(0.2, 0.8, size=(runs, queries))
    end = start + rng.normal(0.0, 0.2, size=(runs, queries))
    marked = [DevDrop.of(a.tolist(), b.tolist()) for a, b in zip(start, end)]
    rate = sum(d.degraded for d in marked) / runs
    sd = math.sqrt(DEGRADED_FPR * (1 - DEGRADED_FPR) / runs)
    assert abs(rate - DEGRADED_FPR) < 4 * sd, rate
    one_se = sum(d.drop > d.se for d in marked) / runs
    assert abs(one_se - 0.16) < 0.03, one_se  # 1 − Φ(1) ≈ 0.159 (t with 63 degrees of freedom: 0.161)


def test_a_collapse_that_no_longer_holds_on_the_published_checkpoint_is_an_event() -> None:
    """A trigger fired at step 3 (3 logging steps of degenerate support), then the support came back for 3
    logging steps: the published model at step 6 is judged (ok here, degraded if its dev RR dropped), the
    event kept in the detail; a trigger still holding on any of those rows, or a non-finite step, stays
    collapsed."""
    detector = _detector(patience=3)
    low = [_row(step, low_support_q=0.2) for step in (1, 2, 3)]
    for row in low:
        detector.check_row(row)
    assert detector.reason == SUPPORT and detector.step == 3
    healthy = [*low, _row(4), _row(5), _row(6)]
    result, reason, step, detail = outcome(detector, None, 6, 6, healthy)
    assert (result, reason, step) == (OK, None, None)
    assert detail.startswith("recovered: degenerate_support fired at step 3") and "published step 6" in detail
    assert "none of the 3 armed logging steps" in detail
    dropped = DevDrop.of([1.0] * 5, [0.5, 0.5, 0.5, 0.0, 0.5])
    result, reason, step, detail = outcome(detector, dropped, 6, 6, healthy)
    assert (result, reason, step) == (DEGRADED, DEV_DROP, 6) and "recovered: degenerate_support" in detail
    still = [*low, _row(4), _row(5), _row(6, low_support_q=0.2)]
    assert outcome(detector, None, 6, 6, still)[:3] == (COLLAPSED, SUPPORT, 3)  # still holds
    assert outcome(detector, None, 6, 6, ())[:3] == (COLLAPSED, SUPPORT, 3)  # nothing logged: not judged recovered
    detector.check_finite(5, False)
    assert outcome(detector, None, 6, 6, healthy)[:3] == (COLLAPSED, SUPPORT, 3)  # reason: the earliest trigger
    nan = _detector()
    nan.check_finite(4, False)
    assert outcome(nan, None, 4, 4, healthy)[:3] == (COLLAPSED, NON_FINITE, 4)


def test_recovery_needs_as_many_rows_as_firing() -> None:
    """Firing needs ``patience`` armed rows in a row; so does recovery: one healthy row after the trigger
    is not enough (patience 3), three are; an unarmed row does not count towards either."""
    detector = _detector(patience=3)
    low = [_row(step, low_support_q=0.2) for step in (1, 2, 3)]
    for row in low:
        detector.check_row(row)
    assert outcome(detector, None, 4, 4, [*low, _row(4)])[:3] == (COLLAPSED, SUPPORT, 3)
    assert outcome(detector, None, 5, 5, [*low, _row(4), _row(5)])[:3] == (COLLAPSED, SUPPORT, 3)
    assert outcome(detector, None, 6, 6, [*low, _row(4), _row(5), _row(6)])[0] == OK
    unarmed = [*low, _row(4), _row(5, lam=0.5), _row(6)]  # λ not at its final value on step 5
    assert outcome(detector, None, 6, 6, unarmed)[:3] == (COLLAPSED, SUPPORT, 3)


def test_a_collapse_after_the_best_checkpoint_is_labelled_collapsed_with_the_checkpoint_kept() -> None:
    """checkpoint = "best": dev RR peaked at step 10, the support collapsed on steps 12-16 (patience 3). The
    published checkpoint's rows were healthy, which once read as "ok … recovered"; the run collapsed, and
    the label says so and which checkpoint was kept."""
    detector = _detector(patience=3)
    rows = [_row(step) for step in (2, 4, 6, 8, 10)] + [_row(step, low_support_q=0.2) for step in (12, 14, 16)]
    for row in rows:
        detector.check_row(row)
    assert (detector.reason, detector.step) == (SUPPORT, 16)
    result, reason, step, detail = outcome(detector, None, 10, 16, [r for r in rows if r["step"] <= 10])
    assert (result, reason, step) == (COLLAPSED, SUPPORT, 16)
    assert detail.endswith(
        "; collapsed after the published best checkpoint: the model kept, encoded and scored is step 10's, "
        "before the collapse"
    )
    assert "recovered" not in detail


def test_outcome_is_judged_on_the_published_checkpoint() -> None:
    """A hand-built run: its dev RR improves to a best at step 10, then falls by step 20. Publishing the
    best (checkpoint = "best") makes it ok; publishing the last makes it degraded at step 20. A best that
    is still below step 0 degrades at the best's step, and the detail says which checkpoint it was."""
    start = [1.0, 1.0, 0.5, 1.0]
    rows = [
        {"step": 0, "dev_rr": start},
        {"step": 10, "dev_rr": [1.0, 1.0, 1.0, 1.0]},
        {"step": 20, "dev_rr": [0.0, 0.5, 0.0, 0.5]},
        {"step": 5, "nnz_d": 10.0},
    ]  # a row without dev values
    detector = _detector()
    best = published_drop(rows, 10)
    assert (best.initial, best.final) == (0.875, 1.0) and not best.degraded
    assert outcome(detector, best, 10, 20) == (OK, None, None, None)
    # the last: drops 1, 0.5, 0.5, 0.5 → mean 0.625, sd 0.25, se 0.125 < 0.625
    last = published_drop(rows, 20)
    assert (last.drop, last.se) == (0.625, 0.125)
    result, reason, step, detail = outcome(detector, last, 20, 20)
    assert (result, reason, step) == (DEGRADED, DEV_DROP, 20) and "to 0.2500 at the end:" in detail
    worse = [
        {"step": 0, "dev_rr": [1.0, 1.0, 1.0, 1.0]},
        {"step": 10, "dev_rr": [0.5, 0.5, 0.5, 0.0]},
        {"step": 20, "dev_rr": [0.0, 0.0, 0.0, 0.0]},
    ]
    result, reason, step, detail = outcome(detector, published_drop(worse, 10), 10, 20)
    assert (result, reason, step) == (DEGRADED, DEV_DROP, 10)
    assert "to 0.3750 at step 10 (the published best checkpoint; training ended at step 20)" in detail
    assert published_drop(rows, 15) is None and published_drop(rows[1:], 10) is None  # an end not evaluated
    # a collapse is the training run's, whichever checkpoint is published; the detail says when the best precedes it
    detector.check_finite(15, False)
    result, reason, step, detail = outcome(detector, best, 10, 15)
    assert (result, reason, step) == (COLLAPSED, NON_FINITE, 15)
    assert detail == (
        "non-finite loss or representation at step 15; collapsed after the published best checkpoint: the model "
        "kept, encoded and scored is step 10's, before the collapse"
    )


def test_terms_are_counted_as_the_index_sees_them() -> None:
    """``w >= indexed_threshold()`` ⇔ ``quantise(w) >= 1``, on every float32 near the threshold and on
    random weights; dev scores are dot products of those impacts, ties against the query."""
    t = np.float32(indexed_threshold())
    near = [t]
    for _ in range(50):
        near.append(np.nextafter(near[-1], np.float32(1)))
    below = [np.nextafter(t, np.float32(0))]
    for _ in range(50):
        below.append(np.nextafter(below[-1], np.float32(0)))
    weights = np.concatenate(
        [np.array(near + below, dtype=np.float32), np.random.default_rng(0).uniform(0, 0.02, 10_000).astype(np.float32)]
    )
    assert np.array_equal(weights >= t, quantise(weights) >= 1)
    assert quantise(np.array([0.005], dtype=np.float32))[0] == 0  # 0.005 is 0.0049999… in float32

    # 12 candidates; query 0 shares one indexed term with its positive (candidate 0); candidate 1
    # matches it only through a weight the index drops (0.004 → impact 0)
    q = torch.zeros(3, 4)
    q[0, 0], q[0, 1] = 1.0, 1.0
    q[1, 2] = 1.0  # query 1: its positive (2) ties with candidate 3 → ranked second, RR 1/2
    docs = torch.zeros(12, 4)
    docs[0, 0], docs[1, 1] = 0.5, 0.004
    docs[2, 2], docs[3, 2] = 0.7, 0.7
    # query 2 is all zeros: every candidate scores 0, its positive ranks last (12th): RR 0
    assert reciprocal_ranks(q, docs, [0, 2, 5]) == [1.0, 0.5, 0.0]


def test_mean_pairwise_cosine() -> None:
    same = torch.tensor([[1.0, 2.0, 0.0]] * 3)
    assert float(mean_pairwise_cosine(same)) == pytest.approx(1.0, abs=1e-6)  # float32 rounding of the norms
    orthogonal = torch.eye(4)
    assert float(mean_pairwise_cosine(orthogonal)) == 0.0
    with_zero = torch.tensor([[1.0, 0.0], [1.0, 0.0], [0.0, 0.0]])  # pairs: (0,1) = 1, the zero row 0 with both
    assert float(mean_pairwise_cosine(with_zero)) == pytest.approx(2 / 6, abs=1e-6)


# ---------------------------------------------------------------- real runs


@pytest.fixture(scope="module")
def triples() -> list[dict[str, str]]:
    """28 (query, relevant doc, random doc) triples from BEIR SciFact train, one per query."""
    return scifact_triples(28)


def _csv(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def _head_variant(src: Path, dst: Path, weight_scale: float, bias: float) -> Path:
    """A copy of ``src`` whose MLM head is hand-set: projection × weight_scale, vocabulary bias = bias."""
    model = AutoModelForMaskedLM.from_pretrained(src)
    model.config.tie_word_embeddings = False
    untied = AutoModelForMaskedLM.from_config(model.config)
    untied.load_state_dict(model.state_dict())
    with torch.no_grad():
        untied.get_output_embeddings().weight.mul_(weight_scale)
        untied.get_output_embeddings().bias.fill_(bias)
        untied.cls.predictions.bias.fill_(bias)
    untied.save_pretrained(dst)
    AutoTokenizer.from_pretrained(src).save_pretrained(dst)
    return dst


# 6 steps of batch 4; λ's warm-up is int(6/3) = 2 steps, so λ is final from step 3: rows 3..6 are
# armed and a trigger with patience 2 fires at step 4 at the earliest
FORCED = {
    "batch_size": 4,
    "query_max_length": 16,
    "doc_max_length": 16,
    "chunk_size": 4,
    "learning_rate": 1e-3,
    "max_steps": 6,
    "logging_steps": 1,
    "save_steps": 100,
    "trigger_patience": 2,
    "dev_queries": 4,
    "dev_steps": 1,
}


@pytest.mark.parametrize(
    ("weight_scale", "bias", "stop", "reason", "fired", "steps"),
    [
        (1.0, math.inf, False, NON_FINITE, {NON_FINITE: 1}, 1),  # infinite logits: stops at once, whatever the recipe
        # every logit negative: nothing is indexed, every candidate scores 0 (loss = ln 8, chance)
        (0.0, -100.0, False, SUPPORT, {SUPPORT: 4, CHANCE: 4}, 6),  # trains to its end by default
        (0.0, -100.0, True, SUPPORT, {SUPPORT: 4, CHANCE: 4}, 4),  # stop_on_collapse: ends where it fired
        # (density on a real run: test_dense_at_init_does_not_trip_during_the_warm_up)
    ],
)
@pytest.mark.slow  # it trains
def test_forced_collapse_is_a_result(
    tmp_path: Path,
    triples: list[dict],
    weight_scale: float,
    bias: float,
    stop: bool,
    reason: str,
    fired: dict,
    steps: int,
) -> None:
    folder = _head_variant(tiny_bert(tmp_path), tmp_path / "head", weight_scale, bias)
    overrides = {**FORCED, "stop_on_collapse": stop}
    record = train_splade(folder, triples, load_recipe("smoke"), tmp_path / "run", progress=False, overrides=overrides)
    step = min(fired.values())
    assert (record["outcome"], record["outcome_reason"], record["outcome_step"]) == (COLLAPSED, reason, step)
    assert (record["triggers"], record["steps"], record["stopped_early"]) == (fired, steps, steps < 6)
    rows = _csv(tmp_path / "run" / "telemetry.csv")
    assert [int(r["step"]) for r in rows] == list(range(steps + 1))  # step 0: the dev batch before training
    events = {int(r["step"]): r["event"] for r in rows if r["event"]}
    assert events == {step: ";".join(t for t in (NON_FINITE, DENSE, SUPPORT, CHANCE) if t in fired)}
    if reason != NON_FINITE:
        assert (record["triggers_armed_step"], float(rows[3]["lambda_q"])) == (3, 1e-3)  # smoke's λ, final from step 3
    assert AutoModelForMaskedLM.from_pretrained(tmp_path / "run" / "model").config.vocab_size == 30522
    assert not (tmp_path / "run" / "checkpoints").exists()


@pytest.mark.slow  # it trains
def test_dense_at_init_does_not_trip_during_the_warm_up(tmp_path: Path, triples: list[dict]) -> None:
    """A random ModernBERT (vocabulary 50368, as ModernBERT / Ettin) indexes about 46k terms per vector
    from the start: a density trigger armed during the warm-up would have fired at step 2. Armed
    after it (λ final from step 4 of 6), it fires at step 5, the second armed row still that dense."""
    init = tiny_modernbert(tmp_path)
    overrides = {**FORCED, "lambda_warmup_ratio": 0.5, "dev_queries": 0}
    record = train_splade(init, triples, load_recipe("smoke"), tmp_path / "run", progress=False, overrides=overrides)
    rows = _csv(tmp_path / "run" / "telemetry.csv")
    warm = [r for r in rows if float(r["lambda_q"]) < 1e-3]
    assert [int(r["step"]) for r in warm] == [1, 2, 3]  # int(6 · 0.5) = 3 warm-up steps
    assert all(float(r["nnz_d"]) > 0.5 * 50368 for r in rows)  # dense on every row, the warm-up's included
    assert all(r["event"] == "" for r in warm)
    assert (record["triggers_armed_step"], record["outcome"], record["outcome_reason"], record["outcome_step"]) == (
        4,
        COLLAPSED,
        DENSE,
        5,
    )
    assert record["steps"] == 6 and not record["stopped_early"]  # a triggered run trains to its end


@pytest.fixture(scope="module")
def scifact_train() -> list[dict[str, str]]:
    """The smoke recipe's data as its triples stage would give it, with a random negative (seeded)
    in place of the BM25 one: one triple per judged (query, relevant doc) pair of SciFact train, in
    qrels order (919 triples of 809 queries)."""
    import ir_datasets

    ds = ir_datasets.load("beir/scifact/train")
    queries = {q.query_id: q.text for q in ds.queries_iter()}
    store = ds.docs_store()
    doc_ids = sorted(d.doc_id for d in ds.docs_iter())
    rng = random.Random(0)
    out = []
    for qrel in ds.qrels_iter():
        if qrel.relevance > 0:
            pos, neg = store.get(qrel.doc_id), store.get(rng.choice(doc_ids))
            out.append(
                {
                    "query": queries[qrel.query_id],
                    "positive": f"{pos.title} {pos.text}",
                    "negative": f"{neg.title} {neg.text}",
                }
            )
    assert len(out) == 919
    return out


@pytest.mark.slow  # it trains
@pytest.mark.parametrize("factor", [16.0, 1.0])
def test_rescaled_head_x16_is_flagged_and_x1_stays_ok(tmp_path: Path, scifact_train: list[dict], factor: float) -> None:
    """The real bert-tiny, its MLM head × 16 by head-norm (γ, β, bias) or × 1, trained by the smoke recipe as
    published (26 steps of 32 after 64 queries are held out; λ final from step 10).

    ×16 degenerates: its query vectors fall to about 3 indexed terms and, from step 14 on, over 10 %
    of the queries keep at most 2 (39 % at step 18), so degenerate support fires at step 18 (3 rows
    in a row). ``stop_on_collapse`` ends that run there: the cheapest faithful setting, since the
    rows before the trigger are those of the full run (the recipe's λ warm-up and learning-rate
    schedule depend on max_steps, so a shorter max_steps would not be the same run). ×1 runs all 26
    steps with about 30 terms per query, no query below 3 and its dev MRR@10 rising (0.72 → 0.76).
    Collapse is seed- and order-sensitive: the same ×16 run on these triples sorted by (query id,
    doc id) ended at 8 terms per query, unflagged; this test shows that a degenerate run is flagged
    and a healthy one is not."""
    from benchmark.model.rescale import Rescale
    from benchmark.stages.backbone import prepare_backbone

    prepare_backbone(
        "bert-tiny",
        Rescale("factor", factor=factor, method="head-norm") if factor != 1 else Rescale(),
        tmp_path / "model",
    )
    record = train_splade(
        tmp_path / "model",
        scifact_train,
        load_recipe("smoke"),
        tmp_path / "run",
        progress=False,
        overrides={"stop_on_collapse": True},
    )
    rows = _csv(tmp_path / "run" / "telemetry.csv")[1:]
    assert (record["examples"], record["dev_queries"], record["max_steps"], record["triggers_armed_step"]) == (
        843,
        64,
        26,
        10,
    )
    if factor == 16:
        assert (record["outcome"], record["outcome_reason"], record["stopped_early"]) == (COLLAPSED, SUPPORT, True)
        # the firing step may move by a logging step or two with another CPU's float summation
        # order; it needs 3 armed rows (steps 10, 12, 14 at the earliest)
        assert 14 <= record["outcome_step"] == record["steps"] <= 24
        # the rule that fired: at least 5 % of the batch's queries with ≤ 2 indexed terms (measured 11 %
        # at step 18); queries near 5 terms (measured 4.98), against ~30 for ×1 below
        assert float(rows[-1]["low_support_q"]) >= 0.05 and float(rows[-1]["nnz_q"]) < 10
    else:
        assert (record["outcome"], record["triggers"], record["steps"], record["stopped_early"]) == (OK, {}, 26, False)
        assert max(float(r["low_support_q"]) for r in rows) == 0.0 and float(rows[-1]["nnz_q"]) > 20
        assert record["dev_mrr_final"] > record["dev_mrr_initial"]


@pytest.mark.slow  # it trains
def test_inverted_labels_degrade_the_held_out_ranking(tmp_path: Path) -> None:
    """The real bert-tiny trained to rank a random document above the relevant one, except for the
    16 held-out dev queries, whose triples are right: its dev MRR@10 falls from 0.70 to 0 in 8 steps
    (one epoch of 64 triples). Its queries shrink as well (about 2 terms at the end): with the
    triggers armed this run would be ``collapsed``; they are kept out of the way here (patience
    above the run's 5 rows) so that the held-out rule decides alone: ``degraded``, at the last
    step, with the drop and its standard error in the record and the event on the last row."""
    import ir_datasets

    ds = ir_datasets.load("beir/scifact/train")
    queries = {q.query_id: q.text for q in ds.queries_iter()}
    store = ds.docs_store()
    doc_ids = sorted(d.doc_id for d in ds.docs_iter())
    rng, examples, seen = random.Random(0), [], set()
    for qrel in ds.qrels_iter():
        if qrel.relevance > 0 and qrel.query_id not in seen:
            seen.add(qrel.query_id)
            pos, neg = store.get(qrel.doc_id), store.get(rng.choice(doc_ids))
            examples.append(
                {
                    "query": queries[qrel.query_id],
                    "positive": f"{pos.title} {pos.text}",
                    "negative": f"{neg.title} {neg.text}",
                }
            )
        if len(examples) == 16 + 64:
            break
    inverted = examples[:16] + [{**e, "positive": e["negative"], "negative": e["positive"]} for e in examples[16:]]
    overrides = {
        "batch_size": 8,
        "query_max_length": 16,
        "doc_max_length": 32,
        "max_steps": 8,
        "logging_steps": 2,
        "dev_steps": 4,
        "dev_queries": 16,
        "save_steps": 100,
        "trigger_patience": 100,
        "lambda_q": 0.0,
        "lambda_d": 0.0,
    }
    from helpers.tiny_models import BERT_TINY

    record = train_splade(
        BERT_TINY, inverted, load_recipe("smoke"), tmp_path / "run", progress=False, overrides=overrides
    )
    assert (record["outcome"], record["outcome_reason"], record["outcome_step"], record["triggers"]) == (
        DEGRADED,
        DEV_DROP,
        8,
        {},
    )
    drop = record["dev_mrr_initial"] - record["dev_mrr_final"]
    assert drop > record["dev_mrr_drop_se"] > 0
    assert record["outcome_detail"].startswith(
        f"held-out dev MRR@10 fell from {record['dev_mrr_initial']:.4f} at step 0"
    )
    rows = _csv(tmp_path / "run" / "telemetry.csv")
    assert [r["event"] for r in rows][-1] == DEV_DROP and float(rows[-1]["dev_mrr"]) == record["dev_mrr_final"]
    # the per-query values the report pairs across runs: the published (last) checkpoint's, by query key
    assert (record["checkpoint_step"], record["vocab_size"]) == (8, 30522)
    assert len(record["dev_query_keys"]) == len(set(record["dev_query_keys"])) == len(record["dev_rr_published"]) == 16
    assert sum(record["dev_rr_published"]) / 16 == record["dev_mrr_published"] == record["dev_mrr_final"]
    assert sum(record["dev_rr_initial"]) / 16 == pytest.approx(record["dev_mrr_initial"], rel=1e-12)
