"""What tests share: tiny checkpoints (``tiny_models``), SciFact triples (``triples``), the forward
comparisons (``forwards``) and the pipeline command (``pipeline``). Programs that tests run in their own
processes (``ddp_worker``, ``kill_harness``, ``memory_probe``, ``ray_*``) stay beside the tests."""


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
