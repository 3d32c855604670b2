"""The data stage: a dataset (ir_datasets id or local BEIR folder) materialised as plain files.

Every later stage reads the same three files, whatever the source:
``corpus/docs.jsonl`` (``{"id", "contents"}``, a Pyserini JsonCollection; contents = title + " " + text,
as BEIR and Pyserini build it), ``queries.tsv`` and ``qrels.txt`` (TREC format).
``max_docs``/``max_queries`` cut deterministic subsets that keep every judged document.
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmark import faults
from benchmark.errors import BenchmarkError
from benchmark.atomic import write_lines

LOCAL_SPLIT_SEP = "@"
BEIR_FILES = ("corpus.jsonl", "queries.jsonl")


@dataclass(frozen=True)
class Qrel:
    query_id: str
    doc_id: str
    relevance: int


@dataclass(frozen=True)
class DatasetRef:
    """A dataset named by ir_datasets id, or a local BEIR folder as ``PATH`` or ``PATH@split``."""

    name: str

    @property
    def local(self) -> tuple[Path, str] | None:
        path, _, split = self.name.partition(LOCAL_SPLIT_SEP)
        if Path(path).is_dir():
            return Path(path).resolve(), split or "test"
        return None

    def key(self) -> str:
        """What goes into the stage hash: the id, or the folder's path, split and content digest."""
        local = self.local
        if local is None:
            return self.name
        from benchmark.fingerprint import tree_digest

        folder, split = local
        digest = tree_digest(folder, [*BEIR_FILES, f"qrels/{split}.tsv"])
        return f"local:{folder}{LOCAL_SPLIT_SEP}{split}:{digest[:16]}"


def validate_dataset(name: str) -> str | None:
    """A problem with ``name`` as one line, or None; used to check a whole plan before work starts."""
    ref = DatasetRef(name)
    if ref.local is not None:
        return _check_beir_folder(*ref.local)
    if name.startswith(("/", "./", "../", "~")):
        return f"dataset folder {name!r} does not exist; give an existing BEIR folder (corpus.jsonl, queries.jsonl, qrels/<split>.tsv) or an ir_datasets id"
    import ir_datasets

    try:
        ds = ir_datasets.load(name)
    except KeyError:
        return f"unknown dataset {name!r}; give an ir_datasets id (e.g. beir/scifact/test, msmarco-passage/dev/small) or a local BEIR folder PATH[@split]"
    missing = [part for part, has in (("docs", ds.has_docs()), ("queries", ds.has_queries()), ("qrels", ds.has_qrels())) if not has]
    if missing:
        return f"dataset {name!r} has no {'/'.join(missing)}; pick a split that has docs, queries and qrels (e.g. beir/scifact/test)"
    return None


# --------------------------------------------------------------------------- local BEIR folders


def _check_beir_folder(folder: Path, split: str) -> str | None:
    for rel in (*BEIR_FILES, f"qrels/{split}.tsv"):
        if not (folder / rel).is_file():
            return (f"BEIR folder {str(folder)!r} lacks {rel}; a BEIR folder holds corpus.jsonl, queries.jsonl "
                    f"and qrels/<split>.tsv (split given as PATH@split, default 'test')")
    with open(folder / "qrels" / f"{split}.tsv", encoding="utf-8") as fh:
        header = fh.readline().rstrip("\n").split("\t")
    if header[:2] != ["query-id", "corpus-id"] or len(header) != 3:
        return (f"qrels file {str(folder / 'qrels' / (split + '.tsv'))!r} starts with {header!r}, not the BEIR header; "
                "its first line must be 'query-id<TAB>corpus-id<TAB>score'")
    return None


