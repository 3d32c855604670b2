"""Packed (unpadded) encoder forwards: ``attn_implementation = "varlen"``.

A padded batch spends attention and MLP work on padding, and ModernBERT's sliding-window layers make
SDPA take an explicit mask, which keeps it off the flash kernel. Here a batch's documents are
concatenated into one row of ``T = Σ length`` tokens, positions restart at 0 for each document, and
attention runs per document through ``torch.nn.attention.varlen.varlen_attn`` (flash attention with
cumulative sequence lengths and the model's window) on CUDA. On CPU, where that kernel does not
exist, each document's attention is a plain SDPA call with the same window: the reference the tests
compare with the padded forward.

Only model types whose positions come from ``position_ids`` and whose attention goes through
transformers' attention interface can be packed (``PACKED_MODEL_TYPES``). The hidden states differ
from the padded forward's in rounding only, but they are another computation, so the attention
implementation is part of the encode stages' ids.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from benchmark.common.errors import BenchmarkError

NAME = "varlen"
#: model_type → the keys of the per-layer-type attention-mask mapping its forward accepts (given as
#: None: the documents' boundaries travel as cumulative lengths instead of a mask).
PACKED_MODEL_TYPES: dict[str, tuple[str, ...]] = {"modernbert": ("full_attention", "sliding_attention")}


def attention(
    module: Any,
    query: Any,
    key: Any,
    value: Any,
    attention_mask: Any,
    scaling: float | None = None,
    sliding_window: int | None = None,
    cu_seq_lens_q: Any = None,
    max_length_q: int | None = None,
    **kwargs: Any,
) -> tuple[Any, None]:
    """transformers attention-interface function over one packed row: q, k, v [1, heads, T, d] → [1, T, heads, d].

    ``sliding_window`` follows transformers' flash convention: a token sees the tokens at distance
    ≤ sliding_window − 1 (ModernBERT passes ``local_attention // 2 + 1``).
    """
    import torch

    if cu_seq_lens_q is None:
        raise BenchmarkError(
            "attn_implementation='varlen' needs a packed batch (benchmark.splade.encoder.encode packs one); "
            "load the model with attn_implementation='sdpa' for padded inputs"
        )
    q, k, v = (x[0].transpose(0, 1) for x in (query, key, value))  # [T, heads, d]
    reach = -1 if sliding_window is None else sliding_window - 1
    if q.is_cuda:
        from torch.nn.attention.varlen import varlen_attn

        assert max_length_q is not None  # packed_inputs gives it with cu_seq_lens_q

        dtype = flash_dtype(q)
        q, k, v = (x.to(dtype).contiguous() for x in (q, k, v))
        cu = cu_seq_lens_q.to(torch.int32)
        out = varlen_attn(
            q, k, v, cu, cu, int(max_length_q), int(max_length_q), scale=scaling, window_size=(reach, reach)
        )
        return out.unsqueeze(0), None
    out = torch.empty_like(q)
    bounds = cu_seq_lens_q.tolist()
    for start, end in zip(bounds, bounds[1:]):
        if end == start:
            continue
        qs, ks, vs = (x[start:end].transpose(0, 1) for x in (q, k, v))  # [heads, n, d]
        mask = None
        if reach >= 0 and end - start > reach + 1:
            pos = torch.arange(end - start, device=q.device)
            mask = (pos[:, None] - pos[None, :]).abs() <= reach
        out[start:end] = torch.nn.functional.scaled_dot_product_attention(
            qs, ks, vs, attn_mask=mask, scale=scaling
        ).transpose(0, 1)
    return out.unsqueeze(0), None


def flash_dtype(query: Any) -> Any:
    """The dtype flash attention runs ``query`` in: its own if 16-bit, else autocast's.

    Under autocast the rotary embedding leaves q and k in float32 (its cos/sin follow the float32
    hidden states), as transformers' flash path also finds; they are cast to the autocast type,
    which SDPA would use as well. A float32 forward without autocast has no flash kernel.
    """
    import torch

    if query.dtype in (torch.float16, torch.bfloat16):
        return query.dtype
    device = query.device.type
    if torch.is_autocast_enabled(device) and torch.get_autocast_dtype(device) in (torch.float16, torch.bfloat16):
        return torch.get_autocast_dtype(device)
    raise BenchmarkError(
        f"attn_implementation='varlen' runs flash attention, which has no {query.dtype} kernel; "
        'set [encode] precision = "bfloat16", or attn_implementation = "sdpa"'
    )


def register() -> None:
    """Make ``attn_implementation="varlen"`` loadable by transformers (idempotent)."""
    from transformers import AttentionInterface

    AttentionInterface.register(NAME, attention)


def problem(model_type: str, name: str) -> str | None:
    """One line when a ``model_type`` model cannot run packed."""
    if model_type in PACKED_MODEL_TYPES:
        return None
    return (
        f"{name}: attn_implementation='varlen' packs {', '.join(PACKED_MODEL_TYPES)} models, not {model_type!r}; "
        'set [encode] attn_implementation = "sdpa" for this backbone'
    )


def check(model: Any, name: str) -> None:
    error = problem(model.config.model_type, name)
    if error:
        raise BenchmarkError(error)


def is_packed(model: Any) -> bool:
    return getattr(model.config, "_attn_implementation", None) == NAME


def packed_inputs(tokens: list[np.ndarray], rows: Any, device: Any) -> tuple[Any, Any, Any, int]:
    """(input_ids [1, T], position_ids [1, T], cumulative lengths [n+1], longest) of ``rows`` (at least one)."""
    import torch

    lengths = np.array([len(tokens[r]) for r in rows], dtype=np.int64)
    ids = np.concatenate([tokens[r] for r in rows])
    cu = np.concatenate([[0], np.cumsum(lengths)])
    positions = np.arange(len(ids), dtype=np.int64) - np.repeat(cu[:-1], lengths)
    as_tensor = lambda a: torch.from_numpy(a).to(device)  # noqa: E731
    return as_tensor(ids)[None], as_tensor(positions)[None], as_tensor(cu), int(lengths.max())


def unpack(packed: Any, lengths: list[int], width: int) -> tuple[Any, Any]:
    """[1, T, H] → (hidden [n, width, H] right-padded with zeros, mask [n, width])."""
    import torch

    n = len(lengths)
    lens = torch.tensor(lengths, device=packed.device)
    mask = (torch.arange(width, device=packed.device)[None, :] < lens[:, None]).long()
    hidden = packed.new_zeros(n, width, packed.shape[-1])
    hidden[mask.bool()] = packed[0]
    return hidden, mask


def forward_kwargs(model: Any, tokens: list[np.ndarray], rows: Any, device: Any) -> dict[str, Any]:
    """Keyword arguments of ``model(...)`` for the packed batch ``rows``."""
    input_ids, positions, cu, longest = packed_inputs(tokens, rows, device)
    masks = {key: None for key in PACKED_MODEL_TYPES[model.config.model_type]}
    return {
        "input_ids": input_ids,
        "position_ids": positions,
        "attention_mask": masks,
        "cu_seq_lens_q": cu,
        "cu_seq_lens_k": cu,
        "max_length_q": longest,
        "max_length_k": longest,
    }
