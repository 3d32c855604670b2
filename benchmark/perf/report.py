"""The perf tables: one ``Row`` per measured system, as Markdown and CSV."""

from __future__ import annotations

import io
from dataclasses import asdict, dataclass
from typing import Any


@dataclass
class Row:
    part: str
    system: str
    docs: int | None = None  # items: documents, queries or training samples
    wall_s: float = float("nan")
    docs_per_s: float = float("nan")
    cpu_ms_per_doc: float = float("nan")
    peak_mb: float = float("nan")
    working_mb: float = float("nan")
    ratio: float = float("nan")  # speed vs the part's reference (higher is better)
    mem_ratio: float = float("nan")  # peak RSS vs the part's reference (lower is better)
    load: str = ""  # 1-minute load average before → after
    note: str = ""


COLUMNS = [
    ("system", "system", "{}"),
    ("docs", "n", "{}"),
    ("wall_s", "wall s", "{:.1f}"),
    ("docs_per_s", "items/s", "{:.1f}"),
    ("cpu_ms_per_doc", "CPU ms/item", "{:.1f}"),
    ("peak_mb", "peak MB", "{:.0f}"),
    ("working_mb", "Δ MB", "{:.0f}"),
    ("ratio", "speed×", "{:.2f}"),
    ("mem_ratio", "mem×", "{:.2f}"),
    ("load", "load", "{}"),
]


def load_text(result: dict[str, Any]) -> str:
    before, after = result.get("load", (float("nan"), float("nan")))
    return f"{before:.1f}→{after:.1f}"


def relate(rows: list[Row], reference: Row) -> None:
    for row in rows:
        row.ratio = row.docs_per_s / reference.docs_per_s
        row.mem_ratio = row.peak_mb / reference.peak_mb


def _fmt(value: Any, spec: str) -> str:
    if value is None or value == "" or (isinstance(value, float) and value != value):
        return "–"
    return spec.format(value)


def markdown(rows: list[Row], lines: list[str], header: str, parts: tuple[str, ...]) -> str:
    out = io.StringIO()
    if header:
        out.write(header)
    for part in parts:
        part_rows = [r for r in rows if r.part == part]
        if not part_rows:
            continue
        out.write(f"## {part}\n\n| {' | '.join(h for _, h, _ in COLUMNS)} | note |\n")
        out.write("|" + "---|" * (len(COLUMNS) + 1) + "\n")
        for r in part_rows:
            cells = [_fmt(getattr(r, k), f) for k, _, f in COLUMNS]
            out.write(f"| {' | '.join(cells)} | {r.note} |\n")
        out.write("\n")
    for line in lines:
        out.write(f"- {line}\n")
    return out.getvalue()


def csv_rows(rows: list[Row]) -> tuple[list[dict[str, Any]], list[str]]:
    return [asdict(r) for r in rows], list(Row.__dataclass_fields__)
