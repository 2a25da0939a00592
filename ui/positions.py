"""The position encodings as readers see them: one name, one title and one diagram label per record.

Every page and the Lab take the words for an encoding from here, keyed by the records of
``engine.positions.ENCODINGS`` (whose order they follow), so an encoding is named the same way
everywhere and a new one needs its words once, here (``tests/test_positions_registry.py`` fails
when a record has none).
"""

from __future__ import annotations

from engine import positions
from engine.positions import ALIBI, LEARNED, NONE, ROPE, SINUSOIDAL, PositionEncoding
from ui.i18n import N_, _

#: The short name in charts, tables and selectors (the code's keys stay in the code listings).
NAMES: dict[PositionEncoding, str] = {
    NONE: N_("none"),
    LEARNED: N_("learned"),
    SINUSOIDAL: N_("sinusoidal"),
    ROPE: N_("RoPE"),
    ALIBI: N_("ALiBi"),
}
#: The title of a panel given to one encoding: its name and what it does.
TITLES: dict[PositionEncoding, str] = {
    NONE: N_("none: no position"),
    LEARNED: N_("learned: table added to the embedding"),
    SINUSOIDAL: N_("sinusoidal: fixed table added"),
    ROPE: N_("RoPE: q and k rotated"),
    ALIBI: N_("ALiBi: distance bias on the scores"),
}
#: The box standing for the encoding in a diagram of the model.
PARTS: dict[PositionEncoding, str] = {
    NONE: N_("no position information"),
    LEARNED: N_("learned position table"),
    SINUSOIDAL: N_("sinusoidal position table"),
    ROPE: N_("RoPE (rotates q and k)"),
    ALIBI: N_("ALiBi (biases the scores by distance)"),
}


def _words(table: dict[PositionEncoding, str], key: str) -> str:
    try:
        return _(table[positions.encoding(key)])
    except ValueError:  # not an encoding (an old file, a crafted value): shown as it is, never looked up again
        return key


def name(key: str) -> str:
    """The reader's-language name of the encoding ``key`` (a ``GPTConfig.pos_encoding``); an unknown key as is."""
    return _words(NAMES, key)


def title(key: str) -> str:
    """The reader's-language title (name and what it does) of the encoding ``key``; an unknown key as is."""
    return _words(TITLES, key)


def part(key: str) -> str:
    """The reader's-language label of the encoding's box in a model diagram; an unknown key as is."""
    return _words(PARTS, key)


def names() -> dict[str, str]:
    """{key: name in the reader's language} of every encoding, in the registry's order."""
    return {enc.key: _(NAMES[enc]) for enc in positions.ENCODINGS}


def titles() -> dict[str, str]:
    """{key: title in the reader's language} of every encoding, in the registry's order."""
    return {enc.key: _(TITLES[enc]) for enc in positions.ENCODINGS}
