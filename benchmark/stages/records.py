"""What each stage kind records: one frozen ``Record`` per kind, the typed form of the ``"record"`` of its
stage folders' ``config.json``. A kind's ``run()`` returns it; a child stage, the executors and the report
read a parent's record as its kind's type (``Inputs.record``, ``parse``), never by string keys.

The records sit in one module, beside the kinds rather than inside them, because a child reads its
parent's type and a stage kind never imports another (``tests/package/test_layout.py``).

``from_json`` is the one place that reads what a kind's earlier VERSIONs wrote (``upgrade``: a train
record before the outcome had its own keys; a backbone record before it named the statistic it moved).
``to_json`` writes exactly the keys the record was made from: a key that was absent stays absent and one
that was null stays null, so a record made from a kind's dict writes the same JSON the dict did (the
stage's bytes do not change). Keys that no reader names (a training run's telemetry summary, the
encoder's measurements) are kept as written in ``details``.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Self, TypeVar

#: StageRecord's own fields, not keys of the record
_OWN = ("details", "absent")


class RecordError(ValueError):
    """A stage's record that is not what its kind writes (a wrong JSON type, not an object): damage."""


_HINTS: dict[type, dict[str, Any]] = {}


def _hints(cls: type) -> dict[str, Any]:
    """A record type's field annotations, resolved once."""
    if cls not in _HINTS:
        _HINTS[cls] = typing.get_type_hints(cls)
    return _HINTS[cls]


def _json_name(value: Any) -> str:
    names = {dict: "JSON object", list: "JSON list", str: "string", bool: "boolean", type(None): "null"}
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return "number"
    return names.get(type(value), type(value).__name__)


def _short(value: Any) -> str:
    text = repr(value)
    return f"{text[:40]}… (a {_json_name(value)})" if len(text) > 40 else f"{text} (a {_json_name(value)})"


def _is(value: Any, hint: Any) -> bool:
    """Whether a JSON value has the type a record field is annotated with (an int is a float; a bool is neither)."""
    if hint is Any:
        return True
    origin = typing.get_origin(hint)
    if origin in (types.UnionType, typing.Union):
        return any(_is(value, h) for h in typing.get_args(hint))
    if hint is type(None):
        return value is None
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if hint is str:
        return isinstance(value, str)
    if origin in (list, tuple, collections.abc.Sequence):
        (item,) = typing.get_args(hint)[:1] or (Any,)
        return isinstance(value, list) and all(_is(v, item) for v in value)
    if origin in (dict, collections.abc.Mapping):
        key, item = typing.get_args(hint) or (Any, Any)
        return isinstance(value, dict) and all(_is(k, key) and _is(v, item) for k, v in value.items())
    return True  # a type no record uses yet: not checked


def _describe(hint: Any) -> str:
    origin = typing.get_origin(hint)
    if origin in (types.UnionType, typing.Union):
        return " or ".join(_describe(h) for h in typing.get_args(hint))
    if origin in (list, tuple, collections.abc.Sequence):
        return f"a JSON list whose items are each {_describe(typing.get_args(hint)[0])}"
    if origin in (dict, collections.abc.Mapping):
        return f"a JSON object whose values are each {_describe(typing.get_args(hint)[1])}"
    return {type(None): "null", bool: "a boolean", int: "an integer", float: "a number", str: "a string"}.get(
        hint, "any value"
    )


R = TypeVar("R", bound="StageRecord")


@dataclass(frozen=True, kw_only=True)
class StageRecord:
    """A record of no declared shape (a kind outside this package, a test's): every key in ``details``."""

    details: Mapping[str, Any] = field(default_factory=dict)
    absent: frozenset[str] = field(default=frozenset(), repr=False, compare=False)  # typed keys not in the JSON

    @classmethod
    def keys(cls) -> tuple[str, ...]:
        """The record keys this type names."""
        return tuple(f.name for f in dataclasses.fields(cls) if f.name not in _OWN)

    @classmethod
    def upgrade(cls, data: dict[str, Any], version: int | None) -> dict[str, Any]:
        """The keys as the kind's current VERSION writes them, from a record of an earlier one (``version``:
        the stage's VERSION, None for a record of the current code). The only code that knows old records."""
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any], version: int | None = None, *, check: bool = False) -> Self:
        """The record of ``data`` (a config.json's ``"record"``, or what a kind's domain code returned).

        ``check`` (JSON read back from a stage folder, as ``parse`` does): raises ``RecordError`` (one line:
        the key, its value, the JSON type it needs) where ``data`` is not a JSON object or a typed key holds
        another JSON type, so that an edited or half-written record is damage, not a crash downstream."""
        if not isinstance(data, Mapping):
            raise RecordError(f"its record is a {_json_name(data)}, not a JSON object")
        data = cls.upgrade(dict(data), version)
        names = cls.keys()
        hints = _hints(cls) if check else {}
        for key in names if check else ():
            if key in data and not _is(data[key], hints[key]):
                raise RecordError(
                    f"its record's {key!r} is {_short(data[key])}, not {_describe(hints[key])} ({cls.__name__})"
                )
        return cls(
            **{k: data[k] for k in names if k in data},
            details={k: v for k, v in data.items() if k not in names},
            absent=frozenset(k for k in names if k not in data),
        )

    def recorded(self, key: str) -> Any:
        """The value of ``key`` as recorded; None where the record has no such key (a record of an earlier
        VERSION, a partial one), where the typed field would show its default."""
        return None if key in self.absent else getattr(self, key)

    def to_json(self) -> dict[str, Any]:
        out = dict(self.details)
        out.update({k: getattr(self, k) for k in self.keys() if k not in self.absent})
        return out


