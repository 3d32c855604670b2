"""``index.html``: a static, self-contained results page (inline CSS, no script, no fetch from
elsewhere; images are files of the suite folder, referenced relatively).

It shows the paper-style tables (Δ, daggers, outcome marks, FLOPS and non-zeros), the plots, the
head norms, every training run with its telemetry, a drill-down per dataset (every measure of every
system and seed), and beside each row the exact command that reproduces it, as Pyserini's 2CR pages.

Every number sits in an element with a ``data-field`` naming what it is, inside a ``td.num`` cell
whose row, column and measure are attributes, so a browser test can check each against metrics.csv.
"""

from __future__ import annotations

from html import escape
from typing import Any, cast

from benchmark.pipeline.systems import system
from benchmark.report.labels import row_id, system_label
from benchmark.report.markdown import header, once, sparsity_header
from benchmark.report.plots import AVERAGES, NORMS, SWEEP, changed_statistic, head_norms
from benchmark.report.results import ConditionResult, SuiteResults, efficiency, run_tag
from benchmark.report.table import (
    DAGGER,
    DDAGGER,
    EFFICIENCY,
    FLAG,
    PARTIAL,
    SPARSITY,
    SPARSITY_LABELS,
    Table,
    describe_outcome,
    mark_tests,
    scope,
    short_name,
    slots,
)
from benchmark.report.text import MISSING_TEXT, NORM_DIGITS, num, p_value, parts, scale, sparse
from benchmark.training.outcomes import COLLAPSED, DEGRADED, OK

CSS = (
    """
:root { color-scheme: light dark; --fg: #1d1d1f; --bg: #ffffff; --muted: #5f6368; --line: #d9dce1; --head: #f3f4f6;
        --best: #0b57d0; --bad: #b3261e; --warn: #8a5300; }
@media (prefers-color-scheme: dark) {
  :root { --fg: #e6e6e6; --bg: #16181c; --muted: #a0a6ad; --line: #3a3f46; --head: #23272e; --best: #8ab4f8;
          --bad: #f28b82; --warn: #fdd663; }
  figure img { filter: invert(.9) hue-rotate(180deg); }
}
* { box-sizing: border-box; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif; color: var(--fg);
       background: var(--bg); margin: 0 auto; padding: 1.5rem 2rem 4rem; max-width: 1400px; }
a { color: var(--best); }
h1 { font-size: 1.6rem; margin: 0 0 .3rem; } """
    """h2 { font-size: 1.25rem; margin: 2.2rem 0 .6rem; border-bottom: 1px solid var(--line); }
h3 { font-size: 1.05rem; margin: 1.4rem 0 .4rem; }
p.lead { color: var(--muted); margin: .2rem 0; } nav a { margin-right: 1rem; } """
    """code, pre { font: 12px/1.4 ui-monospace, "DejaVu Sans Mono", monospace; }
.wrap { overflow-x: auto; margin: .4rem 0; }
table { border-collapse: collapse; font-variant-numeric: tabular-nums; }
caption { text-align: left; font-weight: 600; padding: .3rem 0; }
th, td { border-bottom: 1px solid var(--line); padding: .28rem .6rem; vertical-align: top; }
thead th { background: var(--head); text-align: right; white-space: nowrap; } thead th:first-child { text-align: left; }
th.label { text-align: left; font-weight: 500; white-space: nowrap; }
th.label .tag { white-space: normal; display: inline-block; max-width: 24rem; vertical-align: top; text-align: left; }
td.num { text-align: right; white-space: nowrap; } td.outcome { text-align: left; }
.best { font-weight: 700; color: var(--best); } .sd, .delta, .n, .ref { color: var(--muted); font-size: .92em; }
.dagger { color: var(--best); } .collapsed, .mark-collapsed { color: var(--bad); font-style: italic; }
.mark { font-size: .85em; margin-left: .4rem; padding: 0 .35rem; border-radius: .6rem; border: 1px solid currentColor; }
th.label .mark { display: block; width: max-content; max-width: 22rem; white-space: normal; margin: .15rem 0 0; }
.mark-collapsed { color: var(--bad); } .mark-degraded { color: var(--warn); }
.missing { color: var(--muted); }
p.legend { color: var(--muted); font-size: .9em; margin: .3rem 0 0; max-width: 1100px; }
details.notes { color: var(--muted); font-size: .9em; margin: .2rem 0 0; max-width: 1100px; }
details.notes > summary { cursor: pointer; color: var(--best); }
ul.notes { color: var(--muted); font-size: .9em; margin: .3rem 0 0; padding-left: 1.2rem; max-width: 1100px; }
details.notes ul.notes { font-size: 1em; }
.verdict { font: 600 12px/1.4 ui-monospace, "DejaVu Sans Mono", monospace; white-space: nowrap; }
table.checks thead th { text-align: left; }
.verdict-OK { color: var(--best); } .verdict-OKish { color: var(--warn); } .verdict-FAIL { color: var(--bad); }
td.cmd details summary { cursor: pointer; color: var(--best); white-space: nowrap; }
td.cmd pre { margin: .3rem 0 0; padding: .4rem .6rem; background: var(--head); border-radius: 4px; white-space: pre; }
figure { margin: 1rem 0; } figure img { max-width: 100%; border: 1px solid var(--line); }
figcaption { color: var(--muted); font-size: .9em; }
details.dataset { margin: .5rem 0; } details.dataset > summary { cursor: pointer; font-weight: 600; }
th.label, thead th:first-child { position: sticky; left: 0; z-index: 1; background: var(--bg); }
thead th:first-child { background: var(--head); }
@media (max-width: 700px) {
  body { padding: .8rem .5rem 3rem; font-size: 13px; }
  th, td { padding: .22rem .4rem; }
  th.label { white-space: normal; min-width: 7.5rem; max-width: 9.5rem; box-shadow: 1px 0 0 var(--line); }
  th.label .mark { width: auto; max-width: none; margin-left: 0; }
  table.results td.num { white-space: normal; } .sd, .delta, .n, .ref { white-space: nowrap; }
  nav a { display: inline-block; margin: 0 .8rem .3rem 0; }
}
"""
)


