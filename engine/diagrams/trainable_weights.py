"""Page 2's diagram: the three trainable projections and scaled dot-product attention."""

from __future__ import annotations

from dataclasses import dataclass

from engine import palette as P
from engine.diagrams.core import CheckedLabels, CheckedShapes, Dot, Shape, flow, op_node, shape_text, tensor_node


@dataclass(frozen=True)
class TrainableWeightsLabels(CheckedLabels):
    """Words of page 2's diagram.

    Attributes:
        inputs: x, the input embeddings.
        W_query, W_key, W_value: the three trainable projections.
        query, keys, values: the projected tensors on the arrows.
        dot_products: q · kᵀ.
        scale: division by √d_k.
        softmax, weighted_sum, context_vec: as on page 1.
        attn_scores, attn_weights: names of the intermediate tensors.
    """

    inputs: str
    W_query: str
    W_key: str
    W_value: str
    query: str
    keys: str
    values: str
    dot_products: str
    scale: str
    softmax: str
    weighted_sum: str
    context_vec: str
    attn_scores: str
    attn_weights: str


@dataclass(frozen=True)
class TrainableWeightsShapes(CheckedShapes):
    """Shapes of page 2: inputs (T, d_in); W_query, W_key, W_value (d_in, d_out); query (d_out,) for
    one query or (T, d_out) for all; keys, values (T, d_out); attn_scores, attn_weights (T,) or (T, T);
    context_vec (d_out,) or (T, d_out); d_k, the size in the √d_k scale."""

    inputs: Shape
    W_query: Shape
    W_key: Shape
    W_value: Shape
    query: Shape
    keys: Shape
    values: Shape
    attn_scores: Shape
    attn_weights: Shape
    context_vec: Shape
    d_k: int


def trainable_weights(labels: TrainableWeightsLabels, shapes: TrainableWeightsShapes, rankdir: str = "TB",
                      show_scale: bool = True) -> str:
    """x → W_query / W_key / W_value → q, k, v → attn_scores / √d_k → attn_weights → context_vec.

    Chapter section "implementing self-attention with trainable weights" (scaled dot-product
    attention, Vaswani et al., 2017).

    Args:
        show_scale: write the divisor (``÷ √d_k``) in the scale's box; False writes ``÷ ?``, for a page that asks
            the reader which number it is before it shows it.

    Returns:
        DOT source (str).

    Raises:
        ValueError: for an unknown rankdir or d_k < 1.
    """
    dot = Dot(rankdir)
    x = tensor_node(dot, "x", labels.inputs, shape_text(shapes.inputs))
    wq = op_node(dot, "wq", labels.W_query, shape_text(shapes.W_query), P.QUERY)
    wk = op_node(dot, "wk", labels.W_key, shape_text(shapes.W_key), P.KEY)
    wv = op_node(dot, "wv", labels.W_value, shape_text(shapes.W_value), P.VALUE)
    dot.same_rank(wq, wk, wv)
    scores = op_node(dot, "dot", labels.dot_products, "q · kᵀ", P.ATTN_SCORES)
    scale = op_node(dot, "scale", labels.scale, f"÷ √{shapes.d_k}" if show_scale else "÷ ?", P.ATTN_SCORES)
    softmax = op_node(dot, "softmax", labels.softmax, None, P.ATTN_WEIGHTS)
    wsum = op_node(dot, "wsum", labels.weighted_sum, "Σ α · v", P.CONTEXT)
    context = tensor_node(dot, "context", labels.context_vec, shape_text(shapes.context_vec), P.CONTEXT)
    for w, colour in ((wq, P.QUERY), (wk, P.KEY), (wv, P.VALUE)):
        flow(dot, x, w, shape=shapes.inputs, colour=colour)
    flow(dot, wq, scores, labels.query, shapes.query, P.QUERY)
    flow(dot, wk, scores, labels.keys, shapes.keys, P.KEY)
    flow(dot, scores, scale, labels.attn_scores, shapes.attn_scores, P.ATTN_SCORES)
    flow(dot, scale, softmax, shape=shapes.attn_scores, colour=P.ATTN_SCORES)
    flow(dot, softmax, wsum, labels.attn_weights, shapes.attn_weights, P.ATTN_WEIGHTS)
    flow(dot, wv, wsum, labels.values, shapes.values, P.VALUE)
    flow(dot, wsum, context, shape=shapes.context_vec, colour=P.CONTEXT)
    return dot.source()
