"""A TREC run file made elsewhere, evaluated as one more system (``--run NAME=PATH``).

Its format is checked before any work starts (one line naming the file, the line and the fix), and
its stage is keyed by the file's content, so an edited run is evaluated again and an unchanged one
is reused. It is scored by the same evaluate stage as the harness's own runs.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from benchmark.common.errors import BenchmarkError
from benchmark.common.idset import IdSet
from benchmark.formats.trec_run import FORMAT, RUN, RunLineError, line_problem, read_run_lines

NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+-]{0,63}$")
RESERVED = ("bm25", "splade")
CHECK_BLOCK = 100_000  # hits checked against the corpus at once


def parse_runs(values: list[str] | None) -> tuple[list[tuple[str, str]], list[str]]:
    """``--run NAME=PATH`` values → ([(name, absolute path)], problems): every problem at once."""
    runs: list[tuple[str, str]] = []
    problems: list[str] = []
    names: set[str] = set()
    for value in values or []:
        name, eq, path = value.partition("=")
        name, path = name.strip(), path.strip()
        if not eq or not name or not path:
            problems.append(f"--run {value!r} is not NAME=PATH; write e.g. --run my-bm25=runs/bm25.trec")
        elif not NAME.match(name) or name.lower() in RESERVED:
            problems.append(
                f"--run name {name!r} must be a plain name (letters, digits, '.', '_', '+', '-'; at most 64) "
                f"other than {', '.join(RESERVED)}; it labels the table row, e.g. --run my-run={path}"
            )
        elif name in names:
            problems.append(f"--run name {name!r} is given twice; give each run file its own name")
        else:
            names.add(name)
            problem = run_file_problem(path)
            if problem:
                problems.append(problem)
            else:
                runs.append((name, str(Path(path).expanduser().resolve())))
    return runs, problems


def run_file_problem(path: str | Path) -> str | None:
    """None when ``path`` is a readable TREC run; else the first problem, with its line."""
    where = f"run file {str(path)!r}"
    seen: set[tuple[str, str]] = set()
    lines = 0
    from benchmark.common.snapshot import not_a_regular_file

    problem = not_a_regular_file(Path(path).expanduser(), "run file")
    if problem:
        return problem
    try:
        for number, row in read_run_lines(Path(path).expanduser()):
            at = f"{where} line {number}"
            problem = line_problem(row)
            if problem:
                return f"{at}: {problem}"
            if (row.query_id, row.doc_id) in seen:
                return (
                    f"{at} ranks document {row.doc_id!r} for query {row.query_id!r} a second time; keep one line per "
                    "query and document (evaluation would keep either score)"
                )
            seen.add((row.query_id, row.doc_id))
            lines += 1
    except RunLineError as exc:
        return (
            f"{where} line {exc.number} has {exc.columns} column(s), {exc.line.strip()[:60]!r}; "
            f"a TREC run line is {FORMAT}"
        )
    except FileNotFoundError:
        return f"{where} does not exist; pass --run NAME=PATH with the path of a TREC run file"
    except IsADirectoryError:
        return f"{where} is a folder; pass --run NAME=PATH with the path of a TREC run file"
    except UnicodeDecodeError as exc:
        return f"{where} is not UTF-8 text (byte {exc.start}); a TREC run is text lines {FORMAT}"
    except OSError as exc:
        return f"{where} cannot be read ({exc.strerror}); check its permissions"
    if not lines:
        return f"{where} holds no run line; a TREC run is lines {FORMAT}"
    return None


def materialise_run(path: Path, docids: IdSet, dataset: str, out: Path, planned: str | None = None) -> dict[str, Any]:
    """Copy a run file into a stage folder (one read, hashed: it must be the content ``planned``, the
    stage id's), then check the copy: its lines, and that it ranks the corpus's documents."""
    from benchmark.common.snapshot import changed_since_planned, copy_hashed

    copy = out / RUN
    copied = copy_hashed(path, copy)
    if planned is not None and copied != planned:
        copy.unlink()
        raise changed_since_planned(f"run file {str(path)!r}", planned, copied)
    problem = run_file_problem(copy)
    if problem:
        copy.unlink()
        raise BenchmarkError(problem.replace(repr(str(copy)), repr(str(path))))
    queries: set[str] = set()
    foreign: list[str] = []
    hits = 0
    block: list[str] = []

    def check() -> None:  # a block of hits at a time: one vectorised question to a corpus-sized IdSet
        absent = docids.missing(block)
        foreign.extend(d for d in block if d in absent)
        block.clear()

    for _, row in read_run_lines(copy):
        queries.add(row.query_id)
        hits += 1
        block.append(row.doc_id)
        if len(block) >= CHECK_BLOCK:
            check()
    check()
    if foreign:
        copy.unlink()
        raise BenchmarkError(
            f"run file {str(path)!r} ranks {len(set(foreign))} document(s) absent from the corpus of {dataset}, e.g. "
            f"{foreign[0]!r}; it was made on another collection (or the corpus is cut by --max-docs: drop it for run "
            f"files)"
        )
    return {"run_queries": len(queries), "hits": hits}
