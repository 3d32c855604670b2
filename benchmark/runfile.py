"""A TREC run file made elsewhere, evaluated as one more system (``--run NAME=PATH``).

Its format is checked before any work starts (one line naming the file, the line and the fix), and
its stage is keyed by the file's content, so an edited run is evaluated again and an unchanged one
is reused. It is scored by the same evaluate stage as the harness's own runs.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

from benchmark.errors import BenchmarkError

FORMAT = "'QID Q0 DOCID RANK SCORE TAG' (6 columns separated by whitespace)"
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+-]{0,63}$")
RESERVED = ("bm25", "splade")


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
            problems.append(f"--run name {name!r} must be a plain name (letters, digits, '.', '_', '+', '-'; at most 64) "
                            f"other than {', '.join(RESERVED)}; it labels the table row, e.g. --run my-run={path}")
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
    try:
        with open(Path(path).expanduser(), encoding="utf-8") as fh:
            for number, line in enumerate(fh, 1):
                fields = line.split()
                if not fields:
                    continue
                at = f"{where} line {number}"
                if len(fields) != 6:
                    return f"{at} has {len(fields)} column(s), {line.strip()[:60]!r}; a TREC run line is {FORMAT}"
                qid, _, docid, rank, score, _ = fields
                try:
                    int(rank)
                except ValueError:
                    return f"{at}: rank {rank!r} is not an integer; a TREC run line is {FORMAT}"
                try:
                    value = float(score)
                except ValueError:
                    value = math.nan
                if not math.isfinite(value):
                    return f"{at}: score {score!r} is not a finite number; a TREC run line is {FORMAT}"
                if (qid, docid) in seen:
                    return (f"{at} ranks document {docid!r} for query {qid!r} a second time; keep one line per "
                            "query and document (evaluation would keep either score)")
                seen.add((qid, docid))
                lines += 1
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


def materialise_run(path: Path, docids: set[str], dataset: str, out: Path) -> dict[str, Any]:
    """Copy a checked run file into a stage folder after checking that it ranks the corpus's documents."""
    import shutil

    from benchmark.stages.search import RUN

    problem = run_file_problem(path)
    if problem:
        raise BenchmarkError(problem)
    queries: set[str] = set()
    foreign: list[str] = []
    hits = 0
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            fields = line.split()
            if fields:
                queries.add(fields[0])
                hits += 1
                if fields[2] not in docids:
                    foreign.append(fields[2])
    if foreign:
        raise BenchmarkError(
            f"run file {str(path)!r} ranks {len(set(foreign))} document(s) absent from the corpus of {dataset}, e.g. "
            f"{foreign[0]!r}; it was made on another collection (or the corpus is cut by --max-docs: drop it for run files)")
    shutil.copyfile(path, out / RUN)
    return {"run_queries": len(queries), "hits": hits}
