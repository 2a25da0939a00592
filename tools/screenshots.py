"""Screenshots of pages of a running app, for looking at them: ``python -m tools.screenshots URL_PATH ...``.

Streamlit renders over a websocket and scrolls inside its own container, so a
plain ``chromium --screenshot`` often catches a blank page; this waits for the
charts, then grows the viewport to the height of the page's content and takes it
whole. Start the app first (``streamlit run serve.py``).

``--all`` takes every page of the registry; ``--width 390`` is a phone;
``--lang fr`` opens the pages in French; ``--jpeg`` writes smaller JPEG files (the
README's and the issue notes' screenshots in ``docs/screenshots``).
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

from ui.nav import PAGES

#: Tallest screenshot taken (px): a phone-width page runs to about 30 000 px; JPEG stops at 65 535.
MAX_HEIGHT = 40_000


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("paths", nargs="*", help="url paths, e.g. self-attention dropout ('' is Home)")
    parser.add_argument("--all", action="store_true", help="every page of the registry")
    parser.add_argument("--port", type=int, default=8501)
    parser.add_argument("--out", default="runs/screenshots")
    parser.add_argument("--width", type=int, default=1400, help="viewport width in px (390: a phone)")
    parser.add_argument("--lang", choices=("en", "fr", "de"), default=None, help="the page's language (?lang=)")
    parser.add_argument("--jpeg", action="store_true", help="JPEG at quality 70 instead of PNG")
    args = parser.parse_args(argv)
    from playwright.sync_api import sync_playwright

    paths = [info.url_path for info in PAGES] if args.all else args.paths
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    query = f"?lang={args.lang}" if args.lang else ""
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=shutil.which("chromium"),
                                    args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"])
        for path in paths:
            page = browser.new_page(viewport={"width": args.width, "height": 1000})
            page.goto(f"http://127.0.0.1:{args.port}/{path}{query}")
            page.get_by_role("heading", level=1).first.wait_for(timeout=120_000)
            page.wait_for_load_state("networkidle")
            # the page grows while its sections arrive and draw: take its height until two readings agree
            height, previous = 0, -1
            for _ in range(8):
                page.wait_for_function("() => !document.querySelector('[data-testid=\"stStatusWidget\"]')",
                                       timeout=120_000)
                page.wait_for_timeout(2000)
                height = page.evaluate("""() => {
                  const main = document.querySelector('[data-testid="stMain"]');
                  return Math.ceil(main ? main.scrollHeight : document.body.scrollHeight);
                }""")
                if height == previous:
                    break
                previous = height
                page.set_viewport_size({"width": args.width, "height": min(max(height, 1000), MAX_HEIGHT)})
            suffix = "jpg" if args.jpeg else "png"
            target = out / f"{path.replace('/', '_') or 'home'}.{suffix}"
            page.screenshot(path=str(target), type="jpeg" if args.jpeg else "png",
                            **({"quality": 70} if args.jpeg else {}))
            print(target, flush=True)
            page.close()
        browser.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
