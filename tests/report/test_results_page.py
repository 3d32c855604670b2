"""The results page in a real browser: headless Chromium (Debian's ``chromium``) opens
``results/<suite>/index.html`` from a file:// URL, takes a screenshot, and dumps the DOM it rendered.
Every number in a numeric cell must equal what ``metrics.csv`` gives at the table's precision, as
computed here independently (seed means, sd, group and average means, Δ, FLOPS, outcome counts); a
corrupted number must be caught. The page must fetch nothing from elsewhere."""

from __future__ import annotations

import csv
import json
import re
import shutil
import statistics
import subprocess
import tempfile
from html.parser import HTMLParser
from pathlib import Path

import pytest

from benchmark.report.build import publish
from benchmark.report.results import ConditionResult, SuiteResults
from helpers import ROOT

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(
    CHROMIUM is None,
    reason="Debian's chromium is not installed; .ci/run installs it (apt-get update && apt-get install -y chromium)",
)
WINDOW = (1280, 1800)
# A launch takes about a second here; two minutes bounds a browser that hangs on a loaded 2-core machine.
BROWSER_TIMEOUT_S = 120


def browse(page: Path, screenshot: Path) -> str:
    """The DOM Chromium rendered for ``page``, after writing its screenshot."""
    with tempfile.TemporaryDirectory() as profile:
        proc = subprocess.run(
            [
                CHROMIUM,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                f"--user-data-dir={profile}",
                "--dump-dom",
                f"--screenshot={screenshot}",
                f"--window-size={WINDOW[0]},{WINDOW[1]}",
                page.resolve().as_uri(),
            ],
            capture_output=True,
            text=True,
            timeout=BROWSER_TIMEOUT_S,
        )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "<table" in proc.stdout
    return proc.stdout


# --------------------------------------------------------------------------- layout, as the browser laid it out

#: Measures the page inside an iframe of the given width (the page itself has no script): the media it
#: matched, the page's own width, and per results table its header cells' right edges, its scroll box and
#: its label column before and after scrolling the table to its right end.
PROBE = (
    """<!doctype html><html><body style="margin:0">"""
    """<iframe id="f" src="%(src)s" style="width:%(width)dpx;height:1200px;border:0"></iframe>
<pre id="probe"></pre><script>
var frame = document.getElementById('f');
var measure = function () {
  var d = frame.contentDocument, w = frame.contentWindow, out = {tables: []};
  out.dark = w.matchMedia('(prefers-color-scheme: dark)').matches;
  out.background = w.getComputedStyle(d.body).backgroundColor;
  out.plots = Array.prototype.map.call(d.querySelectorAll('figure img'),
    function (i) { return w.getComputedStyle(i).filter; });
  out.pageWidth = d.documentElement.scrollWidth;
  d.querySelectorAll('table.results').forEach(function (t) {
    var wrap = t.parentElement, label = t.querySelector('tbody th.label'),
      cells = t.querySelectorAll('tbody tr:first-child td');
    var last = cells[cells.length - 1], info = {title: t.getAttribute('data-table'),
      heads: Array.prototype.map.call(t.querySelectorAll('thead th'),
        function (th) { return [th.textContent, th.getBoundingClientRect().right]; }),
      overflow: w.getComputedStyle(wrap).overflowX, sticky: w.getComputedStyle(label).position,
      wrapLeft: wrap.getBoundingClientRect().left, wrapRight: wrap.getBoundingClientRect().right};
    wrap.scrollLeft = wrap.scrollWidth;
    info.labelLeftScrolled = label.getBoundingClientRect().left;
    info.lastRightScrolled = last.getBoundingClientRect().right;
    wrap.scrollLeft = 0;
    out.tables.push(info);
  });
  document.getElementById('probe').textContent = JSON.stringify(out);
};
// a loaded machine's parser can yield between the iframe and this script: the frame may have loaded already
if (frame.contentDocument && frame.contentDocument.readyState === 'complete' && frame.contentDocument.body
    && frame.contentDocument.body.children.length) { measure(); } else { frame.onload = measure; }
</script></body></html>"""
)


