"""Training recipes are data: one TOML file each in ``benchmark/training/recipes/``, loaded strictly.

A recipe fixes everything that decides the trained model except the backbone, the examples and
the seed: the loss, the optimiser schedule, max lengths, the FLOPS weights λ_q / λ_d and their
warm-up, the attention implementation, the outcome rules' thresholds, the held-out dev signal and
which checkpoint is published. Each file cites the paper or config its numbers come from.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from benchmark.common.config import apply_overrides, from_dict, load_toml, with_overrides
from benchmark.common.errors import BenchmarkError, unknown
from benchmark.common.registry import Registry

#: Ranking loss → the example keys it needs, in column order (the first column is the query).
LOSS_COLUMNS: Registry[tuple[str, ...]] = Registry("loss", fix="Set loss to one of these in the recipe")
LOSS_COLUMNS.register("infonce", ("query", "positive", "negative"))
LOSS_COLUMNS.register("marginmse", ("query", "positive", "negative", "score"))

#: How λ grows from 0 to its final value over the first ``lambda_warmup_ratio`` of the steps
#: (names as in sentence-transformers' SpladeRegularizerWeightSchedulerCallback).
LAMBDA_SCHEDULES = ("quadratic", "linear")
DATASET_KINDS = ("ir_datasets", "huggingface")
#: learning-rate schedules after the linear warm-up (transformers' SchedulerType names)
LR_SCHEDULERS = ("linear", "cosine", "constant", "constant_with_warmup", "polynomial", "inverse_sqrt")
#: transformers' attention implementations that keep the padded [batch, length, hidden] layout the
#: fused pooling and the encoder's decoder hook rely on
ATTN_IMPLEMENTATIONS = ("sdpa", "eager", "flash_attention_2", "flash_attention_3", "flex_attention")
#: which weights a run publishes: the last step's, or those of the best held-out dev MRR@10
CHECKPOINTS = ("last", "best")


@dataclass(frozen=True)
class Recipe:
    """One SPLADE training recipe; see ``benchmark/training/recipes/*.toml`` for what each key means."""

    name: str
    description: str
    # data (the pipeline builds the examples; these say from what)
    dataset_kind: str
    dataset: str
    negatives: str
    max_examples: int  # 0: all
    # ranking loss
    loss: str
    mnrl_scale: float  # InfoNCE logit scale (1 / temperature); ignored by marginmse
    # optimisation
    learning_rate: float
    batch_size: int  # global: split evenly across DDP ranks
    epochs: float
    max_steps: int  # > 0 overrides epochs
    warmup_ratio: float  # linear learning-rate warm-up
    lr_scheduler: str
    weight_decay: float
    max_grad_norm: float  # global gradient-norm clipping; 0: none (naver/splade's trainer does not clip)
    query_max_length: int
    doc_max_length: int
    # FLOPS regulariser
    lambda_q: float
    lambda_d: float
    lambda_warmup_ratio: float
    lambda_schedule: str
    # memory: tokens per chunk of the vocabulary projection (0: one chunk, i.e. unchunked)
    chunk_size: int
    # transformers attn_implementation, pinned (the default differs across transformers versions)
    attn_implementation: str
    # bookkeeping
    logging_steps: int
    save_steps: int
    # outcome rules (benchmark.training.detector): a trigger needs trigger_patience consecutive
    # logging steps once λ is final; stop_on_collapse ends a triggered run at once
    dense_fraction: float  # density trigger: mean indexed terms per vector above this fraction of the vocabulary
    trigger_patience: int
    stop_on_collapse: bool
    # held-out dev signal: MRR@10 of dev_queries held-out queries among their in-batch candidates,
    # every dev_steps steps (0 queries: no dev signal, so no `degraded` outcome and no `best` checkpoint)
    dev_queries: int
    dev_steps: int
    checkpoint: str  # "last" or "best" (highest dev MRR@10 after step 0)

    def hyperparameters(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def with_overrides(self, overrides: dict[str, Any] | None, where: str = "overrides") -> Recipe:
        """A copy with ``overrides`` applied, validated like a recipe file."""
        if not overrides:
            return self
        if not isinstance(overrides, dict):
            raise BenchmarkError(f"{where} must be a dict of recipe keys, got {type(overrides).__name__}")
        if "name" in overrides:
            raise BenchmarkError(f"{where}: 'name' cannot be overridden; load another recipe instead")
        recipe = from_dict(Recipe, {**dataclasses.asdict(self), **overrides}, where)
        recipe.validate(where)
        return recipe

    def validate(self, where: str) -> None:
        """Range checks that types alone cannot express; ``where`` names the file in messages."""

        def bad(key: str, rule: str) -> BenchmarkError:
            return BenchmarkError(f"{where}: {key} = {getattr(self, key)!r} {rule}; fix the value")

        from benchmark.common.config import float32_problem

        for f in dataclasses.fields(self):
            problem = float32_problem(getattr(self, f.name))
            if problem:
                raise bad(f.name, problem)
        if self.loss not in LOSS_COLUMNS:
            raise BenchmarkError(f"{where}: {unknown('loss', self.loss, LOSS_COLUMNS)}")
        choices = {
            "lambda_schedule": LAMBDA_SCHEDULES,
            "dataset_kind": DATASET_KINDS,
            "lr_scheduler": LR_SCHEDULERS,
            "attn_implementation": ATTN_IMPLEMENTATIONS,
            "checkpoint": CHECKPOINTS,
        }
        for key, options in choices.items():
            if getattr(self, key) not in options:
                raise bad(key, f"must be one of {', '.join(options)}")
        positive = ("learning_rate", "batch_size", "query_max_length", "doc_max_length", "logging_steps", "save_steps")
        for key in positive:
            if not getattr(self, key) > 0:
                raise bad(key, "must be > 0")
        for key in ("mnrl_scale", "trigger_patience", "dev_steps"):
            if not getattr(self, key) > 0:
                raise bad(key, "must be > 0")
        for key in (
            "lambda_q",
            "lambda_d",
            "weight_decay",
            "max_grad_norm",
            "max_examples",
            "chunk_size",
            "dev_queries",
        ):
            if not getattr(self, key) >= 0:
                raise bad(key, "must be >= 0")
        for key in ("warmup_ratio",):
            if not 0 <= getattr(self, key) < 1:
                raise bad(key, "must be in [0, 1)")
        for key in ("lambda_warmup_ratio", "dense_fraction"):
            if not 0 < getattr(self, key) <= 1:
                raise bad(key, "must be in (0, 1]")
        if self.max_steps <= 0 and not (self.epochs > 0 and math.isfinite(self.epochs)):
            raise bad("epochs", "must be > 0 when max_steps <= 0")
        if self.loss == "infonce" and self.batch_size < 2:
            raise bad("batch_size", "must be >= 2 for in-batch negatives")
        if self.dev_steps % self.logging_steps:
            raise bad(
                "dev_steps", f"must be a multiple of logging_steps = {self.logging_steps} (dev rows are telemetry rows)"
            )
        if self.dev_queries == 1:
            raise bad("dev_queries", "must be 0 (no dev signal) or >= 2 (a standard error needs two queries)")
        if self.checkpoint == "best" and not self.dev_queries:
            raise bad("checkpoint", "needs dev_queries > 0 (best is chosen on the held-out dev MRR@10)")


def _recipe_dir() -> Path:
    return Path(str(resources.files("benchmark.training.recipes")))


#: Packaged recipe name → TOML path (the folder is scanned once, at import).
RECIPES: Registry[Path] = Registry("recipe", fix="Pass one of these, or a path to a recipe .toml file")
for _path in sorted(_recipe_dir().glob("*.toml")):
    RECIPES.register(_path.stem, _path)


#: the recipe file's key naming the split its values were tuned on: a record, never an input to training
#: (kept out of ``Recipe``, so out of the train stage's id)
TUNED_ON = "tuned_on"


def _recipe_path(name: str | Path) -> Path:
    path = Path(name)
    return path if path.suffix == ".toml" and path.is_file() else RECIPES[str(name)]


def recipe_tuned_on(name: str | Path) -> str:
    """The splits a recipe's values were tuned on, as its file records them, joined by ", " ("" when a file
    of one's own says nothing); a table reporting on one of them favours the recipe's arm."""
    value = load_toml(_recipe_path(name)).get(TUNED_ON, "")
    if value == "":
        return ""
    splits = [value] if isinstance(value, str) else value
    if not isinstance(splits, list) or not all(isinstance(s, str) and s and ", " not in s for s in splits):
        raise BenchmarkError(
            f"recipe {name}: {TUNED_ON} = {value!r} must name a split or a list of splits, e.g. "
            "'beir/scifact/train' or ['beir/scifact/train', 'beir/nfcorpus/dev']"
        )
    return ", ".join(splits)


def load_recipe(name: str | Path, overrides: Sequence[tuple[list[str], Any]] = ()) -> Recipe:
    """A packaged recipe by name (see ``RECIPES``), or a recipe TOML file by path; ``overrides``
    (``--set recipe.key=value``) change its values before they are checked."""
    path = _recipe_path(name)
    data = apply_overrides(load_toml(path), list(overrides), "recipe")
    data.pop(TUNED_ON, None)  # a record of the recipe's history, not a training value
    try:
        recipe = from_dict(Recipe, data, path.name)
        if str(name) in RECIPES and recipe.name != path.stem:
            raise BenchmarkError(
                f"{path.name}: name = {recipe.name!r} must equal the file name; set name = {path.stem!r}"
            )
        recipe.validate(path.name)
    except BenchmarkError as exc:  # the --set values checked with the file's: say which were given
        raise with_overrides(exc, [(["recipe", *p], v) for p, v in overrides]) from None
    return recipe
