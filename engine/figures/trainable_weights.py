"""Figures of section 2 (trainable weights): the 1/sqrt(d_k) sweep and the two initialisations.

Built on :mod:`engine.figures.core`; no Streamlit.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from engine import palette
from engine.figures.core import (
    SEPARATORS,
    TITLE_WIDTH,
    WEIGHTS_SCALE,
    add_step_slider,
    app_layout,
    column_labels,
    format_number,
    format_value,
    heatmap_trace,
    matrix_axes_layout,
    to_numpy,
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
            ``var`` (var(q·k), 2 decimals), ``var_scaled`` (var(q·k/√d_k), 3 decimals) and ``n`` (samples),
            each already written in the reader's number format.
        slider_prefix: text before the slider's current value (e.g. "d_k = ").
        separators: Plotly's ``layout.separators`` of the reader's language.
        colon: what joins a hover's label to its value, in the reader's typography (``"\u202f: "`` in French).
    """

    spread_panel: str
    w_max_panel: str
    grad_panel: str
    without_scale: str
    with_scale: str
    score_axis: str
    step_title: str
    slider_prefix: str = "d_k = "
    separators: str = SEPARATORS
    colon: str = ": "


@dataclass(frozen=True)
class InitLabels:
    """The words of :func:`init_figure`, in the reader's language.

    Attributes:
        weights_panel, projection_panel: the two panel titles.
        measured, theory: legend names, templates with the named field ``init``.
        theory_hover: the hover tag of a theory line.
        separators: Plotly's ``layout.separators`` of the reader's language.
        colon: what joins a hover's label to its value, in the reader's typography (``"\u202f: "`` in French).
    """

    weights_panel: str
    projection_panel: str
    measured: str
    theory: str
    theory_hover: str
    separators: str = SEPARATORS
    colon: str = ": "


