"""How numbers and cells read, shared by every renderer (markdown, LaTeX, HTML) so they agree."""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

from benchmark.report.table import Cell
from benchmark.training.outcomes import COLLAPSED, OK

FLOPS_DIGITS = 3
NNZ_DIGITS = 1
NORM_DIGITS = 2
MISSING_TEXT = "—"


def num(value: float, digits: int) -> str:
    return f"{value:.{digits}f}"


def signed(value: float, digits: int) -> str:
    """A Δ with its sign; one that rounds to zero reads 0.000… (no ±, which would read as an sd)."""
    text = f"{value:+.{digits}f}"
    zero = "0." + "0" * digits if digits else "0"
    return zero if text in ("+" + zero, "-" + zero) else text


def p_value(value: float | None) -> str:
    """A p-value as the page shows it: 3 significant digits, "<0.001" below."""
    if value is None:
        return ""
    return "<0.001" if value < 1e-3 else f"{value:.3g}"


MS_DIGITS = 1  # search ms per query
MIB_DIGITS = 2  # index size in MiB


def sparse(name: str, value: float | None) -> str:
    """FLOPS, non-zeros, ms per query, or (given bytes) an index's MiB, as the tables show them."""
    if value is None:
        return ""
    if name == "index_bytes":
        return num(value / 2**20, MIB_DIGITS)
    return num(value, FLOPS_DIGITS if name == "FLOPS" else MS_DIGITS if name == "search_ms" else NNZ_DIGITS)


def scale(value: float | None) -> str:
    return "" if value is None else f"{value:.4g}"


def steps(values: tuple[int, ...]) -> str:
    """ "step 1500", "steps 1000–2000"; "" when no step is known."""
    if not values:
        return ""
    if len(values) == 1:
        return f"step {values[0]}"
    return f"steps {min(values)}–{max(values)}"


@dataclass(frozen=True)
class Parts:
    """A cell's pieces as text; each renderer styles and joins them."""

    status: str
    value: str = ""
    best: bool = False
    partial: bool = False
    sd: str = ""
    delta: str = ""
    significant: bool = False
    significant_bm25: bool = False
    seeds: str = ""  # "2/3" when fewer seeds than the row has
    steps: str = ""  # a collapsed cell: "step 1500"
    flagged: bool = False  # computed from a flagged run (benchmark.report.table.FLAG)


def parts(cell: Cell, digits: int) -> Parts:
    if cell.status == COLLAPSED:
        return Parts(COLLAPSED, steps=steps(cell.steps))
    if cell.status != OK:
        return Parts(cell.status)
    return Parts(
        OK,
        num(cast(float, cell.value), digits),  # status OK: a value
        cell.best,
        cell.partial,
        num(cell.sd, digits) if cell.sd is not None else "",
        signed(cell.delta, digits) if cell.delta is not None else "",
        cell.significant,
        cell.significant_bm25,
        f"{cell.seeds}/{cell.of}" if cell.seeds < cell.of else "",
        flagged=bool(cell.flags),
    )
