"""Everything a run reads or writes, checked before any stage runs.

A problem found here costs a second; found by a stage, it costs the work of every stage before
it (and a measure that aborts pytrec_eval costs the whole run). Each check returns one line per
problem naming the value, the valid options and the fix; the caller reports them all at once.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchmark.common.errors import BenchmarkError, Unavailable

if TYPE_CHECKING:
    from benchmark.pipeline.plan import Options, Plan
    from benchmark.suites import Suite


def output_dir_problem(path: Path | str, what: str, flag: str, env: str | None = None) -> str | None:
    """None when ``path`` is, or can be created as, a writable folder; nothing is created."""
    target = Path(path).expanduser().absolute()
    probe_in = target
    while not probe_in.exists() and not probe_in.is_symlink() and probe_in != probe_in.parent:
        probe_in = probe_in.parent
    reason = None
    if not probe_in.is_dir():
        reason = f"{probe_in} is a file" if probe_in.exists() else f"{probe_in} does not resolve to a folder"
    else:
        try:
            fd, probe = tempfile.mkstemp(prefix=".write-probe-", dir=probe_in)
            os.close(fd)
            os.unlink(probe)
        except OSError as exc:
            reason = exc.strerror or type(exc).__name__
    if reason is None:
        return None
    return f"{what} folder {str(path)!r} is not writable ({reason}); fix its permissions or pass {flag} DIR" + (
        f" (or set {env})" if env else ""
    )


def overlap_problem(runs_dir: Path | str, results_dir: Path | str) -> str | None:
    """The two folders must be apart: a suite named like a stage kind (``search``) would write its
    tables among the stage folders, and ``python -m benchmark.report`` would take stage kinds for suites."""
    runs, results = (Path(p).expanduser().resolve() for p in (runs_dir, results_dir))
    if runs == results or runs in results.parents or results in runs.parents:
        how = "is" if runs == results else "overlaps"
        return (
            f"--results-dir {str(results_dir)!r} {how} --runs-dir {str(runs_dir)!r}; give them separate folders, "
            "e.g. --runs-dir runs --results-dir results"
        )
    return None


def check_output_dirs(runs_dir: Path | str, results_dir: Path | str) -> None:
    """Both output folders, up front: a run must not end, hours later, unable to write its tables."""
    problems = [
        p
        for p in (
            output_dir_problem(runs_dir, "runs", "--runs-dir", "BENCHMARK_RUNS_DIR"),
            output_dir_problem(results_dir, "results", "--results-dir", "BENCHMARK_RESULTS_DIR"),
            overlap_problem(runs_dir, results_dir),
        )
        if p
    ]
    if problems:
        raise BenchmarkError(" | ".join(problems))


def depth_problems(plan: Any) -> list[str]:
    """A measure whose cutoff is deeper than the search depth ``k`` is computed on the ``k`` hits a search
    returns: R@1000 at k = 100 is R@100 under R@1000's name on every row. Refused before any work (the
    measures of the harness's own searches; a run file has its own depth)."""
    import ir_measures

    k = getattr(plan.suite, "k", None)
    if not isinstance(k, int):
        return []
    measures = [
        m for c in plan.conditions if c.system != "run" and c.evaluate is not None for m in c.evaluate.config.measures
    ]
    deeper: dict[str, int] = {}
    for name in dict.fromkeys(measures):
        try:
            cutoff = ir_measures.parse_measure(name).params.get("cutoff")
        except Exception:  # not a measure: measure_problems names it
            continue
        if isinstance(cutoff, int) and cutoff > k:
            deeper[name] = cutoff
    if not deeper:
        return []
    names, deepest = ", ".join(deeper), max(deeper.values())
    example = next((f" ({m} would equal R@{k} on every row)" for m in deeper if m.startswith("R@")), "")
    return [
        f"measure(s) {names} rank deeper than the search depth k = {k}: a search returns {k} hits per query, so "
        f"they would be computed on those alone{example}; set k to {deepest} or more (--set k={deepest}), or leave "
        f"{names} out of the measures"
    ]


