"""Figures of section 2 (trainable weights): the 1/sqrt(d_k) sweep and the two initialisations.

Built on :mod:`engine.figures.core`; no Streamlit.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from engine.figures.core import (
    PALETTE,
    TITLE_WIDTH,
    WEIGHTS_SCALE,
    add_step_slider,
    app_layout,
    base_layout,
    heatmap_trace,
    matrix_axes_layout,
    wrap_text,
)
from engine.sections.trainable_weights import DkSweep

_UNSCALED = "q·k"
_SCALED = "q·k / √d_k"


@dataclass(frozen=True)
class DkSweepLabels:
    """The words of :func:`dk_sweep_figure`, in the reader's language.

    Attributes:
        spread_panel, w_max_panel, grad_panel: the three panel titles.
        without_scale, with_scale: bar labels of the two columns of the bar panels.
        score_axis: x-axis title of the box panel.
        step_title: one step's figure title, a template with the named fields ``d_k``,
            ``var`` (var(q·k)), ``var_scaled`` (var(q·k/√d_k)) and ``n`` (samples).
        slider_prefix: text before the slider's current value (e.g. "d_k = ").
    """

    spread_panel: str
    w_max_panel: str
    grad_panel: str
    without_scale: str
    with_scale: str
    score_axis: str
    step_title: str
    slider_prefix: str = "d_k = "


@dataclass(frozen=True)
class InitLabels:
    """The words of :func:`init_figure`, in the reader's language.

    Attributes:
        weights_panel, projection_panel: the two panel titles.
        measured, theory: legend names, templates with the named field ``init``.
        theory_hover: the hover tag of a theory line.
    """

    weights_panel: str
    projection_panel: str
    measured: str
    theory: str
    theory_hover: str


def dk_sweep_figure(sweep: DkSweep, labels: DkSweepLabels, active_d_k: int = 64) -> go.Figure:
    """One figure with a Plotly slider over d_k: score spread, largest softmax weight, w(1-w).

    Three panels per step: horizontal box plots of q·k and q·k/sqrt(d_k) (box =
    quartiles, whiskers = 1st and 99th percentiles, from precomputed statistics),
    the mean largest softmax weight of a row, and the mean gradient factor
    w_max(1 - w_max), each without and with the scale. The x range of the box
    panel is the same at every step, so the unscaled box visibly widens.

    Args:
        sweep: the result of :func:`engine.sections.trainable_weights.dk_sweep`.
        labels: titles and labels in the reader's language.
        active_d_k: the d_k shown first (must be one of the sweep's).

    Returns:
        A figure with 4 traces per d_k and ``layout.sliders[0]`` with one step per d_k.

    Raises:
        ValueError: if ``active_d_k`` is not in the sweep.
    """
    stats: pd.DataFrame = sweep.stats
    d_ks = [int(d) for d in stats["d_k"]]
    if active_d_k not in d_ks:
        raise ValueError(f"active_d_k={active_d_k} is not one of {d_ks}")
    fig = make_subplots(
        rows=1,
        cols=3,
        column_widths=[0.5, 0.25, 0.25],
        horizontal_spacing=0.08,
        # the narrow panels' titles on several lines: on one line the third ran past the figure's right edge
        subplot_titles=(wrap_text(labels.spread_panel, 40), wrap_text(labels.w_max_panel, 20),
                        wrap_text(labels.grad_panel, 20)),
    )
    reach = max(max(abs(b.p1), abs(b.p99)) for b in sweep.unscaled.values())
    bar_labels = [labels.without_scale, labels.with_scale]
    titles = []
    for _, row in stats.iterrows():
        d_k = int(row["d_k"])
        for name, b, color in ((_UNSCALED, sweep.unscaled[d_k], PALETTE[1]), (_SCALED, sweep.scaled[d_k], PALETTE[0])):
            fig.add_trace(
                go.Box(
                    y=[name],
                    q1=[b.q1],
                    median=[b.median],
                    q3=[b.q3],
                    lowerfence=[b.p1],
                    upperfence=[b.p99],
                    orientation="h",
                    name=name,
                    marker_color=color,
                    showlegend=False,
                    hoverinfo="x",
                ),
                row=1,
                col=1,
            )
        for col, unscaled_key, scaled_key in ((2, "w_max_unscaled", "w_max_scaled"),
                                              (3, "grad_unscaled", "grad_scaled")):
            values = [float(row[unscaled_key]), float(row[scaled_key])]
            fig.add_trace(
                go.Bar(
                    x=bar_labels,
                    y=values,
                    text=[f"{v:.3f}" for v in values],
                    textposition="outside",
                    marker_color=[PALETTE[1], PALETTE[0]],
                    showlegend=False,
                    hovertemplate="%{x}: %{y:.4f}<extra></extra>",
                ),
                row=1,
                col=col,
            )
        titles.append(wrap_text(labels.step_title.format(d_k=d_k, var=float(row["var_scores"]),
                                               var_scaled=float(row["var_scaled"]), n=sweep.n_samples),
                                TITLE_WIDTH))
    fig.update_xaxes(type="linear", range=[-1.1 * reach, 1.1 * reach], title_text=labels.score_axis, zeroline=True,
                     zerolinecolor="#999", row=1, col=1)
    fig.update_yaxes(range=[0, 1.15], row=1, col=2)
    fig.update_yaxes(range=[0, 0.3], row=1, col=3)
    fig.update_yaxes(gridcolor="#eee")
    base_layout(fig, titles[d_ks.index(active_d_k)], 460)
    fig.update_layout(margin=dict(t=130))
    return add_step_slider(
        fig,
        [str(d) for d in d_ks],
        traces_per_step=4,
        prefix=labels.slider_prefix,
        active=d_ks.index(active_d_k),
        step_layouts=[{"title.text": t} for t in titles],
    )


def init_figure(table: pd.DataFrame, labels: InitLabels) -> go.Figure:
    """Measured vs theoretical variance of the weights and of x·W against d_in, both inits (log-log).

    Args:
        table: the DataFrame of :func:`engine.sections.trainable_weights.init_comparison`.
        labels: titles and legend names in the reader's language.

    Returns:
        Two panels: var(W) and var(x·W); markers are measured, dashed lines the theory.
    """
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.1,
                        # wrapped: on one line the right panel's title ran under the toolbar on a phone
                        subplot_titles=(wrap_text(labels.weights_panel, 20), wrap_text(labels.projection_panel, 20)))
    for k, (init, part) in enumerate(table.groupby("init", sort=False)):
        color = PALETTE[k + 1] if init == "torch.rand" else PALETTE[0]
        for col, measured, theory in ((1, "var_w", "var_w_theory"), (2, "var_xw", "var_xw_theory")):
            fig.add_scatter(
                x=part["d_in"], y=part[measured], mode="markers", marker=dict(size=10, color=color),
                name=labels.measured.format(init=init), legendgroup=init, showlegend=col == 1, row=1, col=col,
                hovertemplate="d_in %{x}: %{y:.4g}<extra>" + init + "</extra>",
            )
            fig.add_scatter(
                x=part["d_in"], y=part[theory], mode="lines", line=dict(dash="dash", color=color),
                name=labels.theory.format(init=init), legendgroup=init, showlegend=col == 1, row=1, col=col,
                hovertemplate="d_in %{x}: %{y:.4g}<extra>" + labels.theory_hover + "</extra>",
            )
    # one label per decade, as powers of ten: Plotly's own minor labels (2, 5) crowded at phone width
    fig.update_xaxes(type="log", title_text="d_in", gridcolor="#eee", dtick=1, exponentformat="power")
    fig.update_yaxes(type="log", gridcolor="#eee", dtick=1, exponentformat="power")
    fig.update_layout(legend=dict(orientation="h", y=-0.25))
    return base_layout(fig, None, 400)


def matrices_side_by_side(
    matrices: dict[str, object],
    row_labels: list[str],
    col_labels: list[str],
    colorscale: str = WEIGHTS_SCALE,
    zmin: float | None = 0.0,
    row_title: str | None = None,
    col_title: str | None = None,
    height: int = 300,
) -> go.Figure:
    """Several small matrices of the same shape as heatmaps in one row (one figure, one panel each).

    Args:
        matrices: panel title -> (rows, cols) tensor/array.
        row_labels, col_labels: tick labels shared by every panel.
        colorscale, zmin: colour mapping (``zmin=None`` for signed values).
        row_title, col_title: axis titles of the first panel.

    Returns:
        A figure with one heatmap trace per matrix, row 0 on top in every panel.
    """
    n = len(matrices)
    spacing = 0.25 / max(n, 1)
    width = (1 - spacing * (n - 1)) / n
    data, layout, annotations = [], app_layout(None, height), []
    layout["margin"] = dict(layout["margin"], t=80)
    for c, (title, matrix) in enumerate(matrices.items()):
        suffix = "" if c == 0 else str(c + 1)
        left = c * (width + spacing)
        trace = heatmap_trace(matrix, row_labels, col_labels, colorscale=colorscale, zmin=zmin, showscale=False)
        trace.update(xaxis=f"x{suffix}", yaxis=f"y{suffix}")
        data.append(trace)
        xaxis, yaxis = matrix_axes_layout(row_labels, col_labels, row_title if c == 0 else None, col_title)
        layout[f"xaxis{suffix}"] = dict(xaxis, domain=[left, left + width], anchor=f"y{suffix}")
        layout[f"yaxis{suffix}"] = dict(yaxis, domain=[0, 1], anchor=f"x{suffix}")
        # the panel's title above its column labels, as make_subplots would place it, 30 px higher
        annotations.append(dict(text=title, x=left + width / 2, xref="paper", xanchor="center", y=1.0, yref="paper",
                                yanchor="bottom", yshift=30, showarrow=False, font=dict(size=16)))
    # axis domains in one constructor call instead of make_subplots and updates: cheaper on every rerun
    return go.Figure(data=data, layout=dict(layout, annotations=annotations))
