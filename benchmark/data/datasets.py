"""The data stage: a dataset (ir_datasets id or local BEIR folder) materialised as plain files.

A local folder is named by a path (absolute, ``./``, ``../``, ``~/``) and read strictly: the files
must be UTF-8, ids unique and free of whitespace (they go into whitespace-separated run and qrels
files), qrels scores integers. ``validate_dataset`` reads it all before any stage runs.

Every later stage reads the same three files, whatever the source (``benchmark.formats``):
``corpus/docs.jsonl`` (``{"id", "contents"}``, a Pyserini JsonCollection; contents = title + " " + text,
as BEIR and Pyserini build it), ``queries.tsv`` and ``qrels.txt`` (TREC format).
``max_docs``/``max_queries`` cut deterministic subsets that keep every judged document.
"""

from __future__ import annotations

import errno
import hashlib
import heapq
import json
import os
import re
import stat
import unicodedata
from collections.abc import Iterable, Iterator, Set as AbstractSet
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmark.common import kill_points
from benchmark.common.atomic import atomic_write
from benchmark.common.errors import BenchmarkError
from benchmark.common.fingerprint import cache_dir, digest_of_tree, file_digest, tree_digest
from benchmark.common.idset import IdSet
from benchmark.common.snapshot import changed_since_planned
from benchmark.data import dataset_cache
from benchmark.formats import documents as corpus_format, qrels as qrels_format, query_texts as topics_format
from benchmark.formats.qrels import Qrel

LOCAL_SPLIT_SEP = "@"
DEFAULT_SPLIT = "test"
BEIR_FILES = ("corpus.jsonl", "queries.jsonl")
BEIR_LAYOUT = "corpus.jsonl, queries.jsonl, qrels/<split>.tsv"
# How a local folder must be written. Every ir_datasets id contains '/', so a separator alone
# proves nothing: only these prefixes make a name a path, and an id never reads the working folder.
PATH_PREFIXES = ("/", "./", "../", "~/")
PATH_NAMES = (".", "..", "~")
# Seconds to wait for a download server before calling it unreachable: a TCP connect that has not
# completed in 10 s on a working network is rare, and a dead network fails DNS at once.
PROBE_TIMEOUT = 10.0
# Memoised verdicts of the local-folder checks are keyed by this and the files' content digest;
# change it whenever the checks change.
VALIDATOR = "beir-folder-2"
_SCORE = re.compile(r"-?[0-9]+")


def is_path(name: str) -> bool:
    """Whether ``name`` is written as a local path (absolute, ``./``, ``../`` or ``~/``) and not an id."""
    return name in PATH_NAMES or name.startswith(PATH_PREFIXES)


def _absolute(path: str) -> Path:
    try:
        return Path(path).resolve()
    except (OSError, RuntimeError):  # a symlink loop: validation names it; keys need only a stable path
        return Path(os.path.abspath(path))


def _split_candidate(name: str) -> tuple[str, str] | None:
    """(folder, split) when ``name`` ends in ``@split`` (the last ``@``; a split has no '/')."""
    head, sep, split = os.path.expanduser(name).rpartition(LOCAL_SPLIT_SEP)
    return (head, split) if sep and head and split and "/" not in split else None


@dataclass(frozen=True)
class DatasetRef:
    """A dataset named by ir_datasets id, or a local BEIR folder written as a path: ``PATH`` or ``PATH@split``."""

    name: str

    @property
    def local(self) -> tuple[Path, str] | None:
        """(folder, split) for a path, None for an ir_datasets id.

        ``PATH@split`` splits at the last ``@``, and only when ``PATH/qrels/<split>.tsv`` exists, so a
        folder name may itself contain ``@`` (``./my@data`` is the folder ``my@data``, split 'test').
        """
        if not is_path(self.name):
            return None
        candidate = _split_candidate(self.name)
        if candidate is not None and Path(candidate[0], "qrels", f"{candidate[1]}.tsv").is_file():
            return _absolute(candidate[0]), candidate[1]
        return _absolute(os.path.expanduser(self.name)), DEFAULT_SPLIT

    def key(self) -> str:
        """What goes into the stage hash: the id, or the folder, split and content digest of its files.

        The digest is of the bytes (memoised by size, mtime, ctime and inode), so an edit that keeps
        the size and restores the mtime still re-keys every stage that reads the folder.
        """
        local = self.local
        if local is None:
            return self.name
        folder, split = local
        return _local_key(folder, split, tree_digest(folder, [*BEIR_FILES, f"qrels/{split}.tsv"]))


