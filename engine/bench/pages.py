"""``python -m engine.bench pages``: per-page script and slider-rerun times, and chart JSON sizes.

Measuring pages means running Streamlit, and ``engine`` never imports Streamlit,
so this sub-command starts ``tools.bench_pages`` in a child process and passes its
arguments through (``--repeats``, ``--json``, ``--page``). With ``--browser`` it starts
``tools.bench_pages_browser`` instead: first paint and input-to-redraw time of every control,
measured in headless Chromium (``--moves``, ``--page``, ``--width``, ``--app-root``, ``--json``).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def main(argv: list[str]) -> int:
    """Run the page benchmark in a child interpreter; returns its exit status."""
    if "--browser" in argv:
        rest = [a for a in argv if a != "--browser"]
        return subprocess.call([sys.executable, "-m", "tools.bench_pages_browser", *rest], cwd=ROOT)
    return subprocess.call([sys.executable, "-m", "tools.bench_pages", *argv], cwd=ROOT)