def layout(page: Path, width: int, dark: bool = False) -> dict:
    """What Chromium laid out for ``page`` at ``width`` px (and in dark mode): see ``PROBE``."""
    with tempfile.TemporaryDirectory() as tmp:
        probe = Path(tmp) / "probe.html"
        probe.write_text(PROBE % {"src": page.resolve().as_uri(), "width": width}, encoding="utf-8")
        proc = subprocess.run(
            [
                CHROMIUM,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--allow-file-access-from-files",
                "--hide-scrollbars",
                f"--user-data-dir={tmp}/profile",
                "--dump-dom",
                f"--window-size={width + 20},1400",
                *(["--force-dark-mode"] if dark else []),
                probe.as_uri(),
            ],
            capture_output=True,
            text=True,
            timeout=BROWSER_TIMEOUT_S,
        )
    assert proc.returncode == 0, proc.stderr[-2000:]
    found = re.search(r'<pre id="probe">(.*?)</pre>', proc.stdout, re.S)
    assert found and found.group(1), "the probe did not run"
    import html

    return json.loads(html.unescape(found.group(1)))


def screenshot(page: Path, path: Path, width: int, dark: bool = False) -> None:
    with tempfile.TemporaryDirectory() as profile:
        proc = subprocess.run(
            [
                CHROMIUM,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--hide-scrollbars",
                f"--user-data-dir={profile}",
                f"--screenshot={path}",
                f"--window-size={width},{WINDOW[1]}",
                *(["--force-dark-mode"] if dark else []),
                page.resolve().as_uri(),
            ],
            capture_output=True,
            text=True,
            timeout=BROWSER_TIMEOUT_S,
        )
    assert proc.returncode == 0, proc.stderr[-2000:]


def luminance(path: Path) -> float:
    """Mean luminance (0–255) of a screenshot: a light page is mostly white, a dark one mostly dark."""
    from PIL import Image, ImageStat

    with Image.open(path) as img:
        return ImageStat.Stat(img.convert("L")).mean[0]


def check_layout(page: Path, tmp: Path) -> list[str]:
    """At 1400 px the headline table shows every column, Reproduce included, without scrolling; at 400 px
    nothing widens the page, each table scrolls in its own box with its label column sticky, and scrolled
    to its end its last column is on screen; dark mode follows prefers-color-scheme."""
    problems = []
    wide = layout(page, 1400)
    headline = wide["tables"][0]
    hidden = [name for name, right in headline["heads"] if right > 1400]
    if hidden:
        problems.append(f"1400 px: {headline['title']}: columns {hidden} are off screen")
    if wide["dark"] or wide["background"] != "rgb(255, 255, 255)":
        problems.append(f"light mode: background {wide['background']}, dark {wide['dark']}")
    narrow = layout(page, 400)
    if narrow["pageWidth"] > 400:
        problems.append(f"400 px: the page is {narrow['pageWidth']} px wide (something does not scroll in its box)")
    for t in narrow["tables"]:
        if t["overflow"] not in ("auto", "scroll") or t["sticky"] != "sticky":
            problems.append(f"400 px: {t['title']}: overflow {t['overflow']}, label column {t['sticky']}")
        if abs(t["labelLeftScrolled"] - t["wrapLeft"]) > 1:  # 1 px: subpixel layout
            problems.append(f"400 px: {t['title']}: scrolled right, the label column moved to {t['labelLeftScrolled']}")
        if t["lastRightScrolled"] > t["wrapRight"] + 1:
            problems.append(
                f"400 px: {t['title']}: scrolled right, the last column ends at {t['lastRightScrolled']} "
                f"past the box's {t['wrapRight']}"
            )
    dark = layout(page, 1400, dark=True)
    if not dark["dark"] or dark["background"] == "rgb(255, 255, 255)":
        problems.append(f"dark mode: background {dark['background']}, dark {dark['dark']}")
    # the plots follow: drawn on white, they are inverted (hues turned back) in dark mode, as they are in light
    if any("invert" not in f for f in dark["plots"]) or any(f != "none" for f in wide["plots"]):
        problems.append(f"plots: filters {dark['plots']} in dark mode, {wide['plots']} in light mode")
    shots = {(w, d): tmp / f"page-{w}-{'dark' if d else 'light'}.png" for w in (1400, 400) for d in (False, True)}
    for (w, d), path in shots.items():
        screenshot(page, path, w, d)
    # thresholds: a white page with tables and plots measures ~235 here, its dark version ~35
    for (w, d), path in shots.items():
        shade = luminance(path)
        if (d and shade > 100) or (not d and shade < 160):
            problems.append(f"{w} px {'dark' if d else 'light'} screenshot: mean luminance {shade:.0f}")
    return problems


