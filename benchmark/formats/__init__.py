"""The files stages exchange, one module per format (as ir_datasets' ``formats/``): a file name, a typed
row, one reader and one writer each.

- ``documents``: ``corpus/docs.jsonl`` (Pyserini JsonCollection) and ``docids.txt``;
- ``query_texts``: ``queries.tsv``;
- ``qrels``: ``qrels.txt`` (TREC qrels);
- ``trec_run``: ``run.trec`` (TREC run);
- ``vectors``: ``docs/part-NNNNN.jsonl`` (JsonVectorCollection shards) and ``queries.jsonl``;
- ``json_lines``: any JSON-lines file read by Arrow a block of lines at a time (``triples.jsonl``).

They sit low in the import graph (the standard library, ``benchmark.common.atomic`` and ``benchmark.common.errors``
only), so any stage or domain module reads a parent's files without importing the stage that wrote them.
"""
