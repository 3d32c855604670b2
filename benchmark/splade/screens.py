"""Screens: fast approximate matmuls of the vocabulary head, each with a proven error bound, and the
exact recompute of the candidates they leave.

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
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from benchmark.common.registry import Registry

if TYPE_CHECKING:
    import torch

#: Unit roundoffs: float32, float64, bfloat16, float16 (round to nearest: |fl(x) − x| ≤ u·|x|).
U32, U64, UBF16, UFP16 = 2.0**-24, 2.0**-53, 2.0**-8, 2.0**-11
#: Every proven bound is used times this: room for the rounding of the bound's own arithmetic (norms
#: and products in float64, ≤ 1e-12 relative; the float32 parts have explicit terms) with a wide berth.
SAFETY = 1.25


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

    def slack(
        self,
        bp: Any,
        tp: Any,
        terms: _Terms,
        batch: _Batch,
        docs: slice,
        k: int,
        unit32: float,
        token_norms: torch.Tensor | None = None,
    ) -> torch.Tensor:
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

    def slack(
        self,
        bp: Any,
        tp: Any,
        terms: _Terms,
        batch: _Batch,
        docs: slice,
        k: int,
        unit32: float,
        token_norms: torch.Tensor | None = None,
    ) -> torch.Tensor:
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

    def slack(
        self,
        bp: Any,
        tp: Any,
        terms: _Terms,
        batch: _Batch,
        docs: slice,
        k: int,
        unit32: float,
        token_norms: torch.Tensor | None = None,
    ) -> torch.Tensor:
        x_l1 = bp["l1"][docs].amax(dim=1) if token_norms is None else token_norms
        a = bp["scale"][docs] if token_norms is None else bp["token_scale"]
        return 0.501 * a[:, None] * (tp["scale"][None, :] * x_l1[:, None] + tp["l1"][None, :])


#: Screen name → the arithmetic of its blocks. Every screen gives the same vectors (see module doc).
SCREENS: Registry[_Screen] = Registry("encode path", fix="Pass path=None to choose by measurement")
SCREENS.register("float32", _FloatScreen("float32", "float32", None))
SCREENS.register("bf16", _FloatScreen("bf16", "bfloat16", UBF16))
SCREENS.register("fp16", _FloatScreen("fp16", "float16", UFP16, scaled=True))
SCREENS.register("int8", _Int8Screen())


def _upper(
    screen: _Screen, pooled: torch.Tensor, batch: _Batch, terms: _Terms, docs: slice, k: int, unit32: float
) -> torch.Tensor:
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


def _canonical(
    hidden: torch.Tensor, candidates: torch.Tensor, terms: _Terms, unit32: float, elements: int
) -> torch.Tensor:
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
                fixed.append(
                    float(
                        _exact_max(
                            hidden[doc, tokens].cpu().numpy(),
                            terms.weight[term].cpu().numpy(),
                            np.float32(terms.bias[term].item()),
                        )
                    )
                    if len(tokens)
                    else 0.0
                )
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
