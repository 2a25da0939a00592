"""Is every text of a page's figures legible? ``python -m tools.legibility --page SLUG --lang fr --width 390``.

Opens a page of the app in headless Chromium (Playwright, Debian's ``chromium``), waits until it settles, and
collects the box of every text of each Plotly chart (the SVG ``text`` elements of ``.js-plotly-plot``: titles,
axis titles, tick labels, annotations, legend entries, cell texts, in-figure sliders) and of each diagram (the
SVG ``ui.diagram`` draws as an image: laid over the image at its drawn size to be measured). It reports:

- ``overlap``: two distinct texts whose boxes intersect by more than :data:`OVERLAP_PX` (rotated texts are
  compared as rotated rectangles, so slanted tick labels side by side are not counted; the same text twice is
  not a fault);
- ``outside``: a text outside its figure, or cut by the viewport's sides;
- ``small``: a text drawn smaller than :data:`MIN_FONT_PX` CSS px (its font size times the SVG's scale);
- ``cut``: a badge, heading, table cell, metric, widget label or tab whose content is cut (``scrollWidth >
  clientWidth`` where it cannot scroll, or an ellipsis), a heading or badge that breaks inside a word, or a
  table wider than its place that does not scroll inside itself;
- ``broken``: a word broken inside a table cell: a run of characters without a space (a word, a number such as
  ``1,549E-30``, a name such as ``split_folded``) drawn on two lines, except at a hyphen between two letters
  (``Positions-|Embedding``, where German and English break compounds);
- ``hidden``: at :data:`WIDE_MIN_PX` and wider, a table (``st.table``) or data grid (``st.dataframe``) whose last
  columns hide behind a sideways scroll.

``visit()`` is what ``tests/browser/test_legibility.py`` calls with one shared server and browser: one load of a page
serves both widths (measured at 1400 px, then at 390 px after the viewport narrows). The command starts
its own server (``serve.py``) unless ``--url`` names a running one. Prints one line per fault with the page,
language, width, figure and texts; exits 1 when there is any.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ui.i18n import LANGUAGES

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
LAUNCH_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
               "--disable-sync", "--no-first-run", "--disable-quic"]
#: Smallest font a reader should have to read, in CSS px.
MIN_FONT_PX = 9.0
#: Two boxes that intersect by at most this much (px, on every axis) touch but do not overlap.
OVERLAP_PX = 1.0
#: A text may stand this far (px) past its figure's edge (anti-aliasing, rounding of the layout).
EDGE_PX = 1.0
#: From this viewport width (px) on, a desktop: no table or data grid may hide columns behind a sideways scroll.
WIDE_MIN_PX = 1000
#: Tallest viewport used to show a page whole (px): Streamlit scrolls inside its own container.
MAX_HEIGHT = 40_000


@dataclass(frozen=True)
class Finding:
    """One axe-core violation: its rule, impact ("minor" … "critical"), the elements it names, and whether
    every one of them lies in Streamlit's own page navigation (``in_navigation``), markup the app does not
    write."""

    rule: str
    impact: str
    help: str
    targets: tuple[str, ...]
    in_navigation: bool = False

    def __str__(self) -> str:
        where = " [Streamlit's navigation]" if self.in_navigation else ""
        return (f"axe {self.impact} {self.rule}{where}: {self.help} "
                f"({len(self.targets)}: {', '.join(self.targets[:3])})")


@dataclass(frozen=True)
class Report:
    """What one page showed: its faults, how many figures and texts were measured, and axe-core's findings
    (empty unless asked for)."""

    faults: tuple[Fault, ...]
    figures: int
    texts: int
    findings: tuple[Finding, ...] = ()


@dataclass(frozen=True)
class Fault:
    """One legibility fault: where (page, language, width, figure), what kind, and the texts involved."""

    page: str
    lang: str
    width: int
    figure: str
    kind: str
    texts: tuple[str, ...]
    detail: str = ""

    def __str__(self) -> str:
        texts = " / ".join(repr(t) for t in self.texts)
        extra = f" ({self.detail})" if self.detail else ""
        return f"{self.page} [{self.lang}, {self.width}px] {self.figure}: {self.kind} {texts}{extra}"


#: Runs in the page: returns every fault as {figure, kind, texts, detail}. Diagram images are measured by
#: laying their SVG, parsed from the image's data URL, over the image at the image's drawn size.
_COLLECT_JS = """
async ({minFont, overlapPx, edgePx, wideMin}) => {
  const faults = [];
  let counted = 0, figures = 0;
  const vw = document.documentElement.clientWidth;
  const norm = (s) => (s || '').replace(/\\s+/g, ' ').trim();
  const short = (s, n = 60) => { s = norm(s); return s.length > n ? s.slice(0, n - 1) + '…' : s; };
  const visible = (el) => {
    for (let e = el; e && e.nodeType === 1; e = e.parentElement) {
      const cs = getComputedStyle(e);
      if (cs.display === 'none' || cs.visibility === 'hidden' || parseFloat(cs.opacity) === 0) return false;
      if (e.getAttribute && (e.getAttribute('fill-opacity') === '0')) return false;
    }
    return true;
  };
  // the text's box as four corners on the screen (a rotated text gives a rotated rectangle)
  // vertically from the first line's em box (font size) to the last one's: a line box holds the font's whole
  // ascent and descent, and lines stacked at 1.2 em would overlap by it
  const corners = (el) => {
    const r = el.getBBox(), m = el.getScreenCTM();
    const b = {x: r.x, y: r.y, width: r.width, height: r.height};
    const em = parseFloat(getComputedStyle(el).fontSize);
    const lines = Math.max(1, el.querySelectorAll('tspan.line').length);
    const trim = b.height / lines - em;   // a line box's room above and below its em box
    if (trim > 0) { b.y += trim / 2; b.height -= trim; }
    const pts = [[b.x, b.y], [b.x + b.width, b.y], [b.x + b.width, b.y + b.height], [b.x, b.y + b.height]];
    return pts.map(([x, y]) => [m.a * x + m.c * y + m.e, m.b * x + m.d * y + m.f]);
  };
  const axes = (q) => [0, 1].map((i) => {
    const [x0, y0] = q[i], [x1, y1] = q[i + 1]; const dx = x1 - x0, dy = y1 - y0, n = Math.hypot(dx, dy) || 1;
    return [-dy / n, dx / n];
  });
  const overlapDepth = (p, q) => {   // separating-axis test: the smallest overlap over the four axes
    let depth = Infinity;
    for (const [ax, ay] of [...axes(p), ...axes(q)]) {
      const pp = p.map(([x, y]) => x * ax + y * ay), qq = q.map(([x, y]) => x * ax + y * ay);
      const d = Math.min(Math.max(...pp), Math.max(...qq)) - Math.max(Math.min(...pp), Math.min(...qq));
      depth = Math.min(depth, d);
      if (depth <= 0) return 0;
    }
    return depth;
  };
  const aabb = (q) => {
    const xs = q.map((c) => c[0]), ys = q.map((c) => c[1]);
    return {left: Math.min(...xs), right: Math.max(...xs), top: Math.min(...ys), bottom: Math.max(...ys)};
  };
  const checkTexts = (figure, texts, frame) => {
    const items = [];
    figures += 1;
    for (const el of texts) {
      const text = norm(el.textContent);
      if (!text || !visible(el)) continue;
      let q;
      try { q = corners(el); } catch (e) { continue; }
      const box = aabb(q);
      if (box.right - box.left < 0.5 || box.bottom - box.top < 0.5) continue;
      const m = el.getScreenCTM();
      const size = parseFloat(getComputedStyle(el).fontSize) * Math.hypot(m.a, m.b);
      if (size < minFont) faults.push({figure, kind: 'small', texts: [short(text)], detail: size.toFixed(1) + ' px'});
      const out = box.left < frame.left - edgePx || box.right > frame.right + edgePx ||
                  box.top < frame.top - edgePx || box.bottom > frame.bottom + edgePx;
      const cut = box.left < -edgePx || box.right > vw + edgePx;
      if (out || cut) faults.push({figure, kind: 'outside', texts: [short(text)],
                                   detail: cut ? 'cut by the viewport' : 'outside the figure'});
      items.push({text, q});
      counted += 1;
    }
    for (let i = 0; i < items.length; i++) for (let j = i + 1; j < items.length; j++) {
      if (items[i].text === items[j].text) continue;
      const d = overlapDepth(items[i].q, items[j].q);
      if (d > overlapPx) faults.push({figure, kind: 'overlap', texts: [short(items[i].text), short(items[j].text)],
                                      detail: d.toFixed(1) + ' px'});
    }
  };
  const clip = (el, r) => {   // r cut to the boxes of the ancestors that hide their overflow
    let {left, right, top, bottom} = r;
    for (let e = el.parentElement; e && e !== document.body; e = e.parentElement) {
      const cs = getComputedStyle(e);
      const b = e.getBoundingClientRect();
      if (cs.overflowX !== 'visible') { left = Math.max(left, b.left); right = Math.min(right, b.right); }
      if (cs.overflowY !== 'visible') { top = Math.max(top, b.top); bottom = Math.min(bottom, b.bottom); }
    }
    return {left, right, top, bottom};
  };
  // Plotly charts
  document.querySelectorAll('[data-testid="stMain"] .js-plotly-plot').forEach((plot, k) => {
    const title = plot.querySelector('.gtitle');
    const figure = `chart ${k + 1}` + (title && norm(title.textContent) ? ` «${short(title.textContent, 40)}»` : '');
    const svg = plot.querySelector('svg.main-svg');
    if (!svg) return;
    const frame = clip(svg, svg.getBoundingClientRect());
    const texts = [...plot.querySelectorAll('svg text')].filter((t) => !t.closest('.hoverlayer'));
    checkTexts(figure, texts, frame);
  });
  // diagrams: the SVG images ui.diagram draws
  const imgs = [...document.querySelectorAll('[data-testid="stMain"] img')].filter(
    (img) => (img.currentSrc || img.src).startsWith('data:image/svg+xml') || /\\.svg(\\?|$)/.test(img.src));
  for (const [k, img] of imgs.entries()) {
    const figure = `diagram ${k + 1}` + (img.alt ? ` «${short(img.alt, 40)}»` : '');
    let source;
    try { source = await (await fetch(img.currentSrc || img.src)).text(); } catch (e) { continue; }
    const doc = new DOMParser().parseFromString(source, 'image/svg+xml');
    const svg = doc.documentElement;
    if (!svg || svg.nodeName !== 'svg') continue;
    const r = img.getBoundingClientRect();
    if (!visible(img) || r.width < 1 || r.height < 1) continue;
    const layer = document.createElement('div');
    layer.style.cssText = `position:fixed;left:${r.left}px;top:${r.top}px;width:${r.width}px;height:${r.height}px;` +
                          'opacity:0.001;pointer-events:none;margin:0;padding:0;';
    const placed = document.importNode(svg, true);
    placed.setAttribute('width', r.width); placed.setAttribute('height', r.height);
    placed.style.display = 'block';
    layer.appendChild(placed); document.body.appendChild(layer);
    try {
      const frame = clip(img, r);
      checkTexts(figure, [...placed.querySelectorAll('text')], frame);
    } finally { layer.remove(); }
  }
  // badges, headings, table cells, metrics, widget labels, tabs: content cut or broken inside a word
  const boxes = document.querySelectorAll([
    '[data-testid="stMain"] .stMarkdownBadge', '[data-testid="stMain"] h1', '[data-testid="stMain"] h2',
    '[data-testid="stMain"] h3', '[data-testid="stMain"] td', '[data-testid="stMain"] th',
    '[data-testid="stMain"] [data-testid="stMetricValue"]', '[data-testid="stMain"] [data-testid="stMetricLabel"]',
    '[data-testid="stMain"] [data-testid="stWidgetLabel"]', '[data-testid="stMain"] [role="tab"]',
    '[data-testid="stMain"] summary'].join(','));
  // the first word of el drawn on two lines (words: runs without spaces and, by default, without the dashes,
  // slashes and punctuation after which a line may break; a table cell's words run from space to space, cut only
  // at a hyphen between two letters, as in Positions-Embedding: no break inside a number such as 1,549E-30)
  const wordBroken = (el, words = /[^\\s\\-\\/–—·(),:;.]+/g) => {
    const walker = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      if (node.parentElement.closest('.katex, code')) continue;
      const re = new RegExp(words.source, words.flags.includes('g') ? words.flags : words.flags + 'g');
      let m;
      while ((m = re.exec(node.data))) {
        if (m[0].length < 2) continue;
        const range = document.createRange(); range.setStart(node, m.index); range.setEnd(node, m.index + m[0].length);
        const tops = new Set([...range.getClientRects()].filter((c) => c.width > 0).map((c) => Math.round(c.top)));
        if (tops.size > 1) return m[0];
      }
    }
    return null;
  };
  for (const el of boxes) {
    if (!visible(el) || el.closest('[data-testid="stExpanderDetails"]') && !el.closest('details[open]')) continue;
    const copy = el.cloneNode(true);
    copy.querySelectorAll('[data-testid="stIconMaterial"]').forEach((icon) => icon.remove());
    const text = short(copy.textContent);
    if (!text) continue;
    const kind = el.matches('.stMarkdownBadge') ? 'badge' : el.tagName.toLowerCase();
    const cs = getComputedStyle(el);
    const scrolls = ['auto', 'scroll'].includes(cs.overflowX);
    if (el.scrollWidth > el.clientWidth + 1 && el.clientWidth > 0 && !scrolls) {
      const ellipsis = cs.textOverflow === 'ellipsis' ? 'ellipsis, ' : '';
      const detail = `${ellipsis}${el.scrollWidth} > ${el.clientWidth} px`;
      faults.push({figure: kind, kind: 'cut', texts: [text], detail});
      continue;
    }
    if (kind === 'badge' || /^h[123]$/.test(kind)) {
      const broken = wordBroken(el);
      if (broken) faults.push({figure: kind, kind: 'cut', texts: [text], detail: `breaks inside «${broken}»`});
    } else if (kind === 'td' || kind === 'th') {
      const broken = wordBroken(el, /(?:[^\\s-]|(?<!\\p{L})-|-(?!\\p{L}))+/gu);
      if (broken) faults.push({figure: kind, kind: 'broken', texts: [text],
                               detail: `a word broken inside a cell: «${broken}»`});
    }
  }
  // on a desktop no table or grid hides its last columns behind a sideways scroll
  if (vw >= wideMin) {
    const frames = [...document.querySelectorAll('[data-testid="stMain"] [data-testid="stTable"] > div')]
      .map((e) => ['table', e, e.innerText])
      .concat([...document.querySelectorAll('[data-testid="stMain"] [data-testid="stDataFrame"] .dvn-scroller')]
        .map((e) => ['grid', e, e.closest('[data-testid="stDataFrame"]').querySelector('table')?.innerText || '']));
    for (const [figure, e, head] of frames) {
      if (!visible(e) || e.closest('[data-testid="stExpanderDetails"]') && !e.closest('details[open]')) continue;
      if (e.scrollWidth > e.clientWidth + 1)
        faults.push({figure, kind: 'hidden', texts: [short(head, 40)], detail:
                     `columns hidden behind a sideways scroll at ${vw} px: ${e.scrollWidth} > ${e.clientWidth} px`});
    }
  }
  // tables wider than their place that do not scroll inside themselves
  for (const table of document.querySelectorAll('[data-testid="stMain"] table')) {
    if (!visible(table)) continue;
    let scroller = false;
    for (let e = table; e && e !== document.body; e = e.parentElement) {
      const cs = getComputedStyle(e);
      if (['auto', 'scroll'].includes(cs.overflowX) && e.scrollWidth > e.clientWidth) { scroller = true; break; }
    }
    const r = table.getBoundingClientRect();
    if (!scroller && r.right > vw + edgePx) {
      const head = short(table.innerText, 40);
      const detail = `right edge ${Math.round(r.right)} > ${vw} px`;
      faults.push({figure: 'table', kind: 'cut', texts: [head], detail});
    }
  }
  return {faults, texts: counted, figures};
}
"""

_IDLE_JS = "() => !document.querySelector('[data-testid=\"stStatusWidget\"]')"
#: Runs in the page: its height, how many charts and images it has, and whether every chart is drawn.
_STATE_JS = """() => {
  const main = document.querySelector('[data-testid="stMain"]');
  const charts = [...main.querySelectorAll('[data-testid="stPlotlyChart"]')];
  return {height: Math.ceil(main.scrollHeight), charts: charts.length, images: main.querySelectorAll('img').length,
          drawn: charts.every((c) => c.querySelector('.main-svg'))};
}"""


def page_path(slug: str) -> str:
    """The URL path of a page slug: dashes for underscores, Home at ``""``."""
    return "" if slug == "home" else slug.replace("_", "-")


def settle(page, timeout_ms: float, width: int, min_charts: int = 0) -> None:
    """Wait until the page has its title, its fonts, no run in progress, at least ``min_charts`` charts, and the
    same height, number of charts and images over three readings, every chart drawn; the viewport grows to the
    page's height meanwhile, so that every element is laid out and drawn. A page still computing (a spinner
    before its first chart) reads the same three times, so a page known to have charts waits for them.

    Raises:
        TimeoutError: the page did not settle within ``timeout_ms`` (Playwright's own when it shows no title).
    """
    page.get_by_role("heading", level=1).first.wait_for(timeout=timeout_ms)
    page.wait_for_load_state("networkidle", timeout=timeout_ms)
    page.evaluate("() => document.fonts.ready.then(() => true)")
    readings: list[object] = []
    deadline = time.monotonic() + timeout_ms / 1000
    while True:
        page.wait_for_function(_IDLE_JS, timeout=timeout_ms)
        page.wait_for_timeout(600)
        reading = page.evaluate(_STATE_JS)
        readings.append(reading)
        if reading["drawn"] and reading["charts"] >= min_charts and readings[-3:] == [reading] * 3:
            break
        if time.monotonic() > deadline:
            raise TimeoutError(f"the page did not settle in {timeout_ms / 1000:.0f} s (at least {min_charts} charts, "
                               f"every one drawn, three equal readings); the last: {reading}")
        page.set_viewport_size({"width": width, "height": min(max(reading["height"], 800), MAX_HEIGHT)})
    page.wait_for_timeout(300)


def check(browser, base_url: str, slug: str, lang: str, width: int, query: Mapping[str, str] | None = None,
          timeout_ms: float = 120_000, label: str | None = None, audit: bool = False, min_charts: int = 0) -> Report:
    """The legibility faults of one page in one language at one width: :func:`visit` at that width alone."""
    return visit(browser, base_url, slug, lang, (width,), query, timeout_ms, label, width if audit else None,
                 min_charts)[0]


def visit(browser, base_url: str, slug: str, lang: str, widths: Sequence[int] = (1400, 390),
          query: Mapping[str, str] | None = None, timeout_ms: float = 120_000, label: str | None = None,
          audit_width: int | None = None, min_charts: int = 0) -> tuple[Report, ...]:
    """The legibility faults of one page in one language at each of ``widths``, from one load of the page.

    The page is loaded at the first width, measured, then the viewport takes the next width, the page settles
    again and is measured again: nothing the server sends depends on the width (the page's CSS and Plotly lay
    it out in the browser; below 640 px Streamlit folds its sidebar as on a first visit at that width), so one
    run of the page's script serves every width.

    Args:
        browser: a Playwright ``Browser`` (one shared by the caller).
        base_url: the running app (``http://127.0.0.1:8501``).
        slug: the page (``self_attention``).
        lang: ``fr``, ``de`` or ``en``.
        widths: viewport widths in CSS px (390: a phone), in the order measured; the widest first.
        query: more URL parameters (controls at their extremes, e.g. ``{"tw_d_out": "8"}``).
        timeout_ms: how long to wait for the page to draw.
        label: the page's name in the faults (default: the slug, with the query).
        audit_width: also run axe-core (``axe-playwright-python``, which bundles it) on the page settled at
            this width (one of ``widths``); None: no audit.
        min_charts: the page is measured only once it shows at least this many Plotly charts.

    Returns:
        One report per width, in the order of ``widths``: every fault found, in page order (none when
        everything is legible), the counts measured, and axe-core's findings at ``audit_width``.

    Raises:
        ValueError: no width, or an ``audit_width`` that is not one of them.
    """
    if not widths or (audit_width is not None and audit_width not in widths):
        raise ValueError(f"widths {tuple(widths)} must be given and hold the audit width {audit_width}")
    params = {"lang": lang, **(query or {})}
    url = f"{base_url.rstrip('/')}/{page_path(slug)}?{urllib.parse.urlencode(params)}"
    name = label or (slug + ("" if not query else " " + " ".join(f"{k}={v}" for k, v in query.items())))
    reports = []
    page = browser.new_page(viewport={"width": widths[0], "height": 1000})
    try:
        page.goto(url, wait_until="domcontentloaded", timeout=timeout_ms)
        for k, width in enumerate(widths):
            if k:
                page.set_viewport_size({"width": width, "height": 1000})
            settle(page, timeout_ms, width, min_charts)
            found = page.evaluate(_COLLECT_JS, {"minFont": MIN_FONT_PX, "overlapPx": OVERLAP_PX, "edgePx": EDGE_PX,
                                                "wideMin": WIDE_MIN_PX})
            findings = accessibility(page) if width == audit_width else ()
            faults = tuple(Fault(name, lang, width, f["figure"], f["kind"], tuple(f["texts"]), f.get("detail", ""))
                           for f in found["faults"])
            reports.append(Report(faults, found["figures"], found["texts"], findings))
    finally:
        page.close()
    return tuple(reports)


def _short_target(target: list) -> str:
    """The last step of axe's CSS selector for an element (the whole path is long and full of hashes)."""
    last = str(target[-1]).split(" > ")[-1] if target else ""
    return last[:80]


def accessibility(page) -> tuple[Finding, ...]:
    """axe-core's violations on ``page`` (a Playwright ``Page``), WCAG 2 A and AA rules and best practices."""
    from axe_playwright_python.sync_playwright import Axe

    options = {"resultTypes": ["violations"],
               "runOnly": {"type": "tag", "values": ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "best-practice"]}}
    response = Axe().run(page, options=options).response
    in_nav = ("(t) => { const e = document.querySelector(t); "
              "return !!(e && e.closest('[data-testid=\"stSidebarNav\"]')); }")
    return tuple(Finding(v["id"], v.get("impact") or "minor", v["help"],
                         tuple(_short_target(n["target"]) for n in v["nodes"]),
                         all(page.evaluate(in_nav, str(n["target"][-1])) for n in v["nodes"]))
                 for v in response["violations"])


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def serve(port: int | None = None) -> Iterator[str]:
    """``streamlit run serve.py`` on a free port, diagrams laid out on the server as readers get them; yields
    its base URL once its health endpoint answers and stops it on exit.

    Raises:
        RuntimeError: the server did not answer within two minutes.
    """
    port = port or _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", "serve.py", "--server.port", str(port),
         "--server.headless", "true", "--server.address", "127.0.0.1"],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONUNBUFFERED": "1", "ATTENTION_DIAGRAMS": "server"},
    )
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise RuntimeError("the server did not start: " + proc.stderr.read().decode()[-2000:]) from None
                time.sleep(0.3)
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()


