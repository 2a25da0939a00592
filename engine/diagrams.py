"""Diagrams of what each section computes, as Graphviz DOT source for ``st.graphviz_chart``.

One function per section returns a DOT string. A view draws it with
``st.graphviz_chart(dot)``: Streamlit sends the string to the browser, where Graphviz
(compiled to WebAssembly, through d3-graphviz) lays it out, so neither the ``graphviz`` Python
package nor a ``dot`` binary is needed on the server.

Every function takes two frozen dataclasses:

* ``labels``: every word the diagram shows, already translated by the view (the engine holds
  no sentence for the reader). All fields are required. A field is a ``str``; token lists are
  ``tuple[str, ...]``; texts that hold a number (a head's index, a parameter count) are
  callables ``int -> str``, so the view can use ``ngettext`` and its own number format.
  Labels are HTML-escaped here (``&``, ``<``, ``>``, quotes) and may hold any Unicode
  (CJK, √, −∞, ×); a newline breaks the line.
* ``shapes``: the tensor shapes the page produced, as tuples of ints (``tensor.shape`` works:
  ``torch.Size`` is a tuple), written on the arrows as Python prints them, e.g. ``(6, 3)``,
  ``(6,)``, ``(1, 4, 5, 8)``. Never re-type them: pass the shapes of the tensors the page ran.

Diagrams are written notation-first: operation boxes (white, outlined in the colour of what they
produce) joined by arrows that carry tensors (coloured by role, labelled with the tensor's name
and shape); inputs and results are filled, rounded boxes. Colours come from ``engine.palette``.
Long chains run top to bottom (``rankdir="TB"``, the default) to stay narrow on a phone; each
function takes ``rankdir`` for a wide screen.

Example (views/self_attention.py)::

    out = sections.self_attention.query_walkthrough(inputs, query_index)
    dot = diagrams.self_attention(
        diagrams.SelfAttentionLabels(inputs=_("inputs"), query=_("query"), ...),
        diagrams.SelfAttentionShapes(inputs=inputs.shape, query=inputs[query_index].shape,
                                     attn_scores=out["attn_scores"].shape, ...),
    )
    st.graphviz_chart(dot)

Functions: :func:`home`, :func:`self_attention`, :func:`trainable_weights`, :func:`causal_mask`,
:func:`dropout`, :func:`multi_head`, :func:`positional_encodings`, :func:`lab` (with
:func:`gpt_parts` to count a model's parameters per part). :func:`shape_text` formats one shape.
"""

from __future__ import annotations

import html
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, fields

from engine import palette as P
from engine.gpt import GPT, POS_ENCODINGS, count_params

Shape = tuple[int, ...]

#: Layout directions Graphviz accepts; "TB" (top to bottom) keeps a chain narrow.
RANKDIRS = ("TB", "LR", "BT", "RL")
#: Font list for every text; the browser picks the first it has (CJK falls back to a system font).
FONT = "Helvetica,Arial,sans-serif"
#: Point sizes: node titles, the second line of a node, arrow labels. (Streamlit restyles the text of
#: graphviz charts to its own font at one small size; these sizes set the layout and other renderers.)
TITLE_PT, SUB_PT, EDGE_PT = 11, 9, 9
#: How much of its colour's way to white a filled box goes (lighter fill, black text stays readable).
FILL_LIGHTEN = 0.55
#: Most rows (tokens, heads) drawn before the middle ones collapse into "⋯".
MAX_ROWS = 4
#: Largest mask drawn inside the causal-mask boxes (a min(T, MASK_ICON) square).
MASK_ICON = 4

_SUBSCRIPTS = str.maketrans("0123456789", "₀₁₂₃₄₅₆₇₈₉")


# --------------------------------------------------------------------------------------------------
# Labels and shapes
# --------------------------------------------------------------------------------------------------


def shape_text(shape: Sequence[int]) -> str:
    """A shape as Python prints a tuple: ``(6, 3)``, ``(6,)``, ``()``.

    Raises:
        TypeError: if an entry is not an int (bools are refused).
        ValueError: if an entry is negative.
    """
    dims = _as_shape("shape", shape)
    if len(dims) == 1:
        return f"({dims[0]},)"
    return "(" + ", ".join(str(d) for d in dims) + ")"


def _as_shape(name: str, value: object) -> Shape:
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise TypeError(f"{name} must be a tuple of ints (e.g. tensor.shape), got {type(value).__name__}")
    dims = tuple(value)
    for d in dims:
        if isinstance(d, bool) or not isinstance(d, int):
            raise TypeError(f"{name} must hold ints, got {d!r} in {dims!r}")
        if d < 0:
            raise ValueError(f"{name} must hold sizes >= 0, got {dims!r}")
    return tuple(int(d) for d in dims)


class _Labels:
    """Checks the types of a labels dataclass: ``str``, ``tuple[str, ...]`` or ``Callable[[int], str]``."""

    def __post_init__(self) -> None:
        for f in fields(self):  # type: ignore[arg-type]
            value = getattr(self, f.name)
            kind = str(f.type)
            if kind.startswith("Callable"):
                ok = callable(value)
            elif kind.startswith("tuple"):
                ok = isinstance(value, tuple) and all(isinstance(v, str) for v in value)
            else:
                ok = isinstance(value, str)
            if not ok:
                raise TypeError(f"{type(self).__name__}.{f.name} must be {kind}, got {type(value).__name__}")


