"""The files stages pass to each other, one module per file: a file name, a typed row, one reader and one
writer each. Not the formats a dataset arrives in (an ir_datasets id, a local BEIR folder): those are read by
the sources in ``benchmark.data.sources``, and whatever the source, the data stages write the files below.

- ``documents``: ``corpus/docs.jsonl`` (Pyserini JsonCollection) and ``docids.txt``;
- ``query_texts``: ``queries.tsv``;
- ``qrels``: ``qrels.txt`` (TREC qrels);
- ``trec_run``: ``run.trec`` (TREC run);
- ``vectors``: ``docs/part-NNNNN.jsonl`` (JsonVectorCollection shards) and ``queries.jsonl``, with the
  per-term counts ``df.npy`` and ``qf.npy``;
- ``lucene_index``: ``index/`` (a Lucene index);
- ``perquery``: ``perquery.tsv`` (an evaluate stage's per-query values);
- ``triples``: ``triples.jsonl`` (training examples);
- ``checkpoint``: ``model/`` (a saved ``*ForMaskedLM`` and its tokenizer);
- ``json_lines``: any JSON-lines file read by Arrow a block of lines at a time (``triples.jsonl``).

They sit low in the import graph (the standard library, ``benchmark.common.atomic`` and ``benchmark.common.errors``
only; NumPy inside the one reader of its arrays), so any stage or domain module reads a parent's files
without importing the stage that wrote them: a stage kind never imports another (``tests/package/test_layout.py``).
"""
