"""Claims no larger than their controls: a loss the evaluation measured is marked in the row, whatever
training said, in every output the tables are read in."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import ir_measures
import pytest

from benchmark.data.sources.beir_folder import read_local_topics
from benchmark.evaluation.significance import paired_ttest
from benchmark.report.build import publish
from benchmark.report.judgements import LOSS_THRESHOLD
from benchmark.report.results import ConditionResult, SuiteResults
from benchmark.training.outcomes import OK
from helpers import ROOT

MEASURE = "nDCG@10"
QUERIES = 12


def _beir_folder(root: Path) -> Path:
    """A BEIR folder no other test names: 12 queries, each with one relevant document among 40."""
    folder = root / "heldout-marsh"
    (folder / "qrels").mkdir(parents=True)
    docs = [{"_id": f"d{i}", "title": "", "text": f"reed bed {i} water level"} for i in range(40)]
    (folder / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))
    queries = [{"_id": f"m{i}", "text": f"water level at reed bed {i}"} for i in range(QUERIES)]
    (folder / "queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in queries))
    qrels = "".join(f"m{i}\td{i}\t1\n" for i in range(QUERIES))
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + qrels)
    return folder


def _perquery(qrels: list, ranks: dict[str, int]) -> dict[str, float]:
    """ir_measures' nDCG@10 per query of a run that puts each query's relevant document at ``ranks[q]``
    (0: not retrieved) among ten others."""
    run = []
    for q in (f"m{i}" for i in range(QUERIES)):
        wanted = int(q[1:])
        others = [f"d{j}" for j in range(20, 31)]
        ranked = others[:]
        if ranks[q]:
            ranked.insert(ranks[q] - 1, f"d{wanted}")
        run += [ir_measures.ScoredDoc(q, d, float(100 - n)) for n, d in enumerate(ranked)]
    judged = [ir_measures.Qrel(q.query_id, q.doc_id, q.relevance) for q in qrels]
    values = {m.query_id: m.value for m in ir_measures.iter_calc([ir_measures.parse_measure(MEASURE)], judged, run)}
    return {q: values.get(q, 0.0) for q in (f"m{i}" for i in range(QUERIES))}


def _condition(key: str, dataset: str, variant: str, values: dict[str, float]) -> ConditionResult:
    c = ConditionResult(
        key=key,
        dataset=dataset,
        system="splade",
        backbone="bb",
        variant=variant,
        trained=True,
        seed=42,
        outcome=OK,
        command=f"python -m benchmark.run  # {key}",
    )
    c.metrics = {MEASURE: sum(values.values()) / len(values)}
    c.queries = len(values)
    return c


def test_a_large_evaluated_loss_is_marked_in_the_row_when_training_was_ok(tmp_path):
    """Training said ok for both runs; on a collection training never saw, the arm loses most of the
    baseline's nDCG@10. Its row carries [lost N % vs baseline] in table.md, table.csv (outcomes column),
    table.tex and the page, the key says what it means, and judgements.csv has the test's numbers."""
    folder = _beir_folder(tmp_path)
    _, qrels = read_local_topics(folder, "test")
    dataset = str(folder)
    base = _perquery(qrels, {f"m{i}": 1 for i in range(QUERIES)})  # every relevant document first: 1.0
    arm = _perquery(qrels, {f"m{i}": (1 if i < 3 else 8 if i < 6 else 0) for i in range(QUERIES)})
    assert set(base.values()) == {1.0} and sum(arm.values()) < 0.5 * QUERIES  # the arm really lost
    pq = {"base": {MEASURE: base}, "arm": {MEASURE: arm}}
    conds = [_condition("base", dataset, "baseline", base), _condition("arm", dataset, "x16", arm)]
    results = SuiteResults(
        suite="heldout",
        measures=[MEASURE],
        conditions=conds,
        columns=[dataset],
        table={"measure": MEASURE},
        perquery=pq,
    )
    out = publish(results, tmp_path / "out")
    test = paired_ttest(arm, base)
    loss = -test.mean_difference / (sum(base.values()) / QUERIES)
    assert loss > LOSS_THRESHOLD and test.p_value < 0.05
    mark = f"lost {100 * loss:.0f} % vs baseline"
    md = (out / "table.md").read_text()
    row = next(line for line in md.splitlines() if line.startswith("| SPLADE bb x16"))
    assert row.startswith(f"| SPLADE bb x16 [{mark}] |"), row
    assert "[lost N % vs baseline]: the evaluated score below the baseline's by N % (> 10 %" in md
    with open(out / "table.csv") as fh:
        rows = [r for r in csv.DictReader(fh) if r["variant"] == "x16"]
    assert rows and all(r["outcomes"] == mark for r in rows)
    assert mark.replace("%", r"\%") in (out / "table.tex").read_text()
    assert mark in (out / "index.html").read_text()
    with open(out / "judgements.csv") as fh:
        judged = [r for r in csv.DictReader(fh) if r["kind"] == "lost"]
    assert [(r["row"], r["verdict"], r["queries"]) for r in judged] == [("SPLADE bb x16", "True", str(QUERIES))]
    assert float(judged[0]["statistic"]) == pytest.approx(loss, rel=1e-5)  # 6 significant digits in the csv
    assert float(judged[0]["p_value"]) == pytest.approx(test.p_value, rel=1e-5)
    # the baseline row is not judged against itself, and a small loss is not marked
    assert "SPLADE bb baseline [" not in md
    near = _perquery(qrels, {f"m{i}": (1 if i else 2) for i in range(QUERIES)})
    pq["arm"] = {MEASURE: near}
    conds[1] = _condition("arm", dataset, "x16", near)
    again = publish(results, tmp_path / "again")
    assert "lost" not in next(
        line for line in (again / "table.md").read_text().splitlines() if line.startswith("| SPLADE bb x16")
    )


