"""SPLADE training recipes: one TOML file each (package data), loaded by ``benchmark.training.recipe.load_recipe``."""
