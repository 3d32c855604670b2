"""What tests share: tiny checkpoints (``tiny_models``), SciFact triples (``triples``), the forward
comparisons (``forwards``) and the pipeline command (``pipeline``). Programs that tests run in their own
processes (``ddp_worker``, ``kill_harness``, ``memory_probe``, ``ray_*``) stay beside the tests."""
