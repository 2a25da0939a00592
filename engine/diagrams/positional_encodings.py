"""Page 7's diagram: where position information enters attention (added, rotated, or nowhere)."""

from __future__ import annotations

from dataclasses import dataclass

from engine import palette as P
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
from engine.gpt import POS_ENCODINGS


@dataclass(frozen=True)
class PositionalEncodingsLabels(CheckedLabels):
    """Words of page 7's diagram.

    Attributes:
        tokens: the token ids.
        tok_emb: the token embedding lookup.
        learned, sinusoidal: the position table of each additive kind.
        rope: RoPE's rotation angles (cos, sin per position).
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
    none: str
    projections: str
    rotate: str
    dot_products: str


@dataclass(frozen=True)
class PositionalEncodingsShapes(CheckedShapes):
    """Shapes of page 7: idx (B, T); tok_emb and x (B, T, n_embd); q, k (B, n_head, T, head_dim);
    attn_scores (B, n_head, T, T); pos_table (T, n_embd) for "learned" and "sinusoidal", else None;
    rope (T, head_dim // 2), the shape of RoPE's cos (and sin) table, for "rope", else None."""

    idx: Shape
    tok_emb: Shape
    x: Shape
    q: Shape
    k: Shape
    attn_scores: Shape
    pos_table: Shape | None = None
    rope: Shape | None = None


def positional_encodings(labels: PositionalEncodingsLabels, shapes: PositionalEncodingsShapes, pos_encoding: str,
                         rankdir: str = "TB") -> str:
    """Where position information enters: added to the embedding, rotating q and k, or nowhere.

    "learned" (GPT-2) and "sinusoidal" (Vaswani et al., 2017) add a (T, n_embd) table to the
    token embeddings; "rope" (Su et al., 2021) rotates each head's q and k by angles that grow
    with the position and adds nothing to the input; "none" gives the model no position at all.

    Args:
        pos_encoding: one of ``engine.gpt.POS_ENCODINGS``.

    Returns:
        DOT source (str).

    Raises:
        ValueError: for an unknown pos_encoding or rankdir, or when the shape this encoding
            draws (pos_table or rope) is missing.
    """
    if pos_encoding not in POS_ENCODINGS:
        raise ValueError(f"pos_encoding must be one of {POS_ENCODINGS}, got {pos_encoding!r}")
    additive = pos_encoding in ("learned", "sinusoidal")
    if additive and shapes.pos_table is None:
        raise ValueError(f"{pos_encoding!r} adds a table: pass shapes.pos_table")
    if pos_encoding == "rope" and shapes.rope is None:
        raise ValueError("'rope' rotates q and k: pass shapes.rope")
    dot = Dot(rankdir)
    idx = tensor_node(dot, "idx", labels.tokens, shape_text(shapes.idx))
    emb = op_node(dot, "tok_emb", labels.tok_emb, "nn.Embedding")
    flow(dot, idx, emb, shape=shapes.idx)
    qkv = (("W_query", P.QUERY), ("W_key", P.KEY), ("W_value", P.VALUE))
    proj = op_node(dot, "proj", cells(qkv, labels.projections))
    if additive:
        title = labels.learned if pos_encoding == "learned" else labels.sinusoidal
        table = tensor_node(dot, "pos", title, shape_text(shapes.pos_table), P.POSITION)
        add = add_node(dot, "add")
        dot.same_rank(emb, table)
        flow(dot, emb, add, shape=shapes.tok_emb)
        flow(dot, table, add, shape=shapes.pos_table, colour=P.POSITION, penwidth=2.5)
        residual(dot, add, proj, "x", shapes.x)
    else:
        residual(dot, emb, proj, "x", shapes.x)
        if pos_encoding == "none":
            note = dot.node("none", label=node_label(labels.none, bold=False), shape="box", style="rounded,dashed",
                            color=P.RESIDUAL)
            dot.same_rank(emb, note)
    scores = op_node(dot, "scores", labels.dot_products, "q · kᵀ " + shape_text(shapes.attn_scores), P.ATTN_SCORES)
    if pos_encoding == "rope":
        rot_q = op_node(dot, "rot_q", labels.rotate, "q", P.POSITION)
        angles = tensor_node(dot, "rope", labels.rope, "cos/sin " + shape_text(shapes.rope), P.POSITION)
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
    return dot.source()