def _local_key(folder: Path, split: str, digest: str) -> str:
    return f"local:{folder}{LOCAL_SPLIT_SEP}{split}:{digest[:16]}"


#: where a data stage copies a local folder's files (inside its partial folder; removed before it is published)
SNAPSHOT = ".inputs"


def _snapshot(folder: Path, rels: list[str], out: Path) -> tuple[Path, dict[str, str]]:
    """Copy ``rels`` of a local folder into ``out/.inputs`` (one read each); (the copy, rel → sha256 copied)."""
    from benchmark.common.snapshot import copy_hashed

    _check_files(folder, tuple(rels))
    into = Path(out) / SNAPSHOT
    return into, {rel: copy_hashed(Path(folder) / rel, into / rel) for rel in rels}


def _drop_snapshot(out: Path) -> None:
    import shutil

    shutil.rmtree(Path(out) / SNAPSHOT, ignore_errors=True)


def validate_dataset(name: str) -> str | None:
    """A problem with ``name`` as one line, or None; used to check a whole plan before work starts.

    A local folder is read completely (ids, UTF-8, JSON, qrels); an ir_datasets id is checked to
    exist with docs, queries and qrels (``availability_problem`` checks that its files can be had).
    """
    if is_path(name):
        return _path_problem(name) or _check_beir_folder(*DatasetRef(name).local)
    import ir_datasets

    try:
        ds = ir_datasets.load(name)
    except KeyError:
        here = Path(name.partition(LOCAL_SPLIT_SEP)[0])
        hint = (
            f"; a folder {str(here)!r} exists here: to use it, write it as a path, ./{name}"
            if here.is_dir()
            else " written as a path (./FOLDER[@split])"
        )
        return (
            f"unknown dataset {name!r}; give an ir_datasets id (e.g. beir/scifact/test, msmarco-passage/dev/small) "
            f"or a local BEIR folder{hint}"
        )
    missing = [
        part
        for part, has in (("docs", ds.has_docs()), ("queries", ds.has_queries()), ("qrels", ds.has_qrels()))
        if not has
    ]
    if missing:
        return (
            f"dataset {name!r} has no {'/'.join(missing)}; pick a split that has docs, queries and qrels (e.g. "
            f"beir/scifact/test)"
        )
    return None


# --------------------------------------------------------------------------- ir_datasets files


def _missing_downloads(obj: Any, seen: set[int] | None = None) -> list[Any]:
    """The ``Download``s that reading ``obj`` (a dataset or one of its handlers) would have to fetch.

    ir_datasets builds each file from a chain of objects (cache ← extract ← download); a link whose
    output is on disk ends its chain. Objects hidden behind lazy functions are not seen: the stage
    then reports a failed download itself.
    """
    from ir_datasets.util import Cache, TarExtractAll, ZipExtractCache
    from ir_datasets.util.download import Download, LocalDownload

    seen = set() if seen is None else seen
    if id(obj) in seen:
        return []
    seen.add(id(obj))
    if isinstance(obj, Cache) and Path(obj._path).exists():
        return []
    if isinstance(obj, (ZipExtractCache, TarExtractAll)) and os.path.exists(obj.extract_path):
        return []
    if isinstance(obj, Download):
        if obj._cache_path and os.path.exists(obj._cache_path):
            return []
        if any(isinstance(m, LocalDownload) and Path(m._path).exists() for m in obj.mirrors):
            return []
        return [obj]
    if isinstance(obj, (list, tuple, set, frozenset)):
        children = list(obj)
    elif isinstance(obj, dict):
        children = list(obj.values())
    elif type(obj).__module__.startswith("ir_datasets") and hasattr(obj, "__dict__"):
        children = list(vars(obj).values())
    else:
        return []
    return [d for child in children for d in _missing_downloads(child, seen)]


def _where_to_put(download: Any) -> str:
    from ir_datasets.util.download import LocalDownload

    for mirror in download.mirrors:
        if isinstance(mirror, LocalDownload):
            return f"save it as {mirror._path}"
    if download._cache_path:
        return f"save it as {download._cache_path}"
    return "run the dataset once on a machine with network access and copy its IR_DATASETS_HOME folder here"


