"""Page 7's diagram: where position information enters attention (added, rotated, biasing the scores, or nowhere)."""

from __future__ import annotations

from dataclasses import dataclass

from engine import palette as P
from engine import positions
from engine.diagrams.core import (
    CheckedLabels,
    CheckedShapes,
    Dot,
    Shape,
    add_node,
    cells,
    flow,
    node_label,
    op_node,
    residual,
    shape_text,
    tensor_node,
)


@dataclass(frozen=True)
class PositionalEncodingsLabels(CheckedLabels):
    """Words of page 7's diagram.

    Attributes:
        tokens: the token ids.
        tok_emb: the token embedding lookup.
        learned, sinusoidal: the position table of each additive kind.
        rope: RoPE's rotation angles (cos, sin per position).
        alibi: ALiBi's bias on the scores (−s_h·(i − j) per head).
        none: the note drawn when no position information enters.
        projections: W_query, W_key, W_value.
        rotate: the rotation of q and k by their positions.
        dot_products: q · kᵀ / √head_dim, where positions finally matter.
    """

    tokens: str
    tok_emb: str
    learned: str
    sinusoidal: str
    rope: str
    alibi: str
    none: str
    projections: str
    rotate: str
    dot_products: str


@dataclass(frozen=True)
class PositionalEncodingsShapes(CheckedShapes):
    """Shapes of page 7: idx (B, T); tok_emb and x (B, T, n_embd); q, k (B, n_head, T, head_dim);
    attn_scores (B, n_head, T, T); pos_table (T, n_embd) for "learned" and "sinusoidal", else None;
    rope (T, head_dim // 2), the shape of RoPE's cos (and sin) table, for "rope", else None; bias
    (n_head, T, T), ALiBi's score bias, for an encoding that biases the scores, else None; qkv
    (3 * n_embd, n_embd), the weight of the one linear layer ``qkv`` that computes q, k and v at once (the lesson's
    ``self.qkv``), read from the module that ran; None draws the box without its size."""

    idx: Shape
    tok_emb: Shape
    x: Shape
    q: Shape
    k: Shape
    attn_scores: Shape
    pos_table: Shape | None = None
    rope: Shape | None = None
    bias: Shape | None = None
    qkv: Shape | None = None


def positional_encodings(labels: PositionalEncodingsLabels, shapes: PositionalEncodingsShapes, pos_encoding: str,
                         rankdir: str = "TB") -> str:
    """Where position information enters: added to the embedding, rotating q and k, biasing the scores, or nowhere.

    What is drawn is what the encoding's record says (``engine.positions.ENCODINGS``): a table (learned, GPT-2;
    sinusoidal, Vaswani et al., 2017) is added to the token embeddings; "rope" (Su et al., 2021) rotates each
    head's q and k by angles that grow with the position; "alibi" (Press, Smith & Lewis, 2022) adds −s_h·(i − j)
    to each head's scores; "none" gives the model no position at all.

    Args:
        pos_encoding: a key of ``engine.positions.ENCODINGS``.

    Returns:
        DOT source (str).

    Raises:
        ValueError: for an unknown pos_encoding or rankdir, or when the shape this encoding
            draws (pos_table, rope or bias) is missing.
    """
    enc = positions.encoding(pos_encoding)
    if enc.adds_table and shapes.pos_table is None:
        raise ValueError(f"{pos_encoding!r} adds a table: pass shapes.pos_table")
    if enc.rotates_qk and shapes.rope is None:
        raise ValueError(f"{pos_encoding!r} rotates q and k: pass shapes.rope")
    if enc.biases_scores and shapes.bias is None:
        raise ValueError(f"{pos_encoding!r} biases the scores: pass shapes.bias")
    dot = Dot(rankdir)
    idx = tensor_node(dot, "idx", labels.tokens, shape_text(shapes.idx))
    emb = op_node(dot, "tok_emb", labels.tok_emb, "nn.Embedding")
    flow(dot, idx, emb, shape=shapes.idx)
    qkv = (("W_query", P.QUERY), ("W_key", P.KEY), ("W_value", P.VALUE))
    layer = f"qkv = nn.Linear({shapes.qkv[1]}, {shapes.qkv[0]})" if shapes.qkv else None  # weight (out, in)
    proj = op_node(dot, "proj", cells(qkv, labels.projections, layer))
    if enc.adds_table:
        title = labels.learned if enc.trained_table else labels.sinusoidal
        table = tensor_node(dot, "pos", title, shape_text(shapes.pos_table), P.POSITION)
        add = add_node(dot, "add")
        dot.same_rank(emb, table)
        flow(dot, emb, add, shape=shapes.tok_emb)
        flow(dot, table, add, shape=shapes.pos_table, colour=P.POSITION, penwidth=2.5)
        residual(dot, add, proj, "x", shapes.x)
    else:
        residual(dot, emb, proj, "x", shapes.x)
        if not (enc.rotates_qk or enc.biases_scores):
            note = dot.node("none", label=node_label(labels.none, bold=False), shape="box", style="rounded,dashed",
                            color=P.RESIDUAL)
            dot.same_rank(emb, note)
    scores = op_node(dot, "scores", labels.dot_products, "q · kᵀ " + shape_text(shapes.attn_scores), P.ATTN_SCORES)
    if enc.rotates_qk:
        rot_q = op_node(dot, "rot_q", labels.rotate, "q", P.POSITION)
        angles = tensor_node(dot, "angles", labels.rope, "cos/sin " + shape_text(shapes.rope), P.POSITION)
        rot_k = op_node(dot, "rot_k", labels.rotate, "k", P.POSITION)
        dot.same_rank(rot_q, angles, rot_k)
        dot.edge(rot_q, angles, style="invis")  # in a rank, edges order the nodes left to right
        dot.edge(angles, rot_k, style="invis")
        flow(dot, proj, rot_q, "q", shapes.q, P.QUERY)
        flow(dot, proj, rot_k, "k", shapes.k, P.KEY)
        flow(dot, angles, rot_q, colour=P.POSITION, penwidth=2.5)
        flow(dot, angles, rot_k, colour=P.POSITION, penwidth=2.5)
        flow(dot, rot_q, scores, "q", shapes.q, P.QUERY)
        flow(dot, rot_k, scores, "k", shapes.k, P.KEY)
    elif shapes.q == shapes.k:  # two parallel arrows: one label, or the two labels collide
        flow(dot, proj, scores, "q, k", shapes.q, P.QUERY)
        flow(dot, proj, scores, colour=P.KEY)
    else:
        flow(dot, proj, scores, "q", shapes.q, P.QUERY)
        flow(dot, proj, scores, "k", shapes.k, P.KEY)
    if enc.biases_scores:  # the bias joins the scores where they are made, before the softmax
        bias = tensor_node(dot, "bias", labels.alibi, "−s_h·(i − j) " + shape_text(shapes.bias), P.POSITION)
        dot.same_rank(proj, bias)
        flow(dot, bias, scores, "+", colour=P.POSITION, penwidth=2.5)
    return dot.source()
