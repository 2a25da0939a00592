"""The whole app in a real browser: Debian's Chromium driven by Playwright.

- ``test_deep_link_on_fresh_server``: each registry path (Home is ``/``) is the *first* request to a
  freshly started server; the page must draw its charts and math with no dialog ("Page not found" or any
  ``[role=dialog]``) and no exception box, and a slider must move. A desktop screenshot per page lands in
  ``runs/screenshots/<page>.png``.
- ``test_values_survive_page_switch``: the dropout page's seed set to 7 through its widget survives a trip
  to Home and back through the sidebar links, in the widget and in the URL.
- ``test_phone_width``: at 390 px, every page is screenshot (``runs/screenshots/phone-<page>.png``); no chart
  title is under Plotly's toolbar, no chart is wider than the viewport and the page does not scroll sideways.
- ``test_language_by_link``: ``?lang=fr`` / ``?lang=de`` show the page's translated prose.

Slow: every test prints progress lines (to the real stderr, past pytest's capture), and timeouts derive
from the measured first page load of the shared server, never below a floor.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from tests.plotly_json import ROOT
from ui.i18n import TRANSLATED
from ui.nav import PAGES, page_info
from ui.page import load_parts

pytestmark = pytest.mark.browser

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
LAUNCH_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
               "--disable-sync", "--no-first-run", "--disable-quic"]
SHOTS = ROOT / "runs" / "screenshots"
#: Pages whose prose has LaTeX, so KaTeX must have rendered.
MATH_PAGES = {"self-attention", "trainable-weights", "causal-mask", "dropout", "multi-head", "positional-encodings"}
#: Browser timeouts are this many times the measured first page load, and never under FLOOR_MS.
TIMEOUT_FACTOR, FLOOR_MS = 10, 60_000
PHONE = {"width": 390, "height": 844}
CHART = '[data-testid="stPlotlyChart"]'
#: Pages without a Plotly chart.
NO_CHART_PAGES = {"glossary"}


def say(message: str) -> None:
    """A progress line on the real stderr, shown even while pytest captures output."""
    print(f"  [{time.strftime('%H:%M:%S')}] {message}", file=sys.__stderr__, flush=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(port: int, log: Path | None = None, preexec_fn=None, timeout_s: float = 120) -> subprocess.Popen:
    """Start ``streamlit run serve.py`` on ``port`` and wait up to ``timeout_s`` seconds for its health endpoint.

    Also used by tests/operations (test_load.py, test_connection_flood.py). The server's output goes to the file
    ``log`` when given (its standard error is kept for the failure message otherwise); ``preexec_fn`` runs in the
    child before streamlit starts (resource limits).
    """
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", "serve.py", "--server.port", str(port),
         "--server.headless", "true", "--server.address", "127.0.0.1"],
        cwd=ROOT, stdout=log.open("wb") if log else subprocess.DEVNULL,
        stderr=subprocess.STDOUT if log else subprocess.PIPE,
        env={**os.environ, "PYTHONUNBUFFERED": "1", "ATTENTION_DIAGRAMS": "server"}, preexec_fn=preexec_fn,
    )
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2) as r:
                if r.status == 200:
                    return proc
        except OSError:
            time.sleep(0.3)
    proc.kill()
    output = log.read_text(errors="replace") if log else proc.stderr.read().decode(errors="replace")
    raise RuntimeError(f"server did not become healthy: {output[-2000:]}")


def stop_server(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()


def wait_ready(page, timeout_ms: float) -> None:
    """Until the page has its title, a drawn chart (on a page that has charts) and no run in progress."""
    page.get_by_role("heading", level=1).first.wait_for(timeout=timeout_ms)
    if not any(page.url.rstrip("/").split("?")[0].endswith(f"/{p}") for p in NO_CHART_PAGES):
        page.wait_for_selector(f"{CHART} .main-svg", state="visible", timeout=timeout_ms)
    page.wait_for_function("() => !document.querySelector('[data-testid=\"stStatusWidget\"]')", timeout=timeout_ms)


def no_dialog_and_no_exception(page) -> None:
    dialogs = page.locator('[role="dialog"]')
    assert dialogs.count() == 0, f"a dialog is open: {dialogs.first.inner_text()[:200]!r}"
    assert page.get_by_text("Page not found").count() == 0
    exceptions = page.locator('[data-testid="stException"]')
    assert exceptions.count() == 0, exceptions.first.inner_text()[:500]


@pytest.fixture(scope="module")
def browser():
    if CHROMIUM is None:
        pytest.fail("Chromium is not installed: run `make test` (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_ARGS)
        yield b
        b.close()


@pytest.fixture(scope="module")
def server():
    """One server for the tests that need no fresh one: its base URL."""
    port = free_port()
    say("starting the shared server")
    proc = start_server(port)
    yield f"http://127.0.0.1:{port}"
    stop_server(proc)


@pytest.fixture(scope="module")
def timeout_ms(browser, server) -> float:
    """Browser timeout: TIMEOUT_FACTOR × the shared server's first load of the heaviest essay page, ≥ FLOOR_MS."""
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    start = time.monotonic()
    page.goto(f"{server}/positional-encodings", wait_until="commit")
    wait_ready(page, 300_000)
    load_ms = (time.monotonic() - start) * 1000
    page.close()
    timeout = max(FLOOR_MS, TIMEOUT_FACTOR * load_ms)
    say(f"first load of /positional-encodings: {load_ms:.0f} ms; browser timeouts {timeout / 1000:.0f} s")
    return timeout