@contextlib.contextmanager
def chromium() -> Iterator[object]:
    """Debian's Chromium, headless, driven by Playwright.

    Raises:
        RuntimeError: no ``chromium`` on the PATH.
    """
    if CHROMIUM is None:
        raise RuntimeError("Chromium is not installed: run `make test` (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_ARGS)
        try:
            yield browser
        finally:
            browser.close()


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--page", action="append", required=True, help="page slug (repeatable): self_attention")
    parser.add_argument("--lang", action="append", choices=tuple(LANGUAGES), help="language (repeatable; all)")
    parser.add_argument("--width", action="append", type=int, help="viewport width in px (repeatable; 390, 1400)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="a URL parameter")
    parser.add_argument("--url", help="a running app (default: start one)")
    parser.add_argument("--axe", action="store_true", help="also run axe-core (widest width), print its findings")
    parser.add_argument("--min-charts", type=int, default=1, help="wait for this many charts (0: a page without)")
    args = parser.parse_args(argv)
    query = dict(item.split("=", 1) for item in args.set)
    count = 0
    with contextlib.ExitStack() as stack:
        base = args.url or stack.enter_context(serve())
        browser = stack.enter_context(chromium())
        widths = sorted(args.width or [390, 1400], reverse=True)
        for slug in args.page:
            for lang in args.lang or LANGUAGES:
                reports = visit(browser, base, slug, lang, widths, query, audit_width=widths[0] if args.axe else None,
                                min_charts=args.min_charts)
                for width, report in zip(widths, reports, strict=True):
                    for line in (*report.faults, *report.findings):
                        print(line, flush=True)
                    print(f"# {slug} [{lang}, {width}px]: {len(report.faults)} faults in {report.figures} figures "
                          f"({report.texts} texts)", flush=True)
                    count += len(report.faults)
    return 1 if count else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