class _Shapes:
    """Normalises a shapes dataclass: shapes become tuples of ints, sizes must be positive ints."""

    def __post_init__(self) -> None:
        for f in fields(self):  # type: ignore[arg-type]
            value = getattr(self, f.name)
            kind = str(f.type)
            if kind == "int":
                if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                    raise ValueError(f"{type(self).__name__}.{f.name} must be a positive int, got {value!r}")
            elif kind == "float":
                if isinstance(value, bool) or not isinstance(value, int | float):
                    raise TypeError(f"{type(self).__name__}.{f.name} must be a number, got {value!r}")
            elif value is None and "None" in kind:
                continue
            else:
                object.__setattr__(self, f.name, _as_shape(f"{type(self).__name__}.{f.name}", value))


# --------------------------------------------------------------------------------------------------
# DOT writing
# --------------------------------------------------------------------------------------------------


class _Html(str):
    """Text already in Graphviz's HTML-like label syntax (written between < and >, not quoted)."""


def _esc(text: str) -> str:
    """Escape a caller's text for an HTML-like label; newlines become line breaks."""
    escaped = html.escape(text, quote=True).replace("&#x27;", "&#39;")
    return escaped.replace("\r\n", "\n").replace("\n", "<BR/>")


def _label(title: str, sub: str | None = None, bold: bool = True) -> _Html:
    """A node label: the title, and an optional smaller second line."""
    head = f"<B>{_esc(title)}</B>" if bold and title else _esc(title)
    if sub:
        return _Html(f'{head}<BR/><FONT POINT-SIZE="{SUB_PT}">{_esc(sub)}</FONT>')
    return _Html(head)


def _arrow(name: str | None, shape: Sequence[int] | None) -> _Html:
    """An arrow's label: the tensor's name over its shape."""
    parts = [_esc(name)] if name else []
    if shape is not None:
        parts.append(_esc(shape_text(shape)))
    return _Html("<BR/>".join(parts))


def _quote(value: object) -> str:
    if isinstance(value, _Html):
        return f"<{value}>"
    text = str(value).replace("\\", "\\\\").replace('"', '\\"')
    return f'"{text}"'


def _attrs(attrs: dict[str, object]) -> str:
    items = [f"{k}={_quote(v)}" for k, v in attrs.items() if v is not None]
    return f" [{', '.join(items)}]" if items else ""


class _Dot:
    """A directed graph written line by line; edges may only join nodes already declared.

    Edges are written after every node, at the top level: an edge written inside a cluster
    would pull both its ends into that cluster.
    """

    def __init__(self, rankdir: str) -> None:
        if rankdir not in RANKDIRS:
            raise ValueError(f"rankdir must be one of {RANKDIRS}, got {rankdir!r}")
        self.nodes: set[str] = set()
        self.edges: list[str] = []
        self.depth = 1
        self.lines = [
            "digraph {",
            "  graph" + _attrs(dict(rankdir=rankdir, bgcolor=P.PAPER, fontname=FONT, fontsize=TITLE_PT,
                                    nodesep=0.25, ranksep=0.3, pad=0.15)),
            "  node" + _attrs(dict(fontname=FONT, fontsize=TITLE_PT, fontcolor=P.INK, color=P.INK,
                                   margin="0.12,0.05", height=0.3)),
            "  edge" + _attrs(dict(fontname=FONT, fontsize=EDGE_PT, fontcolor=P.INK, color=P.INK,
                                   arrowsize=0.7, penwidth=1.4)),
        ]

    def _line(self, text: str) -> None:
        self.lines.append("  " * self.depth + text)

    def node(self, node_id: str, **attrs: object) -> str:
        if node_id in self.nodes:
            raise ValueError(f"node {node_id!r} declared twice")
        self.nodes.add(node_id)
        self._line(_quote(node_id) + _attrs(attrs))
        return node_id

    def edge(self, a: str, b: str, **attrs: object) -> None:
        for end in (a, b):
            if end not in self.nodes:
                raise ValueError(f"edge to undeclared node {end!r}")
        self.edges.append(f"  {_quote(a)} -> {_quote(b)}" + _attrs(attrs))

    def same_rank(self, *node_ids: str) -> None:
        self._line("{ rank=same; " + " ".join(_quote(n) + ";" for n in node_ids) + " }")

    @contextmanager
    def cluster(self, cluster_id: str, title: str | None, dashed: bool = False) -> Iterator[None]:
        self._line(f"subgraph {_quote('cluster_' + cluster_id)} {{")
        self.depth += 1
        self._line("graph" + _attrs(dict(label=_label(title) if title else None, labeljust="l",
                                           style="rounded,dashed" if dashed else "rounded",
                                           color=P.RESIDUAL, margin=8)))
        yield
        self.depth -= 1
        self._line("}")

    def source(self) -> str:
        return "\n".join(self.lines + self.edges + ["}"]) + "\n"


def _tensor(dot: _Dot, node_id: str, title: str, sub: str | None = None, colour: str | None = None) -> str:
    """A filled, rounded box for an input or a result; ``colour`` is its role (None: plain)."""
    fill = P.lighten(colour, FILL_LIGHTEN) if colour else P.PAPER
    return dot.node(node_id, label=_label(title, sub), shape="box", style="rounded,filled", fillcolor=fill,
                    color=colour or P.INK, penwidth=1.6, fontcolor=P.text_colour(fill))


def _op(dot: _Dot, node_id: str, title: str | _Html, sub: str | None = None, colour: str | None = None) -> str:
    """A white box for an operation, outlined in the colour of what it produces."""
    label = title if isinstance(title, _Html) else _label(title, sub)
    outline = colour or P.INK
    return dot.node(node_id, label=label, shape="box", style="filled", fillcolor=P.PAPER,
                    color=P.darken(outline, 0.15) if outline == P.DROPOUT else outline,
                    penwidth=2.2 if colour else 1.2)


