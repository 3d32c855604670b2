"""``python -m benchmark.perf gpu-profile``: steady-state SPLADE encode throughput on ModernBERT-base's and
BERT-base's architectures,
the MS MARCO time it implies, and ModernBERT-base training steps/s — one JSON.

Models are built from their configs with random weights (no download): ModernBERT-base's sizes
(hidden 768, 22 layers, 12 heads, intermediate 1152, vocabulary 50368, sliding-window attention of
128 tokens with a global layer every third) and ``BertConfig()`` (BERT-base, vocabulary 30522). The
vocabulary bias is shifted until documents keep about 200 non-zeros, as a trained SPLADE model's
do (random heads are dense, and then extraction, not the model, would set the pace). Passages are
synthetic, 20–100 words (one token each, with a word-level tokenizer built here), at most 256 tokens.

Measured, in order of importance, each in its own guard (a failure is recorded and the next one
runs), with the JSON rewritten after each and a time budget checked before each:

1. encode, ModernBERT-base, bf16, SDPA attention: docs/s of a second pass over the passages (the
   first pass meets every padded width once: warm-up), and MS MARCO minutes (8,841,823 passages);
2. the same with packed documents (``attn_implementation="varlen"``, ``benchmark.model.varlen``: no
   padding, flash varlen attention with ModernBERT's window);
3. SDPA for BERT-base;
4. packed ModernBERT-base with ``torch.compile`` of the encoder body (dynamic shapes: one
   compilation for every width);
5. the encode stage end to end as the GPU suites run it (``encode_docs_stage`` with ``compile =
   "inductor"``: compilation, shards, tokenisation ahead, writer processes);
6. training steps/s of ModernBERT-base at batch 32, bf16 autocast, through ``train_splade``;
7. ModernBERT-base with SDPA and the compiled body, and with eager attention; BERT-base with SDPA
   and the compiled body;
8. encode, ModernBERT-base, float32 precision (the exact path: screen + float64 recompute), with
   the path the encoder chose and the timings it measured;
9. the encode stage end to end, body not compiled;
10. batch 256 against 1024.

Usage: ``python -m benchmark.perf gpu-profile`` on a GPU machine (about 8 minutes; ``--budget`` seconds);
``python -m benchmark.perf gpu-profile --dry-run`` on CPU: every step with tiny sizes (2 layers, a few
hundred passages), under 2 minutes; in a dry run the float32 measurement encodes fewer tokens than
the encoder's probe needs (``benchmark.splade.probe.PROBE_MIN_ROWS``), so it takes the default screen. The
JSON goes to ``--out``, else ``$OUT/gpu_profile.json`` when OUT is set, else
``results/gpu/gpu_profile.json`` (``gpu_profile.dry-run.json`` for a dry run).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import signal
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, cast

from benchmark.common.atomic import write_text
from benchmark.common.errors import unknown
from benchmark.model import varlen
from benchmark.retrieval.impact_vectors import encode_docs_stage
from benchmark.splade.encoder import encode

MSMARCO_PASSAGES = 8_841_823
TARGET_NNZ = 200
SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


class Profile:
    """The JSON being built: each measurement guarded, timed against the budget, written as it goes."""

    def __init__(self, path: Path, budget_s: float) -> None:
        self.path = path
        self.start = time.perf_counter()
        self.budget_s = budget_s
        self.data: dict[str, Any] = {"budget_s": budget_s, "measurements": {}, "errors": {}, "skipped": {}}

    def elapsed(self) -> float:
        return time.perf_counter() - self.start

    def write(self) -> None:
        self.data["elapsed_s"] = round(self.elapsed(), 1)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        write_text(self.path, json.dumps(self.data, indent=2, default=str))

    def log(self, message: str) -> None:
        print(f"[gpu_profile {self.elapsed():6.1f}s] {message}", flush=True)

    def run(self, name: str, need_s: float, fn: Callable[[], dict[str, Any]]) -> dict[str, Any] | None:
        """``fn()`` if ``need_s`` seconds are left (it is stopped at the end of the budget)."""
        left = self.budget_s - self.elapsed()
        if left < need_s:
            self.data["skipped"][name] = f"needs ~{need_s:.0f} s, {left:.0f} s left in the budget"
            self.log(f"skip {name}: {self.data['skipped'][name]}")
            self.write()
            return None
        self.log(f"start {name} (~{need_s:.0f} s expected, {left:.0f} s left)")
        t = time.perf_counter()
        try:
            with _deadline(left):
                result = fn()
            result["seconds"] = round(time.perf_counter() - t, 1)
            self.data["measurements"][name] = result
            self.log(f"done {name}: {json.dumps(result, default=str)[:400]}")
            return result
        except BaseException as exc:  # noqa: BLE001 (one failure must not lose the other measurements)
            if isinstance(exc, KeyboardInterrupt):
                raise
            self.data["errors"][name] = f"{type(exc).__name__}: {exc}"[:1500]
            self.data["errors"][name + "_trace"] = traceback.format_exc()[-3000:]
            self.log(f"FAILED {name}: {type(exc).__name__}: {exc}"[:500])
            return None
        finally:
            _free_cuda()
            self.write()


class _Timeout(Exception):
    pass


@contextlib.contextmanager
def _deadline(seconds: float) -> Iterator[None]:
    """Raise ``_Timeout`` in the main thread after ``seconds`` (the budget is a hard limit)."""

    def fire(signum: int, frame: Any) -> None:
        raise _Timeout(f"stopped at the time budget ({seconds:.0f} s left when it started)")

    previous = signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, max(1.0, seconds))
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _free_cuda() -> None:
    import gc

    import torch

    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def _sync() -> float:
    import torch

    if torch.cuda.is_available():
        torch.cuda.synchronize()
    return time.perf_counter()


def word_tokenizer(vocab_size: int) -> Any:
    """A word-level fast tokenizer over ``vocab_size`` ids: "w<id>" is one token; [CLS] … [SEP] around."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    vocab = {tok: i for i, tok in enumerate(SPECIALS)}
    vocab.update({f"w{i}": i for i in range(len(SPECIALS), vocab_size)})
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1", special_tokens=[("[CLS]", 2), ("[SEP]", 3)]
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        unk_token="[UNK]",
        pad_token="[PAD]",
        cls_token="[CLS]",
        sep_token="[SEP]",
        mask_token="[MASK]",
        model_max_length=8192,
    )