def legends(dom: str) -> dict[str, str]:
    """Each plot's alt text (its legend's entries), by file name."""
    return {n.attrs["src"]: n.attrs.get("alt", "") for n in Tree(dom).root.all("img") if "/" not in n.attrs["src"]}


# --------------------------------------------------------------------------- a DOM tree from the dump

VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}


class Node:
    def __init__(self, tag: str, attrs: dict[str, str], parent: Node | None) -> None:
        self.tag, self.attrs, self.parent, self.children = tag, attrs, parent, []  # type: ignore[var-annotated]

    def text(self) -> str:
        return "".join(c if isinstance(c, str) else c.text() for c in self.children)

    def iter(self):
        yield self
        for c in self.children:
            if isinstance(c, Node):
                yield from c.iter()

    def all(self, tag: str | None = None, cls: str | None = None, attr: str | None = None) -> list[Node]:
        return [
            n
            for n in self.iter()
            if n is not self
            and (tag is None or n.tag == tag)
            and (cls is None or cls in n.attrs.get("class", "").split())
            and (attr is None or attr in n.attrs)
        ]

    def field(self, name: str) -> Node | None:
        found = [n for n in self.all(attr="data-field") if n.attrs["data-field"] == name]
        assert len(found) <= 1, f"{name} twice in one cell"
        return found[0] if found else None

    def text_outside_fields(self) -> str:
        return "".join(
            c if isinstance(c, str) else ("" if "data-field" in c.attrs else c.text_outside_fields())
            for c in self.children
        )


class Tree(HTMLParser):
    def __init__(self, html: str) -> None:
        super().__init__(convert_charrefs=True)
        self.root = self.current = Node("#root", {}, None)
        self.feed(html)

    def handle_starttag(self, tag, attrs):
        node = Node(tag, {k: v or "" for k, v in attrs}, self.current)
        self.current.children.append(node)
        if tag not in VOID:
            self.current = node

    def handle_endtag(self, tag):
        node = self.current
        while node is not None and node.tag != tag:
            node = node.parent
        if node is not None and node.parent is not None:
            self.current = node.parent

    def handle_data(self, data):
        self.current.children.append(data)


# --------------------------------------------------------------------------- what metrics.csv says

FLOPS_DIGITS, NNZ_DIGITS, NORM_DIGITS, MS_DIGITS, MIB_DIGITS = 3, 1, 2, 1, 2  # the page's precision for these
SPARSE_DIGITS = {
    "FLOPS": FLOPS_DIGITS,
    "query_nnz": NNZ_DIGITS,
    "doc_nnz": NNZ_DIGITS,
    "search_ms": MS_DIGITS,
    "index_bytes": MIB_DIGITS,
}


def shown_as(name: str, value: float) -> float:
    """metrics.csv's number in the page's unit: an index's bytes show as MiB."""
    return value / 2**20 if name == "index_bytes" else value


def rid(r: dict[str, str]) -> str:
    return f"{r['system']}|{r['backbone']}|{r['variant']}|{'trained' if r['trained'] == 'True' else 'untrained'}"


