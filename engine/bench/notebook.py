"""``python -m engine.bench notebook``: the Lab's notebook, built by the page's button, run top to bottom.

The notebook is built from what the Lab page's download button writes, which takes Streamlit (AppTest), and
``engine`` never imports Streamlit, so this sub-command starts ``tools.bench_notebook`` in a child process and
passes its arguments through (``--lang``, ``--timeout-s``, ``--json``; ``--help`` lists them). It writes
``runs/bench_notebook.json``: the run's time, each cell's, and the losses the training cell printed.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: The child prints the machine and its matmul ceiling itself, measured around the run.
PRINTS_MACHINE = True


def main(argv: list[str]) -> int:
    """Run the notebook benchmark in a child interpreter; returns its exit status."""
    return subprocess.call([sys.executable, "-m", "tools.bench_notebook", *argv], cwd=ROOT)
