"""Figures of the multi-head page: one heatmap per head behind a Plotly slider, and the benchmark bars.

Every word a figure shows comes from the caller (templates with named placeholders, already translated).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd
import plotly.graph_objects as go

from engine.figures.core import PALETTE, add_step_slider, base_layout, heatmap_trace, matrix_axes, to_numpy

#: Longest line whose weights are written in the cells: past it a phone's cells are too narrow for the numbers
#: (they stay in the hover).
MAX_VALUE_TOKENS = 8
#: Top margin (px) of :func:`heads_slider`: the title, then the key axis title and the key tokens above the cells.
HEADS_TOP_PX = 96


@dataclass(frozen=True)
class HeadsLabels:
    """Words of :func:`heads_slider`, in the reader's language.

    Attributes:
        title: each step's title, with ``{h}`` (the head shown) and ``{H}`` (the head count).
        head: a trace's name, with ``{h}``.
        query_axis, key_axis: the axis titles.
        slider_prefix: text before the slider's current value.
        separators: Plotly's ``layout.separators`` (decimal sign, group separator) of the reader's language.
        colon: what joins a hover's cell labels to the value, in the reader's typography (``"\u202f: "`` in French).
    """

    title: str
    head: str
    query_axis: str
    key_axis: str
    slider_prefix: str
    separators: str = ".,"
    colon: str = ": "


def heads_slider(attn_weights, tokens: Sequence[str], labels: HeadsLabels, height: int | None = None) -> go.Figure:
    """One attention heatmap per head, a Plotly slider stepping through the heads (no rerun).

    Args:
        attn_weights: (H, T, T) weights, row = query, column = key; every head
            shares the colour range [0, 1] so heads compare at a glance. The cells carry their values for
            lines of at most :data:`MAX_VALUE_TOKENS` tokens.
        tokens: the T tokens, on both axes.
        labels: the figure's words.

    Returns:
        A figure with H heatmap traces and ``layout.sliders[0]`` of H steps; head 0 shown first.

    Raises:
        ValueError: if ``attn_weights`` is not (H, T, T) with T = len(tokens).
    """
    w = to_numpy(attn_weights)
    if w.ndim != 3 or w.shape[1] != w.shape[2] or w.shape[1] != len(tokens):
        raise ValueError(f"attn_weights must be (H, T, T) with T={len(tokens)}, got {w.shape}")
    H, T = w.shape[0], w.shape[1]
    fig = go.Figure()
    decimals = 2 if T > 6 else 3
    for h in range(H):
        fig.add_trace(heatmap_trace(w[h], tokens, tokens, zmin=0.0, zmax=1.0, decimals=decimals,
                                    name=labels.head.format(h=h), show_values=T <= MAX_VALUE_TOKENS,
                                    separators=labels.separators, colon=labels.colon))
    matrix_axes(fig, tokens, tokens, labels.query_axis, labels.key_axis)
    titles = [labels.title.format(h=h, H=H) for h in range(H)]
    # the key axis title sits on top, under the figure title: room for both
    base_layout(fig, titles[0], height or max(300, min(40 * T, 640) + 190), top=HEADS_TOP_PX,
                separators=labels.separators)
    add_step_slider(fig, [str(h) for h in range(H)], traces_per_step=1, prefix=labels.slider_prefix,
                    step_layouts=[{"title.text": t} for t in titles])
    return fig


@dataclass(frozen=True)
class BenchLabels:
    """Words of :func:`bench_bars`, in the reader's language.

    Attributes:
        title: the figure's title (names the input size).
        forward, forward_backward: legend names of the two bar series.
        time_axis: the x axis title.
        hover: a bar's hover, with ``{variant}`` and ``{ms}`` (Plotly's ``%{y}`` and ``%{x:.3f}`` are passed in).
        separators: Plotly's ``layout.separators`` of the reader's language (bar texts and hovers are d3 formats).
    """

    title: str
    forward: str
    forward_backward: str
    time_axis: str
    hover: str
    separators: str = ".,"


def bench_bars(rows: pd.DataFrame, labels: BenchLabels) -> go.Figure:
    """Milliseconds per variant for one input size: forward and forward+backward bars side by side.

    Args:
        rows: :func:`engine.sections.multi_head.bench_rows` (columns ``variant``, ``forward_ms``,
            ``forward_backward_ms``; the latter may hold None).
        labels: the figure's words.

    Returns:
        A figure with two horizontal bar traces (forward, forward+backward), values written by d3 formats.
    """
    fig = go.Figure()
    hover = labels.hover.format(variant="%{y}", ms="%{x:.3f}")
    for k, (column, name) in enumerate((("forward_ms", labels.forward),
                                        ("forward_backward_ms", labels.forward_backward))):
        values = rows[column].tolist()
        fig.add_bar(
            y=rows["variant"].tolist(),
            x=values,
            orientation="h",
            name=name,
            marker_color=PALETTE[k],
            texttemplate=["" if v is None or v != v else "%{x:.2f}" if v < 10 else "%{x:,.0f}" for v in values],
            textposition="outside",
            cliponaxis=False,
            hovertemplate=hover + "<extra>" + name + "</extra>",
        )
    largest = max([float(v) for v in rows["forward_backward_ms"].dropna()] + [float(v) for v in rows["forward_ms"]])
    fig.update_yaxes(autorange="reversed")
    fig.update_xaxes(title_text=labels.time_axis, gridcolor="#eee", range=[0, 1.12 * largest])
    fig.update_layout(barmode="group", legend=dict(orientation="h", y=-0.2), separators=labels.separators)
    return base_layout(fig, labels.title, 80 + 44 * len(rows) + 60, separators=labels.separators)