@pytest.mark.parametrize("info", PAGES, ids=[p.url_path or "home" for p in PAGES])
def test_deep_link_on_fresh_server(browser, timeout_ms, info):
    port = free_port()
    say(f"/{info.url_path}: fresh server")
    server = start_server(port)
    try:
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.goto(f"http://127.0.0.1:{port}/{info.url_path}", wait_until="domcontentloaded")
        wait_ready(page, timeout_ms)
        page.wait_for_load_state("networkidle", timeout=timeout_ms)
        say(f"/{info.url_path}: drawn")
        no_dialog_and_no_exception(page)
        assert page.get_by_role("heading", level=1).first.inner_text().strip(), "page has no title"
        # the app ran its navigation: the sidebar lists the registered pages
        assert page.locator('[data-testid="stSidebarNav"]').count() == 1
        assert page.locator('[data-testid="stSidebarNavLink"]').count() == len(PAGES)
        if info.url_path in MATH_PAGES:
            page.wait_for_selector(".katex", timeout=timeout_ms)
        sliders = page.locator('[data-testid="stMain"] [data-testid="stSlider"] input[type="range"]')
        if sliders.count():
            before = sliders.first.input_value()
            sliders.first.focus()
            page.keyboard.press("ArrowRight")
            page.keyboard.press("ArrowRight")
            page.wait_for_timeout(500)
            page.wait_for_function(
                "() => !document.querySelector('[data-testid=\"stStatusWidget\"]')", timeout=timeout_ms
            )
            assert sliders.first.input_value() != before
        no_dialog_and_no_exception(page)
        assert page.locator(CHART).count() >= (info.url_path not in NO_CHART_PAGES)
        SHOTS.mkdir(parents=True, exist_ok=True)
        # Streamlit scrolls inside its own container: a tall viewport shows the whole page.
        page.set_viewport_size({"width": 1400, "height": 6000})
        page.wait_for_timeout(1500)
        page.screenshot(path=str(SHOTS / f"{info.url_path or 'home'}.png"))
        page.close()
    finally:
        stop_server(server)