# the committed runs whose MLM head was left as it was: suite → (in-batch candidates, train ids)
UNCHANGED = {
    "smoke": (64, ["train-1eed616a75a3"]),
    "scale-sweep": (64, ["train-99e124bb9d6b", "train-a6ab81fcefc9", "train-36b52408bd6d"]),
    "paper-mini": (32, ["train-a4852931d639", "train-717a2782f9ed", "train-44caf3a0ba9a", "train-34c30523f178"]),
}


def test_collapsed_on_unchanged_runs_as_docs_training_states():
    """The false-positive rate docs/training.md states for ``collapsed``: the committed baselines' telemetry
    replayed through the detector (their recipes' patience, dense fraction and final λ; candidates = 2 ×
    batch, one negative each) fires on 0 of 8 runs, no condition holding on any of 52 armed steps; and
    none of those runs was marked by training."""
    from benchmark.training.detector import TRIGGERS, OutcomeDetector
    from benchmark.training.recipe import load_recipe

    root = ROOT / "results"
    runs = armed_rows = held = fired = 0
    for suite, (candidates, ids) in UNCHANGED.items():
        data = json.loads((root / suite / "results.json").read_text())
        by_train = {c["train_id"]: c for c in data["conditions"] if c.get("train_id")}
        recipe = load_recipe("ci" if suite == "paper-mini" else "smoke")
        assert 2 * recipe.batch_size == candidates
        for train_id in ids:
            record = by_train[train_id]
            assert record["variant"].startswith("baseline") and record["outcome"] == OK
            with open(root / suite / "telemetry" / f"{train_id}.csv") as fh:
                rows = [
                    {k: float(v) if v and k != "event" else v for k, v in r.items()}
                    for r in csv.DictReader(fh)
                    if r["ranking_loss"]
                ]
            detector = OutcomeDetector(
                "infonce",
                record["vocab_size"],
                candidates,
                recipe.dense_fraction,
                recipe.trigger_patience,
                recipe.lambda_q,
                recipe.lambda_d,
            )
            detector.replay(rows)
            runs += 1
            armed = [r for r in rows if detector.armed(r)]
            armed_rows += len(armed)
            held += sum(bool(set(detector.conditions(r)) & set(TRIGGERS)) for r in armed)
            fired += detector.reason is not None
    assert (runs, armed_rows, held, fired) == (8, 52, 0, 0)
    docs = (ROOT / "docs" / "training.md").read_text()
    assert "it fired on 0 of 8, and no trigger condition held on any of the 52" in " ".join(docs.split())


