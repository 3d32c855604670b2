"""The one status vocabulary: how a training run ended, and what a table cell can show.

A training run's outcome is a result, decided by the rules in ``benchmark.training.detector``:
``ok``, ``degraded`` (its published checkpoint ranks the held-out queries worse than its start did)
or ``collapsed`` (a trigger fired). The judgements against other runs (``degraded`` against the
baseline arm or the BERT reference, ``dense`` against the reference) are made by
``benchmark.report.judgements``. A table cell is one of those, or ``missing`` (not run yet).
"""

from __future__ import annotations

OK = "ok"
DEGRADED = "degraded"
COLLAPSED = "collapsed"
MISSING = "missing"

#: outcomes of a training run, best first
TRAINING_OUTCOMES = (OK, DEGRADED, COLLAPSED)
#: what a table cell can be
CELL_STATUSES = (*TRAINING_OUTCOMES, MISSING)
