"""Figures of the dropout page: the in-figure slider over p, convergence of the mean, train vs eval.

Built on :mod:`engine.figures.core`; no Streamlit. Every word a figure shows comes from the caller,
in one small frozen dataclass of labels per figure (templates with named placeholders, translated).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import plotly.graph_objects as go
import torch
from plotly.subplots import make_subplots

from engine.figures.core import (
    PALETTE,
    WEIGHTS_SCALE,
    add_step_slider,
    base_layout,
    heatmap_trace,
    matrix_axes,
    to_numpy,
)
from engine.sections.dropout import DropoutPair, Expectation, TrainVsEval

_SUM_SCALE = "Greens"


@dataclass(frozen=True)
class SliderLabels:
    """Words of :func:`dropout_slider_figure`, in the reader's language.

    Attributes:
        ones_panel, weights_panel, sum_panel: the panel titles.
        step: each step's title, with ``{p}``, ``{scale}``, ``{kept}`` and ``{total}``.
        slider_prefix: text before the slider's current value.
    """

    ones_panel: str
    weights_panel: str
    sum_panel: str
    step: str
    slider_prefix: str


def step_label(p: float) -> str:
    """The slider label of rate ``p`` ("0.5"), also how a page names the figure's active step."""
    return f"{p:.1f}"