def _add(dot: _Dot, node_id: str) -> str:
    """The ⊕ where two tensors are added."""
    return dot.node(node_id, label="+", shape="circle", width=0.32, height=0.32, fixedsize="true",
                    fontsize=16, color=P.RESIDUAL, penwidth=2, style="filled", fillcolor=P.PAPER)


def _flow(dot: _Dot, a: str, b: str, name: str | None = None, shape: Sequence[int] | None = None,
          colour: str | None = None, **attrs: object) -> None:
    """An arrow carrying a tensor: coloured by role, labelled with its name and shape."""
    label = _arrow(name, shape) if (name or shape is not None) else None
    dot.edge(a, b, label=label, color=colour or P.INK, fontcolor=P.INK, **attrs)


def _residual(dot: _Dot, a: str, b: str, name: str | None = None, shape: Sequence[int] | None = None,
              **attrs: object) -> None:
    """An arrow of the residual stream: thick and grey."""
    _flow(dot, a, b, name, shape, colour=P.RESIDUAL, penwidth=3.5, **attrs)


def _cells(colours: Sequence[tuple[str, str]], title: str | None = None, sub: str | None = None,
           vertical: bool = False) -> _Html:
    """A label of coloured cells (e.g. W_query | W_key | W_value), side by side or stacked, under an optional title."""
    cells = [f'<TD BGCOLOR="{P.lighten(c, FILL_LIGHTEN)}" BORDER="1" COLOR="{c}">{_esc(text)}</TD>'
             for text, c in colours]
    span = 1 if vertical else len(colours)
    rows = []
    if title:
        rows.append(f'<TR><TD COLSPAN="{span}" BORDER="0">{_label(title, sub)}</TD></TR>')
    rows += [f"<TR>{cell}</TR>" for cell in cells] if vertical else [f"<TR>{''.join(cells)}</TR>"]
    return _Html(f'<TABLE BORDER="0" CELLBORDER="0" CELLSPACING="2" CELLPADDING="3">{"".join(rows)}</TABLE>')


def _matrix_icon(n: int, above: str, above_fill: str, below_fill: str) -> str:
    """An n×n grid: cells above the diagonal hold ``above`` on ``above_fill``, the rest are plain."""
    rows = []
    for i in range(n):
        cells = []
        for j in range(n):
            masked = j > i
            fill = above_fill if masked else below_fill
            text = (f'<FONT COLOR="{P.text_colour(fill)}" POINT-SIZE="7">{_esc(above)}</FONT>'
                    if masked else "")
            cells.append(f'<TD BGCOLOR="{fill}" WIDTH="24" HEIGHT="15" FIXEDSIZE="TRUE">{text}</TD>')
        rows.append("<TR>" + "".join(cells) + "</TR>")
    return ('<TABLE BORDER="0" CELLBORDER="1" CELLSPACING="0" CELLPADDING="0" COLOR="#777777">'
            + "".join(rows) + "</TABLE>")


def _icon_op(title: str, sub: str | None, icon: str) -> _Html:
    """An operation's label with a small picture under its title."""
    return _Html(f'<TABLE BORDER="0" CELLBORDER="0" CELLSPACING="2"><TR><TD>{_label(title, sub)}</TD></TR>'
                 f"<TR><TD>{icon}</TD></TR></TABLE>")


def _shown(count: int, limit: int = MAX_ROWS) -> list[int | None]:
    """Indices 0 … count-1 to draw; None stands for the collapsed middle (at most ``limit`` entries, limit >= 3)."""
    if count <= limit:
        return list(range(count))
    return list(range(limit - 2)) + [None, count - 1]


def _sub(letter: str, index: int) -> str:
    """Notation with a 1-based subscript: h₁, s₁₂."""
    return letter + str(index + 1).translate(_SUBSCRIPTS)


def _call(label: Callable[[int], str], n: int) -> str:
    """A callable label's text for ``n``; raises TypeError if it does not return a str."""
    text = label(n)
    if not isinstance(text, str):
        raise TypeError(f"a label callable must return str, got {type(text).__name__} for {n}")
    return text


def _num(x: float) -> str:
    """A number with at most four significant digits, as the pages print them (0.5, 1.111, 10)."""
    return f"{x:.4g}"


# --------------------------------------------------------------------------------------------------
# Home: RNN encoder–decoder beside attention
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class HomeLabels(_Labels):
    """Words of the Home diagram.

    Attributes:
        rnn, attention: titles of the two halves (RNN encoder–decoder; with attention).
        encoder, decoder: titles of the encoder and decoder boxes in each half.
        hidden_state: the RNN's single hidden state handed to the decoder (the bottleneck).
        attention_weights: the operation that weighs every encoder state.
        context_vec: the context vector attention builds for one decoder step.
        source_tokens: the input sentence, one entry per token (as many as encoder_states has rows).
        target_tokens: the output sentence, one entry per decoder step.
    """

    rnn: str
    attention: str
    encoder: str
    decoder: str
    hidden_state: str
    attention_weights: str
    context_vec: str
    source_tokens: tuple[str, ...]
    target_tokens: tuple[str, ...]


@dataclass(frozen=True)
class HomeShapes(_Shapes):
    """Shapes of the Home diagram: encoder_states (T, d_h) stacked, hidden_state (d_h,),
    attn_weights (T,) for one decoder step, context_vec (d_h,)."""

    encoder_states: Shape
    hidden_state: Shape
    attn_weights: Shape
    context_vec: Shape


def _state(dot: _Dot, node_id: str, name: str, token: str) -> str:
    """A recurrent state box: its name (h₁, s₁) over the token it reads or writes."""
    label = _Html(f'<B>{_esc(name)}</B>  <FONT POINT-SIZE="{SUB_PT}">{_esc(token)}</FONT>')
    return dot.node(node_id, label=label, shape="box", style="rounded,filled", fillcolor=P.PAPER, penwidth=1.6)


