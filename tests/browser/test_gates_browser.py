"""A prediction gate in Chromium at a phone's width, answered with the keyboard only (Tab to the guess, type it in
the reader's format, Enter): the verdict appears, the chart it guarded is drawn, nothing scrolls sideways."""

from __future__ import annotations

import pytest

from tests.browser.test_browser import (
    CHART,
    CHROMIUM,
    LAUNCH_ARGS,
    PHONE,
    SHOTS,
    free_port,
    say,
    start_server,
    stop_server,
)

pytestmark = pytest.mark.browser

GUESS = 'input[aria-label="Your guess"]'


def test_answer_a_gate_by_keyboard_at_390_px():
    if CHROMIUM is None:
        pytest.fail("Chromium is not installed: run `make test` (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    port = free_port()
    proc = start_server(port)
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_ARGS)
            page = browser.new_page(viewport=PHONE)
            page.goto(f"http://127.0.0.1:{port}/self-attention?lang=en&predict=on", wait_until="domcontentloaded")
            page.locator(GUESS).first.wait_for(timeout=240_000)
            page.wait_for_function("() => !document.querySelector('[data-testid=\"stStatusWidget\"]')",
                                   timeout=240_000)
            assert page.locator('[class*="st-key-sa_steps_chart"]').count() == 0
            steps_chart = page.locator(f'{CHART}').count()
            presses = 0
            while not page.evaluate("() => document.activeElement?.getAttribute('aria-label') === 'Your guess'"):
                page.keyboard.press("Tab")
                presses += 1
                assert presses < 400, "the guess box is not reachable with Tab"
            say(f"guess box reached after {presses} Tab presses")
            page.keyboard.type("0.24")
            page.keyboard.press("Enter")
            verdict = page.get_by_text("Right: you said 0.24, the page computes 0.2379.")
            verdict.wait_for(timeout=240_000)
            page.wait_for_function(f"n => document.querySelectorAll('{CHART}').length > n", arg=steps_chart,
                                   timeout=240_000)
            box = page.locator('[class*="st-key-gate_sa_self_weight"]').first.bounding_box()
            assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= PHONE["width"]
            assert page.evaluate("() => document.documentElement.scrollWidth") <= PHONE["width"]
            SHOTS.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(SHOTS / "phone-gate-self-attention.png"))
            browser.close()
    finally:
        stop_server(proc)