def _reason(exc: BaseException) -> str:
    inner = getattr(exc.args[0], "reason", None) if exc.args else None
    return type(exc).__name__ + (f": {type(inner).__name__}" if isinstance(inner, BaseException) else "")


def availability_problem(name: str, timeout: float | None = None) -> str | None:
    """For an ir_datasets id whose files are not all in the cache: one line if their server cannot be
    reached (naming the URL and how to provide the files offline), else None. Nothing is downloaded."""
    if is_path(name):
        return None
    import ir_datasets
    import requests

    try:
        ds = ir_datasets.load(name)
    except KeyError:
        return None  # validate_dataset reports it
    missing = _missing_downloads(ds)
    if not missing:
        return None
    download = missing[0]
    urls = [getattr(m, "url", None) for m in download.mirrors]
    url = next((u for u in urls if u), None)
    home = os.environ.get("IR_DATASETS_HOME", "~/.ir_datasets")
    if url is None:
        return (
            f"dataset {name!r} is not in the ir_datasets cache (IR_DATASETS_HOME={home}) and ir_datasets cannot "
            f'download it by itself; follow its instructions once (python -c "import ir_datasets; '
            f"ir_datasets.load('{name}').queries_iter()\") or give a local BEIR folder ./FOLDER[@split]"
        )
    try:
        requests.head(url, timeout=timeout or PROBE_TIMEOUT, allow_redirects=False)
        return None  # any answer means the stage can download it
    except requests.RequestException as exc:
        from benchmark.common.errors import Unavailable

        where = _where_to_put(download)
        short_where = (
            where.replace(home, "$IR_DATASETS_HOME", 1) if home and "IR_DATASETS_HOME" in os.environ else where
        )
        return Unavailable(
            f"dataset {name!r} is not in the ir_datasets cache (IR_DATASETS_HOME={home}) and cannot be downloaded: "
            f"{url} is unreachable ({_reason(exc)}). To work offline, fetch that file elsewhere and "
            f"{where} (the IR_DATASETS_HOME layout), or give the dataset as a local BEIR folder "
            f"./FOLDER[@split] ({BEIR_LAYOUT})",
            kind="dataset",
            name=name,
            short=f"dataset {name!r}: {url} is unreachable; "
            + (f"fetch it elsewhere and {short_where}" if where.startswith("save") else short_where),
        )


def _ir_datasets_failed(name: str, exc: OSError) -> BenchmarkError:
    """A failed read of an ir_datasets id (a download, usually), as one line."""
    problem = availability_problem(name, timeout=PROBE_TIMEOUT)
    return BenchmarkError(
        problem
        or f"dataset {name!r}: ir_datasets could not read it ({_reason(exc)}: "
        f"{' '.join(str(exc).split())[:300]}); check IR_DATASETS_HOME and the network"
    )


# --------------------------------------------------------------------------- local BEIR folders


def _path_problem(name: str) -> str | None:
    """What is wrong with the path itself (missing, a file, a symlink loop, an unknown split), or None."""
    candidate = _split_candidate(name)
    whole = os.path.expanduser(name)
    if candidate is not None and Path(candidate[0], "qrels", f"{candidate[1]}.tsv").is_file():
        if Path(whole).is_dir():
            return (
                f"dataset {name!r} is ambiguous: both the folder {whole!r} and split {candidate[1]!r} of "
                f"{candidate[0]!r} exist; rename one of the folders"
            )
        return None
    problem = _folder_problem(whole, name)
    if problem and candidate is not None and Path(candidate[0], "qrels").is_dir():
        splits = sorted(p.stem for p in Path(candidate[0], "qrels").glob("*.tsv"))
        return (
            f"BEIR folder {candidate[0]!r} has no split {candidate[1]!r} (no qrels/{candidate[1]}.tsv); "
            f"valid splits: {', '.join(splits) or 'none'}. Write PATH@split with one of them"
        )
    return problem