def _encoder_rows(dot: _Dot, prefix: str, tokens: Sequence[str], state_shape: Shape) -> list[str]:
    """One state per token (h₁ … h_T, the token written in its box), chained top to bottom."""
    states: list[str] = []
    for i in _shown(len(tokens)):
        if i is None:
            gap = dot.node(f"{prefix}_gap", label=_label("⋯", bold=False), shape="plaintext")
            _flow(dot, states[-1], gap, shape=state_shape)
            states.append(gap)
            continue
        h = _state(dot, f"{prefix}_h{i}", _sub("h", i), tokens[i])
        if states:
            _flow(dot, states[-1], h, shape=state_shape)
        states.append(h)
    return states


def _decoder_rows(dot: _Dot, prefix: str, tokens: Sequence[str], start: str, state_shape: Shape,
                  first_colour: str | None) -> None:
    """One decoder state per output token (s₁ …, the token written in its box), fed from ``start``."""
    previous = start
    for j in _shown(len(tokens)):
        if j is None:
            gap = dot.node(f"{prefix}_gap", label=_label("⋯", bold=False), shape="plaintext")
            _flow(dot, previous, gap)
            previous = gap
            continue
        s = _state(dot, f"{prefix}_s{j}", _sub("s", j), tokens[j])
        first = previous == start
        _flow(dot, previous, s, shape=state_shape if first else None, colour=first_colour if first else None)
        previous = s


def home(labels: HomeLabels, shapes: HomeShapes, rankdir: str = "TB") -> str:
    """The RNN encoder–decoder and its single hidden state, beside attention over every encoder state.

    Left: each token updates the hidden state h₁ … h_T; only the last one (the bottleneck,
    ``hidden_state``) reaches the decoder. Right: for one decoder step, attention weighs every
    encoder state and hands their weighted sum (``context_vec``) to the decoder (Bahdanau et al.,
    2014; the chapter's section "the problem with modeling long sequences").

    Args:
        labels: the words (see :class:`HomeLabels`).
        shapes: the shapes the page produced (see :class:`HomeShapes`).
        rankdir: "TB" (default) or another of :data:`RANKDIRS`.

    Returns:
        DOT source (str).

    Raises:
        ValueError: if the number of source tokens differs from encoder_states' first size, a
            token list is empty, or rankdir is unknown.
    """
    T = shapes.encoder_states[0] if shapes.encoder_states else 0
    if len(labels.source_tokens) != T or T == 0:
        raise ValueError(f"need one source token per encoder state: {len(labels.source_tokens)} tokens, "
                         f"encoder_states {shapes.encoder_states}")
    if not labels.target_tokens:
        raise ValueError("target_tokens is empty")
    state = shapes.encoder_states[1:]
    dot = _Dot(rankdir)
    with dot.cluster("rnn", labels.rnn):
        with dot.cluster("rnn_enc", labels.encoder, dashed=True):
            states = _encoder_rows(dot, "rnn", labels.source_tokens, state)
        bottleneck = _tensor(dot, "rnn_hidden", labels.hidden_state, shape_text(shapes.hidden_state), P.CONTEXT)
        _flow(dot, states[-1], bottleneck, shape=shapes.hidden_state, colour=P.CONTEXT, penwidth=2.5)
        with dot.cluster("rnn_dec", labels.decoder, dashed=True):
            _decoder_rows(dot, "rnn_dec", labels.target_tokens, bottleneck, shapes.hidden_state, P.CONTEXT)
    with dot.cluster("att", labels.attention):
        with dot.cluster("att_enc", labels.encoder, dashed=True):
            states = _encoder_rows(dot, "att", labels.source_tokens, state)
        alpha = "α " + shape_text(shapes.attn_weights)
        weigh = _op(dot, "att_weights", labels.attention_weights, alpha, P.ATTN_WEIGHTS)
        for h in states:
            if h != "att_gap":
                _flow(dot, h, weigh, colour=P.ATTN_WEIGHTS)
        context = _tensor(dot, "att_context", labels.context_vec, shape_text(shapes.context_vec), P.CONTEXT)
        _flow(dot, weigh, context, "α", shapes.attn_weights, P.ATTN_WEIGHTS)
        with dot.cluster("att_dec", labels.decoder, dashed=True):
            _decoder_rows(dot, "att_dec", labels.target_tokens[:1], context, shapes.context_vec, P.CONTEXT)
    return dot.source()


# --------------------------------------------------------------------------------------------------
# Page 1: self-attention without weights
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SelfAttentionLabels(_Labels):
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
class SelfAttentionShapes(_Shapes):
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
    dot = _Dot(rankdir)
    inputs = _tensor(dot, "inputs", labels.inputs, shape_text(shapes.inputs))
    query = _tensor(dot, "query", labels.query, shape_text(shapes.query), P.QUERY)
    scores = _op(dot, "dot", labels.dot_products, "x · q", P.ATTN_SCORES)
    softmax = _op(dot, "softmax", labels.softmax, None, P.ATTN_WEIGHTS)
    wsum = _op(dot, "wsum", labels.weighted_sum, "Σ α · x", P.CONTEXT)
    context = _tensor(dot, "context", labels.context_vec, shape_text(shapes.context_vec), P.CONTEXT)
    _flow(dot, inputs, query, shape=shapes.query, colour=P.QUERY)
    _flow(dot, inputs, scores, shape=shapes.inputs, colour=P.KEY)
    _flow(dot, query, scores, shape=shapes.query, colour=P.QUERY)
    _flow(dot, scores, softmax, labels.attn_scores, shapes.attn_scores, P.ATTN_SCORES)
    _flow(dot, softmax, wsum, labels.attn_weights, shapes.attn_weights, P.ATTN_WEIGHTS)
    _flow(dot, inputs, wsum, shape=shapes.inputs, colour=P.VALUE)
    _flow(dot, wsum, context, shape=shapes.context_vec, colour=P.CONTEXT)
    return dot.source()


