"""Figures of section 5, multi-head attention: one heatmap per head behind a Plotly slider, and the benchmark."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd
import plotly.graph_objects as go

from engine.figures.core import PALETTE, add_step_slider, base_layout, heatmap_trace, matrix_axes, to_numpy


def heads_slider(attn_weights, tokens: Sequence[str], title: str = "attn_weights of head", height: int | None = None) -> go.Figure:
    """One attention heatmap per head, a Plotly slider stepping through the heads (no rerun).

    Args:
        attn_weights: (H, T, T) weights, row = query, column = key; every head
            shares the colour range [0, 1] so heads compare at a glance.
        tokens: the T tokens, on both axes.
        title: prefix of each step's title ("… h / H").

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
    decimals = 2 if T > 8 else 3
    for h in range(H):
        fig.add_trace(heatmap_trace(w[h], tokens, tokens, zmin=0.0, zmax=1.0, decimals=decimals, name=f"head {h}",
                                    show_values=T <= 12))
    matrix_axes(fig, tokens, tokens, "query", "key")
    base_layout(fig, f"{title} 0 / {H}", height or max(300, min(40 * T, 640) + 170))
    add_step_slider(
        fig, [str(h) for h in range(H)], traces_per_step=1, prefix="head ",
        step_layouts=[{"title.text": f"{title} {h} / {H}"} for h in range(H)],
    )
    return fig


def bench_bars(table: pd.DataFrame, size_label: str) -> go.Figure:
    """Milliseconds per variant for one input size: forward and forward+backward bars side by side.

    Args:
        table: rows of the benchmark for one size with columns ``variant``,
            ``forward ms`` and ``forward+backward ms``.
        size_label: the input size, for the title (e.g. "B=8, T=64, C=256, H=4").
    """
    fig = go.Figure()
    for k, column in enumerate(("forward ms", "forward+backward ms")):
        values = table[column].tolist()
        fig.add_bar(
            y=table["variant"].tolist(),
            x=values,
            orientation="h",
            name=column.replace(" ms", ""),
            marker_color=PALETTE[k],
            text=[f"{v:.2f}" if v < 10 else f"{v:.0f}" for v in values],
            textposition="outside",
            cliponaxis=False,
            hovertemplate="%{y}: %{x:.3f} ms<extra>" + column + "</extra>",
        )
    largest = max([float(v) for v in table["forward+backward ms"].dropna()] + [float(v) for v in table["forward ms"]])
    fig.update_yaxes(autorange="reversed")
    fig.update_xaxes(title_text="milliseconds (median)", gridcolor="#eee", range=[0, 1.12 * largest])
    fig.update_layout(barmode="group", legend=dict(orientation="h", y=-0.2))
    return base_layout(fig, f"Time per call · {size_label}", 80 + 44 * len(table) + 60)