def _label(label: str) -> str:
    """A row's label, its bracketed tag (method, factor, tie handling, parameters) free to wrap: the long
    tags of an untied copy would otherwise push the Reproduce column off a 1400 px screen."""
    head, bracket, tag = label.partition(" [")
    if not bracket:
        return escape(label)
    return f'{escape(head)} <span class="tag">[{escape(tag)}</span>'


def _cmd_cell(commands: list[str]) -> str:
    commands = [c for c in dict.fromkeys(commands) if c]
    if not commands:
        return '<td class="cmd missing">not recorded</td>'
    body = escape("\n".join(commands))
    return f'<td class="cmd"><details><summary>command</summary><pre><code>{body}</code></pre></details></td>'


def _mark(text: str) -> str:
    if not text:
        return ""
    kind = COLLAPSED if COLLAPSED in text else DEGRADED
    return f' <span class="mark mark-{kind}" data-field="outcomes">{escape(text)}</span>'


def _value_cell(table: Table, row: Any, col: Any) -> str:
    cell = table.cells[(row, col.name)]
    p = parts(cell, table.digits)
    attrs = f'data-column="{escape(col.name)}" data-kind="{col.kind}" data-measure="{escape(col.measure)}"'
    if p.status == COLLAPSED:
        steps = f' (<span data-field="steps">{escape(p.steps)}</span>)' if p.steps else ""
        return f'<td class="num collapsed" {attrs}><span data-field="status">collapsed</span>{steps}</td>'
    if p.status != OK:
        return f'<td class="num missing" {attrs}>{MISSING_TEXT}</td>'
    best = ' class="best"' if p.best else ""
    text = f'<span data-field="value"{best}>{p.value}</span>'
    text += f'<span data-field="partial">{PARTIAL}</span>' if p.partial else ""
    text += f' <span class="sd">± <span data-field="sd">{p.sd}</span></span>' if p.sd else ""
    text += f' <span class="delta">(<span data-field="delta">{p.delta}</span>)</span>' if p.delta else ""
    text += f'<span class="dagger" data-field="significant">{DAGGER}</span>' if p.significant else ""
    text += f'<span class="dagger" data-field="significant_bm25">{DDAGGER}</span>' if p.significant_bm25 else ""
    text += f'<span class="dagger" data-field="flags">{FLAG}</span>' if p.flagged else ""
    text += f' <span class="n">n=<span data-field="seeds">{p.seeds}</span></span>' if p.seeds else ""
    reference = table.references.get((row, col.name))
    if reference:
        text += (
            f' <span class="ref">(ref <span data-field="reference">{reference[0]}</span> '
            f'<span class="verdict-{reference[1]}" data-field="reference_verdict">[{reference[1]}]</span>)</span>'
        )
    tests = [
        f"{name}: p = {p_value(raw)}, Holm {p_value(holm)}"
        for name, raw, holm in (("vs baseline", cell.p_value, cell.p_holm), ("vs BM25", cell.p_bm25, cell.p_bm25_holm))
        if raw is not None
    ]
    title = f' title="{escape("; ".join(tests))}"' if tests else ""
    return f'<td class="num" {attrs}{title}>{text}</td>'