def passages(n: int, vocab_size: int, seed: int = 0, lo: int = 20, hi: int = 100) -> list[str]:
    """``n`` passages of ``lo``–``hi`` words, word ids Zipf-distributed as in text."""
    rng = random.Random(seed)
    ids = range(len(SPECIALS), vocab_size)
    weights = [1.0 / (r + 10) for r in range(len(ids))]
    words = rng.choices(ids, weights=weights, k=n * hi)
    out, at = [], 0
    for _ in range(n):
        k = rng.randint(lo, hi)
        out.append(" ".join(f"w{w}" for w in words[at : at + k]))
        at += k
    return out


def modernbert(small: bool, attn: str) -> Any:
    import torch
    from transformers import ModernBertConfig, ModernBertForMaskedLM

    sizes = (
        dict(hidden_size=64, intermediate_size=96, num_hidden_layers=3, num_attention_heads=2)
        if small
        else dict(hidden_size=768, intermediate_size=1152, num_hidden_layers=22, num_attention_heads=12)
    )
    config = ModernBertConfig(
        vocab_size=50368,
        max_position_embeddings=8192,
        local_attention=128,
        global_attn_every_n_layers=3,
        pad_token_id=0,
        bos_token_id=2,
        cls_token_id=2,
        eos_token_id=3,
        sep_token_id=3,
        attn_implementation=attn,
        **sizes,
    )
    torch.manual_seed(0)
    return ModernBertForMaskedLM(config)