class Oracle:
    """Each shown number recomputed from metrics.csv (and the suite's structure from results.json)."""

    def __init__(self, folder: Path) -> None:
        with open(folder / "metrics.csv", encoding="utf-8") as fh:
            self.rows = list(csv.DictReader(fh))
        record = json.loads((folder / "results.json").read_text(encoding="utf-8"))
        self.groups = record["groups"]
        self.averages = {a["name"]: a["datasets"] for a in record["table"].get("averages", [])}
        self.judged: list[dict[str, str]] = []  # judgements against other runs, as judgements.csv records them
        if (folder / "judgements.csv").is_file():
            with open(folder / "judgements.csv", encoding="utf-8") as fh:
                self.judged = list(csv.DictReader(fh))

    def runs(self, row: str, datasets: list[str] | None = None) -> list[dict[str, str]]:
        return [r for r in self.rows if rid(r) == row and (datasets is None or r["dataset"] in datasets)]

    def seeds(self, row: str) -> list[str]:
        return list(dict.fromkeys(r["seed"] for r in self.runs(row)))

    def seed_values(self, row: str, datasets: list[str], measure: str) -> list[float]:
        out = []
        for seed in self.seeds(row):
            parts = [
                [
                    float(r["value"])
                    for r in self.runs(row, [d])
                    if r["seed"] == seed and r["measure"] == measure and r["value"]
                ]
                for d in datasets
            ]
            if all(parts):
                out.append(statistics.fmean(p[0] for p in parts))
        return out

    def members(self, column: str) -> list[str]:
        return self.groups.get(column) or [column]

    def baseline(self, row: str) -> str | None:
        system, backbone, variant, trained = row.split("|")
        if system == "bm25" or "baseline" in [v.strip() for v in variant.split("=")]:
            return None
        for other in dict.fromkeys(rid(r) for r in self.rows):
            s, b, v, t = other.split("|")
            if (s, b, t) == (system, backbone, trained) and "baseline" in [x.strip() for x in v.split("=")]:
                return other
        return None

    def outcomes(self, row: str) -> str:
        worst: dict[str, str] = {}
        order = ["ok", "degraded", "collapsed"]
        for r in self.runs(row):
            if r["trained"] == "True" and r["outcome"] in order:
                seen = worst.get(r["seed"], "ok")
                worst[r["seed"]] = max(seen, r["outcome"], key=order.index)
        n = len(worst)
        parts = []
        for outcome in ("collapsed", "degraded"):
            k = sum(1 for o in worst.values() if o == outcome)
            if k:
                parts.append(outcome if n == 1 else f"{k}/{n} {outcome}")
        system, backbone, variant, trained = row.split("|")
        label = f"SPLADE {backbone} {variant}" + ("" if trained == "trained" else " (untrained)")
        mine = [j for j in self.judged if j["row"] == label]
        for name in dict.fromkeys(
            f"{j['kind']} vs {j['against']}" for j in mine
        ):  # a run judged on any dataset counts once
            hit = {j["seed"] for j in mine if f"{j['kind']} vs {j['against']}" == name and j["verdict"] == "True"}
            if hit and name.startswith("lost "):  # the largest loss judged (its statistic: loss / baseline score)
                worst = max(float(j["statistic"]) for j in mine if j["kind"] == "lost" and j["verdict"] == "True")
                parts.append(f"lost {100 * worst:.0f} % vs {name.split(' vs ', 1)[1]}")
            elif hit:
                parts.append(name if n == 1 else f"{len(hit)}/{n} {name}")
        return ", ".join(parts)

    def sparse(self, row: str, dataset: str, name: str) -> float | None:
        scored = {(r["seed"]): r for r in self.runs(row, [dataset]) if r["value"] and r[name]}
        return statistics.fmean(shown_as(name, float(r[name])) for r in scored.values()) if scored else None

    def stopped_steps(self, row: str, datasets: list[str]) -> list[int]:
        return sorted(
            {
                int(r["outcome_step"])
                for r in self.runs(row, datasets)
                if r["stopped_early"] == "True" and r["outcome_step"]
            }
        )


def close(shown: str, expected: float, digits: int, where: str, problems: list[str]) -> None:
    """``shown`` is ``expected`` at ``digits`` decimals: the same number of decimals, and within half a unit
    of the last one (what rounding allows) plus 1e-9 for the summation order of a mean (float64 sums of
    values ≤ 1e4: error ~1e-12)."""
    text = shown.replace("±", "+").replace("−", "-")
    if not re.fullmatch(r"[+-]?\d+" + (rf"\.\d{{{digits}}}" if digits else ""), text):
        problems.append(f"{where}: {shown!r} is not a number with {digits} decimals")
    elif abs(float(text) - expected) > 0.5 * 10**-digits + 1e-9:
        problems.append(f"{where}: shows {shown}, metrics.csv gives {expected:.{digits + 2}f}")


