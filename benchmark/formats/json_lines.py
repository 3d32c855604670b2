"""JSON-lines files read by Arrow a block of lines at a time: peak memory is one block, whatever the
file's size (the triples of a training run, a hub dataset's JSON-lines files)."""

from __future__ import annotations

import io
from collections.abc import Iterator
from itertools import islice
from typing import Any

#: lines of JSON parsed per block (about 10 MB of MS MARCO triples)
BLOCK_LINES = 10_000


def line_blocks(fh: Any, lines_per_block: int) -> Iterator[list[bytes]]:
    while lines := list(islice(fh, lines_per_block)):
        yield lines


def parse_block(lines: list[bytes], schema: Any = None) -> Any:
    import pyarrow.json as pj

    block = b"".join(lines)
    parse = pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior="ignore") if schema is not None else None
    return pj.read_json(
        io.BytesIO(block),
        parse_options=parse,
        read_options=pj.ReadOptions(use_threads=False, block_size=len(block) + 1),
    )


def json_lines_batches(fh: Any, lines_per_block: int = BLOCK_LINES) -> Iterator[Any]:
    """Arrow record batches of a JSON-lines file object, ``lines_per_block`` lines at a time. (Arrow's
    streaming JSON reader reads ahead by whole blocks: its peak memory grows with the file up to tens
    of MB; this holds one block.)"""
    for lines in line_blocks(fh, lines_per_block):
        if any(line.strip() for line in lines):
            yield from parse_block(lines).to_batches()