# --------------------------------------------------------------------------- data


@dataclass(frozen=True, kw_only=True)
class TopicsRecord(StageRecord):
    dataset: str = ""
    queries: int = 0
    qrels: int = 0


@dataclass(frozen=True, kw_only=True)
class DocumentsRecord(StageRecord):
    """A stage that holds documents, as text (a corpus) or as vectors (an encoding): what its index must hold."""

    documents: int = 0
    empty_documents: int = 0  # Lucene indexes none of them


@dataclass(frozen=True, kw_only=True)
class CorpusRecord(DocumentsRecord):
    source: str = ""
    judged_docs_missing: int = 0
    repeated_ids_skipped: int = 0  # written only when a source repeats ids (the first document of each is kept)


@dataclass(frozen=True, kw_only=True)
class TriplesRecord(StageRecord):
    negatives: str = ""
    triples: int = 0
    dataset: str | None = None  # official or Hugging Face triples
    depth: int | None = None  # BM25 mining
    seed: int | None = None


# --------------------------------------------------------------------------- models


#: the statistics a head snapshot records, each as ``<name>_before`` and ``<name>_after``
SNAPSHOT = (
    "params",
    "tied",
    "head_norm",
    "projection_scale",
    "projection_norm",
    "bias_norm",
    "head_gain",
    "embedding_norm",
)


@dataclass(frozen=True, kw_only=True)
class BackboneRecord(StageRecord):
    """The checkpoint, and how its MLM head was rescaled (``benchmark.model.rescale.apply_rescale``)."""

    backbone: str = ""
    source: str = ""
    model_type: str = ""
    vocab_size: int | None = None
    hidden_size: int | None = None
    rescale: Mapping[str, Any] = field(default_factory=dict)  # the spec, as Rescale.to_dict gives it
    mode: str = "none"
    method: str = ""
    origin: str = ""
    changes: str = "head_norm"  # the snapshot statistic the method moves (records before it: the head norm)
    label: str = ""
    factor: float | None = None
    match: str | float | None = None
    match_stat: str | None = None
    scale_bias: bool = True
    adds_parameters: bool = False
    stat_before: float | None = None
    target: float | None = None
    stat_after: float | None = None
    # 'once' on a shared matrix behind a LayerNorm: the embedding rows' scale (smallest, median) and the
    # encoder output's drift on the shipped sample
    embedding_scale_min: float | None = None
    embedding_scale_median: float | None = None
    encoder_drift: float | None = None
    params_before: int | None = None
    params_after: int | None = None
    tied_before: bool | None = None
    tied_after: bool | None = None
    head_norm_before: float | None = None
    head_norm_after: float | None = None
    projection_scale_before: float | None = None
    projection_scale_after: float | None = None
    projection_norm_before: float | None = None
    projection_norm_after: float | None = None
    bias_norm_before: float | None = None
    bias_norm_after: float | None = None
    head_gain_before: float | None = None
    head_gain_after: float | None = None
    embedding_norm_before: float | None = None
    embedding_norm_after: float | None = None

    def moved(self) -> tuple[float | None, float | None]:
        """The statistic the method moves (``changes``), before and after."""
        if self.changes not in SNAPSHOT:
            return None, None
        return getattr(self, f"{self.changes}_before"), getattr(self, f"{self.changes}_after")

    @property
    def tag(self) -> str:
        """How the head was rescaled, in the words of the tables (``benchmark.model.rescale.rescale_tag``)."""
        from benchmark.model.rescale import rescale_tag

        return rescale_tag(
            self.method,
            self.factor,
            self.mode,
            match_stat=self.match_stat,
            stat_before=self.stat_before,
            stat_after=self.stat_after,
            params_added=(self.params_after or 0) - (self.params_before or 0),
            embedding_scale_median=self.embedding_scale_median,
            encoder_drift=self.encoder_drift,
        )


