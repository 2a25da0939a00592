"""Page 3's diagram: the causal mask applied two ways (−∞ before the softmax; zero and renormalise after)."""

from __future__ import annotations

from dataclasses import dataclass

from engine import palette as P
from engine.diagrams.core import (
    CheckedLabels,
    CheckedShapes,
    Dot,
    Html,
    Shape,
    arrow_label,
    esc,
    flow,
    node_label,
    op_node,
    shape_text,
    tensor_node,
)

#: Largest mask drawn inside the causal-mask boxes (a min(T, MASK_ICON) square).
MASK_ICON = 4
#: Point size of the −∞ / 0 written in a mask icon's cells: 9 CSS px or more where the diagram is drawn at its
#: own size or a little under it.
ICON_PT = 8
#: The two routes, each of which :func:`causal_mask` can draw alone (a phone's narrow column).
ROUTES = ("renorm", "masked")


def _matrix_icon(n: int, above: str, above_fill: str, below_fill: str) -> str:
    """An n×n grid: cells above the diagonal hold ``above`` on ``above_fill``, the rest are plain."""
    rows = []
    for i in range(n):
        cells = []
        for j in range(n):
            masked = j > i
            fill = above_fill if masked else below_fill
            text = (f'<FONT COLOR="{P.text_colour(fill)}" POINT-SIZE="{ICON_PT}">{esc(above)}</FONT>'
                    if masked else "")
            cells.append(f'<TD BGCOLOR="{fill}" WIDTH="24" HEIGHT="15" FIXEDSIZE="TRUE">{text}</TD>')
        rows.append("<TR>" + "".join(cells) + "</TR>")
    return ('<TABLE BORDER="0" CELLBORDER="1" CELLSPACING="0" CELLPADDING="0" COLOR="#777777">'
            + "".join(rows) + "</TABLE>")


def _icon_op(title: str, sub: str | None, icon: str) -> Html:
    """An operation's label with a small picture under its title."""
    return Html(f'<TABLE BORDER="0" CELLBORDER="0" CELLSPACING="2"><TR><TD>{node_label(title, sub)}</TD></TR>'
                 f"<TR><TD>{icon}</TD></TR></TABLE>")


@dataclass(frozen=True)
class CausalMaskLabels(CheckedLabels):
    """Words of page 3's diagram.

    Attributes:
        attn_scores: the (T, T) scores both routes start from.
        masked_route, renormalise_route: titles of the two routes (−∞ before the softmax;
            zero and renormalise after it).
        mask: the masked_fill of −∞ above the diagonal.
        softmax: the softmax (its scale ÷ √d_k is written under it).
        zero_future: multiplying by the lower-triangular mask (future weights become 0).
        row_sums: dividing each row by its sum.
        attn_weights: the causal weights each route ends with.
        same: the dashed line between the two results (they are equal).
    """

    attn_scores: str
    masked_route: str
    renormalise_route: str
    mask: str
    softmax: str
    zero_future: str
    row_sums: str
    attn_weights: str
    same: str


@dataclass(frozen=True)
class CausalMaskShapes(CheckedShapes):
    """Shapes of page 3 (the keys of ``sections.causal_mask.mask_two_ways``): attn_scores, mask,
    masked_scores, attn_weights_causal, attn_weights (softmax of all scores), masked_simple,
    masked_simple_norm (T, T) each; row_sums (T, 1), the divisor as it ran; d_k, the size in the √d_k scale."""

    attn_scores: Shape
    mask: Shape
    masked_scores: Shape
    attn_weights_causal: Shape
    attn_weights: Shape
    masked_simple: Shape
    row_sums: Shape
    masked_simple_norm: Shape
    d_k: int


def causal_mask(labels: CausalMaskLabels, shapes: CausalMaskShapes, rankdir: str = "TB",
                route: str | None = None) -> str:
    """Scores → softmax → zero the future → ÷ row sums (the naive route, first as on the page), beside scores → mask
    (−∞ above the diagonal) → softmax.

    Both routes give the same weights (the chapter's section "applying a causal attention
    mask"). Each mask box draws a min(T, 4) square of the mask it applies.

    Args:
        route: None draws both routes side by side; "masked" or "renorm" (:data:`ROUTES`) draws that route
            alone, half as wide, for a phone (the two stacked read as the pair, without shrinking their text).

    Returns:
        DOT source (str).

    Raises:
        ValueError: for an unknown rankdir or route, or a d_k < 1.
    """
    if route is not None and route not in ROUTES:
        raise ValueError(f"route must be None or one of {ROUTES}, got {route!r}")
    n = max(1, min(shapes.attn_scores[0] if shapes.attn_scores else 1, MASK_ICON))
    scale = f"÷ √{shapes.d_k}"
    dot = Dot(rankdir)
    scores = tensor_node(dot, "scores", labels.attn_scores, shape_text(shapes.attn_scores), P.ATTN_SCORES)
    if route in (None, "renorm"):
        with dot.cluster("renorm", labels.renormalise_route):
            soft_b = op_node(dot, "softmax_b", labels.softmax, scale, P.ATTN_WEIGHTS)
            zero = op_node(dot, "zero", _icon_op(labels.zero_future, None,
                                             _matrix_icon(n, "0", P.lighten(P.MASK, 0.8), P.PAPER)), colour=P.MASK)
            divide = op_node(dot, "divide", labels.row_sums, "÷ " + shape_text(shapes.row_sums), P.ATTN_WEIGHTS)
        out_b = tensor_node(dot, "weights_b", labels.attn_weights, shape_text(shapes.masked_simple_norm),
                            P.ATTN_WEIGHTS)
        flow(dot, scores, soft_b, shape=shapes.attn_scores, colour=P.ATTN_SCORES)
        flow(dot, soft_b, zero, shape=shapes.attn_weights, colour=P.ATTN_WEIGHTS)
        flow(dot, zero, divide, shape=shapes.masked_simple, colour=P.ATTN_WEIGHTS)
        flow(dot, divide, out_b, shape=shapes.masked_simple_norm, colour=P.ATTN_WEIGHTS)
    if route in (None, "masked"):
        with dot.cluster("masked", labels.masked_route):
            mask = op_node(dot, "mask", _icon_op(labels.mask, shape_text(shapes.mask),
                                             _matrix_icon(n, "−∞", P.NEG_INF, P.PAPER)), colour=P.MASK)
            soft_a = op_node(dot, "softmax_a", labels.softmax, scale, P.ATTN_WEIGHTS)
        out_a = tensor_node(dot, "weights_a", labels.attn_weights, shape_text(shapes.attn_weights_causal),
                            P.ATTN_WEIGHTS)
        flow(dot, scores, mask, shape=shapes.attn_scores, colour=P.ATTN_SCORES)
        flow(dot, mask, soft_a, "−∞", shapes.masked_scores, P.ATTN_SCORES)
        flow(dot, soft_a, out_a, shape=shapes.attn_weights_causal, colour=P.ATTN_WEIGHTS)
    if route is None:
        dot.same_rank(out_a, out_b)
        dot.edge(out_a, out_b, label=arrow_label(labels.same, None), style="dashed", dir="none", color=P.RESIDUAL,
                 constraint="false")
    return dot.source()
