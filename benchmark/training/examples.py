"""Training examples on disk: the triples streamed into a memory-mapped Arrow file, minus the held-out
dev queries, and batch samplers that shuffle them without an index permutation in memory.

The triples stage caps its output at max_steps × batch (19.2M rows for ``msmarco-infonce``); held as
Python dicts they would cost tens of GB before training starts. Here ``triples.jsonl`` is parsed by
Arrow ``BLOCK_LINES`` lines at a time, validated, filtered and written block by block to
``train.arrow``, which ``datasets`` memory-maps. Peak memory does not depend on the number of rows:

* the dev batch is the first ``dev_queries`` distinct queries in file order, with their first
  triple; every row of those queries, anywhere in the file, is dropped from training;
* the samplers draw a keyed pseudo-random permutation (a Feistel network, cycle-walked to the row
  count) one index at a time: O(1) memory where ``torch.randperm`` holds 4-8 bytes per row.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from sentence_transformers.base.sampler import DefaultBatchSampler

from benchmark.common.atomic import write_json
from benchmark.common.errors import BenchmarkError
from benchmark.formats.json_lines import BLOCK_LINES, line_blocks, parse_block
from benchmark.training.dev import DevBatch

TRAIN = "train.arrow"
META = "examples.json"
#: rows per Arrow batch for list input
LIST_CHUNK = 10_000
#: rows of train.arrow are written in batches of about this many bytes: ``datasets`` opens an Arrow
#: stream by reading every batch's header, so fewer batches touch fewer pages of the memory map
WRITE_BATCH_BYTES = 4 << 20


@dataclass(frozen=True)
class Examples:
    """Where the training rows are (``train.arrow``), how many, the held-out dev batch, and a digest of
    the source (a resumed run must train on the same triples)."""

    path: Path
    rows: int
    dev: DevBatch | None
    source: str
    source_sha256: str

    def dataset(self) -> Any:
        """The training rows as a memory-mapped ``datasets.Dataset``."""
        from datasets import Dataset

        return Dataset.from_file(str(self.path))


def _schema(columns: Sequence[str]) -> Any:
    import pyarrow as pa

    return pa.schema([(c, pa.float64() if c == "score" else pa.string()) for c in columns])


def _check_row(where: str, example: Any, columns: Sequence[str], loss: str) -> None:
    """One example: a dict with every column, texts as str and the score as a number."""
    if not isinstance(example, dict) or any(c not in example for c in columns):
        keys = sorted(example) if isinstance(example, dict) else type(example).__name__
        raise BenchmarkError(f"{where} has {keys}; recipe loss {loss!r} needs keys {', '.join(columns)}")
    for column in columns:
        value = example[column]
        ok = (
            isinstance(value, (int, float)) and not isinstance(value, bool)
            if column == "score"
            else isinstance(value, str)
        )
        if not ok:
            kind = "a number" if column == "score" else "a str"
            raise BenchmarkError(f"{where}[{column!r}] is {type(value).__name__} {value!r:.40}, expected {kind}")


def _check_list(examples: Any, columns: Sequence[str], loss: str) -> None:
    if not isinstance(examples, Sequence) or isinstance(examples, (str, bytes)):
        raise BenchmarkError(
            f"examples must be a triples.jsonl path or a list of dicts with keys {', '.join(columns)}, "
            f"got {type(examples).__name__}"
        )
    for i, example in enumerate(examples):
        _check_row(f"examples[{i}]", example, columns, loss)


def _list_batches(examples: Sequence[dict[str, Any]], columns: Sequence[str]) -> Iterator[Any]:
    import pyarrow as pa

    schema = _schema(columns)
    for start in range(0, len(examples), LIST_CHUNK):
        chunk = [{c: e[c] for c in columns} for e in examples[start : start + LIST_CHUNK]]
        yield pa.RecordBatch.from_pylist(chunk, schema=schema)


def _bad_line(
    path: Path, lines: list[bytes], first: int, columns: Sequence[str], loss: str, message: str
) -> BenchmarkError:
    """Arrow does not say which line failed: check the block's lines one by one (error path only)."""
    for n, line in enumerate(lines, first):
        if not line.strip():
            continue
        try:
            example = json.loads(line)
        except ValueError as exc:
            return BenchmarkError(f"{path}: line {n} is not JSON ({exc}); each line must be one JSON object")
        try:
            _check_row(f"{path}: line {n}", example, columns, loss)
        except BenchmarkError as exc:
            return exc
    return BenchmarkError(
        f"{path}: lines {first}-{first + len(lines) - 1}: {message}; each line must be a JSON "
        f"object with keys {', '.join(columns)}"
    )


