"""benchmark: an end-to-end harness for learned sparse retrieval (SPLADE) and MLM-head rescaling.

One folder per layer, from the bottom up (``tests/test_layout.py`` holds the order, and nothing imports a
layer above its own): ``common`` → ``formats`` → ``data`` → ``model`` → ``splade`` → ``training`` →
``retrieval`` → ``evaluation`` → ``stages`` → ``suites`` → ``pipeline`` → ``report`` → ``perf``; ``run``
is the command on top (``python -m benchmark.run``).
"""

__version__ = "0.1.0"