# --------------------------------------------------------------------------------------------------
# Page 2: trainable weights
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TrainableWeightsLabels(_Labels):
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
class TrainableWeightsShapes(_Shapes):
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


def trainable_weights(labels: TrainableWeightsLabels, shapes: TrainableWeightsShapes, rankdir: str = "TB") -> str:
    """x → W_query / W_key / W_value → q, k, v → attn_scores / √d_k → attn_weights → context_vec.

    Chapter section "implementing self-attention with trainable weights" (scaled dot-product
    attention, Vaswani et al., 2017).

    Returns:
        DOT source (str).

    Raises:
        ValueError: for an unknown rankdir or d_k < 1.
    """
    dot = _Dot(rankdir)
    x = _tensor(dot, "x", labels.inputs, shape_text(shapes.inputs))
    wq = _op(dot, "wq", labels.W_query, shape_text(shapes.W_query), P.QUERY)
    wk = _op(dot, "wk", labels.W_key, shape_text(shapes.W_key), P.KEY)
    wv = _op(dot, "wv", labels.W_value, shape_text(shapes.W_value), P.VALUE)
    dot.same_rank(wq, wk, wv)
    scores = _op(dot, "dot", labels.dot_products, "q · kᵀ", P.ATTN_SCORES)
    scale = _op(dot, "scale", labels.scale, f"÷ √{shapes.d_k}", P.ATTN_SCORES)
    softmax = _op(dot, "softmax", labels.softmax, None, P.ATTN_WEIGHTS)
    wsum = _op(dot, "wsum", labels.weighted_sum, "Σ α · v", P.CONTEXT)
    context = _tensor(dot, "context", labels.context_vec, shape_text(shapes.context_vec), P.CONTEXT)
    for w, colour in ((wq, P.QUERY), (wk, P.KEY), (wv, P.VALUE)):
        _flow(dot, x, w, shape=shapes.inputs, colour=colour)
    _flow(dot, wq, scores, labels.query, shapes.query, P.QUERY)
    _flow(dot, wk, scores, labels.keys, shapes.keys, P.KEY)
    _flow(dot, scores, scale, labels.attn_scores, shapes.attn_scores, P.ATTN_SCORES)
    _flow(dot, scale, softmax, shape=shapes.attn_scores, colour=P.ATTN_SCORES)
    _flow(dot, softmax, wsum, labels.attn_weights, shapes.attn_weights, P.ATTN_WEIGHTS)
    _flow(dot, wv, wsum, labels.values, shapes.values, P.VALUE)
    _flow(dot, wsum, context, shape=shapes.context_vec, colour=P.CONTEXT)
    return dot.source()


# --------------------------------------------------------------------------------------------------
# Page 3: causal mask, two ways
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CausalMaskLabels(_Labels):
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
class CausalMaskShapes(_Shapes):
    """Shapes of page 3 (the keys of ``sections.causal_mask.mask_two_ways``): attn_scores, mask,
    masked_scores, attn_weights_causal, attn_weights (softmax of all scores), masked_simple,
    masked_simple_norm (T, T) each; row_sums (T,); d_k, the size in the √d_k scale."""

    attn_scores: Shape
    mask: Shape
    masked_scores: Shape
    attn_weights_causal: Shape
    attn_weights: Shape
    masked_simple: Shape
    row_sums: Shape
    masked_simple_norm: Shape
    d_k: int


def causal_mask(labels: CausalMaskLabels, shapes: CausalMaskShapes, rankdir: str = "TB") -> str:
    """Scores → mask (−∞ above the diagonal) → softmax, beside softmax → zero the future → ÷ row sums.

    Both routes give the same weights (the chapter's section "applying a causal attention
    mask"). Each mask box draws a min(T, 4) square of the mask it applies.

    Returns:
        DOT source (str).

    Raises:
        ValueError: for an unknown rankdir or a d_k < 1.
    """
    n = max(1, min(shapes.attn_scores[0] if shapes.attn_scores else 1, MASK_ICON))
    scale = f"÷ √{shapes.d_k}"
    dot = _Dot(rankdir)
    scores = _tensor(dot, "scores", labels.attn_scores, shape_text(shapes.attn_scores), P.ATTN_SCORES)
    with dot.cluster("masked", labels.masked_route):
        mask = _op(dot, "mask", _icon_op(labels.mask, shape_text(shapes.mask),
                                         _matrix_icon(n, "−∞", P.NEG_INF, P.PAPER)), colour=P.MASK)
        soft_a = _op(dot, "softmax_a", labels.softmax, scale, P.ATTN_WEIGHTS)
    with dot.cluster("renorm", labels.renormalise_route):
        soft_b = _op(dot, "softmax_b", labels.softmax, scale, P.ATTN_WEIGHTS)
        zero = _op(dot, "zero", _icon_op(labels.zero_future, None,
                                         _matrix_icon(n, "0", P.lighten(P.MASK, 0.8), P.PAPER)), colour=P.MASK)
        divide = _op(dot, "divide", labels.row_sums, "÷ " + shape_text(shapes.row_sums), P.ATTN_WEIGHTS)
    out_a = _tensor(dot, "weights_a", labels.attn_weights, shape_text(shapes.attn_weights_causal), P.ATTN_WEIGHTS)
    out_b = _tensor(dot, "weights_b", labels.attn_weights, shape_text(shapes.masked_simple_norm), P.ATTN_WEIGHTS)
    _flow(dot, scores, mask, shape=shapes.attn_scores, colour=P.ATTN_SCORES)
    _flow(dot, mask, soft_a, "−∞", shapes.masked_scores, P.ATTN_SCORES)
    _flow(dot, soft_a, out_a, shape=shapes.attn_weights_causal, colour=P.ATTN_WEIGHTS)
    _flow(dot, scores, soft_b, shape=shapes.attn_scores, colour=P.ATTN_SCORES)
    _flow(dot, soft_b, zero, shape=shapes.attn_weights, colour=P.ATTN_WEIGHTS)
    _flow(dot, zero, divide, shape=shapes.masked_simple, colour=P.ATTN_WEIGHTS)
    _flow(dot, divide, out_b, shape=shapes.masked_simple_norm, colour=P.ATTN_WEIGHTS)
    dot.same_rank(out_a, out_b)
    dot.edge(out_a, out_b, label=_arrow(labels.same, None), style="dashed", dir="none", color=P.RESIDUAL,
             constraint="false")
    return dot.source()