def dropout_slider_figure(sweep: dict[float, DropoutPair], tokens: Sequence[str], labels: SliderLabels,
                          active_p: float) -> go.Figure:
    """One figure with a Plotly slider over p: ones and causal weights after dropout, with row sums.

    Four panels per step: the matrix of ones after dropout, its row sums, the
    causal weights after dropout (same mask), their row sums. Survivors carry
    the factor 1/(1 - p); dropped cells are 0.

    Args:
        sweep: :func:`engine.sections.dropout.dropout_sweep` (p -> :class:`DropoutPair`).
        tokens: the T token labels.
        labels: the figure's words.
        active_p: the rate shown first (must be a key of ``sweep``); a page that prints numbers
            next to the figure prints those of this step.

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
        subplot_titles=(labels.ones_panel, labels.sum_panel, labels.weights_panel, labels.sum_panel),
    )
    titles = []
    for p, result in sweep.items():
        top = max(result.scale, 1.0)
        panels = (
            (result.ones, tokens, 1, WEIGHTS_SCALE, 2, (0.0, top)),
            (result.ones_row_sums.unsqueeze(-1), ["Σ"], 2, _SUM_SCALE, 1, (0.0, None)),  # (T,) -> (T, 1)
            (result.weights, tokens, 3, WEIGHTS_SCALE, 4, (0.0, top)),
            (result.weights_row_sums.unsqueeze(-1), ["Σ"], 4, _SUM_SCALE, 4, (0.0, None)),  # (T,) -> (T, 1)
        )
        for matrix, cols, col, colorscale, decimals, (zmin, zmax) in panels:
            fig.add_trace(
                heatmap_trace(matrix, tokens, cols, colorscale=colorscale, zmin=zmin, zmax=zmax, decimals=decimals,
                              showscale=False),
                row=1,
                col=col,
            )
        titles.append(labels.step.format(p=p, scale=result.scale, kept=result.kept, total=result.ones.numel()))
    for col, axis_labels in ((1, tokens), (2, ["Σ"]), (3, tokens), (4, ["Σ"])):
        matrix_axes(fig, tokens, axis_labels, row=1, col=col)
    for col in (2, 3, 4):  # every panel shares the rows of the first one
        fig.update_yaxes(showticklabels=False, row=1, col=col)
    fig.update_xaxes(tickangle=-45, tickfont=dict(size=11))
    fig.update_annotations(yshift=55)
    base_layout(fig, titles[p_values.index(active_p)], 500, top=140)
    return add_step_slider(
        fig,
        [step_label(p) for p in p_values],
        traces_per_step=4,
        prefix=labels.slider_prefix,
        active=p_values.index(active_p),
        step_layouts=[{"title.text": t} for t in titles],
    )


@dataclass(frozen=True)
class ConvergenceLabels:
    """Words of :func:`convergence_figure`, in the reader's language.

    Attributes:
        error: legend name of the measured line, with ``{p}``.
        guide: legend name of the σ/√n guide.
        hover: a point's hover, with ``{n}`` and ``{value}`` (Plotly's ``%{x}``, ``%{y:.4f}`` passed in).
        masks_axis, error_axis: the axis titles.
    """

    error: str
    guide: str
    hover: str
    masks_axis: str
    error_axis: str


def convergence_figure(expectation: Expectation, p: float, labels: ConvergenceLabels) -> go.Figure:
    """max |mean over n masks − weights| against n (log-log), with the σ/√n guide.

    Args:
        expectation: :func:`engine.sections.dropout.dropout_expectation`.
        p: the rate it was computed with (for the legend).
        labels: the figure's words.
    """
    table = expectation.table
    hover = labels.hover.format(n="%{x}", value="%{y:.4f}")
    fig = go.Figure()
    fig.add_scatter(
        x=table["masks"], y=table["max_abs_error"], mode="lines", name=labels.error.format(p=p),
        line=dict(color=PALETTE[0]), hovertemplate=hover + "<extra></extra>",
    )
    fig.add_scatter(
        x=table["masks"], y=table["sigma_over_sqrt_n"], mode="lines", name=labels.guide,
        line=dict(color=PALETTE[1], dash="dash"), hovertemplate=hover + "<extra>σ/√n</extra>",
    )
    # one label per decade, as powers of ten (Plotly's minor labels 2 and 5 crowded the axes)
    fig.update_xaxes(type="log", title_text=labels.masks_axis, gridcolor="#eee", dtick=1, exponentformat="power")
    fig.update_yaxes(type="log", title_text=labels.error_axis, gridcolor="#eee", dtick=1, exponentformat="power")
    fig.update_layout(legend=dict(orientation="h", y=-0.25))
    return base_layout(fig, None, 380)


@dataclass(frozen=True)
class TrainEvalLabels:
    """Words of :func:`train_eval_figure`, in the reader's language.

    Attributes:
        train_1, train_2, eval: the three panel titles.
        row: a row's label, with ``{token}`` and ``{sum}`` (the row sum).
    """

    train_1: str
    train_2: str
    eval: str
    row: str


def train_eval_figure(result: TrainVsEval, tokens: Sequence[str], labels: TrainEvalLabels) -> go.Figure:
    """Attention weights of two train() calls and one eval() call side by side, rows labelled with their sums.

    Args:
        result: :func:`engine.sections.dropout.train_vs_eval`.
        tokens: the T token labels.
        labels: the figure's words.
    """
    tokens = list(tokens)
    matrices = (result.train_1, result.train_2, result.eval_1)
    fig = make_subplots(rows=1, cols=3, subplot_titles=(labels.train_1, labels.train_2, labels.eval),
                        horizontal_spacing=0.12)
    zmax = float(torch.stack(matrices).max())
    for col, matrix in enumerate(matrices, start=1):
        sums = to_numpy(matrix.sum(dim=-1))  # (T, T) -> (T,)
        rows = [labels.row.format(token=t, sum=v) for t, v in zip(tokens, sums, strict=True)]
        fig.add_trace(heatmap_trace(matrix, rows, tokens, zmin=0.0, zmax=zmax, decimals=3, showscale=False),
                      row=1, col=col)
        matrix_axes(fig, rows, tokens, row=1, col=col)
    fig.update_xaxes(tickangle=-45, tickfont=dict(size=11))
    fig.update_yaxes(tickfont=dict(size=11))
    fig.update_annotations(yshift=55)
    base_layout(fig, None, 460, top=110)
    return fig
