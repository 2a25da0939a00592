"""Screenshots of pages of a running app, for looking at them: ``python -m tools.screenshots URL_PATH ...``.

Streamlit renders over a websocket and scrolls inside its own container, so a
plain ``chromium --screenshot`` often catches a blank page; this waits for the
charts and uses a tall viewport. Start the app first (``streamlit run app.py``).
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("paths", nargs="+", help="url paths, e.g. self-attention dropout")
    parser.add_argument("--port", type=int, default=8501)
    parser.add_argument("--out", default="runs/screenshots")
    parser.add_argument("--height", type=int, default=5000)
    args = parser.parse_args(argv)
    from playwright.sync_api import sync_playwright

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=shutil.which("chromium"),
                                    args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"])
        for path in args.paths:
            page = browser.new_page(viewport={"width": 1400, "height": args.height})
            page.goto(f"http://127.0.0.1:{args.port}/{path}")
            page.get_by_role("heading", level=1).first.wait_for(timeout=120_000)
            page.wait_for_load_state("networkidle")
            page.wait_for_timeout(2500)
            target = out / f"{path.replace('/', '_') or 'home'}.png"
            page.screenshot(path=str(target))
            print(target)
            page.close()
        browser.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
