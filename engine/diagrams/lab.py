"""The Lab's diagram: the course's GPT block by block, with each part's parameter count."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from engine import palette as P
from engine import positions
from engine.diagrams.core import (
    CheckedLabels,
    CheckedShapes,
    Dot,
    Shape,
    add_node,
    call_label,
    flow,
    node_label,
    op_node,
    residual,
    shape_text,
    tensor_node,
)
from engine.gpt import GPT, count_params


@dataclass(frozen=True)
class GPTParts:
    """Parameters of a :class:`engine.gpt.GPT`, per part.

    Attributes:
        tok_emb, pos_emb: the token table and the learned position table (0 for the other
            encodings: their tables and rotations hold no parameters).
        ln_1, attn, ln_2, mlp: one block's parts (every block has the same counts).
        ln_f, lm_head: the final LayerNorm and the output layer.
        n_layer: the number of blocks.
        pos_encoding: the model's ``config.pos_encoding``.
        total: every parameter of the model (``count_params(model)``).
    """

    tok_emb: int
    pos_emb: int
    ln_1: int
    attn: int
    ln_2: int
    mlp: int
    ln_f: int
    lm_head: int
    n_layer: int
    pos_encoding: str
    total: int

    @property
    def per_block(self) -> int:
        """Parameters of one block: ln_1 + attn + ln_2 + mlp."""
        return self.ln_1 + self.attn + self.ln_2 + self.mlp


def gpt_parts(model: GPT) -> GPTParts:
    """Count the parameters of each part of ``model`` with ``engine.gpt.count_params``.

    Works on the ``meta`` device too (nothing is read but the sizes).

    Raises:
        ValueError: if the blocks differ in size or the parts do not add up to the whole
            model (a module this function does not know about).
    """
    blocks = list(model.blocks)
    counts = [tuple(count_params(getattr(blk, name)) for name in ("ln_1", "attn", "ln_2", "mlp")) for blk in blocks]
    if len(set(counts)) != 1:
        raise ValueError(f"blocks differ in parameter counts: {counts}")
    pos_emb = count_params(model.pos_emb) if hasattr(model, "pos_emb") else 0
    ln_1, attn, ln_2, mlp = counts[0]
    parts = GPTParts(
        tok_emb=count_params(model.tok_emb),
        pos_emb=pos_emb,
        ln_1=ln_1,
        attn=attn,
        ln_2=ln_2,
        mlp=mlp,
        ln_f=count_params(model.ln_f),
        lm_head=count_params(model.lm_head),
        n_layer=len(blocks),
        pos_encoding=model.config.pos_encoding,
        total=count_params(model),
    )
    summed = parts.tok_emb + parts.pos_emb + parts.n_layer * parts.per_block + parts.ln_f + parts.lm_head
    if summed != parts.total:
        raise ValueError(f"parts add up to {summed} parameters, the model has {parts.total}")
    return parts


@dataclass(frozen=True)
class LabLabels(CheckedLabels):
    """Words of the Lab's GPT diagram.

    Attributes:
        tokens: the input characters' ids.
        tok_emb: the token embedding.
        position: the model's position information (the view picks the word for its
            pos_encoding: ``ui.positions.part``; unused when the encoding does nothing).
        block: title of the repeated Transformer block (drawn as "<block> × n_layer").
        ln_1, ln_2, ln_f: the three LayerNorms.
        attn: causal multi-head self-attention.
        mlp: the feed-forward layer.
        residual: the residual stream's bypass arrows.
        lm_head: the output layer giving logits.
        softmax: the softmax over the vocabulary.
        probs: the next-character probabilities.
        params: a callable giving a part's parameter count as text (``lambda n: ngettext(...)``).
        total: a callable giving the whole model's count as text (the diagram's caption).
    """

    tokens: str
    tok_emb: str
    position: str
    block: str
    ln_1: str
    attn: str
    ln_2: str
    mlp: str
    residual: str
    ln_f: str
    lm_head: str
    softmax: str
    probs: str
    params: Callable[[int], str]
    total: Callable[[int], str]


@dataclass(frozen=True)
class LabShapes(CheckedShapes):
    """Shapes of a Lab run: idx (B, T); residual (B, T, n_embd), the residual stream; logits
    (B, T, vocab_size); attn_weights (B, n_head, T, T) if the run returned them, else None."""

    idx: Shape
    residual: Shape
    logits: Shape
    attn_weights: Shape | None = None


def lab(labels: LabLabels, shapes: LabShapes, parts: GPTParts, rankdir: str = "TB") -> str:
    """The course's GPT block by block, with each part's parameter count.

    token + position → n_layer × [LayerNorm → attention → + residual → LayerNorm → MLP →
    + residual] → LayerNorm → lm_head → softmax → next-character probabilities (GPT-2's
    pre-LayerNorm layout, Radford et al., 2019; ``engine.gpt``). An encoding's table (learned,
    sinusoidal) is added to the token embeddings; a rotation of q and k (RoPE) or a bias on the
    scores (ALiBi) feeds the attention box (``engine.positions.PositionEncoding``).

    Args:
        parts: from :func:`gpt_parts` on the model the Lab ran.

    Returns:
        DOT source (str).

    Raises:
        ValueError: for an unknown rankdir or pos_encoding in ``parts``.
    """
    encoding = positions.encoding(parts.pos_encoding)
    def count(n: int) -> str:
        return call_label(labels.params, n)
    dot = Dot(rankdir)
    idx = tensor_node(dot, "idx", labels.tokens, shape_text(shapes.idx))
    emb = op_node(dot, "tok_emb", labels.tok_emb, count(parts.tok_emb))
    flow(dot, idx, emb, shape=shapes.idx)
    stream = emb
    if encoding.adds_table:
        pos = op_node(dot, "pos", labels.position, count(parts.pos_emb), P.POSITION)
        add = add_node(dot, "emb_add")
        dot.same_rank(emb, pos)
        flow(dot, emb, add)
        flow(dot, pos, add, colour=P.POSITION, penwidth=2.5)
        stream = add
    with dot.cluster("block", f"{labels.block} × {parts.n_layer}"):
        block_in = dot.node("block_in", shape="point", width=0.08, color=P.RESIDUAL)
        ln_1 = op_node(dot, "ln_1", labels.ln_1, count(parts.ln_1))
        attn_sub = count(parts.attn)
        if shapes.attn_weights is not None:
            attn_sub += "\nattn_weights " + shape_text(shapes.attn_weights)
        attn = op_node(dot, "attn", labels.attn, attn_sub, P.ATTN_WEIGHTS)
        add_1 = add_node(dot, "add_1")
        ln_2 = op_node(dot, "ln_2", labels.ln_2, count(parts.ln_2))
        mlp = op_node(dot, "mlp", labels.mlp, count(parts.mlp), P.CONTEXT)
        add_2 = add_node(dot, "add_2")
        if encoding.rotates_qk or encoding.biases_scores:
            rope = op_node(dot, "pos", labels.position, count(parts.pos_emb), P.POSITION)
            dot.same_rank(rope, attn)
            flow(dot, rope, attn, colour=P.POSITION, penwidth=2.5, style="dashed")
    residual(dot, stream, block_in, "x", shapes.residual, arrowhead="none")
    residual(dot, block_in, ln_1)
    flow(dot, ln_1, attn)
    flow(dot, attn, add_1, colour=P.CONTEXT)
    residual(dot, block_in, add_1, labels.residual, None)
    residual(dot, add_1, ln_2)
    flow(dot, ln_2, mlp)
    flow(dot, mlp, add_2, colour=P.CONTEXT)
    residual(dot, add_1, add_2, labels.residual, None)
    ln_f = op_node(dot, "ln_f", labels.ln_f, count(parts.ln_f))
    head = op_node(dot, "lm_head", labels.lm_head, count(parts.lm_head))
    softmax = op_node(dot, "softmax", labels.softmax, None, P.ATTN_WEIGHTS)
    probs = tensor_node(dot, "probs", labels.probs, shape_text(shapes.logits), P.ATTN_WEIGHTS)
    residual(dot, add_2, ln_f, "x", shapes.residual)
    flow(dot, ln_f, head)
    flow(dot, head, softmax, "logits", shapes.logits)
    flow(dot, softmax, probs, shape=shapes.logits, colour=P.ATTN_WEIGHTS)
    caption = dot.node("total", label=node_label(call_label(labels.total, parts.total)), shape="plaintext")
    dot.edge(probs, caption, style="invis")
    return dot.source()