@dataclass(frozen=True, kw_only=True)
class TrainRecord(StageRecord):
    """How a training run ended and what the report reads of it; its telemetry summary stays in ``details``."""

    outcome: str = "ok"  # benchmark.training.outcomes.TRAINING_OUTCOMES
    outcome_reason: str | None = None
    outcome_step: int | None = None
    outcome_detail: str | None = None
    stopped_early: bool = False  # a collapse trigger stopped it: no model worth encoding
    status: str | None = None  # the outcome under its former key, still written
    triggers_armed_step: int | None = None
    seed: int | None = None
    vocab_size: int | None = None
    checkpoint_step: int | None = None
    dev_query_keys: list[str] = field(default_factory=list)  # train VERSION 3 on
    dev_rr_published: list[float] = field(default_factory=list)

    @classmethod
    def upgrade(cls, data: dict[str, Any], version: int | None) -> dict[str, Any]:
        # Train VERSION 1 wrote status ("ok" or "collapsed") and collapse_*; its detector always stopped the run.
        if "outcome" not in data:
            collapsed = data.get("status") == "collapsed"
            data.update(
                outcome="collapsed" if collapsed else "ok",
                outcome_reason=data.get("collapse_reason"),
                outcome_step=data.get("collapse_step"),
                outcome_detail=data.get("collapse_detail"),
            )
            data.setdefault("stopped_early", collapsed)
        return data


# --------------------------------------------------------------------------- retrieval


@dataclass(frozen=True, kw_only=True)
class EncodeRecord(DocumentsRecord):
    doc_nnz: float = 0.0
    vocab_size: int = 0
    max_length: int = 0
    precision: str = ""
    attn_implementation: str = ""
    encoder: Mapping[str, Any] = field(default_factory=dict)  # what the encoder measured (paths, timings)


@dataclass(frozen=True, kw_only=True)
class QueriesRecord(StageRecord):
    queries: int = 0
    query_nnz: float = 0.0
    empty_queries: int = 0
    vocab_size: int = 0
    max_length: int = 0
    precision: str = ""
    attn_implementation: str = ""
    encoder: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class IndexRecord(StageRecord):
    type: str = ""  # bm25 | impact
    documents: int = 0
    unique_terms: int = 0
    engine: str = "lucene"  # the search engine whose index this is (recorded when not Lucene)


@dataclass(frozen=True, kw_only=True)
class SearchRecord(StageRecord):
    type: str = ""  # the index's
    queries: int = 0
    k: int | None = None
    removed_self_hits: int = 0
    queries_without_hits: int = 0
    lucene_s: float | None = None  # wall seconds inside Lucene's batch searches (timing, not output)
    engine: str = "lucene"  # the engine and operating point that searched (recorded when not Lucene)
    exact: bool = True  # False where that point is approximate
    engine_s: float | None = None  # wall seconds inside the engine's own calls (timing, not output)
    queries_past_float32: int = 0  # impact search
    queries_rescored_exactly: int = 0  # impact search (0 unless its config asks for exact scores)
    doc_nnz: float | None = None  # impact search with its encode stage
    query_nnz: float | None = None
    FLOPS: float | None = None  # noqa: N815 (the measure's name, as the tables print it)


@dataclass(frozen=True, kw_only=True)
class RunFileRecord(StageRecord):
    run_queries: int = 0
    hits: int = 0


@dataclass(frozen=True, kw_only=True)
class EvaluateRecord(StageRecord):
    metrics: Mapping[str, float] = field(default_factory=dict)  # measure → mean over every judged query
    queries: int = 0  # judged queries
    run_queries: int = 0  # queries the run ranks


#: stage kind name → its record type
RECORDS: dict[str, type[StageRecord]] = {
    "topics": TopicsRecord,
    "corpus": CorpusRecord,
    "triples": TriplesRecord,
    "backbone": BackboneRecord,
    "train": TrainRecord,
    "encode": EncodeRecord,
    "queries": QueriesRecord,
    "index": IndexRecord,
    "search": SearchRecord,
    "runfile": RunFileRecord,
    "evaluate": EvaluateRecord,
}


def parse(meta: Mapping[str, Any], as_type: type[R]) -> R:
    """The record of a stage's config.json, as ``as_type`` (the record type of the stage's kind, or a base of
    it such as ``DocumentsRecord``); a stage of another kind is a TypeError naming both, a record of the wrong
    JSON types a ``RecordError``."""
    kind = str(meta.get("kind", ""))
    record_type = RECORDS.get(kind, as_type)
    if not issubclass(record_type, as_type):
        raise TypeError(
            f"stage {meta.get('id')} is a {kind} stage, whose record is a {record_type.__name__}, "
            f"not a {as_type.__name__}"
        )
    version = meta.get("version")
    if version is not None and (not isinstance(version, int) or isinstance(version, bool)):
        raise RecordError(f"its version is {_short(version)}, not an integer")
    record = record_type.from_json(meta.get("record", {}), version, check=True)
    assert isinstance(record, as_type)
    return record
