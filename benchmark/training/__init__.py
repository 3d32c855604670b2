"""SPLADE training API: ``load_recipe``, ``RECIPES`` and ``train_splade``.

Recipes load without torch; ``train_splade`` (:func:`benchmark.training.loop.train_splade`) is
imported on first access, with the training stack (torch, transformers, sentence-transformers), so
the CLI stays fast to start.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from benchmark.training.recipe import LOSS_COLUMNS, RECIPES, Recipe, load_recipe

if TYPE_CHECKING:
    from benchmark.training.loop import train_splade

__all__ = ["LOSS_COLUMNS", "RECIPES", "Recipe", "load_recipe", "train_splade"]


def __getattr__(name: str) -> Any:
    if name == "train_splade":
        from benchmark.training.loop import train_splade

        return train_splade
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
