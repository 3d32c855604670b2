"""Ad-hoc runs: any ir_datasets id (or local BEIR folder) in ``--datasets`` without a suite file.

``python -m benchmark.run --datasets cranfield`` builds a suite named ``adhoc`` in memory: BM25 on each
dataset, SPLADE when ``--backbones`` is given (untrained, or trained with ``--recipe``), and models
trained elsewhere when ``--published`` names them (evaluated as they are). Each
dataset is evaluated with the measures of its own conventions (``conventional_measures``), so
MS MARCO dev gets RR@10 and TREC DL nDCG@10 without a suite saying so.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmark.common.errors import BenchmarkError

#: The suite name of an ad-hoc run: its results go to ``<results-dir>/adhoc@datasets=…/``.
ADHOC = "adhoc"

#: (family, how an id is recognised, its measures): the first match wins, so TREC DL (whose ids
#: start with msmarco-passage/…) precedes MS MARCO. The measures are the SPLADE papers' for each
#: benchmark: nDCG@10 and deep recall on BEIR, RR@10 on MS MARCO dev, and on TREC DL recall counted
#: at relevance 2 as the official TREC DL evaluation does.
FAMILY_MEASURES: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("beir", "id starts with beir/, or a local BEIR folder", ("nDCG@10", "R@100", "R@1000")),
    ("trec-dl", "id contains trec-dl", ("nDCG@10", "R(rel=2)@1000")),
    ("msmarco", "id starts with msmarco", ("RR@10", "R@1000")),
)
DEFAULT_MEASURES: tuple[str, ...] = ("nDCG@10", "R@1000")


def family(dataset: str) -> str | None:
    """The benchmark family of a dataset id (None: none of FAMILY_MEASURES')."""
    if dataset.startswith("beir/") or _source_family(dataset) == "beir":
        return "beir"
    if "trec-dl" in dataset:
        return "trec-dl"
    if dataset.startswith("msmarco"):
        return "msmarco"
    return None


def _source_family(dataset: str) -> str | None:
    """The family every dataset of ``dataset``'s form belongs to (a local BEIR folder's: beir), or None."""
    from benchmark.data.sources import parse

    try:
        return parse(dataset).family
    except BenchmarkError:
        return None


def official_measures(dataset: str) -> list[str]:
    """The measures ir_datasets' documentation lists as official for ``dataset`` (often none)."""
    from benchmark.data.sources import parse

    try:
        ref = parse(dataset)
    except BenchmarkError:  # a name in no known form: validation reports it with the fix
        return []
    return ref.source.official_measures(ref)


def conventional_measures(dataset: str) -> list[str]:
    """The measures of ``dataset``'s conventions, headline first.

    The rule: the family's measures (FAMILY_MEASURES; DEFAULT_MEASURES for any other id), then the
    measures ir_datasets documents as official for the id that are not among them (TREC DL 2019:
    RR(rel=2), AP(rel=2)). Spellings become ir_measures' canonical ones.
    """
    from benchmark.evaluation.measures import normalise_measure

    fam = family(dataset)
    base = next((ms for name, _, ms in FAMILY_MEASURES if name == fam), DEFAULT_MEASURES)
    return list(dict.fromkeys(normalise_measure(m) for m in [*base, *official_measures(dataset)]))


def adhoc_suite_data(
    datasets: list[str], backbones: list[str] | None, published: list[str] | None = None
) -> dict[str, Any]:
    """The TOML document of an ad-hoc suite (``--set`` overrides then apply to it as to a file's)."""
    measures = {d: conventional_measures(d) for d in datasets}
    systems = ", ".join(
        [
            "BM25",
            *(["SPLADE (" + ", ".join(backbones) + ")"] if backbones else []),
            *(["published SPLADE (" + ", ".join(published) + ")"] if published else []),
        ]
    )
    data: dict[str, Any] = {
        "name": ADHOC,
        "description": f"{systems} on {', '.join(datasets)}; measures from each dataset's conventions",
        "datasets": list(datasets),
        "measures": list(measures[datasets[0]]),
        "dataset_measures": measures,
        "bm25": {},
        "table": {"measure_for": {d: ms[0] for d, ms in measures.items()}},
    }
    if backbones:
        data["splade"] = {"backbones": list(backbones), "variants": ["baseline"]}
    if published:
        data["published"] = {"models": list(published)}
    return data


def load_adhoc(
    datasets: list[str],
    backbones: list[str] | None,
    overrides: Sequence[tuple[list[str], Any]] = (),
    published: list[str] | None = None,
) -> Any:
    """The ad-hoc suite of ``datasets``, checked as a suite file is."""
    from benchmark.common.config import apply_overrides, with_overrides
    from benchmark.common.errors import BenchmarkError
    from benchmark.suites import suite_from_data

    data = adhoc_suite_data(datasets, backbones, published)
    if any(list(path) == ["measures"] for path, _ in overrides):  # --set measures=[…] names every dataset's
        del data["dataset_measures"]
        data["table"].pop("measure_for")
    data = apply_overrides(data, list(overrides), "suite")
    try:
        return suite_from_data(data, Path(f"{ADHOC} suite (--datasets without --suite)"), custom=False)
    except BenchmarkError as exc:
        raise with_overrides(exc, list(overrides)) from None
