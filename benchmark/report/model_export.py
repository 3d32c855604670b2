"""``python -m benchmark.report.model_export``: each trained model of a suite as a full sentence-transformers
``SparseEncoder`` folder, with a model card, that ``SparseEncoder(path)``, Pyserini's
``SpladeQueryEncoder(path)`` and ``AutoModelForMaskedLM.from_pretrained(path)`` load as they are.

The harness's train stage keeps a bare ``*ForMaskedLM`` + tokenizer (``runs/train/<id>/model``); the
export adds ``modules.json`` (MLMTransformer → SpladePooling: max over tokens of log(1 + relu(logit)),
the harness's own encoding), ``max_seq_length`` (the suite's document length) and a ``README.md``
model card (recipe, rescale method and factor, training outcome, scores, the command). A folder
``--push-to-hub ORG`` also uploads (``ORG/<folder name>``; needs a Hugging Face token).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmark.common.confine import confined
from benchmark.common.errors import BenchmarkError
from benchmark.common.leftovers import hold, let_go, scratch_name, sweep_leftovers

MODEL = "model"  # the train stage's model folder
CARD = "README.md"
# What an export made: the train stage it holds and its files. A later export replaces a folder only when
# this says it is an earlier export of the same model and the folder holds nothing else.
MADE = "benchmark_export.json"


def fold_for_export(model: Any) -> Any:
    """The model with the projection scale α its harness loader applies (method ``projection``:
    ``config.mlm_projection_scale``, a constant on the decoder's input) folded into ordinary weights, so
    that any loader gives the harness's logits: W(α h) with h = γ⊙n + β is W((αγ)⊙n + αβ), so the head
    LayerNorm's γ and β take α (the decoder bias already holds it) and the config's α becomes 1."""
    import torch

    from benchmark.model.heads import PROJECTION_SCALE, attach_projection_scale, mlm_head, projection_scale

    factor = projection_scale(model)
    if factor == 1.0:
        return model
    norm = mlm_head(model).norm
    if norm.weight is None:
        raise BenchmarkError(
            f"cannot export {type(model).__name__} with projection scale {factor:g}: its head "
            "LayerNorm has no gain γ to carry it"
        )
    with torch.no_grad():
        norm.weight.mul_(factor)
        if norm.bias is not None:
            norm.bias.mul_(factor)
    setattr(model.config, PROJECTION_SCALE, 1.0)
    attach_projection_scale(model)  # removes a hook a harness loader installed: α now lives in γ, β
    return model


def export_name(c: Any) -> str:
    """The folder (and hub repository) name of a condition's model: ``splade-bert-tiny-x4-head-norm-4-seed44``."""
    from benchmark.report.results import run_tag

    tag = run_tag(c)  # a local backbone's label carries ~<digest>: a hub repository name may not
    for char in ".=+:@~":
        tag = tag.replace(char, "-")
    return tag


def stage_config(runs: Path, stage_id: str) -> dict[str, Any]:
    kind = stage_id.rsplit("-", 1)[0]
    path = Path(runs) / kind / stage_id / "config.json"
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise BenchmarkError(
            f"{path} cannot be read ({exc}); pass the runs folder the suite ran in as --runs-dir"
        ) from None


def encode_lengths(runs: Path, search_id: str) -> tuple[int, int | None]:
    """(document max length, query max length) of the encode and queries stages behind a search."""
    parents = stage_config(runs, search_id).get("parents", {})
    docs = parents.get("docs")
    if not docs:
        raise BenchmarkError(f"search stage {search_id} has no encode parent (docs); only SPLADE runs export a model")
    doc_len = int(stage_config(runs, docs)["config"]["max_length"])
    queries = parents.get("queries")
    query_len = stage_config(runs, queries)["config"].get("max_length") if queries else None
    return doc_len, None if query_len is None else int(query_len)


def verified_model(runs: Path, train_id: str) -> Path:
    """The train stage's model folder, once its files are exactly those its config.json records, sha256
    included: the card states that stage's scores, so other weights under its name must not be exported."""
    from benchmark.stages.store import COMPLETE, files_problem

    meta = stage_config(runs, train_id)
    folder = Path(runs) / "train" / train_id
    problem = (
        "it is not a finished train stage"
        if meta.get("status") != COMPLETE or meta.get("id") != train_id
        else files_problem(folder, meta, hashes=True)
    )
    if problem:
        raise BenchmarkError(
            f"train stage {folder} is damaged ({problem}), so its model is not the one scored; nothing "
            "exported. Rerun the suite (a damaged stage is recomputed) and export again"
        )
    return folder / MODEL


def _files(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if not p.is_dir())


def target_problem(target: Path, train_id: str) -> str | None:
    """Why the export may not replace ``target``: it exists and is not an earlier export of this train
    stage holding only what that export made (a user's folder, or files added to an export, are kept)."""
    target = Path(target)
    if not target.exists() and not target.is_symlink():
        return None
    if target.is_symlink() or not target.is_dir():
        return f"export target {target} exists and is not a folder this export made"
    try:
        made = json.loads((target / MADE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        made = None
    if not isinstance(made, dict) or made.get("train_id") != train_id:
        what = (
            f"an export of another model ({made.get('train_id')})"
            if isinstance(made, dict) and made.get("train_id")
            else f"not an export (no {MADE})"
        )
        return f"export target {target} exists and is {what}"
    extra = sorted(set(_files(target)) - set(made.get("files") or []) - {MADE})
    if extra:
        return f"export target {target} holds files the export did not make ({', '.join(extra[:3])})"
    return None


def _readable(folder: Path) -> None:
    """The export's modes as the user's umask gives them (scratch folders and atomic writes make 0700/0600)."""
    mask = os.umask(0)
    os.umask(mask)
    for path in [folder, *folder.rglob("*")]:
        if not path.is_symlink():
            path.chmod((0o777 if path.is_dir() else 0o666) & ~mask)


def save_sparse_encoder(model_dir: Path, out: Path, *, max_seq_length: int, card: str, train_id: str = "") -> Path:
    """``out``: the model of ``model_dir`` as a SparseEncoder folder with ``card`` as its README (atomic:
    the folder is built beside ``out``, renamed into place, and removed if anything fails). An existing
    ``out`` is replaced only when it is an earlier export of the same train stage (``target_problem``)."""
    out = Path(out)
    problem = target_problem(out, train_id)
    if problem:
        raise BenchmarkError(f"{problem}; nothing exported. Move it away or pass another --out")
    sweep_leftovers(out.parent)
    tmp = out.with_name(scratch_name(out.name, "tmp"))
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    hold(tmp)  # kept by every sweeper while this export writes into it, whatever PID namespace it runs in
    try:
        return _save_sparse_encoder(model_dir, out, tmp, max_seq_length, card, train_id)
    except Exception as exc:  # safetensors reports a full disk as its own error, not an OSError
        from benchmark.common import disk

        if not isinstance(exc, OSError) and disk.NO_SPACE in str(exc):
            raise disk.full_error(tmp) from None
        raise
    finally:
        let_go(tmp)
        shutil.rmtree(tmp, ignore_errors=True)


def _save_sparse_encoder(model_dir: Path, out: Path, tmp: Path, max_seq_length: int, card: str, train_id: str) -> Path:
    from sentence_transformers import SparseEncoder
    from sentence_transformers.sparse_encoder.modules import MLMTransformer, SpladePooling

    from benchmark.model.checkpoints import quiet_transformers

    logging.getLogger("sentence_transformers").setLevel(logging.ERROR)  # MLMTransformer's deprecation notice
    with quiet_transformers():  # transformers' "Loading weights" and "Writing" bars, one per model, are noise here
        mlm = MLMTransformer(str(model_dir), max_seq_length=max_seq_length)
        mlm.auto_model = fold_for_export(mlm.auto_model)
        encoder = SparseEncoder(
            modules=[mlm, SpladePooling(pooling_strategy="max", activation_function="relu")], device="cpu"
        )
        encoder.save(str(tmp), create_model_card=False)
    config = tmp / "sentence_bert_config.json"  # sentence-transformers 5 reads the length here (6: the tokenizer's)
    config.write_text(
        json.dumps({**json.loads(config.read_text(encoding="utf-8")), "max_seq_length": max_seq_length}, indent=4)
        + "\n",
        encoding="utf-8",
    )
    (tmp / CARD).write_text(card, encoding="utf-8")
    (tmp / MADE).write_text(json.dumps({"train_id": train_id, "files": _files(tmp)}, indent=1) + "\n", "utf-8")
    _readable(tmp)
    old = out.with_name(scratch_name(out.name, "old"))
    if out.exists():  # an earlier export of this model (target_problem): moved aside, then removed
        os.replace(out, old)
    os.replace(tmp, out)
    shutil.rmtree(old, ignore_errors=True)
    return out


def model_card(c: Any, results: Any, *, name: str, doc_len: int, query_len: int | None) -> str:
    """The card: what was trained how, what it scored (every dataset of the suite), how to load it."""
    from benchmark.report.labels import system_label
    from benchmark.report.table import describe_outcome, short_name

    scores = [r for r in results.conditions if r.train_id == c.train_id and r.scored]
    measures = list(
        dict.fromkeys(
            [
                *(m for r in scores for m in results.dataset_measures.get(r.dataset, results.measures)),
                *(m for r in scores for m in r.metrics),
            ]
        )
    )
    measures = [m for m in measures if any(m in r.metrics for r in scores)]
    training = results.training.removeprefix("Training: ") or "the suite's recipe (see the command)."
    # the means read_results derived from the per-query values, over the queries counted here
    table = ["| dataset | " + " | ".join(measures) + " | queries |", "|---|" + "---:|" * (len(measures) + 1)]
    table += [
        f"| {short_name(r.dataset)} (`{r.dataset}`) | "
        + " | ".join(f"{r.metrics[m]:.4f}" if m in r.metrics else "" for m in measures)
        + f" | {r.queries if r.queries is not None else ''} |"
        for r in scores
    ]
    rescale = (
        f"method `{c.method}`, factor {c.factor}" + (f" (applied: ×{c.scale:.4g})" if c.scale is not None else "")
        if c.method
        else "none (the pretrained MLM head, unscaled)"
    )
    front = [
        "---",
        "library_name: sentence-transformers",
        "pipeline_tag: feature-extraction",
        "language: en",
        "tags:",
        "- sentence-transformers",
        "- sparse-encoder",
        "- sparse",
        "- splade",
        "---",
        "",
    ]
    body = [
        f"# {name}",
        "",
        f"{system_label(*c.row)}: a SPLADE model (max over tokens of log(1 + relu(MLM logits))) trained by the "
        f"benchmark harness of *Rescaling MLM-Head for Neural Sparse Retrieval*, suite `{results.suite}`"
        + (f" @ {results.subset}" if results.subset else "")
        + ".",
        "",
        f"- Backbone: `{c.backbone}`",
        f"- MLM-head rescale: {rescale}",
        f"- Training: {training}" + ("" if c.seed is None else f" Seed {c.seed}."),
        f"- Training outcome: {describe_outcome(c)}",
        f"- Lengths: documents {doc_len} tokens (`max_seq_length`)"
        + ("" if query_len is None else f", queries {query_len} tokens in the harness"),
        "",
        "## Scores",
        "",
        *table,
        "",
        "Impacts were indexed as round(100·w) in a Lucene impact index and searched by Pyserini; measures "
        "are ir_measures', each a mean over the dataset's judged queries (the per-query values).",
        "",
        "## Reproduce",
        "",
        "```",
        c.command or "(not recorded)",
        "```",
        "",
        "## Use",
        "",
        "```python",
        "from sentence_transformers import SparseEncoder",
        "",
        f'model = SparseEncoder("{name}")',
        'docs = model.encode_document(["a passage"])  # sparse vocabulary-sized vectors',
        'query = model.encode_query("a question")',
        "```",
        "",
        "Pyserini: `SpladeQueryEncoder(path)` (and `AutoModelForMaskedLM.from_pretrained(path)`) load the "
        "same folder; Pyserini quantises query weights as round(w / 5 · 256).",
        "",
    ]
    return "\n".join(front + body)


def export_suite(
    folder: Path, runs: Path, out: Path, push_to_hub: str | None = None, say: Callable[[str], None] = print
) -> list[Path]:
    """Every scored trained model of the results ``folder`` into ``out/<name>/``, as a sentence-transformers
    ``SparseEncoder`` folder that owns only the files it wrote.

    Args:
        folder: a results folder (``results/<suite>/``).
        runs: the runs folder holding its train stages (each model is verified against its record).
        out: where the model folders go.
        push_to_hub: a hub repository prefix to push each folder to (default: none).
        say: where the per-model lines go.

    Returns:
        The exported folders.
    """
    from benchmark.report.results import read_results

    results = read_results(folder)
    trained: dict[str, Any] = {}
    for c in results.conditions:
        if c.trained and c.train_id and c.scored and c.search_id:
            trained.setdefault(c.train_id, c)
    if not trained:
        raise BenchmarkError(f"{folder} has no scored trained model to export; run the suite first")
    refused = [
        problem
        for train_id, c in trained.items()
        if (problem := target_problem(confined(Path(out), export_name(c), "an exported model's name"), train_id))
    ]
    if refused:  # before any model is written: an export owns only what it made
        raise BenchmarkError(
            f"{refused[0]}{f' (and {len(refused) - 1} more)' if len(refused) > 1 else ''}; nothing exported. "
            "Move it away or pass another --out"
        )
    written = []
    for train_id, c in trained.items():
        model_dir = Path(runs) / "train" / train_id / MODEL
        if not (model_dir / "config.json").is_file():
            raise BenchmarkError(f"no model in {model_dir}; pass the runs folder {folder.name} ran in as --runs-dir")
        verified_model(Path(runs), train_id)
        doc_len, query_len = encode_lengths(Path(runs), c.search_id)
        name = export_name(c)
        target = save_sparse_encoder(
            model_dir,
            confined(Path(out), name, "an exported model's name"),
            max_seq_length=doc_len,
            card=model_card(c, results, name=name, doc_len=doc_len, query_len=query_len),
            train_id=train_id,
        )
        say(f"exported {target}")
        if push_to_hub:
            from sentence_transformers import SparseEncoder

            repo = f"{push_to_hub}/{name}"
            SparseEncoder(str(target), device="cpu").push_to_hub(repo, exist_ok=True, replace_model_card=False)
            say(f"pushed {repo}")
        written.append(target)
    return written


def out_problem(out: Path, runs: Path, results: Path) -> str | None:
    """An ``--out`` inside the runs folder (a stage's files, which ``--verify`` would call damage) or a results
    folder (which the next publish of its suite replaces) is refused: the export would not stay."""
    target = out.expanduser().resolve()
    for folder, what in ((runs, "the runs folder --runs-dir"), (results, "the results folder --results-dir")):
        root = folder.expanduser().resolve()
        if target == root or root in target.parents:
            return (
                f"--out {str(out)!r} is inside {what} ({folder}), whose contents the harness replaces; "
                "pass --out exports (the default) or another folder outside it"
            )
    for each in (target, *target.parents):
        if (each / "results.json").is_file():
            return (
                f"--out {str(out)!r} is inside the results folder {each}, which the next report of its suite "
                "replaces; pass --out exports (the default) or another folder outside it"
            )
    return None


def build_parser() -> argparse.ArgumentParser:
    from benchmark.common.command_line import parser

    p = parser("python -m benchmark.report.model_export", __doc__)
    p.add_argument("--suite", required=True, help="the results folder under --results-dir (e.g. smoke)")
    p.add_argument(
        "--results-dir",
        default=os.environ.get("BENCHMARK_RESULTS_DIR", "results"),
        help="the folder of results folders ($BENCHMARK_RESULTS_DIR)",
    )
    p.add_argument(
        "--runs-dir",
        default=os.environ.get("BENCHMARK_RUNS_DIR", "runs"),
        help="the runs folder the suite ran in (its train stages hold the models) ($BENCHMARK_RUNS_DIR)",
    )
    p.add_argument("--out", default="exports", help="one SparseEncoder folder per trained model goes here")
    p.add_argument(
        "--push-to-hub",
        metavar="ORG",
        help="also upload each folder to the Hugging Face Hub as ORG/<name> (needs a token) (default: none)",
    )
    return p


def main(argv: list[str] | None = None) -> int:
    from benchmark.common.signals import Interrupted, install_signal_handlers, interrupted_exit

    args = build_parser().parse_args(argv)
    install_signal_handlers()
    try:
        folder = Path(args.results_dir) / args.suite
        if not folder.is_dir():
            from benchmark.common.command_line import did_you_mean

            there = sorted(f.parent.name for f in Path(args.results_dir).glob("*/results.json"))
            close = did_you_mean(args.suite, there)
            hint = f" (did you mean {close!r}?)" if close else ""
            raise BenchmarkError(
                f"no results folder {folder}{hint}; pass --suite NAME of a folder under --results-dir "
                f"({', '.join(there) or 'none yet: run the suite first'})"
            )
        from benchmark.pipeline.preflight import output_dir_problem

        problem = output_dir_problem(args.out, "export", "--out") or out_problem(
            Path(args.out), Path(args.runs_dir), Path(args.results_dir)
        )
        if problem:
            raise BenchmarkError(problem)
        export_suite(folder, Path(args.runs_dir), Path(args.out), args.push_to_hub)
    except BenchmarkError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:  # a full disk, or a folder made read-only after the check: one line, nothing left behind
        from benchmark.common.disk import is_full

        fix = (
            "free space there or pass --out DIR on a larger disk"
            if is_full(exc)
            else "fix its permissions or pass --out DIR"
        )
        print(
            f"error: cannot write the export to {args.out} ({exc.strerror or type(exc).__name__}); {fix}, and export "
            "again (nothing half-written was left there)",
            file=sys.stderr,
        )
        return 2
    except (KeyboardInterrupt, Interrupted) as exc:  # its scratch folder is removed on the way out
        return interrupted_exit(exc, f"nothing half-written was left in {args.out}; export again")
    return 0


if __name__ == "__main__":
    sys.exit(main())
