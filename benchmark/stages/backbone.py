"""The backbone stage: a ``*ForMaskedLM`` checkpoint, its MLM head rescaled (or not), saved as ``model/``.

Its id sees the checkpoint's content (a local folder's files, or a hub id at a commit), so
replacing the checkpoint behind a name gives new stages instead of reusing the old ones; the name
itself stays out of the id, so a registry key, its hub id and a folder of the same files are one stage.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmark.common import kill_points
from benchmark.common.errors import BenchmarkError
from benchmark.common.fingerprint import file_digest
from benchmark.data import samples
from benchmark.formats.checkpoint import model_path
from benchmark.model.checkpoints import quiet_transformers
from benchmark.model.loader import backbone_fingerprint, backbone_key, load_backbone, resolve_backbone
from benchmark.model.rescale import STATISTICS, Rescale, apply_rescale
from benchmark.stages.records import BackboneRecord
from benchmark.stages.store import Context, Inputs, StageKind, label_field


def _replace_dir(tmp: Path, out_dir: Path) -> None:
    """Move a finished ``tmp`` folder onto ``out_dir``, replacing only a previous checkpoint."""
    if out_dir.exists():
        if out_dir.is_dir() and (not any(out_dir.iterdir()) or (out_dir / "config.json").is_file()):
            shutil.rmtree(out_dir)
        else:
            shutil.rmtree(tmp, ignore_errors=True)
            raise BenchmarkError(f"{out_dir} exists and is not a saved backbone; choose an empty or new folder")
    os.replace(tmp, out_dir)


def _load_snapshot(name: str, planned: Mapping[str, Any] | None, scratch: Path) -> tuple[Any, Any]:
    """``load_backbone(name)``; a local folder whose content the plan fingerprinted is copied into ``scratch``
    first (one read, hashed) and loaded from the copy once its digest is the planned one."""
    source = Path(resolve_backbone(name))
    if not (planned and "digest" in planned and source.is_dir()):
        return load_backbone(name)
    from benchmark.common.fingerprint import digest_of_tree, tree_files
    from benchmark.common.snapshot import changed_since_planned, copy_hashed

    try:
        digest = digest_of_tree({rel: copy_hashed(source / rel, scratch / rel) for rel in tree_files(source)})
        if digest != planned["digest"]:
            raise changed_since_planned(f"backbone {name!r} ({source})", planned["digest"], digest)
        try:
            return load_backbone(str(scratch))
        except BenchmarkError as exc:  # named by the folder given, not by its copy
            raise BenchmarkError(str(exc).replace(str(scratch), str(source))) from None
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def prepare_backbone(
    name: str, spec: Rescale, out_dir: Path, planned: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """Load ``name``, rescale its MLM head per ``spec``, save model + tokenizer into ``out_dir``.

    The folder is written next to ``out_dir`` first and moved into place when complete, so an
    interrupted run never leaves a half-saved backbone. A local checkpoint is read from a snapshot
    whose content must be ``planned`` (the stage id's fingerprint). Returns the record for the stage's
    config: the backbone, the spec, and ``benchmark.model.rescale.apply_rescale``'s record (method,
    factor, params/tied/norms before and after, and the match statistic in match mode).
    """
    out_dir = Path(out_dir)
    model, tokenizer = _load_snapshot(name, planned, out_dir.parent / ".inputs")
    record: dict[str, Any] = {
        "backbone": backbone_key(name),
        "source": resolve_backbone(name),
        "model_type": model.config.model_type,
        "vocab_size": int(model.config.vocab_size),
        "hidden_size": int(model.config.hidden_size),
        "rescale": spec.to_dict(),
        **apply_rescale(model, spec, tokenizer),
    }
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = out_dir.parent / f".{out_dir.name}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    with quiet_transformers():
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
    kill_points.point("backbone:saved")
    _replace_dir(tmp, out_dir)
    return record


class Backbone(StageKind["Backbone.Config", BackboneRecord]):
    name = "backbone"
    # 2: rescaling methods and match statistics; 3: the constant multiplier projection, its α in the record (the
    # paper's once, the default, since: same output for every earlier config)
    VERSION = 3
    Record = BackboneRecord
    sources = (
        "benchmark.common.snapshot",
        "benchmark.data.samples",
        "benchmark.formats.checkpoint",
        "benchmark.model.checkpoints",
        "benchmark.model.heads",
        "benchmark.model.loader",
        "benchmark.model.rescale",
        "benchmark.stages.backbone",
    )

    @dataclass(frozen=True)
    class Config:
        backbone: str = label_field()  # registry key, hub id or local folder (its content is in external())
        # the id hashes it as Rescale.to_dict gives it (dataclasses.asdict), as when it was stored as that dict
        rescale: Rescale = field(default_factory=Rescale)

        def __post_init__(self) -> None:
            if isinstance(self.rescale, Mapping):  # a spec written as data (a test, a script)
                object.__setattr__(self, "rescale", Rescale(**self.rescale))

    @classmethod
    def external(cls, config: Config) -> dict[str, Any]:
        out: dict[str, Any] = {"checkpoint": backbone_fingerprint(config.backbone)}
        spec = config.rescale
        if isinstance(spec.match, str):  # the head is matched to another backbone: its content matters too
            out["reference"] = backbone_fingerprint(spec.match)
        if spec.mode == "match" and STATISTICS[spec.match_stat].needs_text:  # α is measured on the shipped sample text
            out["sample"] = file_digest(samples.sample_path())
        return out

    @classmethod
    def describe(cls, config: Config) -> str:
        return f"{config.backbone}: {config.rescale.description}"

    @classmethod
    def run(cls, config: Config, inputs: Inputs, out: Path, ctx: Context) -> BackboneRecord:
        return BackboneRecord.from_json(
            prepare_backbone(config.backbone, config.rescale, model_path(out), inputs.external.get("checkpoint"))
        )
