"""``python -m engine.bench load``: a class of readers on one server, its peak memory and their move times.

A reader is a client of Streamlit's websocket protocol, and ``engine`` never imports Streamlit (its protobuf
classes included), so this sub-command starts ``tools.bench_load`` in a child process and passes its
arguments through (``--readers 10 20 30``, ``--minutes``, ``--trainers``, ``--browser``, ``--think-s``,
``--app-root``, ``--memory-limit-mb``, ``--busy-cores``, ``--profile``, ``--json``; ``--help`` lists them). It writes
``runs/bench_load.json`` with the machine and the load average of every class.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: ``tools.bench_load`` prints the machine itself, from a child interpreter: no process of the benchmark but the
#: server maps PyTorch's library, so the server's reads of it count as its own.
PRINTS_MACHINE = True


def main(argv: list[str]) -> int:
    """Run the load benchmark in a child interpreter; returns its exit status."""
    return subprocess.call([sys.executable, "-m", "tools.bench_load", *argv], cwd=ROOT)
