"""Page 1's diagram: self-attention without trainable weights, for one query."""

from __future__ import annotations

from dataclasses import dataclass

from engine import palette as P
from engine.diagrams.core import CheckedLabels, CheckedShapes, Dot, Shape, flow, op_node, shape_text, tensor_node


@dataclass(frozen=True)
class SelfAttentionLabels(CheckedLabels):
    """Words of page 1's diagram.

    Attributes:
        inputs: the input embeddings (they serve as keys and values).
        query: the selected query token (e.g. its word).
        dot_products: the operation that scores every input against the query.
        softmax: the normalisation into weights.
        weighted_sum: the sum of the inputs weighted by the attention weights.
        context_vec: the result.
        attn_scores, attn_weights: names of the two intermediate tensors on the arrows.
    """

    inputs: str
    query: str
    dot_products: str
    softmax: str
    weighted_sum: str
    context_vec: str
    attn_scores: str
    attn_weights: str


@dataclass(frozen=True)
class SelfAttentionShapes(CheckedShapes):
    """Shapes of page 1: inputs (T, d_in), query (d_in,), attn_scores (T,), attn_weights (T,), context_vec (d_in,)."""

    inputs: Shape
    query: Shape
    attn_scores: Shape
    attn_weights: Shape
    context_vec: Shape


def self_attention(labels: SelfAttentionLabels, shapes: SelfAttentionShapes, rankdir: str = "TB") -> str:
    """Inputs → dot products with the selected query → softmax → weighted sum → context vector.

    The inputs enter twice: as the keys of the dot products (orange arrow) and as the values of
    the weighted sum (green arrow). Chapter section "a simple self-attention mechanism without
    trainable weights".

    Returns:
        DOT source (str).

    Raises:
        ValueError: for an unknown rankdir.
    """
    dot = Dot(rankdir)
    inputs = tensor_node(dot, "inputs", labels.inputs, shape_text(shapes.inputs))
    query = tensor_node(dot, "query", labels.query, shape_text(shapes.query), P.QUERY)
    scores = op_node(dot, "dot", labels.dot_products, "x · q", P.ATTN_SCORES)
    softmax = op_node(dot, "softmax", labels.softmax, None, P.ATTN_WEIGHTS)
    wsum = op_node(dot, "wsum", labels.weighted_sum, "Σ α · x", P.CONTEXT)
    context = tensor_node(dot, "context", labels.context_vec, shape_text(shapes.context_vec), P.CONTEXT)
    flow(dot, inputs, query, shape=shapes.query, colour=P.QUERY)
    flow(dot, inputs, scores, shape=shapes.inputs, colour=P.KEY)
    flow(dot, query, scores, shape=shapes.query, colour=P.QUERY)
    flow(dot, scores, softmax, labels.attn_scores, shapes.attn_scores, P.ATTN_SCORES)
    flow(dot, softmax, wsum, labels.attn_weights, shapes.attn_weights, P.ATTN_WEIGHTS)
    flow(dot, inputs, wsum, shape=shapes.inputs, colour=P.VALUE)
    flow(dot, wsum, context, shape=shapes.context_vec, colour=P.CONTEXT)
    return dot.source()
