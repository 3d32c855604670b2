"""The measurement that picks a screen: all give the same vectors, so the fastest one here wins.

At the start of a large enough encode, every screen runs on the first batch's first block against a
spread sample of the vocabulary, timed the way the encode runs it (all workers at once), best of a
few interleaved rounds; a screen whose measured error exceeds its proven bound on that sample is
rejected (a kernel that accumulates in low precision, say). The fastest one encodes the rest.
"""

from __future__ import annotations

import math
import time
from typing import TYPE_CHECKING, Any

import numpy as np

from benchmark.splade.pooling import _layout, _screen_group
from benchmark.splade.screens import SCREENS, _Batch, _Screen, _Terms

if TYPE_CHECKING:
    import torch

#: Screens are measured only when the encode has at least this many token rows (about 256 documents
#: of 256 tokens, a second or two): below it the measurement (~0.1–0.5 s) costs more than it can save.
PROBE_MIN_ROWS = 65536
#: Vocabulary columns in the measurement sample (evenly spread: vocabularies are sorted by kind).
PROBE_COLS = 4096
#: Interleaved timing rounds per screen (the minimum is kept: other processes only add time); a
#: screen slower than this factor times the best after one round gets no more rounds.
PROBE_ROUNDS = 3
PROBE_GIVE_UP = 4.0
#: The check of each screen's error against its bound: this many token rows × vocabulary columns.
PROBE_CHECK_ROWS, PROBE_CHECK_COLS = 256, 1024


def _sync(device: Any) -> float:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter()


def _measured_error(
    screen: _Screen, batch: _Batch, sample: _Terms, docs: slice, k: int, unit32: float, exact: torch.Tensor
) -> float:
    """max over ``docs`` × ``sample`` of |screen logit − float64 logit| / proven bound (≤ 1 when the bound holds)."""
    import torch

    bp, tp = batch.screen(screen), sample.screen(screen)
    x = screen.inputs(bp)[docs]
    n_docs, length = x.shape[:2]
    raw = screen.block(x.reshape(n_docs * length, -1), screen.weight(tp), None)
    doc_scale, term_scale = screen.scales(bp, tp, docs)
    if isinstance(doc_scale, torch.Tensor):
        doc_scale = doc_scale.repeat_interleave(length, dim=0)
    approx = raw.double() * doc_scale * term_scale
    if screen.name == "int8":
        bp = {**bp, "token_scale": bp["scale"][docs].repeat_interleave(length)}
        per_token = bp["l1"][docs].reshape(-1)
    else:
        per_token = batch.centred[docs].reshape(n_docs * length, -1).double().norm(dim=1)
    bound = screen.slack(bp, tp, sample, batch, docs, k, unit32, token_norms=per_token)
    return float(((approx - exact).abs() / bound.clamp(min=1e-300)).max())