#: Pixel sizes of :func:`dk_sweep_figure`: the room above the titles, the box panel, a bar panel, the gap that
#: holds a panel's one-line title (and the axis above it), the slider under the panels.
DK_TOP_PX, DK_BOX_PX, DK_BAR_PX, DK_GAP_PX, DK_SLIDER_PX = 16, 190, 170, 104, 110
#: Longest line (characters) of a panel title: it starts right of the bars' labels, which take a third of a phone.
PANEL_TITLE_WIDTH = 28


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
    # three panels one above the other, each the figure's full width: side by side, their titles and the bars'
    # labels overprinted on a phone
    panel_titles = tuple(wrap_text(t, PANEL_TITLE_WIDTH)
                         for t in (labels.spread_panel, labels.w_max_panel, labels.grad_panel))
    # a gap holds a one-line title, and 20 px more for each further line of the lower panels' longest
    gap_px = DK_GAP_PX + 20 * max(t.count("<br>") for t in panel_titles[1:])
    plot_px = DK_BOX_PX + 2 * DK_BAR_PX + 2 * gap_px
    fig = make_subplots(
        rows=3,
        cols=1,
        row_heights=[DK_BOX_PX, DK_BAR_PX, DK_BAR_PX],
        vertical_spacing=gap_px / plot_px,
        subplot_titles=panel_titles,
    )
    # each panel's title from the left edge of its plot, where the bars start
    fig.update_annotations(x=0, xanchor="left", align="left")
    reach = max(max(abs(b.p1), abs(b.p99)) for b in sweep.unscaled.values())
    bar_labels = [labels.without_scale, labels.with_scale]
    titles = []
    for _, row in stats.iterrows():
        d_k = int(row["d_k"])
        # the rejected variant grey, the chapter's in its tensor's colour: scores vermillion, weights blue
        for name, b, color in ((_UNSCALED, sweep.unscaled[d_k], palette.ALTERNATIVE),
                               (_SCALED, sweep.scaled[d_k], palette.ATTN_SCORES)):
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
        for panel, unscaled_key, scaled_key in ((2, "w_max_unscaled", "w_max_scaled"),
                                                (3, "grad_unscaled", "grad_scaled")):
            values = [float(row[unscaled_key]), float(row[scaled_key])]
            fig.add_trace(
                go.Bar(
                    y=bar_labels,
                    x=values,
                    orientation="h",
                    text=[format_value(v, 3, labels.separators) for v in values],
                    textposition="outside",
                    textfont=dict(size=12),
                    constraintext="none",
                    cliponaxis=False,
                    marker_color=[palette.ALTERNATIVE, palette.ATTN_WEIGHTS],
                    showlegend=False,
                    hovertemplate="%{y}" + labels.colon + "%{x:.4f}<extra></extra>",
                ),
                row=panel,
                col=1,
            )
        title = labels.step_title.format(
            d_k=d_k, var=format_number(float(row["var_scores"]), 2, labels.separators),
            var_scaled=format_number(float(row["var_scaled"]), 3, labels.separators),
            n=format_number(sweep.n_samples, 0, labels.separators))
        titles.append(wrap_text(title, TITLE_WIDTH))
    fig.update_xaxes(type="linear", range=[-1.1 * reach, 1.1 * reach], title_text=labels.score_axis, zeroline=True,
                     zerolinecolor="#999", row=1, col=1)
    # room right of the longest bar for its value
    fig.update_xaxes(range=[0, 1.3], row=2, col=1)
    fig.update_xaxes(range=[0, 0.34], row=3, col=1)
    fig.update_xaxes(gridcolor="#eee")
    fig.update_yaxes(automargin=True)
    # the top margin holds the step's title (24 px a line) and the first panel's title (20 px a line)
    lines = 1 + max(t.count("<br>") for t in titles)
    top = DK_TOP_PX + 24 * lines + 20 * (1 + wrap_text(labels.spread_panel, PANEL_TITLE_WIDTH).count("<br>"))
    fig.update_layout(app_layout(titles[d_ks.index(active_d_k)], top + plot_px + DK_SLIDER_PX,
                                 separators=labels.separators))
    fig.update_layout(margin=dict(t=top, b=DK_SLIDER_PX))
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
    # the two panels one above the other, each the figure's width: side by side, the right one's title ran past
    # the figure's edge
    fig = make_subplots(rows=2, cols=1, vertical_spacing=0.2,
                        subplot_titles=(wrap_text(labels.weights_panel, TITLE_WIDTH),
                                        wrap_text(labels.projection_panel, TITLE_WIDTH)))
    fig.update_annotations(x=0, xanchor="left", align="left")
    for init, part in table.groupby("init", sort=False):
        color = palette.ALTERNATIVE if init == "torch.rand" else palette.INK  # W is a plain tensor, no role
        for row, measured, theory in ((1, "var_w", "var_w_theory"), (2, "var_xw", "var_xw_theory")):
            fig.add_scatter(
                x=part["d_in"], y=part[measured], mode="markers", marker=dict(size=10, color=color),
                name=labels.measured.format(init=init), legendgroup=init, showlegend=row == 1, row=row, col=1,
                hovertemplate="d_in %{x}" + labels.colon + "%{y:.4g}<extra>" + init + "</extra>",
            )
            fig.add_scatter(
                x=part["d_in"], y=part[theory], mode="lines", line=dict(dash="dash", color=color),
                name=labels.theory.format(init=init), legendgroup=init, showlegend=row == 1, row=row, col=1,
                hovertemplate="d_in %{x}" + labels.colon + "%{y:.4g}<extra>" + labels.theory_hover + "</extra>",
            )
    # one label per decade, as powers of ten: Plotly's own minor labels (2, 5) crowded at phone width
    fig.update_xaxes(type="log", title_text="d_in", gridcolor="#eee", dtick=1, exponentformat="power")
    fig.update_yaxes(type="log", gridcolor="#eee", dtick=1, exponentformat="power")
    layout = app_layout(None, 720, top=40, separators=labels.separators)
    return fig.update_layout(layout, legend=dict(orientation="h", x=0, y=-0.12, yanchor="top"),
                             margin=dict(layout["margin"], b=110))


#: Pixel sizes of :func:`matrices_stacked`: a matrix row, a title line, the column labels, the gap under a panel.
STACK_ROW_PX, STACK_TITLE_PX, STACK_LABELS_PX, STACK_GAP_PX = 34, 20, 36, 16


