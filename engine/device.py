"""Device choice: CUDA when available, else Apple MPS, else CPU."""

from __future__ import annotations

import torch


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


def describe_device(device: torch.device) -> str:
    """Human-readable name, e.g. "CUDA (NVIDIA H200)", "Apple MPS" or "CPU (2 threads)"."""
    if device.type == "cuda":
        return f"CUDA ({torch.cuda.get_device_name(device)})"
    if device.type == "mps":
        return "Apple MPS"
    return f"CPU ({torch.get_num_threads()} threads)"
