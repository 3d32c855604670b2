"""The evaluate stage: ir_measures on a run file, aggregate and per-query (for significance tests)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from benchmark.common import kill_points
from benchmark.common.errors import BenchmarkError
from benchmark.common.idset import IdSet
from benchmark.formats import documents as corpus, perquery, qrels as qrels_format, trec_run

MEASURE_HELP = "use ir_measures strings such as nDCG@10, RR@10, R@100, R@1000, AP, R(rel=2)@1000"

# A trial evaluation for every measure before any work starts: two judged queries (one with graded
# relevance), a run with a hit, a miss and an unjudged document. Query ids are numeric because
# gdeval (ERR, nDCG for graded relevance in TREC Web) rejects others.
_TRIAL_QRELS = [("1", "d1", 1), ("1", "d2", 0), ("2", "d2", 2), ("2", "d3", 1)]
_TRIAL_RUN = [("1", "d1", 3.0), ("1", "d4", 2.0), ("2", "d3", 2.0), ("2", "d2", 1.0)]


def normalise_measure(name: str) -> str:
    """ir_measures' canonical spelling of ``name`` (``nDCG(cutoff=10)`` → ``nDCG@10``); a name that is
    not a valid measure comes back as written, for ``measure_problems`` to report in the user's words."""
    import ir_measures

    try:
        canonical = str(ir_measures.parse_measure(name.strip()))
    except Exception:  # ir_measures raises ValueError, NameError or SyntaxError; all mean 'not a measure'
        return name
    return name if _measure_problem(name) else canonical


def _measure_problem(name: str) -> str | None:
    """Why ``name`` cannot be evaluated here, or None. ``name`` parses (checked by the caller)."""
    import ir_measures
    from ir_measures.measures.base import MeanAgg

    measure = ir_measures.parse_measure(name.strip())
    # pytrec_eval aborts the whole process (SIGABRT) on a cutoff of 0; no measure means anything below 1.
    cutoff = measure.params.get("cutoff")
    if cutoff is not None and (not isinstance(cutoff, int) or isinstance(cutoff, bool) or cutoff < 1):
        return (
            f"measure {name!r} has cutoff {cutoff!r}; a cutoff is a positive integer written in digits "
            f"(e.g. {measure.NAME or type(measure).__name__}@10)"
        )
    from ir_measures.measures.base import _NOT_PROVIDED

    missing = [
        p
        for p, info in measure.SUPPORTED_PARAMS.items()
        if getattr(info, "required", False) and measure.params.get(p, _NOT_PROVIDED) is _NOT_PROVIDED
    ]
    if missing:  # ir_measures' own line names its internal placeholder: 'invalid param max_rel=<object object at …>'
        what = "; ".join(
            measure.SUPPORTED_PARAMS[p].desc if len(missing) == 1 else f"{p}: {measure.SUPPORTED_PARAMS[p].desc}"
            for p in missing
        )
        return (
            f"measure {name!r} needs a value for {', '.join(missing)} ({what}), which has no default: write e.g. "
            f"{measure.NAME}({', '.join(f'{p}=…' for p in missing)}); {MEASURE_HELP}"
        )
    try:
        measure.validate_params()
    except AssertionError as exc:  # ir_measures checks parameter types and ranges with assert
        return f"measure {name!r} has {str(exc).replace('invalid param ', 'an invalid parameter ')}; {MEASURE_HELP}"
    if not isinstance(measure.aggregator(), MeanAgg):
        return (
            f"measure {name!r} is a total over queries, but the tables report means over the judged queries; "
            "use a per-query measure (e.g. R@1000, nDCG@10)"
        )
    qrels = [ir_measures.Qrel(q, d, r) for q, d, r in _TRIAL_QRELS]
    run = [ir_measures.ScoredDoc(q, d, s) for q, d, s in _TRIAL_RUN]
    try:
        list(ir_measures.evaluator([measure], qrels).iter_calc(run))
    except Exception as exc:  # any provider failure: the stage would fail the same way, after all the work
        detail = " ".join(str(exc).split()) or type(exc).__name__
        return f"measure {name!r} cannot be evaluated here ({detail}); {MEASURE_HELP}"
    return None


def parse_measures(names: Sequence[str]) -> list[Any]:
    """ir_measures measure objects, each checked to evaluate; every bad string is reported at once."""
    import ir_measures

    problems = measure_problems(names)
    if problems:
        raise BenchmarkError(" | ".join(problems))
    return [ir_measures.parse_measure(name.strip()) for name in names]


def measure_problems(names: Sequence[str]) -> list[str]:
    """One line per problem: unknown strings together, then each measure that cannot be evaluated.

    Every evaluator is built and run on a trial qrels/run pair, so a measure that would fail (or
    abort pytrec_eval) after all the retrieval work fails here instead.
    """
    import ir_measures

    if not names:
        return [f"no measures given; {MEASURE_HELP}"]
    bad, problems = [], []
    for name in dict.fromkeys(names):
        try:
            ir_measures.parse_measure(name.strip())
        except Exception:  # ValueError, NameError, SyntaxError: not a measure string
            bad.append(name)
            continue
        problem = _measure_problem(name)
        if problem:
            problems.append(problem)
    if bad:
        problems.insert(0, f"unknown measure(s) {', '.join(map(repr, bad))}; {MEASURE_HELP}")
    return problems


#: judged queries evaluated together: the run is read a block of queries at a time (an MS MARCO run of
#: 7M lines is never held whole); per-query values do not depend on the blocks
BLOCK = 100


