"""The prediction gates' records, and each page's gates in one module per page slug (``ui/questions/<slug>.py``,
a tuple ``GATES``); :mod:`ui.gates` draws them.

Each gate is a :class:`Gate` record: its words are message ids, its answer a call into the page's engine section,
the same one the page's live block draws from.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from engine import positions


@dataclass(frozen=True)
class Kind:
    """A kind of gate: ``typed`` ones take a number in a text box, the others one option among a few."""

    name: str
    typed: bool


NUMBER = Kind("number", typed=True)
CHOICE = Kind("choice", typed=False)
#: An order or a sign ("up or down", "which grows"): options, like a choice.
ORDER = Kind("order", typed=False)
KINDS = (NUMBER, CHOICE, ORDER)



@dataclass(frozen=True)
class Option:
    """One answer of a choice or order gate.

    Attributes:
        key: the option's stable name (what :attr:`Gate.answer` returns for the right one).
        label: what the reader reads (a message id; may hold the question's placeholders).
        feedback: one sentence on why it is right or wrong (a message id; same placeholders).
    """

    key: str
    label: str
    feedback: str



def encoding_options(words: dict[positions.PositionEncoding, tuple[str, str]]) -> tuple[Option, ...]:
    """One option per position encoding, keyed by its record's key, for a gate whose answer is an encoding.

    Args:
        words: {record of ``engine.positions.ENCODINGS``: (label, feedback) message ids}, every record in the
            registry's order, so that a new encoding cannot be left out of a question that names them all.

    Raises:
        ValueError: ``words`` misses a record, holds another one, or lists them in another order.
    """
    if list(words) != list(positions.ENCODINGS):
        raise ValueError(f"encoding options must list {[e.key for e in positions.ENCODINGS]} in this order, "
                         f"got {[getattr(e, 'key', e) for e in words]}")
    return tuple(Option(enc.key, label, feedback) for enc, (label, feedback) in words.items())


@dataclass(frozen=True)
class Gate:
    """One prediction gate.

    Attributes:
        id: unique across the app (``sa_self_weight``); names its widgets and its row in the record.
        page: the page's slug (``ui.nav``).
        kind: :data:`NUMBER`, :data:`CHOICE` or :data:`ORDER`.
        question: the question (a message id with named placeholders from :attr:`words`).
        answer: the engine call: ``answer(**controls)`` -> the live value (a float for a number, the right
            option's key otherwise). It calls the same engine function as the page's live block.
        defaults: ``defaults()`` -> the controls a first visit has (retrieval questions and tests use them).
        words: ``words(**controls)`` -> the placeholders of the question and options (floats are written with
            :attr:`decimals`, ints as counts, in the reader's format).
        tolerance: a number guess within ``tolerance`` of the value counts as right (absolute; 0 for a count).
        decimals: decimals of the value as shown.
        options: a choice's or order's answers, in the order shown.
        note: one sentence shown after the reveal of a number gate (a message id), or "".
        recall: asked again at the top of later pages (:func:`ui.gates.retrieval`); False for a gate whose first
            visit's answer takes seconds of compute (a model sweep), which a later page should not pay for.
        exercise: the gate as an exercise of the page's notebook (``ui.notebook.exercises``): ``(parameter,
            expression)`` for each parameter of :attr:`answer`, a Python expression that gives it from the
            notebook's settings and the names of the page's recipes module (``engine/notebooks/<slug>.py``) or of
            :attr:`answer`'s module; :attr:`answer` is then an engine function, which the notebook carries and
            runs. ``()``: the notebook does not ask it (the Lab's gates, answered by the shipped runs).
    """

    id: str
    page: str
    kind: Kind
    question: str
    answer: Callable[..., Any]
    defaults: Callable[[], dict]
    words: Callable[..., dict] = field(default=lambda **_controls: {})
    tolerance: float = 0.0
    decimals: int = 4
    options: tuple[Option, ...] = ()
    note: str = ""
    recall: bool = True
    exercise: tuple[tuple[str, str], ...] = ()

    def __post_init__(self):
        if self.kind.typed == bool(self.options):
            raise ValueError(f"gate {self.id}: a number gate has no options, a choice has some")

    def option(self, key: str) -> Option:
        """The option named ``key``; raises ``KeyError`` for another name."""
        for o in self.options:
            if o.key == key:
                return o
        raise KeyError(key)


#: The pages that have gates, in reading order (their modules sit beside this file).
GATED_PAGES = ("self_attention", "trainable_weights", "causal_mask", "dropout", "multi_head", "memory_layout",
               "positional_encodings", "lab")


@functools.cache
def by_page(slug: str) -> tuple[Gate, ...]:
    """The gates of page ``slug`` in the order the page asks them; ``()`` for a page without gates."""
    if slug not in GATED_PAGES:
        return ()
    return importlib.import_module(f"ui.questions.{slug}").GATES


def every_gate() -> tuple[Gate, ...]:
    """Every gate of the app, page by page."""
    return tuple(g for slug in GATED_PAGES for g in by_page(slug))
