"""A Lab training in a real browser: a reload takes it over, a shared link opened in another browser does not.

Headless Chromium against a fresh server: the reader starts a long training; the page's URL holds no job token;
the same browser context reloads and gets its Stop button back; a second context (another browser, another
XSRF cookie) opens the very URL the reader would share after closing the tab, and sees no training; a second
tab of the reader's browser cannot queue a second training.
"""

from __future__ import annotations

import pytest

from tests.browser.test_browser import CHROMIUM, LAUNCH_ARGS, free_port, say, start_server, stop_server

pytestmark = pytest.mark.browser


def test_a_reload_takes_the_training_over_and_a_shared_link_does_not():
    if CHROMIUM is None:
        pytest.fail("Chromium is not installed: run `make test` (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    port = free_port()
    server = start_server(port)
    base = f"http://127.0.0.1:{port}"
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_ARGS)
            try:
                reader = browser.new_context(viewport={"width": 1400, "height": 1600})
                page = reader.new_page()
                page.set_default_timeout(180_000)
                page.goto(f"{base}/lab?lab_steps=3000&lab_seed=11", wait_until="domcontentloaded")
                page.get_by_role("button", name="Train", exact=True).click()
                stop = page.get_by_role("button", name="Stop", exact=True)
                stop.wait_for()
                page.wait_for_timeout(1500)
                shared = page.url
                assert "lab_job_token" not in shared and "token" not in shared
                say("lab: training; a second tab of the same browser")
                tab = reader.new_page()
                tab.set_default_timeout(180_000)
                tab.goto(f"{base}/lab?lab_steps=2500&lab_seed=12", wait_until="domcontentloaded")
                tab.get_by_role("button", name="Train", exact=True).click()
                tab.get_by_text("This browser already has a training queued or running").wait_for()
                assert tab.get_by_role("button", name="Stop", exact=True).count() == 0
                tab.close()
                say("lab: reloading the reader's tab")
                page.reload(wait_until="domcontentloaded")
                stop.wait_for()  # the reload in the same browser took the training over
                say("lab: the reader closes the tab; someone else opens the shared link")
                page.close()
                other = browser.new_context(viewport={"width": 1400, "height": 1600}).new_page()
                other.set_default_timeout(180_000)
                other.goto(shared, wait_until="domcontentloaded")
                other.get_by_role("button", name="Train", exact=True).wait_for()
                other.wait_for_timeout(3000)
                assert other.get_by_role("button", name="Stop", exact=True).count() == 0
                assert other.locator('[data-testid="stException"]').count() == 0
                back = reader.new_page()  # the reader comes back within the grace time: still theirs
                back.set_default_timeout(180_000)
                back.goto(shared, wait_until="domcontentloaded")
                back.get_by_role("button", name="Stop", exact=True).click()
                back.get_by_role("button", name="Stop", exact=True).wait_for(state="detached", timeout=120_000)
                assert back.locator('[data-testid="stException"]').count() == 0
            finally:
                browser.close()
    finally:
        stop_server(server)
