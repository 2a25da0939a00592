"""Page 4's diagram: where dropout acts on the attention weights, in training and in eval mode."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from engine import palette as P
from engine.diagrams.core import (
    CheckedLabels,
    CheckedShapes,
    Dot,
    Html,
    Shape,
    esc,
    flow,
    node_label,
    op_node,
    shape_text,
    tensor_node,
)


@dataclass(frozen=True)
class DropoutLabels(CheckedLabels):
    """Words of page 4's diagram.

    Attributes:
        attn_weights: the causal attention weights (input of dropout).
        dropout: the dropout operation (training only).
        dropped: the fraction p of weights set to 0.
        kept: the survivors, multiplied by 1/(1−p).
        training: the arrow through dropout (model.train()).
        inference: the arrow around it (model.eval(): dropout does nothing).
        values, weighted_sum, context_vec: as on page 2.
        number: writes p, 1 − p and 1/(1 − p) in the reader's number format (``0,5`` in French), with at
            most four significant digits.
    """

    attn_weights: str
    dropout: str
    dropped: str
    kept: str
    training: str
    inference: str
    values: str
    weighted_sum: str
    context_vec: str
    number: Callable[[float], str]


@dataclass(frozen=True)
class DropoutShapes(CheckedShapes):
    """Shapes of page 4: attn_weights (T, T) or (b, T, T); dropped, the weights after dropout (same
    shape); values (T, d_out); context_vec (T, d_out); p, the dropout rate in [0, 1)."""

    attn_weights: Shape
    dropped: Shape
    values: Shape
    context_vec: Shape
    p: float


def _title_lines(title: str) -> tuple[str, str | None]:
    """``"dropout (training only)"`` as ``("dropout", "(training only)")``; a title without one as is."""
    head, sep, rest = title.partition(" (")
    return (head, "(" + rest) if sep else (title, None)


def dropout(labels: DropoutLabels, shapes: DropoutShapes, rankdir: str = "TB") -> str:
    """Where dropout acts: on the attention weights, between the softmax and the weighted sum.

    A fraction p of the weights becomes 0 and the survivors are multiplied by 1/(1−p), so each
    weight keeps its expected value (Srivastava et al., 2014; the chapter's section "masking
    additional attention weights with dropout"). In eval mode the weights pass unchanged.

    Returns:
        DOT source (str).

    Raises:
        ValueError: if p is outside [0, 1), or for an unknown rankdir.
    """
    p = float(shapes.p)
    if not 0.0 <= p < 1.0:
        raise ValueError(f"p must be in [0, 1), got {p!r}")
    dot = Dot(rankdir)
    weights = tensor_node(dot, "weights", labels.attn_weights, shape_text(shapes.attn_weights), P.ATTN_WEIGHTS)
    number = labels.number
    dropped = f"{esc(labels.dropped)}<BR/>{esc(f'p = {number(p)}')}<BR/>{esc('→ 0')}"
    scale = f"× 1/(1 − p) = × {number(1 / (1 - p))}"
    kept = f"{esc(labels.kept)}<BR/>{esc(f'1 − p = {number(1 - p)}')}<BR/>{esc(scale)}"
    table = (
        '<TABLE BORDER="0" CELLBORDER="0" CELLSPACING="3" CELLPADDING="3">'
        # a parenthesis on its own line ("dropout" over "(training only)"): on one line it widened the diagram
        # past a phone's column
        f'<TR><TD>{node_label(*_title_lines(labels.dropout))}</TD></TR>'
        # dropped above kept: side by side they made the diagram too wide for a phone's column
        f'<TR><TD BGCOLOR="{P.lighten(P.MASK, 0.8)}">{dropped}</TD></TR>'
        f'<TR><TD BGCOLOR="{P.lighten(P.DROPOUT, 0.3)}">{kept}</TD></TR>'
        "</TABLE>"
    )
    drop = op_node(dot, "dropout", Html(table), colour=P.DROPOUT)
    values = tensor_node(dot, "values", labels.values, shape_text(shapes.values), P.VALUE)
    wsum = op_node(dot, "wsum", labels.weighted_sum, "Σ α · v", P.CONTEXT)
    context = tensor_node(dot, "context", labels.context_vec, shape_text(shapes.context_vec), P.CONTEXT)
    flow(dot, weights, drop, shape=shapes.attn_weights, colour=P.ATTN_WEIGHTS)
    flow(dot, drop, wsum, labels.training, shapes.dropped, P.ATTN_WEIGHTS)
    flow(dot, weights, wsum, labels.inference, shapes.attn_weights, P.ATTN_WEIGHTS, style="dashed")
    flow(dot, values, wsum, shape=shapes.values, colour=P.VALUE)
    flow(dot, wsum, context, shape=shapes.context_vec, colour=P.CONTEXT)
    return dot.source()
