"""From a trained model to ranked lists: the integer impact vectors of a corpus and of a query set
(``impact_vectors``), Lucene indexing and search (``lucene``) and a run's FLOPS (``flops``)."""
