"""SPLADE training recipes: one TOML file each (package data), loaded by ``benchmark.train.load_recipe``."""
