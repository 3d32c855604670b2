"""Peak memory of one pipeline step, in a fresh process (for tests/training/test_triples.py).

``python tests/helpers/memory_probe.py mine DATASET OUT`` runs the triples stage's Hugging Face miner;
``python tests/helpers/memory_probe.py train INIT TRIPLES OUT`` runs the start of training in two phases:
``examples`` (the triples streamed into train.arrow, the dev queries held out: what ``train_splade``
does first) and ``start`` (``train_splade`` itself, reusing them, up to its first optimiser step:
model loaded, sampler built, first batch drawn).
It prints the peak growth of the resident set per phase in kB: the kernel's high-water mark
(VmHWM), reset before each phase through /proc/self/clear_refs, so no short peak is missed. Files
read with read() do not count; the pages of the Arrow file touched through its memory map do.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def _status(key: str) -> int:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"no {key} in /proc/self/status")


def reset_peak() -> int:
    """Reset the high-water mark to the current resident set; returns that (kB)."""
    with open("/proc/self/clear_refs", "w") as fh:
        fh.write("5")
    return _status("VmHWM")


def main(job: str, *args: str) -> None:
    import torch  # noqa: F401  (imported before the baseline, like every step of the pipeline)
    from transformers import TrainerCallback

    from benchmark.data.negatives import hf_triples
    from benchmark.training.examples import prepare_examples
    from benchmark.training.loop import EXAMPLES_DIR, train_splade
    from benchmark.training.recipe import load_recipe

    peak: list[int] = []

    class FirstStep(TrainerCallback):
        def on_step_begin(self, args, state, control, **kwargs):  # the first batch is drawn by now
            if not peak:
                peak.append(_status("VmHWM"))

    if job == "mine":
        dataset, out = args
        Path(out).mkdir(parents=True, exist_ok=True)
        before = reset_peak()
        hf_triples({}, Path(out), dataset=dataset)
        print(json.dumps({"mine": _status("VmHWM") - before}))
        return
    init, triples, out = args
    recipe = load_recipe("smoke").with_overrides(
        {
            "batch_size": 4,
            "query_max_length": 16,
            "doc_max_length": 16,
            "chunk_size": 4,
            "max_steps": 1,
            "logging_steps": 1,
            "dev_steps": 1,
            "save_steps": 100,
            "dev_queries": 8,
        }
    )
    before = reset_peak()
    prepare_examples(
        Path(triples),
        ("query", "positive", "negative"),
        loss=recipe.loss,
        dev_queries=recipe.dev_queries,
        max_examples=recipe.max_examples,
        work_dir=Path(out) / EXAMPLES_DIR,
    ).dataset()
    grown = {"examples": _status("VmHWM") - before}
    before = reset_peak()
    train_splade(Path(init), Path(triples), recipe, Path(out), progress=False, callbacks=[FirstStep()])
    grown["start"] = peak[0] - before
    print(json.dumps(grown))


if __name__ == "__main__":
    main(*sys.argv[1:])
