"""SPLADE training: recipes (data), the fused pooling, the losses, telemetry and the training loop.

Import the public API from :mod:`benchmark.train`; only ``recipe`` is light, the rest imports torch.
"""