def matrices_stacked(
    matrices: dict[str, object],
    row_labels: list[str],
    col_labels: list[str],
    colorscale: str = WEIGHTS_SCALE,
    zmin: float | None = 0.0,
    row_title: str | None = None,
    separators: str = SEPARATORS,
    colon: str = ": ",
) -> go.Figure:
    """Small matrices of the same shape as heatmaps, one above the other, in one figure.

    One figure instead of one per matrix: a control that changes all of them (d_out, the seed) redraws one
    chart instead of three (each chart Streamlit replaces costs the browser a new Plotly plot). Panels are
    stacked, never side by side, so a phone-width figure keeps each matrix's full width. Each panel reads like
    the printed tensor: its title above, column labels on top (slanted from five columns on), row 0 at the top,
    values in the cells (4 decimals; 3 from five columns on, narrower on a phone). Sizes
    are fixed in pixels (:data:`STACK_ROW_PX` …) and so are the margins (the left one fits the longest row
    label and the row title): Plotly never grows them and draws the figure once.

    Args:
        matrices: panel title -> (rows, cols) tensor/array, the same shape for every panel.
        row_labels, col_labels: tick labels shared by every panel.
        colorscale, zmin: colour mapping (``zmin=None`` for signed values).
        row_title: title of the row axis (on every panel).
        separators: the reader's ``layout.separators`` (cells and hovers follow it).
        colon: what joins a hover's cell labels to the value, in the reader's typography (``"\u202f: "`` in French).

    Returns:
        A figure with one heatmap trace per matrix (panel i on axes ``x{i+1}``/``y{i+1}``), no colour bar.

    Raises:
        ValueError: if there is no matrix, or the shapes differ from each other or from the labels.
    """
    if not matrices:
        raise ValueError("matrices_stacked needs at least one matrix")
    shapes = {tuple(to_numpy(m).shape) for m in matrices.values()}
    if shapes != {(len(row_labels), len(col_labels))}:
        raise ValueError(f"every matrix must have shape ({len(row_labels)}, {len(col_labels)}), got {shapes}")
    titles = [wrap_text(title, TITLE_WIDTH) for title in matrices]
    # five columns and more: the column labels slant and take more height (their length decides), the cells
    # write 3 decimals; both stay legible in a phone-width or half-page figure
    many = len(col_labels) >= 5
    # the column labels' angle and height from their length and a phone's column width
    angle, labels_px = column_labels(col_labels)
    labels_px = max(STACK_LABELS_PX, round(labels_px) + 6)
    blocks = [STACK_TITLE_PX * (1 + t.count("<br>")) + labels_px + STACK_ROW_PX * len(row_labels)
              + STACK_GAP_PX for t in titles]
    plot_px = sum(blocks)
    data, layout, annotations = [], {}, []
    top = plot_px  # pixels from the plot area's bottom to the top of the current panel's block
    for i, ((_title, matrix), title, block) in enumerate(zip(matrices.items(), titles, blocks, strict=True)):
        suffix = "" if i == 0 else str(i + 1)
        cells_top = top - (block - STACK_ROW_PX * len(row_labels) - STACK_GAP_PX)
        cells_bottom = cells_top - STACK_ROW_PX * len(row_labels)
        trace = heatmap_trace(matrix, row_labels, col_labels, colorscale=colorscale, zmin=zmin, showscale=False,
                              decimals=3 if many else 4, separators=separators, colon=colon)
        trace.update(xaxis=f"x{suffix}", yaxis=f"y{suffix}")
        data.append(trace)
        xaxis, yaxis = matrix_axes_layout(row_labels, col_labels, row_title, None)
        layout[f"xaxis{suffix}"] = dict(xaxis, anchor=f"y{suffix}", automargin=False, tickangle=angle)
        layout[f"yaxis{suffix}"] = dict(yaxis, domain=[cells_bottom / plot_px, cells_top / plot_px],
                                        anchor=f"x{suffix}", automargin=False)
        annotations.append(dict(text=f"<b>{title}</b>", x=0, xref="paper", xanchor="left", y=top / plot_px,
                                yref="paper", yanchor="top", showarrow=False, align="left", font=dict(size=14)))
        top -= block
    common = app_layout(None, plot_px + 10, separators=separators)
    # the left margin holds the row labels (8 px a character) and the row title
    label_px = 8 * max(len(label) for label in row_labels) + (28 if row_title else 8)
    common["margin"] = dict(common["margin"], l=label_px, t=5, b=5, autoexpand=False)
    # axis domains in one constructor call instead of make_subplots and updates: cheaper on every rerun
    return go.Figure(data=data, layout=dict(common, annotations=annotations, **layout))
