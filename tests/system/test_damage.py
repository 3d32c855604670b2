"""A damaged or stale cache is never served: each damage is reported in one line and its stage redone,
and the metrics equal those of a fresh run."""

from __future__ import annotations

import csv
import json
import os
import shutil
from pathlib import Path

import pytest

from helpers.beir import scifact_folder
from helpers.pipeline import run_cli

pytestmark = pytest.mark.slow  # the pipeline end to end through Lucene (JVM), once per damage

SUITE = """name = "damage"
description = "BM25 and untrained SPLADE on a local SciFact slice"
datasets = ["{folder}"]
measures = {measures}
[bm25]
[splade]
backbones = ["{model}"]
[encode]
max_doc_length = 64
max_query_length = 24
shard_size = 80
"""


@pytest.fixture(scope="module")
def world(tmp_path_factory, bert_tiny):
    base = tmp_path_factory.mktemp("damage")
    model = base / "models" / "tiny"
    shutil.copytree(bert_tiny, model)
    return {"base": base, "folder": scifact_folder(base / "slice"), "model": model}


@pytest.fixture(scope="module")
def computed(world) -> Path:
    """The suite (nDCG@10) computed once into a runs folder that no test touches: the tests that damage
    a complete runs folder start from a copy of it (``_copy_of_computed``) rather than computing the
    same stages again each; the copy is then run once, all cached, which is the run they began with."""
    runs = world["base"] / "computed-runs"
    suite = world["base"] / "computed.toml"
    suite.write_text(SUITE.format(folder=world["folder"], model=world["model"], measures=json.dumps(["nDCG@10"])))
    assert (
        run_cli("--suite", str(suite), "--runs-dir", str(runs), "--results-dir", str(world["base"] / "computed")) == 0
    )
    return runs


def _copy_of_computed(computed: Path, runs: Path) -> Path:
    shutil.copytree(computed, runs)  # copy2: sizes, contents and mtimes as computed
    return runs


def _run(world, capsys, runs: Path, measures=("nDCG@10",), results="results", extra=()) -> tuple[dict, str]:
    suite = world["base"] / "damage.toml"
    suite.write_text(SUITE.format(folder=world["folder"], model=world["model"], measures=json.dumps(list(measures))))
    capsys.readouterr()
    assert (
        run_cli("--suite", str(suite), "--runs-dir", str(runs), "--results-dir", str(world["base"] / results), *extra)
        == 0
    )
    out = capsys.readouterr().out
    with open(world["base"] / results / "damage" / "metrics.csv") as fh:
        metrics = {(r["system"], r["measure"]): r["value"] for r in csv.DictReader(fh)}
    return metrics, out


def _stage(runs: Path, kind: str, **record) -> Path:
    found = []
    for folder in (runs / kind).iterdir():
        if folder.name.startswith("."):
            continue
        meta = json.loads((folder / "config.json").read_text())
        if all(meta["record"].get(k) == v for k, v in record.items()):
            found.append(folder)
    assert len(found) == 1, (kind, record, found)
    return found[0]


def _damaged(out: str) -> list[str]:
    return [line for line in out.splitlines() if line.startswith("[damaged]")]


def _subset(metrics: dict, measures) -> dict:
    return {k: v for k, v in metrics.items() if k[1] in measures}


