"""Home's diagram: the RNN encoder–decoder and its one hidden state, beside attention over every encoder state."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from engine import palette as P
from engine.diagrams.core import (
    SUB_PT,
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
    shown_rows,
    tensor_node,
)

_SUBSCRIPTS = str.maketrans("0123456789", "₀₁₂₃₄₅₆₇₈₉")


def _sub(letter: str, index: int) -> str:
    """Notation with a 1-based subscript: h₁, s₁₂."""
    return letter + str(index + 1).translate(_SUBSCRIPTS)


@dataclass(frozen=True)
class HomeLabels(CheckedLabels):
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
class HomeShapes(CheckedShapes):
    """Shapes of the Home diagram: encoder_states (T, d_h) stacked, hidden_state (d_h,),
    attn_weights (T,) for one decoder step, context_vec (d_h,)."""

    encoder_states: Shape
    hidden_state: Shape
    attn_weights: Shape
    context_vec: Shape


def _state(dot: Dot, node_id: str, name: str, token: str) -> str:
    """A recurrent state box: its name (h₁, s₁) over the token it reads or writes."""
    label = Html(f'<B>{esc(name)}</B>  <FONT POINT-SIZE="{SUB_PT}">{esc(token)}</FONT>')
    return dot.node(node_id, label=label, shape="box", style="rounded,filled", fillcolor=P.PAPER, penwidth=1.6)


def _encoder_rows(dot: Dot, prefix: str, tokens: Sequence[str], state_shape: Shape) -> list[str]:
    """One state per token (h₁ … h_T, the token written in its box), chained top to bottom."""
    states: list[str] = []
    for i in shown_rows(len(tokens)):
        if i is None:
            gap = dot.node(f"{prefix}_gap", label=node_label("⋯", bold=False), shape="plaintext")
            flow(dot, states[-1], gap, shape=state_shape)
            states.append(gap)
            continue
        h = _state(dot, f"{prefix}_h{i}", _sub("h", i), tokens[i])
        if states:
            flow(dot, states[-1], h, shape=state_shape)
        states.append(h)
    return states


def _decoder_rows(dot: Dot, prefix: str, tokens: Sequence[str], start: str, state_shape: Shape,
                  first_colour: str | None) -> None:
    """One decoder state per output token (s₁ …, the token written in its box), fed from ``start``."""
    previous = start
    for j in shown_rows(len(tokens)):
        if j is None:
            gap = dot.node(f"{prefix}_gap", label=node_label("⋯", bold=False), shape="plaintext")
            flow(dot, previous, gap)
            previous = gap
            continue
        s = _state(dot, f"{prefix}_s{j}", _sub("s", j), tokens[j])
        first = previous == start
        flow(dot, previous, s, shape=state_shape if first else None, colour=first_colour if first else None)
        previous = s


#: The two halves :func:`home` can draw alone (a phone's narrow column).
PARTS = ("rnn", "attention")


def home(labels: HomeLabels, shapes: HomeShapes, rankdir: str = "TB", part: str | None = None) -> str:
    """The RNN encoder–decoder and its single hidden state, beside attention over every encoder state.

    Left: each token updates the hidden state h₁ … h_T; only the last one (the bottleneck,
    ``hidden_state``) reaches the decoder. Right: for one decoder step, attention weighs every
    encoder state and hands their weighted sum (``context_vec``) to the decoder (Bahdanau et al.,
    2014; the chapter's section "the problem with modeling long sequences").

    Args:
        labels: the words (see :class:`HomeLabels`).
        shapes: the shapes the page produced (see :class:`HomeShapes`).
        rankdir: "TB" (default) or another of :data:`RANKDIRS`.
        part: None draws both halves side by side; "rnn" or "attention" (:data:`PARTS`) draws that half
            alone, for a phone, where the two stacked keep their text at its size.

    Returns:
        DOT source (str).

    Raises:
        ValueError: if the number of source tokens differs from encoder_states' first size, a
            token list is empty, or rankdir or part is unknown.
    """
    if part is not None and part not in PARTS:
        raise ValueError(f"part must be None or one of {PARTS}, got {part!r}")
    T = shapes.encoder_states[0] if shapes.encoder_states else 0
    if len(labels.source_tokens) != T or T == 0:
        raise ValueError(f"need one source token per encoder state: {len(labels.source_tokens)} tokens, "
                         f"encoder_states {shapes.encoder_states}")
    if not labels.target_tokens:
        raise ValueError("target_tokens is empty")
    state = shapes.encoder_states[1:]
    dot = Dot(rankdir)
    if part in (None, "rnn"):
        _rnn_half(dot, labels, shapes, state)
    if part in (None, "attention"):
        _attention_half(dot, labels, shapes, state)
    return dot.source()


def _rnn_half(dot: Dot, labels: HomeLabels, shapes: HomeShapes, state: Shape) -> None:
    """The RNN encoder–decoder: the encoder's states chained, the last one alone reaching the decoder."""
    with dot.cluster("rnn", labels.rnn):
        with dot.cluster("rnn_enc", labels.encoder, dashed=True):
            states = _encoder_rows(dot, "rnn", labels.source_tokens, state)
        bottleneck = tensor_node(dot, "rnn_hidden", labels.hidden_state, shape_text(shapes.hidden_state), P.CONTEXT)
        flow(dot, states[-1], bottleneck, shape=shapes.hidden_state, colour=P.CONTEXT, penwidth=2.5)
        with dot.cluster("rnn_dec", labels.decoder, dashed=True):
            _decoder_rows(dot, "rnn_dec", labels.target_tokens, bottleneck, shapes.hidden_state, P.CONTEXT)


def _attention_half(dot: Dot, labels: HomeLabels, shapes: HomeShapes, state: Shape) -> None:
    """Attention: every encoder state weighed, their weighted sum handed to the decoder's step."""
    with dot.cluster("att", labels.attention):
        with dot.cluster("att_enc", labels.encoder, dashed=True):
            states = _encoder_rows(dot, "att", labels.source_tokens, state)
        alpha = "α " + shape_text(shapes.attn_weights)
        weigh = op_node(dot, "att_weights", labels.attention_weights, alpha, P.ATTN_WEIGHTS)
        for h in states:
            if h != "att_gap":
                flow(dot, h, weigh, colour=P.ATTN_WEIGHTS)
        context = tensor_node(dot, "att_context", labels.context_vec, shape_text(shapes.context_vec), P.CONTEXT)
        flow(dot, weigh, context, "α", shapes.attn_weights, P.ATTN_WEIGHTS)
        with dot.cluster("att_dec", labels.decoder, dashed=True):
            _decoder_rows(dot, "att_dec", labels.target_tokens[:1], context, shapes.context_vec, P.CONTEXT)
