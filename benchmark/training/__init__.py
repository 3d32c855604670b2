"""SPLADE training: recipes as data (``recipe``, the TOML files in ``recipes/``), the training loop
(``loop.train_splade``), the training max-pool (``max_pool``), losses, the held-out dev batch, the
outcome detector and its vocabulary (``detector``, ``outcomes``), examples on disk, telemetry, and
data-parallel workers on Ray (``ray_cluster``).

Recipes load without torch; ``loop`` imports the training stack (torch, transformers,
sentence-transformers), so import it where training runs, and the CLI stays fast to start.
"""
