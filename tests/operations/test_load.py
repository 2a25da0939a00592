"""Concurrent readers and Community Cloud memory, on loopback, in headless Chromium.

- ``test_quick_preset_fits_community_cloud``: a fresh server, one reader trains the Lab's quick preset to the
  end; the server's peak resident memory must stay under 690 MB (the smallest Community Cloud allotment).
- ``test_five_readers_two_training``: five browser sessions at once — three move sliders on essay pages, two
  train in the Lab with different seeds — every session completes, nobody sees another's inputs or model, and
  the server's peak resident memory stays under 2.7 GB.

Figures are printed and written to ``runs/load_test.json``. The request loops are bounded in count and time
and only reach 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
import time

import pytest

from engine.presets import DEFAULT_PRESET, PRESETS
from tests.browser.test_browser import CHROMIUM, free_port, say, start_server
from tests.plotly_json import ROOT

pytestmark = pytest.mark.browser

LAUNCH_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
               "--disable-sync", "--no-first-run", "--disable-quic"]
RESULTS = ROOT / "runs" / "load_test.json"


class PeakRSS:
    """Samples a process's resident memory (VmRSS) every 0.2 s in a thread; ``peak_mb`` is the largest seen.

    Every ``HEARTBEAT_S`` it prints a progress line (elapsed time, current peak), so a long run is never silent.
    """

    HEARTBEAT_S = 30

    def __init__(self, pid: int):
        self.pid, self.peak_kb, self._stop = pid, 0, threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        start = last = time.monotonic()
        while not self._stop.is_set():
            if time.monotonic() - last >= self.HEARTBEAT_S:
                last = time.monotonic()
                say(f"still running after {last - start:.0f} s; server peak RSS so far {self.peak_mb:.0f} MB")
            try:
                text = open(f"/proc/{self.pid}/status").read()
                self.peak_kb = max(self.peak_kb, int(re.search(r"VmRSS:\s+(\d+)", text).group(1)))
            except (OSError, AttributeError):
                pass
            self._stop.wait(0.2)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()

    @property
    def peak_mb(self) -> float:
        return self.peak_kb / 1024


def record(name: str, figures: dict) -> None:
    data = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    data[name] = figures
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(data, indent=2))
    print(name, figures)


async def no_exception(page) -> None:
    assert await page.locator('[data-testid="stException"]').count() == 0


async def open_and_wait(page, url: str) -> None:
    await page.goto(url, wait_until="domcontentloaded")
    await page.get_by_role("heading", level=1).first.wait_for(timeout=120_000)
    await page.wait_for_selector('[data-testid="stPlotlyChart"]', timeout=120_000)


async def new_page(browser):
    context = await browser.new_context(viewport={"width": 1400, "height": 1600})
    page = await context.new_page()
    page.set_default_timeout(180_000)  # five sessions share two cores
    return context, page


async def train_in_lab(browser, base: str, seed: int, steps: int, timeout_s: float, extra: str = "") -> dict:
    """One reader: open the Lab with its settings in the URL, train, wait for the end; return what it saw."""
    context, page = await new_page(browser)
    await open_and_wait(page, f"{base}/lab?lab_steps={steps}&lab_seed={seed}{extra}")
    say(f"lab reader seed {seed}: page open, training {steps} steps")
    await page.get_by_role("button", name="Train", exact=True).click()
    done = page.get_by_text(re.compile(rf"done: {steps} steps in"))
    await done.wait_for(timeout=timeout_s * 1000)
    say(f"lab reader seed {seed}: training done")
    await page.wait_for_timeout(1500)
    val = await page.get_by_text(re.compile(r"last evaluation \(step \d+\)")).first.inner_text()
    crossed = page.get_by_text(re.compile(r"Below the bigram line from step"))
    crossing = await crossed.first.inner_text() if await crossed.count() else ""
    seed_shown = await page.get_by_label("seed").first.input_value()
    url = page.url
    await no_exception(page)
    await context.close()
    return {"seed": seed, "seed_shown": seed_shown, "last_eval": val, "crossing": crossing, "url": url}


async def move_slider_reader(browser, base: str, path: str, query: str) -> dict:
    """One reader: open an essay page from a link, move its first slider twice, check nothing broke."""
    context, page = await new_page(browser)
    await open_and_wait(page, f"{base}/{path}{query}")
    slider = page.locator('[data-testid="stSlider"] input').first
    before = await slider.input_value()
    for _ in range(2):
        await slider.focus()
        await page.keyboard.press("ArrowRight")
        await page.wait_for_timeout(800)
    after = await slider.input_value()
    say(f"essay reader /{path}: slider moved {before} → {after}")
    await no_exception(page)
    url = page.url
    await context.close()
    return {"path": path, "before": before, "after": after, "url": url}


def run_with_server(coro_factory):
    port = free_port()
    say("starting a server")
    server = start_server(port)
    try:
        with PeakRSS(server.pid) as rss:
            start = time.monotonic()
            result = asyncio.run(coro_factory(f"http://127.0.0.1:{port}"))
            wall = time.monotonic() - start
        return result, rss.peak_mb, wall
    finally:
        server.terminate()
        server.wait(timeout=30)


async def _with_browser(fn):
    from playwright.async_api import async_playwright

    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_ARGS)
        try:
            return await fn(browser)
        finally:
            await browser.close()


@pytest.fixture(autouse=True)
def need_chromium():
    if CHROMIUM is None:
        pytest.fail("Chromium is not installed: run `make setup`")


def test_quick_preset_fits_community_cloud():
    steps = PRESETS[DEFAULT_PRESET].training.steps  # the page's defaults are the rest of the default preset

    async def scenario(base):
        return await _with_browser(lambda b: train_in_lab(b, base, seed=1337, steps=steps, timeout_s=600))

    seen, peak_mb, wall = run_with_server(scenario)
    record("quick_preset_one_reader", {"peak_rss_mb": round(peak_mb, 1), "wall_s": round(wall, 1), **seen})
    assert seen["seed_shown"] == "1337"
    assert seen["crossing"], "the quick preset must end below the bigram line, and the page must say when"
    assert peak_mb < 690, f"peak RSS {peak_mb:.0f} MB"


def test_five_readers_two_training():
    steps = 40

    async def scenario(base):
        async def all_readers(browser):
            return await asyncio.gather(
                train_in_lab(browser, base, seed=11, steps=steps, timeout_s=600, extra="&lab_batch=16"),
                train_in_lab(browser, base, seed=22, steps=steps, timeout_s=600, extra="&lab_batch=16"),
                move_slider_reader(browser, base, "self-attention", "?sa_scale=42.0&sa_dtype=float16"),
                move_slider_reader(browser, base, "causal-mask", ""),
                move_slider_reader(browser, base, "positional-encodings", ""),
            )

        return await _with_browser(all_readers)

    (a, b, r1, r2, r3), peak_mb, wall = run_with_server(scenario)
    record("five_readers_two_training", {"peak_rss_mb": round(peak_mb, 1), "wall_s": round(wall, 1),
                                         "trainers": [a, b], "readers": [r1, r2, r3]})
    # every session completed, each with its own inputs and model
    assert (a["seed_shown"], b["seed_shown"]) == ("11", "22")
    assert "lab_seed=11" in a["url"] and "lab_seed=22" in b["url"]
    assert a["last_eval"] != b["last_eval"], "two seeds must give two different models"
    assert r1["before"] == "42" or r1["before"].startswith("42"), r1
    assert "sa_dtype=float16" in r1["url"]
    for r in (r1, r2, r3):
        assert r["after"] != r["before"], r
        assert "lab_seed" not in r["url"]
    assert peak_mb < 2700, f"peak RSS {peak_mb:.0f} MB"
