"""Each stage kind's typed Record: it writes the JSON its kind wrote as a dict, key for key (absent keys stay
absent, nulls stay null), so stages keep their bytes; ``from_json`` is the one reader of earlier VERSIONs;
a parent's record is read as its kind's type, through the store and the executors."""

from __future__ import annotations

import inspect
import json
from pathlib import Path

import pytest

from benchmark.pipeline.executor import run_stage, stops_pipeline
from benchmark.report.results import TrainOutcome
from benchmark.stages import KINDS
from benchmark.stages.records import (
    RECORDS,
    BackboneRecord,
    CorpusRecord,
    DocumentsRecord,
    EncodeRecord,
    SearchRecord,
    StageRecord,
    TopicsRecord,
    TrainRecord,
    parse,
)
from benchmark.stages.store import Inputs, Stage, StageKind, Store

# Records as the kinds' code writes them today (values from a smoke run; long lists shortened).
WRITTEN = {
    "topics": {"dataset": "beir/scifact/test", "queries": 30, "qrels": 33},
    "corpus": {"source": "beir/scifact", "documents": 300, "empty_documents": 0, "judged_docs_missing": 0},
    "triples": {"negatives": "bm25", "triples": 96, "depth": 50, "seed": 42},
    "backbone": {
        "adds_parameters": False,
        "backbone": "bert-tiny",
        "changes": "head_norm",
        "factor": 1.0,
        "hidden_size": 128,
        "label": "none",
        "match": None,
        "match_stat": None,
        "method": "once",
        "mode": "none",
        "model_type": "bert",
        "origin": "the paper's method",
        "params_after": 4416698,
        "params_before": 4416698,
        "rescale": {
            "mode": "none",
            "factor": None,
            "match": None,
            "scale_bias": True,
            "method": "once",
            "match_stat": "logit-std",
        },
        "scale_bias": True,
        "source": "bert-tiny",
        "stat_after": None,
        "stat_before": None,
        "target": None,
        "tied_after": True,
        "tied_before": True,
        "vocab_size": 30522,
        "head_norm_before": 119.9,
        "head_norm_after": 119.9,
    },
    "train": {
        "outcome": "ok",
        "outcome_detail": None,
        "outcome_reason": None,
        "outcome_step": None,
        "stopped_early": False,
        "status": "ok",
        "triggers": {},
        "triggers_armed_step": 3,
        "seed": 42,
        "checkpoint_step": 6,
        "vocab_size": 30522,
        "dev_query_keys": ["a", "b"],
        "dev_rr_published": [1.0, 0.5],
        "final_loss": 0.79,
        "hyperparameters": {"learning_rate": 0.0003},
        "resumed_from_step": None,
    },
    "encode": {
        "attn_implementation": "sdpa",
        "doc_nnz": 188.7,
        "documents": 300,
        "empty_documents": 0,
        "encoder": {"paths": {"int8": 1}, "threads": 2},
        "max_length": 256,
        "precision": "float32",
        "vocab_size": 30522,
    },
    "queries": {
        "attn_implementation": "sdpa",
        "empty_queries": 0,
        "encoder": {},
        "max_length": 64,
        "precision": "float32",
        "queries": 30,
        "query_nnz": 36.9,
        "vocab_size": 30522,
    },
    "index": {"documents": 300, "type": "impact", "unique_terms": 9000},
    "search": {
        "FLOPS": 6.36,
        "doc_nnz": 188.7,
        "k": 1000,
        "queries": 30,
        "queries_past_float32": 0,
        "queries_rescored_exactly": 0,
        "queries_without_hits": 0,
        "query_nnz": 36.9,
        "removed_self_hits": 0,
        "type": "impact",
    },
    "runfile": {"run_queries": 30, "hits": 3000},
    "evaluate": {"metrics": {"nDCG@10": 0.5}, "queries": 30, "run_queries": 30},
}


def test_every_kind_declares_its_record_and_returns_it():
    assert set(RECORDS) == set(KINDS)
    for name, kind in KINDS.items():
        assert kind.Record is RECORDS[name], name
        assert inspect.signature(kind.run).return_annotation == kind.Record.__name__, name


@pytest.mark.parametrize("kind", sorted(WRITTEN))
def test_a_record_writes_the_json_it_was_made_from(kind):
    data = WRITTEN[kind]
    record = RECORDS[kind].from_json(data)
    assert json.dumps(record.to_json(), sort_keys=True) == json.dumps(data, sort_keys=True)