def test_values_survive_page_switch(browser, server, timeout_ms):
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.goto(f"{server}/dropout")
    wait_ready(page, timeout_ms)
    seed = page.locator('.st-key-do_seed input')
    seed.fill("7")
    seed.press("Enter")
    page.wait_for_url(re.compile(r"do_seed=7"), timeout=timeout_ms)
    wait_ready(page, timeout_ms)
    say("dropout seed set to 7; to Home and back through the sidebar")
    home_title = page_info("home").nav_title()
    dropout_title = page_info("dropout").nav_title()
    page.locator('[data-testid="stSidebarNavLink"]', has_text=home_title).first.click()
    page.wait_for_url(re.compile(r"/(\?.*)?$"), timeout=timeout_ms)
    wait_ready(page, timeout_ms)
    page.locator('[data-testid="stSidebarNavLink"]', has_text=dropout_title).first.click()
    page.wait_for_url(re.compile(r"/dropout"), timeout=timeout_ms)
    wait_ready(page, timeout_ms)
    page.wait_for_url(re.compile(r"do_seed=7"), timeout=timeout_ms)
    assert page.locator('.st-key-do_seed input').input_value() == "7"
    assert "do_seed=7" in page.url
    no_dialog_and_no_exception(page)
    page.close()


#: For each chart: title boxes that meet the toolbar's box, and whether the chart is wider than the viewport.
PHONE_CHECK_JS = """() => {
  const vw = document.documentElement.clientWidth;
  const meet = (a, b) => a.left < b.right && b.left < a.right && a.top < b.bottom && b.top < a.bottom;
  const out = {vw, scrollWidth: document.scrollingElement.scrollWidth, charts: []};
  const main = document.querySelector('[data-testid="stMain"]');
  out.mainOverflow = main ? main.scrollWidth - main.clientWidth : 0;
  document.querySelectorAll('.js-plotly-plot').forEach((plot, i) => {
    const box = plot.getBoundingClientRect();
    // the toolbar's box: the union of its buttons (its container spans more than the buttons)
    let barBox = null;
    plot.querySelectorAll('.modebar-btn').forEach((b) => {
      const r = b.getBoundingClientRect();
      if (r.width === 0) return;
      barBox = barBox ? {left: Math.min(barBox.left, r.left), right: Math.max(barBox.right, r.right),
                         top: Math.min(barBox.top, r.top), bottom: Math.max(barBox.bottom, r.bottom), width: 1}
                      : {left: r.left, right: r.right, top: r.top, bottom: r.bottom, width: r.width};
    });
    const covered = [];
    plot.querySelectorAll('.gtitle, .g-gtitle text, .annotation-text').forEach((t) => {
      const tb = t.getBoundingClientRect();
      if (barBox && barBox.width > 0 && tb.width > 0 && tb.top < box.top + 80 && meet(tb, barBox))
        covered.push(t.textContent.slice(0, 60));
    });
    out.charts.push({i, left: box.left, right: box.right, width: box.width, covered});
  });
  const diagrams = '[data-testid="stGraphVizChart"] svg, [data-testid="stImage"] img[src^="data:image/svg"]';
  // a prose table wider than its place scrolls inside its own box; its edge shadows say there is more
  out.tables = [...document.querySelectorAll('[data-testid="stMarkdownContainer"] table')].map((t) => ({
    wide: t.scrollWidth > t.clientWidth + 1, hint: getComputedStyle(t).backgroundImage.includes('radial-gradient')}));
  out.diagrams = [...document.querySelectorAll(diagrams)].map((svg) => {
    const b = svg.getBoundingClientRect();
    return {left: b.left, right: b.right, width: b.width, server: svg.tagName === 'IMG'};
  });
  return out;
}"""


@pytest.mark.parametrize("info", PAGES, ids=[p.url_path or "home" for p in PAGES])
def test_phone_width(browser, server, timeout_ms, info):
    check_phone_width(browser, server, timeout_ms, info, "en")


#: Pages with a diagram, whose translated labels are longer than the English ones.
DIAGRAM_PAGES = [p for p in PAGES if p.slug not in ("memory_layout", "glossary")]


