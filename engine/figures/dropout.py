"""Figures of section 4 (dropout): the in-figure slider over p, convergence of the mean, train vs eval.

Built on :mod:`engine.figures.core`; no Streamlit.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd
import plotly.graph_objects as go
import torch
from plotly.subplots import make_subplots

from engine.figures.core import PALETTE, WEIGHTS_SCALE, add_step_slider, base_layout, heatmap_trace, matrix_axes, to_numpy

_SUM_SCALE = "Greens"


def dropout_slider_figure(sweep: dict[float, dict], tokens: Sequence[str], active_p: float = 0.5) -> go.Figure:
    """One figure with a Plotly slider over p: ones and causal weights after dropout, with row sums.

    Four panels per step: the matrix of ones after dropout, its row sums, the
    causal weights after dropout (same mask), their row sums. Survivors carry
    the factor 1/(1 - p); dropped cells are 0.

    Args:
        sweep: the dict of :func:`engine.sections.dropout.dropout_sweep` (p -> matrices).
        tokens: the T token labels.
        active_p: the rate shown first (must be a key of ``sweep``).

    Returns:
        A figure with 4 heatmap traces per p and ``layout.sliders[0]`` with one step per p.

    Raises:
        ValueError: if ``active_p`` is not in the sweep.
    """
    p_values = list(sweep)
    if active_p not in p_values:
        raise ValueError(f"active_p={active_p} is not one of {p_values}")
    tokens = list(tokens)
    fig = make_subplots(
        rows=1,
        cols=4,
        column_widths=[0.39, 0.06, 0.39, 0.09],
        horizontal_spacing=0.035,
        subplot_titles=("dropout(ones(6, 6))", "row sum", "dropout(causal attn_weights)", "row sum"),
    )
    titles = []
    for p, result in sweep.items():
        scale = float(result["scale"])
        panels = (
            (result["ones"], tokens, 1, WEIGHTS_SCALE, 2, (0.0, max(scale, 1.0))),
            (result["ones_row_sums"].unsqueeze(-1), ["Σ"], 2, _SUM_SCALE, 1, (0.0, None)),  # (T,) -> (T, 1)
            (result["weights"], tokens, 3, WEIGHTS_SCALE, 4, (0.0, max(scale, 1.0))),
            (result["weights_row_sums"].unsqueeze(-1), ["Σ"], 4, _SUM_SCALE, 4, (0.0, None)),  # (T,) -> (T, 1)
        )
        for matrix, cols, col, colorscale, decimals, (zmin, zmax) in panels:
            fig.add_trace(
                heatmap_trace(matrix, tokens, cols, colorscale=colorscale, zmin=zmin, zmax=zmax, decimals=decimals, showscale=False),
                row=1,
                col=col,
            )
        kept = int((result["ones"] > 0).sum())
        titles.append(
            f"p = {p:.1f}: each weight is dropped with probability {p:.1f}; survivors × 1/(1−p) = {scale:.4g} "
            f"({kept} of {result['ones'].numel()} kept this time)"
        )
    for col, labels in ((1, tokens), (2, ["Σ"]), (3, tokens), (4, ["Σ"])):
        matrix_axes(fig, tokens, labels, row=1, col=col)
    for col in (2, 3, 4):  # every panel shares the rows of the first one
        fig.update_yaxes(showticklabels=False, row=1, col=col)
    fig.update_xaxes(tickangle=-45, tickfont=dict(size=11))
    fig.update_annotations(yshift=55)
    base_layout(fig, titles[p_values.index(active_p)], 500, top=140)
    return add_step_slider(
        fig,
        [f"{p:.1f}" for p in p_values],
        traces_per_step=4,
        prefix="dropout p = ",
        active=p_values.index(active_p),
        step_layouts=[{"title.text": t} for t in titles],
    )


def convergence_figure(table: pd.DataFrame, p: float) -> go.Figure:
    """max |mean over n masks − weights| against n (log-log), with the σ/√n guide.

    Args:
        table: the DataFrame of :func:`engine.sections.dropout.dropout_expectation`.
        p: the rate it was computed with (for the legend).
    """
    fig = go.Figure()
    fig.add_scatter(
        x=table["masks"], y=table["max |mean - weights|"], mode="lines", name=f"max |mean − weights|, p = {p:.1f}",
        line=dict(color=PALETTE[0]), hovertemplate="%{x} masks: %{y:.4f}<extra></extra>",
    )
    fig.add_scatter(
        x=table["masks"], y=table["σ_max / √n"], mode="lines", name="σ of the largest weight / √n",
        line=dict(color=PALETTE[1], dash="dash"), hovertemplate="%{x} masks: %{y:.4f}<extra>σ/√n</extra>",
    )
    fig.update_xaxes(type="log", title_text="number of dropout masks averaged", gridcolor="#eee")
    fig.update_yaxes(type="log", title_text="largest deviation from the weights", gridcolor="#eee")
    fig.update_layout(legend=dict(orientation="h", y=-0.25))
    return base_layout(fig, None, 380)


def train_eval_figure(result: dict, tokens: Sequence[str]) -> go.Figure:
    """Attention weights of two train() calls and one eval() call side by side.

    Args:
        result: the dict of :func:`engine.sections.dropout.train_vs_eval`.
        tokens: the T token labels.
    """
    tokens = list(tokens)
    sums = [to_numpy(result["train_1"].sum(dim=-1)), to_numpy(result["train_2"].sum(dim=-1)), to_numpy(result["eval_1"].sum(dim=-1))]
    titles = ("train(), call 1", "train(), call 2", "eval()")
    fig = make_subplots(rows=1, cols=3, subplot_titles=titles, horizontal_spacing=0.12)
    zmax = float(torch.stack([result["train_1"], result["train_2"], result["eval_1"]]).max())
    for col, (key, s) in enumerate(zip(("train_1", "train_2", "eval_1"), sums), start=1):
        rows = [f"{t} (Σ {v:.2f})" for t, v in zip(tokens, s)]
        fig.add_trace(heatmap_trace(result[key], rows, tokens, zmin=0.0, zmax=zmax, decimals=3, showscale=False), row=1, col=col)
        matrix_axes(fig, rows, tokens, row=1, col=col)
    fig.update_xaxes(tickangle=-45, tickfont=dict(size=11))
    fig.update_yaxes(tickfont=dict(size=11))
    fig.update_annotations(yshift=55)
    base_layout(fig, None, 460, top=110)
    return fig