def plan_problems(plan: Any, backbones: list[str], deep: bool) -> list[str]:
    """Every problem with what ``plan`` reads: datasets (and the recipe's), measures, backbones.

    ``deep`` (a real run, not ``--dry-run``) adds what needs the network or transformers: that each
    ir_datasets id's files are cached or downloadable, that each hub id exists, and that each
    backbone's config and tokenizer load and fit its MLM head.
    """
    from benchmark.data.datasets import availability_problem, validate_dataset
    from benchmark.evaluation.measures import measure_problems

    problems: list[str] = []
    datasets = list(plan.datasets)
    recipe = getattr(plan, "recipe", None) or {}
    if recipe.get("negatives", "bm25") == "bm25" and recipe.get("dataset"):
        datasets.append(recipe["dataset"])  # mined from its own topics and corpus stages
    for name in dict.fromkeys(datasets):
        problem = validate_dataset(name) or (availability_problem(name) if deep else None)
        if problem:
            problems.append(problem)
    problems.extend(measure_problems(plan.measures))
    if deep:
        problems.extend(run_query_problems(plan))
    published = list(getattr(plan, "published", []) or [])
    if plan.suite.splade is None and published:
        from benchmark.model.loader import backbone_problems

        for name in published:
            problems.extend(backbone_problems(name, deep=deep, published=True))
        # a published SparseEncoder's encode lengths are capped at its max_seq_length in the plan; what is left is
        # checked against the model's positions
        if deep:
            problems.extend(position_problems(plan, published))
    problems.extend(depth_problems(plan))
    if plan.suite.splade is not None:
        from benchmark.model.loader import backbone_problems

        trained = set(backbones)
        backbones = list(dict.fromkeys([*backbones, *published]))

        references: dict[str, list[str]] = {}  # reference backbone → the variants that match it
        for vname, variant in getattr(plan, "variants", {}).items():  # 'match' loads its reference backbone
            spec = variant[0] if isinstance(variant, tuple) else variant  # (Rescale spec, recipe overrides)
            match = getattr(spec, "match", None)
            if getattr(spec, "mode", None) == "match" and isinstance(match, str):
                references.setdefault(match, []).append(vname)
        for name in dict.fromkeys(backbones):
            problems.extend(backbone_problems(name, deep=deep, published=name not in trained))
        for name, variants in references.items():
            if name in backbones:
                continue
            variant = plan.variants[variants[0]]
            stat = getattr(variant[0] if isinstance(variant, tuple) else variant, "match_stat", "logit-std")
            problems.extend(
                f"variant {', '.join(map(repr, variants))} scales each backbone's MLM head so that its {stat} on the "
                f"shipped sample equals reference backbone {name!r}'s (--match-norm, else the suite's "
                f"[splade.rescale] match), so the reference must load, and it cannot: {problem}. Or give the factor "
                "itself: --rescale-factor F (or --match-norm NUMBER)"
                for problem in backbone_problems(name, deep=deep)
            )
        problems.extend(_length_problems(plan, backbones, deep))
        from benchmark.model import varlen

        if deep and plan.suite.encode.attn_implementation == varlen.NAME:
            from benchmark.model.loader import load_config

            for name in dict.fromkeys(backbones):
                try:
                    problem = varlen.problem(load_config(name).model_type, name)
                except BenchmarkError:
                    continue  # reported by backbone_problems
                if problem:
                    problems.append(problem)
    return problems


def position_problems(plan: Any, models: list[str]) -> list[str]:
    """Encode and training lengths past a backbone's positions (``max_position_embeddings``): the model
    cannot read a longer input, and would fail inside the encode stage after BM25 and the backbone ran."""
    from benchmark.model.loader import load_config

    e = plan.suite.encode
    recipe = getattr(plan, "recipe", None) or {}
    lengths = {
        "encode.max_doc_length": e.max_doc_length,
        "encode.max_query_length": e.max_query_length,
        **{f"recipe.{k}": recipe.get(k) for k in ("doc_max_length", "query_max_length") if recipe.get(k)},
    }
    problems: list[str] = []
    for name in dict.fromkeys(models):
        try:
            positions = getattr(load_config(name), "max_position_embeddings", None)
        except BenchmarkError:
            continue  # reported by backbone_problems
        if not isinstance(positions, int):
            continue
        problems.extend(
            f"{key} = {value}, but backbone {name!r} has {positions} positions (max_position_embeddings) and "
            f"cannot read a longer input; set {key} to {positions} or less (--set {key}={positions})"
            for key, value in lengths.items()
            if isinstance(value, int) and value > positions
        )
    return problems


def _length_problems(plan: Any, models: list[str], deep: bool = False) -> list[str]:
    """Encode lengths past a SparseEncoder folder's max_seq_length (it is honoured, not exceeded); with ``deep``,
    past any backbone's positions."""
    from benchmark.model.loader import resolve_backbone
    from benchmark.model.st_modules import length_problems

    e = plan.suite.encode
    problems: list[str] = position_problems(plan, models) if deep else []
    for name in dict.fromkeys(models):
        try:
            source = Path(resolve_backbone(name))
        except BenchmarkError:
            continue  # reported by backbone_problems
        if source.is_dir():
            problems.extend(
                length_problems(
                    name, source, {"max_doc_length": e.max_doc_length, "max_query_length": e.max_query_length}
                )
            )
    return problems


