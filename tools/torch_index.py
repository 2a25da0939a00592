"""Which PyTorch build ``make`` installs here, as pip arguments: ``python tools/torch_index.py requirements.txt``.

The Makefile runs ``pip install $(python tools/torch_index.py requirements.txt)`` before the rest of
requirements.txt (whose torch pin the installed build then satisfies). The choice:

- ``TORCH=cuda``, or a CUDA GPU on this machine (``/proc/driver/nvidia/gpus`` lists one, or ``nvidia-smi -L``
  does): PyPI's wheel, which on Linux x86-64 is the CUDA build (about 2.9 GB to download).
- ``TORCH=cpu``, or Linux without a CUDA GPU: PyTorch's CPU wheel index (https://download.pytorch.org/whl/cpu,
  about 180 MB), when it answers within ``TIMEOUT_S``; where it cannot be reached, PyPI's wheel, that is what
  pip is set up to find (a local CPU wheel on a prepared machine, PyPI's default build elsewhere).
- Any other system (macOS, Windows): PyPI's wheel, the CPU build there.

The version is the one requirements.txt pins (its ``torch==X`` line). The reason goes to stderr, the pip
arguments to stdout. Standard library only: it runs before the virtual environment holds anything.
"""

from __future__ import annotations

import os
import platform
import re
import shutil
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

#: PyTorch's CPU-only wheel index (PEP 503); ``TORCH_CPU_INDEX`` replaces it (the install tests' stand-in).
CPU_INDEX = "https://download.pytorch.org/whl/cpu"
#: Seconds the CPU index gets to answer before PyPI's wheel is taken instead.
TIMEOUT_S = 5.0
#: The values ``TORCH`` may take; empty or unset means "choose from this machine".
CHOICES = ("", "cpu", "cuda")


@dataclass(frozen=True)
class Choice:
    """One decision: ``index`` is the index URL torch comes from (None: PyPI, as pip is set up), ``reason``
    says why in a line for the person running ``make``."""

    index: str | None
    reason: str


def cuda_gpu(proc: Path = Path("/proc/driver/nvidia"), nvidia_smi: str | None = None) -> bool:
    """Whether this machine has an NVIDIA GPU with its driver loaded.

    ``proc`` is the driver's folder (``gpus/`` holds one entry per GPU); ``nvidia_smi`` the tool's path
    (default: found on PATH), asked with ``-L`` (one "GPU i:" line per GPU, 10 s at most).
    """
    gpus = proc / "gpus"
    if gpus.is_dir() and any(gpus.iterdir()):
        return True
    tool = nvidia_smi if nvidia_smi is not None else shutil.which("nvidia-smi")
    if not tool:
        return False
    try:
        out = subprocess.run([tool, "-L"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return out.returncode == 0 and re.search(r"^GPU \d+:", out.stdout, re.M) is not None


def reachable(url: str, timeout_s: float = TIMEOUT_S) -> bool:
    """Whether ``url`` answers an HTTP HEAD request (status below 400, or 405) within ``timeout_s`` seconds in
    all, name lookup included (the request runs in a thread that is given up on after ``timeout_s``)."""
    answer: list[bool] = []

    def ask() -> None:
        try:
            with urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=timeout_s) as r:
                answer.append(r.status < 400)
        except urllib.error.HTTPError as e:
            answer.append(e.code == 405)
        except (OSError, ValueError):
            answer.append(False)

    thread = threading.Thread(target=ask, daemon=True)
    thread.start()
    thread.join(timeout_s)
    return bool(answer and answer[0])


def choose(torch: str, system: str, gpu: bool, index: str, index_answers) -> Choice:
    """The build to install: ``torch`` is ``TORCH`` ("", "cpu" or "cuda"), ``system`` ``platform.system()``,
    ``gpu`` whether a CUDA GPU is present, ``index`` the CPU index's URL and ``index_answers()`` whether it can
    be reached (asked only when the CPU build is wanted). Raises ValueError for another ``torch``."""
    if torch not in CHOICES:
        raise ValueError(f"TORCH={torch!r}: use TORCH=cpu, TORCH=cuda, or leave it unset")
    if torch == "cuda":
        return Choice(None, "PyPI's build (TORCH=cuda)")
    if torch == "" and system != "Linux":
        return Choice(None, f"PyPI's build ({system}: PyPI's wheel is the CPU build there)")
    if torch == "" and gpu:
        return Choice(None, "PyPI's CUDA build (a CUDA GPU is present; TORCH=cpu for the CPU build)")
    why = "TORCH=cpu" if torch == "cpu" else "Linux without a CUDA GPU"
    if index_answers():
        return Choice(index, f"the CPU build from {index} ({why})")
    return Choice(None, f"PyPI's build: {index} cannot be reached within {TIMEOUT_S:g} s ({why}); pip takes the "
                        "wheel it is set up to find")


def pinned_version(requirements: Path) -> str:
    """The torch version requirements.txt pins on its ``torch==X`` line. Raises ValueError when there is none."""
    found = re.search(r"^torch==([^\s;]+)", requirements.read_text(), re.M)
    if not found:
        raise ValueError(f"{requirements}: no torch==<version> line")
    return found.group(1)


def pip_arguments(choice: Choice, version: str) -> list[str]:
    """The arguments to ``pip install`` for that choice."""
    return (["--index-url", choice.index] if choice.index else []) + [f"torch=={version}"]


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python tools/torch_index.py requirements.txt", file=sys.stderr)
        return 2
    index = os.environ.get("TORCH_CPU_INDEX", CPU_INDEX)
    try:
        choice = choose(os.environ.get("TORCH", ""), platform.system(), cuda_gpu(), index, lambda: reachable(index))
        version = pinned_version(Path(argv[0]))
    except ValueError as e:
        print(f"tools/torch_index.py: {e}", file=sys.stderr)
        return 2
    print(f"PyTorch {version}: {choice.reason}", file=sys.stderr)
    print(" ".join(pip_arguments(choice, version)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
