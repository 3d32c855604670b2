"""Dataset sources: a name is parsed once by the first registered source that claims it; a form registered
twice is refused; a name in no form is one line naming the valid forms; a new form is one source, and the
data stages read it without knowing its layout."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from benchmark.common.errors import BenchmarkError
from benchmark.data import datasets
from benchmark.data.sources import SOURCES, DatasetRef, Read, parse, register, subset
from benchmark.data.sources.beir_folder import BEIR
from benchmark.data.sources.ir_datasets_id import IR_DATASETS
from benchmark.formats import documents as corpus_format, qrels as qrels_format, query_texts as topics_format
from benchmark.formats.qrels import Qrel

FORMS = (
    "valid forms: beir-folder: a local BEIR folder as a path, ./FOLDER[@split] (absolute, ./, ../ or ~/); "
    "ir_datasets: an ir_datasets id (e.g. beir/scifact/test, msmarco-passage/dev/small). Write it as one of them"
)


def test_the_two_forms_are_registered_folder_first():
    assert list(SOURCES) == ["beir-folder", "ir_datasets"]  # a path is a folder before it could be an id
    assert SOURCES["beir-folder"] is BEIR and SOURCES["ir_datasets"] is IR_DATASETS


def test_a_form_registered_twice_is_refused():
    for form, source in (("beir-folder", IR_DATASETS), ("ir_datasets", IR_DATASETS)):
        with pytest.raises(ValueError, match=f"dataset form '{form}' is already registered"):
            register(form, source)
    assert SOURCES["beir-folder"] is BEIR  # the refused one replaced nothing


def test_a_local_folder_resolves_to_the_folder_source(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "data" / "qrels").mkdir(parents=True)
    (tmp_path / "data" / "qrels" / "dev.tsv").write_text("query-id\tcorpus-id\tscore\n")
    where = str((tmp_path / "data").resolve())
    assert parse("./data") == DatasetRef("./data", "beir-folder", where, "test")
    assert parse("./data@dev") == DatasetRef("./data@dev", "beir-folder", where, "dev")
    assert parse(where) == DatasetRef(where, "beir-folder", where, "test")
    assert parse("./data@dev").place == f"{where}@dev"  # what the topics stage's config names
    assert parse("./data").corpus() == where
    assert parse("./data").family == "beir"


def test_an_ir_datasets_id_resolves_to_the_id_source(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "cranfield").mkdir()  # a folder of the id's name is not read: an id is never a path
    for name in ("beir/scifact/test", "cranfield", "msmarco-passage/dev/small"):
        ref = parse(name)
        assert ref == DatasetRef(name, "ir_datasets", name, None)
        assert (ref.place, ref.key(), ref.digest(), ref.family) == (name, name, None, None)
    assert parse("beir/scifact/test").corpus() == "beir/scifact"  # ir_datasets' docs parent
    assert parse("msmarco-passage/dev/small").short() == "small" and parse("beir/scifact/test").short() == "scifact"


@pytest.mark.parametrize("name", ["", "https://example.org/scifact.zip", "hf:BeIR/scifact", "beir/scifact/test "])
def test_a_name_in_no_form_is_one_line_naming_the_valid_forms(name):
    line = f"dataset {name!r} is written in no known form; {FORMS}"
    with pytest.raises(BenchmarkError) as err:
        parse(name)
    assert str(err.value) == line
    assert datasets.validate_dataset(name) == line  # the check a plan runs before any stage
    assert datasets.availability_problem(name) is None  # reported once, by the check above


def test_the_query_cut_is_the_first_in_hash_order():
    judged = ["q3", "q1", "q2", "q10"]
    by_hash = sorted(judged, key=lambda q: hashlib.sha1(f"7:{q}".encode()).hexdigest())
    assert subset.cut_queries(judged, None, 7) == ["q1", "q10", "q2", "q3"]  # all of them, sorted
    assert subset.cut_queries(judged, 2, 7) == by_hash[:2]
    with pytest.raises(BenchmarkError, match=r"max_docs = 0 must be a positive integer \(or None for everything\)"):
        subset.check_limit("max_docs", 0)


class InMemory:
    """A third form, ``mem:NAME``: what adding a dataset format takes (this class and one registration)."""

    written = "mem:NAME"
    family: str | None = None
    DOCS = {"d1": "sparse retrieval", "d2": "dense vectors", "d3": "impacts"}

    def claims(self, name: str) -> bool:
        return name.startswith("mem:")

    def parse(self, name: str) -> DatasetRef:
        return DatasetRef(name, "mem", name.removeprefix("mem:"))

    def place(self, ref: DatasetRef) -> str:
        return ref.name

    def digest(self, ref: DatasetRef) -> None:
        return None

    def key(self, ref: DatasetRef) -> str:
        return ref.name

    def short(self, ref: DatasetRef) -> str:
        return ref.location

    def problem(self, ref: DatasetRef) -> str | None:
        return None

    def availability_problem(self, ref: DatasetRef, timeout: float | None = None) -> str | None:
        return None

    def official_measures(self, ref: DatasetRef) -> list[str]:
        return []

    def corpus(self, ref: DatasetRef) -> str:
        return ref.name

    def corpus_digest(self, ref: DatasetRef) -> None:
        return None

    def read(self, ref: DatasetRef, docs: bool = True, pinned: Path | None = None) -> Read:
        queries = {"q1": "sparse  retrieval?", "q2": "unjudged"}
        return (self.docs(ref) if docs else iter(())), queries, [Qrel("q1", "d1", 1), Qrel("q1", "d3", 0)]

    def docs(self, ref: DatasetRef, pinned: Path | None = None) -> Iterator[tuple[str, str]]:
        return iter(self.DOCS.items())

    def pin_topics(self, ref: DatasetRef, out: Path, planned: str | None) -> None:
        return None

    def pin_corpus(self, ref: DatasetRef, out: Path, planned: str | None) -> None:
        return None


def test_a_new_form_is_one_source_and_the_stages_read_it(tmp_path, monkeypatch):
    monkeypatch.setattr(SOURCES, "_items", dict(SOURCES.items()))  # the registration undone after the test
    register("mem", InMemory())
    assert parse("mem:tiny") == DatasetRef("mem:tiny", "mem", "tiny")
    record = datasets.materialise("mem:tiny", tmp_path, progress=False)
    assert record == {"dataset": "mem:tiny", "documents": 3, "queries": 1, "qrels": 2, "judged_docs_missing": 0}
    assert list(topics_format.read_queries(tmp_path / topics_format.QUERIES)) == [
        topics_format.Query("q1", "sparse retrieval?")
    ]
    assert (tmp_path / qrels_format.QRELS).read_text() == "q1 0 d1 1\nq1 0 d3 0\n"
    docs = [json.loads(line) for line in corpus_format.docs_path(tmp_path).read_text().splitlines()]
    assert docs == [{"id": d, "contents": c} for d, c in InMemory.DOCS.items()]


def test_a_snapshot_is_read_as_the_source_it_copies(tmp_path, monkeypatch):
    """The corpus stage reads a local folder from its snapshot: the snapshot is handed on as a folder of the
    same source, not written back into a name and parsed again (a relative ``out/.inputs`` is no path form,
    so it was taken for an ir_datasets id)."""
    folder = tmp_path / "mini"
    (folder / "qrels").mkdir(parents=True)
    (folder / "corpus.jsonl").write_text('{"_id": "d1", "text": "sparse"}\n{"_id": "d2", "text": "dense"}\n')
    (folder / "queries.jsonl").write_text('{"_id": "q1", "text": "sparse?"}\n')
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\n")
    monkeypatch.chdir(tmp_path)
    Path("out").mkdir()
    record = datasets.materialise(str(folder), Path("out"), progress=False)
    assert record == {"dataset": str(folder), "documents": 2, "queries": 1, "qrels": 1, "judged_docs_missing": 0}
    assert corpus_format.read_docids(corpus_format.docids_path(Path("out"))) == ["d1", "d2"]
    assert not Path("out", ".inputs").exists()  # the snapshot is gone once the stage is written
