"""SPLADE encoding: ``w_j = max_t log(1 + relu(logit_{t,j}))`` over the attention-masked tokens.

Why not ``SparseEncoder.encode_document``: it materialises the [batch, length, vocab] logits and
runs mask/relu/log1p/max as separate passes over them (≈1 GB per batch of 32×256 on a 30k
vocabulary, ≈3 GB peak RSS). Here the same vectors come from

* length-sorted batches (little padding; input order restored on return);
* the model's own forward up to the MLM decoder, captured by a pre-hook that stops the forward
  there, so the [B, L, V] logits are never built; on CPU in sub-batches of ``BODY_DOCS`` documents
  on single-threaded workers (no OpenMP barriers; hidden states independent of the thread count);
* padding positions overwritten with the document's first token, so they never change a max and
  no mask pass is needed. log1p∘relu is monotone, so ``max_t log1p(relu(x_t)) = log1p(relu(max_t x_t))``:
  the transcendental runs on the pooled maxima only;
* a **screen** over the vocabulary, then an **exact recompute** of the candidates it leaves.

Screen. The decoder runs in cache-sized blocks (a few documents × a vocabulary slice), each reduced
by ``amax`` over tokens at once, in one of several arithmetics (``SCREENS``: float32, bf16, fp16,
int8). Each screen has a proven error bound: its logit is within ``bound(t, j)`` of the exact
``h_t·w_j`` (rounding of its inputs, float32 or int32 accumulation, rounding of its output; see
``_Screen``). The hidden states are centred on the document's mean μ first (``h·w = (h − μ)·w +
μ·w``, the second term computed once per document): the bound scales with ‖h − μ‖, about half of ‖h‖.
A term whose screened maximum plus its bound plus its bias is ≤ 0 has weight 0 exactly; the others
(about 1 % of a trained model's vocabulary) are candidates.

Exact recompute (``_canonical``). Each candidate gets ``fl32(fl64(max_t h_t·w_j + b_j))``: the
exact real number (float32 products are exact in float64) rounded once to float64 and then to
float32. It is computed from a float64 dot product of the few tokens that can hold the maximum,
whose error bound (any summation order) encloses the exact value; when the enclosure rounds to one
float32 the value is known, and otherwise (a few per million) it is summed exactly (``math.fsum``).
So the value depends on the hidden states, the weights and the bias only: not on the screen, the
block shapes, the number of candidates or documents in the call. Every screen publishes the same
vectors, bit for bit, and the screen is a matter of speed.

Choice by measurement (``_choose``). At the start of a large enough encode, every screen runs on the
first batch's first block against a spread sample of the vocabulary, timed the way the encode runs
it (all workers at once), best of a few interleaved rounds; a screen whose measured error exceeds
its proven bound on that sample is rejected (a kernel that accumulates in low precision, say). The
fastest one encodes the rest. ``info`` receives the choice and the timings.

Non-zeros are extracted on the device, so a GPU sends ~200 (id, value) pairs per document to the
host instead of a dense 30k row; on CUDA batch widths are padded to a multiple of 16
(``WIDTH_MULTIPLE``) so that a length-sorted corpus reuses a few kernel shapes. Weights are
``log1p`` of the values in float64 on the host, rounded to float32 (position-independent, unlike a
vectorised float32 kernel with a scalar tail).

Quantisation (``quantise``) is separate: Anserini's impact indexing truncates float weights, so the
pipeline writes integer impacts ``round(w · QUANT_SCALE)`` itself.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from benchmark.errors import BenchmarkError
from benchmark.registry import Registry

if TYPE_CHECKING:
    import torch

QUANT_SCALE = 100

#: Compute precision → autocast dtype name (None: the model's own dtype, no autocast).
PRECISIONS: Registry[str | None] = Registry("precision", fix="Pass precision='float32' or 'bfloat16'")
PRECISIONS.register("float32", None)
PRECISIONS.register("bfloat16", "bfloat16")

#: Decoder blocks: about this many token rows per matmul (several short documents, or one long
#: one), and this many logits per block (4 MiB in float32, cache-sized; measured fastest on CPU).
BLOCK_ROWS = 512
BLOCK_ELEMENTS = 1 << 20
#: On CUDA one block holds the whole batch and this many times more logits.
CUDA_BLOCK_FACTOR = 64
#: Device type → batch widths rounded up to a multiple of this many tokens. On CUDA: tensor-core
#: tiles, and a length-sorted corpus then reuses ~max_length/16 kernel shapes instead of one per
#: length (each new shape pays cuBLAS/SDPA warm-up). On CPU padding is pure extra work.
WIDTH_MULTIPLE = {"cuda": 16}
#: Documents per forward on CPU with several threads (see ``_forward``); a constant, so that the
#: hidden states depend on the documents' order only.
BODY_DOCS = 8
#: Texts tokenised at a time (a fast tokenizer's output for a whole corpus costs ~70 KB per text).
TOKENIZE_CHUNK = 256

#: Unit roundoffs: float32, float64, bfloat16, float16 (round to nearest: |fl(x) − x| ≤ u·|x|).
U32, U64, UBF16, UFP16 = 2.0**-24, 2.0**-53, 2.0**-8, 2.0**-11
#: Every proven bound is used times this: room for the rounding of the bound's own arithmetic (norms
#: and products in float64, ≤ 1e-12 relative; the float32 parts have explicit terms) with a wide berth.
SAFETY = 1.25
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


def _gamma(n: int, u: float) -> float:
    """Higham's γ_n: a length-n dot product, in any summation order, is within γ_n·Σ|x_i·y_i| of exact."""
    return n * u / (1 - n * u)


def _dot_coef(k: int, u_in: float, u_out: float) -> float:
    """|computed − exact| ≤ coef·Σ|h_i·w_i| ≤ coef·‖h‖·‖w‖ for a length-k dot product whose inputs are
    rounded to unit ``u_in``, accumulated in float32 (or better) and rounded to ``u_out`` on output.

    Inputs: (h+δh)(w+δw) − hw ≤ (2u + u²)|h||w|; accumulation γ_k of the rounded products; output u_out
    of a result bounded by (1+u)²(1+γ_k)Σ|h w|.
    """
    g = _gamma(k, U32)
    return (2 * u_in + u_in * u_in) + g * (1 + u_in) ** 2 + u_out * (1 + u_in) ** 2 * (1 + g)


