"""Chapter-style seeding that is safe when several readers use the app at once.

The chapters seed PyTorch's *global* generator (``torch.manual_seed(123)``
followed by ``torch.rand`` or a module's constructor), and the engine keeps that
style so its code reads like the chapter. Streamlit runs each reader's script in
its own thread of one process, so two readers reseeding at the same moment would
interleave draws from the one global generator. :func:`uses_global_rng` makes a
function own the global generator for its whole call: it takes a process-wide
re-entrant lock and forks the generator state, which is restored on return, so
neither the call nor anything outside it sees the other's draws.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import TypeVar

import torch

_LOCK = threading.RLock()
F = TypeVar("F", bound=Callable)


def uses_global_rng(fn: F) -> F:
    """Decorator: run ``fn`` holding the global-RNG lock, inside ``torch.random.fork_rng``.

    The CPU generator is forked (and CUDA's, when CUDA is initialised), so seeds set
    inside ``fn`` do not leak out of it.
    """

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        devices = list(range(torch.cuda.device_count())) if torch.cuda.is_initialized() else []
        with _LOCK, torch.random.fork_rng(devices=devices):
            return fn(*args, **kwargs)

    return wrapper  # type: ignore[return-value]

