"""Screenshots of pages of a running app, for looking at them: ``python -m tools.screenshots URL_PATH ...``.

Streamlit renders over a websocket and scrolls inside its own container, so a plain ``chromium --screenshot``
often catches a blank page; this waits as the legibility test does (``tools.legibility.settle``: no run in
progress, every chart drawn, the same height three times while the viewport grows to the page's height), then
takes the page whole. Start the app first (``streamlit run serve.py``), or give ``--url``.

``--all`` takes every page of the registry; ``--width 390`` is a phone; ``--lang fr`` opens the pages in French;
``--webp`` writes WebP files (Pillow, quality 70; JPEG for a page taller than WebP allows), the
screenshots in ``docs/screenshots/phone`` (French, 390 px) and ``docs/screenshots/desktop`` (English, 1400 px);
``--jpeg`` JPEG files.
"""

from __future__ import annotations

import argparse
import io
import sys
import urllib.parse
from pathlib import Path

from PIL import Image

from tools import legibility
from ui.i18n import LANGUAGES
from ui.nav import PAGES

#: Tallest WebP image (px): a taller page (the Lab on a phone) is written as JPEG, which goes to 65 535.
WEBP_MAX = 16_383


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", nargs="*", help="url paths, e.g. self-attention dropout ('' is Home)")
    parser.add_argument("--all", action="store_true", help="every page of the registry")
    parser.add_argument("--port", type=int, default=8501)
    parser.add_argument("--url", help="the running app's address (default: http://127.0.0.1:PORT)")
    parser.add_argument("--out", default="runs/screenshots")
    parser.add_argument("--width", type=int, default=1400, help="viewport width in px (390: a phone)")
    parser.add_argument("--lang", choices=tuple(LANGUAGES), default=None, help="the page's language (?lang=)")
    kind = parser.add_mutually_exclusive_group()
    kind.add_argument("--jpeg", action="store_true", help="JPEG at quality 70 instead of PNG")
    kind.add_argument("--webp", action="store_true", help="WebP at quality 70 instead of PNG")
    args = parser.parse_args(argv)

    base = (args.url or f"http://127.0.0.1:{args.port}").rstrip("/")
    infos = [info for info in PAGES if args.all or info.url_path in args.paths]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    query = f"?{urllib.parse.urlencode({'lang': args.lang})}" if args.lang else ""
    with legibility.chromium() as browser:
        for info in infos:
            page = browser.new_page(viewport={"width": args.width, "height": 1000})
            try:
                page.goto(f"{base}/{info.url_path}{query}", wait_until="domcontentloaded", timeout=120_000)
                legibility.settle(page, 180_000, args.width, min_charts=0 if info.slug == "glossary" else 1)
                height = page.evaluate("() => Math.ceil(document.querySelector('[data-testid=\"stMain\"]')"
                                       ".scrollHeight)")
                page.set_viewport_size({"width": args.width,
                                        "height": min(max(height, 1000), legibility.MAX_HEIGHT)})
                page.wait_for_timeout(500)
                png = page.screenshot(type="png")
            finally:
                page.close()
            name = info.url_path or "home"
            if args.webp or args.jpeg:
                image = Image.open(io.BytesIO(png)).convert("RGB")
                webp = args.webp and image.height <= WEBP_MAX
                target = out / f"{name}.{'webp' if webp else 'jpg'}"
                image.save(target, "WEBP" if webp else "JPEG", quality=70)
            else:
                target = out / f"{name}.png"
                target.write_bytes(png)
            print(target, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
