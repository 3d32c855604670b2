"""The outcome of a training run: ``ok``, ``degraded`` or ``collapsed``, each with a reason and a step.

The rules read the telemetry rows (one per logging step, see ``telemetry.COLUMNS``), so a resumed run
replays them from its checkpoint's log history and reaches the same verdict.

* **Non-finite** loss or representation: ``collapsed`` at that optimiser step; training stops at once.
* Every other trigger is **armed** only once λ_q and λ_d have reached their final values (after the
  FLOPS warm-up): a run that is dense at initialisation must get the chance to be regularised. It
  fires after ``patience`` consecutive armed logging steps on which its condition holds:

  - ``dense``: mean indexed terms per query or document vector above ``dense_fraction`` of the vocabulary;
  - ``degenerate_support``: at least ``SUPPORT_QUERY_FRACTION`` of the queries keep at most
    ``SUPPORT_MAX_TERMS`` indexed terms, or different queries of a batch share their terms (mean
    pairwise cosine above ``COSINE_MAX``);
  - ``chance_ranking``: InfoNCE no better than chance (in-batch loss at least ``CHANCE_FRACTION`` of
    ln(candidates), the loss of a model that scores every candidate alike), or for MarginMSE the
    student's margins explain none of the teacher's (R² ≤ 0).

  Terms are counted as the index sees them: impact ≥ 1 after quantisation (``benchmark.splade.impacts.quantise``).
* A collapse trigger that fired during training but whose condition then held on none of the
  ``patience`` armed rows up to the **published** checkpoint (the same number of rows in a row as
  firing needs, all after the firing step) is kept as an event (``recovered``: the step it fired and
  the step published) and is not the outcome: the model that is encoded and scored is judged. A
  non-finite step stops training, so it stays ``collapsed``. A run that collapsed after the published
  (best) checkpoint did not recover: it is ``collapsed``, and the detail names the checkpoint kept.
* ``degraded``: not collapsed, and the held-out dev MRR@10 of the **published** checkpoint (the last
  step, or the best dev step under ``checkpoint = "best"``) is below its step-0 value by a one-sided
  paired t-test at ``DEGRADED_FPR``: the drop exceeds t(1 − DEGRADED_FPR, n − 1) standard errors, so an
  unchanged run is marked degraded with probability DEGRADED_FPR (one standard error, the former
  threshold, marks about 16 % of them). This compares a run with its own start only; the
  comparisons with the same backbone's baseline and with the BERT reference need other runs' dev
  values and are judged where every run is known (``benchmark.report.judgements``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from benchmark.training.outcomes import COLLAPSED, DEGRADED, OK

NON_FINITE = "non_finite"
DENSE = "dense"
SUPPORT = "degenerate_support"
CHANCE = "chance_ranking"
DEV_DROP = "dev_mrr_drop"
#: collapse triggers, in the order a tie (two firing on the same row) is reported: the
#: representation-level causes before the ranking symptom they explain
TRIGGERS = (NON_FINITE, DENSE, SUPPORT, CHANCE)

#: chance-level InfoNCE: loss ≥ 0.95 · ln(in-batch candidates)
CHANCE_FRACTION = 0.95
#: degenerate support: ≥ 5 % of queries with ≤ 2 indexed terms, or mean query-query cosine > 0.9
SUPPORT_MAX_TERMS = 2
SUPPORT_QUERY_FRACTION = 0.05
COSINE_MAX = 0.9
#: false-positive rate of ``degraded``: how often a run whose held-out dev RR@10 did not change is marked
DEGRADED_FPR = 0.05


def _finite(*values: Any) -> bool:
    return all(isinstance(v, (int, float)) and math.isfinite(v) for v in values if v is not None)


@dataclass
class OutcomeDetector:
    """Collapse triggers over telemetry rows (see module doc). ``candidates``: in-batch candidates per
    query (InfoNCE: positives + negatives of the global batch); ``lambda_q``/``lambda_d``: final λ."""

    loss: str
    vocab_size: int
    candidates: int
    dense_fraction: float
    patience: int
    lambda_q: float
    lambda_d: float
    runs: dict[str, int] = field(default_factory=dict)  # consecutive armed rows per trigger
    fired: dict[str, int] = field(default_factory=dict)  # trigger → first step it fired
    details: dict[str, str] = field(default_factory=dict)
    armed_step: int | None = None  # first armed logging step
    non_finite_step: int | None = None

    @property
    def reason(self) -> str | None:
        """The first trigger that fired (earliest step; ties in ``TRIGGERS`` order), else None."""
        if not self.fired:
            return None
        return min(self.fired, key=lambda t: (self.fired[t], TRIGGERS.index(t)))

    @property
    def step(self) -> int | None:
        return self.fired[self.reason] if self.reason else None

    @property
    def detail(self) -> str | None:
        return self.details[self.reason] if self.reason else None

    def _fire(self, trigger: str, step: int, detail: str) -> None:
        if trigger not in self.fired:
            self.fired[trigger] = step
            self.details[trigger] = detail

    def check_finite(self, step: int, finite: bool) -> bool:
        """Per optimiser step. Returns True when training must stop now (a non-finite step)."""
        if not finite:
            self.non_finite_step = step if self.non_finite_step is None else self.non_finite_step
            self._fire(NON_FINITE, step, f"non-finite loss or representation at step {step}")
        return not finite

    def conditions(self, row: dict[str, Any]) -> dict[str, str]:
        """The trigger conditions that hold on ``row`` (trigger → why), armed or not."""
        held: dict[str, str] = {}
        nnz_q, nnz_d = row.get("nnz_q"), row.get("nnz_d")
        if nnz_q is not None and nnz_d is not None:
            density = max(nnz_q, nnz_d) / self.vocab_size
            if density > self.dense_fraction:
                held[DENSE] = (
                    f"{max(nnz_q, nnz_d):.1f} indexed terms per vector (query {nnz_q:.1f}, document "
                    f"{nnz_d:.1f}) > {self.dense_fraction:g} of the {self.vocab_size} vocabulary"
                )
        low, cosine = row.get("low_support_q"), row.get("query_cosine")
        if low is not None and low >= SUPPORT_QUERY_FRACTION:
            held[SUPPORT] = (
                f"{100 * low:.1f}% of queries have <= {SUPPORT_MAX_TERMS} indexed terms "
                f"(>= {100 * SUPPORT_QUERY_FRACTION:g}%)"
            )
        elif cosine is not None and cosine > COSINE_MAX:
            held[SUPPORT] = f"different queries share their terms: mean pairwise cosine {cosine:.3f} > {COSINE_MAX:g}"
        if self.loss == "infonce":
            loss, chance = row.get("ranking_loss"), math.log(self.candidates)
            if loss is not None and loss >= CHANCE_FRACTION * chance:
                held[CHANCE] = (
                    f"in-batch InfoNCE {loss:.3f} >= {CHANCE_FRACTION:g} x ln({self.candidates}) = "
                    f"{CHANCE_FRACTION * chance:.3f} (chance level)"
                )
        else:
            r2 = row.get("r2")
            if r2 is not None and r2 <= 0:
                held[CHANCE] = f"student margins explain none of the teacher margins: R² = {r2:.3f} <= 0"
        return held

    def armed(self, row: dict[str, Any]) -> bool:
        return row.get("lambda_q") == self.lambda_q and row.get("lambda_d") == self.lambda_d

    def check_row(self, row: dict[str, Any]) -> list[str]:
        """Per logging step, on a telemetry row. Returns the triggers that fired on this row."""
        step = int(row["step"])
        before = set(self.fired)
        if not _finite(row.get("loss"), row.get("ranking_loss"), row.get("nnz_q"), row.get("nnz_d")):
            self._fire(NON_FINITE, step, f"non-finite loss at step {step} (loss={row.get('loss')})")
        held = self.conditions(row)
        armed = self.armed(row)
        if armed and self.armed_step is None:
            self.armed_step = step
        for trigger in TRIGGERS[1:]:
            self.runs[trigger] = self.runs.get(trigger, 0) + 1 if armed and trigger in held else 0
            if self.runs[trigger] >= self.patience:
                self._fire(trigger, step, f"{held[trigger]} for {self.runs[trigger]} logging steps (step {step})")
        return [t for t in TRIGGERS if t in self.fired and t not in before]

    def replay(self, rows: Iterable[dict[str, Any]]) -> None:
        """Rebuild the state from earlier rows (on resume)."""
        for row in rows:
            if "ranking_loss" in row:
                self.check_row(row)


@dataclass(frozen=True)
class DevDrop:
    """The held-out dev MRR@10 at step 0 and at the end, per query, and whether the run degraded."""

    initial: float
    final: float
    se: float  # standard error of the mean per-query drop (paired over the same queries)
    queries: int

    @property
    def drop(self) -> float:
        return self.initial - self.final

    @property
    def threshold(self) -> float:
        """The drop beyond which the run is degraded: t(1 − DEGRADED_FPR, n − 1) standard errors."""
        from scipy.stats import t

        return float(t.ppf(1.0 - DEGRADED_FPR, self.queries - 1)) * self.se

    @property
    def degraded(self) -> bool:
        return self.drop > self.threshold

    @classmethod
    def of(cls, initial: Sequence[float], final: Sequence[float]) -> DevDrop:
        """From per-query reciprocal ranks at step 0 and at the end (same queries, same order)."""
        n = len(initial)
        if n != len(final) or n < 2:
            raise ValueError(f"need the same >= 2 dev queries at both ends, got {n} and {len(final)}")
        diffs = [a - b for a, b in zip(initial, final)]
        mean = sum(diffs) / n
        var = sum((d - mean) ** 2 for d in diffs) / (n - 1)
        return cls(sum(initial) / n, sum(final) / n, math.sqrt(var / n), n)


def published_drop(dev_rows: Sequence[dict[str, Any]], step: int) -> DevDrop | None:
    """The drop from step 0 to ``step`` (the published checkpoint's), from the rows that hold per-query
    dev values (``dev_rr``); None when either end was not evaluated."""
    by_step = {int(r["step"]): r["dev_rr"] for r in dev_rows if "dev_rr" in r}
    if 0 not in by_step or step not in by_step or step == 0:
        return None
    return DevDrop.of(by_step[0], by_step[step])


def recovered(detector: OutcomeDetector, published_rows: Sequence[dict[str, Any]], published_step: int) -> bool:
    """Whether a fired collapse trigger no longer holds: the last ``patience`` armed rows at or before the
    published step all come after the firing step and hold no trigger condition (never for a non-finite
    step, which stops training, nor for a published checkpoint that precedes the firing)."""
    if detector.reason is None or NON_FINITE in detector.fired or detector.step is None:
        return False
    if published_step < detector.step:
        return False
    armed = [r for r in published_rows if int(r["step"]) <= published_step and detector.armed(r)]
    last = armed[-detector.patience :]
    return (
        len(last) == detector.patience
        and all(int(r["step"]) > detector.step for r in last)
        and not any(set(detector.conditions(r)) & set(TRIGGERS) for r in last)
    )


def outcome(
    detector: OutcomeDetector,
    dev: DevDrop | None,
    published_step: int,
    last_step: int | None = None,
    published_rows: Sequence[dict[str, Any]] = (),
) -> tuple[str, str | None, int | None, str | None]:
    """(outcome, reason, step, detail) of a run whose published checkpoint is ``published_step``
    (``last_step``: where it ended, when that differs; ``published_rows``: the telemetry rows up to it);
    ``dev`` None: no held-out signal. A degraded run's step is the published one: the drop is measured on
    the model that is encoded and scored."""
    event = ""
    if detector.reason is not None:
        if recovered(detector, published_rows, published_step):
            event = (
                f"; recovered: {detector.reason} fired at step {detector.step} ({detector.detail}) and held on "
                f"none of the {detector.patience} armed logging steps up to the published step {published_step}"
            )
        else:
            detail = detector.detail or ""
            if detector.step is not None and published_step < detector.step:
                detail += (
                    f"; collapsed after the published best checkpoint: the model kept, encoded and scored is step "
                    f"{published_step}'s, before the collapse"
                )
            return COLLAPSED, detector.reason, detector.step, detail
    if dev is not None and dev.degraded:
        where = (
            "at the end"
            if last_step in (None, published_step)
            else f"at step {published_step} (the published best checkpoint; training ended at step {last_step})"
        )
        detail = (
            f"held-out dev MRR@10 fell from {dev.initial:.4f} at step 0 to {dev.final:.4f} {where}: a drop of "
            f"{dev.drop:.4f} > t({1 - DEGRADED_FPR:g}, {dev.queries - 1}) x its standard error {dev.se:.4f} = "
            f"{dev.threshold:.4f}"
            f" (one-sided paired t-test over {dev.queries} queries; {100 * DEGRADED_FPR:g} % of unchanged runs"
            f" are marked){event}"
        )
        return DEGRADED, DEV_DROP, published_step, detail
    if event:
        return OK, None, None, event[2:]
    return OK, None, None, None
