"""No silent wrong result: what a run reads, what its records say and where its reports write are checked,
not trusted. Each test here failed before its guard, with a wrong number or a write outside its folder
under exit 0, or with a traceback where one line belongs.

Four mechanisms close them: outside inputs are snapshotted once and hashed against the planned id
(``benchmark.common.snapshot``); finished stages hold exactly what they recorded and their records are
checked against their own files (``Store.problem``, ``StageKind.record_problem``); names and paths read
from records stay inside their folder (``benchmark.common.confine``); signals stay Python's after the JVM
starts (``tests/system/test_interrupt.py``).
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import ROOT
from helpers.pipeline import run_cli

BM25 = (
    'name = "{name}"\ndescription = "BM25 on a local SciFact slice"\ndatasets = ["{folder}"]\nmeasures = '
    '["nDCG@10"]\n[bm25]\n'
)


def _metrics(results: Path) -> dict[tuple[str, str], str]:
    """(system, measure) → value; a run file's system is its name."""
    with open(results / "metrics.csv", encoding="utf-8") as fh:
        return {
            (r["variant"] if r["system"] == "run" else r["system"], r["measure"]): r["value"]
            for r in csv.DictReader(fh)
        }


def _one_error(capsys, code: int) -> str:
    captured = capsys.readouterr()
    assert code == 2, captured
    lines = [line for line in captured.err.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and "Traceback" not in captured.err, captured.err
    return lines[0]


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """A local SciFact slice (200 documents, 20 queries) and its BM25 run computed once: the true value."""
    from helpers.beir import scifact_folder

    base = tmp_path_factory.mktemp("trust")
    folder = scifact_folder(base / "slice")
    suite = base / "t.toml"
    suite.write_text(BM25.format(name="t", folder=folder))
    runs = base / "computed-runs"
    assert run_cli("--suite", str(suite), "--runs-dir", str(runs), "--results-dir", str(base / "computed")) == 0
    true = _metrics(base / "computed" / "t")[("bm25", "nDCG@10")]
    search = next(p for p in (runs / "search").iterdir() if not p.name.startswith("."))
    return {"base": base, "folder": folder, "suite": suite, "runs": runs, "true": true, "run": search / "run.trec"}


# --------------------------------------------------------------------------- 1. inputs read once


def _reversed_ranking(text: str) -> str:
    """The same lines with each query's scores reversed: another ranking of the same size."""
    rows = [line.split() for line in text.splitlines() if line.strip()]
    by_query: dict[str, list[list[str]]] = {}
    for row in rows:
        by_query.setdefault(row[0], []).append(row)
    out = []
    for ranked in by_query.values():
        scores = [r[4] for r in ranked][::-1]
        out += [" ".join([*r[:4], s, r[5]]) for r, s in zip(ranked, scores)]
    return "\n".join(out) + "\n"


def _edited_when_run(monkeypatch, kind: type, path: Path, edited: str) -> None:
    """``path`` is rewritten when ``kind``'s stage starts: after the plan fingerprinted it, before it is read."""
    real = kind.run.__func__

    def run(cls, config, inputs, out, ctx):
        path.write_text(edited)
        return real(cls, config, inputs, out, ctx)

    monkeypatch.setattr(kind, "run", classmethod(run))


@pytest.mark.slow  # a pipeline through Lucene (JVM)
def test_a_run_file_edited_while_the_run_goes_is_refused_and_the_restored_one_scored(
    world, tmp_path, monkeypatch, capsys
):
    from benchmark.stages.runfile import RunFile

    original = world["run"].read_text()
    run_file = tmp_path / "x.trec"
    run_file.write_text(original)
    runs = tmp_path / "runs"
    shutil.copytree(world["runs"], runs)
    argv = [
        "--suite",
        str(world["suite"]),
        "--runs-dir",
        str(runs),
        "--results-dir",
        str(tmp_path / "results"),
        "--run",
        f"x={run_file}",
    ]
    with monkeypatch.context() as m:
        _edited_when_run(m, RunFile, run_file, _reversed_ranking(original))
        line = _one_error(capsys, run_cli(*argv))
    assert f"run file {str(run_file)!r} changed after this run was planned" in line, line
    assert not [p for p in (runs / "runfile").iterdir() if not p.name.startswith(".")]  # nothing published
    run_file.write_text(original)  # restored: the id planned before the edit
    assert run_cli(*argv, "--verify") == 0
    assert _metrics(tmp_path / "results" / "t@run=x")[("x", "nDCG@10")] == world["true"]  # the BM25 run, as a file


@pytest.mark.slow  # a pipeline through Lucene (JVM)
@pytest.mark.parametrize("edited, kind", [("qrels/test.tsv", "topics"), ("corpus.jsonl", "corpus")])
def test_a_local_folder_edited_while_the_run_goes_is_refused_and_the_restored_one_scored(
    world, tmp_path, monkeypatch, capsys, edited, kind
):
    from benchmark.stages import KINDS

    folder = tmp_path / "slice"
    shutil.copytree(world["folder"], folder)
    path = folder / edited
    original = path.read_text()
    lines = original.splitlines(keepends=True)
    if kind == "topics":  # every judgement moved to the next judged document: other relevant documents
        rows = [line.rstrip("\n").split("\t") for line in lines[1:]]
        docs = [r[1] for r in rows]
        changed = lines[0] + "".join(f"{q}\t{docs[(i + 1) % len(docs)]}\t{s}\n" for i, (q, _, s) in enumerate(rows))
    else:  # every document's text replaced by the next one's
        docs = [json.loads(line) for line in lines]
        changed = "".join(
            json.dumps({**d, "title": "", "text": docs[(i + 1) % len(docs)]["text"]}) + "\n" for i, d in enumerate(docs)
        )
    suite = tmp_path / "t.toml"
    suite.write_text(BM25.format(name="t", folder=folder))
    argv = ["--suite", str(suite), "--runs-dir", str(tmp_path / "runs"), "--results-dir", str(tmp_path / "results")]
    with monkeypatch.context() as m:
        _edited_when_run(m, dict(KINDS.items())[kind], path, changed)
        line = _one_error(capsys, run_cli(*argv))
    assert "changed after this run was planned" in line and str(folder) in line, line
    path.write_text(original)
    assert run_cli(*argv, "--verify") == 0
    assert _metrics(tmp_path / "results" / "t")[("bm25", "nDCG@10")] == world["true"]


@pytest.mark.slow  # a pipeline through Lucene (JVM)
def test_a_local_checkpoint_edited_while_the_run_goes_is_refused(world, tmp_path, monkeypatch, capsys, bert_tiny):
    """The backbone stage loads a local checkpoint from a snapshot whose digest must be the planned one, as
    the data stages read a local folder (here the tokenizer's config is edited after the plan)."""
    from benchmark.stages.backbone import Backbone

    model = tmp_path / "tiny"
    shutil.copytree(bert_tiny, model)
    edited = model / "tokenizer_config.json"
    edited.chmod(0o644)
    suite = tmp_path / "s.toml"
    suite.write_text(
        BM25.format(name="s", folder=world["folder"]) + f'[splade]\nbackbones = ["{model}"]\n'
        "[encode]\nmax_doc_length = 32\nmax_query_length = 16\n"
    )
    runs = tmp_path / "runs"
    shutil.copytree(world["runs"], runs)
    with monkeypatch.context() as m:
        _edited_when_run(m, Backbone, edited, edited.read_text().replace("{", '{"model_max_length": 7, ', 1))
        line = _one_error(
            capsys, run_cli("--suite", str(suite), "--runs-dir", str(runs), "--results-dir", str(tmp_path / "results"))
        )
    assert line.startswith(f"error: backbone {str(model)!r} ({model}) changed after this run was planned"), line
    assert not (runs / "backbone").exists() or not [
        p for p in (runs / "backbone").iterdir() if not p.name.startswith(".")
    ]


@pytest.mark.slow  # a pipeline through Lucene (JVM)
def test_a_run_file_that_is_a_pipe_is_one_line(world, tmp_path, capsys):
    """``--run x=<(zcat run.gz)`` is a pipe that can be read once (it gave 47 lines of traceback), and a
    named pipe without a writer blocked the run for ever: both are one line before any work."""
    from benchmark.run import main

    read, write = os.pipe()
    os.write(write, "".join(world["run"].read_text().splitlines(keepends=True)[:50]).encode())  # within a pipe's buffer
    os.close(write)
    try:
        line = _one_error(
            capsys,
            main(
                [
                    "--suite",
                    str(world["suite"]),
                    "--runs-dir",
                    str(tmp_path / "runs"),
                    "--results-dir",
                    str(tmp_path / "results"),
                    "--run",
                    f"x=/dev/fd/{read}",
                    "--no-progress",
                ]
            ),
        )
    finally:
        os.close(read)
    assert f"run file '/dev/fd/{read}' is a pipe, not a regular file" in line and "save it to a file first" in line, (
        line
    )
    fifo = tmp_path / "run.fifo"
    os.mkfifo(fifo)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmark.run",
            "--suite",
            str(world["suite"]),
            "--runs-dir",
            str(tmp_path / "runs"),
            "--results-dir",
            str(tmp_path / "results"),
            "--run",
            f"x={fifo}",
            "--dry-run",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert f"run file {str(fifo)!r} is a pipe, not a regular file" in proc.stderr


# --------------------------------------------------------------------------- 2. records verified or derived


def _stage_dir(runs: Path, kind: str) -> Path:
    [folder] = [p for p in (runs / kind).iterdir() if not p.name.startswith(".")]
    return folder


def _edit_record(folder: Path, edit) -> None:
    meta = json.loads((folder / "config.json").read_text())
    edit(meta["record"])
    (folder / "config.json").write_text(json.dumps(meta))


def _run_out(capsys, *argv: str) -> tuple[int, str]:
    capsys.readouterr()
    code = run_cli(*argv)
    captured = capsys.readouterr()
    return code, captured.out + captured.err


@pytest.mark.slow  # a pipeline through Lucene (JVM)
def test_an_edited_evaluate_record_is_found_and_the_tables_keep_the_per_query_mean(world, tmp_path, capsys):
    runs = tmp_path / "runs"
    shutil.copytree(world["runs"], runs)
    evaluate = _stage_dir(runs, "evaluate")
    _edit_record(evaluate, lambda r: r["metrics"].update({"nDCG@10": r["metrics"]["nDCG@10"] + 0.1}))
    argv = ["--suite", str(world["suite"]), "--runs-dir", str(runs), "--results-dir", str(tmp_path / "results")]
    code, out = _run_out(capsys, *argv, "--verify")
    assert code == 0, out
    assert (
        f"[damaged] {evaluate.name}: its record gives nDCG@10 = " in out and "but its perquery.tsv averages" in out
    ), out
    assert _metrics(tmp_path / "results" / "t")[("bm25", "nDCG@10")] == world["true"]


@pytest.mark.slow  # a pipeline through Lucene (JVM)
def test_the_tables_take_their_means_from_the_per_query_values(world, tmp_path):
    """``--refresh`` reads stages by the ids a results folder records, without reusing them through the
    store: its means too come from ``perquery.tsv``, not from the record beside it."""
    from benchmark.report.build import refresh_suites

    runs, results = tmp_path / "runs", tmp_path / "results"
    shutil.copytree(world["runs"], runs)
    shutil.copytree(world["base"] / "computed", results)
    _edit_record(_stage_dir(runs, "evaluate"), lambda r: r["metrics"].update({"nDCG@10": 0.1234}))
    assert refresh_suites(results, ["t"], runs, out=lambda line: None) == 0
    assert _metrics(results / "t")[("bm25", "nDCG@10")] == world["true"]


@pytest.mark.slow  # a pipeline through Lucene (JVM)
def test_a_file_a_finished_stage_did_not_record_is_damage(world, tmp_path, capsys):
    """A collection file added to a finished corpus stage (as a shard to an encode stage) is read by the
    index built from it: the index then held more documents than its source, and ``--verify`` saw nothing."""
    runs = tmp_path / "runs"
    shutil.copytree(world["runs"], runs)
    corpus = _stage_dir(runs, "corpus")
    (corpus / "corpus" / "extra.jsonl").write_text(json.dumps({"id": "extra", "contents": "an extra document"}) + "\n")
    for kind in ("index", "search", "evaluate"):
        shutil.rmtree(_stage_dir(runs, kind))
    argv = ["--suite", str(world["suite"]), "--runs-dir", str(runs), "--results-dir", str(tmp_path / "results")]
    code, out = _run_out(capsys, *argv)
    assert code == 0, out
    assert f"[damaged] {corpus.name}: it holds corpus/extra.jsonl, which it did not record; recomputing it" in out, out
    assert _metrics(tmp_path / "results" / "t")[("bm25", "nDCG@10")] == world["true"]


@pytest.mark.parametrize("verify", [False, True], ids=["plain", "verify"])
def test_a_stage_holding_a_file_it_did_not_record_is_not_reused(tmp_path, verify):
    from benchmark.stages.store import Stage, StageKind, Store

    class Kind(StageKind):
        name, VERSION = "kind", 1

    def shard(out: Path) -> dict:
        (out / "shard-0.jsonl").write_text("a\n")
        return {}

    stage = Stage(Kind, {"x": 1})
    Store(tmp_path, log=lambda line: None).run(stage, shard)
    (tmp_path / "kind" / stage.id / "shard-1.jsonl").write_text("b\n")
    store = Store(tmp_path, verify=verify, log=lambda line: None)
    assert store.lookup(stage) is None
    assert store.damaged == {stage.id: "it holds shard-1.jsonl, which it did not record"}


NBSP_DOC = {"_id": "nbsp-only", "title": "", "text": "\u00a0"}


@pytest.mark.slow  # a pipeline through Lucene (JVM)
def test_a_document_of_one_no_break_space_is_counted_as_lucene_counts_it(world, tmp_path, capsys):
    """Anserini skips a document whose contents ``String.trim()`` to nothing (code points up to U+0020); a
    no-break space is kept, as a document without terms. Counted by Python's ``strip()``, the corpus said one
    document fewer than its index held, and the run stopped with a line that ``--verify`` only repeated."""
    folder = tmp_path / "slice"
    shutil.copytree(world["folder"], folder)
    with open(folder / "corpus.jsonl", "a") as fh:
        fh.write(json.dumps(NBSP_DOC) + "\n")
    suite = tmp_path / "t.toml"
    suite.write_text(BM25.format(name="t", folder=folder))
    runs = tmp_path / "runs"
    argv = ["--suite", str(suite), "--runs-dir", str(runs), "--results-dir", str(tmp_path / "results")]
    code, out = _run_out(capsys, *argv)
    assert code == 0, out
    corpus, index = _stage_dir(runs, "corpus"), _stage_dir(runs, "index")
    assert json.loads((corpus / "config.json").read_text())["record"]["empty_documents"] == 0
    assert json.loads((index / "config.json").read_text())["record"]["documents"] == 201

    # a corpus stage recorded by the earlier rule (one empty document) is found by --verify and recomputed
    _edit_record(corpus, lambda r: r.update(empty_documents=1))
    for kind in ("index", "search", "evaluate"):
        shutil.rmtree(_stage_dir(runs, kind))
    assert "rerun with --verify" in _one_error(capsys, run_cli(*argv))
    code, out = _run_out(capsys, *argv, "--verify")
    assert code == 0, out
    assert f"[damaged] {corpus.name}: its record counts 1 empty documents, but its docs.jsonl holds 0" in out, out


# --------------------------------------------------------------------------- 3. names and paths confined


def _received(world, tmp_path, edit) -> tuple[Path, Path]:
    """A copy of a results folder whose results.json someone else edited; (the results dir, the folder)."""
    results = tmp_path / "results"
    shutil.copytree(world["base"] / "computed", results)
    folder = results / "t"
    data = json.loads((folder / "results.json").read_text())
    edit(data["conditions"][0], folder)
    (folder / "results.json").write_text(json.dumps(data))
    return results, folder


def _rebuild(results: Path) -> tuple[int, list[str], list[str]]:
    from benchmark.report.build import rebuild

    out: list[str] = []
    err: list[str] = []
    return rebuild(results, out=out.append, err=err.append), out, err


@pytest.mark.slow  # a pipeline through Lucene (JVM)
def test_a_received_results_folder_cannot_make_a_rebuild_write_outside_it(world, tmp_path):
    """A ``telemetry`` entry of ``../../outside/victim.png`` overwrote an existing file outside the folder."""
    victim = tmp_path / "outside" / "victim.png"
    victim.parent.mkdir()
    victim.write_bytes(b"precious")

    def edit(c, folder):
        c.update(trained=True, train_id="train-0123456789ab", telemetry="../../outside/victim.png")
        (folder / "telemetry").mkdir()
        (folder / "telemetry" / "train-0123456789ab.csv").write_text("step,loss\n1,2.0\n2,1.0\n")

    results, folder = _received(world, tmp_path, edit)
    code, _, err = _rebuild(results)
    assert code == 1 and len(err) == 1, err
    assert err[0].startswith(
        f"failed {folder}: {folder / 'results.json'}: conditions[0].telemetry '../../outside/victim.png' "
        "leads outside the folder (it climbs out with '..')"
    ), err
    assert victim.read_bytes() == b"precious"


@pytest.mark.slow  # a pipeline through Lucene (JVM)
def test_a_system_name_climbing_out_writes_nothing_outside_the_folder(world, tmp_path):
    """A system named ``../../outside/x`` created ``mteb/../../outside/x/…json`` beside the folder."""
    results, folder = _received(world, tmp_path, lambda c, folder: c.update(system="../../outside/x"))
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*") if folder not in p.parents and p != folder)
    code, _, err = _rebuild(results)
    assert code == 1 and len(err) == 1, err
    # refused as a system no module of benchmark/pipeline/systems/ defines, before any path is built from it
    assert f"failed {folder}: unknown system '../../outside/x'; valid: bm25, published, run, splade" in err[0], err
    after = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*") if folder not in p.parents and p != folder)
    assert [p for p in after if p not in before and not p.name.endswith(".lock")] == []


@pytest.mark.slow  # a pipeline through Lucene (JVM)
def test_two_local_folders_of_one_name_publish_to_two_results_folders(world, tmp_path, capsys):
    """``--datasets ./a/cisi`` and, in another run, ``--datasets ./b/cisi``: both published to
    ``adhoc@datasets=cisi``, the second over the first, labelled cisi but holding the other's numbers."""
    a, b = tmp_path / "a" / "cisi", tmp_path / "b" / "cisi"
    shutil.copytree(world["folder"], a)
    shutil.copytree(world["folder"], b)
    lines = (b / "qrels" / "test.tsv").read_text().splitlines(keepends=True)
    (b / "qrels" / "test.tsv").write_text("".join(lines[:6]))  # another dataset: fewer judged queries
    results = tmp_path / "results"
    for folder in (a, b):
        assert (
            run_cli("--datasets", str(folder), "--runs-dir", str(tmp_path / "runs"), "--results-dir", str(results)) == 0
        )
    folders = sorted(p for p in results.iterdir() if not p.name.startswith("."))
    assert [p.name.split("~")[0] for p in folders] == ["adhoc@datasets=cisi", "adhoc@datasets=cisi"], folders
    scored = {json.loads((p / "results.json").read_text())["conditions"][0]["queries"] for p in folders}
    assert scored == {20, 5}  # each folder holds its own dataset's numbers


@pytest.mark.slow  # a pipeline through Lucene (JVM)
def test_a_remove_query_key_that_names_no_dataset_is_one_line(world, tmp_path, capsys):
    suite = tmp_path / "t.toml"
    suite.write_text(BM25.format(name="t", folder=world["folder"]) + f'[remove_query]\n"{world["folder"]}/" = true\n')
    line = _one_error(capsys, run_cli("--suite", str(suite), "--dry-run"))
    assert f"remove_query.'{world['folder']}/' names dataset '{world['folder']}/', not in the suite; valid: " in line, (
        line
    )


@pytest.mark.parametrize(
    "column, value", [("score", "99_999"), ("score", "\u0665"), ("rank", "1_0"), ("rank", "\u0663")]
)
def test_run_file_numbers_are_checked_as_trec_tools_read_them(tmp_path, column, value):
    """Python's int() and float() read '99_999' as 99999 and '٥' (Arabic-Indic five) as 5; C's atof, which
    TREC tools use, reads 99 and 0: the check that claims to check what TREC tools read must refuse them."""
    from benchmark.evaluation.external_runs import parse_runs

    row = {"rank": "1", "score": "2.5", column: value}
    run = tmp_path / "x.trec"
    run.write_text(f"q1 Q0 d1 {row['rank']} {row['score']} tag\n", encoding="utf-8")
    runs, problems = parse_runs([f"x={run}"])
    assert runs == [] and len(problems) == 1, problems
    assert problems[0].startswith(f"run file {str(run)!r} line 1: {column} {value!r} is not "), problems[0]
    assert "ASCII" in problems[0]


# --------------------------------------------------------------------------- 4. concurrency and leftovers


def _cli(argv: list[str], **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "benchmark.run", *argv, "--no-progress"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "PYTHONPATH": str(ROOT), **env},
    )


