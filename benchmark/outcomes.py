"""The one status vocabulary: how a training run ended, and what a table cell can show.

A training run's outcome is a result, decided by the rules in ``benchmark.training.detector``:
``ok``, ``degraded`` (its held-out ranking ended worse than where it started) or ``collapsed``
(a trigger fired). A table cell is one of those, or ``missing`` (not run yet).
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
