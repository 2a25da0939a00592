"""Where a benchmark ran, measured in the same run: CPU model, ISA, threads, load, and the matmul ceiling.

Every ``python -m engine.bench ...`` command prints :func:`header_lines` first and stores
:func:`machine_info` (with the ceiling) in its JSON, so a table never travels without the machine
and the fp32 GFLOP/s that machine reached while the table was measured.

Timing uses ``torch.utils.benchmark.Timer`` (:func:`median_seconds`), which synchronises, warms up
and picks how many calls to time per measurement; it is told the current torch thread count
(its own default is 1 thread).
"""

from __future__ import annotations

import os
import platform
from collections.abc import Callable
from pathlib import Path

import torch
from torch.utils import benchmark

from engine.device import describe_device

#: The /proc/cpuinfo flags reported, in this order (the vector units that set fp32 matmul speed).
ISA_FLAGS: tuple[str, ...] = ("avx2", "fma", "avx512f", "avx512_bf16", "avx512_vnni", "amx_tile")


def _cpuinfo() -> str:
    try:
        return Path("/proc/cpuinfo").read_text()
    except OSError:
        return ""


def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo (Linux), else ``platform.processor()``, else "unknown CPU"."""
    for line in _cpuinfo().splitlines():
        if line.lower().startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown CPU"


def isa_flags() -> dict[str, bool]:
    """Which of :data:`ISA_FLAGS` the CPU advertises (all False where /proc/cpuinfo is missing)."""
    flags: set[str] = set()
    for line in _cpuinfo().splitlines():
        if line.startswith("flags"):
            flags = set(line.split(":", 1)[1].split())
            break
    return {name: name in flags for name in ISA_FLAGS}


def torch_cpu_capability() -> str:
    """The vector ISA torch dispatches its CPU kernels to ("AVX512", "AVX2", "DEFAULT", ...)."""
    try:
        return torch.backends.cpu.get_cpu_capability()
    except AttributeError:  # torch < 2.1
        return "unknown"


def load_average() -> float | None:
    """The 1-minute load average, or None where the OS has none."""
    try:
        return os.getloadavg()[0]
    except (OSError, AttributeError):
        return None


def machine_info(device: str | torch.device = "cpu") -> dict:
    """Where the numbers were measured: CPU model, cores, ISA flags, torch's kernel ISA and threads, versions, load,
    and the device computed on.

    The project's one description of a machine: the benchmarks and ``python -m engine.lab.experiments`` store it.

    Args:
        device: the device the numbers come from ("cpu", "cuda", "cuda:1", "mps"); it is named, not checked
            for speed. ``device_name`` is ``engine.device.describe_device``'s ("CPU", "CUDA (NVIDIA H200)").

    Raises:
        RuntimeError: for a device string torch does not parse.
    """
    device = torch.device(device)
    return {
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "isa": isa_flags(),
        "torch_cpu_capability": torch_cpu_capability(),
        "torch_threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cuda": torch.version.cuda,
        "device": device.type,
        "device_name": describe_device(device),
        "load_average_1min": load_average(),
    }


def median_seconds(fn: Callable[[], object], min_run_time: float = 0.3) -> float:
    """Median seconds per call of ``fn``, by ``torch.utils.benchmark.Timer.blocked_autorange``.

    Runs at the current ``torch.get_num_threads()``; ``min_run_time`` is the least total time spent
    measuring (seconds).
    """
    timer = benchmark.Timer(stmt="fn()", globals={"fn": fn}, num_threads=torch.get_num_threads())
    return timer.blocked_autorange(min_run_time=min_run_time).median


def matmul_ceiling(n: int = 1024, min_run_time: float = 0.5) -> float:
    """fp32 GFLOP/s of an (n, n) @ (n, n) matmul (2 n^3 FLOPs) at the current thread count: the ceiling
    every other number of a run is compared with."""
    a = torch.randn(n, n, generator=torch.Generator().manual_seed(0))
    b = torch.randn(n, n, generator=torch.Generator().manual_seed(1))
    out = torch.empty(n, n)
    seconds = median_seconds(lambda: torch.mm(a, b, out=out), min_run_time)
    return 2 * n**3 / seconds / 1e9


def isa_line(machine: dict) -> str:
    """E.g. "avx2 avx512f avx512_bf16 (torch kernels: AVX512)"."""
    present = [name for name, has in machine.get("isa", {}).items() if has]
    return f"{' '.join(present) or 'no AVX2/AVX-512'} (torch kernels: {machine.get('torch_cpu_capability', '?')})"


def header_lines(machine: dict, ceiling_gflops: float | None) -> list[str]:
    """The lines every benchmark prints before its table."""
    load = machine["load_average_1min"]
    lines = [
        (f"machine: {machine['cpu']} · {machine['cores']} cores · torch {machine['torch']} with "
         f"{machine['torch_threads']} thread(s) · load {'?' if load is None else f'{load:.2f}'}"),
        f"ISA: {isa_line(machine)}",
    ]
    if ceiling_gflops is not None:
        lines.append(f"fp32 matmul ceiling, measured in this run: {ceiling_gflops:.1f} GFLOP/s")
    return lines
