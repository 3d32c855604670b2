"""Where a dataset comes from: one registered source per form a dataset is named in.

- ``beir_folder``: a local BEIR folder written as a path, ``./FOLDER[@split]``;
- ``ir_datasets_id``: any ir_datasets id.

``parse`` turns a name into a typed ``DatasetRef`` once, by the first source that claims it (the folder
first: a path is never an id); everything after asks ``ref.source``. ``subset`` holds the cuts
``max_queries`` and ``max_docs`` make. A new form of dataset is one module here that implements
``Source`` and registers itself below.
"""

from __future__ import annotations

from benchmark.data.sources.base import SOURCES, DatasetRef, Read, Source, check_id, drop_pinned, parse, register
from benchmark.data.sources.beir_folder import BEIR, FORM as BEIR_FORM, is_path
from benchmark.data.sources.ir_datasets_id import FORM as IR_DATASETS_FORM, IR_DATASETS

register(BEIR_FORM, BEIR)  # first: a name written as a path is a folder, never an id
register(IR_DATASETS_FORM, IR_DATASETS)

__all__ = ["SOURCES", "DatasetRef", "Read", "Source", "check_id", "drop_pinned", "is_path", "parse", "register"]
