"""Published models: SPLADE models trained elsewhere are evaluated as they are, in rows of their own
("published", never "untrained"); the `published` suite holds their published figures, each naming its
source, and `--check` grades them. Offline, bert-tiny exported by the harness's own exporter stands in for
a published model. An ad-hoc run with local model folders writes no machine path anywhere."""

from __future__ import annotations

import gzip
import json
import os
import shutil
from pathlib import Path

import pytest

from benchmark.model.identity import model_label
from benchmark.pipeline.plan import Options, build_plan
from benchmark.pipeline.systems.published import model_names
from benchmark.report.check import applies
from benchmark.report.labels import row_id, system_label
from benchmark.suites import load_suite
from helpers import ROOT
from helpers.exports import EXPORT, export_bert_tiny
from helpers.pipeline import SUBSET, run_cli

PP, V3 = "naver/splade-cocondenser-ensembledistil", "naver/splade-v3"
BEIR13 = [
    "beir/trec-covid",
    "beir/nfcorpus/test",
    "beir/nq",
    "beir/hotpotqa/test",
    "beir/fiqa/test",
    "beir/arguana",
    "beir/webis-touche2020/v2",
    "beir/dbpedia-entity/test",
    "beir/scidocs",
    "beir/climate-fever",
    "beir/scifact/test",
    "beir/quora/test",
    "beir/fever/test",
]


def test_the_published_suite_names_the_source_of_every_reference():
    suite = load_suite("published")
    assert suite.published.models == [PP, V3] and suite.splade is None
    full = [e for e in suite.expected if e.max_docs is None and e.max_queries is None]
    for e in full:  # every published figure: an address to look it up at
        assert "https://" in e.source, (e.dataset, e.system, e.backbone, e.measure)
    refs = {(e.backbone, e.dataset, e.measure): e for e in full if e.system == "published"}
    for model in (PP, V3):
        for dataset in BEIR13:
            for measure in ("nDCG@10", "R@100", "R@1000"):
                assert (model, dataset, measure) in refs, (model, dataset, measure)
        for dataset, measure in (
            ("msmarco-passage/dev/small", "RR@10"),
            ("msmarco-passage/dev/small", "R@1000"),
            ("msmarco-passage/trec-dl-2019/judged", "nDCG@10"),
            ("msmarco-passage/trec-dl-2020/judged", "R(rel=2)@1000"),
        ):
            assert (model, dataset, measure) in refs, (model, dataset, measure)
    # spot checks against the sources named in the entries
    assert refs[(PP, "beir/scifact/test", "nDCG@10")].value == 0.7036
    assert "castorini.github.io/pyserini/2cr/beir.html" in refs[(PP, "beir/scifact/test", "nDCG@10")].source
    assert refs[(PP, "msmarco-passage/dev/small", "RR@10")].value == 0.3828
    assert refs[(V3, "msmarco-passage/dev/small", "RR@10")].value == 0.3999
    assert (
        "castorini.github.io/pyserini/2cr/msmarco-v1-passage.html"
        in refs[(V3, "msmarco-passage/dev/small", "RR@10")].source
    )
    assert refs[(V3, "beir/scifact/test", "nDCG@10")].value == 0.7140
    assert "beir-v1.0.0-scifact.splade-v3.onnx.yaml" in refs[(V3, "beir/scifact/test", "nDCG@10")].source
    assert all((e.tolerance, e.okish) == (0.01, 0.02) for e in refs.values())  # the band the suite explains


def test_published_rows_are_their_own_kind():
    plan = build_plan(load_suite("published"), Options(datasets=["beir/scifact/test"]))
    assert [(c.system, c.backbone) for c in plan.conditions] == [("bm25", ""), ("published", PP), ("published", V3)]
    assert all(not c.trained and c.train is None for c in plan.conditions)
    key = plan.conditions[2].system_key
    assert system_label(*key) == "SPLADE naver/splade-v3 (published)"
    assert row_id(key) == "published|naver/splade-v3||published"
    assert "--published naver/splade-v3" in plan.conditions[2].command
    assert "published (trained elsewhere, evaluated as they are): " in plan.summary()


def test_a_published_model_is_evaluated_as_an_untrained_baseline_is(bert_tiny):
    """The same checkpoint as a --backbones baseline and as --published: the very same stages, two rows."""
    from benchmark.suites.adhoc import load_adhoc

    suite = load_adhoc(["beir/scifact/test"], ["bert-tiny"], published=[str(bert_tiny)])
    plan = build_plan(
        suite, Options(datasets=["beir/scifact/test"], backbones=["bert-tiny"], published=[str(bert_tiny)])
    )
    splade, published = [c for c in plan.conditions if c.system != "bm25"]
    assert (splade.system, splade.trained, published.system) == ("splade", False, "published")
    assert splade.evaluate.id == published.evaluate.id
    assert system_label(*splade.system_key) == "SPLADE bert-tiny baseline (untrained)"
    # no machine path: the folder by its name and content digest
    assert plan.subset == f"datasets=scifact,backbones=bert-tiny,published={model_label(str(bert_tiny))}"
    assert model_label(str(bert_tiny)).startswith(f"{Path(bert_tiny).name}~")