def check_page(dom: str, folder: Path) -> tuple[list[str], int]:
    """(every mismatch between the page and metrics.csv, how many numbers were checked)."""
    oracle = Oracle(folder)
    root = Tree(dom).root
    problems: list[str] = []
    checked = 0

    def expect(node: Node | None, expected: float | None, digits: int, where: str) -> None:
        nonlocal checked
        if expected is None:
            if node is not None:
                problems.append(f"{where}: shows {node.text()!r}, metrics.csv has no such value")
            return
        if node is None:
            problems.append(f"{where}: missing, metrics.csv gives {expected}")
            return
        close(node.text(), expected, digits, where, problems)
        checked += 1

    def expect_text(node: Node | None, expected: str, where: str) -> None:
        nonlocal checked
        shown = node.text() if node is not None else ""
        if shown != expected:
            problems.append(f"{where}: shows {shown!r}, metrics.csv gives {expected!r}")
        elif expected:
            checked += 1

    def no_stray_digits(cell: Node, where: str) -> None:
        stray = re.findall(r"\d+", cell.text_outside_fields())
        if stray:
            problems.append(f"{where}: number(s) {stray} outside any checked field")

    tables = root.all("table", cls="results")
    assert tables, "no results table on the page"
    rows_expected = set(dict.fromkeys(rid(r) for r in oracle.rows))
    for table in tables:
        digits = int(table.attrs["data-digits"])
        trs = table.all("tr", attr="data-row")
        if {tr.attrs["data-row"] for tr in trs} != rows_expected:
            problems.append(
                f"{table.attrs['data-table']}: rows {sorted(tr.attrs['data-row'] for tr in trs)} != metrics.csv's"
            )
        kinds = {
            td.attrs["data-column"]: (td.attrs["data-kind"], td.attrs["data-measure"])
            for td in trs[0].all("td", cls="num")
            if "data-kind" in td.attrs
        }

        def cell(row: str, column: str) -> tuple[float | None, bool]:
            """(value, partial): a seed mean (a group's per seed over members), or an average over columns."""
            kind, measure = kinds[column]  # noqa: B023  (called within this iteration)
            if kind != "average":
                xs = oracle.seed_values(row, oracle.members(column), measure)
                return (statistics.fmean(xs) if xs else None), False
            ok = [v for v, _ in (cell(row, m) for m in oracle.averages[column]) if v is not None]
            value = statistics.fmean(ok) if ok else None
            return value, value is not None and len(ok) < len(oracle.averages[column])

        for tr in trs:
            row = tr.attrs["data-row"]
            where_row = f"{table.attrs['data-table']} / {row}"
            expect_text(tr.all("th")[0].field("outcomes"), oracle.outcomes(row), f"{where_row}: outcome mark")
            base = oracle.baseline(row)
            for td in tr.all("td", cls="num"):
                column = td.attrs["data-column"]
                where = f"{where_row} / {column}"
                no_stray_digits(td, where)
                if "data-sparse" in td.attrs:
                    name = td.attrs["data-sparse"]
                    expect(td.field(name), oracle.sparse(row, column, name), SPARSE_DIGITS[name], f"{where} {name}")
                    continue
                kind, measure = kinds[column]
                value, partial = cell(row, column)
                base_value, base_partial = cell(base, column) if base else (None, False)
                delta = (
                    value - base_value
                    if value is not None and base_value is not None and not partial and not base_partial
                    else None
                )
                sd, seeds, steps = None, "", []
                if kind != "average":
                    xs = oracle.seed_values(row, oracle.members(column), measure)
                    sd = statistics.stdev(xs) if len(xs) >= 2 else None
                    n_seeds = len(oracle.seeds(row))
                    seeds = f"{len(xs)}/{n_seeds}" if xs and len(xs) < n_seeds else ""
                    steps = oracle.stopped_steps(row, oracle.members(column)) if not xs else []
                expect(td.field("value"), value, digits, f"{where} value")
                expect(td.field("sd"), sd, digits, f"{where} sd")
                expect(td.field("delta"), delta, digits, f"{where} Δ")
                expect_text(td.field("seeds"), seeds, f"{where} seeds")
                if (td.field("partial") is not None) != partial:
                    problems.append(
                        f"{where}: partial-average mark is {td.field('partial') is not None}, expected {partial}"
                    )
                if value is None and td.field("status") is None and "—" not in td.text():
                    problems.append(f"{where}: no value and neither 'collapsed' nor '—'")
                shown_steps = steps and (f"step {steps[0]}" if len(steps) == 1 else f"steps {steps[0]}–{steps[-1]}")
                expect_text(td.field("steps"), shown_steps or "", f"{where} steps")

    for table in root.all("table", cls="drill"):
        dataset = table.attrs["data-dataset"]
        digits = int(table.attrs["data-digits"])
        for tr in table.all("tr", attr="data-row"):
            row, seed = tr.attrs["data-row"], tr.attrs.get("data-seed", "")
            runs = [r for r in oracle.runs(row, [dataset]) if r["seed"] == seed]
            where = f"drill-down {dataset} / {row} / seed {seed or '-'}"
            if not runs:
                problems.append(f"{where}: not in metrics.csv")
                continue
            first = runs[0]
            for td in tr.all("td", cls="num"):
                no_stray_digits(td, where)
                if "data-measure" in td.attrs:
                    match = [r for r in runs if r["measure"] == td.attrs["data-measure"]]
                    expect(
                        td.field("value"),
                        float(match[0]["value"]) if match and match[0]["value"] else None,
                        digits,
                        f"{where} {td.attrs['data-measure']}",
                    )
            cells = tr
            expect_text(cells.field("seed"), seed, f"{where} seed")
            expect_text(
                cells.field("step"), first["outcome_step"] if first["trained"] == "True" else "", f"{where} step"
            )
            for name in SPARSE_DIGITS:
                value = shown_as(name, float(first[name])) if first.get(name) and first["value"] else None
                expect(cells.field(name), value, SPARSE_DIGITS[name], f"{where} {name}")
            expect_text(cells.field("queries"), first["queries"], f"{where} queries")

    for table in root.all("table", cls="norms"):
        for tr in table.all("tr", attr="data-row"):
            first = oracle.runs(tr.attrs["data-row"])[0]
            where = f"head norms / {tr.attrs['data-row']}"
            for td in tr.all("td", cls="num"):
                no_stray_digits(td, where)
            expect_text(tr.field("scale"), f"{float(first['scale']):.4g}" if first["scale"] else "", f"{where} factor")
            for name in ("head_norm_before", "head_norm_after"):
                expect(tr.field(name), float(first[name]) if first[name] else None, NORM_DIGITS, f"{where} {name}")

    for table in root.all("table", cls="training"):
        for tr in table.all("tr", attr="data-row"):
            runs = [r for r in oracle.runs(tr.attrs["data-row"]) if r["seed"] == tr.attrs.get("data-seed", "")]
            where = f"training / {tr.attrs['data-row']} / seed {tr.attrs.get('data-seed')}"
            for td in tr.all("td", cls="num"):
                no_stray_digits(td, where)
            expect_text(tr.field("seed"), runs[0]["seed"] if runs else "?", f"{where} seed")
            expect_text(tr.field("step"), runs[0]["outcome_step"] if runs else "?", f"{where} step")
    return problems, checked