def _file_batches(path: Path, columns: Sequence[str], loss: str) -> Iterator[Any]:
    """``BLOCK_LINES`` lines at a time, parsed by Arrow against the columns' schema."""
    import pyarrow as pa

    schema, first = _schema(columns), 1
    with open(path, "rb") as fh:
        for lines in line_blocks(fh, BLOCK_LINES):
            try:
                table = parse_block(lines, schema)
            except pa.ArrowInvalid as exc:
                raise _bad_line(path, lines, first, columns, loss, str(exc)) from None
            if any(table.column(c).null_count for c in columns):
                raise _bad_line(path, lines, first, columns, loss, "a key is missing")
            first += len(lines)
            yield from table.to_batches()


def prepare_examples(
    source: Path | str | Sequence[dict[str, Any]],
    columns: Sequence[str],
    *,
    loss: str,
    dev_queries: int,
    max_examples: int,
    work_dir: Path,
    build: bool = True,
) -> Examples:
    """Stream ``source`` (a triples JSONL file, or a list of dicts) into ``work_dir``; see the module doc.

    ``max_examples`` (0: all) caps the training rows, after the hold-out. ``build`` False: only open
    what another process (DDP rank 0) built. A folder built before is reused.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    from benchmark.common.fingerprint import file_digest

    work_dir = Path(work_dir)
    meta_path = work_dir / META
    is_file = isinstance(source, (str, os.PathLike))
    if is_file:
        path = Path(cast("str | os.PathLike[str]", source))
        if not path.is_file():
            raise BenchmarkError(
                f"triples file {str(path)!r} does not exist; run the triples stage first or pass a list of dicts"
            )
        where, source_sha256 = str(path), file_digest(path)
        batches = _file_batches(path, columns, loss)
    else:
        source = cast("Sequence[dict[str, Any]]", source)  # not a path: a list of dicts
        _check_list(source, columns, loss)
        batches = _list_batches(source, columns)
        where = f"a list of {len(source)} examples"
        digest = hashlib.sha256()
        for example in source:
            digest.update(json.dumps([example[c] for c in columns]).encode())
        source_sha256 = digest.hexdigest()
    params = {
        "columns": list(columns),
        "dev_queries": dev_queries,
        "max_examples": max_examples,
        "source_sha256": source_sha256,
    }
    meta = json.loads(meta_path.read_text()) if meta_path.is_file() else None
    if meta is not None and meta["params"] == params:
        dev = DevBatch.from_dict(meta["dev"]) if meta["dev"] else None
        return Examples(work_dir / TRAIN, meta["rows"], dev, where, source_sha256)
    if not build:
        raise BenchmarkError(
            f"{work_dir} holds no examples prepared for this run; the main process prepares them first"
        )

    work_dir.mkdir(parents=True, exist_ok=True)
    tmp = work_dir / f".{TRAIN}.tmp{os.getpid()}"
    pool = pa.default_memory_pool()
    held: dict[str, dict[str, str]] = {}  # dev query → its first (query, positive, negative)
    written = 0

    def keep(batch: Any) -> Any:
        if held:
            batch = batch.filter(
                pc.invert(pc.is_in(batch.column("query"), value_set=pa.array(list(held), pa.string())))
            )
        if max_examples:
            batch = batch.slice(0, max(0, max_examples - written))
        return batch

    def hold_out(batch: Any) -> None:
        """Take new queries of ``batch`` into the dev batch until it has ``dev_queries``."""
        for i, query in enumerate(batch.column("query").to_pylist()):
            if len(held) == dev_queries:
                return
            if query not in held:
                held[query] = batch.slice(i, 1).select(["query", "positive", "negative"]).to_pylist()[0]

    try:
        with pa.ipc.new_stream(str(tmp), _schema(columns)) as writer:
            pending: list[Any] = []  # blocks read while the dev batch is incomplete
            out: list[Any] = []  # kept blocks not yet written

            def flush() -> None:
                if out:
                    writer.write_table(pa.Table.from_batches(out, schema=_schema(columns)).combine_chunks())
                    out.clear()
                    pool.release_unused()  # Arrow's allocator would otherwise keep every freed block cached

            for batch in batches:
                pending.append(batch)
                if len(held) < dev_queries:
                    hold_out(batch)
                    if len(held) < dev_queries:
                        continue
                for block in pending:
                    block = keep(block)
                    out.append(block)
                    written += block.num_rows
                pending = []
                if sum(b.nbytes for b in out) >= WRITE_BATCH_BYTES:
                    flush()
                if max_examples and written >= max_examples:
                    break
            flush()
            if len(held) < dev_queries:
                raise BenchmarkError(
                    f"{where} has {len(held)} distinct queries, fewer than dev_queries = {dev_queries} to hold out "
                    f"for the "
                    "dev MRR; lower dev_queries in the recipe (0: no held-out signal)"
                )
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    meta_path.unlink(missing_ok=True)
    os.replace(tmp, work_dir / TRAIN)
    dev = DevBatch.from_rows(list(held.values())) if held else None
    write_json(meta_path, {"params": params, "rows": written, "dev": dev.to_dict() if dev else None})
    return Examples(work_dir / TRAIN, written, dev, where, source_sha256)


# --------------------------------------------------------------------------- O(1)-memory shuffling

_M64 = (1 << 64) - 1


def _mix(x: int) -> int:
    """splitmix64's finaliser: a bijective 64-bit hash."""
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _M64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _M64
    return x ^ (x >> 31)