def bert(small: bool, attn: str) -> Any:
    import torch
    from transformers import BertConfig, BertForMaskedLM

    sizes = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=2) if small else {}
    config = BertConfig(pad_token_id=0, attn_implementation=attn, **sizes)  # vocabulary 30522
    torch.manual_seed(0)
    return BertForMaskedLM(config)


ARCHITECTURES = {"modernbert-base": modernbert, "bert-base": bert}


_SHIFTS: dict[Any, dict[str, Any]] = {}  # (architecture, small) → calibration: same seed, same weights


def calibrate_bias(
    model: Any, tokenizer: Any, docs: list[str], max_length: int, key: Any, rounds: int = 10
) -> dict[str, Any]:
    """Shift the vocabulary bias (bisection on one constant, at most ``rounds`` steps) until documents
    have ~TARGET_NNZ non-zeros."""
    import torch

    bias = model.get_output_embeddings().bias
    if key in _SHIFTS:
        with torch.no_grad():
            bias += _SHIFTS[key]["bias_shift"]
        return dict(_SHIFTS[key])
    base = bias.detach().clone()
    sample = docs[:256]
    lo, hi, nnz = 0.0, 16.0, None
    for _ in range(rounds):
        mid = (lo + hi) / 2
        with torch.no_grad():
            bias.copy_(base - mid)
        reps = encode(model, tokenizer, sample, max_length=max_length, batch_size=256, precision="bfloat16")
        nnz = sum(len(i) for i, _ in reps) / len(sample)
        if abs(nnz - TARGET_NNZ) < 0.1 * TARGET_NNZ:
            break
        lo, hi = (mid, hi) if nnz > TARGET_NNZ else (lo, mid)
    _SHIFTS[key] = {"bias_shift": -mid, "calibration_doc_nnz": round(cast(float, nnz), 1)}
    return dict(_SHIFTS[key])


def encode_rate(
    model: Any, tokenizer: Any, docs: list[str], *, batch_size: int, precision: str = "bfloat16", max_length: int = 256
) -> dict[str, Any]:
    """Steady state: one pass over ``docs`` to meet every width, then a timed pass."""
    _sync()
    t = time.perf_counter()
    encode(model, tokenizer, docs, max_length=max_length, batch_size=batch_size, precision=precision)
    first = _sync() - t
    info: dict[str, Any] = {}
    t = time.perf_counter()
    reps = encode(model, tokenizer, docs, max_length=max_length, batch_size=batch_size, precision=precision, info=info)
    secs = _sync() - t
    rate = len(docs) / secs
    out = {
        "docs": len(docs),
        "batch_size": batch_size,
        "precision": precision,
        "first_pass_s": round(first, 2),
        "steady_s": round(secs, 2),
        "docs_per_s": round(rate, 1),
        "msmarco_minutes": round(MSMARCO_PASSAGES / rate / 60, 1),
        "doc_nnz": round(sum(len(i) for i, _ in reps) / len(docs), 1),
        "forward_s": round(info.get("forward_s", 0.0), 2),
        "head_and_extraction_s": round(info.get("head_s", 0.0), 2),
        "path": info.get("path"),
    }
    for key in ("timings", "rejected", "candidates_fraction", "probe_s"):
        if info.get(key) not in (None, {}):
            out[key] = info[key]
    return out