def external_references(dom: str, folder: Path) -> list[str]:
    """Every src/href must stay inside the suite folder: a data: URI, an anchor, or a relative file that exists."""
    bad = []
    for node in Tree(dom).root.iter():
        for attr in ("src", "href"):
            url = node.attrs.get(attr)
            if url is None or url.startswith(("#", "data:")):
                continue
            if (
                re.match(r"^[a-z][a-z0-9+.-]*:|^//|^/", url, re.I)
                or not (folder / url).resolve().is_relative_to(folder.resolve())
                or not (folder / url).is_file()
            ):
                bad.append(f"{node.tag} {attr}={url}")
    return bad


def screenshot_ok(path: Path) -> None:
    from PIL import Image

    with Image.open(path) as img:
        assert img.size == WINDOW
        colours = img.convert("RGB").getcolors(maxcolors=1 << 20)
    assert colours is not None and len(colours) > 50  # text, tables and plots: a blank or error page has a handful


# --------------------------------------------------------------------------- pages to open

D1, D2, F1, F2 = "beir/alpha/test", "beir/beta/test", "beir/cqa/one", "beir/cqa/two"
MEASURES = ["nDCG@10", "R@100"]


def rich_results() -> SuiteResults:
    """Seeds, every outcome, a group, an average, FLOPS, head norms and a telemetry plot."""
    pq: dict = {}
    conds: list[ConditionResult] = []

    def add(row: tuple[str, str, str], dataset: str, seed, base: float, **extra) -> None:
        system, backbone, variant = row
        key = f"{system}-{backbone}-{variant}-{dataset}-{seed}"
        c = ConditionResult(
            key=key,
            dataset=dataset,
            system=system,
            backbone=backbone,
            variant=variant,
            search_id="search-" + "".join(ch for ch in key if ch.isalnum()),
            trained=system == "splade",
            seed=seed,
            factor=variant.lstrip("x") if variant.startswith("x") else "1",
            command=f"python -m benchmark.run --suite rich --backbones {backbone} --variants {variant} --seeds {seed}",
            **extra,
        )
        if not c.stopped_early:
            scores = [round(base + 0.013 * i * (1 + (seed or 0) % 3), 6) for i in range(5)]
            c.metrics = {"nDCG@10": statistics.fmean(scores), "R@100": min(1.0, statistics.fmean(scores) + 0.2)}
            c.queries = 5
            pq[key] = {"nDCG@10": {f"q{i}": v for i, v in enumerate(scores)}}
        conds.append(c)

    datasets = [D1, D2, F1, F2]
    for i, d in enumerate(datasets):
        add(("bm25", "", ""), d, None, 0.41 + 0.01 * i)
        for seed in (1, 2, 3):
            sparse = {"FLOPS": 1.2345 + seed, "query_nnz": 20.25 + seed, "doc_nnz": 80.5 + seed}
            norms = {"scale": 1.0, "head_norm_before": 123.456, "head_norm_after": 123.456}
            add(("splade", "bb", "baseline"), d, seed, 0.40 + 0.02 * seed + 0.01 * i, **sparse, **norms)
            outcome = {
                2: {"outcome": "degraded", "outcome_reason": "dev_rr", "outcome_step": 500},
                3: {"outcome": "collapsed", "outcome_reason": "dense", "outcome_step": 700},
            }.get(seed, {})
            add(
                ("splade", "bb", "x0.25"),
                d,
                seed,
                0.45 + 0.015 * seed + 0.01 * i,
                **sparse,
                scale=0.25,
                head_norm_before=123.456,
                head_norm_after=30.864,
                telemetry="telemetry/t.png",
                train_id=f"train-{seed}",
                **outcome,
            )
            stopped = {
                "outcome": "collapsed",
                "outcome_reason": "non_finite",
                "outcome_step": 40 * seed,
                "stopped_early": True,
            }
            add(("splade", "bb", "x16"), d, seed, 0.2, **(stopped if seed != 1 else {}), **sparse)
    return SuiteResults(
        suite="rich",
        description="hand-made: every kind of number the page shows",
        measures=MEASURES,
        conditions=conds,
        columns=[D1, D2, "cqa"],
        groups={"cqa": [F1, F2]},
        dataset_measures={d: MEASURES for d in datasets},
        table={"measure": "nDCG@10", "averages": [{"name": "avg", "datasets": [D1, D2, "cqa"]}]},
        seeds=[1, 2, 3],
        perquery=pq,
    )


