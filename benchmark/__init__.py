"""benchmark: an end-to-end harness for learned sparse retrieval (SPLADE) and MLM-head rescaling.

One folder per layer, from the bottom up (``tests/package/test_layout.py`` holds the order, and nothing imports a
layer above its own): ``common`` → ``formats`` → ``data`` → ``model`` → ``splade`` → ``training`` →
``retrieval`` → ``evaluation`` → ``stages`` → ``suites`` → ``pipeline`` → ``report`` → ``perf``; ``run``
is the command on top (``python -m benchmark.run``), and ``api`` the Python API above it
(``benchmark.evaluate``, ``benchmark.load_results``; docs/python-api.md), imported at first use.
"""

from typing import Any

from benchmark.common.version import __version__

__all__ = ["__version__", "evaluate", "load_results"]


def __getattr__(name: str) -> Any:
    """``benchmark.evaluate`` and ``benchmark.load_results``, imported at first use: ``import benchmark``
    loads neither torch nor Pyserini."""
    if name in ("evaluate", "load_results"):
        from benchmark import api

        return getattr(api, name)
    raise AttributeError(f"module 'benchmark' has no attribute {name!r}")