def _hidden(folder: Path) -> list[str]:
    """Hidden entries but a lock file (kept: removing a lock file races with its next taker)."""
    return sorted(p.name for p in folder.iterdir() if p.name.startswith(".") and not p.name.endswith(".lock"))


@pytest.mark.slow  # a pipeline through Lucene (JVM)
def test_a_killed_publish_leaves_a_staging_folder_that_the_next_run_removes(world, tmp_path):
    runs, results = tmp_path / "runs", tmp_path / "results"
    shutil.copytree(world["runs"], runs)
    argv = ["--suite", str(world["suite"]), "--runs-dir", str(runs), "--results-dir", str(results)]
    killed = _cli(argv, BENCHMARK_KILL_AT="folder:staged")
    assert killed.returncode == -9, killed.stderr
    assert [name for name in _hidden(results) if ".partial" in name], _hidden(results)
    assert _cli(argv).returncode == 0
    assert _hidden(results) == []


@pytest.mark.slow  # a pipeline through Lucene (JVM)
def test_a_kill_at_a_stages_swap_leaves_the_old_folder_that_the_next_run_removes(world, tmp_path):
    runs, results = tmp_path / "runs", tmp_path / "results"
    shutil.copytree(world["runs"], runs)
    argv = ["--suite", str(world["suite"]), "--runs-dir", str(runs), "--results-dir", str(results)]
    killed = _cli([*argv, "--force"], BENCHMARK_KILL_AT="stage:swap")  # the first stage forced: corpus
    assert killed.returncode == -9, killed.stderr
    assert [name for name in _hidden(runs / "corpus") if ".old" in name], _hidden(runs / "corpus")
    assert _cli(argv).returncode == 0
    assert [name for name in _hidden(runs / "corpus") if ".old" in name] == []


