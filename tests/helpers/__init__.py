"""What tests share: tiny checkpoints (``tiny_models``), SciFact triples (``triples``), BEIR folders
(``beir``), an exported bert-tiny (``exports``), the forward comparisons (``forwards``), the pipeline command
(``pipeline``), and where things are (``ROOT``, ``TESTS``, ``HELPERS``: a test module sits one folder below
tests/, so a path from its own ``__file__`` would need to know how deep). The programs that tests run in
their own processes (``ddp_worker``, ``kill_harness``, ``memory_probe``, ``scale_probe``, ``ray_*``) live
here too, and run as scripts: ``python tests/helpers/NAME.py``."""

from pathlib import Path

#: this folder, the tests' folder and the repository root
HELPERS = Path(__file__).resolve().parent
TESTS = HELPERS.parent
ROOT = TESTS.parent


def outcomes_csv(path) -> str:
    """A metrics.csv without its cost columns (search_ms, index_bytes: the time a search took and the bytes
    Lucene wrote, which vary between runs of the same computation): what must be equal between runs."""
    import csv
    import io

    with open(path, encoding="utf-8", newline="") as fh:
        rows = list(csv.DictReader(fh))
    out = io.StringIO()
    if rows:
        keep = [k for k in rows[0] if k not in ("search_ms", "index_bytes")]
        writer = csv.DictWriter(out, fieldnames=keep, extrasaction="ignore", lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    return out.getvalue()
