"""The packaged suites: they load, name real ir_datasets ids, and plan the paper's matrix offline,
quickly and without loading a model; bad names are all reported in one line."""

from __future__ import annotations

import re
import subprocess
import sys
from collections import Counter

import pytest

from benchmark.data.datasets import validate_dataset
from benchmark.pipeline.plan import Options, build_plan
from benchmark.suites import load_suite, suite_names
from helpers import ROOT
from helpers.pipeline import run_cli

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
MSMARCO = ["msmarco-passage/dev/small", "msmarco-passage/trec-dl-2019/judged", "msmarco-passage/trec-dl-2020/judged"]
PAPER_BACKBONES = [
    "bert-base-uncased",
    "modernbert-base",
    "modernbert-large",
    "ettin-17m",
    "ettin-32m",
    "ettin-68m",
    "ettin-150m",
    "ettin-400m",
    "ettin-1b",
]


def test_every_suite_loads_and_names_real_datasets():
    assert {"smoke", "msmarco", "trec-dl", "beir", "paper", "scale-sweep"} <= set(suite_names())
    for name in suite_names():
        suite = load_suite(name)
        for dataset in [d for d in suite.known_datasets() if d not in suite.groups]:
            assert validate_dataset(dataset) is None, (name, dataset)  # ir_datasets id with docs, queries, qrels


def test_suite_contents():
    assert load_suite("beir").datasets == BEIR13
    assert load_suite("beir").groups["beir/cqadupstack"] == [
        f"beir/cqadupstack/{f}"
        for f in (
            "android",
            "english",
            "gaming",
            "gis",
            "mathematica",
            "physics",
            "programmers",
            "stats",
            "tex",
            "unix",
            "webmasters",
            "wordpress",
        )
    ]
    paper = load_suite("paper")
    assert paper.datasets == MSMARCO + BEIR13
    assert paper.splade.backbones == PAPER_BACKBONES and paper.splade.variants == ["baseline", "rescaled"]
    assert paper.measures_of("msmarco-passage/dev/small") == ["RR@10", "R@1000"]
    assert paper.measures_of("msmarco-passage/trec-dl-2019/judged") == ["nDCG@10", "R(rel=2)@1000"]
    assert paper.measures_of("beir/nq") == ["nDCG@10", "R@100", "R@1000"]
    assert load_suite("trec-dl").measures == ["nDCG@10", "R(rel=2)@1000"]
    assert load_suite("msmarco").measures == ["RR@10", "R@1000"]
    from benchmark.model.checkpoints import BACKBONES

    assert all(b in BACKBONES for b in PAPER_BACKBONES)


def test_paper_plan_is_the_full_matrix():
    plan = build_plan(load_suite("paper"), Options())
    kinds = Counter(c.system for c in plan.conditions)
    # the paper's operation (once) × 1/16 for every backbone; BERT's tie to summed embeddings makes its arm an
    # untied scaled copy (untie, an extension)
    models = 9 * 2
    assert kinds == {"splade": models * 16, "bm25": 16}
    systems = {c.system_key for c in plan.conditions if c.system == "splade"}
    assert systems == {("splade", b, v, True) for b in PAPER_BACKBONES for v in ("baseline", "rescaled")}
    rescaled = {
        (c.backbone, c.backbone_stage.config.rescale.method) for c in plan.conditions if c.variant == "rescaled"
    }
    assert rescaled == {(b, "untie" if b == "bert-base-uncased" else "once") for b in PAPER_BACKBONES}
    assert {c.backbone_stage.config.rescale.factor for c in plan.conditions if c.variant == "rescaled"} == {1 / 16}
    stages = Counter(s.kind.name for s in plan.stages())
    # MS MARCO dev, DL19 and DL20 share one passage corpus: 14 corpora to encode per model, 16 query sets.
    assert stages["train"] == models and stages["backbone"] == models and stages["encode"] == models * 14
    assert stages["queries"] == models * 16 and stages["corpus"] == 14
    evaluate = {c.dataset: c.evaluate.config.measures for c in plan.conditions}
    assert evaluate["msmarco-passage/dev/small"] == ("R@1000", "RR@10")
    assert evaluate["msmarco-passage/trec-dl-2020/judged"] == ("R(rel=2)@1000", "nDCG@10")
    assert plan.recipe["name"] == "msmarco-infonce"