@pytest.mark.slow  # a pipeline through Lucene (JVM)
def test_a_users_file_where_the_results_folder_goes_is_refused_and_kept(world, tmp_path, capsys):
    results = tmp_path / "results"
    results.mkdir()
    (results / "t").write_text("my notes")
    line = _one_error(
        capsys,
        run_cli("--suite", str(world["suite"]), "--runs-dir", str(tmp_path / "runs"), "--results-dir", str(results)),
    )
    assert line == (
        f"error: {results / 't'} is a file, not a folder the harness wrote; it would be replaced by the results "
        "folder: move it away, or pass another --results-dir"
    )
    assert (results / "t").read_text() == "my notes" and _hidden(results) == []


REBUILD_PAUSED = """
import sys, time
from pathlib import Path
from benchmark.report import build
results, paused, resume = map(Path, sys.argv[1:])
real = build.render
def render(results_, staging, name=None):  # the rebuild has copied the old folder: it waits here
    paused.touch()
    while not resume.exists():
        time.sleep(0.05)
    return real(results_, staging, name)
build.render = render
sys.exit(build.rebuild(results))
"""


@pytest.mark.slow  # a pipeline through Lucene (JVM)
def test_a_rebuild_and_a_publish_of_one_folder_take_turns(world, tmp_path):
    """``python -m benchmark.report`` rebuilding a folder while a run publishes it: the rebuild had read the
    old folder, and swapped its copy over the run's new tables after them (both exit 0)."""
    import threading
    import time

    from benchmark.report import build
    from benchmark.report.results import read_results

    results = tmp_path / "results"
    shutil.copytree(world["base"] / "computed", results)
    folder = results / "t"
    new = read_results(folder)
    new.description = "the run's new tables"
    paused, resume = tmp_path / "paused", tmp_path / "resume"
    rebuild = subprocess.Popen(
        [sys.executable, "-c", REBUILD_PAUSED, str(results), str(paused), str(resume)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 120
    while not paused.exists() and time.monotonic() < deadline and rebuild.poll() is None:
        time.sleep(0.05)
    assert paused.exists(), rebuild.communicate()
    publish = threading.Thread(target=build.publish, args=(new, folder))
    publish.start()
    publish.join(3)  # without a lock it has finished by now; with one it waits for the rebuild
    resume.touch()
    out, err = rebuild.communicate(timeout=120)
    publish.join(120)
    assert rebuild.returncode == 0 and not publish.is_alive(), err
    assert read_results(folder).description == "the run's new tables"


# ------------------------------------------------------------ 4. one line, not a wrong number or a traceback


def test_a_cutoff_deeper_than_the_search_depth_is_refused_before_work(capsys):
    """``--set k=100`` on a suite that reports R@1000 gave R@1000 equal to R@100 on every row, with exit 0."""
    line = _one_error(capsys, run_cli("--suite", "smoke", "--set", "k=100", "--dry-run"))
    assert line == (
        "error: measure(s) R@1000 rank deeper than the search depth k = 100: a search returns 100 hits per "
        "query, so they would be computed on those alone (R@1000 would equal R@100 on every row); set k to "
        "1000 or more (--set k=1000), or leave R@1000 out of the measures"
    )


@pytest.mark.parametrize(
    "measures, expected",
    [
        (
            '["INST"]',
            "error: measure 'INST' needs a value for max_rel (maximum relevance score), which has no default: write "
            "e.g. INST(max_rel=…); use ir_measures strings such as",
        ),
        ('["nDCG@10"]', None),  # the suite's expected scores of other measures no longer apply: not an error
    ],
)
def test_set_measures_is_judged_on_the_measures_it_names(capsys, measures, expected):
    """``--set measures=[…]`` on the smoke suite named the suite's own ``expected[0]`` … entries (which the
    command never touched) instead of the measure, and ir_measures' placeholder object for a missing value."""
    code = run_cli("--suite", "smoke", "--set", f"measures={measures}", "--dry-run")
    if expected is None:
        assert code == 0, capsys.readouterr()
        return
    line = _one_error(capsys, code)
    assert line.startswith(expected), line
    assert "expected[" not in line and "object at 0x" not in line


@pytest.mark.slow  # a pipeline through Lucene (JVM)
def test_a_non_ascii_path_under_the_c_locale_runs(tmp_path):
    """Under LC_ALL=C Java encodes file names as ASCII: a run whose runs folder or dataset path held 'ü' failed
    with three Java stack frames in place of its cause. The harness starts Java in a UTF-8 locale."""
    from helpers.beir import beir_folder

    folder = beir_folder(tmp_path / "daten-ü" / "mini")
    proc = _cli(
        ["--datasets", str(folder), "--runs-dir", str(tmp_path / "läufe"), "--results-dir", str(tmp_path / "results")],
        LC_ALL="C",
    )
    assert proc.returncode == 0, proc.stderr
    [results] = [p for p in (tmp_path / "results").iterdir() if not p.name.startswith(".")]
    assert _metrics(results)[("bm25", "nDCG@10")] == "1.0"  # both judged documents ranked first (test_data's folder)


NO_UTF8_LOCALE = """
import sys
from pathlib import Path
from benchmark.common.errors import BenchmarkError
from benchmark.retrieval import lucene
lucene.UTF8_LOCALE = "xx_XX.UTF-8"  # a UTF-8 locale that is not installed: Java falls back to ASCII
try:
    lucene.build_bm25_index(Path(sys.argv[1]), Path(sys.argv[2]), 1)
except BenchmarkError as exc:
    print(exc)
"""


def test_a_path_java_cannot_encode_is_named_with_its_cause(tmp_path):
    collection = tmp_path / "sammlung-ü"
    collection.mkdir()
    (collection / "docs.jsonl").write_text('{"id": "d1", "contents": "a document"}\n')
    proc = subprocess.run(
        [sys.executable, "-c", NO_UTF8_LOCALE, str(collection), str(tmp_path / "index")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(ROOT), "LC_ALL": "C"},
    )
    line = proc.stdout.strip()
    assert line.startswith(
        "Java could not encode a file name (Malformed input or input contains unmappable characters: "
    ), proc.stdout + proc.stderr
    assert line.endswith(
        "set a UTF-8 locale installed here (`locale -a`), e.g. LC_ALL=C.UTF-8, or use ASCII paths for "
        "--runs-dir and the datasets"
    ), line
    assert "\tat " not in line