def _read_jsonl(path: Path) -> Iterator[dict[str, Any]]:
    with open(path, encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                raise BenchmarkError(f"{path}:{n} is not valid JSON ({exc.msg}); fix that line (one JSON object per line)") from None
            if not isinstance(obj, dict) or "_id" not in obj:
                raise BenchmarkError(f"{path}:{n} has no '_id' field; BEIR lines look like {{\"_id\": ..., \"text\": ...}}")
            yield obj


def _load_beir_folder(folder: Path, split: str, docs: bool = True) -> tuple[Iterator[tuple[str, str]], dict[str, str], list[Qrel]]:
    problem = _check_beir_folder(folder, split)
    if problem:
        raise BenchmarkError(problem)
    qrels_path = folder / "qrels" / f"{split}.tsv"
    qrels: list[Qrel] = []
    with open(qrels_path, encoding="utf-8") as fh:
        rows = csv.reader(fh, delimiter="\t")
        next(rows)
        for n, row in enumerate(rows, 2):
            if len(row) != 3 or not row[2].lstrip("-").isdigit():
                raise BenchmarkError(f"{qrels_path}:{n} is {row!r}; each qrels row must be query-id<TAB>corpus-id<TAB>integer score")
            qrels.append(Qrel(row[0], row[1], int(row[2])))
    queries = {str(q["_id"]): str(q.get("text") or "") for q in _read_jsonl(folder / "queries.jsonl")}
    unknown_q = sorted({q.query_id for q in qrels} - set(queries))
    if unknown_q:
        raise BenchmarkError(
            f"{qrels_path}: qrels refer to {len(unknown_q)} query id(s) not in queries.jsonl, e.g. {unknown_q[0]!r}; "
            "fix the qrels or the queries file so every judged query exists"
        )
    if not queries:
        raise BenchmarkError(f"dataset {str(folder)!r} has no queries; queries.jsonl needs at least one line")
    return (_iter_corpus(str(folder)) if docs else iter(())), queries, qrels


def _load_ir_datasets(name: str, docs: bool = True) -> tuple[Iterator[tuple[str, str]], dict[str, str], list[Qrel]]:
    import ir_datasets

    try:
        ds = ir_datasets.load(name)
    except KeyError:
        raise BenchmarkError(f"unknown dataset {name!r}; give an ir_datasets id (e.g. beir/scifact/test) or a local BEIR folder") from None
    queries = {q.query_id: q.text for q in ds.queries_iter()} if ds.has_queries() else {}
    qrels = [Qrel(q.query_id, q.doc_id, int(q.relevance)) for q in ds.qrels_iter()] if ds.has_qrels() else []
    return (_ir_datasets_docs(ds) if docs else iter(())), queries, qrels


def _ir_datasets_docs(ds: Any) -> Iterator[tuple[str, str]]:
    has_title = "title" in ds.docs_cls()._fields
    for d in ds.docs_iter():
        yield d.doc_id, f"{d.title} {d.text}" if has_title else d.text


def load_source(name: str, docs: bool = True) -> tuple[Iterator[tuple[str, str]], dict[str, str], list[Qrel]]:
    """(documents, queries, qrels) of a dataset id or local BEIR folder; documents lazily."""
    ref = DatasetRef(name)
    if ref.local is not None:
        return _load_beir_folder(*ref.local, docs=docs)
    return _load_ir_datasets(name, docs=docs)


# --------------------------------------------------------------------------- the stages


def _rank(key: str, seed: int) -> str:
    """A stable pseudo-random order: the same subset on every machine and Python version."""
    return hashlib.sha1(f"{seed}:{key}".encode()).hexdigest()


def corpus_source(name: str) -> str:
    """The dataset that owns ``name``'s documents: query sets sharing a corpus share its stages.

    ``msmarco-passage/dev/small`` and both TREC DL sets map to ``msmarco-passage``, so its 8.8M
    passages are materialised, encoded and indexed once per model, not once per query set.
    """
    if DatasetRef(name).local is not None:
        return str(DatasetRef(name).local[0])
    import ir_datasets

    return ir_datasets.docs_parent_id(name)


def corpus_fingerprint(name: str) -> str | None:
    """For a local folder, its corpus file's content digest (edits re-key the stages); None for ids."""
    local = DatasetRef(name).local
    if local is None:
        return None
    from benchmark.fingerprint import tree_digest

    return tree_digest(local[0], ["corpus.jsonl"])[:16]


def _iter_corpus(source: str) -> Iterator[tuple[str, str]]:
    if Path(source).is_dir():
        folder = Path(source)
        if not sum(1 for _ in _read_jsonl(folder / "corpus.jsonl")):  # also fails on a bad line, with its number
            raise BenchmarkError(f"dataset {source!r} has an empty corpus; give a corpus with at least one document")
        from beir.datasets.data_loader import GenericDataLoader  # the reference reader of the format

        corpus = GenericDataLoader(data_folder=str(folder)).load_corpus()
        return ((str(i), f"{d.get('title') or ''} {d.get('text') or ''}") for i, d in corpus.items())
    import ir_datasets

    return _ir_datasets_docs(ir_datasets.load(source))


def materialise_topics(name: str, out: Path, max_queries: int | None = None, seed: int = 0) -> dict[str, Any]:
    """The topics stage: judged queries (``queries.tsv``) and their qrels (``qrels.txt``)."""
    _, queries, qrels = load_source(name, docs=False)
    unknown_q = sorted({q.query_id for q in qrels} - set(queries))
    if unknown_q:
        raise BenchmarkError(
            f"dataset {name!r}: qrels refer to {len(unknown_q)} unknown query id(s), e.g. {unknown_q[0]!r}; "
            "fix the qrels or the queries file so every judged query exists"
        )
    judged = sorted({q.query_id for q in qrels if q.relevance > 0})
    if not judged:
        raise BenchmarkError(f"dataset {name!r} has no judged queries; give queries with at least one relevant qrel")
    keep = sorted(judged, key=lambda q: _rank(q, seed))[:max_queries] if max_queries else judged
    keep_set = set(keep)
    qrels = [q for q in qrels if q.query_id in keep_set]
    write_lines(out / "queries.tsv", (f"{q}\t{_one_line(queries[q])}" for q in keep))
    write_lines(out / "qrels.txt", (f"{q.query_id} 0 {q.doc_id} {q.relevance}" for q in qrels))
    return {"dataset": name, "queries": len(keep), "qrels": len(qrels)}


def materialise_corpus(source: str, out: Path, max_docs: int | None = None, seed: int = 0,
                       keep: set[str] | frozenset[str] = frozenset(), progress: bool = True) -> dict[str, Any]:
    """The corpus stage: ``corpus/docs.jsonl`` and ``docids.txt``; a subset keeps every doc in ``keep``."""
    from tqdm.auto import tqdm

    keep_docs: set[str] | None = None
    if max_docs is not None:
        # A pass over ids only: the judged docs always stay, the rest fill up in hash order.
        others = sorted((d for d, _ in _iter_corpus(source) if d not in keep), key=lambda d: _rank(d, seed))
        keep_docs = set(keep) | set(others[: max(0, max_docs - len(keep))])
    corpus_dir = out / "corpus"
    corpus_dir.mkdir(parents=True, exist_ok=True)
    n_docs, empty, seen = 0, 0, set()
    tmp = corpus_dir / ".docs.jsonl.tmp"
    with open(tmp, "w", encoding="utf-8") as fh, open(out / ".docids.tmp", "w", encoding="utf-8") as ids:
        for doc_id, contents in tqdm(_iter_corpus(source), desc=f"corpus {source}", unit="doc", disable=not progress, mininterval=2):
            if (keep_docs is not None and doc_id not in keep_docs) or doc_id in seen:
                continue
            seen.add(doc_id)
            fh.write(json.dumps({"id": doc_id, "contents": contents}, ensure_ascii=False) + "\n")
            ids.write(doc_id + "\n")
            n_docs += 1
            empty += not contents.strip()  # Lucene indexes no document without terms
    if n_docs == 0:
        raise BenchmarkError(f"dataset {source!r} has an empty corpus; give a corpus with at least one document")
    os.replace(tmp, corpus_dir / "docs.jsonl")
    faults.point("data:corpus")
    os.replace(out / ".docids.tmp", out / "docids.txt")
    return {"source": source, "documents": n_docs, "empty_documents": empty, "judged_docs_missing": len(set(keep) - seen)}


def judged_docs(topics_dir: Path) -> set[str]:
    with open(qrels_path(topics_dir), encoding="utf-8") as fh:
        return {line.split()[2] for line in fh}


def materialise(name: str, out: Path, max_docs: int | None = None, max_queries: int | None = None,
                seed: int = 0, progress: bool = True) -> dict[str, Any]:
    """Topics and corpus of one dataset into one folder (for scripts; the pipeline runs them as two stages)."""
    topics = materialise_topics(name, out, max_queries, seed)
    corpus = materialise_corpus(corpus_source(name), out, max_docs, seed, judged_docs(out), progress)
    return {"dataset": name, "documents": corpus["documents"], "queries": topics["queries"], "qrels": topics["qrels"],
            "judged_docs_missing": corpus["judged_docs_missing"]}


def _one_line(text: str) -> str:
    return " ".join(text.split())



# --------------------------------------------------------------------------- readers for later stages


def read_queries(data_dir: Path) -> dict[str, str]:
    out: dict[str, str] = {}
    with open(Path(data_dir) / "queries.tsv", encoding="utf-8") as fh:
        for line in fh:
            qid, _, text = line.rstrip("\n").partition("\t")
            out[qid] = text
    return out


def iter_docs(data_dir: Path) -> Iterator[tuple[str, str]]:
    with open(Path(data_dir) / "corpus" / "docs.jsonl", encoding="utf-8") as fh:
        for line in fh:
            d = json.loads(line)
            yield d["id"], d["contents"]


def read_docids(data_dir: Path) -> list[str]:
    return Path(data_dir, "docids.txt").read_text(encoding="utf-8").split("\n")[:-1]


def qrels_path(data_dir: Path) -> Path:
    return Path(data_dir) / "qrels.txt"