def test_paper_dry_run_prints_the_matrix(tmp_path, capsys):
    assert run_cli("--suite", "paper", "--dry-run", "--runs-dir", str(tmp_path / "runs")) == 0
    out = capsys.readouterr().out
    assert (
        "matrix: 9 backbone(s) × 2 variant(s) (trained) = 18 SPLADE system(s) + BM25; "
        "19 system(s) × 16 dataset(s) = 304 conditions" in out
    )
    assert "backbones: " + ", ".join(PAPER_BACKBONES) in out
    assert (
        "variants: baseline (MLM head as pretrained); rescaled (logits × 0.0625 (k = 16, α = 1/k) via once "
        "(the paper's method: decoder matrix and bias × α once, then trained as they are"
    ) in out
    for backbone in PAPER_BACKBONES[1:]:  # per backbone: baseline and the fixed-k arm, with method, k and tie handling
        assert (
            f"\n  {backbone}: baseline; rescaled [once ×0.0625 = 1/16]\n    MLM head (modernbert, tied to word "
            "embeddings that a LayerNorm normalises alone): 'once' scales the shared matrix;"
        ) in out
    assert (
        "\n  bert-base-uncased: baseline; rescaled [untie ×0.0625 = 1/16, untied copy +vocab × hidden parameters, "
        "extension]\n    MLM head (bert, tied to word embeddings summed with position and type embeddings before the "
        "LayerNorm): scaling the shared matrix would change the input, so 'once' runs as 'untie', an untied scaled "
        "copy, +23,471,418 parameters (vocab × hidden + vocab: the bias's alias becomes its own tensor), this "
        "harness's "
        "extension"
    ) in out
    assert "head-norm" not in out and "match" not in out and "projection" not in out  # extensions only when asked for
    assert "training: recipe msmarco-infonce" in out
    assert "datasets (16): " + ", ".join(MSMARCO + BEIR13) in out
    assert "measures: nDCG@10, R@100, R@1000, RR@10, R(rel=2)@1000" in out
    assert re.search(r"stages: .*train 18, encode 252, queries 288 \(\d+ in all\)", out)
    assert not (tmp_path / "runs").exists()  # a dry run writes nothing


def test_paper_dry_run_is_a_summary_and_stages_lists_every_stage(tmp_path, capsys, monkeypatch):
    """The paper's dry run once printed 1,814 lines, its estimate only under --executor ray: by default it is
    the summary, the counts and the estimate (here on --gpus 8); --stages adds each stage and condition."""
    runs = ["--runs-dir", str(tmp_path / "runs")]
    assert run_cli("--suite", "paper", "--dry-run", "--gpus", "8", *runs) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) <= 60, len(out)
    assert (
        "1481 stages, 0 cached, 1481 to run; 304 conditions (system × dataset × seed); --dry-run --stages lists "
        "each" in out
    )
    assert out[-5].startswith("estimate on 8 GPU(s) (--gpus) ")
    assert "  GPU work: 377–655 GPU-h (training + document encoding)" in out
    assert not any("[would run]" in line for line in out)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # the machine's GPUs when --gpus is not given: none here
    assert run_cli("--suite", "paper", "--dry-run", *runs) == 0
    assert "estimate on 1 GPU(s) (no GPU here; --gpus N for a cluster) " in capsys.readouterr().out
    assert run_cli("--suite", "paper", "--dry-run", "--stages", *runs) == 0
    full = capsys.readouterr().out.splitlines()
    assert sum("[would run]" in line for line in full) == 1481
    assert full[: len(out) - 6] == out[:-6]  # the same summary first
    assert full[len(out) - 6] == "1481 stages, 0 cached, 1481 to run:"
    assert run_cli("--suite", "paper", "--stages", *runs) == 2
    assert capsys.readouterr().err == "error: --stages lists the stages of a dry run; add --dry-run\n"


