"""A local BEIR folder, written as a path: ``PATH`` or ``PATH@split`` (``corpus.jsonl``, ``queries.jsonl``,
``qrels/<split>.tsv``).

A path is absolute or starts ``./``, ``../`` or ``~/``, and the folder is read strictly: the files must be
UTF-8, ids unique and free of whitespace (they go into whitespace-separated run and qrels files), qrels
scores integers. ``problem`` reads it all before any stage runs; a stage reads a snapshot of its files.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from benchmark.common.atomic import atomic_write
from benchmark.common.errors import BenchmarkError
from benchmark.common.fingerprint import cache_dir, digest_of_tree, file_digest, tree_digest
from benchmark.common.idset import IdSet
from benchmark.common.snapshot import changed_since_planned, copy_hashed
from benchmark.data.sources.base import SNAPSHOT, DatasetRef, Read, check_id, drop_pinned
from benchmark.formats.qrels import Qrel

FORM = "beir-folder"
LOCAL_SPLIT_SEP = "@"
DEFAULT_SPLIT = "test"
BEIR_FILES = ("corpus.jsonl", "queries.jsonl")
BEIR_LAYOUT = "corpus.jsonl, queries.jsonl, qrels/<split>.tsv"
# How a local folder must be written. Every ir_datasets id contains '/', so a separator alone
# proves nothing: only these prefixes make a name a path, and an id never reads the working folder.
PATH_PREFIXES = ("/", "./", "../", "~/")
PATH_NAMES = (".", "..", "~")
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


def _topics_files(split: str) -> list[str]:
    return [*BEIR_FILES, f"qrels/{split}.tsv"]


def _local_key(folder: str, split: str, digest: str) -> str:
    return f"local:{folder}{LOCAL_SPLIT_SEP}{split}:{digest[:16]}"


class BeirFolder:
    written = "a local BEIR folder as a path, ./FOLDER[@split] (absolute, ./, ../ or ~/)"
    family: str | None = "beir"

    def claims(self, name: str) -> bool:
        return is_path(name)

    def parse(self, name: str) -> DatasetRef:
        """``PATH@split`` splits at the last ``@``, and only when ``PATH/qrels/<split>.tsv`` exists, so a
        folder name may itself contain ``@`` (``./my@data`` is the folder ``my@data``, split 'test')."""
        candidate = _split_candidate(name)
        if candidate is not None and Path(candidate[0], "qrels", f"{candidate[1]}.tsv").is_file():
            return DatasetRef(name, FORM, str(_absolute(candidate[0])), candidate[1])
        return DatasetRef(name, FORM, str(_absolute(os.path.expanduser(name))), DEFAULT_SPLIT)

    def place(self, ref: DatasetRef) -> str:
        return f"{ref.location}{LOCAL_SPLIT_SEP}{ref.split}"

    def digest(self, ref: DatasetRef) -> str:
        """Of the bytes (memoised by size, mtime, ctime and inode), so an edit that keeps the size and
        restores the mtime still re-keys every stage that reads the folder."""
        return tree_digest(Path(ref.location), _topics_files(ref.split or DEFAULT_SPLIT))[:16]

    def key(self, ref: DatasetRef) -> str:
        return _local_key(ref.location, ref.split or DEFAULT_SPLIT, self.digest(ref))

    def short(self, ref: DatasetRef) -> str:
        """The folder's name with its content digest, ``cisi~1a2b3c4d``: two folders of one name, run
        apart, must not publish into one results folder, the second's numbers under the first's name."""
        try:
            return f"{Path(ref.location).name}~{self.digest(ref)[:8]}"
        except OSError:  # unreadable: validation names it in one line before any results folder is written
            return Path(ref.location).name

    def problem(self, ref: DatasetRef) -> str | None:
        return _path_problem(ref.name) or _check_beir_folder(Path(ref.location), ref.split or DEFAULT_SPLIT)

    def availability_problem(self, ref: DatasetRef, timeout: float | None = None) -> str | None:
        return None  # on disk, read whole by ``problem``

    def official_measures(self, ref: DatasetRef) -> list[str]:
        return []

    def corpus(self, ref: DatasetRef) -> str:
        return ref.location

    def corpus_digest(self, ref: DatasetRef) -> str:
        return tree_digest(Path(ref.location), ["corpus.jsonl"])[:16]

    def read(self, ref: DatasetRef, docs: bool = True, pinned: Path | None = None) -> Read:
        folder, split = pinned if pinned is not None else Path(ref.location), ref.split or DEFAULT_SPLIT
        _check_files(folder, (*BEIR_FILES, f"qrels/{split}.tsv") if docs else ("queries.jsonl", f"qrels/{split}.tsv"))
        queries, qrels = read_local_topics(folder, split)
        return (read_local_corpus(folder) if docs else iter(())), queries, qrels

    def docs(self, ref: DatasetRef, pinned: Path | None = None) -> Iterator[tuple[str, str]]:
        return read_local_corpus(pinned if pinned is not None else Path(ref.location))

    def pin_topics(self, ref: DatasetRef, out: Path, planned: str | None) -> Path:
        folder, split = Path(ref.location), ref.split or DEFAULT_SPLIT
        snapshot, copied = _snapshot(folder, ["queries.jsonl", f"qrels/{split}.tsv"], out)
        copied["corpus.jsonl"] = file_digest(folder / "corpus.jsonl")  # in the key; the corpus stage snapshots it
        key = _local_key(ref.location, split, digest_of_tree(copied))
        if planned is not None and key != planned:
            drop_pinned(out)
            raise changed_since_planned(f"dataset {ref.name!r}", planned.rsplit(":", 1)[-1], key.rsplit(":", 1)[-1])
        return snapshot

    def pin_corpus(self, ref: DatasetRef, out: Path, planned: str | None) -> Path:
        snapshot, copied = _snapshot(Path(ref.location), ["corpus.jsonl"], out)
        digest = digest_of_tree(copied)[:16]
        if planned is not None and digest != planned:
            drop_pinned(out)
            raise changed_since_planned(f"dataset folder {ref.name!r}", planned, digest)
        return snapshot


def _snapshot(folder: Path, rels: list[str], out: Path) -> tuple[Path, dict[str, str]]:
    """Copy ``rels`` of a local folder into ``out/.inputs`` (one read each); (the copy, rel → sha256 copied)."""
    _check_files(folder, tuple(rels))
    into = Path(out) / SNAPSHOT
    return into, {rel: copy_hashed(Path(folder) / rel, into / rel) for rel in rels}


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
    for rel in _topics_files(split):
        if not (folder / rel).is_file():
            return (
                f"BEIR folder {str(folder)!r} lacks {rel}; a BEIR folder holds {BEIR_LAYOUT} "
                f"(split given as PATH@split, default {DEFAULT_SPLIT!r})"
            )
    key = f"{VALIDATOR}:{split}:{tree_digest(folder, _topics_files(split))}"
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


BEIR = BeirFolder()