def test_each_damage_is_reported_and_redone(world, computed, capsys):
    runs = _copy_of_computed(computed, world["base"] / "runs")
    every = ("nDCG@10", "RR@10", "R@100", "R@10")
    fresh, _ = _run(world, capsys, world["base"] / "fresh-runs", measures=every, results="fresh")
    first, out = _run(world, capsys, runs)
    assert "[run] " not in out  # the copy serves every stage
    assert first == _subset(fresh, ("nDCG@10",))

    # 1. a truncated run file, then a newly added measure (a new evaluate stage reads the old run)
    run_file = _stage(runs, "search", type="bm25") / "run.trec"
    size = run_file.stat().st_size
    run_file.write_text(run_file.read_text()[: size // 3])
    metrics, out = _run(world, capsys, runs, measures=every[:2])
    assert _damaged(out) == [
        f"[damaged] {run_file.parent.name}: run.trec is {size // 3} bytes, recorded {size}; recomputing it"
    ]
    assert metrics == _subset(fresh, every[:2])

    # 2. a truncated encode shard, then an index rebuild (index and search redone for a new measure)
    encode = _stage(runs, "encode")
    shard = encode / "docs" / "part-00001.jsonl"
    shard_size = shard.stat().st_size
    shard.write_text(shard.read_text()[:100])
    shutil.rmtree(_stage(runs, "index", type="impact"))
    shutil.rmtree(_stage(runs, "search", type="impact"))
    metrics, out = _run(world, capsys, runs, measures=every[:3])
    assert _damaged(out) == [
        f"[damaged] {encode.name}: docs/part-00001.jsonl is 100 bytes, recorded {shard_size}; recomputing it"
    ]
    assert metrics == _subset(fresh, every[:3])

    # 3. a missing Lucene segment file under a finished index that a new search needs
    index = _stage(runs, "index", type="impact")
    segment = next(p for p in sorted((index / "index").iterdir()) if p.name.startswith("_"))
    segment.unlink()
    shutil.rmtree(_stage(runs, "search", type="impact"))
    metrics, out = _run(world, capsys, runs, measures=every)
    assert _damaged(out) == [f"[damaged] {index.name}: index/{segment.name} is missing; recomputing it"]
    assert metrics == fresh


def test_replaced_checkpoint_and_edited_qrels_make_new_stages(world, computed, capsys):
    runs = _copy_of_computed(computed, world["base"] / "runs-inputs")
    before, out = _run(world, capsys, runs)
    assert "[run] " not in out  # the copy serves every stage

    # 4. the checkpoint behind the same path is replaced: every stage from the backbone on is new
    from safetensors.torch import load_file, save_file

    weights = world["model"] / "model.safetensors"
    original = weights.read_bytes()
    tensors = load_file(weights)
    name = "bert.encoder.layer.1.output.LayerNorm.gamma"  # old-style names, as the checkpoint stores them
    tensors[name] = tensors[name] * 0.5
    save_file(tensors, weights, metadata={"format": "pt"})
    try:
        changed, out = _run(world, capsys, runs)
        assert "[run] backbone-" in out and "[cached] backbone-" not in out
        assert changed[("bm25", "nDCG@10")] == before[("bm25", "nDCG@10")]  # BM25 does not read the model
        assert changed[("splade", "nDCG@10")] != before[("splade", "nDCG@10")]
    finally:
        weights.write_bytes(original)

    # 5. qrels edited to the same size (one judgement 1 → 0), their old mtime put back: new topics stage
    qrels = world["folder"] / "qrels" / "test.tsv"
    text, stat = qrels.read_text(), qrels.stat()
    lines = text.splitlines()
    q, d, _ = lines[1].split("\t")
    edited = "\n".join([lines[0], f"{q}\t{d}\t0", *lines[2:]]) + "\n"
    assert len(edited) == len(text)
    qrels.write_text(edited)
    os.utime(qrels, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    try:
        edited_metrics, out = _run(world, capsys, runs)
        assert "[run] topics-" in out
        fresh, _ = _run(world, capsys, world["base"] / "runs-fresh-qrels", results="fresh-qrels")
        assert edited_metrics == fresh and edited_metrics != before
    finally:
        qrels.write_text(text)


def _plan(tmp_path: Path, body: str, **opts):
    from benchmark.pipeline.plan import Options, build_plan
    from benchmark.suites import load_suite

    suite = tmp_path / "plan.toml"
    suite.write_text('name = "p"\ndescription = "d"\nmeasures = ["nDCG@10"]\n' + body)
    return build_plan(load_suite(str(suite)), Options(**opts))


def test_one_stage_per_checkpoint_content(tmp_path, bert_tiny):
    """A registry key, its hub id and a folder of the same files are one checkpoint: one backbone
    stage (trained once), one row, named as first listed."""
    copy = tmp_path / "my-tiny"
    shutil.copytree(bert_tiny, copy)
    plan = _plan(
        tmp_path,
        f'datasets = ["beir/scifact/test"]\n[splade]\nbackbones = ["bert-tiny", "prajjwal1/bert-tiny", "{copy}"]\n'
        'recipe = "ci"\n',
    )
    assert len({s.id for s in plan.stages() if s.kind.name == "backbone"}) == 1
    assert len({s.id for s in plan.stages() if s.kind.name == "train"}) == 1
    assert [c.backbone for c in plan.conditions] == ["bert-tiny"]
    assert plan.same_backbones == {"bert-tiny": ["prajjwal1/bert-tiny", str(copy)]}
    assert "the checkpoint of 'bert-tiny' (same content), one row" in plan.summary()
    # other content is another stage
    (copy / "tokenizer_config.json").write_text((copy / "tokenizer_config.json").read_text() + "\n")
    other = _plan(tmp_path, f'datasets = ["beir/scifact/test"]\n[splade]\nbackbones = ["bert-tiny", "{copy}"]\n')
    assert len({s.id for s in other.stages() if s.kind.name == "backbone"}) == 2


def test_rebuilt_rescale_sample_gives_new_matched_backbones(tmp_path, monkeypatch):
    """The shipped sample decides α under the logit-std match: its content is in the backbone's id
    (and its code in the kind's sources); factor-mode backbones do not read it."""
    from benchmark.data import samples
    from benchmark.model.rescale import Rescale
    from benchmark.stages import Backbone
    from benchmark.stages.store import Stage

    def ids():
        matched = Rescale(mode="match", match="bert-base-uncased", match_stat="logit-std").to_dict()
        frob = Rescale(mode="match", match="bert-base-uncased", match_stat="frobenius").to_dict()
        factor = Rescale(mode="factor", factor=2.0).to_dict()
        return [Stage(Backbone, Backbone.Config("bert-tiny", r)).id for r in (matched, frob, factor)]

    assert "benchmark.data.samples" in Backbone.sources
    before = ids()
    rebuilt = tmp_path / samples.SCIFACT_FILE
    lines = samples.sample_path().read_text(encoding="utf-8").splitlines(keepends=True)
    rebuilt.write_text("".join(lines[1:]), encoding="utf-8")  # one abstract fewer
    monkeypatch.setattr(samples, "sample_path", lambda: rebuilt)
    samples.scifact_abstracts.cache_clear()
    try:
        assert len(samples.scifact_abstracts()) == len(lines) - 1  # the statistic reads the same file
        after = ids()
    finally:
        samples.scifact_abstracts.cache_clear()
    assert after[0] != before[0] and after[1:] == before[1:]


def _children(kind_dir: Path, parent: str) -> list[Path]:
    return [
        f
        for f in kind_dir.iterdir()
        if not f.name.startswith(".") and parent in json.loads((f / "config.json").read_text())["parents"].values()
    ]


def _same_size_edit(shard: Path) -> None:
    """Every impact of the first document's vector gets its first digit replaced (1-9 → 9-1): the
    file keeps its size, so only its sha256 tells."""
    lines = shard.read_text().splitlines(keepends=True)
    doc = json.loads(lines[0])
    text = lines[0]
    head, vector = text.split('"vector"', 1)
    edited = head + '"vector"' + "".join(str(10 - int(c)) if c in "123456789" else c for c in vector)
    assert len(edited) == len(text) and json.loads(edited)["vector"] != doc["vector"]
    shard.write_text("".join([edited, *lines[1:]]))


def test_same_size_damage_below_a_cached_stage(world, computed, capsys):
    """A shard changed in place at the same size: a stage about to be built from it checks its hashes
    first (no --verify needed), and --verify checks every stage the plan reaches, below finished ones
    too, recomputing the stages built on the damaged one; a parent with other content than its child
    read is not served either."""
    runs = _copy_of_computed(computed, world["base"] / "runs-deep")
    first, out = _run(world, capsys, runs)
    assert "[run] " not in out  # the copy serves every stage
    encode = _stage(runs, "encode")
    shard = encode / "docs" / "part-00000.jsonl"
    line = f"[damaged] {encode.name}: docs/part-00000.jsonl differs from its recorded sha256; recomputing it"

    # the index (and search and evaluate) are rebuilt from the encode stage: it is hashed before
    _same_size_edit(shard)
    search = _stage(runs, "search", type="impact")
    for folder in [_stage(runs, "index", type="impact"), search, *_children(runs / "evaluate", search.name)]:
        shutil.rmtree(folder)
    metrics, out = _run(world, capsys, runs)
    assert line in _damaged(out)
    assert metrics == first

    # nothing deleted: plain reuse serves the finished evaluate stage; --verify walks down to the shard
    _same_size_edit(shard)
    metrics, out = _run(world, capsys, runs, extra=("--verify",))
    damaged = _damaged(out)
    assert damaged[0] == line
    index = _stage(runs, "index", type="impact")
    assert (
        f"[damaged] {index.name}: it was computed from its source stage {encode.name}, found damaged in this run; "
        "recomputing it" in damaged
    )
    assert metrics == first

    # a child records the content of the parents it read: a parent folder replaced under the same id
    # with other content (e.g. rebuilt from damaged input by an older run) does not serve the child
    search = _stage(runs, "search", type="bm25")
    meta = json.loads((search / "config.json").read_text())
    meta["outputs"]["run.trec"][1] = "0" * 64  # as if the run file had been recomputed with other content
    (search / "config.json").write_text(json.dumps(meta))
    metrics, out = _run(world, capsys, runs)
    evaluate = [line for line in _damaged(out) if line.startswith("[damaged] evaluate-")]
    assert evaluate and evaluate[0].endswith(
        f"its run stage {search.name} has other content than when it was computed from it; recomputing it"
    )
    assert metrics == first


def test_an_extra_shard_in_a_finished_encode_stage_is_damage(world, computed, capsys):
    """A shard file the encode stage never recorded: the impact index built from its folder held more documents
    than its source, and stopped with "rerun with --verify", which found nothing. A finished stage must hold
    exactly the files it recorded."""
    runs = _copy_of_computed(computed, world["base"] / "runs-extra-shard")
    first, out = _run(world, capsys, runs)
    assert "[run] " not in out
    encode = _stage(runs, "encode")
    shards = sorted((encode / "docs").glob("part-*.jsonl"))
    extra = encode / "docs" / f"part-{len(shards):05d}.jsonl"
    extra.write_text(shards[0].read_text().splitlines(keepends=True)[0].replace('"id": "', '"id": "copy-', 1))
    search = _stage(runs, "search", type="impact")
    for folder in [_stage(runs, "index", type="impact"), search, *_children(runs / "evaluate", search.name)]:
        shutil.rmtree(folder)
    metrics, out = _run(world, capsys, runs)
    assert f"[damaged] {encode.name}: it holds docs/{extra.name}, which it did not record; recomputing it" in _damaged(
        out
    )
    assert metrics == first


@pytest.mark.parametrize("keep", ["indexed", "auto"])
def test_keep_indexed_then_a_new_depth_searches_the_cached_index_without_encoding(tmp_path, capsys, monkeypatch, keep):
    """--keep indexed drops the encoded shards once the impact index exists; a new ranking depth k
    needs a new search stage, which reads the encode stage's record and df.npy (for FLOPS), not its
    shards: it must search the cached index, not encode the corpus again. --keep auto (the default) does
    the same for a corpus of LARGE_CORPUS documents or more (here 40, the slice's size) and keeps the
    shards of one below it."""
    import benchmark.run

    monkeypatch.setattr(benchmark.run, "LARGE_CORPUS", 40)
    suite = tmp_path / "k.toml"
    body = (
        'name = "k"\ndescription = "d"\ndatasets = ["beir/scifact/test"]\nmeasures = ["nDCG@10"]\n'
        'max_docs = 40\nmax_queries = 5\n{k}[splade]\nbackbones = ["bert-tiny"]\n'
        "[encode]\nmax_doc_length = 32\nmax_query_length = 16\n"
    )
    argv = [
        "--suite",
        str(suite),
        "--runs-dir",
        str(tmp_path / "runs"),
        "--results-dir",
        str(tmp_path / "results"),
        "--keep",
        keep,
    ]
    suite.write_text(body.format(k=""))
    if keep == "auto":  # one document short of a large corpus: every shard stays
        assert run_cli(*argv[:-2], "--runs-dir", str(tmp_path / "small"), "--set", "max_docs=39") == 0
        assert "freed" not in capsys.readouterr().out
        assert list((tmp_path / "small" / "encode").glob("*/docs/*.jsonl"))
    assert run_cli(*argv) == 0
    first = capsys.readouterr().out
    assert f"--keep {keep}: freed" in first and "[run] encode-" in first
    assert not list((tmp_path / "runs" / "encode").glob("*/docs/*.jsonl"))
    before = (tmp_path / "results" / "k" / "metrics.csv").read_text()
    suite.write_text(body.format(k="k = 100\n"))
    assert run_cli(*argv) == 0
    second = capsys.readouterr().out
    ran = [line.split()[1].split("-")[0] for line in second.splitlines() if line.startswith("[run] ")]
    assert ran == ["search", "evaluate"], second  # the index, the queries and the encode stage are cached
    scores = [
        [(r["measure"], r["value"], r["FLOPS"]) for r in csv.DictReader(f.read_text().splitlines())]
        for f in (tmp_path / "results" / "k" / "metrics.csv",)
    ]
    assert scores == [[(r["measure"], r["value"], r["FLOPS"]) for r in csv.DictReader(before.splitlines())]]
