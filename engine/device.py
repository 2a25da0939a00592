"""Where and how the engine computes: the device (CUDA, then Apple MPS, then CPU) and the CPU thread count.

PyTorch's intra-op thread count is one setting for the whole process (``torch.set_num_threads``
sets an atomic that every thread reads), so no request may change it: the app and the command-line
tools call :func:`configure_threads` once, at start-up, and nothing else sets it.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import threading

import torch

_configured: int | None = None
_configure_lock = threading.Lock()


def pick_device(override: str | None = None) -> torch.device:
    """The device to compute on.

    Args:
        override: "cuda", "mps" or "cpu" to force one; None picks CUDA, then MPS, then CPU.

    Raises:
        ValueError: if ``override`` names a device that is not available or unknown.
    """
    if override is not None:
        if override not in ("cuda", "mps", "cpu"):
            raise ValueError(f"unknown device {override!r}; use 'cuda', 'mps' or 'cpu'")
        if override == "cuda" and not torch.cuda.is_available():
            raise ValueError("device 'cuda' requested but CUDA is not available")
        if override == "mps" and not torch.backends.mps.is_available():
            raise ValueError("device 'mps' requested but Apple MPS is not available")
        return torch.device(override)
    if torch.cuda.is_available():
        return torch.device("cuda")
    if torch.backends.mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def default_threads(cpu_count: int | None = None) -> int:
    """Intra-op threads for this machine: all cores but one (left to the web server), at least 1.

    On a small shared CPU two threads that wait for each other while another process holds a
    core can run many times slower than one; leaving a core free keeps pages answering.
    """
    cores = os.cpu_count() if cpu_count is None else cpu_count
    return max(1, (cores or 1) - 1)


def configure_threads(n: int | None = None) -> int:
    """Sets PyTorch's intra-op thread count once per process; later calls change nothing.

    Call it at start-up (``app.py``, each ``python -m engine...`` command), never per request.

    Args:
        n: threads for the first call; None uses :func:`default_threads`.

    Returns:
        The thread count now in force (the first call's).

    Raises:
        ValueError: if ``n`` < 1.
    """
    global _configured
    if n is not None and n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    with _configure_lock:
        if _configured is None:
            _configured = default_threads() if n is None else n
            torch.set_num_threads(_configured)
        return _configured


#: glibc's ``mallopt`` parameters: the number of malloc arenas, and the size from which blocks are mmap-ed.
_M_ARENA_MAX = -8
_M_MMAP_THRESHOLD = -3
#: Blocks of 1 MiB and more (tensors, score matrices, logits) get their own mappings, returned to the system when
#: freed. glibc otherwise raises this threshold up to 32 MiB as such blocks come and go, and keeps them in the heap.
MMAP_THRESHOLD = 1 << 20
#: Arenas kept by :func:`configure_malloc`. Streamlit runs every reader in a thread of its own, and glibc gives
#: threads arenas of their own (up to 8 per core), each holding freed memory (docs/architecture.md).
MALLOC_ARENAS = 2


def configure_malloc(arenas: int = MALLOC_ARENAS) -> bool:
    """Caps glibc's malloc arenas and fixes its mmap threshold for the whole process (once, at start-up, like
    the thread count). Fewer arenas hold less freed memory, and blocks from :data:`MMAP_THRESHOLD` up go back to
    the system when freed; the server's peak with each setting is in docs/architecture.md.

    Returns:
        True when the C library took the setting; False elsewhere (macOS, musl), where nothing changes.
    """
    name = ctypes.util.find_library("c")
    if name is None:
        return False
    try:
        mallopt = ctypes.CDLL(name).mallopt
    except (OSError, AttributeError):
        return False
    return bool(mallopt(_M_ARENA_MAX, arenas)) and bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD))


def release_free_memory() -> bool:
    """Hands the C heap's free pages back to the system (glibc ``malloc_trim``); False where unavailable.

    Loading the full Tang corpus and counting its baselines leave freed but still resident heap behind; the
    page calls this once after each such load (docs/architecture.md).
    """
    name = ctypes.util.find_library("c")
    try:
        return bool(ctypes.CDLL(name).malloc_trim(0)) if name else False
    except (OSError, AttributeError):
        return False


def describe_device(device: torch.device) -> str:
    """The device's name, the same in every language: "CUDA (NVIDIA H200)", "Apple MPS" or "CPU".

    The CPU thread count is ``torch.get_num_threads()``; the page words it in the reader's language.
    """
    if device.type == "cuda":
        return f"CUDA ({torch.cuda.get_device_name(device)})"
    if device.type == "mps":
        return "Apple MPS"
    return "CPU"


#: Whether training on a CPU with AMX runs its matmuls under bf16 autocast. Off: the issue's measurements on an AMX
#: machine found the model's matmuls 6-8x faster but a whole step 1.2-1.5x faster in one run and slower in another,
#: and bf16 is adopted only where it is measured faster end to end with the final validation loss within the seeds'
#: spread of fp32 (docs/architecture.md, "Precision"). The machines here have no AMX, so that was not measured.
BF16_ON_AMX = False


def cpu_has_amx(cpuinfo: str | None = None) -> bool:
    """Whether the CPU advertises Intel AMX for bf16 (both ``amx_bf16`` and ``amx_tile`` in /proc/cpuinfo's flags).

    Args:
        cpuinfo: the text of /proc/cpuinfo; None reads it (False where it cannot be read: macOS, Windows).
    """
    if cpuinfo is None:
        try:
            with open("/proc/cpuinfo", encoding="utf-8") as f:
                cpuinfo = f.read()
        except OSError:
            return False
    for line in cpuinfo.splitlines():
        if line.startswith("flags"):
            flags = set(line.split(":", 1)[1].split())
            return {"amx_bf16", "amx_tile"} <= flags
    return False


def training_autocast_dtype(device: torch.device, cpuinfo: str | None = None) -> torch.dtype | None:
    """The dtype a training's forward pass autocasts to on ``device``, chosen at run time from the CPU's flags:
    ``torch.bfloat16`` on a CPU with AMX when :data:`BF16_ON_AMX` is on, else None (float32 throughout)."""
    if device.type != "cpu" or not BF16_ON_AMX:
        return None
    return torch.bfloat16 if cpu_has_amx(cpuinfo) else None
