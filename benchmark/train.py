"""SPLADE training API: ``load_recipe``, ``RECIPES`` and ``train_splade``.

Recipes load without torch; ``train_splade`` imports the training stack (torch, transformers,
sentence-transformers) on first call, so the CLI stays fast to start.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchmark.training.recipe import LOSS_COLUMNS, RECIPES, Recipe, load_recipe

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["LOSS_COLUMNS", "RECIPES", "Recipe", "load_recipe", "train_splade"]


def train_splade(
    init_dir: Path,
    examples: Sequence[dict[str, Any]],
    recipe: Recipe,
    out_dir: Path,
    *,
    seed: int = 42,
    progress: bool = True,
    overrides: dict[str, Any] | None = None,
    callbacks: Sequence[Any] = (),
) -> dict[str, Any]:
    """Train SPLADE from ``init_dir`` into ``out_dir`` (resuming a killed run); see :mod:`benchmark.training.loop`."""
    from benchmark.training.loop import train_splade as _train

    return _train(init_dir, examples, recipe, out_dir, seed=seed, progress=progress, overrides=overrides, callbacks=callbacks)