def run_query_problems(plan: Any) -> list[str]:
    """A ``--run`` file that ranks no judged query of its dataset would score 0 on every query, as if it
    had failed everywhere: refuse it here, with the ids it has and the ones it should have."""
    from benchmark.data.datasets import judged_query_ids
    from benchmark.formats.trec_run import read_run_lines

    problems: list[str] = []
    for cond in plan.conditions:
        if cond.system != "run" or cond.search is None:
            continue
        path = cond.search.config.path
        try:
            judged = judged_query_ids(cond.dataset, plan.max_queries)
            queries = list(dict.fromkeys(row.query_id for _, row in read_run_lines(Path(path))))
        except Exception:  # noqa: BLE001  (an unreadable dataset or run file is reported by its own check)
            continue
        if judged and not set(queries) & judged:
            cut = f" (the {len(judged)} kept by --max-queries)" if plan.max_queries else ""
            problems.append(
                f"run file {str(path)!r} ({cond.variant}) ranks {len(queries)} query id(s), e.g. "
                f"{queries[0]!r}, and none is a judged query of {cond.dataset}{cut}, e.g. "
                f"{min(judged)!r}: it would score 0 everywhere; it was made on other queries, or "
                "its ids are written differently"
            )
    return problems


def check_flags(args: Any) -> None:
    """The command line's values that need no suite, each a one-line error before anything loads."""
    from benchmark.common.config import parse_override
    from benchmark.pipeline.plan import check_factor

    for flag in ("max_docs", "max_queries", "threads"):
        value = getattr(args, flag)
        if value is not None and value <= 0:
            raise BenchmarkError(f"--{flag.replace('_', '-')} {value} must be a positive integer")
    check_factor(args.rescale_factor)
    if not args.dry_run:
        check_output_dirs(args.runs_dir, args.results_dir)
    if args.stages and not args.dry_run:
        raise BenchmarkError("--stages lists the stages of a dry run; add --dry-run")
    if args.executor != "ray":
        for flag in ("ray_address", "resources") if args.dry_run else ("ray_address", "resources", "gpus"):
            if getattr(args, flag) is not None:
                raise BenchmarkError(f"--{flag.replace('_', '-')} applies to the Ray executor; add --executor ray")
    if args.gpus is not None and args.gpus < 0:
        raise BenchmarkError(f"--gpus {args.gpus} must be 0 or more")
    for item in args.sets:
        parse_override(item)  # a malformed KEY=VALUE is reported before anything loads


def recipe_override_problem(opts: Options, suite: Suite) -> str | None:
    """``--set recipe.KEY=VALUE`` where no recipe reads it (nothing is trained)."""
    if opts.recipe_overrides() and not (opts.recipe or (suite.splade is not None and suite.splade.recipe)):
        return (
            f"--set {', '.join(i for i in opts.sets if i.startswith('recipe.'))}: this run trains no "
            "model, so no recipe reads it; add --recipe NAME (and --backbones) or drop it"
        )
    return None


def check_plan(plan: Plan, opts: Options, found: list[str] | None = None, deep: bool = True) -> None:
    """Check everything the plan names before any work starts; report every problem at once
    (with ``found``, those build_plan already collected: datasets outside the suite, variants).
    ``deep=False`` (a dry run) skips what needs the network or transformers."""
    problems = list(found or []) + plan_problems(plan, opts.backbones or plan.backbones, deep=deep)
    if problems:
        raise BenchmarkError(problems_message(problems, list(plan.datasets)))


def _count(n: int, what: str) -> str:
    return f"{n} {what}{'' if n == 1 else 's'}"


def problems_message(problems: list[str], datasets: list[str]) -> str:
    """One problem as its line; several as a summary line, then one line each. Those that are only being
    offline (a dataset or model neither cached nor reachable) are counted in the summary, beside the
    datasets that are here, and listed in their short form."""
    if len(problems) == 1:
        return problems[0]
    offline = [p for p in problems if isinstance(p, Unavailable)]
    kinds = {kind: [p for p in offline if p.kind == kind] for kind in ("dataset", "model")}
    others = len(problems) - len(offline)
    if offline:
        missing = {p.name for p in kinds["dataset"]}
        here = [d for d in datasets if d not in missing]
        counted = " and ".join(_count(len(v), k) for k, v in kinds.items() if v)
        verb = "is" if len(offline) == 1 else "are"
        head = f"{counted} {verb} unavailable offline; available here: {', '.join(here) or 'none'}"
        if others:
            head += f"; and {_count(others, 'other problem')}"
    else:
        head = f"{len(problems)} problems, one a line:"
    return "\n".join([head] + [f"  {p.short if isinstance(p, Unavailable) else p}" for p in problems])