def test_paper_k_grid_and_extension_arms_when_asked(tmp_path, capsys):
    variants = "baseline,rescaled,k1,k2,k4,k8,k16,k32,head-norm,match-logit-std,match-frobenius,match-row-rms"
    # (rescaled-projection, the constant-multiplier reading, is asked for in test_projection_arm_only_when_asked)
    assert (
        run_cli(
            "--suite",
            "paper",
            "--dry-run",
            "--backbones",
            "modernbert-base",
            "--variants",
            variants,
            "--runs-dir",
            str(tmp_path / "runs"),
        )
        == 0
    )
    out = capsys.readouterr().out
    assert (
        "\n  modernbert-base: baseline = k1; rescaled = k16 [once ×0.0625 = 1/16]; k2 [once ×0.5 = 1/2]; "
        "k4 [once ×0.25 = 1/4]; k8 [once ×0.125 = 1/8]; k32 [once ×0.03125 = 1/32]; "
        "head-norm [head-norm match:bert-base-uncased, extension]; "
        "match-logit-std [once match:bert-base-uncased, extension]; "
        "match-frobenius [once match:bert-base-uncased, extension]; "
        "match-row-rms [once match:bert-base-uncased, extension]\n"
    ) in out
    assert "head-norm (logit-std matched to bert-base-uncased via head-norm (this harness's extension: " in out
    plan = build_plan(
        load_suite("paper"), Options(backbones=["ettin-17m"], variants=["rescaled"], rescale_method="head-norm")
    )
    assert {c.backbone_stage.config.rescale.method for c in plan.conditions if c.system == "splade"} == {"head-norm"}


def test_beir_dry_run_and_cqadupstack_group(tmp_path, capsys):
    assert run_cli("--suite", "beir", "--dry-run", "--runs-dir", str(tmp_path)) == 0
    assert "5 system(s) × 13 dataset(s) = 65 conditions" in capsys.readouterr().out
    plan = build_plan(
        load_suite("beir"), Options(datasets=["beir/scifact/test", "beir/cqadupstack"], backbones=["bert-tiny"])
    )
    assert plan.columns == ["beir/scifact/test", "beir/cqadupstack"]
    assert len(plan.datasets) == 13 and plan.groups["beir/cqadupstack"][0] == "beir/cqadupstack/android"
    assert len(plan.conditions) == 13 * (1 + 2)


