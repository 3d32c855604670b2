"""Results as data: one call turns a results folder (results.json + perquery.csv.gz, keyed by stage id)
into tidy pandas frames, rows named as the tables name them, and a per-query win/loss view of two rows.
Hand numbers, written by the real writer and read back."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from benchmark.common.errors import BenchmarkError
from benchmark.report.build import publish
from benchmark.report.frames import load_results
from benchmark.report.results import ConditionResult, SuiteResults

DATASET = "beir/scifact/test"
BM25 = {"q1": 0.5, "q2": 1.0, "q3": 0.0}
SEEDS = {42: {"q1": 0.75, "q2": 1.0, "q3": 0.25}, 43: {"q1": 0.25, "q2": 0.5, "q3": 0.25}}
PUBLISHED = {"q1": 0.5, "q2": 0.5, "q3": 1.0}


def mean(values: dict[str, float]) -> float:
    return sum(values.values()) / len(values)


@pytest.fixture
def folder(tmp_path):
    conditions = [
        ConditionResult(key="evaluate-bm25", dataset=DATASET, system="bm25", metrics={"nDCG@10": mean(BM25)}, queries=3)
    ]
    perquery = {"evaluate-bm25": {"nDCG@10": BM25}}
    for seed, values in SEEDS.items():
        key = f"evaluate-s{seed}"
        conditions.append(
            ConditionResult(
                key=key,
                dataset=DATASET,
                system="splade",
                backbone="bert-tiny",
                variant="baseline",
                factor="1",
                trained=True,
                seed=seed,
                metrics={"nDCG@10": mean(values)},
                queries=3,
                FLOPS=2.5,
            )
        )
        perquery[key] = {"nDCG@10": values}
    conditions.append(
        ConditionResult(
            key="evaluate-pub",
            dataset=DATASET,
            system="published",
            backbone="naver/splade-v3",
            factor="1",
            metrics={"nDCG@10": mean(PUBLISHED)},
            queries=3,
        )
    )
    perquery["evaluate-pub"] = {"nDCG@10": PUBLISHED}
    perquery["train-x"] = {"dev RR@10": {"d1": 1.0}}  # a training run's dev values: no condition, not a row
    results = SuiteResults(suite="hand", measures=["nDCG@10"], conditions=conditions, seeds=[42, 43], perquery=perquery)
    return publish(results, tmp_path / "results" / "hand")


def test_scores_and_perquery_are_tidy(folder):
    frames = load_results(folder)
    assert frames.rows() == ["BM25", "SPLADE bert-tiny baseline", "SPLADE naver/splade-v3 (published)"]
    s = frames.scores
    assert len(s) == 4 and set(s["measure"]) == {"nDCG@10"} and set(s["suite"]) == {"hand"}
    splade = s[s["row"] == "SPLADE bert-tiny baseline"].set_index("seed")
    assert splade.loc[42, "value"] == mean(SEEDS[42]) and splade.loc[43, "value"] == mean(SEEDS[43])
    assert list(splade["row_id"]) == ["splade|bert-tiny|baseline|trained"] * 2 and list(splade["FLOPS"]) == [2.5, 2.5]
    assert s.loc[s["system"] == "bm25", "seed"].isna().all() and str(s["seed"].dtype) == "Int64"
    assert s.loc[s["system"] == "published", "row_id"].item() == "published|naver/splade-v3||published"
    # the table's seed mean is the mean of this frame's seeds
    assert (
        s.groupby("row", sort=False)["value"].mean()["SPLADE bert-tiny baseline"]
        == (mean(SEEDS[42]) + mean(SEEDS[43])) / 2
    )
    p = frames.perquery
    assert len(p) == 3 * 4  # 3 queries × 4 conditions; the training run's dev values are not a row
    assert p[(p["seed"] == 43) & (p["query_id"] == "q2")]["value"].item() == 0.5
    assert set(p["condition"]) == {"evaluate-bm25", "evaluate-s42", "evaluate-s43", "evaluate-pub"}


def test_versus_counts_wins_and_losses_per_query(folder):
    frames = load_results(folder)
    v = frames.versus("SPLADE bert-tiny baseline", "BM25", "nDCG@10")
    assert list(v.columns) == ["dataset", "query_id", "a", "b", "delta", "result"]
    # seed means: q1 (0.75 + 0.25) / 2 = 0.5 = BM25's; q2 0.75 < 1.0; q3 0.25 > 0.0
    assert list(v["query_id"]) == ["q1", "q2", "q3"] and list(v["a"]) == [0.5, 0.75, 0.25]
    assert list(v["delta"]) == [0.0, -0.25, 0.25] and list(v["result"]) == ["tie", "loss", "win"]
    assert v["result"].value_counts().to_dict() == {"tie": 1, "loss": 1, "win": 1}
    by_id = frames.versus("published|naver/splade-v3||published", "BM25", "nDCG@10", dataset=DATASET)
    assert (
        list(by_id["result"]) == ["tie", "loss", "win"] and by_id.attrs["a"] == "published|naver/splade-v3||published"
    )
    with pytest.raises(
        BenchmarkError, match=r"^no row 'SPLADE x' with per-query values; valid: BM25, SPLADE bert-tiny"
    ):
        frames.versus("SPLADE x", "BM25", "nDCG@10")
    with pytest.raises(BenchmarkError, match=r"^row 'BM25' has no per-query 'R@100'; its measures: nDCG@10$"):
        frames.versus("BM25", "SPLADE bert-tiny baseline", "R@100")


def test_a_missing_folder_is_one_line(tmp_path):
    with pytest.raises(BenchmarkError, match=r"results.json cannot be read"):
        load_results(tmp_path / "nowhere")


def test_frames_of_an_unscored_condition_keep_its_row(tmp_path):
    c = ConditionResult(
        key="evaluate-1",
        dataset=DATASET,
        system="splade",
        backbone="b",
        variant="baseline",
        trained=True,
        seed=1,
        outcome="collapsed",
        stopped_early=True,
    )
    folder = publish(SuiteResults(suite="hand", measures=["nDCG@10"], conditions=[c]), tmp_path / "results" / "hand")
    s = load_results(folder).scores
    assert len(s) == 1 and math.isnan(s["value"].item()) and s["status"].item() == "collapsed"
    assert isinstance(s, pd.DataFrame)
