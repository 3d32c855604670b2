"""``table.md``: one GitHub-flavoured markdown table per measure, its notes below it."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from benchmark.report.table import (
    DAGGER,
    DDAGGER,
    FLAG,
    PARTIAL,
    SPARSITY_LABELS,
    Column,
    Table,
    short_name,
    slots,
)
from benchmark.report.text import MISSING_TEXT, parts, sparse
from benchmark.training.outcomes import COLLAPSED, OK

if TYPE_CHECKING:
    from benchmark.pipeline.systems import RowKey


def header(table: Table, col: Column, labels: dict[str, str] | None) -> str:
    name = col.name if col.kind == "average" else short_name(col.name, labels)
    return name if table.measure is not None else f"{name} ({col.measure})"


def sparsity_header(table: Table, dataset: str, name: str, labels: dict[str, str] | None) -> str:
    label = SPARSITY_LABELS[name]
    return label if len(table.sparsity) == 1 else f"{short_name(dataset, labels)} {label}"


def cell_text(table: Table, row: RowKey, col: Column) -> str:
    p = parts(table.cells[(row, col.name)], table.digits)
    if p.status == COLLAPSED:
        return COLLAPSED + (f" ({p.steps})" if p.steps else "")
    if p.status != OK:
        return MISSING_TEXT
    text = f"**{p.value}**" if p.best else p.value
    text += PARTIAL if p.partial else ""
    text += f" ± {p.sd}" if p.sd else ""
    text += f" ({p.delta})" if p.delta else ""
    text += DAGGER if p.significant else ""
    text += DDAGGER if p.significant_bm25 else ""
    text += FLAG if p.flagged else ""
    text += f" n={p.seeds}" if p.seeds else ""
    reference = table.references.get((row, col.name))
    text += f" (ref {reference[0]} [{reference[1]}])" if reference else ""
    return text


def row_label(table: Table, row: RowKey) -> str:
    info = table.info[row]
    return info.label + (f" [{info.mark}]" if info.mark else "")


def markdown(table: Table, labels: dict[str, str] | None = None) -> str:
    first = table.measure if table.measure is not None else "System"
    heads = []
    for kind, col in slots(table):
        if kind == "value":
            heads.append(header(table, col, labels))
        else:
            heads += [sparsity_header(table, col, s, labels) for s in table.sparse_names]
    lines = [f"| {first} | " + " | ".join(heads) + " |", "|---|" + "---:|" * len(heads)]
    for row in table.rows:
        cells = []
        for kind, col in slots(table):
            if kind == "value":
                cells.append(cell_text(table, row, col))
            else:
                values = table.sparse.get((row, col), {})
                cells += [sparse(s, values.get(s)) for s in table.sparse_names]
        lines.append(f"| {row_label(table, row)} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def once(tables: list[Table], what: str = "notes") -> list[list[str]]:
    """Each table's notes (or legend) without those an earlier table of the page already gave: once per page."""
    seen: set[str] = set()
    out = []
    for table in tables:
        items = getattr(table, what)
        out.append([n for n in items if n not in seen])
        seen.update(items)
    return out


# what CommonMark reads as raw HTML: '<' before a tag name, '/', '!' or '?' ('<= 2' stays as it is)
_TAG_START = re.compile(r"<(?=[A-Za-z/!?])")


def escape(text: str) -> str:
    """Text from suites, recipes and records (descriptions, labels, reasons) shown as text, never as HTML."""
    return _TAG_START.sub("&lt;", text)


def legend_text(items: list[str]) -> str:
    return "Key: " + "; ".join(items) + "." if items else ""


def document(title: str, tables: list[Table], labels: dict[str, str] | None) -> str:
    """The tables, each with its key; its notes in full in a ``<details>`` block (GitHub folds it)."""
    md = [escape(f"# {title}\n")]  # the tables hold no HTML of their own: what comes from records is escaped
    for table, legend, notes in zip(tables, once(tables, "legend"), once(tables)):
        text = escape(
            f"## {table.title}\n\n" + markdown(table, labels) + (f"\n{legend_text(legend)}\n" if legend else "")
        )
        if notes:
            text += (
                f"\n<details><summary>Notes ({len(notes)})</summary>\n"
                + "".join(f"\n{escape(n)}\n" for n in notes)
                + "\n</details>\n"
            )
        md.append(text + "\n")
    return "\n".join(md)