# --------------------------------------------------------------------------------------------------
# Page 4: dropout on the attention weights
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DropoutLabels(_Labels):
    """Words of page 4's diagram.

    Attributes:
        attn_weights: the causal attention weights (input of dropout).
        dropout: the dropout operation (training only).
        dropped: the fraction p of weights set to 0.
        kept: the survivors, multiplied by 1/(1−p).
        training: the arrow through dropout (model.train()).
        inference: the arrow around it (model.eval(): dropout does nothing).
        values, weighted_sum, context_vec: as on page 2.
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


@dataclass(frozen=True)
class DropoutShapes(_Shapes):
    """Shapes of page 4: attn_weights (T, T) or (b, T, T); dropped, the weights after dropout (same
    shape); values (T, d_out); context_vec (T, d_out); p, the dropout rate in [0, 1)."""

    attn_weights: Shape
    dropped: Shape
    values: Shape
    context_vec: Shape
    p: float


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
    dot = _Dot(rankdir)
    weights = _tensor(dot, "weights", labels.attn_weights, shape_text(shapes.attn_weights), P.ATTN_WEIGHTS)
    dropped = f"{_esc(labels.dropped)}<BR/>{_esc(f'p = {_num(p)}')}<BR/>{_esc('→ 0')}"
    scale = f"× 1/(1 − p) = × {_num(1 / (1 - p))}"
    kept = f"{_esc(labels.kept)}<BR/>{_esc(f'1 − p = {_num(1 - p)}')}<BR/>{_esc(scale)}"
    table = (
        '<TABLE BORDER="0" CELLBORDER="0" CELLSPACING="3" CELLPADDING="3">'
        f'<TR><TD COLSPAN="2">{_label(labels.dropout)}</TD></TR>'
        f'<TR><TD BGCOLOR="{P.lighten(P.MASK, 0.8)}">{dropped}</TD>'
        f'<TD BGCOLOR="{P.lighten(P.DROPOUT, 0.3)}">{kept}</TD></TR>'
        "</TABLE>"
    )
    drop = _op(dot, "dropout", _Html(table), colour=P.DROPOUT)
    values = _tensor(dot, "values", labels.values, shape_text(shapes.values), P.VALUE)
    wsum = _op(dot, "wsum", labels.weighted_sum, "Σ α · v", P.CONTEXT)
    context = _tensor(dot, "context", labels.context_vec, shape_text(shapes.context_vec), P.CONTEXT)
    _flow(dot, weights, drop, shape=shapes.attn_weights, colour=P.ATTN_WEIGHTS)
    _flow(dot, drop, wsum, labels.training, shapes.dropped, P.ATTN_WEIGHTS)
    _flow(dot, weights, wsum, labels.inference, shapes.attn_weights, P.ATTN_WEIGHTS, style="dashed")
    _flow(dot, values, wsum, shape=shapes.values, colour=P.VALUE)
    _flow(dot, wsum, context, shape=shapes.context_vec, colour=P.CONTEXT)
    return dot.source()


# --------------------------------------------------------------------------------------------------
# Page 5: multi-head attention, two ways
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MultiHeadLabels(_Labels):
    """Words of page 5's diagram.

    Attributes:
        inputs: x, the batch of input embeddings.
        wrapper, split: titles of the two halves (MultiHeadAttentionWrapper; MultiHeadAttention
            with weight splits).
        head: a callable giving one head's title from its 1-based index (``lambda i: _("head
            {i}").format(i=i)``).
        concat: the concatenation of the heads' outputs (torch.cat on the last dimension).
        projections: W_query, W_key, W_value each computed once for all heads.
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
    view_heads: str
    transpose: str
    attend: str
    transpose_back: str
    merge: str
    out_proj: str
    context_vec: str


@dataclass(frozen=True)
class MultiHeadShapes(_Shapes):
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


#: The two halves of :func:`multi_head`: MultiHeadAttentionWrapper and MultiHeadAttention with weight splits.
MULTI_HEAD_HALVES = ("wrapper", "split")