def _sparse_cells(table: Table, row: Any, dataset: str) -> str:
    values = table.sparse.get((row, dataset), {})
    out = []
    for name in table.sparse_names:
        text = sparse(name, values.get(name))
        inner = f'<span data-field="{name}">{text}</span>' if text else ""
        out.append(f'<td class="num sparse" data-column="{escape(dataset)}" data-sparse="{name}">{inner}</td>')
    return "".join(out)


def table_html(
    table: Table, labels: dict[str, str] | None, notes: list[str] | None = None, legend: list[str] | None = None
) -> str:
    """The table, its key under it, and its notes in full one click away."""
    notes = table.notes if notes is None else notes
    legend = table.legend if legend is None else legend
    heads = []
    for kind, col in slots(table):
        if kind == "value":
            heads.append(f'<th data-column="{escape(col.name)}">{escape(header(table, col, labels))}</th>')
        else:
            heads += [f"<th>{escape(sparsity_header(table, col, s, labels))}</th>" for s in table.sparse_names]
    first = escape(table.measure) if table.measure is not None else "System"
    klass = "results efficiency" if table.efficiency else "results"
    lines = [
        f'<div class="wrap"><table class="{klass}" data-table="{escape(table.title)}" data-digits="{table.digits}">',
        f"<caption>{escape(table.title)}</caption>",
        f"<thead><tr><th>{first}</th>{''.join(heads)}<th>Reproduce</th></tr></thead><tbody>",
    ]
    for row in table.rows:
        info = table.info[row]
        cells = [f'<th scope="row" class="label">{_label(info.label)}{_mark(info.mark)}</th>']
        for kind, col in slots(table):
            cells.append(_value_cell(table, row, col) if kind == "value" else _sparse_cells(table, row, col))
        cells.append(_cmd_cell([c.command for c in info.runs]))
        lines.append(f'<tr data-row="{escape(row_id(row))}">' + "".join(cells) + "</tr>")
    lines.append("</tbody></table></div>")
    if legend:
        lines.append('<p class="legend">Key: ' + "; ".join(escape(item) for item in legend) + ".</p>")
    if notes:
        lines.append(
            f'<details class="notes"><summary>Notes ({len(notes)}): the tests, each run&#x27;s outcome, the data'
            '</summary><ul class="notes">' + "".join(f"<li>{escape(n)}</li>" for n in notes) + "</ul></details>"
        )
    return "\n".join(lines)


def significance_html(table: Table, labels: dict[str, str] | None) -> str:
    """The p-values behind † and ‡: raw and Holm-adjusted, against the baseline and against BM25."""
    cols = [c for c in table.columns if c.kind != "average"]
    tests = (("baseline", "p_value", "p_holm", "significant"), ("BM25", "p_bm25", "p_bm25_holm", "significant_bm25"))
    rows = []
    for row in table.rows:
        for ref, raw, holm, sig in tests:
            cells = [table.cells[(row, c.name)] for c in cols]
            if all(getattr(cell, raw) is None for cell in cells):
                continue
            tds = []
            for c, cell in zip(cols, cells):
                if getattr(cell, raw) is None:
                    tds.append(f'<td class="p missing" data-column="{escape(c.name)}">{MISSING_TEXT}</td>')
                    continue
                mark = (DAGGER if sig == "significant" else DDAGGER) if getattr(cell, sig) else ""
                tds.append(
                    f'<td class="p" data-column="{escape(c.name)}" data-test="{ref}">{p_value(getattr(cell, raw))} '
                    f'<span class="n">(Holm {p_value(getattr(cell, holm))})</span>{mark}</td>'
                )
            rows.append(
                f'<tr data-row="{escape(row_id(row))}"><th scope="row" '
                f'class="label">{escape(table.info[row].label)}</th>'
                f"<td>{ref}</td>{''.join(tds)}</tr>"
            )
    if not rows:
        return ""
    heads = "".join(f"<th>{escape(header(table, c, labels))}</th>" for c in cols)
    named = "; ".join(
        f"{mark} {'against the baseline' if mark == DAGGER else 'against BM25'}: {how}"
        for mark, how in mark_tests(table).items()
    )
    return (
        f'<div class="wrap"><table class="pvalues" data-table="{escape(table.title)}"><caption>{escape(table.title)}: '
        f"p-values, raw and Holm-adjusted (α = {table.alpha:g}). {escape(named)}.</caption>"
        f"<thead><tr><th>System</th><th>against</th>{heads}</tr></thead><tbody>"
        + "".join(rows)
        + "</tbody></table></div>"
    )


