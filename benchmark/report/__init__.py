"""Results: ``results/<suite>/`` holds everything its tables need, and every table, plot and the
results page is rendered from that folder alone.

* ``results``: the data (``results.json``, ``perquery.csv.gz``, telemetry plots); ``collect``, the
  one reader of a plan and its runs folder; ``portable``: no machine path in a results folder;
* ``table``: the table model (seed means, Δ, paired t-test + Holm, bold, outcomes, averages);
* ``markdown``, ``latex``, ``tidy`` (CSV), ``html``: the renderers; ``plots``: the figures;
* ``build``: one folder written and rendered, all folders rebuilt; ``report_cli``: ``python -m benchmark.report``;
* ``mteb``: the scores as MTEB result files; ``check``: a run's scores against the suite's expected ones
  (``--check``); ``model_export``: trained models as sentence-transformers folders
  (``python -m benchmark.report.model_export``).
"""