def multi_head(labels: MultiHeadLabels, shapes: MultiHeadShapes, rankdir: str = "TB",
               halves: tuple[str, ...] = MULTI_HEAD_HALVES) -> str:
    """The wrapper (heads in turn, concatenated) beside the weight-split layer, shapes at each step.

    Left: MultiHeadAttentionWrapper runs num_heads CausalAttention modules and concatenates
    their (b, T, head_dim) outputs. Right: MultiHeadAttention projects once to d_out, views it
    as (b, T, num_heads, head_dim), transposes to (b, num_heads, T, head_dim), attends, transposes
    back, merges to (b, T, d_out) and applies out_proj (chapter section "implementing multi-head
    attention with weight splits"). More than four heads are drawn as the first two, "⋯" and the last.

    Args:
        halves: which halves to draw, from :data:`MULTI_HEAD_HALVES` (default both, side by side).
            A view that puts each half in its own ``st.columns`` column passes one per diagram:
            on a phone the columns stack and each half keeps a readable size.

    Returns:
        DOT source (str).

    Raises:
        ValueError: for an unknown rankdir, or halves empty or naming an unknown half.
    """
    if not halves or any(h not in MULTI_HEAD_HALVES for h in halves):
        raise ValueError(f"halves must be a non-empty subset of {MULTI_HEAD_HALVES}, got {halves!r}")
    b, T, d_in, d_out = shapes.b, shapes.num_tokens, shapes.d_in, shapes.d_out
    H, hd = shapes.num_heads, shapes.head_dim
    qkv = (("W_query", P.QUERY), ("W_key", P.KEY), ("W_value", P.VALUE))
    short = (("q", P.QUERY), ("k", P.KEY), ("v", P.VALUE))
    dot = _Dot(rankdir)
    if "wrapper" in halves:
        with dot.cluster("wrapper", labels.wrapper):
            x_w = _tensor(dot, "w_x", labels.inputs, shape_text((b, T, d_in)))
            concat = _op(dot, "w_concat", labels.concat, "torch.cat(dim=-1)", P.CONTEXT)
            heads = []
            for i in _shown(H, limit=3):
                if i is None:
                    gap = dot.node("w_gap", label=_label("⋯", bold=False), shape="plaintext")
                    dot.edge(x_w, gap, style="invis")
                    dot.edge(gap, concat, style="invis")
                    heads.append(gap)
                    continue
                head = _op(dot, f"w_head{i}", _cells(short, _call(labels.head, i + 1), None), colour=P.ATTN_WEIGHTS)
                first = not heads  # every head has the same shapes: write them on the first head's arrows only
                _flow(dot, x_w, head, shape=(b, T, d_in) if first else None)
                _flow(dot, head, concat, shape=(b, T, hd) if first else None, colour=P.CONTEXT)
                heads.append(head)
            dot.same_rank(*heads)
            out_w = _tensor(dot, "w_out", labels.context_vec, shape_text((b, T, H * hd)), P.CONTEXT)
            _flow(dot, concat, out_w, shape=(b, T, H * hd), colour=P.CONTEXT)
    if "split" in halves:
        with dot.cluster("split", labels.split):
            x_s = _tensor(dot, "s_x", labels.inputs, shape_text((b, T, d_in)))
            proj = _op(dot, "s_proj", _cells(qkv, labels.projections, f"nn.Linear({d_in}, {d_out})", vertical=True))
            view = _op(dot, "s_view", labels.view_heads, ".view()")
            trans = _op(dot, "s_trans", labels.transpose, ".transpose(1, 2)")
            attend = _op(dot, "s_attend", labels.attend, "attn_weights " + shape_text((b, H, T, T)), P.ATTN_WEIGHTS)
            back = _op(dot, "s_back", labels.transpose_back, ".transpose(1, 2)")
            merge = _op(dot, "s_merge", labels.merge, ".contiguous().view()")
            out_proj = _op(dot, "s_out_proj", labels.out_proj, f"nn.Linear({d_out}, {d_out})", P.CONTEXT)
            out_s = _tensor(dot, "s_out", labels.context_vec, shape_text((b, T, d_out)), P.CONTEXT)
            _flow(dot, x_s, proj, shape=(b, T, d_in))
            _flow(dot, proj, view, "q, k, v", (b, T, d_out))
            _flow(dot, view, trans, "q, k, v", (b, T, H, hd))
            _flow(dot, trans, attend, "q, k, v", (b, H, T, hd))
            _flow(dot, attend, back, shape=(b, H, T, hd), colour=P.CONTEXT)
            _flow(dot, back, merge, shape=(b, T, H, hd), colour=P.CONTEXT)
            _flow(dot, merge, out_proj, shape=(b, T, d_out), colour=P.CONTEXT)
            _flow(dot, out_proj, out_s, shape=(b, T, d_out), colour=P.CONTEXT)
    return dot.source()


# --------------------------------------------------------------------------------------------------
# Page 7: where position information enters
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PositionalEncodingsLabels(_Labels):
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
class PositionalEncodingsShapes(_Shapes):
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
    dot = _Dot(rankdir)
    idx = _tensor(dot, "idx", labels.tokens, shape_text(shapes.idx))
    emb = _op(dot, "tok_emb", labels.tok_emb, "nn.Embedding")
    _flow(dot, idx, emb, shape=shapes.idx)
    proj = _op(dot, "proj", _cells((("W_query", P.QUERY), ("W_key", P.KEY), ("W_value", P.VALUE)), labels.projections))
    if additive:
        title = labels.learned if pos_encoding == "learned" else labels.sinusoidal
        table = _tensor(dot, "pos", title, shape_text(shapes.pos_table), P.POSITION)
        add = _add(dot, "add")
        dot.same_rank(emb, table)
        _flow(dot, emb, add, shape=shapes.tok_emb)
        _flow(dot, table, add, shape=shapes.pos_table, colour=P.POSITION, penwidth=2.5)
        _residual(dot, add, proj, "x", shapes.x)
    else:
        _residual(dot, emb, proj, "x", shapes.x)
        if pos_encoding == "none":
            note = dot.node("none", label=_label(labels.none, bold=False), shape="box", style="rounded,dashed",
                            color=P.RESIDUAL)
            dot.same_rank(emb, note)
    scores = _op(dot, "scores", labels.dot_products, "q · kᵀ " + shape_text(shapes.attn_scores), P.ATTN_SCORES)
    if pos_encoding == "rope":
        rot_q = _op(dot, "rot_q", labels.rotate, "q", P.POSITION)
        angles = _tensor(dot, "rope", labels.rope, "cos/sin " + shape_text(shapes.rope), P.POSITION)
        rot_k = _op(dot, "rot_k", labels.rotate, "k", P.POSITION)
        dot.same_rank(rot_q, angles, rot_k)
        dot.edge(rot_q, angles, style="invis")  # in a rank, edges order the nodes left to right
        dot.edge(angles, rot_k, style="invis")
        _flow(dot, proj, rot_q, "q", shapes.q, P.QUERY)
        _flow(dot, proj, rot_k, "k", shapes.k, P.KEY)
        _flow(dot, angles, rot_q, colour=P.POSITION, penwidth=2.5)
        _flow(dot, angles, rot_k, colour=P.POSITION, penwidth=2.5)
        _flow(dot, rot_q, scores, "q", shapes.q, P.QUERY)
        _flow(dot, rot_k, scores, "k", shapes.k, P.KEY)
    elif shapes.q == shapes.k:  # two parallel arrows: one label, or the two labels collide
        _flow(dot, proj, scores, "q, k", shapes.q, P.QUERY)
        _flow(dot, proj, scores, colour=P.KEY)
    else:
        _flow(dot, proj, scores, "q", shapes.q, P.QUERY)
        _flow(dot, proj, scores, "k", shapes.k, P.KEY)
    return dot.source()