def _outcome_cell(c: ConditionResult) -> str:
    """The training outcome with its step (a number the test checks) and reason."""
    if not c.trained:
        return f'<td class="num outcome">{system(c.system).untrained_cell(c)}</td>'
    step = f' at step <span data-field="step">{c.outcome_step}</span>' if c.outcome_step is not None else ""
    reason = f" ({escape(c.outcome_reason)})" if c.outcome_reason else ""
    klass = "num outcome" + (" collapsed" if c.outcome == COLLAPSED else "")
    stopped = ", stopped" if c.stopped_early else ""
    return (
        f'<td class="{klass}" title="{escape(describe_outcome(c))}"><span '
        f'data-field="outcome">{escape(c.outcome)}</span>{step}{stopped}{reason}</td>'
    )


def _seed_cell(c: ConditionResult) -> str:
    return (
        f'<td class="num"><span data-field="seed">{c.seed}</span></td>'
        if c.seed is not None
        else '<td class="num"></td>'
    )


def drilldown(results: SuiteResults, digits: int) -> str:
    """Per dataset: every measure of every system and seed, with outcome, FLOPS, non-zeros and command."""
    labels = results.settings().labels
    costs = efficiency(results)
    shown = [
        n
        for n in (*SPARSITY, *EFFICIENCY)
        if any((getattr(c, n) if n in SPARSITY else costs[c.key][n]) is not None for c in results.conditions)
    ]
    out = []
    datasets = list(dict.fromkeys(c.dataset for c in results.conditions))
    for i, dataset in enumerate(datasets):
        runs = [c for c in results.conditions if c.dataset == dataset]
        measures = results.dataset_measures.get(dataset, results.measures)
        head = "".join(f"<th>{escape(m)}</th>" for m in measures)
        rows = []
        for c in runs:
            cells = [
                f'<th scope="row" class="label">{escape(system_label(*c.row))}</th>',
                _seed_cell(c),
                _outcome_cell(c),
            ]
            for m in measures:
                value = c.metrics.get(m) if c.scored else None
                if value is not None:
                    cells.append(
                        f'<td class="num" data-measure="{escape(m)}"><span '
                        f'data-field="value">{num(value, digits)}</span></td>'
                    )
                elif c.stopped_early:
                    cells.append(f'<td class="num collapsed" data-measure="{escape(m)}">collapsed</td>')
                else:
                    cells.append(f'<td class="num missing" data-measure="{escape(m)}">{MISSING_TEXT}</td>')
            for name in shown:
                text = sparse(name, getattr(c, name) if name in SPARSITY else costs[c.key][name]) if c.scored else ""
                cells.append(
                    '<td class="num">' + (f'<span data-field="{name}">{text}</span>' if text else "") + "</td>"
                )
            queries = f'<span data-field="queries">{c.queries}</span>' if c.queries is not None else ""
            cells.append(f'<td class="num">{queries}</td>')
            cells.append(_cmd_cell([c.command]))
            seed = "" if c.seed is None else f' data-seed="{c.seed}"'
            rows.append(f'<tr data-row="{escape(row_id(c.row))}"{seed}>' + "".join(cells) + "</tr>")
        sparse_heads = "".join(f"<th>{SPARSITY_LABELS[s]}</th>" for s in shown)
        out.append(
            f'<details class="dataset" id="dataset-{i}"{" open" if len(datasets) == 1 else ""}>'
            f"<summary>{escape(short_name(dataset, labels))} <code>{escape(dataset)}</code> — {len(runs)} "
            f"run(s)</summary>"
            f'<div class="wrap"><table class="drill" data-dataset="{escape(dataset)}" data-digits="{digits}">'
            f"<thead><tr><th>System</th><th>seed</th><th>outcome</th>{head}{sparse_heads}<th>queries</th><th>Reproduce</th></tr></thead>"
            f"<tbody>{''.join(rows)}</tbody></table></div></details>"
        )
    return "\n".join(out)