class _NotGrouped(Exception):
    """A query's lines are not contiguous in the run file (a --run file sorted otherwise)."""


def _blocks(run_file: Path, size: int | None) -> Iterator[list[Any]]:
    """The run's ScoredDocs, ``size`` queries at a time (None: all at once); raises ``_NotGrouped`` when a
    query's lines come back after another query's, so that the caller reads the file whole instead."""
    import ir_measures

    block: list[Any] = []
    finished: set[str] = set()
    current, in_block = None, 0
    for _, r in trec_run.read_run_lines(run_file):
        if r.query_id != current:
            if current is not None:
                finished.add(current)
            if r.query_id in finished and size is not None:
                raise _NotGrouped(r.query_id)
            current = r.query_id
            in_block += 1
            if size is not None and in_block > size:
                yield block
                block, in_block = [], 1
        block.append(ir_measures.ScoredDoc(r.query_id, r.doc_id, float(r.score)))
    if block:
        yield block


def evaluate_stage(
    run_file: Path, topics_dir: Path, corpus_dir: Path, measures: Sequence[str], out: Path
) -> dict[str, Any]:
    import ir_measures

    parsed = parse_measures(measures)
    documents = IdSet(corpus.iter_docids(corpus.docids_path(corpus_dir)))
    qrels = [
        ir_measures.Qrel(q.query_id, q.doc_id, q.relevance)
        for q in qrels_format.read_qrels(Path(topics_dir) / qrels_format.QRELS)
    ]
    judged = sorted({q.query_id for q in qrels})
    by_query: dict[str, list[Any]] = {}
    for q in qrels:
        by_query.setdefault(q.query_id, []).append(q)
    names = ", ".join(map(str, parsed))

    def evaluator(queries: set[str]) -> Any:  # the block's judgements only: a block costs its own queries
        return ir_measures.evaluator(parsed, [q for qid in sorted(queries) for q in by_query.get(qid, ())])

    try:
        try:
            per_query, foreign, run_queries = _evaluate_blocks(evaluator, names, run_file, documents, BLOCK)
        except _NotGrouped:
            per_query, foreign, run_queries = _evaluate_blocks(evaluator, names, run_file, documents, None)
    finally:
        documents.discard()
    if foreign:
        raise BenchmarkError(
            f"run file {run_file} ranks {len(foreign)} document(s) absent from the corpus of {corpus_dir}, e.g. "
            f"{min(foreign)!r}; "
            "the run was made against another collection: rerun its search stage with --force"
        )
    # a judged query the system returned nothing for scores 0, as trec_eval -c
    perquery.write_perquery(
        perquery.perquery_path(out),
        (perquery.Value(str(m), q, per_query.get((str(m), q), 0.0)) for m in parsed for q in judged),
    )
    kill_points.point("evaluate:written")
    # Mean over every judged query, 0 where the run has none (trec_eval -c, as Pyserini's BEIR 2CR).
    aggregate = means({str(m): {q: per_query.get((str(m), q), 0.0) for q in judged} for m in parsed})
    return {"metrics": aggregate, "queries": len(judged), "run_queries": run_queries}


def _evaluate_blocks(
    evaluator: Callable[[set[str]], Any], names: str, run_file: Path, documents: IdSet, size: int | None
) -> tuple[dict[tuple[str, str], float], set[str], int]:
    """Per-query values over the run's blocks, the ranked ids absent from ``documents``, and the run's queries."""
    per_query: dict[tuple[str, str], float] = {}
    foreign: set[str] = set()
    queries: set[str] = set()
    for block in _blocks(run_file, size):
        foreign.update(documents.missing(d.doc_id for d in block))
        these = {d.query_id for d in block}
        queries |= these
        if foreign:  # the run is refused: nothing more to compute
            continue
        try:
            for m in evaluator(these).iter_calc(block):
                per_query[(str(m.measure), m.query_id)] = float(m.value)
        except Exception as exc:  # a provider that passed the trial but fails on these ids (gdeval on non-numeric ids)
            detail = " ".join(str(exc).split()) or type(exc).__name__
            raise BenchmarkError(
                f"evaluating {names} on {run_file} failed ({detail}); "
                f"drop the measure that fails from the suite; {MEASURE_HELP}"
            ) from None
    return per_query, foreign, len(queries)


def means(perquery: Mapping[str, Mapping[str, float]]) -> dict[str, float]:
    """Each measure's mean over its queries, summed in their order: the evaluate stage's aggregate, and the
    same number again from its ``perquery.tsv`` (values written as repr, read back exactly)."""
    return {m: sum(values.values()) / len(values) for m, values in perquery.items() if values}


def record_problem(record: Mapping[str, Any], eval_dir: Path) -> str | None:
    """Where an evaluate stage's recorded means are not those of its ``perquery.tsv``, or None."""
    if not perquery.perquery_path(eval_dir).is_file():
        return None  # an evaluate stage from before per-query values
    try:
        derived = means(perquery.read_perquery(perquery.perquery_path(eval_dir)))
    except (OSError, ValueError) as exc:
        return f"its {perquery.PERQUERY} cannot be read ({exc})"
    metrics = record.get("metrics") or {}
    if set(metrics) != set(derived):
        return (
            f"its record's measures ({', '.join(sorted(metrics))}) are not those of its {perquery.PERQUERY} "
            f"({', '.join(sorted(derived))})"
        )
    for measure, value in metrics.items():
        if value != derived[measure]:
            return f"its record gives {measure} = {value!r}, but its {perquery.PERQUERY} averages {derived[measure]!r}"
    return None
