"""Datasets as plain files: the sources a dataset is read from, one registered reader per form it is named
in (``sources``: an ir_datasets id, a local BEIR folder), the data stages that materialise it
(``datasets``), ir_datasets' files built once across processes (``dataset_cache``), training triples by the
recipe's negatives (``negatives``) and the shipped SciFact sample (``samples``)."""