# --------------------------------------------------------------------------------------------------
# Lab: the course's GPT, block by block
# --------------------------------------------------------------------------------------------------


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
class LabLabels(_Labels):
    """Words of the Lab's GPT diagram.

    Attributes:
        tokens: the input characters' ids.
        tok_emb: the token embedding.
        position: the model's position information (the view picks the word for its
            pos_encoding: learned table, sinusoidal table, RoPE; unused for "none").
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
class LabShapes(_Shapes):
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
    pre-LayerNorm layout, Radford et al., 2019; ``engine.gpt``). The learned and sinusoidal
    tables are added to the token embeddings; RoPE's rotation feeds the attention box.

    Args:
        parts: from :func:`gpt_parts` on the model the Lab ran.

    Returns:
        DOT source (str).

    Raises:
        ValueError: for an unknown rankdir or pos_encoding in ``parts``.
    """
    if parts.pos_encoding not in POS_ENCODINGS:
        raise ValueError(f"pos_encoding must be one of {POS_ENCODINGS}, got {parts.pos_encoding!r}")
    def count(n: int) -> str:
        return _call(labels.params, n)
    dot = _Dot(rankdir)
    idx = _tensor(dot, "idx", labels.tokens, shape_text(shapes.idx))
    emb = _op(dot, "tok_emb", labels.tok_emb, count(parts.tok_emb))
    _flow(dot, idx, emb, shape=shapes.idx)
    stream = emb
    if parts.pos_encoding in ("learned", "sinusoidal"):
        pos = _op(dot, "pos", labels.position, count(parts.pos_emb), P.POSITION)
        add = _add(dot, "emb_add")
        dot.same_rank(emb, pos)
        _flow(dot, emb, add)
        _flow(dot, pos, add, colour=P.POSITION, penwidth=2.5)
        stream = add
    with dot.cluster("block", f"{labels.block} × {parts.n_layer}"):
        block_in = dot.node("block_in", shape="point", width=0.08, color=P.RESIDUAL)
        ln_1 = _op(dot, "ln_1", labels.ln_1, count(parts.ln_1))
        attn_sub = count(parts.attn)
        if shapes.attn_weights is not None:
            attn_sub += "\nattn_weights " + shape_text(shapes.attn_weights)
        attn = _op(dot, "attn", labels.attn, attn_sub, P.ATTN_WEIGHTS)
        add_1 = _add(dot, "add_1")
        ln_2 = _op(dot, "ln_2", labels.ln_2, count(parts.ln_2))
        mlp = _op(dot, "mlp", labels.mlp, count(parts.mlp), P.CONTEXT)
        add_2 = _add(dot, "add_2")
        if parts.pos_encoding == "rope":
            rope = _op(dot, "pos", labels.position, count(parts.pos_emb), P.POSITION)
            dot.same_rank(rope, attn)
            _flow(dot, rope, attn, colour=P.POSITION, penwidth=2.5, style="dashed")
    _residual(dot, stream, block_in, "x", shapes.residual, arrowhead="none")
    _residual(dot, block_in, ln_1)
    _flow(dot, ln_1, attn)
    _flow(dot, attn, add_1, colour=P.CONTEXT)
    _residual(dot, block_in, add_1, labels.residual, None)
    _residual(dot, add_1, ln_2)
    _flow(dot, ln_2, mlp)
    _flow(dot, mlp, add_2, colour=P.CONTEXT)
    _residual(dot, add_1, add_2, labels.residual, None)
    ln_f = _op(dot, "ln_f", labels.ln_f, count(parts.ln_f))
    head = _op(dot, "lm_head", labels.lm_head, count(parts.lm_head))
    softmax = _op(dot, "softmax", labels.softmax, None, P.ATTN_WEIGHTS)
    probs = _tensor(dot, "probs", labels.probs, shape_text(shapes.logits), P.ATTN_WEIGHTS)
    _residual(dot, add_2, ln_f, "x", shapes.residual)
    _flow(dot, ln_f, head)
    _flow(dot, head, softmax, "logits", shapes.logits)
    _flow(dot, softmax, probs, shape=shapes.logits, colour=P.ATTN_WEIGHTS)
    caption = dot.node("total", label=_label(_call(labels.total, parts.total)), shape="plaintext")
    dot.edge(probs, caption, style="invis")
    return dot.source()
