"""Process start-up for the app, once per process: threads, the C heap, and the objects that live as long as it.

:func:`prepare_process` imports the modules the pages use, collects garbage once, then moves every object alive at
that moment into the permanent generation (``gc.freeze``, Python 3.7+): about 250 000 objects of PyTorch, Plotly,
pandas and the engine. Python's own full collections skip them afterwards, so the rare full collection that the
interpreter starts by itself stays short instead of holding the interpreter lock while a reader waits for a
control's last messages.

Streamlit's own full collection after every run (``runner.postScriptGC``) is switched off in
``.streamlit/config.toml``: even with the start-up objects frozen, it walks everything made later (Plotly's and
pandas' lazily built classes, the caches) on every slider move. What both cost is measured in docs/architecture.md
("A server entry point beside the app script"; ``python -m engine.bench pages --browser``).

Without it, garbage that only the cycle collector frees (a Plotly figure and its traces point at each other) waits
for the interpreter's own thresholds, which in a long-lived server rarely reach the oldest generation: a class of
readers left it to pile up. :func:`collect_garbage` is that collection outside every reader's run: ``serve.py``'s
start-up hook calls it from a worker thread every ``COLLECT_EVERY_S`` seconds, then hands the C heap's free pages
back to the system.
"""

from __future__ import annotations

import gc
import importlib
import pkgutil
import threading
from dataclasses import dataclass

import engine
from engine.device import configure_malloc, configure_threads, release_free_memory

#: Seconds between two collections of the server's garbage (:func:`collect_garbage`, from ``serve.py``).
COLLECT_EVERY_S = 10.0
#: Engine modules that are only commands (``python -m engine.train``), never imported by a page.
COMMANDS = ("engine.train",)


@dataclass(frozen=True)
class Startup:
    """What :func:`prepare_process` did (the first call's values; later calls return the same object).

    Attributes:
        threads: PyTorch intra-op threads now in force.
        malloc_configured: whether glibc took the arena and mmap-threshold settings.
        modules: engine modules imported, sorted.
        frozen: objects moved to the permanent generation by ``gc.freeze`` (``gc.get_freeze_count()``).
    """

    threads: int
    malloc_configured: bool
    modules: tuple[str, ...]
    frozen: int


_lock = threading.Lock()
_startup: Startup | None = None


def page_modules() -> tuple[str, ...]:
    """Names of every engine module a page may import: the package walked, commands (``__main__``,
    :data:`COMMANDS`) left out. Imports each package on the way (``pkgutil.walk_packages``)."""
    names = []
    for info in pkgutil.walk_packages(engine.__path__, "engine."):
        name = info.name
        if name.endswith(".__main__") or name in COMMANDS:
            continue
        names.append(name)
    return tuple(sorted(names))


def prepare_process() -> Startup:
    """Once per process, before the first page runs: threads, C heap, page modules imported, objects frozen.

    Call it from ``app.py`` on every run; only the first call does anything (a lock keeps two first readers
    from doing it twice), so no reader's request changes process-wide state after start-up.

    Returns:
        The :class:`Startup` of the first call.

    Raises:
        ImportError: if an engine module cannot be imported (a broken install; the app could not run anyway).
    """
    global _startup
    with _lock:
        if _startup is None:
            threads = configure_threads()  # cores - 1, the rest for the server
            malloc = configure_malloc()  # readers are threads: fewer malloc arenas, big blocks returned at once
            modules = page_modules()
            for name in modules:
                importlib.import_module(name)
            gc.collect()
            gc.freeze()
            _startup = Startup(threads=threads, malloc_configured=malloc, modules=modules,
                               frozen=gc.get_freeze_count())
        return _startup


def collect_garbage() -> int:
    """One full collection of the garbage made since start-up (the frozen start-up objects are skipped), then the
    C heap's free pages handed back to the system (:func:`engine.device.release_free_memory`).

    Called by the server every :data:`COLLECT_EVERY_S` seconds from a thread of its own, never from a reader's
    run; it holds the interpreter lock while it walks the objects.

    Returns:
        The number of unreachable objects found (``gc.collect()``).
    """
    found = gc.collect()
    release_free_memory()
    return found