def _folder_problem(path: str, name: str) -> str | None:
    try:
        st = os.stat(path)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return (
                f"dataset path {name!r} is a symlink loop ({exc.strerror}); point it at a BEIR folder ({BEIR_LAYOUT})"
            )
        if os.path.islink(path):
            return (
                f"dataset path {name!r} is a broken symlink (to {os.readlink(path)!r}); point it at an existing "
                f"BEIR folder"
            )
        if exc.errno in (errno.ENOENT, errno.ENOTDIR):
            return (
                f"dataset folder {name!r} does not exist; give an existing BEIR folder ({BEIR_LAYOUT}) "
                "or an ir_datasets id"
            )
        return f"dataset path {name!r} cannot be read ({exc.strerror}); fix its permissions"
    if not stat.S_ISDIR(st.st_mode):
        return f"dataset path {name!r} is a file, not a folder; give a BEIR folder ({BEIR_LAYOUT}) as PATH[@split]"
    return None


def _validated_marker(key: str) -> Path:
    return cache_dir().parent / "validated" / hashlib.sha256(key.encode()).hexdigest()


_VALIDATED: set[str] = set()


def _check_beir_folder(folder: Path, split: str) -> str | None:
    """Read the whole folder as the stages will; the first problem as one line, or None.

    A clean verdict is remembered by the files' content digest, so a large folder is read once.
    """
    for rel in (*BEIR_FILES, f"qrels/{split}.tsv"):
        if not (folder / rel).is_file():
            return (
                f"BEIR folder {str(folder)!r} lacks {rel}; a BEIR folder holds {BEIR_LAYOUT} "
                f"(split given as PATH@split, default {DEFAULT_SPLIT!r})"
            )
    key = f"{VALIDATOR}:{split}:{tree_digest(folder, [*BEIR_FILES, f'qrels/{split}.tsv'])}"
    if key in _VALIDATED or _validated_marker(key).exists():
        return None
    try:
        if not sum(1 for _ in read_local_corpus(folder)):  # every line read: a bad one anywhere is found
            return f"dataset {str(folder)!r} has an empty corpus; give a corpus with at least one document"
        read_local_topics(folder, split)
    except BenchmarkError as exc:
        return str(exc)
    _VALIDATED.add(key)
    try:
        marker = _validated_marker(key)
        marker.parent.mkdir(parents=True, exist_ok=True)  # without it no marker was ever written: every
        with atomic_write(marker) as fh:  # process read a million-document folder again (2 min each)
            fh.write(key)
    except OSError:
        pass  # an unwritable cache only costs a second read next time
    return None