@pytest.mark.parametrize("lang", TRANSLATED)
@pytest.mark.parametrize("info", DIAGRAM_PAGES, ids=[p.url_path or "home" for p in DIAGRAM_PAGES])
def test_phone_width_translated(browser, server, timeout_ms, info, lang):
    """The diagrams and figures fit a phone in French and German too (German compounds are long)."""
    check_phone_width(browser, server, timeout_ms, info, lang)


def check_phone_width(browser, server, timeout_ms, info, lang: str) -> None:
    page = browser.new_page(viewport=PHONE, is_mobile=True, has_touch=True)
    page.goto(f"{server}/{info.url_path}?lang={lang}")
    wait_ready(page, timeout_ms)
    page.wait_for_timeout(1000)
    result = page.evaluate(PHONE_CHECK_JS)
    say(f"/{info.url_path}?lang={lang} at 390 px: {len(result['charts'])} charts")
    # the screenshot first, so that a failing page leaves one to look at
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.set_viewport_size({"width": PHONE["width"], "height": 12_000})
    page.wait_for_timeout(1500)
    page.screenshot(path=str(SHOTS / f"phone-{info.url_path or 'home'}-{lang}.png"))
    vw = result["vw"]
    assert result["scrollWidth"] <= vw + 1, f"the page scrolls sideways: {result['scrollWidth']} > {vw}"
    assert result["mainOverflow"] <= 1, f"the main area scrolls sideways by {result['mainOverflow']} px"
    for chart in result["charts"]:
        assert chart["left"] >= -1 and chart["right"] <= vw + 1, f"chart {chart['i']} overflows: {chart}"
        assert not chart["covered"], f"chart {chart['i']}: titles under the toolbar: {chart['covered']}"
    wide = [t for t in result["tables"] if t["wide"]]
    assert all(t["hint"] for t in wide), f"a table scrolls sideways without its edge shadows: {result['tables']}"
    if info.slug == "glossary":  # its four-language table cannot fit 390 px: the check above saw one
        assert wide, result["tables"]
    shown = [d for d in result["diagrams"] if d["width"] > 0]  # the Lab's sits in a closed expander
    for i, diagram in enumerate(shown):
        assert diagram["left"] >= -1 and diagram["right"] <= vw + 1, f"diagram {i}: {diagram}"
    if info.slug not in ("memory_layout", "glossary", "lab"):
        assert shown and all(d["server"] for d in shown), f"diagrams laid out on the server: {result['diagrams']}"
    no_dialog_and_no_exception(page)
    page.close()


def translated_words(markdown: str, english: str, n: int = 5) -> str:
    """The first ``n`` consecutive plain words of ``markdown`` (no markup, math or numbers) that the English
    text does not have in that order: what only the translated page shows."""

    def words(text: str) -> list[str]:
        return re.sub(r"\$[^$]*\$|\[([^]]*)\]\([^)]*\)|[*_`]", r"\1", text).split()

    english_text = " ".join(words(english))
    found = words(markdown)
    for i in range(len(found) - n + 1):
        window = found[i:i + n]
        if all(re.fullmatch(r"[^\W\d_]+[,.;:]?", w) for w in window) and " ".join(window) not in english_text:
            return " ".join(window)
    raise AssertionError("no translated words found")


@pytest.mark.parametrize("lang", TRANSLATED)
def test_language_by_link(browser, server, timeout_ms, lang):
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.goto(f"{server}/dropout?lang={lang}")
    wait_ready(page, timeout_ms)
    expected = translated_words(load_parts("dropout", lang)["intro"], load_parts("dropout", "en")["intro"])
    shown = " ".join(page.locator('[data-testid="stMain"]').inner_text().split())
    say(f"?lang={lang}: looking for {expected!r}")
    assert expected in shown
    no_dialog_and_no_exception(page)
    page.close()
