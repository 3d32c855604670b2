"""``python -m benchmark.perf``: our SPLADE encoder, training and impact search, side by side with the reference tools.

Parts (``--only``, comma-separated, or ``all``; the default leaves out ``e2e``, which takes minutes):

* ``encode`` (``perf.encode_speed``): corpus encoding, ``benchmark.splade.encoder.encode`` (float32, path chosen by
  measurement; and bfloat16) against sentence-transformers ``SparseEncoder.encode_document`` on
  the same model, documents, max length, batch size and threads; docs/s, CPU s/doc, peak RSS, the
  chosen path with every path's measured time, the roofline of the vocabulary head, and the same
  retrieval (nDCG@10 over exact integer dot products of the quantised vectors).
* ``large``: peak memory at a 50368 vocabulary (tiny random ModernBERT), batch 64 × length 512.
* ``search`` (``perf.search_speed``): queries/s of ``benchmark.retrieval.lucene.impact_search`` against Pyserini's
  pre-encoded path (``LuceneImpactSearcher`` with a ``CachedDataQueryEncoder`` jsonl), 1 and 2 threads.
* ``train`` (``perf.train_speed``): ``train_splade`` against stock sentence-transformers
  (``SparseEncoderTrainer`` + ``SpladeLoss`` over ``SparseMultipleNegativesRankingLoss``,
  ``SpladePooling``) on the same model, SciFact train triples, batch, lengths, steps and threads:
  samples/s, peak RSS, the first losses of each, and a profile of one step.
* ``e2e`` (``perf.e2e``): wall time of ``python -m benchmark.run --suite smoke`` (fresh runs dir),
  and per stage kind from the run's ``stages.csv``.

Subcommands (``python -m benchmark.perf NAME --help``) measure what the README and the budget cite:
``gpu-profile`` (``perf.gpu_profile``), ``budget-probe``, ``matmul-shapes``, ``skip-bounds`` and
``rescale-study``; each has a CPU smoke test at tiny sizes.

Each measured system runs in its own fresh subprocess (``perf.workers``), so its peak RSS (VmHWM)
is its own and the imports are paid by both. The machine may be shared: CPU seconds and the load
average are reported next to wall time.
"""
