"""SPLADE training recipes: one TOML file each (package data), loaded by ``benchmark.training.load_recipe``."""
