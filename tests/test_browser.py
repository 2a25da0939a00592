"""The whole app in a real browser: Debian's Chromium driven by Playwright.

Each page is opened by its URL as the *first* request to a freshly started
server (a deep link), one slider is moved, and the page must show its charts
and math without an exception box. A screenshot per page lands in
``runs/screenshots/``.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from tests.plotly_json import ROOT
from ui.nav import PAGES

pytestmark = pytest.mark.browser

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
SHOTS = ROOT / "runs" / "screenshots"
#: Pages whose prose has LaTeX, so KaTeX must have rendered.
MATH_PAGES = {"self-attention", "trainable-weights", "causal-mask", "dropout", "multi-head", "positional-encodings"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(port: int) -> subprocess.Popen:  # also used by tests/test_load.py
    """Start ``streamlit run app.py`` on ``port`` and wait until its health endpoint answers."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", "app.py", "--server.port", str(port),
         "--server.headless", "true", "--server.address", "127.0.0.1"],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2) as r:
                if r.status == 200:
                    return proc
        except OSError:
            time.sleep(0.3)
    proc.kill()
    raise RuntimeError(f"server did not become healthy: {proc.stderr.read().decode()[-2000:]}")


@pytest.fixture(scope="module")
def browser():
    if CHROMIUM is None:
        pytest.fail("Chromium is not installed: run `make setup` (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(
            executable_path=CHROMIUM,
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                  "--disable-sync", "--no-first-run", "--disable-quic"],
        )
        yield b
        b.close()


@pytest.mark.parametrize("info", PAGES, ids=[p.url_path for p in PAGES])
def test_deep_link_on_fresh_server(browser, info):
    port = free_port()
    server = start_server(port)
    try:
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.goto(f"http://127.0.0.1:{port}/{info.url_path}", wait_until="domcontentloaded")
        page.get_by_role("heading", level=1).first.wait_for(timeout=60_000)
        page.wait_for_selector('[data-testid="stPlotlyChart"]', timeout=60_000)
        page.wait_for_load_state("networkidle")
        heading = page.get_by_role("heading", level=1).first.inner_text()
        assert heading.strip(), "page has no title"
        # the app ran its navigation: the sidebar lists the registered pages
        assert page.locator('[data-testid="stSidebarNav"]').count() == 1
        assert page.locator('[data-testid="stSidebarNavLink"]').count() == len(PAGES)
        if info.url_path in MATH_PAGES:
            page.wait_for_selector(".katex", timeout=30_000)
        sliders = page.locator('[data-testid="stSlider"] input')
        if sliders.count():
            before = sliders.first.input_value()
            sliders.first.focus()
            page.keyboard.press("ArrowRight")
            page.keyboard.press("ArrowRight")
            page.wait_for_timeout(500)
            page.wait_for_function(
                "() => !document.querySelector('[data-testid=\"stStatusWidget\"]')", timeout=60_000
            )
            assert sliders.first.input_value() != before
        assert page.locator('[data-testid="stException"]').count() == 0
        assert page.locator('[data-testid="stPlotlyChart"]').count() >= 1
        SHOTS.mkdir(parents=True, exist_ok=True)
        # Streamlit scrolls inside its own container: a tall viewport shows the whole page.
        page.set_viewport_size({"width": 1400, "height": 6000})
        page.wait_for_timeout(1500)
        page.screenshot(path=str(SHOTS / f"{info.url_path}.png"))
        page.close()
    finally:
        server.terminate()
        server.wait(timeout=20)
