"""The project's colours: one colour per kind of tensor, the same in every diagram and heatmap.

Colours come from the Okabe–Ito palette (Okabe & Ito, "Color Universal Design", 2008), whose
eight colours stay distinguishable for protanopic, deuteranopic and tritanopic readers; two
roles that need more than eight take a neutral grey and Paul Tol's "wine" (Tol, "Colour
schemes", SRON technical note, 2021), which differs from the Okabe–Ito purple by lightness.
A colour is never the only cue: every diagram also writes the tensor's name in its node.

Colours are ``#RRGGBB`` strings, usable by Plotly and by Graphviz alike. The two continuous
scales are Plotly colorscales (tuples of ``(position, colour)`` pairs, positions 0 … 1).
No Streamlit here; the diagrams (``engine.diagrams``) and the figures read these names.
"""

from __future__ import annotations

import re

# -- One colour per role --------------------------------------------------------------------------

#: Queries (q, W_query): Okabe–Ito reddish purple.
QUERY = "#CC79A7"
#: Keys (k, W_key): Okabe–Ito orange.
KEY = "#E69F00"
#: Values (v, W_value): Okabe–Ito bluish green.
VALUE = "#009E73"
#: Attention scores (q·k, before the softmax; signed): Okabe–Ito vermillion, the positive end of SIGNED_SCALE.
ATTN_SCORES = "#D55E00"
#: Attention weights (after the softmax, in [0, 1]): Okabe–Ito blue, the top of WEIGHTS_SCALE.
ATTN_WEIGHTS = "#0072B2"
#: The causal mask and the −∞ it writes into the scores: Okabe–Ito black (nothing gets through).
MASK = "#000000"
#: −∞ in a score matrix: drawn in the mask's colour, since only the mask writes it.
NEG_INF = MASK
#: Context vectors (weights @ values): Okabe–Ito sky blue.
CONTEXT = "#56B4E9"
#: The residual stream of a Transformer block (the x that every sub-layer adds into): a light neutral
#: grey, drawn thick. Light rather than mid grey: a mid grey (#999999) has QUERY's lightness and,
#: seen with deuteranopia, nearly its colour.
RESIDUAL = "#BBBBBB"
#: Dropout (the zeroed entries and the 1/(1−p) scale of the survivors): Okabe–Ito yellow.
DROPOUT = "#F0E442"
#: Position information (learned or sinusoidal table, RoPE's rotation): Paul Tol's wine, dark enough
#: to stay apart from QUERY's light purple.
POSITION = "#882255"
#: The alternative a figure sets beside the chapter's choice, to show why the chapter chose otherwise: dividing by
#: the sum beside the softmax (page 1), scores without the 1/√d_k scale beside the scaled ones and torch.rand's
#: initialisation beside nn.Linear's (page 2). A dark neutral grey that is no tensor's colour, so "without scale"
#: never borrows KEY's orange; the chapter's choice keeps its tensor's colour (ATTN_SCORES, ATTN_WEIGHTS).
ALTERNATIVE = "#6F6F6F"
#: Text, arrows and the outline of plain tensors (inputs, embeddings): black.
INK = "#000000"
#: Background of every diagram: white (Graphviz charts do not follow Streamlit's theme).
PAPER = "#FFFFFF"

#: Categorical colours for series without a role of their own (one per head, per run), in the
#: Okabe–Ito order; an eighth series and beyond repeats from the start.
SERIES = (ATTN_WEIGHTS, KEY, VALUE, ATTN_SCORES, QUERY, CONTEXT, DROPOUT, INK)

_HEX = re.compile(r"#[0-9A-Fa-f]{6}")


def _rgb(colour: str) -> tuple[int, int, int]:
    if not isinstance(colour, str) or not _HEX.fullmatch(colour):
        raise ValueError(f"expected a '#RRGGBB' colour, got {colour!r}")
    return int(colour[1:3], 16), int(colour[3:5], 16), int(colour[5:7], 16)


def mix(colour: str, other: str, amount: float) -> str:
    """``colour`` moved ``amount`` (0 … 1) of the way to ``other``, as ``#RRGGBB``.

    Raises:
        ValueError: for a colour that is not ``#RRGGBB`` or an amount outside [0, 1].
    """
    if not 0.0 <= amount <= 1.0:
        raise ValueError(f"amount must be in [0, 1], got {amount!r}")
    a, b = _rgb(colour), _rgb(other)
    return "#" + "".join(f"{round(x + (y - x) * amount):02X}" for x, y in zip(a, b, strict=True))


def lighten(colour: str, amount: float) -> str:
    """``colour`` mixed with white: 0 keeps it, 1 gives white (fills behind black text)."""
    return mix(colour, PAPER, amount)


def darken(colour: str, amount: float) -> str:
    """``colour`` mixed with black: 0 keeps it, 1 gives black (outlines of light colours)."""
    return mix(colour, INK, amount)


def relative_luminance(colour: str) -> float:
    """WCAG 2.1 relative luminance of ``colour``, 0 (black) … 1 (white)."""
    def channel(c: int) -> float:
        s = c / 255
        return s / 12.92 if s <= 0.04045 else ((s + 0.055) / 1.055) ** 2.4

    r, g, b = (channel(c) for c in _rgb(colour))
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast_ratio(a: str, b: str) -> float:
    """WCAG 2.1 contrast ratio between two colours, 1 … 21 (4.5 is the minimum for body text)."""
    la, lb = sorted((relative_luminance(a), relative_luminance(b)), reverse=True)
    return (la + 0.05) / (lb + 0.05)


def text_colour(fill: str) -> str:
    """INK or PAPER, whichever reads better on ``fill``."""
    return INK if contrast_ratio(fill, INK) >= contrast_ratio(fill, PAPER) else PAPER


# -- Continuous scales (Plotly) --------------------------------------------------------------------

#: Sequential scale for attention weights in [0, 1]: white for 0, ATTN_WEIGHTS for 1. The middle
#: stop is the straight mix, written out so Plotly does not pass through grey.
WEIGHTS_SCALE = (
    (0.0, PAPER),
    (0.5, lighten(ATTN_WEIGHTS, 0.5)),
    (1.0, ATTN_WEIGHTS),
)
#: The dark end of SIGNED_SCALE: ATTN_WEIGHTS darkened by a fifth, so a negative value is not read as a weight of 1.
NEGATIVE = darken(ATTN_WEIGHTS, 0.2)
#: Diverging scale for signed values (scores, differences, embeddings); use with zmid=0. Negative
#: values go to NEGATIVE's dark blue, positive ones to ATTN_SCORES' vermillion, zero is white: blue
#: against orange-red is the pair that every common colour-vision deficiency keeps apart.
SIGNED_SCALE = (
    (0.0, NEGATIVE),
    (0.25, lighten(NEGATIVE, 0.5)),
    (0.5, PAPER),
    (0.75, lighten(ATTN_SCORES, 0.5)),
    (1.0, ATTN_SCORES),
)