def _text_lines(path: Path) -> Iterator[tuple[int, str]]:
    """(line number, line) of a UTF-8 file; a BOM is dropped, a byte that is not UTF-8 is one error."""
    with open(path, "rb") as fh:
        for n, raw in enumerate(fh, 1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise BenchmarkError(
                    f"{path}:{n} is not valid UTF-8 (byte 0x{raw[exc.start]:02x} at column {exc.start + 1}); "
                    "save the file as UTF-8"
                ) from None
            if n == 1 and line.startswith("\ufeff"):
                line = line[1:]
            yield n, line.rstrip("\r\n")


def _read_jsonl(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    for n, line in _text_lines(path):
        if not line.strip():
            continue  # a blank line carries nothing (BEIR's own loader fails on it)
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise BenchmarkError(
                f"{path}:{n} is not valid JSON ({exc.msg}); fix that line (one JSON object per line)"
            ) from None
        if not isinstance(obj, dict) or "_id" not in obj:
            raise BenchmarkError(f'{path}:{n} has no \'_id\' field; BEIR lines look like {{"_id": ..., "text": ...}}')
        yield n, obj


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


def _text_field(obj: dict[str, Any], key: str, where: str) -> str:
    value = obj.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise BenchmarkError(f"{where}: {key!r} is {type(value).__name__} {value!r}; it must be a string (or absent)")
    return value


def read_local_corpus(folder: Path) -> Iterator[tuple[str, str]]:
    """(id, title + " " + text) of a BEIR corpus.jsonl, in file order, strictly (ids unique and clean)."""
    path = Path(folder) / "corpus.jsonl"
    seen = IdSet()  # digests spilled to disk: a folder of any size is read in the memory of one bucket
    try:
        for n, obj in _read_jsonl(path):
            where = f"{path}:{n}"
            doc_id = check_id(obj["_id"], where, "document")
            seen.add(doc_id)
            yield doc_id, f"{_text_field(obj, 'title', where)} {_text_field(obj, 'text', where)}"
        repeats = seen.repeats()  # known once every id is in: the reader that consumes us is still inside its write
        if len(repeats):
            n, doc_id = _nth_document_id(path, int(repeats[0]))
            raise BenchmarkError(
                f"{path}:{n}: duplicate document id {doc_id!r}; ids must be unique: remove or rename one"
            )
    finally:
        seen.discard()


def _nth_document_id(path: Path, ordinal: int) -> tuple[int, str]:
    """The line and id of the ``ordinal``-th document (0-based) of a corpus.jsonl: a repeat's, for its error."""
    for k, (n, obj) in enumerate(_read_jsonl(path)):
        if k == ordinal:
            return n, str(obj["_id"])
    raise AssertionError(f"{path} has no document {ordinal}")


def read_local_topics(folder: Path, split: str) -> tuple[dict[str, str], list[Qrel]]:
    """queries.jsonl and qrels/<split>.tsv of a BEIR folder, checked: ids, integer scores, no
    duplicates, every judged query known, at least one relevant judgement."""
    folder = Path(folder)
    path = folder / "queries.jsonl"
    queries: dict[str, str] = {}
    for n, obj in _read_jsonl(path):
        where = f"{path}:{n}"
        qid = check_id(obj["_id"], where, "query")
        if qid in queries:
            raise BenchmarkError(f"{where}: duplicate query id {qid!r}; ids must be unique: remove or rename one")
        queries[qid] = _text_field(obj, "text", where)
    if not queries:
        raise BenchmarkError(f"dataset {str(folder)!r} has no queries; queries.jsonl needs at least one line")
    qrels_path = folder / "qrels" / f"{split}.tsv"
    lines = _text_lines(qrels_path)
    header = next(lines, (1, ""))[1].split("\t")
    if header[:2] != ["query-id", "corpus-id"] or len(header) != 3:
        raise BenchmarkError(
            f"qrels file {str(qrels_path)!r} starts with {header!r}, not the BEIR header; "
            "its first line must be 'query-id<TAB>corpus-id<TAB>score'"
        )
    qrels: list[Qrel] = []
    seen: set[tuple[str, str]] = set()
    for n, line in lines:
        if not line.strip():
            continue
        row = line.split("\t")
        where = f"{qrels_path}:{n}"
        if len(row) != 3 or not _SCORE.fullmatch(row[2]):
            raise BenchmarkError(f"{where} is {row!r}; each qrels row must be query-id<TAB>corpus-id<TAB>integer score")
        qid, did = check_id(row[0], where, "query"), check_id(row[1], where, "document")
        if (qid, did) in seen:
            raise BenchmarkError(f"{where}: query {qid!r} judges document {did!r} twice; keep one row per pair")
        seen.add((qid, did))
        qrels.append(Qrel(qid, did, int(row[2])))
    unknown_q = sorted({q.query_id for q in qrels} - set(queries))
    if unknown_q:
        raise BenchmarkError(
            f"{qrels_path}: qrels refer to {len(unknown_q)} query id(s) not in queries.jsonl, e.g. {unknown_q[0]!r}; "
            "fix the qrels or the queries file so every judged query exists"
        )
    if not any(q.relevance > 0 for q in qrels):
        raise BenchmarkError(
            f"{qrels_path} has no relevant judgement ({len(qrels)} rows, every score <= 0); "
            "relevant documents need a score >= 1"
        )
    return queries, qrels


def _check_files(folder: Path, needed: Iterator[str] | tuple[str, ...]) -> None:
    problem = _path_problem(str(folder)) or next(
        (
            f"BEIR folder {str(folder)!r} lacks {rel}; a BEIR folder holds {BEIR_LAYOUT}"
            for rel in needed
            if not (Path(folder) / rel).is_file()
        ),
        None,
    )
    if problem:
        raise BenchmarkError(problem)


def _load_beir_folder(
    folder: Path, split: str, docs: bool = True
) -> tuple[Iterator[tuple[str, str]], dict[str, str], list[Qrel]]:
    _check_files(folder, (*BEIR_FILES, f"qrels/{split}.tsv") if docs else ("queries.jsonl", f"qrels/{split}.tsv"))
    queries, qrels = read_local_topics(folder, split)
    return (read_local_corpus(folder) if docs else iter(())), queries, qrels


def _load_ir_datasets(name: str, docs: bool = True) -> tuple[Iterator[tuple[str, str]], dict[str, str], list[Qrel]]:
    import ir_datasets

    try:
        ds = ir_datasets.load(name)
    except KeyError:
        raise BenchmarkError(
            f"unknown dataset {name!r}; give an ir_datasets id (e.g. beir/scifact/test) or a local BEIR folder "
            "written as a path (./FOLDER[@split])"
        ) from None
    try:
        raw_queries, raw_qrels = dataset_cache.topics(ds)
        queries: dict[str, str] = {}
        for q in raw_queries:
            queries[check_id(q.query_id, f"dataset {name!r}", "query")] = q.text
        qrels = [
            Qrel(
                check_id(q.query_id, f"dataset {name!r}", "query"),
                check_id(q.doc_id, f"dataset {name!r}", "document"),
                int(q.relevance),
            )
            for q in raw_qrels
        ]
    except OSError as exc:  # requests' errors are OSErrors: a download that failed
        raise _ir_datasets_failed(name, exc) from None
    return (_ir_datasets_docs(ds, name) if docs else iter(())), queries, qrels


def _ir_datasets_docs(ds: Any, name: str) -> Iterator[tuple[str, str]]:
    has_title = "title" in ds.docs_cls()._fields
    try:
        for d in dataset_cache.docs_iter(ds):
            yield check_id(d.doc_id, f"dataset {name!r}", "document"), f"{d.title} {d.text}" if has_title else d.text
    except OSError as exc:
        raise _ir_datasets_failed(name, exc) from None


def load_source(
    name: str, docs: bool = True, folder: Path | None = None
) -> tuple[Iterator[tuple[str, str]], dict[str, str], list[Qrel]]:
    """(documents, queries, qrels) of a dataset id or local BEIR folder (read from ``folder``, its
    snapshot, when given); documents lazily."""
    ref = DatasetRef(name)
    if ref.local is not None:
        return _load_beir_folder(Path(folder) if folder is not None else ref.local[0], ref.local[1], docs=docs)
    return _load_ir_datasets(name, docs=docs)


# --------------------------------------------------------------------------- the stages


def _rank(key: str, seed: int) -> str:
    """A stable pseudo-random order: the same subset on every machine and Python version."""
    return hashlib.sha1(f"{seed}:{key}".encode()).hexdigest()


def _first_by_rank(ids: Iterable[str], room: int, seed: int, keep: AbstractSet[str]) -> set[str]:
    """The ``room`` distinct ids outside ``keep`` that come first in ``_rank`` order, held in memory bounded
    by ``room``: a cut of an 8.8M-passage corpus to a CI subset never holds the corpus's ids."""
    top: list[tuple[int, str]] = []  # the cut so far as a heap, the last in rank order on top (negated)
    held: set[str] = set()
    if room <= 0:
        return held  # the judged documents fill the cut: the corpus is not read for it
    for doc_id in ids:
        if doc_id in keep or doc_id in held:
            continue  # a repeat of an id put out of the cut ranks after its top, so it stays out too
        rank = -int(_rank(doc_id, seed), 16)
        if len(top) < room:
            heapq.heappush(top, (rank, doc_id))
            held.add(doc_id)
        elif rank > top[0][0]:
            held.discard(heapq.heapreplace(top, (rank, doc_id))[1])
            held.add(doc_id)
    return held


def _check_limit(name: str, value: int | None) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise BenchmarkError(f"{name} = {value!r} must be a positive integer (or None for everything)")


def corpus_source(name: str) -> str:
    """The dataset that owns ``name``'s documents: query sets sharing a corpus share its stages.

    ``msmarco-passage/dev/small`` and both TREC DL sets map to ``msmarco-passage``, so its 8.8M
    passages are materialised, encoded and indexed once per model, not once per query set. A local
    folder's source is its absolute path.
    """
    local = DatasetRef(name).local
    if local is not None:
        return str(local[0])
    import ir_datasets

    return ir_datasets.docs_parent_id(name)


def corpus_fingerprint(name: str) -> str | None:
    """For a local folder, its corpus file's content digest (edits re-key the stages); None for ids."""
    local = DatasetRef(name).local
    if local is None:
        return None
    return tree_digest(local[0], ["corpus.jsonl"])[:16]


def _iter_corpus(source: str) -> Iterator[tuple[str, str]]:
    """Documents of a corpus source: a local folder (an absolute path, from corpus_source) or an id."""
    if is_path(source):
        return read_local_corpus(Path(source))
    import ir_datasets

    return _ir_datasets_docs(ir_datasets.load(source), source)


def judged_query_ids(name: str, max_queries: int | None = None, seed: int = 0) -> set[str]:
    """The query ids the topics stage keeps for ``name`` (judged, cut as ``max_queries`` cuts them),
    read from the qrels alone, so a run file can be checked against them before any stage runs."""
    _, _, qrels = load_source(name, docs=False)
    judged = sorted({q.query_id for q in qrels if q.relevance > 0})
    return set(sorted(judged, key=lambda q: _rank(q, seed))[:max_queries] if max_queries else judged)


def materialise_topics(
    name: str, out: Path, max_queries: int | None = None, seed: int = 0, planned: str | None = None
) -> dict[str, Any]:
    """The topics stage: judged queries (``queries.tsv``) and their qrels (``qrels.txt``). A local folder's
    queries and qrels are read from a snapshot whose content must give ``planned``, the stage id's key."""
    _check_limit("max_queries", max_queries)
    local = DatasetRef(name).local
    snapshot = None
    if local is not None:
        folder, split = local
        snapshot, copied = _snapshot(folder, ["queries.jsonl", f"qrels/{split}.tsv"], out)
        copied["corpus.jsonl"] = file_digest(folder / "corpus.jsonl")  # in the key; the corpus stage snapshots it
        key = _local_key(folder, split, digest_of_tree(copied))
        if planned is not None and key != planned:
            _drop_snapshot(out)
            raise changed_since_planned(f"dataset {name!r}", planned.rsplit(":", 1)[-1], key.rsplit(":", 1)[-1])
    try:
        _, queries, qrels = load_source(name, docs=False, folder=snapshot)
    finally:
        _drop_snapshot(out)
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
    A local folder's corpus is read from a snapshot whose content must give ``planned``, the stage id's."""
    _check_limit("max_docs", max_docs)
    if not is_path(source):
        return _materialise_corpus(source, source, out, max_docs, seed, keep, progress)
    snapshot, copied = _snapshot(Path(source), ["corpus.jsonl"], out)
    try:
        digest = digest_of_tree(copied)[:16]
        if planned is not None and digest != planned:
            raise changed_since_planned(f"dataset folder {source!r}", planned, digest)
        return _materialise_corpus(source, str(snapshot), out, max_docs, seed, keep, progress)
    finally:
        _drop_snapshot(out)


def _materialise_corpus(
    source: str, read: str, out: Path, max_docs: int | None, seed: int, keep: AbstractSet[str], progress: bool
) -> dict[str, Any]:
    """``materialise_corpus`` reading the documents from ``read`` (``source`` or its snapshot)."""
    from benchmark.common.bars import bar

    keep_docs: set[str] | None = None
    if max_docs is not None:
        # A pass over ids only: the judged docs always stay, the rest fill up in hash order.
        keep_docs = set(keep) | _first_by_rank((d for d, _ in _iter_corpus(read)), max_docs - len(keep), seed, keep)
    n_docs, empty, seen = 0, 0, IdSet()

    def kept() -> Iterator[corpus_format.Doc]:
        nonlocal n_docs, empty
        for doc_id, contents in bar(
            _iter_corpus(read), desc=f"corpus {source}", unit="doc", disable=not progress, mininterval=2
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
    return {q.doc_id for q in qrels_format.read_qrels(qrels_path(topics_dir))}


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


# --------------------------------------------------------------------------- readers for later stages


def read_queries(data_dir: Path) -> dict[str, str]:
    return dict(topics_format.read_queries(Path(data_dir) / topics_format.QUERIES))


def iter_docs(data_dir: Path) -> Iterator[tuple[str, str]]:
    return corpus_format.read_docs(corpus_format.docs_path(data_dir))


def read_docids(data_dir: Path) -> list[str]:
    return corpus_format.read_docids(corpus_format.docids_path(data_dir))


def qrels_path(data_dir: Path) -> Path:
    return Path(data_dir) / qrels_format.QRELS