def norms_html(results: SuiteResults) -> str:
    rows = head_norms(results)
    if not rows:
        return ""
    body = []
    for key, c in rows:
        moved, before, after = changed_statistic(c)
        # head_norms keeps the conditions whose backbone recorded its norms, the after with the before
        before_norm, after_norm = cast(float, c.head_norm_before), cast(float, c.head_norm_after)
        body.append(
            f'<tr data-row="{escape(row_id(key))}"><th scope="row" class="label">{escape(system_label(*key))}</th>'
            f"<td>{escape(c.rescale or c.method or c.factor or '')}</td>"
            f'<td class="num"><span data-field="scale">{scale(c.scale)}</span></td>'
            f'<td class="num"><span data-field="head_norm_before">{num(before_norm, NORM_DIGITS)}</span></td>'
            f'<td class="num"><span data-field="head_norm_after">{num(after_norm, NORM_DIGITS)}</span></td>'
            f"<td>{escape(moved)}</td>"
            f'<td class="num"><span data-field="changed_before">{num(cast(float, before), NORM_DIGITS)}</span></td>'
            f'<td class="num"><span data-field="changed_after">{num(cast(float, after), NORM_DIGITS)}</span></td></tr>'
        )
    return (
        '<div class="wrap"><table class="norms"><thead><tr><th>System</th><th>rescale</th><th>factor</th>'
        "<th>‖W‖<sub>F</sub> before</th><th>‖W‖<sub>F</sub> after</th><th>what the method moves</th><th>before</th>"
        "<th>after</th></tr></thead><tbody>" + "".join(body) + "</tbody></table></div>"
    )


def _judged_cell(judged: list[Any]) -> str:
    """The judgements of one run against other runs: those that hold, "none" when none does, "not judged"."""
    made = [j for j in judged if j.verdict is not None]
    held = list(dict.fromkeys(j.label for j in made if j.verdict))
    title = "; ".join(f"{j.label} ({j.reference}{', ' + j.dataset if j.dataset else ''}): {j.detail}" for j in judged)
    text = ", ".join(held) if held else ("none" if made else ("not judged" if judged else ""))
    return f'<td title="{escape(title)}"><span data-field="judged">{escape(text)}</span></td>'


def training_html(results: SuiteResults, judged: dict[Any, list[Any]] | None = None) -> str:
    """Every training run once (a row and seed), with its outcome, its judgements against other runs
    (``judged``: (row, seed) → judgements) and its telemetry plot."""
    judged = judged or {}
    seen: dict[str, ConditionResult] = {}
    for c in results.conditions:
        if c.trained and c.train_id and c.train_id not in seen:
            seen[c.train_id] = c
    if not seen:
        return ""
    rows, figures = [], []
    for train_id, c in seen.items():
        link = f'<a href="#{escape(train_id)}">telemetry</a>' if c.telemetry else ""
        rows.append(
            f'<tr data-row="{escape(row_id(c.row))}"' + ("" if c.seed is None else f' data-seed="{c.seed}"') + ">"
            f'<th scope="row" class="label">{escape(system_label(*c.row))}</th>{_seed_cell(c)}{_outcome_cell(c)}'
            f"{_judged_cell(judged.get((c.row, c.seed), []))}"
            f"<td><code>{escape(train_id)}</code></td><td>{link}</td></tr>"
        )
        if c.telemetry:
            figures.append(
                f'<details id="{escape(train_id)}"><summary>{escape(system_label(*c.row))}'
                + ("" if c.seed is None else f", seed {c.seed}")
                + f" — {escape(c.outcome)}</summary>"
                f'<figure><img loading="lazy" src="{escape(c.telemetry)}" alt="telemetry of {escape(train_id)}">'
                f"<figcaption>{escape(describe_outcome(c))}</figcaption></figure></details>"
            )
    return (
        '<div class="wrap"><table class="training"><thead><tr><th>System</th><th>seed</th><th>outcome</th>'
        "<th>against other runs</th><th>train stage</th><th></th></tr></thead><tbody>"
        + "".join(rows)
        + "</tbody></table></div>"
        + "".join(figures)
    )


