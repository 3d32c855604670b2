"""Results: ``results/<suite>/`` holds everything its tables need, and every table, plot and the
results page is rendered from that folder alone.

* ``results``: the data (``results.json``, ``perquery.csv.gz``, telemetry plots); ``collect``, the
  one reader of a plan and its runs folder; ``portable``: no machine path in a results folder;
* ``table``: the table model (seed means, Δ, paired t-test + Holm, bold, outcomes, averages);
* ``markdown``, ``latex``, ``tidy`` (CSV), ``html``: the renderers; ``plots``: the figures;
* ``build``: one folder written and rendered, all folders rebuilt; ``cli``: ``python -m benchmark.report``.
"""

from __future__ import annotations

from benchmark.report.build import publish, rebuild, refresh_suites, render, write_suite_results
from benchmark.report.cli import main
from benchmark.report.collect import collect
from benchmark.report.results import SuiteResults, ConditionResult, read_results, write_results

__all__ = ["ConditionResult", "SuiteResults", "collect", "main", "publish", "read_results", "rebuild",
           "refresh_suites", "render", "write_results", "write_suite_results"]
