"""What every source of a dataset answers, and the one parse of a dataset's name into a typed ``DatasetRef``.

A source is one form a dataset can be named in (an ir_datasets id, a local BEIR folder written as a path):
it says whether a name is written in its form, and reads that dataset's queries, qrels and documents.
The data stages, the planner, the suites and the report ask the source; none of them knows a layout.
"""

from __future__ import annotations

import shutil
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from benchmark.common.errors import BenchmarkError
from benchmark.common.registry import Registry
from benchmark.formats.qrels import Qrel

#: (documents, queries, qrels) of a dataset; the documents lazily, as (id, contents).
Read = tuple[Iterator[tuple[str, str]], dict[str, str], list[Qrel]]

#: where a data stage copies a source's files (inside its partial folder; removed before it is published)
SNAPSHOT = ".inputs"


class Source(Protocol):
    """One form of dataset name and its reader. ``pinned`` is a snapshot of the source's files that a
    stage reads instead of the originals, so what it computes is what its id was planned from."""

    #: how a name of this form is written, for the line that lists the valid forms
    written: str
    #: the benchmark family of every dataset of this form (None: the id decides)
    family: str | None

    def claims(self, name: str) -> bool:
        """Whether ``name`` is written in this form (checked in registration order)."""
        ...

    def parse(self, name: str) -> DatasetRef: ...

    def place(self, ref: DatasetRef) -> str:
        """What the topics stage's config names: the id, or the absolute folder and its split."""
        ...

    def digest(self, ref: DatasetRef) -> str | None:
        """The content digest of the files the topics stage reads (None: the name fixes the content)."""
        ...

    def key(self, ref: DatasetRef) -> str:
        """What goes into the topics stage's hash."""
        ...

    def short(self, ref: DatasetRef) -> str:
        """The dataset in a subset label (and so in a results folder's name)."""
        ...

    def problem(self, ref: DatasetRef) -> str | None:
        """What is wrong with the dataset as one line, found before any stage runs, or None."""
        ...

    def availability_problem(self, ref: DatasetRef, timeout: float | None = None) -> str | None:
        """For files that are not here: one line if they cannot be had, else None. Nothing is fetched."""
        ...

    def official_measures(self, ref: DatasetRef) -> list[str]: ...

    def corpus(self, ref: DatasetRef) -> str:
        """The dataset that owns the documents: query sets sharing a corpus share its stages."""
        ...

    def corpus_digest(self, ref: DatasetRef) -> str | None:
        """The documents' content digest for the corpus stage's hash (None: the name fixes them)."""
        ...

    def read(self, ref: DatasetRef, docs: bool = True, pinned: Path | None = None) -> Read: ...

    def docs(self, ref: DatasetRef, pinned: Path | None = None) -> Iterator[tuple[str, str]]: ...

    def pin_topics(self, ref: DatasetRef, out: Path, planned: str | None) -> Path | None:
        """Snapshot the queries and qrels into ``out``, checked against ``planned`` (None: nothing to pin)."""
        ...

    def pin_corpus(self, ref: DatasetRef, out: Path, planned: str | None) -> Path | None: ...


SOURCES: Registry[Source] = Registry("dataset form")


def register(form: str, source: Source) -> Source:
    """Add a form of dataset name; a form registered twice is refused."""
    return SOURCES.register(form, source)


@dataclass(frozen=True)
class DatasetRef:
    """A dataset name parsed once: ``name`` as given, its ``form`` (a registered source), the ``location``
    it reads (the id, or the absolute folder) and, for forms that have splits, the ``split``."""

    name: str
    form: str
    location: str
    split: str | None = None

    @property
    def source(self) -> Source:
        return SOURCES[self.form]

    @property
    def place(self) -> str:
        return self.source.place(self)

    @property
    def family(self) -> str | None:
        return self.source.family

    def key(self) -> str:
        return self.source.key(self)

    def digest(self) -> str | None:
        return self.source.digest(self)

    def short(self) -> str:
        return self.source.short(self)

    def problem(self) -> str | None:
        return self.source.problem(self)

    def corpus(self) -> str:
        return self.source.corpus(self)

    def read(self, docs: bool = True, pinned: Path | None = None) -> Read:
        return self.source.read(self, docs, pinned)


def parse(name: str | DatasetRef) -> DatasetRef:
    """The ``DatasetRef`` of a name, by the first source that claims it; a name in no form is one line."""
    if isinstance(name, DatasetRef):
        return name
    for form in SOURCES:
        if SOURCES[form].claims(name):
            return SOURCES[form].parse(name)
    forms = "; ".join(f"{form}: {SOURCES[form].written}" for form in SOURCES)
    raise BenchmarkError(f"dataset {name!r} is written in no known form; valid forms: {forms}. Write it as one of them")


def drop_pinned(out: Path) -> None:
    shutil.rmtree(Path(out) / SNAPSHOT, ignore_errors=True)


def check_id(value: Any, where: str, what: str) -> str:
    """A document or query id as it will be written into whitespace-separated run and qrels files."""
    if value is None or isinstance(value, bool) or not isinstance(value, (str, int)):
        shown = "null" if value is None else f"{value!r} ({type(value).__name__})"
        raise BenchmarkError(f"{where}: {what} id is {shown}; ids are non-empty strings (or integers): give it one")
    text = str(value)
    if not text:
        raise BenchmarkError(f"{where}: {what} id is empty; give every {what} a non-empty id")
    bad = next((c for c in text if c.isspace() or unicodedata.category(c) == "Cc"), None)
    if bad is not None:
        raise BenchmarkError(
            f"{where}: {what} id {text!r} contains {bad!r}; run and qrels files separate fields by "
            "whitespace, so ids must not contain whitespace or control characters: rename it"
        )
    return text
