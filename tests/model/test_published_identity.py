"""A published model is an input like a dataset: a local folder is known by its name and content digest
(``<name>~<digest>``) however its path was typed, its SparseEncoder settings are read through allowlists
(a setting that changes scores is refused in one line, before any stage), its config's shapes are checked
against its weights' safetensors headers, and its max_seq_length caps the suite's encode lengths."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from benchmark.model.identity import command_path, model_label
from benchmark.pipeline.plan import Options, build_plan
from benchmark.run import main
from benchmark.suites import load_suite
from helpers.exports import EXPORT, export_bert_tiny

DRY = ["--datasets", "beir/scifact/test", "--max-docs", "50", "--max-queries", "5", "--dry-run", "--no-progress"]


@pytest.fixture(scope="module")
def exported(bert_tiny, tmp_path_factory) -> Path:
    """bert-tiny through the harness's exporter (max_seq_length 512: its encode stage's length)."""
    return export_bert_tiny(bert_tiny, tmp_path_factory.mktemp("identity"))


def _copy(exported: Path, where: Path) -> Path:
    shutil.copytree(exported, where)
    return where


def _edit(path: Path, **changes) -> None:
    data = json.loads(path.read_text())
    data.update(changes)
    path.write_text(json.dumps(data))


def _error(capsys, *argv: str) -> str:
    capsys.readouterr()
    code = main(list(argv))
    err = capsys.readouterr().err
    assert code == 2, err
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def test_max_active_dims_is_refused_in_one_line_before_any_stage(exported, tmp_path, capsys):
    """sentence-transformers keeps each vector's top 8 dimensions under max_active_dims = 8; this harness
    keeps them all (d nnz 191.9 where sentence-transformers gives 8), so the folder is refused."""
    folder = _copy(exported, tmp_path / "pruned")
    _edit(folder / "config_sentence_transformers.json", max_active_dims=8)
    line = _error(capsys, "--published", str(folder), *DRY, "--runs-dir", str(tmp_path / "runs"))
    assert (
        f"folder {folder}'s config_sentence_transformers.json sets max_active_dims = 8, which changes its scores "
        "from what this harness computes (max_active_dims = None); remove it" in line
    ), line
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize(
    ("file", "change", "says"),
    [
        ("config_sentence_transformers.json", {"similarity_fn_name": "cosine"}, "similarity_fn_name = 'cosine'"),
        ("config_sentence_transformers.json", {"default_prompt_name": "query"}, "default_prompt_name = 'query'"),
        ("config_sentence_transformers.json", {"truncate_dim": 64}, "sets 'truncate_dim', which this harness"),
        ("sentence_bert_config.json", {"do_lower_case": True}, "do_lower_case = True"),
        ("1_SpladePooling/config.json", {"activation_function": "log1p_relu"}, "SpladePooling activation_function"),
        ("1_SpladePooling/config.json", {"pooling_strategy": "sum"}, "SpladePooling pooling_strategy = 'sum'"),
    ],
)
def test_a_setting_that_changes_scores_is_refused(exported, tmp_path, capsys, file, change, says):
    folder = _copy(exported, tmp_path / "edited")
    _edit(folder / file, **change)
    line = _error(capsys, "--published", str(folder), *DRY, "--runs-dir", str(tmp_path / "runs"))
    assert says in line and str(folder) in line, line


def test_settings_known_not_to_change_scores_are_accepted(exported, tmp_path, capsys):
    folder = _copy(exported, tmp_path / "fine")
    _edit(
        folder / "config_sentence_transformers.json",
        __version__={"sentence_transformers": "5.0.0"},
        similarity_fn_name="dot",
        max_active_dims=None,
    )
    _edit(folder / "1_SpladePooling/config.json", chunk_size=64, embedding_dimension=30522)
    assert main(["--published", str(folder), *DRY, "--runs-dir", str(tmp_path / "runs")]) == 0, capsys.readouterr()


@pytest.mark.parametrize(("field", "value", "shape"), [("vocab_size", 30000, "[30522, 128]"), ("hidden_size", 256, "")])
def test_a_config_whose_shapes_disagree_with_its_weights_is_one_line(exported, tmp_path, capsys, field, value, shape):
    """transformers would print 68 lines after planning; the safetensors header says it before any work."""
    folder = _copy(exported, tmp_path / "shapes")
    _edit(folder / "config.json", **{field: value})
    line = _error(capsys, "--published", str(folder), *DRY, "--runs-dir", str(tmp_path / "runs"))
    got = 30522 if field == "vocab_size" else 128
    assert (
        f"folder {folder}'s config.json gives {field} = {value}, but model.safetensors holds "
        f"bert.embeddings.word_embeddings.weight of shape [30522, 128] ({field} {got})" in line
    ), line


def test_a_label_depends_on_the_content_not_on_how_the_path_was_typed(exported, tmp_path, monkeypatch):
    """``./exports/x``, ``exports/x`` and the absolute path: one label, one reproduce command that runs
    where it was made (it gave ``unknown backbone`` for an absolute path)."""
    from benchmark.common.fingerprint import tree_digest

    folder = _copy(exported, tmp_path / "exports" / EXPORT)
    monkeypatch.chdir(tmp_path)
    label = f"{EXPORT}~{tree_digest(folder)[:8]}"
    typed = [f"./exports/{EXPORT}", f"exports/{EXPORT}", str(folder), f"exports/{EXPORT}/"]
    assert {model_label(t) for t in typed} == {label}
    assert {command_path(t) for t in typed} == {f"exports/{EXPORT}"}
    suite = load_suite("published")
    for t in typed:
        plan = build_plan(suite, Options(datasets=["beir/scifact/test"], published=[t]))
        [published] = [c for c in plan.conditions if c.system == "published"]
        assert f"--published exports/{EXPORT} " in published.command + " ", published.command
        assert plan.subset == f"datasets=scifact,published={label}"
    monkeypatch.chdir(tmp_path / "exports" / EXPORT / "1_SpladePooling")  # outside: a placeholder, no path
    assert command_path(str(folder)) == f"<folder {label}>"


def test_two_folders_of_one_name_stay_two_models(exported, tmp_path):
    """Two different exports both called splade-bert-tiny-baseline-seed42: two labels, two rows (they were
    one row with one model's nDCG and FLOPS and nnz averaged over both)."""
    from benchmark.report.labels import system_label

    a = _copy(exported, tmp_path / "a" / EXPORT)
    b = _copy(exported, tmp_path / "b" / EXPORT)
    (b / "README.md").write_text("another model's card")  # other content
    _edit(b / "config_sentence_transformers.json", similarity_fn_name="dot")
    assert model_label(str(a)) != model_label(str(b))
    assert model_label(str(a)).split("~")[0] == model_label(str(b)).split("~")[0] == EXPORT
    from benchmark.report.collect import collect
    from benchmark.stages.store import Store

    plan = build_plan(load_suite("published"), Options(datasets=["beir/scifact/test"], published=[str(a), str(b)]))
    results = collect(plan, Store(tmp_path / "runs"))  # nothing ran: the rows as the tables will name them
    rows = [system_label(*c.row) for c in results.conditions if c.system == "published"]
    assert rows == [f"SPLADE {model_label(str(a))} (published)", f"SPLADE {model_label(str(b))} (published)"]
    assert len(set(rows)) == 2 and len({c.evaluate.id for c in plan.conditions[1:]}) == 2


def test_a_sparse_encoders_max_seq_length_sets_the_encode_lengths(exported, tmp_path):
    """The published suite encodes documents at 512 and queries at 256 tokens; an export whose
    max_seq_length is 128 is encoded at 128 (the suite's setting was refused), and a smaller suite setting stands."""
    folder = _copy(exported, tmp_path / "short")
    _edit(folder / "sentence_bert_config.json", max_seq_length=128)

    def lengths(*sets: str) -> tuple[int, int]:
        opts = Options(datasets=["beir/scifact/test"], published=[str(folder)], sets=sets)
        plan = build_plan(load_suite("published", opts.suite_overrides()), opts)
        [c] = [c for c in plan.conditions if c.system == "published"]
        docs, queries = c.search.parents["docs"], c.search.parents["queries"]
        return docs.config.max_length, queries.config.max_length

    assert lengths() == (128, 128)
    assert lengths("encode.max_doc_length=100", "encode.max_query_length=32") == (100, 32)
