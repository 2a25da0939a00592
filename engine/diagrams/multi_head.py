"""Page 5's diagrams: MultiHeadAttentionWrapper (heads in turn) and MultiHeadAttention (weight splits)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from torch import nn

from engine import palette as P
from engine.diagrams.core import (
    CheckedLabels,
    CheckedShapes,
    Dot,
    call_label,
    cells,
    flow,
    node_label,
    op_node,
    shape_text,
    shown_rows,
    tensor_node,
)


@dataclass(frozen=True)
class MultiHeadLabels(CheckedLabels):
    """Words of page 5's diagram.

    Attributes:
        inputs: x, the batch of input embeddings.
        wrapper, split: titles of the two halves (MultiHeadAttentionWrapper; MultiHeadAttention
            with weight splits).
        head: a callable giving one head's title from its index, counted from 0 as the page's head slider and
            ``attn_weights[:, h]`` count (``lambda h: _("head {h}").format(h=h)``).
        concat: the concatenation of the heads' outputs (torch.cat on the last dimension).
        projections: W_query, W_key, W_value each computed once for all heads.
        split_qkv: the split of one fused projection's output into q, k and v (``qkv.split``).
        view_heads: the view that cuts d_out into num_heads × head_dim.
        transpose: the transpose that puts heads before tokens.
        attend: scaled dot-product attention with the causal mask, each head on its own.
        transpose_back: the transpose back to tokens before heads.
        merge: the contiguous().view that joins the heads into d_out.
        out_proj: the final linear layer mixing the heads.
        context_vec: the result.
    """

    inputs: str
    wrapper: str
    split: str
    head: Callable[[int], str]
    concat: str
    projections: str
    split_qkv: str
    view_heads: str
    transpose: str
    attend: str
    transpose_back: str
    merge: str
    out_proj: str
    context_vec: str


@dataclass(frozen=True)
class MultiHeadShapes(CheckedShapes):
    """Sizes of page 5 (the sizes the page ran with): b (batch), num_tokens, d_in, d_out,
    num_heads, head_dim. The wrapper's heads each have d_out = head_dim, so both halves end in
    (b, num_tokens, d_out).

    Raises:
        ValueError: if a size is not a positive int or num_heads · head_dim != d_out.
    """

    b: int
    num_tokens: int
    d_in: int
    d_out: int
    num_heads: int
    head_dim: int

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.num_heads * self.head_dim != self.d_out:
            raise ValueError(
                f"num_heads * head_dim must equal d_out: {self.num_heads} * {self.head_dim} != {self.d_out}"
            )


@dataclass(frozen=True)
class SplitLayers:
    """The linear layers of a weight-split attention module, as the module holds them (read by
    :func:`split_layers`, never typed), so that the diagram's boxes name the layers that ran.

    Attributes:
        projections: ``(attribute name, in_features, out_features)`` of the layers that compute q, k and v: one
            fused layer (the lesson's ``qkv``, n_embd -> 3 · n_embd) or three (the chapter's ``W_query``,
            ``W_key``, ``W_value``, d_in -> d_out each), in the order q, k, v.
        out_projection: the same for the layer that mixes the joined heads (``proj`` or ``out_proj``).
    """

    projections: tuple[tuple[str, int, int], ...]
    out_projection: tuple[str, int, int]

    @property
    def fused(self) -> bool:
        """True when one layer computes q, k and v together (its output is split in three)."""
        return len(self.projections) == 1


#: Attribute names of the projections, as the two classes name them: the lesson's CausalSelfAttention and the
#: chapter's MultiHeadAttention.
_FUSED, _SEPARATE, _OUT = ("qkv",), ("W_query", "W_key", "W_value"), ("proj", "out_proj")


def split_layers(module: nn.Module) -> SplitLayers:
    """The q/k/v and output projections of ``module`` with their sizes, read from the module itself.

    Works for :class:`engine.gpt.CausalSelfAttention` (``qkv``, ``proj``) and
    :class:`engine.attention.MultiHeadAttention` (``W_query``, ``W_key``, ``W_value``, ``out_proj``), also on
    the ``meta`` device (only the sizes are read).

    Raises:
        ValueError: if ``module`` has neither set of projections as ``nn.Linear`` layers.
    """
    def linear(name: str) -> tuple[str, int, int] | None:
        layer = getattr(module, name, None)
        return (name, layer.in_features, layer.out_features) if isinstance(layer, nn.Linear) else None

    out = next((found for found in map(linear, _OUT) if found), None)
    for names in (_FUSED, _SEPARATE):
        found = [linear(n) for n in names]
        if all(found) and out:
            return SplitLayers(projections=tuple(found), out_projection=out)
    raise ValueError(f"{type(module).__name__} has no qkv/proj or W_query/W_key/W_value/out_proj nn.Linear layers")


def linear_text(layer: tuple[str, int, int]) -> str:
    """``qkv = nn.Linear(32, 96)``: a layer as the module defines it."""
    name, d_in, d_out = layer
    return f"{name} = nn.Linear({d_in}, {d_out})"


#: The two halves of :func:`multi_head`: MultiHeadAttentionWrapper and MultiHeadAttention with weight splits.
MULTI_HEAD_HALVES = ("wrapper", "split")


def multi_head(labels: MultiHeadLabels, shapes: MultiHeadShapes, layers: SplitLayers, rankdir: str = "TB",
               halves: tuple[str, ...] = MULTI_HEAD_HALVES) -> str:
    """The wrapper (heads in turn, concatenated) beside the weight-split layer, shapes at each step.

    Left: MultiHeadAttentionWrapper runs num_heads CausalAttention modules and concatenates
    their (b, T, head_dim) outputs. Right: MultiHeadAttention projects once to d_out, views it
    as (b, T, num_heads, head_dim), transposes to (b, num_heads, T, head_dim), attends, transposes
    back, merges to (b, T, d_out) and applies out_proj (chapter section "implementing multi-head
    attention with weight splits"). More than four heads are drawn as the first two, "⋯" and the last.

    Args:
        layers: the weight-split module's linear layers (:func:`split_layers` of the module that ran): its
            projection box names them with their sizes; a fused ``qkv`` gets its split into q, k, v drawn.
        halves: which halves to draw, from :data:`MULTI_HEAD_HALVES` (default both, side by side).
            A view that puts each half in its own ``st.columns`` column passes one per diagram:
            on a phone the columns stack and each half keeps a readable size.

    Returns:
        DOT source (str).

    Raises:
        ValueError: for an unknown rankdir, halves empty or naming an unknown half, or layers whose sizes do not
            fit the shapes (the projections must take d_in and give d_out for each of q, k, v; the output
            projection d_out -> d_out).
    """
    expected_out = (3 * shapes.d_out,) if layers.fused else (shapes.d_out,) * 3
    if (tuple(p[1] for p in layers.projections) != (shapes.d_in,) * len(layers.projections)
            or tuple(p[2] for p in layers.projections) != expected_out
            or layers.out_projection[1:] != (shapes.d_out, shapes.d_out)):
        raise ValueError(f"layers {layers} do not fit d_in={shapes.d_in}, d_out={shapes.d_out}")
    if not halves or any(h not in MULTI_HEAD_HALVES for h in halves):
        raise ValueError(f"halves must be a non-empty subset of {MULTI_HEAD_HALVES}, got {halves!r}")
    b, T, d_in, d_out = shapes.b, shapes.num_tokens, shapes.d_in, shapes.d_out
    H, hd = shapes.num_heads, shapes.head_dim
    qkv = (("W_query", P.QUERY), ("W_key", P.KEY), ("W_value", P.VALUE))
    short = (("q", P.QUERY), ("k", P.KEY), ("v", P.VALUE))
    dot = Dot(rankdir)
    if "wrapper" in halves:
        with dot.cluster("wrapper", labels.wrapper):
            x_w = tensor_node(dot, "w_x", labels.inputs, shape_text((b, T, d_in)))
            concat = op_node(dot, "w_concat", labels.concat, "torch.cat(dim=-1)", P.CONTEXT)
            heads = []
            for i in shown_rows(H, limit=3):
                if i is None:
                    gap = dot.node("w_gap", label=node_label("⋯", bold=False), shape="plaintext")
                    dot.edge(x_w, gap, style="invis")
                    dot.edge(gap, concat, style="invis")
                    heads.append(gap)
                    continue
                title = call_label(labels.head, i)
                head = op_node(dot, f"w_head{i}", cells(short, title, None), colour=P.ATTN_WEIGHTS)
                first = not heads  # every head has the same shapes: write them on the first head's arrows only
                flow(dot, x_w, head, shape=(b, T, d_in) if first else None)
                flow(dot, head, concat, shape=(b, T, hd) if first else None, colour=P.CONTEXT)
                heads.append(head)
            dot.same_rank(*heads)
            out_w = tensor_node(dot, "w_out", labels.context_vec, shape_text((b, T, H * hd)), P.CONTEXT)
            flow(dot, concat, out_w, shape=(b, T, H * hd), colour=P.CONTEXT)
    if "split" in halves:
        with dot.cluster("split", labels.split):
            x_s = tensor_node(dot, "s_x", labels.inputs, shape_text((b, T, d_in)))
            if layers.fused:
                proj = op_node(dot, "s_proj", cells(qkv, labels.projections, linear_text(layers.projections[0]),
                                                    vertical=True))
            else:
                proj = op_node(dot, "s_proj", cells([(linear_text(p), c) for p, (_w, c) in zip(
                    layers.projections, qkv, strict=True)], labels.projections, vertical=True))
            view = op_node(dot, "s_view", labels.view_heads, ".view()")
            trans = op_node(dot, "s_trans", labels.transpose, ".transpose(1, 2)")
            attend = op_node(dot, "s_attend", labels.attend, "attn_weights " + shape_text((b, H, T, T)), P.ATTN_WEIGHTS)
            back = op_node(dot, "s_back", labels.transpose_back, ".transpose(1, 2)")
            merge = op_node(dot, "s_merge", labels.merge, ".contiguous().view()")
            out_proj = op_node(dot, "s_out_proj", labels.out_proj, linear_text(layers.out_projection), P.CONTEXT)
            out_s = tensor_node(dot, "s_out", labels.context_vec, shape_text((b, T, d_out)), P.CONTEXT)
            flow(dot, x_s, proj, shape=(b, T, d_in))
            if layers.fused:
                split = op_node(dot, "s_split", labels.split_qkv, f".split({d_out}, dim=2)")
                flow(dot, proj, split, layers.projections[0][0], (b, T, 3 * d_out))
                flow(dot, split, view, "q, k, v", (b, T, d_out))
            else:
                flow(dot, proj, view, "q, k, v", (b, T, d_out))
            flow(dot, view, trans, "q, k, v", (b, T, H, hd))
            flow(dot, trans, attend, "q, k, v", (b, H, T, hd))
            flow(dot, attend, back, shape=(b, H, T, hd), colour=P.CONTEXT)
            flow(dot, back, merge, shape=(b, T, H, hd), colour=P.CONTEXT)
            flow(dot, merge, out_proj, shape=(b, T, d_out), colour=P.CONTEXT)
            flow(dot, out_proj, out_s, shape=(b, T, d_out), colour=P.CONTEXT)
    return dot.source()
