"""The data stages: a dataset materialised as the plain files every later stage reads.

Whatever the source (``benchmark.data.sources``: an ir_datasets id, a local BEIR folder), the topics stage
writes ``queries.tsv`` and ``qrels.txt`` (TREC format) and the corpus stage ``corpus/docs.jsonl``
(``{"id", "contents"}``, a Pyserini JsonCollection; contents = title + " " + text, as BEIR and Pyserini
build it) and ``docids.txt`` (``benchmark.formats``). ``max_docs``/``max_queries`` cut deterministic
subsets that keep every judged document (``benchmark.data.sources.subset``).
"""

from __future__ import annotations

from collections.abc import Iterator, Set as AbstractSet
from pathlib import Path
from typing import Any

from benchmark.common import kill_points
from benchmark.common.errors import BenchmarkError
from benchmark.common.idset import IdSet
from benchmark.data.sources import DatasetRef, Read, drop_pinned, parse, subset
from benchmark.formats import documents as corpus_format, qrels as qrels_format, query_texts as topics_format


def validate_dataset(name: str | DatasetRef) -> str | None:
    """A problem with ``name`` as one line, or None; used to check a whole plan before work starts.

    A local folder is read completely (ids, UTF-8, JSON, qrels); an ir_datasets id is checked to
    exist with docs, queries and qrels (``availability_problem`` checks that its files can be had).
    """
    try:
        ref = parse(name)
    except BenchmarkError as exc:
        return str(exc)
    return ref.problem()


def availability_problem(name: str | DatasetRef, timeout: float | None = None) -> str | None:
    """For a dataset whose files are not all here: one line if they cannot be had, else None. Nothing is
    downloaded."""
    try:
        ref = parse(name)
    except BenchmarkError:
        return None  # validate_dataset reports it
    return ref.source.availability_problem(ref, timeout)


def load_source(name: str | DatasetRef, docs: bool = True, folder: Path | None = None) -> Read:
    """(documents, queries, qrels) of a dataset (read from ``folder``, its snapshot, when given); documents
    lazily.

    Args:
        name: an ir_datasets id, a local BEIR folder written as a path, or a parsed ``DatasetRef``.
        docs: False to skip the documents (an empty iterator) when only the topics are needed.
        folder: a snapshot of the source's files to read instead of the originals.
    """
    return parse(name).read(docs=docs, pinned=folder)


def corpus_source(name: str | DatasetRef) -> str:
    """The dataset that owns ``name``'s documents: query sets sharing a corpus share its stages (an
    ir_datasets docs parent, or a local folder's absolute path)."""
    return parse(name).corpus()


def corpus_fingerprint(source: str | DatasetRef) -> str | None:
    """The corpus's content digest where its name does not fix it (a local folder: edits re-key the stages)."""
    ref = parse(source)
    return ref.source.corpus_digest(ref)


def _iter_corpus(ref: DatasetRef, pinned: Path | None) -> Iterator[tuple[str, str]]:
    return ref.source.docs(ref, pinned)


def judged_query_ids(name: str | DatasetRef, max_queries: int | None = None, seed: int = 0) -> set[str]:
    """The query ids the topics stage keeps for ``name`` (judged, cut as ``max_queries`` cuts them),
    read from the qrels alone, so a run file can be checked against them before any stage runs."""
    _, _, qrels = load_source(name, docs=False)
    return set(subset.cut_queries({q.query_id for q in qrels if q.relevance > 0}, max_queries, seed))


def materialise_topics(
    name: str, out: Path, max_queries: int | None = None, seed: int = 0, planned: str | None = None
) -> dict[str, Any]:
    """The topics stage: judged queries (``queries.tsv``) and their qrels (``qrels.txt``). A source whose
    content its name does not fix is read from a snapshot that must give ``planned``, the stage id's key."""
    subset.check_limit("max_queries", max_queries)
    ref = parse(name)
    pinned = ref.source.pin_topics(ref, out, planned)
    try:
        _, queries, qrels = ref.read(docs=False, pinned=pinned)
    finally:
        drop_pinned(out)
    unknown_q = sorted({q.query_id for q in qrels} - set(queries))
    if unknown_q:
        raise BenchmarkError(
            f"dataset {name!r}: qrels refer to {len(unknown_q)} unknown query id(s), e.g. {unknown_q[0]!r}; "
            "fix the qrels or the queries file so every judged query exists"
        )
    judged = {q.query_id for q in qrels if q.relevance > 0}
    if not judged:
        raise BenchmarkError(f"dataset {name!r} has no judged queries; give queries with at least one relevant qrel")
    keep = subset.cut_queries(judged, max_queries, seed)
    keep_set = set(keep)
    qrels = [q for q in qrels if q.query_id in keep_set]
    topics_format.write_queries(
        out / topics_format.QUERIES, (topics_format.Query(q, _one_line(queries[q])) for q in keep)
    )
    qrels_format.write_qrels(out / qrels_format.QRELS, qrels)
    return {"dataset": name, "queries": len(keep), "qrels": len(qrels)}