def build(
    arch: str,
    attn: str,
    small: bool,
    device: Any,
    tokenizer: Any,
    docs: list[str],
    compiled: bool = False,
    backend: str = "inductor",
) -> tuple[Any, dict[str, Any]]:
    """A random-weight model of ``arch`` on ``device``, bias calibrated; optionally its body compiled."""
    import torch

    if attn == "varlen":  # benchmark.model.varlen: packed documents, flash varlen attention on CUDA
        varlen.register()
    model = ARCHITECTURES[arch](small, attn).eval().to(device)
    # the dry run's small models check the code path; 3 steps do that, a CPU step takes seconds
    notes = calibrate_bias(model, tokenizer, docs, 256, (arch, small), rounds=3 if small else 10)
    notes["attention"] = model.config._attn_implementation
    notes["parameters_m"] = round(sum(p.numel() for p in model.parameters()) / 1e6, 1)
    if compiled:
        body = model.base_model  # ModernBertModel / BertModel: everything before the MLM head
        compiled_body = torch.compile(body, dynamic=True, backend=backend)
        setattr(model, model.base_model_prefix, compiled_body)
        notes["compiled"] = f"torch.compile(base_model, dynamic=True, backend={backend!r})"
    return model, notes


def measure_encode(
    arch: str,
    attn: str,
    args: argparse.Namespace,
    device: Any,
    *,
    compiled: bool = False,
    precision: str = "bfloat16",
    n_docs: int | None = None,
    batch_size: int | None = None,
) -> Callable[[], dict[str, Any]]:
    def fn() -> dict[str, Any]:
        tokenizer = word_tokenizer(50368 if arch == "modernbert-base" else 30522)
        docs = passages(n_docs or args.docs, len(tokenizer))
        model, notes = build(
            arch,
            attn,
            args.dry_run,
            device,
            tokenizer,
            docs,
            compiled,
            backend="aot_eager" if args.dry_run else "inductor",
        )  # CPU inductor builds take minutes
        t = time.perf_counter()
        if compiled:  # compilation happens on the first call: time it apart
            encode(
                model,
                tokenizer,
                docs[:512],
                max_length=256,
                batch_size=batch_size or args.batch_size,
                precision=precision,
            )
            notes["compile_and_first_batches_s"] = round(_sync() - t, 1)
        return {
            **notes,
            **encode_rate(model, tokenizer, docs, batch_size=batch_size or args.batch_size, precision=precision),
        }

    return fn


class _StepTimer:
    """TrainerCallback: wall time of each optimizer step (the first ones are warm-up)."""

    def __new__(cls) -> Any:
        from transformers import TrainerCallback

        class Timer(TrainerCallback):
            def __init__(self) -> None:
                self.ends: list[float] = []

            def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
                self.ends.append(_sync())

        return Timer()


def measure_train(args: argparse.Namespace, device: Any) -> Callable[[], dict[str, Any]]:
    def fn() -> dict[str, Any]:
        import torch

        from benchmark.training.loop import train_splade  # the training stack: imported when measured
        from benchmark.training.recipe import load_recipe

        with tempfile.TemporaryDirectory() as tmp:
            init = Path(tmp) / "init"
            tokenizer = word_tokenizer(50368)
            modernbert(args.dry_run, "sdpa").save_pretrained(init)
            tokenizer.save_pretrained(init)
            texts = passages(3 * args.train_examples, len(tokenizer), seed=1)
            n = args.train_examples
            examples = [
                {"query": " ".join(texts[i].split()[:12]), "positive": texts[n + i], "negative": texts[2 * n + i]}
                for i in range(n)
            ]
            timer = _StepTimer()
            if torch.cuda.is_available():
                torch.cuda.reset_peak_memory_stats()
            record = train_splade(
                init,
                examples,
                load_recipe("msmarco-infonce"),
                Path(tmp) / "out",
                progress=False,
                overrides={
                    "max_steps": args.train_steps,
                    "batch_size": 32,
                    "logging_steps": 5,
                    "save_steps": args.train_steps + 1,
                    "query_max_length": 32,
                    "doc_max_length": args.train_length,
                },
                callbacks=[timer],
            )
            steps = [b - a for a, b in zip(timer.ends, timer.ends[1:])][1:]  # after the first (warm-up) ones
            rate = len(steps) / sum(steps) if steps else None
            keep = ("status", "steps", "precision", "steps_per_second", "final_loss", "final_nnz_q", "final_nnz_d")
            return {
                "batch_size": 32,
                "query_max_length": 32,
                "doc_max_length": args.train_length,
                "steady_steps_per_s": round(rate, 2) if rate else None,
                "steady_samples_per_s": round(32 * rate, 1) if rate else None,
                "peak_gpu_gib": round(torch.cuda.max_memory_allocated() / 2**30, 1)
                if torch.cuda.is_available()
                else None,
                **{k: record.get(k) for k in keep},
            }

    return fn


