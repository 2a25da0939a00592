"""What the page being drawn has shown so far, in order: its notebook's content (``ui.notebook``).

Kept per script thread, since readers are threads of one process. ``ui.page.header`` starts the list;
``ui.page.prose``, ``show_code`` and ``check_yourself`` add its prose parts and listings, and ``ui.gates.gate``
the place of each prediction gate (so the notebook asks its exercise there).
"""

from __future__ import annotations

import threading

_recorded = threading.local()


def start(first: tuple) -> None:
    """Begin the record of the page being drawn with ``first``."""
    _recorded.items = [first]


def add(item: tuple) -> None:
    """Add ``("prose", part, slug)``, ``("code", objects)`` or ``("gate", gate_id)`` to the page's record (nothing
    before :func:`start`)."""
    items = getattr(_recorded, "items", None)
    if items is not None:
        items.append(item)


def items() -> tuple[tuple, ...]:
    """The page's record since :func:`start`, in order."""
    return tuple(getattr(_recorded, "items", ()))