class Permutation:
    """A keyed pseudo-random permutation of ``range(n)``: a 4-round Feistel network on the smallest
    even-width bit domain >= n, cycle-walked back into range (a bijection, O(1) memory)."""

    ROUNDS = 4

    def __init__(self, n: int, *key: int) -> None:
        self.n = n
        self.half = max(1, ((max(n, 2) - 1).bit_length() + 1) // 2)
        self.mask = (1 << self.half) - 1
        material = 0
        for part in key:
            material = _mix((material ^ (part & _M64)) + 0x9E3779B97F4A7C15 & _M64)
        self.keys = [_mix(material + r + 1 & _M64) for r in range(self.ROUNDS)]

    def _encrypt(self, x: int) -> int:
        left, right = x >> self.half, x & self.mask
        for k in self.keys:
            left, right = right, left ^ (_mix(right ^ k) & self.mask)
        return (left << self.half) | right

    def __call__(self, i: int) -> int:
        x = self._encrypt(i)
        while x >= self.n:
            x = self._encrypt(x)
        return x

    def __iter__(self) -> Iterator[int]:
        return (self(i) for i in range(self.n))


class PermutedBatchSampler(DefaultBatchSampler):
    """Batches of a fresh pseudo-random order per epoch (seeded by ``seed`` and the epoch), for
    sentence-transformers' trainer (``batch_sampler=`` this class)."""

    #: extra passes over a new order when duplicate-free batches ran short of ``len(self)``
    EXTRA_PASSES = 2

    def __init__(
        self,
        dataset: Any,
        batch_size: int,
        drop_last: bool,
        valid_label_columns: list[str] | None = None,
        generator: Any = None,
        seed: int = 0,
    ) -> None:
        super().__init__(
            dataset,
            batch_size=batch_size,
            drop_last=drop_last,
            valid_label_columns=valid_label_columns,
            generator=generator,
            seed=seed,
        )
        self.dataset = dataset
        self.value_columns = [c for c in dataset.column_names if c not in set(valid_label_columns or ())]

    def __len__(self) -> int:
        n = len(self.dataset)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)

    def order(self, extra_pass: int = 0) -> Permutation:
        return Permutation(len(self.dataset), self.seed, self.epoch, extra_pass)

    def __iter__(self) -> Iterator[list[int]]:
        batch: list[int] = []
        for index in self.order():
            batch.append(index)
            if len(batch) == self.batch_size:
                yield batch
                batch = []
        if batch and not self.drop_last:
            yield batch


class NoDuplicatesPermutedBatchSampler(PermutedBatchSampler):
    """As ``PermutedBatchSampler``, but no text occurs twice in a batch (in-batch negatives must not be
    the query's own positive): a conflicting row waits for a later batch, as in
    sentence-transformers' NoDuplicatesBatchSampler; rows that never fit are dropped at the end of a
    pass, and further passes over new orders top the epoch up to ``len(self)`` batches."""

    def _values(self, index: int) -> set[str]:
        row = self.dataset[index]
        return {str(row[c]) for c in self.value_columns}

    def _pass(self, order: Permutation) -> Iterator[list[int]]:
        deferred: deque[tuple[int, set[str]]] = deque()
        stream = iter(order)
        exhausted = False
        while True:
            batch: list[int] = []
            values: set[str] = set()

            # take() fills this iteration's batch only, so it reads the loop's batch and values on purpose
            def take(index: int, row: set[str]) -> bool:
                if len(batch) < self.batch_size and values.isdisjoint(row):  # noqa: B023
                    batch.append(index)  # noqa: B023
                    values.update(row)  # noqa: B023
                    return True
                return False

            index: int | None
            for _ in range(len(deferred)):
                index, row = deferred.popleft()
                if not take(index, row):
                    deferred.append((index, row))
            while len(batch) < self.batch_size and not exhausted:
                index = next(stream, None)
                if index is None:
                    exhausted = True
                    break
                row = self._values(index)
                if not take(index, row):
                    deferred.append((index, row))
            if len(batch) == self.batch_size:
                yield batch
                continue
            if batch and not self.drop_last:
                yield batch
            return

    def __iter__(self) -> Iterator[list[int]]:
        target, done = len(self), 0
        for extra in range(1 + self.EXTRA_PASSES):
            for batch in self._pass(self.order(extra)):
                yield batch
                done += 1
                if extra and done >= target:
                    return
            if done >= target:
                return
