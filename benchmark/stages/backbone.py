"""The backbone stage: a ``*ForMaskedLM`` checkpoint, its MLM head rescaled (or not), saved as ``model/``.

Its id sees the checkpoint's content (a local folder's files, or a hub id at a commit), so
replacing the checkpoint behind a name gives new stages instead of reusing the old ones.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmark.stage import Inputs, StageKind


class Backbone(StageKind):
    name = "backbone"
    VERSION = 3  # 2: rescaling methods and match statistics; 3: the paper's method projection (the default), its α in the record
    sources = ("benchmark.backbone", "benchmark.rescale", "benchmark.heads", "benchmark.stages.backbone")

    @dataclass(frozen=True)
    class Config:
        backbone: str  # registry key, hub id or local folder
        rescale: dict[str, Any] = field(default_factory=dict)  # a benchmark.rescale.Rescale as a dict

    @classmethod
    def external(cls, config: Config) -> dict[str, Any]:
        from benchmark.fingerprint import checkpoint_fingerprint

        out = {"checkpoint": checkpoint_fingerprint(config.backbone)}
        match = config.rescale.get("match")
        if isinstance(match, str):  # the head is matched to another backbone: its content matters too
            out["reference"] = checkpoint_fingerprint(match)
        return out

    @classmethod
    def describe(cls, config: Config) -> str:
        from benchmark.rescale import Rescale

        return f"{config.backbone}: {Rescale(**config.rescale).description}"

    @classmethod
    def run(cls, config: Config, inputs: Inputs, out: Path, ctx: Any) -> dict[str, Any]:
        from benchmark.backbone import prepare_backbone
        from benchmark.rescale import Rescale

        return prepare_backbone(config.backbone, Rescale(**config.rescale), out / "model")

    @staticmethod
    def model(folder: Path) -> Path:
        """The saved ``*ForMaskedLM`` + tokenizer (what training and encoding load)."""
        return Path(folder) / "model"
