"""benchmark: an end-to-end harness for learned sparse retrieval (SPLADE) and MLM-head rescaling."""

__version__ = "0.1.0"