def test_absent_keys_stay_absent_and_nulls_stay_null():
    bm25 = {"k": 1000, "queries": 30, "queries_without_hits": 0, "removed_self_hits": 0, "type": "bm25"}
    record = SearchRecord.from_json(bm25)
    assert record.to_json() == bm25 and record.FLOPS is None and record.queries_past_float32 == 0
    assert record.recorded("queries_past_float32") is None and record.recorded("k") == 1000
    backbone = BackboneRecord.from_json(WRITTEN["backbone"])
    assert backbone.to_json()["match_stat"] is None and "encoder_drift" not in backbone.to_json()
    # keys no reader names are kept as written
    assert TrainRecord.from_json(WRITTEN["train"]).details["hyperparameters"] == {"learning_rate": 0.0003}


def test_a_train_record_of_version_1_is_read_as_today():
    """Train VERSION 1 wrote status and collapse_* (its detector always stopped the run): from_json is the one
    reader of it, and the executor and the report take the outcome from there."""
    old = {
        "status": "collapsed",
        "collapse_reason": "zero",
        "collapse_step": 20,
        "collapse_detail": "all zero",
        "seed": 7,
    }
    record = TrainRecord.from_json(old, version=1)
    assert (
        record.outcome,
        record.outcome_reason,
        record.outcome_step,
        record.outcome_detail,
        record.stopped_early,
    ) == ("collapsed", "zero", 20, "all zero", True)
    assert TrainOutcome.from_record(old) == TrainOutcome("collapsed", "zero", 20, "all zero", True)
    assert stops_pipeline({"kind": "train", "version": 1, "record": old})
    ok = {"status": "ok", "seed": 7}
    assert TrainRecord.from_json(ok, version=1).outcome == "ok" and not stops_pipeline({"kind": "train", "record": ok})
    assert not stops_pipeline({"kind": "train", "version": 4, "record": WRITTEN["train"]})
    assert stops_pipeline(None)


def test_a_backbone_record_from_before_changes_moved_the_head_norm():
    old = {"mode": "factor", "method": "head-norm", "factor": 0.25, "head_norm_before": 8.0, "head_norm_after": 2.0}
    record = BackboneRecord.from_json(old, version=1)
    assert record.changes == "head_norm" and record.moved() == (8.0, 2.0)
    assert record.tag == "head-norm ×0.25 = 1/4, extension"


def test_a_parent_is_read_as_its_kinds_type():
    corpus = {"kind": "corpus", "id": "corpus-1", "version": 1, "record": WRITTEN["corpus"]}
    assert parse(corpus, DocumentsRecord) == CorpusRecord.from_json(WRITTEN["corpus"])  # a base type: the kind's own
    with pytest.raises(TypeError) as err:
        parse(corpus, EncodeRecord)
    assert str(err.value) == "stage corpus-1 is a corpus stage, whose record is a CorpusRecord, not a EncodeRecord"
    assert type(parse({"kind": "elsewhere", "record": {"a": 1}}, StageRecord)) is StageRecord


class _Source(StageKind):
    name = "topics"  # writes a topics record
    VERSION = 1

    @classmethod
    def run(cls, config, inputs, out, ctx):
        return TopicsRecord.from_json(WRITTEN["topics"])


class _Reader(StageKind):
    name = "reader"
    VERSION = 1
    parents = ("topics",)
    seen: list[TopicsRecord] = []

    @classmethod
    def run(cls, config, inputs: Inputs, out, ctx):
        cls.seen.append(inputs.record("topics", TopicsRecord))
        return StageRecord(details={"read": True})


def test_the_store_writes_a_record_and_a_child_reads_it_typed(tmp_path: Path):
    store = Store(tmp_path, log=lambda line: None)
    source = Stage(_Source, {"a": 1})
    reader = Stage(_Reader, {"b": 1}, {"topics": source})
    meta = run_stage(source, store, None, {})
    assert meta["record"] == WRITTEN["topics"]
    assert json.loads((store.path(source) / "config.json").read_text())["record"] == WRITTEN["topics"]
    assert run_stage(reader, store, None, {source.id: meta})["record"] == {"read": True}
    assert _Reader.seen == [TopicsRecord(dataset="beir/scifact/test", queries=30, qrels=33)]
