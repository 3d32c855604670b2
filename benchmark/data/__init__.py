"""Datasets as plain files: an ir_datasets id or a local BEIR folder materialised (``datasets``),
ir_datasets' files built once across processes (``dataset_cache``), training triples by the recipe's
negatives (``negatives``) and the shipped SciFact sample (``samples``)."""