def materialise_corpus(
    source: str,
    out: Path,
    max_docs: int | None = None,
    seed: int = 0,
    keep: AbstractSet[str] = frozenset(),
    progress: bool = True,
    planned: str | None = None,
) -> dict[str, Any]:
    """The corpus stage: ``corpus/docs.jsonl`` and ``docids.txt``; a subset keeps every doc in ``keep``.
    A source whose content its name does not fix is read from a snapshot that must give ``planned``."""
    subset.check_limit("max_docs", max_docs)
    ref = parse(source)
    pinned = ref.source.pin_corpus(ref, out, planned)
    try:
        return _materialise_corpus(source, (ref, pinned), out, max_docs, seed, keep, progress)
    finally:
        if pinned is not None:
            drop_pinned(out)


def _materialise_corpus(
    source: str,
    read: tuple[DatasetRef, Path | None],
    out: Path,
    max_docs: int | None,
    seed: int,
    keep: AbstractSet[str],
    progress: bool,
) -> dict[str, Any]:
    """``materialise_corpus`` reading the documents of ``read`` (a source and its snapshot, if pinned)."""
    from benchmark.common.bars import bar

    keep_docs: set[str] | None = None
    if max_docs is not None:
        # A pass over ids only: the judged docs always stay, the rest fill up in hash order.
        keep_docs = set(keep) | subset.first_by_rank(
            (d for d, _ in _iter_corpus(*read)), max_docs - len(keep), seed, keep
        )
    n_docs, empty, seen = 0, 0, IdSet()

    def kept() -> Iterator[corpus_format.Doc]:
        nonlocal n_docs, empty
        for doc_id, contents in bar(
            _iter_corpus(*read), desc=f"corpus {source}", unit="doc", disable=not progress, mininterval=2
        ):
            if keep_docs is not None and doc_id not in keep_docs:
                continue
            seen.add(doc_id)
            yield corpus_format.Doc(doc_id, contents)
            n_docs += 1
            empty += corpus_format.indexed_empty(contents)  # Anserini skips these, as Java's trim() finds them
        if n_docs == 0:  # raised inside the writer: neither file appears
            raise BenchmarkError(f"dataset {source!r} has an empty corpus; give a corpus with at least one document")

    try:
        corpus_format.write_corpus(out, kept())
        # Repeats are known once every id is in (the set sorts on disk, in flat memory); only an ir_datasets
        # corpus has any (a local folder's reader refuses them): written again without them, the first kept.
        repeats = seen.repeats()
        if len(repeats):
            n_docs, empty = _drop_repeats(out, repeats)
        missing = len(seen.missing(keep))
    finally:
        seen.discard()
    kill_points.point("data:corpus")
    record = {"source": source, "documents": n_docs, "empty_documents": empty, "judged_docs_missing": missing}
    if len(repeats):
        record["repeated_ids_skipped"] = len(repeats)  # the first document of each id is kept
    return record


def _drop_repeats(folder: Path, repeats: Any) -> tuple[int, int]:
    """Rewrite a corpus stage's files without the documents at the ordinals ``repeats`` (sorted); its
    documents and empty documents as written."""
    drop = iter(int(r) for r in repeats)
    skip = next(drop, None)
    documents = empty = 0

    def rest() -> Iterator[corpus_format.Doc]:
        nonlocal skip, documents, empty
        for k, doc in enumerate(corpus_format.read_docs(corpus_format.docs_path(folder))):
            if k == skip:
                skip = next(drop, None)
                continue
            documents += 1
            empty += corpus_format.indexed_empty(doc.contents)
            yield doc

    corpus_format.write_corpus(folder, rest())
    return documents, empty


def corpus_record_problem(record: dict[str, Any], folder: Path) -> str | None:
    """Where a corpus stage's counts disagree with its ``docs.jsonl`` (read whole: for ``--verify``), or None."""
    documents = empty = 0
    for doc in corpus_format.read_docs(corpus_format.docs_path(folder)):
        documents += 1
        empty += corpus_format.indexed_empty(doc.contents)
    for key, actual in (("documents", documents), ("empty_documents", empty)):
        if key in record and record[key] != actual:
            return f"its record counts {record[key]} {key.replace('_', ' ')}, but its docs.jsonl holds {actual}"
    return None


def judged_docs(topics_dir: Path) -> set[str]:
    return {q.doc_id for q in qrels_format.read_qrels(Path(topics_dir) / qrels_format.QRELS)}


def materialise(
    name: str,
    out: Path,
    max_docs: int | None = None,
    max_queries: int | None = None,
    seed: int = 0,
    progress: bool = True,
) -> dict[str, Any]:
    """Topics and corpus of one dataset into one folder (for scripts; the pipeline runs them as two stages)."""
    topics = materialise_topics(name, out, max_queries, seed)
    corpus = materialise_corpus(corpus_source(name), out, max_docs, seed, judged_docs(out), progress)
    return {
        "dataset": name,
        "documents": corpus["documents"],
        "queries": topics["queries"],
        "qrels": topics["qrels"],
        "judged_docs_missing": corpus["judged_docs_missing"],
    }


def _one_line(text: str) -> str:
    return " ".join(text.split())
