"""Figures of section 3 (causal mask): the two masking routes, the leakage test, triu masks.

Built on :mod:`engine.figures.core`; no Streamlit. Matrices read like the
printed tensors (row 0 on top, values in the cells, ``-inf`` written out).
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from engine.figures.core import PALETTE, SIGNED_SCALE, WEIGHTS_SCALE, base_layout, heatmap_trace, matrix_axes, to_numpy

#: Two colours for a 0/1 mask: visible (0) light, hidden (1) dark.
MASK_SCALE = [[0.0, "#f3f6fa"], [1.0, "#5b6b80"]]


def two_ways_figure(result: dict, tokens: Sequence[str]) -> go.Figure:
    """Both masking routes as a 2 x 3 grid of heatmaps.

    Top row (mask after the softmax): all weights, weights times ``tril``,
    renormalised. Bottom row (mask before the softmax): the
    scores, the scores with -inf above the diagonal, their softmax.

    Args:
        result: the dict of :func:`engine.sections.causal_mask.mask_two_ways`.
        tokens: the T token labels.

    Returns:
        A figure with 6 heatmap traces, row 0 of every matrix on top.
    """
    tokens = list(tokens)
    panels = [
        (result["attn_weights"], "1 · softmax of all scores", tokens, WEIGHTS_SCALE),
        (result["masked_simple"], "2 · × tril(ones): future weights zeroed", tokens, WEIGHTS_SCALE),
        (result["masked_simple_norm"], "3 · ÷ row sums: renormalised", tokens, WEIGHTS_SCALE),
        (result["attn_scores"], "1 · scores queries @ keys.T", tokens, SIGNED_SCALE),
        (result["masked_scores"], "2 · masked_fill(triu(diagonal=1), -inf)", tokens, SIGNED_SCALE),
        (result["attn_weights_causal"], "3 · softmax(masked / √d_k)", tokens, WEIGHTS_SCALE),
    ]
    fig = make_subplots(
        rows=2, cols=3, subplot_titles=[p[1] for p in panels], horizontal_spacing=0.07, vertical_spacing=0.2
    )
    for i, (matrix, _, row_labels, scale) in enumerate(panels):
        r, c = divmod(i, 3)
        zmin, zmax = (0.0, 1.0) if scale == WEIGHTS_SCALE else (None, None)
        fig.add_trace(
            heatmap_trace(matrix, row_labels, tokens, colorscale=scale, zmin=zmin, zmax=zmax, showscale=False),
            row=r + 1,
            col=c + 1,
        )
        matrix_axes(fig, row_labels, tokens, row=r + 1, col=c + 1)
    fig.update_xaxes(tickangle=-45, tickfont=dict(size=11))
    fig.update_yaxes(tickfont=dict(size=11))
    fig.update_annotations(font=dict(size=13), yshift=58)
    base_layout(fig, None, 900)
    fig.update_layout(margin=dict(t=110, l=10, r=10, b=10))
    return fig


def leakage_figure(table: pd.DataFrame, tokens: Sequence[str], token_index: int) -> go.Figure:
    """Per output row, the largest change of the context vector when one token is perturbed.

    Args:
        table: the DataFrame of :func:`engine.sections.causal_mask.leakage_test`.
        tokens: the T token labels.
        token_index: the perturbed token (shaded).

    Returns:
        Grouped bars (causal vs no mask), one group per output row.
    """
    x = list(range(len(tokens)))
    fig = go.Figure()
    for k, (column, name) in enumerate((("max |Δ| causal", "with the causal mask"), ("max |Δ| no mask", "without a mask"))):
        values = table[column].to_numpy()
        fig.add_bar(
            x=x,
            y=values,
            name=name,
            marker_color=PALETTE[0] if k == 0 else "#bbbbbb",
            text=["0" if v == 0 else f"{v:.2e}" for v in values],
            textposition="outside",
            hovertemplate="row %{x}: %{y:.3g}<extra>" + name + "</extra>",
        )
    fig.add_vrect(x0=token_index - 0.5, x1=token_index + 0.5, fillcolor="#ffdd57", opacity=0.25, line_width=0)
    fig.add_annotation(x=token_index, y=1.02, yref="paper", text="perturbed", showarrow=False, font=dict(size=12))
    fig.update_xaxes(tickmode="array", tickvals=x, ticktext=[f"{i} · {t}" for i, t in enumerate(tokens)], title_text="output row (query token)")
    fig.update_yaxes(title_text="max |Δ context_vec|", gridcolor="#eee", rangemode="tozero")
    fig.update_layout(barmode="group", legend=dict(orientation="h", y=-0.3))
    return base_layout(fig, None, 380)


def mask_heatmap(mask, tokens: Sequence[str], title: str | None = None) -> go.Figure:
    """A 0/1 mask (1 = hidden) as a two-colour matrix with the values written in.

    Args:
        mask: (T, T) tensor/array of 0/1 (or bool).
        tokens: the T token labels.

    Returns:
        One heatmap, row 0 on top.
    """
    tokens = list(tokens)
    fig = go.Figure(heatmap_trace(to_numpy(mask), tokens, tokens, colorscale=MASK_SCALE, zmin=0, zmax=1, decimals=0, showscale=False))
    matrix_axes(fig, tokens, tokens, "query (row)", "key (column)")
    return base_layout(fig, title, 420, top=100 if title else 60)
