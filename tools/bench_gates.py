"""How long a first visit to page 1 takes to draw its first words and its first chart, with the prediction gates on
and off (``?predict=on|off``), in Chromium against one local server; loads alternate on and off, each in a fresh
browser context, after one warm-up load each. Writes ``assets/bench_gates.json``.

    python -m tools.bench_gates --loads 7
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import time
from pathlib import Path

from tools.bench_pages import cpu_name
from tools.bench_pages_browser import LAUNCH_ARGS, free_port, open_timed, start_server
from ui.questions import GATED_PAGES, by_page

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--loads", type=int, default=7, help="loads per setting (the median is reported)")
    parser.add_argument("--width", type=int, default=1440, help="viewport width in px")
    parser.add_argument("--json", default=str(ROOT / "assets" / "bench_gates.json"), help="where to write")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    port = free_port()
    proc = start_server(ROOT, port)
    times: dict[str, list[tuple[float, float]]] = {"on": [], "off": []}
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=shutil.which("chromium"), args=LAUNCH_ARGS)
            for i in range(args.loads + 1):
                for setting in ("on", "off"):
                    context = browser.new_context(viewport={"width": args.width, "height": 900})
                    paint, chart = open_timed(context, f"http://127.0.0.1:{port}/self-attention?predict={setting}")
                    context.close()
                    if i:  # the first load of each setting warms the server's caches
                        times[setting].append((paint, chart))
                    print(f"predict={setting}: first words {paint:.0f} ms, first chart {chart:.0f} ms", flush=True)
            browser.close()
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    result = {
        "what": "first visit to page 1 (/self-attention), fresh browser context each, Chromium, median ms",
        "loads": args.loads, "width": args.width, "machine": cpu_name(),
        "cpus": os.cpu_count(), "load_average": os.getloadavg(), "measured": time.strftime("%Y-%m-%d %H:%M UTC",
                                                                                         time.gmtime()),
        "gates_per_page": {slug: len(by_page(slug)) for slug in GATED_PAGES},
        **{f"predict_{s}": {"first_words_ms": round(statistics.median(t[0] for t in v)),
                            "first_chart_ms": round(statistics.median(t[1] for t in v))} for s, v in times.items()},
    }
    Path(args.json).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