def _choose(batch: _Batch, terms: _Terms, pool: Any, workers: int, unit32: float, names: list[str]) -> dict[str, Any]:
    """Time every screen on the first group of ``batch`` × a vocabulary sample; the fastest valid one wins.

    On CPU each worker times its own run in thread CPU time, which other processes on a shared
    machine do not inflate the way they inflate wall time; on CUDA, wall time between syncs. Every
    screen must give the probe the same values as the others (it cannot differ if the bounds hold)
    and an error within its proven bound on a smaller check set; failing either, it is rejected.
    """
    import torch

    device = batch.hidden.device
    cpu = device.type == "cpu"
    n_docs, length, k = batch.hidden.shape
    sample = terms.sample(PROBE_COLS)
    docs_per_group, cols, elements = _layout(n_docs, length, sample.weight.shape[0], device)
    docs = slice(0, min(docs_per_group, n_docs))
    check_docs = slice(0, max(1, min(docs.stop, PROBE_CHECK_ROWS // max(length, 1))))
    check = terms.sample(PROBE_CHECK_COLS)
    runs = workers if pool is not None else 1
    rejected: dict[str, str] = {}
    candidates: dict[str, float] = {}
    reference: list[torch.Tensor] = []
    start = time.perf_counter()

    def run(screen: _Screen) -> float:
        """Seconds of one group's work (CPU: median over the workers running it at once)."""
        results: list[tuple[torch.Tensor, int, float]] = []

        def one(_: int, single_threaded: bool) -> None:
            with torch.inference_mode():
                if single_threaded:
                    torch.set_num_threads(1)
                t = time.thread_time()
                values, n = _screen_group(screen, batch, sample, docs, cols, k, unit32, elements)
                results.append((values, n, time.thread_time() - t))

        t0 = _sync(device)
        if runs > 1:
            threads = torch.get_num_threads()
            try:
                list(pool.map(one, range(runs), [True] * runs))
            finally:
                torch.set_num_threads(threads)
        else:
            one(0, False)
        wall = _sync(device) - t0
        values, n, _ = results[0]
        candidates[screen.name] = n / max(1, values.numel())
        if not reference:
            reference.append(values)
        elif not torch.equal(values, reference[0]):
            raise ArithmeticError("vectors differ from the other screens' on the probe")
        return float(np.median([r[2] for r in results])) if cpu else wall

    live = []
    with torch.inference_mode():
        exact = batch.centred[check_docs].reshape(-1, k).double() @ check.weight.double().T
        for name in names:
            screen = SCREENS[name]
            reason = screen.usable(device, k)
            if reason is None:
                try:
                    ratio = _measured_error(screen, batch, check, check_docs, k, unit32, exact)
                    if not ratio <= 1.0:
                        reason = f"measured error {ratio:.2f}× its proven bound"
                except Exception as exc:  # a kernel this build lacks: that screen is not a candidate here
                    reason = f"{type(exc).__name__}: {exc}"[:200]
            if reason is None:
                live.append(screen)
            else:
                rejected[name] = reason
    best: dict[str, float] = {}
    for rnd in range(PROBE_ROUNDS):  # interleaved: a burst of load hits every screen alike
        for screen in list(live):
            try:
                best[screen.name] = min(best.get(screen.name, math.inf), run(screen))
            except Exception as exc:
                rejected[screen.name] = f"{type(exc).__name__}: {exc}"[:200]
                best.pop(screen.name, None)
                live.remove(screen)
        if rnd == 0 and best:
            fastest = min(best.values())
            live = [s for s in live if best[s.name] <= PROBE_GIVE_UP * fastest]
    per_doc = terms.weight.shape[0] / sample.weight.shape[0] / (docs.stop * (runs if cpu else 1))
    timings = {name: t * per_doc for name, t in best.items()}
    chosen = min(timings, key=timings.__getitem__) if timings else "float32"
    return {
        "path": chosen,
        "measured": True,
        "timings": timings,
        "rejected": rejected,
        "probe_candidates_fraction": {n: candidates[n] for n in timings},
        "probe_s": time.perf_counter() - start,
    }


def has_fast_bf16(device: Any) -> bool:
    """Whether this CPU has bfloat16 dot-product instructions (else a bf16 matmul is slower than float32).

    Only a hint for small encodes, which are not worth measuring; every path gives the same vectors.
    """
    import torch

    if device.type != "cpu":
        return False
    probes = ("_is_avx512_bf16_supported", "_is_amx_tile_supported")
    return any(getattr(torch.cpu, name, lambda: False)() for name in probes)


def _default_path(device: Any) -> str:
    """The path of an encode too small to measure (any path gives the same vectors)."""
    return "bf16" if device.type == "cuda" or has_fast_bf16(device) else "float32"


def _start_path(path: str | None, rows: int, device: Any) -> str | None:
    """The screen an encode starts with: ``path`` if given, else a default below ``PROBE_MIN_ROWS``
    token rows, else None (measured on the first batch)."""
    if path is None and rows < PROBE_MIN_ROWS:
        return _default_path(device)
    return path