def test_every_latex_table_that_carries_a_dagger_keys_it(tmp_path):
    """table.tex: the RR@10 table, after the headline's, carries † too, and its own caption says what † is
    (a float is read on its own; the key was once given only under the first)."""
    import re

    measures = ["nDCG@10", "RR@10"]
    base = {f"q{i}": 0.2 + 0.05 * i for i in range(8)}
    arm = {q: v + 0.3 + 0.01 * i for i, (q, v) in enumerate(base.items())}  # better on every query
    pq: dict = {}
    conds = []
    for key, variant, values in (("b", "baseline", base), ("r", "x4", arm)):
        c = _condition(key, "beir/fen/test", variant, values)
        c.metrics = {m: sum(values.values()) / len(values) for m in measures}
        pq[key] = {m: dict(values) for m in measures}
        conds.append(c)
    results = SuiteResults(
        suite="fen", measures=measures, conditions=conds, columns=["beir/fen/test"], table={}, perquery=pq
    )
    tex = (publish(results, tmp_path / "fen") / "table.tex").read_text()
    floats = re.findall(r"\\begin\{table\}.*?\\end\{table\}", tex, flags=re.S)
    daggered = [f for f in floats if r"\dagger" in f.split(r"\toprule", 1)[1]]
    assert len(daggered) == 2  # the nDCG@10 table and the RR@10 table
    for f in daggered:
        caption = re.search(r"\\caption\{(.*?)\}\n", f).group(1)
        assert r"$^\dagger$: significant vs that baseline" in caption, caption


def test_modernbert_layer_0_is_not_pre_normed_so_it_sees_the_shrunken_embeddings(tmp_path):
    """docs/rescaling.md once said pre-norm layers see only the direction of the scaled shared matrix's
    embeddings; ModernBERT's layer 0 has no attention norm (``Identity``), and its attention output moves
    by two thirds under ``once`` × 1/16 (0.667 on this seed-0 shape; the bound 0.5 leaves room for other
    torch builds' rounding, far above the encoder output's < 1 % drift)."""
    import torch

    from benchmark.model.loader import load_backbone
    from benchmark.model.rescale import Rescale, apply_rescale
    from helpers.tiny_models import tiny_modernbert

    model, tokenizer = load_backbone(str(tiny_modernbert(tmp_path, vocab_size=4096)))
    layers = model.model.layers
    assert isinstance(layers[0].attn_norm, torch.nn.Identity)
    assert isinstance(layers[1].attn_norm, torch.nn.LayerNorm)
    outputs: list[torch.Tensor] = []

    def keep(module, inputs, output):
        outputs.append((output[0] if isinstance(output, tuple) else output).detach().clone())

    layers[0].attn.register_forward_hook(keep)
    enc = tokenizer(
        ["the quick brown fox jumps over the lazy dog", "capital of france"], padding=True, return_tensors="pt"
    )
    with torch.inference_mode():
        model(**enc)
    apply_rescale(model, Rescale("factor", factor=1 / 16))
    with torch.inference_mode():
        model(**enc)
    mask = enc["attention_mask"].bool()
    before, after = (o[mask] for o in outputs)
    assert float(torch.linalg.norm(after - before) / torch.linalg.norm(before)) > 0.5
    docs = (ROOT / "docs" / "rescaling.md").read_text()
    assert "see only the direction" not in docs and "`attn_norm` is `Identity`" in docs


def test_the_paper_dry_run_does_not_call_berts_untie_the_papers_method():
    from benchmark.pipeline.plan import Options, build_plan
    from benchmark.suites import load_suite

    header = build_plan(load_suite("paper"), Options()).summary().splitlines()
    variants = next(line for line in header if line.startswith("variants: "))
    assert variants.endswith(
        "; on bert-base-uncased 'once' runs as 'untie', an untied scaled copy: this harness's extension, not the "
        "paper's method"
    )
    ettin = build_plan(load_suite("paper"), Options(backbones=["ettin-17m"])).summary()
    assert "runs as 'untie'" not in ettin.splitlines()[3]


def test_readme_headline_separates_untie_from_scale():
    readme = " ".join((ROOT / "README.md").read_text().split())
    assert "safe under neither" not in readme
    assert "its rescaled arms are `untie`, an untied scaled copy" in readme
    # untie alone (the x1-untie control against the baseline), then scale against that control, each with
    # its seed-level p (docs/results.md's table from results/scale-sweep@variants=baseline,x1-untie)
    assert "(**untie: −0.0044, p = 0.32** over seeds)" in readme
    assert "Against that control, **scale**:" in readme and "Holm p = 0.0042 over seeds" in readme
    assert "× 1/16 scores 0.6784 (Holm p = 0.060)" in readme