def describe_suite(results: SuiteResults) -> str:
    """The suite's description; a subset's page says it describes the declared suite, not this run."""
    if not results.subset:
        return results.description
    text = f"The suite as declared: {results.description.rstrip('.')}."
    recipe = next((part.split("=", 1)[1] for part in results.subset.split(",") if part.startswith("recipe=")), None)
    if results.training:
        text += " This run's data and training are stated below."
    elif recipe:
        text += f" This run trained with recipe {recipe} (its own training data), not as declared."
    return text


def alt(plot: str, entries: list[str]) -> str:
    """A plot's alt text: its name and its legend's entries, so a reader without the image (or a test)
    knows what it distinguishes."""
    return plot + (": legend " + "; ".join(dict.fromkeys(entries)) if entries else "")


def exports_html(exports: list[str], results: SuiteResults | None = None) -> str:
    """The per-condition exports: TREC runs (tagged by system), listed by system, dataset and seed beside
    the file, and MTEB-style score JSONs (their folder is the system's tag)."""
    runs = [e for e in exports if e.endswith(".trec.gz")]
    mteb = [e for e in exports if e.endswith(".json")]
    labels = results.settings().labels if results is not None else {}
    by_file = {c.run_file: c for c in results.conditions if c.run_file} if results is not None else {}
    out = []
    if runs:
        rows = []
        for name in runs:
            c = by_file.get(name)
            link = f'<a href="{escape(name)}">{escape(name.rsplit("/", 1)[-1])}</a>'
            if c is None:
                rows.append(f"<tr><td></td><td></td><td></td><td></td><td>{link}</td></tr>")
                continue
            rows.append(
                f'<tr data-row="{escape(row_id(c.row))}"><th scope="row" class="label">{escape(system_label(*c.row))}'
                f"</th><td>{escape(short_name(c.dataset, labels))}</td><td>{'' if c.seed is None else c.seed}</td>"
                f"<td><code>{escape(run_tag(c))}</code></td><td>{link}</td></tr>"
            )
        out.append(
            f"<details><summary>TREC runs ({len(runs)}): one per condition, the sixth column tags the system; "
            "gzipped, for trec_eval, ir_measures, ranx or Pyserini&#x27;s fusion</summary>"
            '<div class="wrap"><table class="exports"><thead><tr><th>System</th><th>dataset</th><th>seed</th>'
            "<th>run tag</th><th>file</th></tr></thead><tbody>" + "".join(rows) + "</tbody></table></div></details>"
        )
    if mteb:
        links = "".join(f'<li><a href="{escape(n)}">{escape(n)}</a></li>' for n in mteb)
        out.append(
            f"<details><summary>MTEB-style scores ({len(mteb)}): mteb/&lt;system&gt;/&lt;Task&gt;.json, the layout "
            "of MTEB&#x27;s results repository (ir_measures names kept under scores.ir_measures)</summary>"
            f"<ul>{links}</ul></details>"
        )
    return "".join(out)


def checks_html(results: SuiteResults) -> str:
    """The suite's expected scores checked against this folder's results, as ``--check`` checks a run
    and a 2CR page shows them: the verdict, what was expected and got, and the command beside each."""
    from benchmark.report.check import _describe, band, check_results

    checks, skipped, source = check_results(results)
    if not checks:
        return ""
    labels = results.settings().labels
    counts = {v: sum(1 for c in checks if c.verdict.verdict == v) for v in ("OK", "OKish", "FAIL")}
    rows = []
    for check in checks:
        e, v = check.entry, check.verdict
        expected = "collapse" if e.collapsed else f"{e.value:.4f} ({band(e)})"
        rows.append(
            f'<tr><td class="verdict verdict-{v.verdict}" data-field="verdict">[{v.verdict}]</td>'
            f"<td>{escape(short_name(e.dataset, labels))}</td><td>{escape(_describe(e))}</td>"
            f"<td>{escape(e.measure or 'status')}</td><td>{escape(expected)}</td><td>{escape(v.got)}</td>"
            f"<td>{escape(e.source)}</td>{_cmd_cell(list(check.commands))}</tr>"
        )
    others = (
        f"; {skipped} entr{'y' if skipped == 1 else 'ies'} for other subsets, datasets or models not checked"
        if skipped
        else ""
    )
    return (
        f'<p class="lead">Expected scores: {escape(source)}, checked against these results as '
        "<code>python -m benchmark.run … --check</code> checks a run (Pyserini&#x27;s two-click reproductions): "
        f"{counts['OK']} OK, {counts['OKish']} OKish, {counts['FAIL']} FAIL{others}. [OK]: within the tolerance; "
        "[OKish]: within the looser band; [FAIL]: beyond it, missing, or an unexpected outcome.</p>"
        '<div class="wrap"><table class="checks"><thead><tr><th>verdict</th><th>dataset</th><th>system</th>'
        "<th>measure</th><th>expected</th><th>got</th><th>source</th><th>Reproduce</th></tr></thead><tbody>"
        + "".join(rows)
        + "</tbody></table></div>"
    )