@pytest.fixture(scope="module")
def rich_page(tmp_path_factory):
    folder = tmp_path_factory.mktemp("page") / "rich"
    results = rich_results()
    telemetry = folder.parent / "t.png"
    shutil.copy(ROOT / "results" / "scale-sweep" / "sweep.png", telemetry)  # any PNG stands in for a telemetry plot
    results.files = {"telemetry/t.png": telemetry}
    publish(results, folder, extra=stage_log(results))
    dom = browse(folder / "index.html", folder.parent / "rich.png")
    return folder, dom


def stage_log(results: SuiteResults):
    """A stages.csv for ``results``: each condition's index, then its search (the run's order), with
    seconds and bytes that differ from one to the next (the page's ms/q and index MiB come from them)."""

    def write(staging: Path) -> None:
        lines = ["stage,id,seconds,bytes,this_run"]
        for i, c in enumerate(results.conditions):
            lines += [
                f"index,index-{c.key},{1 + i % 7:.2f},{(3 + i) * 123457},computed",
                f"search,{c.search_id},{0.05 + 0.013 * i:.2f},{1000 + i},cached",
            ]
        (staging / "stages.csv").write_text("\n".join(lines) + "\n")

    return write


def test_page_numbers_equal_metrics_csv(rich_page):
    folder, dom = rich_page
    screenshot_ok(folder.parent / "rich.png")
    problems, checked = check_page(dom, folder)
    assert problems == []
    # 3 tables × 4 rows × 4 columns, FLOPS/nnz beside no table (3 data columns), 4 drill-downs × 13 runs, norms,
    # training
    assert checked > 300
    assert external_references(dom, folder) == []
    assert "<script" not in (folder / "index.html").read_text()