def test_every_recipe_file_names_the_split_it_was_tuned_on():
    """Each packaged recipe records ``tuned_on``; it stays out of ``Recipe`` (so out of the train stage's id);
    the dry run shows it and says when the plan reports on one of those splits. No packaged recipe is tuned
    on a split that a committed table reports (smoke and ci: NFCorpus dev and SciFact train)."""
    import dataclasses

    from benchmark.pipeline.plan import Options, build_plan
    from benchmark.suites import load_suite
    from benchmark.training.recipe import RECIPES, TUNED_ON, load_recipe, recipe_tuned_on

    names = list(RECIPES)
    assert {"smoke", "ci", "msmarco-infonce", "msmarco-marginmse"} <= set(names)
    for name in names:
        assert recipe_tuned_on(name), name
        assert TUNED_ON not in {f.name for f in dataclasses.fields(load_recipe(name))}
    assert recipe_tuned_on("smoke") == recipe_tuned_on("ci") == "beir/nfcorpus/dev, beir/scifact/train"
    reported = set()
    for folder in (ROOT / "results").iterdir():
        if (folder / "results.json").is_file():
            reported |= {c["dataset"] for c in json.loads((folder / "results.json").read_text())["conditions"]}
    assert "beir/scifact/test" in reported
    for name in names:
        assert not set(recipe_tuned_on(name).split(", ")) & reported, name
    smoke = build_plan(load_suite("smoke"), Options())
    assert smoke.recipe["tuned_on"] == "beir/nfcorpus/dev, beir/scifact/train"
    assert "  tuned on: beir/nfcorpus/dev, beir/scifact/train" in smoke.summary().splitlines()
    # a plan that reports on a tuning split says so
    from benchmark.pipeline.systems.splade import tuned_note

    assert tuned_note(recipe_tuned_on("smoke"), ["beir/nfcorpus/dev"]) == (
        "tuned on: beir/nfcorpus/dev, beir/scifact/train, a split this plan reports on: its numbers there "
        "favour the recipe's arms"
    )
    beir = build_plan(load_suite("beir"), Options(backbones=["bert-tiny"]))
    assert "  tuned on: not tuned here: naver/splade's published settings" in beir.summary().splitlines()


def test_a_value_from_a_query_past_2_24_is_marked_in_its_cell_everywhere(tmp_path):
    """A run whose summed impacts passed 2^24 on one query: its cell carries § in table.md, table.tex and the
    page, table.csv says past_float32 in its flags column, and the key explains §; the clean row has none."""
    base = {f"q{i}": 0.5 for i in range(4)}
    pq: dict = {}
    conds = []
    for key, variant, flagged in (("b", "baseline", 0), ("r", "x16", 1)):
        c = _condition(key, "beir/fen/test", variant, base)
        c.past_float32 = flagged
        pq[key] = {MEASURE: dict(base)}
        conds.append(c)
    results = SuiteResults(
        suite="fen", measures=[MEASURE], conditions=conds, columns=["beir/fen/test"], table={}, perquery=pq
    )
    out = publish(results, tmp_path / "fen")
    md = (out / "table.md").read_text()
    lines = {line.split(" |")[0]: line for line in md.splitlines() if line.startswith("| SPLADE")}
    assert lines["| SPLADE bb x16"].startswith("| SPLADE bb x16 | 0.5000 (0.0000)§ |")
    assert "§" not in lines["| SPLADE bb baseline"]
    assert "§: computed from a query whose summed impacts passed 2^24" in md
    with open(out / "table.csv") as fh:
        flags = {r["variant"]: r["flags"] for r in csv.DictReader(fh) if r["kind"] != "efficiency"}
    assert flags == {"baseline": "", "x16": "past_float32"}
    tex = (out / "table.tex").read_text()
    assert r"0.5000\,{\scriptsize(0.0000)}$^{\S}$" in tex and r"$^{\S}$: computed from a query" in tex
    page = (out / "index.html").read_text()
    assert '<span class="dagger" data-field="flags">§</span>' in page and "§: computed from a query" in page
