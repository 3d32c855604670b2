"""Two suites sharing stages, started at once on one runs folder: both succeed, each shared stage is
computed once (the other process waits for it and reuses it), and the metrics are right."""

from __future__ import annotations

import csv
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import ROOT

pytestmark = pytest.mark.slow  # two pipeline runs in subprocesses, each starting a JVM

SUITE = (
    'name = "{name}"\ndescription = "BM25 on a SciFact slice"\ndatasets = ["beir/scifact/test"]\n'
    "measures = {measures}\nmax_docs = 600\nmax_queries = 30\n[bm25]\n"
)


def test_two_runs_share_one_runs_folder(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = []
    for name, measures in (("one", '["nDCG@10"]'), ("two", '["nDCG@10", "RR@10"]')):
        suite = tmp_path / f"{name}.toml"
        suite.write_text(SUITE.format(name=name, measures=measures))
        procs.append(
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "benchmark.run",
                    "--suite",
                    str(suite),
                    "--runs-dir",
                    str(tmp_path / "runs"),
                    "--results-dir",
                    str(tmp_path / "results"),
                    "--no-progress",
                ],
                cwd=ROOT,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
        )
    outputs = [p.communicate(timeout=600)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outputs
    computed = [m for out in outputs for m in re.findall(r"^\[run\] (\S+)", out, re.M)]
    assert len(computed) == len(set(computed)), computed  # no stage computed twice
    # shared: topics, corpus, index, search; one evaluate each
    assert sorted(s.split("-")[0] for s in computed) == ["corpus", "evaluate", "evaluate", "index", "search", "topics"]
    assert any("[wait]" in out for out in outputs) or all("[cached]" in out for out in outputs)
    for name in ("one", "two"):
        with open(tmp_path / "results" / name / "metrics.csv") as fh:
            values = {r["measure"]: r["value"] for r in csv.DictReader(fh)}
        assert round(float(values["nDCG@10"]), 4) == 0.7805  # the smoke suite's expected BM25 score on this slice
    assert not [p for p in (tmp_path / "runs").rglob(".*") if ".partial" in p.name or ".claim." in p.name]


def test_a_claim_lost_while_indexing_says_so(tmp_path, capsys, monkeypatch):
    """A holder taken for dead (its heartbeat silent past the TTL, e.g. a paused process on another
    host) finds, when it resumes, that its successor removed the partial folder under the JVM. The
    line must say that the stage was taken over, not that the index is unreadable."""
    import json
    import shutil

    from benchmark.retrieval import lucene
    from benchmark.run import main
    from helpers.beir import beir_folder

    real = lucene.build_bm25_index

    def paused_then_superseded(collection, target, threads):
        real(collection, target, threads)
        partial = Path(target).parent  # runs/index/.<id>.partial
        stage_id = partial.name[1 : -len(".partial")]
        (partial.parent / f".{stage_id}.claim.1").write_text(json.dumps({"host": "elsewhere", "pid": 1, "beat": 0}))
        shutil.rmtree(partial)  # what the successor's "[clean]" of a non-resumable stage does

    monkeypatch.setattr(lucene, "build_bm25_index", paused_then_superseded)
    folder = beir_folder(tmp_path / "mini")
    suite = tmp_path / "s.toml"
    suite.write_text(f'name = "s"\ndescription = "d"\ndatasets = ["{folder}"]\nmeasures = ["nDCG@10"]\n[bm25]\n')
    code = main(
        [
            "--suite",
            str(suite),
            "--runs-dir",
            str(tmp_path / "runs"),
            "--results-dir",
            str(tmp_path / "results"),
            "--no-progress",
        ]
    )
    err = capsys.readouterr().err
    assert code == 2, err
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and "Traceback" not in err, err
    assert re.fullmatch(
        r"error: lost the claim on index-\w+: another process took this stage over after \d+s without "
        r"a heartbeat; rerun the same command to reuse its result",
        lines[0],
    ), lines[0]