def measure_stage(args: argparse.Namespace, device: Any, compile: str = "none") -> Callable[[], dict[str, Any]]:
    """The encode stage as a suite runs it (``compile``: its ``[encode] compile``)."""

    def fn() -> dict[str, Any]:
        tokenizer = word_tokenizer(50368)
        docs = passages(args.docs, len(tokenizer), seed=2)
        model, notes = build("modernbert-base", "sdpa", args.dry_run, device, tokenizer, docs)
        with tempfile.TemporaryDirectory() as tmp:
            model.save_pretrained(Path(tmp) / "model")
            tokenizer.save_pretrained(Path(tmp) / "model")
            (Path(tmp) / "data" / "corpus").mkdir(parents=True)
            with open(Path(tmp) / "data" / "corpus" / "docs.jsonl", "w") as fh:
                fh.writelines(json.dumps({"id": str(i), "contents": d}) + "\n" for i, d in enumerate(docs))
            shard = max(1, args.docs // 4)
            t = time.perf_counter()
            stats = encode_docs_stage(
                Path(tmp) / "model",
                Path(tmp) / "data",
                Path(tmp) / "enc",
                max_length=256,
                batch_size=args.batch_size,
                shard_size=shard,
                precision="bfloat16",
                compile=compile,
                progress=False,
            )
            secs = time.perf_counter() - t
        rate = args.docs / secs
        encoder = stats.get("encoder", {})
        return {
            **notes,
            "docs": args.docs,
            "shard_size": shard,
            "docs_per_s": round(rate, 1),
            "compile": compile,
            "msmarco_minutes": round(MSMARCO_PASSAGES / rate / 60, 1),
            "doc_nnz": stats.get("doc_nnz"),
            "forward_s": round(encoder.get("forward_s") or 0.0, 2),
            "head_and_extraction_s": round(encoder.get("head_s") or 0.0, 2),
            "note": "includes loading the model per stage call, first-pass warm-up and writing shards",
        }

    return fn


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benchmark.perf gpu-profile", description=__doc__.splitlines()[0])
    p.add_argument("--dry-run", action="store_true", help="CPU, tiny models and sizes: checks every step runs")
    p.add_argument("--budget", type=float, help="seconds for all measurements (default 450; dry run 110)")
    p.add_argument("--docs", type=int, help="passages per encode measurement (default 40000; dry run 64)")
    p.add_argument("--batch-size", type=int, default=1024)
    p.add_argument("--train-steps", type=int, help="training steps (default 40; dry run 3)")
    p.add_argument("--only", help="comma-separated measurement names (default: all, in order)")
    p.add_argument("--out", type=Path, help="the JSON file (default: $OUT/gpu_profile.json, else results/gpu/)")
    args = p.parse_args(argv)
    args.budget = args.budget or (110.0 if args.dry_run else 450.0)
    args.docs = args.docs or (64 if args.dry_run else 40_000)
    args.train_steps = args.train_steps or (3 if args.dry_run else 40)
    args.train_length = 48 if args.dry_run else 256
    args.train_examples = 32 * (args.train_steps + 1)
    if args.dry_run:
        args.batch_size = min(args.batch_size, 32)
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    out = args.out or (
        Path(os.environ["OUT"]) / "gpu_profile.json"
        if os.environ.get("OUT")
        else (Path("results") / "gpu" / ("gpu_profile.dry-run.json" if args.dry_run else "gpu_profile.json"))
    )
    prof = Profile(out, args.budget)
    import torch
    import transformers

    cuda = torch.cuda.is_available() and not args.dry_run
    device = torch.device("cuda" if cuda else "cpu")
    if not cuda and not args.dry_run:
        prof.log("no CUDA device: pass --dry-run for a CPU check of the script")
        return 2
    prof.data.update(
        {
            "gpu": torch.cuda.get_device_name(0) if cuda else "none (CPU dry run)",
            "torch": torch.__version__,
            "transformers": transformers.__version__,
            "dry_run": args.dry_run,
            "docs": args.docs,
            "batch_size": args.batch_size,
            "msmarco_passages": MSMARCO_PASSAGES,
            "passages": "synthetic, 20-100 words of a word-level vocabulary (one token per word), max length 256",
            "target_doc_nnz": TARGET_NNZ,
        }
    )
    prof.write()
    scale = 0.25 if args.dry_run else 1.0  # the expected seconds below are for the H200 run
    plan: list[tuple[str, float, Callable[[], dict[str, Any]]]] = [
        ("encode_modernbert_sdpa_bf16", 45, measure_encode("modernbert-base", "sdpa", args, device)),
        ("encode_modernbert_varlen_bf16", 45, measure_encode("modernbert-base", "varlen", args, device)),
        ("encode_bert_sdpa_bf16", 35, measure_encode("bert-base", "sdpa", args, device)),
        (
            "encode_modernbert_varlen_compiled_bf16",
            120,
            measure_encode("modernbert-base", "varlen", args, device, compiled=True),
        ),
        ("encode_stage_modernbert_bf16_compiled", 110 if cuda else 60, measure_stage(args, device, "inductor")),
        ("train_modernbert_bf16_batch32", 60, measure_train(args, device)),
        (
            "encode_modernbert_sdpa_compiled_bf16",
            120,
            measure_encode("modernbert-base", "sdpa", args, device, compiled=True),
        ),
        ("encode_modernbert_eager_bf16", 45, measure_encode("modernbert-base", "eager", args, device)),
        ("encode_bert_sdpa_compiled_bf16", 80, measure_encode("bert-base", "sdpa", args, device, compiled=True)),
        (
            "encode_modernbert_sdpa_float32",
            60,
            measure_encode(
                "modernbert-base", "sdpa", args, device, precision="float32", n_docs=max(64, args.docs // 4)
            ),
        ),
        ("encode_stage_modernbert_bf16", 60 if cuda else 20, measure_stage(args, device)),
        (
            "encode_modernbert_sdpa_bf16_batch256",
            40,
            measure_encode("modernbert-base", "sdpa", args, device, batch_size=min(256, args.batch_size)),
        ),
    ]
    only = set(args.only.split(",")) if args.only else None
    if only is not None and not only <= {name for name, _, _ in plan}:
        bad = sorted(only - {name for name, _, _ in plan})[0]
        prof.log(
            f"error: {unknown('measurement', bad, [n for n, _, _ in plan], 'Pass --only with names from this list')}"
        )
        return 2
    for name, need, fn in plan:
        if only is None or name in only:
            prof.run(name, need * scale, fn)
    rates = {k: v["docs_per_s"] for k, v in prof.data["measurements"].items() if "docs_per_s" in v}
    if rates:
        best = max(rates, key=rates.__getitem__)
        prof.data["best_encode"] = {
            "measurement": best,
            "docs_per_s": rates[best],
            "msmarco_minutes": round(MSMARCO_PASSAGES / rates[best] / 60, 1),
        }
    prof.write()
    prof.log(f"wrote {out}")
    print(
        json.dumps(
            {k: prof.data[k] for k in ("best_encode", "errors", "skipped") if k in prof.data}, indent=2, default=str
        )[:4000]
    )
    return 0
