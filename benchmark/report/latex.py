"""``table.tex`` and ``table-notes.tex``: booktabs tables under a short caption (the title and the
symbols' key), and the full notes in a file of their own (an appendix can ``\\input`` it). Both are
pure ASCII: every symbol is a LaTeX command, so plain pdflatex compiles them. The reader's preamble
needs ``\\usepackage{booktabs}``."""

from __future__ import annotations

import re
import unicodedata

from benchmark.report.check import REFERENCE_LEGEND
from benchmark.report.markdown import header, once, sparsity_header
from benchmark.report.table import DAGGER, DDAGGER, FLAG, PARTIAL, Table, slots
from benchmark.report.text import parts, sparse
from benchmark.training.outcomes import COLLAPSED, OK

NOTES_FILE = "table-notes.tex"
_ESCAPES = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
    # OT1 text fonts set these as other glyphs (¡, ¿, an em dash)
    "<": r"\textless{}",
    ">": r"\textgreater{}",
    "|": r"\textbar{}",
}
_SYMBOLS = {
    DAGGER: r"$^\dagger$",
    DDAGGER: r"$^\ddagger$",
    FLAG: r"$^{\S}$",
    "±": r"$\pm$",
    "·": r"$\cdot$",
    "—": "---",
    "–": "--",
    "…": r"\ldots{}",
    "−": r"$-$",
    "×": r"$\times$",
    "÷": r"$\div$",
    "→": r"$\rightarrow$",
    "↔": r"$\leftrightarrow$",
    "≥": r"$\geq$",
    "≤": r"$\leq$",
    "≫": r"$\gg$",
    "≈": r"$\approx$",
    "√": r"$\surd$",
    "‖": r"$\|$",
    "⊙": r"$\odot$",
    "²": r"$^2$",
    "Σ": r"$\Sigma$",
    "Δ": r"$\Delta$",
    "α": r"$\alpha$",
    "β": r"$\beta$",
    "γ": r"$\gamma$",
    "ε": r"$\varepsilon$",
    "λ": r"$\lambda$",
    "μ": r"$\mu$",
    "ρ": r"$\rho$",
    "σ": r"$\sigma$",
    "✗": r"$\times$",
    "“": "``",
    "”": "''",
    "‘": "`",
    "’": "'",
    "é": r"\'{e}",
    "ä": r"\"{a}",
    "ö": r"\"{o}",
    "ü": r"\"{u}",
    "è": r"\`{e}",
    "à": r"\`{a}",
    "\u00a0": "~",
}


def _symbol(ch: str) -> str:
    """A character pdflatex can set: its command, else its ASCII letters (accents dropped), else its name."""
    if ch in _ESCAPES:
        return _ESCAPES[ch]
    if ch in _SYMBOLS:
        return _SYMBOLS[ch]
    if ord(ch) < 128:
        return ch
    plain = unicodedata.normalize("NFKD", ch).encode("ascii", "ignore").decode()
    return "".join(_ESCAPES.get(c, c) for c in plain) or f"[{unicodedata.name(ch, f'U+{ord(ch):04X}').lower()}]"


def escape(text: str) -> str:
    return "".join(_symbol(ch) for ch in text)


def label(table: Table) -> str:
    """``tab:scale-sweep-seeds-42-ndcg-10``: the table's title as a LaTeX label."""
    return "tab:" + (re.sub(r"[^a-z0-9]+", "-", table.title.lower()).strip("-") or "table")


def latex(table: Table, labels: dict[str, str] | None = None, legend: list[str] | None = None) -> str:
    legend = table.legend if legend is None else legend
    legend = [item for item in legend if item != REFERENCE_LEGEND]  # a paper's table shows no --check verdicts
    heads = []
    for kind, col in slots(table):
        if kind == "value":
            heads.append(header(table, col, labels))
        else:
            heads += [sparsity_header(table, col, s, labels) for s in table.sparse_names]
    caption = escape(table.title + "." + "".join(f" {item}." for item in legend))
    lines = [
        r"\begin{table}[t]",
        r"\centering",
        r"\small",
        rf"\caption{{{caption}}}",
        rf"\label{{{label(table)}}}",
        r"\begin{tabular}{l" + "r" * len(heads) + "}",
        r"\toprule",
        " & ".join(escape(h) for h in ["System", *heads]) + r" \\",
        r"\midrule",
    ]
    previous = None
    for row in table.rows:
        if previous is not None and (row[0], row[1]) != (previous[0], previous[1]):
            lines.append(r"\midrule")
        previous = row
        info = table.info[row]
        cells = [escape(info.label) + (rf" \textit{{({escape(info.mark)})}}" if info.mark else "")]
        for kind, col in slots(table):
            if kind == "sparse":
                values = table.sparse.get((row, col), {})
                cells += [sparse(s, values.get(s)) for s in table.sparse_names]
                continue
            p = parts(table.cells[(row, col.name)], table.digits)
            if p.status == COLLAPSED:
                cells.append(r"\textit{collapsed}" + (f" ({escape(p.steps)})" if p.steps else ""))
            elif p.status != OK:
                cells.append("--")
            else:
                text = rf"\textbf{{{p.value}}}" if p.best else p.value
                text += "$^*$" if p.partial else ""
                text += rf"\,{{\scriptsize$\pm${p.sd}}}" if p.sd else ""
                text += rf"\,{{\scriptsize({escape(p.delta)})}}" if p.delta else ""
                text += r"$^\dagger$" if p.significant else ""
                text += r"$^\ddagger$" if p.significant_bm25 else ""
                text += r"$^{\S}$" if p.flagged else ""
                text += rf"\,{{\scriptsize n={p.seeds}}}" if p.seeds else ""
                cells.append(text)
        lines.append(" & ".join(cells) + r" \\")
    lines += [r"\bottomrule", r"\end{tabular}", r"\end{table}"]
    return "\n".join(lines) + "\n"


def notes_latex(table: Table, notes: list[str]) -> str:
    """One table's notes in full, as a list the tables' captions point to."""
    if not notes:
        return ""
    items = "".join(rf"\item {escape(n)}".replace(escape(PARTIAL + ":"), "$^*$:") + "\n" for n in notes)
    return (
        rf"\paragraph{{Notes to Table~\ref{{{label(table)}}}.}}"
        + "\n"
        + r"{\footnotesize\begin{itemize}"
        + "\n"
        + items
        + r"\end{itemize}}"
        + "\n"
    )


def document(tables: list[Table], labels: dict[str, str] | None) -> str:
    return (
        "% generated by python -m benchmark.report; needs \\usepackage{booktabs}; the notes: "
        + NOTES_FILE
        + "\n"
        # each float is read on its own: its caption carries its whole key (a † without its key says nothing)
        + "\n".join(latex(t, labels, t.legend) for t in tables)
    )


def notes_document(tables: list[Table]) -> str:
    """``table-notes.tex``: every table's notes (each once per document, as on the page)."""
    return "% generated by python -m benchmark.report: the notes to the tables of table.tex\n" + "\n".join(
        text for t, n in zip(tables, once(tables)) if (text := notes_latex(t, n))
    )