def test_check_names_a_local_model_by_its_folder(tmp_path):
    folder = tmp_path / "somewhere" / EXPORT
    folder.mkdir(parents=True)
    assert model_names(str(folder)) == {str(folder), EXPORT, model_label(str(folder))}
    assert model_names(model_label(str(folder))) == {EXPORT, model_label(str(folder))}  # as results.json names it
    assert model_names(V3) == {V3}  # a hub id is not a folder: its owner stays
    suite = load_suite("published")
    plan = build_plan(
        suite, Options(datasets=["beir/scifact/test"], published=[str(folder)], max_docs=600, max_queries=30)
    )
    checked = [e for e in suite.expected if applies(e, plan)]
    assert {(e.system, e.backbone, e.measure) for e in checked} == {
        ("published", EXPORT, "nDCG@10"),
        ("published", EXPORT, "R@100"),
        ("bm25", "", "nDCG@10"),
    }
    full = build_plan(
        suite, Options(datasets=["beir/scifact/test"], published=[V3])
    )  # SPLADE++ ED not run: not checked
    assert {e.backbone for e in suite.expected if applies(e, full) and e.system == "published"} == {V3}


def documented_command(marker: str) -> list[str]:
    """The arguments of the ``benchmark run`` command in docs/published-models.md that contains ``marker``."""
    import shlex

    text = (ROOT / "docs" / "published-models.md").read_text()
    [command] = [
        c for c in text.replace("\\\n", " ").splitlines() if c.strip().startswith("benchmark run") and marker in c
    ]
    return shlex.split(command.split("#")[0])[2:]


@pytest.mark.slow  # trains the smoke recipe (one bert-tiny run), then the pipeline end to end through Lucene
def test_the_documented_published_check_passes_on_a_real_export_of_the_smoke_model(tmp_path, capsys, monkeypatch):
    """The smoke suite's trained bert-tiny (recipe smoke, seed 42: the train stage of ``benchmark run --suite
    smoke``), exported by ``benchmark export``, then the published-model command of the docs, as written, in
    a fresh folder: every published entry [OK], encoded at the export's max_seq_length (256)."""
    from benchmark.report import model_export

    monkeypatch.chdir(tmp_path)  # runs/, results/ and exports/ as a user's checkout has them
    monkeypatch.delenv("BENCHMARK_RESULTS_DIR", raising=False)
    smoke = ["--suite", "smoke", *SUBSET, "--recipe", "smoke", "--backbones", "bert-tiny", "--variants", "baseline"]
    assert run_cli(*smoke) == 0
    [folder] = [p.name for p in Path("results").iterdir() if p.name.startswith("smoke")]
    assert model_export.main(["--suite", folder]) == 0
    assert (Path("exports") / EXPORT / "modules.json").is_file()
    capsys.readouterr()
    argv = documented_command("--published exports/")
    assert argv[:4] == ["--suite", "published", "--published", f"exports/{EXPORT}"] and "--check" in argv
    assert run_cli(*argv) == 0
    out = capsys.readouterr().out
    lines = [line for line in out.splitlines() if line.startswith("[")]
    assert [line.split()[0] for line in lines if "published " in line] == ["[OK]", "[OK]"], out
    assert "3 OK, 0 OKish, 0 FAIL" in out
    [results] = [p for p in Path("results").iterdir() if p.name.startswith("published")]
    data = json.loads((results / "results.json").read_text())
    [row] = [c for c in data["conditions"] if c["system"] == "published"]
    assert row["backbone"] == model_label(f"exports/{EXPORT}")
    assert f"--published exports/{EXPORT} " in row["command"] + " "
    runs = Path(os.environ.get("BENCHMARK_RUNS_DIR", "runs"))  # a shared stage cache, where one is set
    search = json.loads((runs / "search" / row["search_id"] / "config.json").read_text())
    encode = json.loads((runs / "encode" / search["parents"]["docs"] / "config.json").read_text())
    assert encode["config"]["max_length"] == 256  # the export's max_seq_length; the suite asks for 512


@pytest.mark.slow  # the pipeline end to end through Lucene (JVM)
def test_no_machine_path_in_an_adhoc_run_with_local_models(bert_tiny, tmp_path):
    """Local model folders given by absolute path: the results folder's name and every file in it (the
    compressed ones too) name them by their folder name only; the published row scores exactly what the
    same weights score as an untrained baseline."""
    place = tmp_path / "machine-specific-place"
    backbone = place / "my-bert"
    shutil.copytree(bert_tiny, backbone)
    export = export_bert_tiny(bert_tiny, place / "export")
    results = tmp_path / "results"
    assert (
        run_cli(
            "--datasets",
            "beir/scifact/test",
            "--backbones",
            str(backbone),
            "--published",
            str(export),
            "--max-docs",
            "300",
            "--max-queries",
            "10",
            "--runs-dir",
            str(tmp_path / "runs"),
            "--results-dir",
            str(results),
        )
        == 0
    )
    (folder,) = results.iterdir()
    assert folder.name.startswith("adhoc@datasets=scifact,backbones=my-bert~")  # long: cut, digest
    assert f"published={model_label(str(export))}," in (folder / "table.md").read_text()
    files = [p for p in folder.rglob("*")]
    assert {p.name for p in files} >= {
        "table.md",
        "table.csv",
        "table.tex",
        "results.json",
        "metrics.csv",
        "index.html",
        "perquery.csv.gz",
    }
    for path in files:
        assert "machine-specific" not in str(path.relative_to(results)), path
        if path.is_file():
            data = path.read_bytes()
            text = gzip.decompress(data) if path.suffix == ".gz" else data
            for machine in (str(tmp_path), str(place), "machine-specific", str(Path.home()) + "/"):
                assert machine.encode() not in text, (path.name, machine)
    data = json.loads((folder / "results.json").read_text())
    rows = {c["system"]: c for c in data["conditions"]}
    assert rows["splade"]["backbone"] == model_label(str(backbone)) and model_label(str(backbone)).startswith(
        "my-bert~"
    )
    assert rows["published"]["backbone"] == model_label(str(export))
    assert rows["published"]["metrics"] == rows["splade"]["metrics"]  # the same weights, encoded alike
    assert f"| SPLADE {model_label(str(backbone))} baseline (untrained) |" in (folder / "table.md").read_text()
