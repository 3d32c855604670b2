"""A corpus stage's documents: ``corpus/docs.jsonl``, a Pyserini JsonCollection (``{"id", "contents"}``
per line; contents = title + " " + text, as BEIR and Pyserini build it), and ``docids.txt`` (one id a
line, in the same order)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import NamedTuple

from benchmark.common.atomic import atomic_write

COLLECTION = "corpus"  # the JsonCollection folder, what the BM25 index reads
DOCS = "docs.jsonl"
DOCIDS = "docids.txt"


class Doc(NamedTuple):
    doc_id: str
    contents: str


#: what Java's ``String.trim()`` strips: the code points up to U+0020. Anserini skips a document whose contents
#: trim to nothing; a document of a no-break space (U+00A0) or other Unicode space is indexed (with no term).
JAVA_TRIMMED = "".join(map(chr, range(0x21)))


def indexed_empty(contents: str) -> bool:
    """Whether Anserini skips this document as empty (``contents.trim().isEmpty()``); Python's ``strip()``
    also strips Unicode spaces, and counting by it made a corpus of one NBSP document disagree with its index."""
    return not contents.strip(JAVA_TRIMMED)


def docs_path(folder: Path | str) -> Path:
    return Path(folder) / COLLECTION / DOCS


def docids_path(folder: Path | str) -> Path:
    return Path(folder) / DOCIDS


def format_doc(doc: Doc) -> str:
    return json.dumps({"id": doc.doc_id, "contents": doc.contents}, ensure_ascii=False)


def parse_doc(line: str) -> Doc:
    d = json.loads(line)
    return Doc(d["id"], d["contents"])


def read_docs(path: Path | str) -> Iterator[Doc]:
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            yield parse_doc(line)


def read_docids(path: Path | str) -> list[str]:
    return Path(path).read_text(encoding="utf-8").split("\n")[:-1]


def iter_docids(path: Path | str) -> Iterator[str]:
    """``read_docids`` a line at a time: a corpus's ids without the list (70 MB at a million documents)."""
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            yield line[:-1] if line.endswith("\n") else line


def write_corpus(folder: Path | str, docs: Iterable[Doc]) -> int:
    """``docs.jsonl`` and ``docids.txt`` in one pass, each appearing whole (``docs.jsonl`` first); an
    error raised by ``docs`` leaves neither. Returns how many documents were written."""
    (Path(folder) / COLLECTION).mkdir(parents=True, exist_ok=True)
    n = 0
    with atomic_write(docids_path(folder), fsync=False) as ids:
        with atomic_write(docs_path(folder), fsync=False) as fh:
            for doc in docs:
                fh.write(format_doc(doc) + "\n")
                ids.write(doc.doc_id + "\n")
                n += 1
    return n
