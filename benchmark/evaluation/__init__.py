"""Scoring runs: ir_measures on a run file (``measures``), paired significance tests (``significance``),
and TREC runs made elsewhere, evaluated as one more system (``external_runs``)."""
