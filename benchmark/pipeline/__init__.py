"""From a suite to finished stages: the plan, a graph of stages (``plan``); everything a run reads or
writes, checked before any stage runs (``preflight``); the executors, local (``executor``) and Ray
(``ray_executor``); what a task asks of a cluster (``resources``); the compute budget (``budget``)."""