def test_dry_run_loads_no_model_and_is_quick():
    code = (
        "import sys, time; t = time.perf_counter(); from benchmark.run import main\n"
        "for s in ('paper', 'beir'): assert main(['--suite', s, '--dry-run', '--runs-dir', '/nonexistent/runs']) == 0\n"
        "heavy = [m for m in ('torch', 'transformers', 'sentence_transformers', 'pyserini', 'jnius') if m in "
        "sys.modules]\n"
        "print('HEAVY', heavy, 'SECONDS', time.perf_counter() - t)"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    heavy, seconds = re.search(r"HEAVY (\[.*\]) SECONDS ([\d.]+)", proc.stdout).groups()
    assert heavy == "[]"
    assert float(seconds) < 30


def test_scale_sweep_variants():
    plan = build_plan(load_suite("scale-sweep"), Options())
    cells = [(c.variant, c.factor, c.method, c.seed) for c in plan.conditions if c.system == "splade"]
    # x1 is the baseline's model: trained once per seed, shown once with both labels; the paper's operation
    # (once) for the main line, which on bert-tiny (tied to summed embeddings) is an untied scaled copy; the
    # constant multiplier (projection, an extension) at 1/16, 1/4, 4 and 16
    u, p = "untie", "projection"
    arms = [
        ("baseline = x1", "1", ""),
        ("x0.0625", "0.0625", u),
        ("x0.25", "0.25", u),
        ("x4", "4", u),
        ("x16", "16", u),
        ("x0.0625-projection", "0.0625", p),
        ("x0.25-projection", "0.25", p),
        ("x4-projection", "4", p),
        ("x16-projection", "16", p),
    ]
    assert cells == [(v, f, m, seed) for v, f, m in arms for seed in (42, 43, 44)]
    assert all(c.trained for c in plan.conditions if c.system == "splade")
    assert plan.recipe["name"] == "smoke"


def test_projection_arm_only_when_asked(tmp_path, capsys):
    for suite in ("paper", "msmarco", "trec-dl", "beir"):
        plan = build_plan(
            load_suite(suite),
            Options(backbones=["modernbert-base"], variants=["baseline", "rescaled", "rescaled-projection"]),
        )
        methods = {c.variant: c.backbone_stage.config.rescale.method for c in plan.conditions if c.system == "splade"}
        assert methods == {"baseline": "once", "rescaled": "once", "rescaled-projection": "projection"}
        arms = {c.variant: c.arm for c in plan.conditions if c.system == "splade"}
        assert arms["rescaled-projection"] == "rescaled-projection [projection ×0.0625 = 1/16, extension]"


def test_every_bad_name_is_reported_at_once(tmp_path, capsys):
    code = run_cli(
        "--suite",
        "smoke",
        "--datasets",
        "beir/scifakt/test",
        "--variants",
        "baseline,shrunk",
        "--backbones",
        "bert-tinny",
        "--dry-run",
        "--runs-dir",
        str(tmp_path),
    )
    err = capsys.readouterr().err
    lines = err.strip().splitlines()  # a summary line, then one line per problem
    assert code == 2 and len(lines) == 4 and lines[0] == "error: 3 problems, one a line:", lines
    assert all(line.startswith("  ") for line in lines[1:])
    assert "'beir/scifakt/test' not in suite 'smoke'; valid: beir/scifact/test" in err
    assert "unknown variant(s) 'shrunk'; valid: baseline, rescaled" in err
    assert "unknown backbone 'bert-tinny' (did you mean 'bert-tiny'?)" in err

    suite = tmp_path / "bad.toml"
    suite.write_text(
        'name = "bad"\ndescription = "d"\ndatasets = ["beir/scifact/test"]\nmeasures = ["nDCG@ten"]\n'
        '[splade]\nbackbones = ["bert-tiny"]\n'
    )
    assert run_cli("--suite", str(suite), "--variants", "x3", "--dry-run", "--runs-dir", str(tmp_path)) == 2
    err = capsys.readouterr().err
    assert "unknown variant(s) 'x3'" in err and "unknown measure(s) 'nDCG@ten'" in err


def test_suite_cross_references_are_checked(tmp_path, capsys):
    suite = tmp_path / "refs.toml"
    suite.write_text(
        'name = "refs"\ndescription = "d"\ndatasets = ["beir/scifact/test"]\nmeasures = ["nDCG@10"]\n[bm25]\n'
        '[table]\nmeasure = "RR@10"\n[[table.averages]]\nname = "avg"\ndatasets = ["beir/nq"]\n'
        '[[expected]]\ndataset = "beir/scifact/test"\nsystem = "dense"\nmeasure = "nDCG@10"\nvalue = 0.5\n'
    )
    assert run_cli("--suite", str(suite), "--dry-run", "--runs-dir", str(tmp_path)) == 2
    err = capsys.readouterr().err
    assert "table.measure = 'RR@10' is not one of the suite's measures (nDCG@10)" in err
    assert "table.averages['avg'] names dataset 'beir/nq', not in the suite" in err
    assert "expected[0].system = 'dense'; valid: bm25, splade" in err


@pytest.mark.parametrize("name", ["msmarco", "trec-dl", "beir", "paper"])
def test_headline_suites_plan_offline(name):
    plan = build_plan(load_suite(name), Options())
    assert plan.conditions and all(c.evaluate is not None for c in plan.conditions)
    trained = {c.trained for c in plan.conditions if c.system == "splade"}
    assert trained == {True}


def test_a_long_subset_is_shown_in_full_and_stored_under_a_short_folder():
    from benchmark.pipeline.plan import subset_folder
    from benchmark.run import results_folder

    opts = Options(
        datasets=["beir/scifact/test", "beir/nfcorpus/test"],
        backbones=["bert-tiny"],
        variants=["baseline", "rescaled"],
        recipe="smoke",
        rescale_factor=0.25,
    )
    plan = build_plan(load_suite("beir"), opts)
    full = "datasets=scifact+nfcorpus,backbones=bert-tiny,variants=baseline,rescaled,recipe=smoke,rescale-factor=0.25"
    assert plan.subset == full  # what tables and pages print
    folder = results_folder(plan)
    assert folder.startswith("beir@" + full[:60] + "-") and len(folder) == len("beir@") + 60 + 1 + 8
    assert subset_folder("max-docs=600,max-queries=30") == "max-docs=600,max-queries=30"  # short labels unchanged


def test_a_command_line_slice_trains_with_the_slice_recipe():
    """--max-docs/--max-queries shrink training too (recipe ci), and say so; --recipe and a suite's own
    declared slice keep their recipe."""
    smoke = load_suite("smoke")
    whole = build_plan(smoke, Options())
    assert whole.recipe["name"] == "smoke" and not whole.slice_training
    sliced = build_plan(smoke, Options(max_docs=300, max_queries=10))
    assert sliced.recipe["name"] == "ci" and sliced.slice_training
    assert "recipe ci" in sliced.training and "not the suite's smoke" in sliced.training
    trains = {c.train.id for c in sliced.conditions if c.train is not None}
    assert trains and trains.isdisjoint({c.train.id for c in whole.conditions if c.train is not None})
    chosen = build_plan(smoke, Options(max_docs=300, max_queries=10, recipe="smoke"))
    assert chosen.recipe["name"] == "smoke" and not chosen.slice_training and "not the suite's" not in chosen.training
    declared = build_plan(load_suite("scale-sweep"), Options())  # the sweep's slice is the suite's own
    assert declared.recipe["name"] == "smoke" and not declared.slice_training


GPU_ENCODE = {
    "max_doc_length": 256,
    "max_query_length": 256,
    "batch_size": 128,
    "shard_size": 10000,
    "precision": "bfloat16",
    "attn_implementation": "sdpa",
    "compile": "inductor",
}


def test_gpu_suites_encode_with_the_gpu_profile():
    """The settings the four GPU suites wrote out before they named the profile; beir keeps its body eager."""
    from dataclasses import asdict

    for name in ("msmarco", "trec-dl", "paper"):
        assert asdict(load_suite(name).encode) == GPU_ENCODE, name
    assert asdict(load_suite("beir").encode) == {**GPU_ENCODE, "compile": "none"}


def test_an_encode_profile_gives_the_stage_ids_of_its_settings_written_out(tmp_path):
    head = (
        'name = "p"\ndescription = "d"\ndatasets = ["beir/scifact/test"]\nmeasures = ["nDCG@10"]\n'
        '[splade]\nbackbones = ["bert-tiny"]\n[encode]\n'
    )
    named, written = tmp_path / "named.toml", tmp_path / "written.toml"
    named.write_text(head + 'profile = "gpu"\nbatch_size = 64\n')
    written.write_text(
        head + "".join(f"{k} = {v!r}\n".replace("'", '"') for k, v in {**GPU_ENCODE, "batch_size": 64}.items())
    )
    a, b = load_suite(str(named)), load_suite(str(written))
    assert a.encode == b.encode and a.encode.batch_size == 64 and a.encode.compile == "inductor"
    ids = [[s.id for s in build_plan(suite, Options()).stages()] for suite in (a, b)]
    assert ids[0] == ids[1] and any(i.startswith("encode-") for i in ids[0])


def test_an_unknown_encode_profile_is_one_line(tmp_path):
    from benchmark.common.errors import BenchmarkError

    path = tmp_path / "bad.toml"
    path.write_text(
        'name = "bad"\ndescription = "d"\ndatasets = ["beir/scifact/test"]\nmeasures = ["nDCG@10"]\n'
        '[bm25]\n[encode]\nprofile = "gpux"\n'
    )
    with pytest.raises(
        BenchmarkError,
        match=r"unknown encode profile 'gpux' \(did you mean 'gpu'\?\); valid: gpu\. "
        r"Set \[encode\] profile to one of these",
    ):
        load_suite(str(path))


def test_untie_times_one_is_its_own_arm():
    """``--rescale-method untie --rescale-factor 1`` and the sweep's ``x1-untie`` plan the untied unscaled
    copy: a backbone stage of its own, not the baseline's; ``x1`` (once × 1) stays the baseline."""
    sweep = load_suite("scale-sweep")
    plan = build_plan(sweep, Options(variants=["baseline", "x1", "x1-untie", "x0.0625"], seeds=[42]))
    stages = {c.variant: c.backbone_stage for c in plan.conditions if c.system == "splade"}
    assert set(stages) == {"baseline = x1", "x1-untie", "x0.0625"}  # x1 shares the baseline's row
    assert len({s.id for s in stages.values()}) == 3
    assert stages["x1-untie"].config.rescale.to_dict() == {
        "mode": "factor",
        "factor": 1.0,
        "match": None,
        "scale_bias": True,
        "method": "untie",
        "match_stat": "logit-std",
    }
    cli = build_plan(
        sweep, Options(variants=["baseline", "rescaled"], rescale_method="untie", rescale_factor=1.0, seeds=[42])
    )
    arms = {c.variant: c for c in cli.conditions if c.system == "splade"}
    assert arms["rescaled"].backbone_stage.id == stages["x1-untie"].id != stages["baseline = x1"].id
    assert arms["rescaled"].method == "untie" and arms["rescaled"].factor == "1"