def test_a_wrong_number_is_caught(rich_page, tmp_path):
    folder, dom = rich_page
    # one shown value off by one unit in its last digit
    first = re.search(r'data-field="value"[^>]*>(\d\.\d{4})<', dom)
    wrong = f"{float(first.group(1)) + 0.0001:.4f}"
    corrupted = dom[: first.start(1)] + wrong + dom[first.end(1) :]
    problems, _ = check_page(corrupted, folder)
    assert len(problems) == 1 and f"shows {wrong}" in problems[0]
    # a number outside any checked field
    stray = re.sub(r'n=<span data-field="seeds">(\d+/\d+)</span>', r"n=\1", dom, count=1)
    assert stray != dom
    assert any("outside any checked field" in p for p in check_page(stray, folder)[0])
    # metrics.csv changed under an unchanged page
    copy = tmp_path / "rich"
    shutil.copytree(folder, copy)
    with open(copy / "metrics.csv", newline="") as fh:
        reader = csv.DictReader(fh)
        rows, columns = list(reader), reader.fieldnames
    rows[0]["value"] = repr(float(rows[0]["value"]) + 0.01)
    with open(copy / "metrics.csv", "w", newline="") as fh:
        writer = csv.DictWriter(fh, columns)
        writer.writeheader()
        writer.writerows(rows)
    assert any("metrics.csv gives" in p for p in check_page(dom, copy)[0])
    # an image from elsewhere
    assert external_references(
        dom.replace('src="sweep.png"', 'src="https://example.org/x.png"', 1).replace(
            'src="telemetry/t.png"', 'src="https://example.org/x.png"', 1
        ),
        folder,
    )


def test_page_layout_dark_mode_and_narrow_screen(rich_page, tmp_path):
    folder, _ = rich_page
    assert check_layout(folder / "index.html", tmp_path) == []


@pytest.mark.parametrize("suite", ["smoke", "scale-sweep", "paper-mini"])
def test_committed_pages(suite, tmp_path):
    """The committed results pages, as committed: every number equals their metrics.csv; their layout
    holds at 1400 and 400 px and in dark mode; each plot's legend names what it distinguishes."""
    folder = ROOT / "results" / suite
    if not (folder / "index.html").is_file():
        pytest.skip(f"results/{suite} has no page committed")
    dom = browse(folder / "index.html", tmp_path / f"{suite}.png")
    screenshot_ok(tmp_path / f"{suite}.png")
    problems, checked = check_page(dom, folder)
    assert problems == [] and checked > 0
    assert external_references(dom, folder) == []
    assert check_layout(folder / "index.html", tmp_path) == []
    shown = legends(dom)
    variants = list(
        dict.fromkeys(r["variant"] for r in Oracle(folder).rows if r["system"] == "splade" and r["trained"] == "True")
    )
    if "averages.png" in shown:  # one entry per variant (whichever backbone has its first bar), BM25, the marks
        entries = shown["averages.png"].removeprefix("averages.png: legend ").split("; ")
        assert entries[: len(variants) + 1] == [*variants, "BM25"], entries
        assert set(entries[len(variants) + 1 :]) <= {
            "collapsed (stopped, no score)",
            "* leaves out columns without a score",
            "collapsed in training (scored: trained to its end)",
            "degraded, or judged against another run (the table's mark)",
        }
    if "sweep.png" in shown:  # the main line and each other reading of "rescale" have an entry of their own
        entries = shown["sweep.png"].removeprefix("sweep.png: legend ").split("; ")
        assert any(re.fullmatch(r"bert-tiny x<f>(: .+)?", e) for e in entries), entries
        arms = {m.group(1) for v in variants if (m := re.fullmatch(r"x[0-9.]+-(.+)", v))}
        for arm in arms:
            assert any(re.fullmatch(rf"bert-tiny x<f>-{re.escape(arm)}: .+", e) for e in entries), (
                arm,
                entries,
            )


def test_a_broken_layout_is_caught(rich_page, tmp_path):
    """The layout checks fail on a page without the dark palette, the sticky label column and the box
    each table scrolls in."""
    folder, _ = rich_page
    copy = tmp_path / "rich"
    shutil.copytree(folder, copy)
    text = (copy / "index.html").read_text(encoding="utf-8")
    broken = (
        text.replace("prefers-color-scheme: dark", "prefers-color-scheme: no-such-scheme")
        .replace("position: sticky", "position: static")
        .replace(".wrap { overflow-x: auto;", ".wrap {")
        .replace('<td class="cmd"><details>', '<td class="cmd" style="min-width:1500px"><details>', 1)
    )
    assert broken != text
    (copy / "index.html").write_text(broken, encoding="utf-8")
    problems = check_layout(copy / "index.html", tmp_path)
    assert any(p.startswith("1400 px:") and "Reproduce" in p for p in problems)
    assert any("400 px: the page is" in p for p in problems)
    assert any("label column static" in p for p in problems)
    assert any(p.startswith("dark mode:") for p in problems)
    assert any(p.startswith("plots: filters ") for p in problems)  # white plots on the dark page
