"""Page benchmark: wall time of each page's script run and of a slider change, warm, and chart JSON size.

Runs every page of ``ui.nav.PAGES`` inside the app under Streamlit's AppTest (the
same script runner the server uses, without the browser and websocket), so the
times are the server-side cost a reader waits for. Started by
``python -m engine.bench pages``; prints a table and writes JSON.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path

from streamlit.testing.v1 import AppTest

from ui.nav import PAGES

ROOT = Path(__file__).resolve().parent.parent


def cpu_name() -> str:
    """The CPU model from /proc/cpuinfo (Linux), else what platform reports."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _timed_run(at: AppTest) -> float:
    start = time.perf_counter()
    at.run()
    return (time.perf_counter() - start) * 1000


def measure_page(script: str, repeats: int) -> dict:
    """Cold and warm run times (ms), slider-change times (ms) and chart JSON bytes of one page."""
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=300).run()
    start = time.perf_counter()
    at.switch_page(script).run()
    first_ms = (time.perf_counter() - start) * 1000
    if at.exception:
        raise RuntimeError(f"{script} raised: {[e.value for e in at.exception]}")
    warm = [_timed_run(at) for _ in range(repeats)]
    chart_bytes = sum(len(el.proto.spec) for el in at.get("plotly_chart"))
    sliders = [s for s in at.slider if s.key and "train" not in s.key]
    slider_ms: list[float] = []
    slider_key = None
    if sliders:
        slider = sliders[0]
        slider_key = slider.key
        lo, hi, original = slider.min, slider.max, slider.value
        if isinstance(original, (tuple, list)):
            values = [original] * repeats
        else:
            values = [hi if i % 2 == 0 else original for i in range(repeats)]
            if hi == original:
                values = [lo if i % 2 == 0 else original for i in range(repeats)]
        for v in values:
            at.slider(key=slider_key).set_value(v)
            slider_ms.append(_timed_run(at))
    return {
        "page": script,
        "first_run_ms": round(first_ms, 1),
        "warm_run_median_ms": round(statistics.median(warm), 1),
        "slider_key": slider_key,
        "slider_rerun_median_ms": round(statistics.median(slider_ms), 1) if slider_ms else None,
        "chart_json_kb": round(chart_bytes / 1024, 1),
    }


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m engine.bench pages", description=__doc__)
    parser.add_argument("--repeats", type=int, default=7, help="warm runs and slider changes per page")
    parser.add_argument("--json", default="runs/bench_pages.json", help="where to write the results")
    parser.add_argument("--page", action="append", help="only these url paths (repeatable)")
    args = parser.parse_args(argv)
    rows = []
    for info in PAGES:
        if args.page and info.url_path not in args.page:
            continue
        rows.append({"url_path": info.url_path, **measure_page(info.script, args.repeats)})
    header = f"{'page':<22}{'first run ms':>14}{'warm run ms':>13}{'slider ms':>11}{'chart JSON KB':>15}  slider"
    print(f"machine: {cpu_name()}, python {platform.python_version()}")
    print(header)
    print("-" * len(header))
    for r in rows:
        slider = "-" if r["slider_rerun_median_ms"] is None else f"{r['slider_rerun_median_ms']:.1f}"
        print(f"{r['url_path']:<22}{r['first_run_ms']:>14.1f}{r['warm_run_median_ms']:>13.1f}{slider:>11}"
              f"{r['chart_json_kb']:>15.1f}  {r['slider_key'] or '-'}")
    out = Path(args.json)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"machine": cpu_name(), "pages": rows}, indent=2))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
