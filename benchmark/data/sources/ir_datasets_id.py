"""A dataset named by its ir_datasets id (``beir/scifact/test``, ``msmarco-passage/dev/small``, ``cranfield``).

ir_datasets reads its own files (downloaded once into ``IR_DATASETS_HOME``, built under one lock across
processes: ``benchmark.data.dataset_cache``); an id never reads the working folder, and nothing of a
local folder's layout applies to it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from benchmark.common.errors import BenchmarkError
from benchmark.data import dataset_cache
from benchmark.data.sources.base import DatasetRef, Read, check_id
from benchmark.data.sources.beir_folder import BEIR_LAYOUT, LOCAL_SPLIT_SEP, is_path
from benchmark.formats.qrels import Qrel

FORM = "ir_datasets"
# Seconds to wait for a download server before calling it unreachable: a TCP connect that has not
# completed in 10 s on a working network is rare, and a dead network fails DNS at once.
PROBE_TIMEOUT = 10.0


class IrDatasetsId:
    written = "an ir_datasets id (e.g. beir/scifact/test, msmarco-passage/dev/small)"
    family: str | None = None

    def claims(self, name: str) -> bool:
        """Any other non-empty name without whitespace or ':' (ir_datasets' ids hold letters, digits, '-', '.'
        and '/'; a ``scheme:`` prefix is left to the form it names): ir_datasets says whether it exists."""
        return bool(name) and not is_path(name) and not any(c.isspace() or c == ":" for c in name)

    def parse(self, name: str) -> DatasetRef:
        return DatasetRef(name, FORM, name)

    def place(self, ref: DatasetRef) -> str:
        return ref.location

    def digest(self, ref: DatasetRef) -> None:
        return None

    def key(self, ref: DatasetRef) -> str:
        return ref.location

    def short(self, ref: DatasetRef) -> str:
        parts = ref.location.split("/")
        return parts[1] if parts[0] == "beir" and len(parts) > 1 else parts[-1]

    def problem(self, ref: DatasetRef) -> str | None:
        """That the id exists with docs, queries and qrels (``availability_problem``: that its files can be had)."""
        import ir_datasets

        name = ref.location
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

    def availability_problem(self, ref: DatasetRef, timeout: float | None = None) -> str | None:
        return availability_problem(ref.location, timeout)

    def official_measures(self, ref: DatasetRef) -> list[str]:
        """The measures ir_datasets' documentation lists as official (often none)."""
        try:
            import ir_datasets

            doc = ir_datasets.load(ref.location).documentation() or {}
        except Exception:  # an unknown id: validation reports it with the fix
            return []
        return [str(m) for m in doc.get("official_measures") or []]

    def corpus(self, ref: DatasetRef) -> str:
        """``msmarco-passage/dev/small`` and both TREC DL sets map to ``msmarco-passage``, so its 8.8M
        passages are materialised, encoded and indexed once per model, not once per query set."""
        import ir_datasets

        return str(ir_datasets.docs_parent_id(ref.location))

    def corpus_digest(self, ref: DatasetRef) -> None:
        return None

    def read(self, ref: DatasetRef, docs: bool = True, pinned: Path | None = None) -> Read:
        import ir_datasets

        name = ref.location
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

    def docs(self, ref: DatasetRef, pinned: Path | None = None) -> Iterator[tuple[str, str]]:
        import ir_datasets

        return _ir_datasets_docs(ir_datasets.load(ref.location), ref.location)

    def pin_topics(self, ref: DatasetRef, out: Path, planned: str | None) -> None:
        return None  # the id fixes the content

    def pin_corpus(self, ref: DatasetRef, out: Path, planned: str | None) -> None:
        return None


def _ir_datasets_docs(ds: Any, name: str) -> Iterator[tuple[str, str]]:
    has_title = "title" in ds.docs_cls()._fields
    try:
        for d in dataset_cache.docs_iter(ds):
            yield check_id(d.doc_id, f"dataset {name!r}", "document"), f"{d.title} {d.text}" if has_title else d.text
    except OSError as exc:
        raise _ir_datasets_failed(name, exc) from None


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


IR_DATASETS = IrDatasetsId()