def _float32_matmul_unit(device: Any) -> float:
    """Input rounding of a float32 matmul here: 0 when it is exact float32, else bf16's unit.

    ``torch.set_float32_matmul_precision('high'/'medium')`` lets CUDA use TF32 (u = 2⁻¹¹) and oneDNN
    bf16 (u = 2⁻⁸) for float32 matmuls; the bf16 unit bounds both.
    """
    import torch

    exact = torch.get_float32_matmul_precision() == "highest"
    if device.type == "cuda":
        exact = exact and not torch.backends.cuda.matmul.allow_tf32
    return 0.0 if exact else UBF16


@dataclass
class _Terms:
    """Decoder rows for some vocabulary ids (all of them, or the measurement's sample)."""

    weight: torch.Tensor  # [V', K] float32
    bias: torch.Tensor  # [V'] float32
    norms: torch.Tensor  # [V'] float64: ‖w_j‖₂
    prepared: dict[str, Any] = field(default_factory=dict)  # screen name → its copy of the weights

    @classmethod
    def of(cls, weight: torch.Tensor, bias: torch.Tensor | None) -> _Terms:
        import torch

        bias = torch.zeros(weight.shape[0], device=weight.device) if bias is None else bias.float()
        return cls(weight, bias, weight.double().norm(dim=1))

    @property
    def abs_bias(self) -> torch.Tensor:
        """U32·|b_j| (float64): the rounding of adding the bias in float32."""
        if "abs_bias" not in self.prepared:
            self.prepared["abs_bias"] = U32 * self.bias.double().abs()
        return self.prepared["abs_bias"]

    def sample(self, n: int) -> _Terms:
        """``n`` rows spread evenly over the vocabulary."""
        import torch

        vocab = self.weight.shape[0]
        ids = torch.arange(min(n, vocab), device=self.weight.device) * vocab // min(n, vocab)
        return _Terms(self.weight[ids].contiguous(), self.bias[ids].contiguous(), self.norms[ids].contiguous())

    def screen(self, screen: _Screen) -> Any:
        if screen.name not in self.prepared:
            self.prepared[screen.name] = screen.prepare_terms(self)
        return self.prepared[screen.name]


@dataclass
class _Batch:
    """One forward batch's decoder inputs, centred per document."""

    hidden: torch.Tensor  # [B, L, K] float32; padding rows hold the document's first token
    centred: torch.Tensor  # [B, L, K] float32: fl(h − μ)
    mean: torch.Tensor  # [B, K] float32: μ, the mean of the document's tokens (any μ would be exact)
    spread: torch.Tensor  # [B] float64: max_t ‖h_t − μ‖
    mean_norm: torch.Tensor  # [B] float64: ‖μ‖
    prepared: dict[Any, Any] = field(default_factory=dict)  # screen name → its inputs; _Terms id → β

    @classmethod
    def of(cls, hidden: torch.Tensor, mask: torch.Tensor) -> _Batch:
        import torch

        keep = mask.unsqueeze(-1).bool()
        # Padding positions copy the first token: duplicates cannot change a max, so no mask pass.
        hidden = torch.where(keep, hidden, hidden[:, :1]).float().contiguous()
        count = mask.sum(1, keepdim=True).clamp(min=1).float()
        mean = (hidden * keep).sum(1) / count
        centred = (hidden - mean[:, None]).contiguous()
        return cls(hidden, centred, mean, centred.double().norm(dim=2).amax(dim=1), mean.double().norm(dim=1))

    def screen(self, screen: _Screen) -> Any:
        if screen.name not in self.prepared:
            self.prepared[screen.name] = screen.prepare_batch(self)
        return self.prepared[screen.name]

    def beta(self, terms: _Terms) -> torch.Tensor:
        """β = μ·w_j + b_j [B, V'] in float32, once per batch (a matmul that reads the decoder once)."""
        import torch

        key = ("beta", id(terms))
        if key not in self.prepared:
            self.prepared[key] = torch.addmm(terms.bias, self.mean, terms.weight.T)
        return self.prepared[key]


def _pow2_scale(largest: float, target_exp: int = 6) -> float:
    """A power of two s with s·largest ≤ 2^target_exp (exact to apply and to undo)."""
    if not largest > 0 or not math.isfinite(largest):
        return 1.0
    return 2.0 ** (target_exp - math.ceil(math.log2(largest)))