def page(
    results: SuiteResults,
    tables: list[Table],
    plots: list[str],
    files: list[str],
    folder: str,
    exports: list[str] | None = None,
    legends: dict[str, list[str]] | None = None,
) -> str:
    """The page; ``legends`` (plot → its legend's entries) become each image's alt text."""
    legends = legends or {}
    settings = results.settings()
    title = results.suite + (f" @ {results.subset}" if results.subset else "")
    sections = [("tables", "Tables")]
    plot_captions = {
        SWEEP: "Score, FLOPS and non-zeros against the MLM-head rescale factor (seed means ± sd).",
        AVERAGES: "Baseline vs. rescaled per backbone, for each average column.",
        NORMS: "The head statistic each arm's rescale method moves (‖αW‖_F for projection, rms(γ) for head-norm), "
        "before and after rescaling (backbone stage records).",
    }
    body = [f"<h1>{escape(title)}</h1>"]
    if results.description:
        body.append(f'<p class="lead">{escape(describe_suite(results))}</p>')
    body.append(f'<p class="lead">{escape(scope(results))}</p>')
    body.append(
        f'<p class="lead">Rebuild this page and every table from this folder: '
        f"<code>python -m benchmark.report --suite {escape(folder)}</code>. "
        "Files: " + ", ".join(f'<a href="{escape(f)}">{escape(f)}</a>' for f in files) + ".</p>"
    )
    content = ['<h2 id="tables">Tables</h2>'] + [
        table_html(t, settings.labels, n, k) for t, n, k in zip(tables, once(tables), once(tables, "legend"))
    ]
    checks = checks_html(results)
    if checks:
        sections.append(("checks", "Checks"))
        content += ['<h2 id="checks">Regression checks</h2>', checks]
    significance = "".join(significance_html(t, settings.labels) for t in tables[:1])
    if significance:
        sections.append(("significance", "Significance"))
        content += ['<h2 id="significance">Significance</h2>', significance]
    if plots:
        sections.append(("plots", "Plots"))
        content.append('<h2 id="plots">Plots</h2>')
        content += [
            f'<figure><img src="{escape(p)}" alt="{escape(alt(p, legends.get(p, [])))}">'
            f"<figcaption>{escape(plot_captions.get(p, p))}</figcaption></figure>"
            for p in plots
        ]
    norms = norms_html(results)
    if norms:
        sections.append(("norms", "Head norms"))
        content += ['<h2 id="norms">MLM-head norms</h2>', norms]
    judged: dict[Any, list[Any]] = {}
    for key in tables[0].rows if tables else []:
        for j in tables[0].info[key].judgements:
            judged.setdefault((key, j.seed), []).append(j)
    training = training_html(results, judged)
    if training:
        sections.append(("training", "Training runs"))
        content += ['<h2 id="training">Training runs</h2>', training]
    exported = exports_html(exports or [], results)
    if exported:
        sections.append(("exports", "Exports"))
        content += ['<h2 id="exports">Exports</h2>', exported]
    sections.append(("datasets", "Per dataset"))
    content += ['<h2 id="datasets">Per dataset</h2>', drilldown(results, settings.digits)]
    nav = "<nav>" + "".join(f'<a href="#{a}">{escape(t)}</a>' for a, t in sections) + "</nav>"
    return (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{escape(title)} — results</title><style>{CSS}</style></head>\n<body>\n"
        + "\n".join(body)
        + "\n"
        + nav
        + "\n"
        + "\n".join(content)
        + "\n</body></html>\n"
    )