class _Screen:
    """One arithmetic for the screening matmul and its proven error bound.

    ``block`` gives ``raw`` with ``raw·doc_scale·term_scale ≈ (h_t − μ)·w_j``, and ``slack`` an
    upper bound on ``|raw·scales − (h_t − μ)·w_j|`` for every token of a document (per token when
    asked, for the measurement's check).
    """

    name = ""
    out_dtype = "float32"

    def usable(self, device: Any, k: int) -> str | None:
        """Why this screen cannot run here (``k``: the hidden size), or None."""
        return None

    def prepare_terms(self, terms: _Terms) -> Any:
        raise NotImplementedError

    def prepare_batch(self, batch: _Batch) -> Any:
        raise NotImplementedError

    def weight(self, tp: Any) -> torch.Tensor:
        return tp["weight"]

    def inputs(self, bp: Any) -> torch.Tensor:
        return bp["x"]

    def block(self, x: torch.Tensor, w: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
        import torch

        return torch.mm(x, w.T, out=out)

    def scales(self, bp: Any, tp: Any, docs: slice) -> tuple[torch.Tensor | float, torch.Tensor | float]:
        return 1.0, 1.0

    def slack(self, bp: Any, tp: Any, terms: _Terms, batch: _Batch, docs: slice, k: int, unit32: float,
              token_norms: torch.Tensor | None = None) -> torch.Tensor:
        raise NotImplementedError


class _FloatScreen(_Screen):
    """float32, bf16 or fp16 inputs, float32 accumulation, output in the input type.

    float32 accumulation: the oneDNN default ('strict' accumulation mode) for bf16 and f16, and
    PyTorch leaves it on for CPU matmuls (``allow_fp16_reduction_cpu`` is off); on CUDA ``encode``
    turns off cuBLAS's reduced-precision reductions while it runs (``_exact_reductions``). The
    measurement checks the bound on real data besides.
    fp16 range: inputs are scaled by powers of two (exact) so that every row norm is ≤ 2⁶, hence
    every input, partial sum and output ≤ 2¹² < 65504; underflow below 2⁻¹⁴ costs at most 2⁻²⁵ per
    element, an absolute term in the bound.
    """

    def __init__(self, name: str, dtype: str, unit: float | None, scaled: bool = False) -> None:
        self.name, self.out_dtype, self.unit, self.scaled = name, dtype, unit, scaled

    def coef(self, k: int, unit32: float) -> float:
        unit = unit32 if self.unit is None else self.unit
        return _dot_coef(k, unit, 0.0 if self.unit is None else unit)

    def prepare_terms(self, terms: _Terms) -> Any:
        import torch

        dtype = getattr(torch, self.out_dtype)
        scale = _pow2_scale(float(terms.norms.max())) if self.scaled else 1.0
        weight = terms.weight if scale == 1.0 else terms.weight * scale
        return {"weight": weight.to(dtype).contiguous(), "scale": scale}

    def prepare_batch(self, batch: _Batch) -> Any:
        import torch

        dtype = getattr(torch, self.out_dtype)
        scale = _pow2_scale(float(batch.spread.max())) if self.scaled else 1.0
        x = batch.centred if scale == 1.0 else batch.centred * scale
        return {"x": x.to(dtype).contiguous(), "scale": scale}

    def scales(self, bp: Any, tp: Any, docs: slice) -> tuple[float, float]:
        return 1.0 / bp["scale"], 1.0 / tp["scale"]

    def slack(self, bp: Any, tp: Any, terms: _Terms, batch: _Batch, docs: slice, k: int, unit32: float,
              token_norms: torch.Tensor | None = None) -> torch.Tensor:
        spread = batch.spread[docs] if token_norms is None else token_norms
        out = self.coef(k, unit32) * spread[:, None] * terms.norms[None, :]
        if self.unit is not None or unit32:  # a narrow type: subnormal inputs/outputs lose absolute precision
            tiny = 2.0**-25 if self.out_dtype == "float16" else 2.0**-120
            s_b, s_w = bp["scale"], tp["scale"]
            out = out + tiny * (math.sqrt(k) * (spread[:, None] * s_b + terms.norms[None, :] * s_w) + 1) / (s_b * s_w)
        return out


class _Int8Screen(_Screen):
    """int8 inputs with a scale per document (activations) and per term (weights), exact int32 dot products.

    With d = a(x + θ), w = c(q + φ), |θ|, |φ| ≤ ½ + 128u (rounding of the scaled value, then to an
    integer): d·w = a·c·(x·q) + a·c·(x·φ) + a·(θ·w), so the error is ≤ 0.501·a·(c·‖x‖₁ + ‖w‖₁).
    The int32 sums are exact and convert exactly to float32 while k·127² < 2²⁴ (k ≤ 1040).
    """

    name = "int8"
    out_dtype = "int32"

    def usable(self, device: Any, k: int) -> str | None:
        import torch

        if k * 127 * 127 >= 2**24:
            return f"hidden size {k}: int32 sums would not convert to float32 exactly"
        return None if hasattr(torch, "_int_mm") else "this torch has no torch._int_mm"

    def prepare_terms(self, terms: _Terms) -> Any:
        import torch

        scale = terms.weight.abs().amax(dim=1) / 127
        scale = torch.where(scale > 0, scale, torch.ones_like(scale))
        q = torch.round(terms.weight / scale[:, None]).clamp_(-127, 127).to(torch.int8)
        return {"weight": q.contiguous(), "scale": scale.double(), "l1": terms.weight.double().abs().sum(dim=1)}

    def prepare_batch(self, batch: _Batch) -> Any:
        import torch

        scale = batch.centred.abs().amax(dim=(1, 2)) / 127
        scale = torch.where(scale > 0, scale, torch.ones_like(scale))
        x = torch.round(batch.centred / scale[:, None, None]).clamp_(-127, 127).to(torch.int8)
        return {"x": x.contiguous(), "scale": scale.double(), "l1": x.double().abs().sum(dim=2)}

    def block(self, x: torch.Tensor, w: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
        import torch

        return torch._int_mm(x, w.T, out=out)

    def scales(self, bp: Any, tp: Any, docs: slice) -> tuple[torch.Tensor, torch.Tensor]:
        return bp["scale"][docs, None], tp["scale"][None, :]

    def slack(self, bp: Any, tp: Any, terms: _Terms, batch: _Batch, docs: slice, k: int, unit32: float,
              token_norms: torch.Tensor | None = None) -> torch.Tensor:
        x_l1 = bp["l1"][docs].amax(dim=1) if token_norms is None else token_norms
        a = bp["scale"][docs] if token_norms is None else bp["token_scale"]
        return 0.501 * a[:, None] * (tp["scale"][None, :] * x_l1[:, None] + tp["l1"][None, :])


#: Screen name → the arithmetic of its blocks. Every screen gives the same vectors (see module doc).
SCREENS: Registry[_Screen] = Registry("encode path", fix="Pass path=None to choose by measurement")
SCREENS.register("float32", _FloatScreen("float32", "float32", None))
SCREENS.register("bf16", _FloatScreen("bf16", "bfloat16", UBF16))
SCREENS.register("fp16", _FloatScreen("fp16", "float16", UFP16, scaled=True))
SCREENS.register("int8", _Int8Screen())


def _upper(screen: _Screen, pooled: torch.Tensor, batch: _Batch, terms: _Terms, docs: slice, k: int,
           unit32: float) -> torch.Tensor:
    """Upper bound (float64) on ``max_t h_t·w_j + b_j`` per document of ``docs`` and term, from the screen's maxima."""
    bp, tp = batch.screen(screen), terms.screen(screen)
    doc_scale, term_scale = screen.scales(bp, tp, docs)
    screened = pooled.double() * doc_scale * term_scale
    beta = batch.beta(terms)[docs].double()
    margin = screen.slack(bp, tp, terms, batch, docs, k, unit32)
    # rounding of h − μ, of μ·w_j (a length-k float32 dot product) and of the bias add
    per_doc = 1.01 * U32 * batch.spread[docs] + (_dot_coef(k, unit32, 0.0) + U32) * batch.mean_norm[docs]
    margin += per_doc[:, None] * terms.norms[None, :]
    margin += terms.abs_bias[None, :]
    return screened + beta + SAFETY * margin + 2.0**-40 * (screened.abs() + beta.abs())


def _canonical(hidden: torch.Tensor, candidates: torch.Tensor, terms: _Terms, unit32: float,
               elements: int) -> torch.Tensor:
    """``max(0, fl32(fl64(max_t h_t·w_j + b_j)))`` where ``candidates`` [n, V'] is True, 0 elsewhere → float32.

    Per candidate, a float64 matmul over the document's tokens (float32 products are exact in
    float64; the sum is within γ_k·‖h_t‖·‖w_j‖ of exact in any order) encloses the exact maximum in
    [M − E, M + E]. Rounding is monotone, so when both ends round to the same float32 that is the
    value; otherwise (a few in a million) the tokens that can hold the maximum are summed exactly
    with ``math.fsum`` (correctly rounded to float64) and rounded to float32.
    """
    import torch

    n_docs, length, k = hidden.shape
    out = torch.zeros(candidates.shape, dtype=torch.float32, device=hidden.device)
    counts = candidates.sum(dim=1)
    width = int(counts.max()) if n_docs else 0
    if width == 0:
        return out
    rows, cols = torch.nonzero(candidates, as_tuple=True)  # row-major
    pos = torch.arange(len(rows), device=hidden.device) - (torch.cumsum(counts, 0) - counts)[rows]
    ids = torch.zeros(n_docs, width, dtype=torch.long, device=hidden.device)
    valid = torch.zeros(n_docs, width, dtype=torch.bool, device=hidden.device)
    ids[rows, pos] = cols
    valid[rows, pos] = True
    values = torch.zeros(n_docs, width, dtype=torch.float32, device=hidden.device)
    h64 = hidden.double()
    top_norm = h64.norm(dim=2).amax(dim=1)  # [n]: the document's largest ‖h_t‖
    g64 = SAFETY * _gamma(k, U64)
    step = max(1, elements // max(n_docs * length, 1))
    for c0 in range(0, width, step):
        ic, vc = ids[:, c0 : c0 + step], valid[:, c0 : c0 + step]
        s = torch.bmm(h64, terms.weight[ic].double().transpose(1, 2))  # [n, L, c]
        best = s.amax(dim=1)
        top = best + terms.bias[ic].double()  # one more rounding, ≤ 2⁻⁵³·|top|
        spread = g64 * top_norm[:, None] * terms.norms[ic]
        margin = spread * (1 + 2.0**-50) + 2.0**-50 * top.abs() + 2.0**-1070  # + rounding of top ± margin
        lo, hi = (top - margin).float(), (top + margin).float()
        part = torch.where(lo == hi, lo, torch.zeros_like(lo))
        unsure = torch.nonzero((lo != hi) & vc).tolist()
        if unsure:  # the tokens within 2·spread of the best can hold the exact maximum
            near = s >= (best - 2 * spread)[:, None, :]
            fixed = []
            for doc, c in unsure:  # a few per million values: move only their rows to the host
                term = int(ic[doc, c])
                tokens = torch.nonzero(near[doc, :, c]).flatten()
                fixed.append(float(_exact_max(hidden[doc, tokens].cpu().numpy(), terms.weight[term].cpu().numpy(),
                                              np.float32(terms.bias[term].item()))) if len(tokens) else 0.0)
            at = torch.tensor(unsure, device=hidden.device)
            part[at[:, 0], at[:, 1]] = torch.tensor(fixed, dtype=torch.float32, device=hidden.device)
        values[:, c0 : c0 + step] = part
        del s
    out[rows, cols] = values[rows, pos].clamp_(min=0)  # relu: identical whichever candidates were tested
    return out


def _exact_max(hidden: np.ndarray, weight: np.ndarray, bias: np.float32) -> np.float32:
    """fl32(fl64(max_t h_t·w + b)) by exact summation (float32 products are exact in float64)."""
    w64 = weight.astype(np.float64)
    best = max(math.fsum([*(row.astype(np.float64) * w64).tolist(), float(bias)]) for row in hidden)
    return np.float32(best)


@dataclass
class _Stats:
    """What the encode did, for ``info``."""

    candidates: int = 0
    terms: int = 0
    head_s: float = 0.0
    forward_s: float = 0.0


class _exact_reductions:
    """On CUDA, bf16/fp16 GEMMs accumulate in float32 while the encode runs (cuBLAS may otherwise
    reduce split-K partial sums in the narrow type), as the screens' bounds assume; restored after."""

    FLAGS = ("allow_bf16_reduced_precision_reduction", "allow_fp16_reduced_precision_reduction")

    def __init__(self, device: Any) -> None:
        self.cuda = device.type == "cuda"
        self.saved: dict[str, Any] = {}

    def __enter__(self) -> None:
        import torch

        if self.cuda:
            for flag in self.FLAGS:
                self.saved[flag] = getattr(torch.backends.cuda.matmul, flag)
                setattr(torch.backends.cuda.matmul, flag, False)

    def __exit__(self, *exc: Any) -> None:
        import torch

        for flag, value in self.saved.items():
            setattr(torch.backends.cuda.matmul, flag, value)


def _screen_group(screen: _Screen, batch: _Batch, terms: _Terms, docs: slice, cols: int, k: int, unit32: float,
                  elements: int, buf: torch.Tensor | None = None) -> tuple[torch.Tensor, int]:
    """Exact values for one group of documents: screen in blocks, candidate test, canonical recompute."""
    import torch

    x = screen.inputs(batch.screen(screen))[docs]
    weight = screen.weight(terms.screen(screen))
    n_docs, length = x.shape[:2]
    vocab = weight.shape[0]
    rows = n_docs * length
    x2 = x.reshape(rows, -1)
    pooled = torch.empty(n_docs, vocab, dtype=torch.float32, device=x.device)
    dtype = getattr(torch, screen.out_dtype)
    if buf is None or buf.dtype != dtype or buf.numel() < rows * min(cols, vocab):
        buf = torch.empty(rows * min(cols, vocab), dtype=dtype, device=x.device)
    for v0 in range(0, vocab, cols):
        w = weight[v0 : v0 + cols]
        out = screen.block(x2, w, buf[: rows * w.shape[0]].view(rows, w.shape[0]))
        pooled[:, v0 : v0 + cols] = out.view(n_docs, length, -1).amax(dim=1)
    candidates = _upper(screen, pooled, batch, terms, docs, k, unit32) > 0
    return _canonical(batch.hidden[docs], candidates, terms, unit32, elements), int(candidates.sum())


def _plain_group(hidden: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, cols: int) -> torch.Tensor:
    """max over tokens of ``hidden @ weight.T`` + bias in the weight's dtype (precision='bfloat16')."""
    import torch

    n_docs, length, _ = hidden.shape
    x2 = hidden.reshape(n_docs * length, -1)
    pooled = torch.empty(n_docs, weight.shape[0], dtype=torch.float32, device=hidden.device)
    for v0 in range(0, weight.shape[0], cols):
        pooled[:, v0 : v0 + cols] = torch.mm(x2, weight[v0 : v0 + cols].T).view(n_docs, length, -1).amax(dim=1)
    return pooled + bias.float()


def _layout(n_docs: int, length: int, vocab: int, device: Any) -> tuple[int, int, int]:
    """(documents per group, vocabulary columns per block, logits per block)."""
    if device.type == "cpu":
        rows_target, elements = BLOCK_ROWS, BLOCK_ELEMENTS
    else:
        rows_target, elements = n_docs * length, CUDA_BLOCK_FACTOR * BLOCK_ELEMENTS
    docs = max(1, rows_target // max(length, 1))
    cols = min(vocab, max(128, elements // (min(docs, n_docs) * max(length, 1))))
    return docs, cols, elements


def _run_groups(fn: Any, n_docs: int, docs: int, pool: Any, workers: int) -> None:
    """``fn(slice)`` for every group of ``docs`` documents, spread over single-threaded pool workers.

    Each block is a few ms of work, and an OpenMP barrier after every one stalls whenever the
    machine is shared; independent workers never wait for each other.
    """
    import torch

    starts = list(range(0, n_docs, docs))

    @torch.inference_mode()  # thread-local, like the thread count
    def work(mine: list[int], single_threaded: bool = False) -> None:
        if single_threaded:
            torch.set_num_threads(1)
        for d0 in mine:
            fn(slice(d0, min(d0 + docs, n_docs)))

    threads = torch.get_num_threads()
    try:
        if pool is not None and len(starts) > 1:
            list(pool.map(work, [starts[i::workers] for i in range(workers)], [True] * workers))
        else:  # single-threaded all the same: a bf16 matmul's sums may depend on the thread count
            work(starts, pool is not None)
    finally:
        torch.set_num_threads(threads)  # the setting is process-wide


def _pool_screened(batch: _Batch, terms: _Terms, screen: _Screen, pool: Any, workers: int, unit32: float,
                   stats: _Stats) -> torch.Tensor:
    """Exact pooled values [B, V] (0 for the terms the screen rules out) of a whole batch."""
    import torch

    n_docs, length, k = batch.hidden.shape
    vocab = terms.weight.shape[0]
    docs, cols, elements = _layout(n_docs, length, vocab, batch.hidden.device)
    pooled = torch.empty(n_docs, vocab, dtype=torch.float32, device=batch.hidden.device)
    counts: list[int] = []

    def group(sl: slice) -> None:
        pooled[sl], n = _screen_group(screen, batch, terms, sl, cols, k, unit32, elements)
        counts.append(n)  # list.append is thread-safe

    batch.screen(screen)  # prepared once, before the workers share them
    batch.beta(terms)
    terms.screen(screen)
    terms.abs_bias
    _run_groups(group, n_docs, docs, pool, workers)
    stats.candidates += sum(counts)
    stats.terms += n_docs * vocab
    return pooled


def _sync(device: Any) -> float:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter()


def _measured_error(screen: _Screen, batch: _Batch, sample: _Terms, docs: slice, k: int, unit32: float,
                    exact: torch.Tensor) -> float:
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
    chosen = min(timings, key=timings.get) if timings else "float32"
    return {"path": chosen, "measured": True, "timings": timings, "rejected": rejected,
            "probe_candidates_fraction": {n: candidates[n] for n in timings}, "probe_s": time.perf_counter() - start}


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


class _Captured(Exception):
    """Raised by the decoder pre-hook to stop the forward once the decoder input is known."""

    def __init__(self, hidden: torch.Tensor) -> None:
        super().__init__()
        self.hidden = hidden


def _capture(module: Any, args: tuple[Any, ...]) -> None:
    raise _Captured(args[0])


def _check_inputs(texts: Sequence[str], max_length: int, batch_size: int = 1) -> list[str]:
    if isinstance(texts, str):
        raise BenchmarkError("texts must be a sequence of strings, got one str; wrap it in a list")
    texts = list(texts)
    for i, text in enumerate(texts):
        if not isinstance(text, str):
            raise BenchmarkError(f"texts[{i}] is {type(text).__name__}, expected str; pass the document text")
    if not isinstance(max_length, int) or max_length < 1:
        raise BenchmarkError(f"max_length must be a positive int, got {max_length!r}")
    if not isinstance(batch_size, int) or batch_size < 1:
        raise BenchmarkError(f"batch_size must be a positive int, got {batch_size!r}")
    return texts


def _decoder(model: Any) -> Any:
    """The vocabulary projection if it is a plain ``nn.Linear`` (every HF *ForMaskedLM), else None."""
    from torch import nn

    decoder = model.get_output_embeddings()
    return decoder if type(decoder) is nn.Linear else None


@dataclass(frozen=True)
class Tokenized:
    """Token ids of texts truncated to ``max_length``; ``encode`` takes it in place of the texts.

    Lets a caller tokenise the next corpus shard in a thread while the model encodes this one
    (fast tokenizers release the GIL).
    """

    ids: list[np.ndarray]
    max_length: int

    def __len__(self) -> int:
        return len(self.ids)


def tokenize(tokenizer: Any, texts: Sequence[str], max_length: int) -> Tokenized:
    """``texts`` as ``encode`` would tokenise them."""
    return Tokenized(_tokenize(tokenizer, _check_inputs(texts, max_length), max_length), max_length)


def _tokenize(tokenizer: Any, texts: list[str], max_length: int) -> list[np.ndarray]:
    """Token ids per text, truncated; in chunks, so the tokenizer's rich per-token objects stay small."""
    ids: list[np.ndarray] = []
    for start in range(0, len(texts), TOKENIZE_CHUNK):
        enc = tokenizer(texts[start : start + TOKENIZE_CHUNK], truncation=True, max_length=max_length,
                        return_attention_mask=False, return_token_type_ids=False)
        ids.extend(np.asarray(x, dtype=np.int64) for x in enc["input_ids"])
    return ids


def _padded_width(lengths: Sequence[int], multiple: int) -> int:
    """A batch's width: its longest text (at least 1: a tokenizer without special tokens can give none),
    rounded up to ``multiple``."""
    return -(-max(1, max(lengths, default=0)) // multiple) * multiple


def _pad(ids: list[np.ndarray], rows: Sequence[int], pad_id: int, device: Any, multiple: int = 1) -> tuple[Any, Any]:
    """Right-pad ``rows`` into (input_ids, attention_mask): positions never depend on batch-mates.

    Token types are left to the model's default (all zeros), which is what tokenizers give a single text.
    """
    import torch

    width = _padded_width([len(ids[r]) for r in rows], multiple)
    input_ids = np.full((len(rows), width), pad_id, dtype=np.int64)
    mask = np.zeros((len(rows), width), dtype=np.int64)
    for i, r in enumerate(rows):
        input_ids[i, : len(ids[r])] = ids[r]
        mask[i, : len(ids[r])] = 1
    return torch.from_numpy(input_ids).to(device), torch.from_numpy(mask).to(device)


def _hidden(model: Any, **inputs: Any) -> torch.Tensor:
    """The decoder's input for one batch (the forward stops there)."""
    try:
        model(**inputs)
    except _Captured as captured:
        return captured.hidden
    raise BenchmarkError(f"{type(model).__name__} never called its output embeddings; cannot pool its MLM head")


def _hidden_batch(model: Any, tokens: list[np.ndarray], rows: Sequence[int], pad_id: int, device: Any,
                  multiple: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(hidden [n, L, H], mask [n, L]) of ``rows``: one padded batch, or one packed row unpacked
    (``attn_implementation='varlen'``, see ``benchmark.varlen``)."""
    import torch

    from benchmark import varlen

    if not varlen.is_packed(model):
        input_ids, mask = _pad(tokens, rows, pad_id, device, multiple)
        return _hidden(model, input_ids=input_ids, attention_mask=mask), mask
    lengths = [len(tokens[r]) for r in rows]
    width = _padded_width(lengths, multiple)
    if not any(lengths):  # nothing to run the model on
        hidden_size = model.get_output_embeddings().weight.shape[1]
        return (torch.zeros(len(rows), width, hidden_size, device=device),
                torch.zeros(len(rows), width, dtype=torch.long, device=device))
    packed = _hidden(model, **varlen.forward_kwargs(model, tokens, rows, device))
    return varlen.unpack(packed, lengths, width)


def _forward(model: Any, tokens: list[np.ndarray], rows: np.ndarray, pad_id: int, device: Any, multiple: int,
             pool: Any, workers: int, dtype: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """(hidden [B, L, H], mask [B, L]) of the documents ``rows``.

    On CPU the batch is cut into sub-batches of ``BODY_DOCS`` consecutive documents, each run
    single-threaded (by the workers when there are several): a transformer's small matmuls under
    OpenMP spend much of their time at barriers (measured with bert-tiny on SciFact: 3.4 CPU ms per
    document this way, 13 with two OpenMP threads on a busy machine), and MKL's sums depend on its
    thread count. The cut depends on the documents' order only, so the hidden states (and the
    vectors) depend neither on the thread count nor on a batch size that is a multiple of BODY_DOCS.
    """
    import torch

    if device.type != "cpu":
        return _hidden_batch(model, tokens, rows, pad_id, device, multiple)
    subs = [rows[i : i + BODY_DOCS] for i in range(0, len(rows), BODY_DOCS)]
    outs: list[tuple[torch.Tensor, torch.Tensor]] = [None] * len(subs)  # type: ignore[list-item]

    def work(mine: list[int]) -> None:
        torch.set_num_threads(1)
        with torch.inference_mode(), torch.autocast(device.type, dtype=dtype, enabled=dtype is not None):
            for i in mine:
                outs[i] = _hidden_batch(model, tokens, subs[i], pad_id, device, multiple)

    threads = torch.get_num_threads()
    try:
        if pool is None or len(subs) == 1:  # single-threaded all the same: MKL's sums depend on its thread count
            work(list(range(len(subs))))
        else:
            list(pool.map(work, [list(range(w, len(subs), workers)) for w in range(workers)]))
    finally:
        torch.set_num_threads(threads)
    width = max(h.shape[1] for h, _ in outs)
    hidden = outs[0][0].new_zeros(len(rows), width, outs[0][0].shape[2])
    mask = outs[0][1].new_zeros(len(rows), width)
    at = 0
    for h, m in outs:
        hidden[at : at + len(h), : h.shape[1]] = h
        mask[at : at + len(h), : h.shape[1]] = m
        at += len(h)
    return hidden, mask


def _pool_plain(hidden: torch.Tensor, mask: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
                pool: Any, workers: int) -> torch.Tensor:
    """Pooled ``hidden @ weight.T + bias`` in the weight's own dtype (no screen, no recompute)."""
    import torch

    hidden = torch.where(mask.unsqueeze(-1).bool(), hidden, hidden[:, :1]).to(weight.dtype).contiguous()
    n_docs, length, _ = hidden.shape
    docs, cols, _ = _layout(n_docs, length, weight.shape[0], hidden.device)
    bias = torch.zeros(weight.shape[0], device=hidden.device) if bias is None else bias
    pooled = torch.empty(n_docs, weight.shape[0], dtype=torch.float32, device=hidden.device)

    def group(sl: slice) -> None:
        pooled[sl] = _plain_group(hidden[sl], weight, bias, cols)

    _run_groups(group, n_docs, docs, pool, workers)
    return pooled


def _pool_logits(logits: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Fallback for heads that are not a plain Linear: max over masked tokens, vocabulary-chunked."""
    import torch

    n_docs, length, vocab = logits.shape
    cols = max(128, BLOCK_ELEMENTS // max(n_docs * length, 1))
    pooled = torch.empty(n_docs, vocab, dtype=torch.float32, device=logits.device)
    drop = ~mask.unsqueeze(-1)
    for v0 in range(0, vocab, cols):
        pooled[:, v0 : v0 + cols] = logits[..., v0 : v0 + cols].float().masked_fill(drop, float("-inf")).amax(dim=1)
    return pooled


def _sparse_rows(pooled: torch.Tensor) -> list[tuple[np.ndarray, np.ndarray]]:
    """log1p of each row's positive entries as (ids ascending, float32 weights), found on the device.

    ``log1p`` runs in float64 on the host and is rounded to float32: the same routine for every
    element wherever it sits in the array (a vectorised float32 kernel may treat a scalar tail
    differently), and ``log1p(x) > 0`` exactly when ``x > 0``.
    """
    import torch

    row, col = torch.nonzero(pooled > 0, as_tuple=True)  # row-major: ids ascend within a row
    values = pooled[row, col].cpu().numpy()
    weights = np.log1p(values.astype(np.float64)).astype(np.float32)
    ids = col.to(torch.int32).cpu().numpy()
    ends = np.cumsum(torch.bincount(row, minlength=pooled.shape[0]).cpu().numpy())
    starts = np.concatenate([[0], ends[:-1]])
    return [(ids[a:b], weights[a:b]) for a, b in zip(starts, ends)]


def encode(
    model: Any,
    tokenizer: Any,
    texts: Sequence[str] | Tokenized,
    *,
    max_length: int,
    batch_size: int = 32,
    progress: str | None = None,
    precision: str = "float32",
    path: str | None = None,
    info: dict[str, Any] | None = None,
) -> list[tuple[np.ndarray, np.ndarray]]:
    """SPLADE vectors, one ``(token_ids int32 ascending, weights float32 > 0)`` per text, in input order.

    ``model`` is any ``*ForMaskedLM`` (run on its device, in eval mode, its training flag restored);
    texts (or a ``Tokenized`` from ``tokenize``) are truncated to ``max_length`` tokens.
    ``precision='bfloat16'`` autocasts the forward and the decoder to bfloat16 (weights change in the
    third significant digit); 'float32' keeps the model's dtype and gives the float32 vectors, exact
    to the last bit (see the module doc). ``path``: a screen of ``SCREENS`` to force, or None to
    measure them on the first batch (encodes under ``PROBE_MIN_ROWS`` tokens take a default); the
    vectors are the same either way. ``info``, when given, receives what the encode did: ``path``,
    ``measured``, ``timings`` ({screen: head seconds per document} from the measurement),
    ``rejected``, ``candidates_fraction`` (share of (document, term) pairs recomputed exactly),
    ``forward_s``, ``head_s``, ``head_gflop_per_doc``, ``docs``, ``tokens``. ``progress`` is a tqdm
    description, or None for silence. On CPU the forwards and the decoder blocks run on
    ``torch.get_num_threads()`` single-threaded workers (the process-wide thread count is set to 1
    while they run, then restored).
    """
    import torch

    autocast = PRECISIONS[precision]
    if path is not None:
        SCREENS[path]  # noqa: B018 (an unknown name raises the standard error)
        if autocast is not None:
            raise BenchmarkError(f"path={path!r} selects a float32 screen, but precision={precision!r}; "
                                 "pass path=None with precision='bfloat16'")
    if isinstance(texts, Tokenized):
        _check_inputs([], max_length, batch_size)
        if texts.max_length != max_length:
            raise BenchmarkError(f"texts were tokenised with max_length={texts.max_length}, not {max_length}; "
                                 "tokenize them again with the same max_length")
        tokens = texts.ids
    else:
        tokens = _tokenize(tokenizer, _check_inputs(texts, max_length, batch_size), max_length)
    if not tokens:
        if info is not None:
            info.update({"path": path, "measured": False, "timings": {}, "candidates_fraction": None, "docs": 0})
        return []
    device = next(model.parameters()).device
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    lengths = np.array([len(x) for x in tokens])
    order = np.argsort(-lengths, kind="stable")  # longest first: peak memory shows up at once

    decoder = _decoder(model)
    from benchmark.rescale import check_projection_scale

    check_projection_scale(model)  # the captured head input must carry the projection's α
    dtype = getattr(torch, autocast) if autocast else None
    terms = weight = bias = None
    record: dict[str, Any] = {"measured": False, "timings": {}, "rejected": {}}
    if decoder is None:
        record["path"] = "logits"  # a head that is not a plain Linear: full logits, no screen
    else:
        weight = decoder.weight.detach()
        bias = None if decoder.bias is None else decoder.bias.detach()
        if dtype is not None or weight.dtype != torch.float32:
            weight = weight.to(dtype) if dtype is not None else weight
            record["path"] = str(weight.dtype).removeprefix("torch.")  # no screen: the model's arithmetic
        else:
            terms = _Terms.of(weight, bias)
            record["path"] = path
    unit32 = _float32_matmul_unit(device)
    if terms is not None and path is None and int(lengths.sum()) < PROBE_MIN_ROWS:
        record["path"] = _default_path(device)
    multiple = WIDTH_MULTIPLE.get(device.type, 1)
    stats = _Stats()

    threads = torch.get_num_threads()
    pool = None
    if device.type == "cpu" and threads > 1:
        from concurrent.futures import ThreadPoolExecutor

        pool = ThreadPoolExecutor(threads, thread_name_prefix="splade-head")
    bar = None
    if progress is not None:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(tokens), desc=progress, unit="doc")
    results: list[tuple[np.ndarray, np.ndarray]] = [None] * len(tokens)  # type: ignore[list-item]
    hook = decoder.register_forward_pre_hook(_capture) if decoder is not None else None
    was_training = model.training
    model.eval()
    try:
        with (torch.inference_mode(), torch.autocast(device.type, dtype=dtype, enabled=dtype is not None),
              _exact_reductions(device)):
            for start in range(0, len(tokens), batch_size):
                rows = order[start : start + batch_size]
                t0 = _sync(device)
                if decoder is not None:
                    hidden, mask = _forward(model, tokens, rows, pad_id, device, multiple, pool, threads, dtype)
                    t1 = _sync(device)
                    if terms is not None:
                        prepared = _Batch.of(hidden, mask)
                        if record["path"] is None:
                            record.update(_choose(prepared, terms, pool, threads, unit32, list(SCREENS)))
                        pooled = _pool_screened(prepared, terms, SCREENS[record["path"]], pool, threads, unit32,
                                                stats)
                    else:
                        pooled = _pool_plain(hidden, mask, weight, bias, pool, threads)
                else:
                    input_ids, mask = _pad(tokens, rows, pad_id, device, multiple)
                    logits = model(input_ids=input_ids, attention_mask=mask).logits
                    t1 = _sync(device)
                    pooled = _pool_logits(logits, mask.bool())
                pooled[torch.from_numpy(lengths[rows] == 0).to(pooled.device)] = 0.0
                for r, vector in zip(rows, _sparse_rows(pooled)):
                    results[r] = vector
                t2 = _sync(device)
                stats.forward_s += t1 - t0
                stats.head_s += t2 - t1
                if bar is not None:
                    bar.update(len(rows))
    finally:
        if hook is not None:
            hook.remove()
        model.train(was_training)
        if pool is not None:
            pool.shutdown()
        if bar is not None:
            bar.close()
    if info is not None:
        n_tokens = int(lengths.sum())
        vocab = int(weight.shape[0]) if weight is not None else None
        hidden_size = int(weight.shape[1]) if weight is not None else None
        info.update(record)
        info.update({
            "candidates_fraction": stats.candidates / stats.terms if stats.terms else None,
            "docs": len(tokens), "tokens": n_tokens, "threads": threads, "device": str(device),
            "forward_s": stats.forward_s, "head_s": stats.head_s,
            "head_gflop_per_doc": 2 * n_tokens * hidden_size * vocab / len(tokens) / 1e9 if vocab else None,
        })
    return results


def reference_encode(model: Any, tokenizer: Any, texts: Sequence[str], *, max_length: int) -> torch.Tensor:
    """The textbook SPLADE: one right-padded batch, full [n, L, V] logits → dense [n, V] float32.

    Memory-hungry on purpose; the oracle that ``encode`` is tested against.
    """
    import torch

    texts = _check_inputs(texts, max_length)
    device = next(model.parameters()).device
    batch = tokenizer(texts, padding=True, truncation=True, max_length=max_length, return_tensors="pt",
                      padding_side="right").to(device)
    was_training = model.training
    model.eval()
    try:
        with torch.inference_mode():
            logits = model(**batch).logits.float()
    finally:
        model.train(was_training)
    weights = torch.log1p(torch.relu(logits)) * batch["attention_mask"].unsqueeze(-1)
    return weights.amax(dim=1)


def quantise(weights: np.ndarray, scale: int = QUANT_SCALE) -> np.ndarray:
    """Integer impacts ``round(w · scale)`` as int32, for Anserini (which truncates float impacts).

    The product is taken in float64 from the float32 weight, then rounded half to even — the same as
    Python's ``round`` used by Pyserini's own SPLADE encoders. So 0.004 → 0, 1.234 → 123, and exact
    halves go to the even neighbour: 0.125 → 12, 0.375 → 38. (0.005 is 0.0049999999 in float32 → 0.)
    Weights below 0.5/scale become 0: callers drop those terms (``quantise_vector`` does).
    """
    if not isinstance(scale, (int, np.integer)) or isinstance(scale, bool) or scale < 1:
        raise BenchmarkError(f"scale must be a positive int, got {scale!r}; "
                             f"the pipeline uses QUANT_SCALE={QUANT_SCALE}")
    w = np.asarray(weights)
    if w.size and not np.isfinite(w).all():
        raise BenchmarkError("weights contain NaN or inf; the model produced non-finite logits")
    return np.rint(w.astype(np.float64) * int(scale)).astype(np.int32)


def quantise_vector(ids: np.ndarray, weights: np.ndarray, scale: int = QUANT_SCALE) -> tuple[np.ndarray, np.ndarray]:
    """``quantise`` one vector and drop the terms that round to 0 (impact 0 means absent)."""
    q = quantise(weights, scale)
    keep = q > 0
    return np.asarray(ids)[keep], q[keep]
