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
    SEPARATORS,
    TITLE_WIDTH,
    WEIGHTS_SCALE,
    app_layout,
    base_layout,
    column_labels,
    format_number,
    heatmap_trace,
    matrix_axes,
    matrix_axes_layout,
    step_slider,
    to_numpy,
    wrap_text,
)
from engine.sections.dropout import DropoutPair, Expectation, TrainVsEval

_SUM_SCALE = "Greens"


@dataclass(frozen=True)
class SliderLabels:
    """Words of :func:`dropout_slider_figure`, in the reader's language.

    Attributes:
        ones_panel, weights_panel: the titles of the two matrices.
        sum_panel: what the narrow column beside each matrix holds (its row sums, headed "Σ").
        step: each step's title, with ``{p}``, ``{scale}``, ``{kept}`` and ``{total}``, each already written
            in the reader's number format.
        slider_prefix: text before the slider's current value.
        separators: Plotly's ``layout.separators`` of the reader's language.
        colon: what joins a hover's cell labels to the value, in the reader's typography (``"\u202f: "`` in French).
    """

    ones_panel: str
    weights_panel: str
    sum_panel: str
    step: str
    slider_prefix: str
    separators: str = SEPARATORS
    colon: str = ": "


def step_label(p: float, separators: str = SEPARATORS) -> str:
    """The slider label of rate ``p`` ("0.5", "0,5"), also how a page names the figure's active step."""
    return format_number(p, 1, separators)


#: Pixel sizes of :func:`dropout_slider_figure`: a matrix row, the title and column labels over each matrix.
SLIDER_ROW_PX, SLIDER_HEAD_PX = 34, 30


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
    sep = labels.separators
    angle, labels_px = column_labels(tokens, 11)
    panel_titles = [wrap_text(f"{title} · Σ = {labels.sum_panel}", TITLE_WIDTH)
                    for title in (labels.ones_panel, labels.weights_panel)]
    head_px = SLIDER_HEAD_PX * (1 + max(t.count("<br>") for t in panel_titles)) + labels_px
    matrix_px = SLIDER_ROW_PX * len(tokens)
    plot_px = 2 * matrix_px + head_px
    # the two matrices one above the other, each with its row sums in a narrow column at its right (side by
    # side, four panels overprinted their titles and cells on a phone): a 2 × 2 grid of axis domains, the
    # matrices' column 86 % of the width, the sums' 14 %, 3 % apart, the rows head_px apart; built in one
    # constructor call (make_subplots and forty add_trace calls cost most of this figure's build)
    gap_x, gap_y = 0.03, head_px / plot_px
    matrix_w = 0.86 * (1 - gap_x)
    row_h = (1 - gap_y) / 2
    x_domains = ([0.0, matrix_w], [matrix_w + gap_x, 1.0])
    y_domains = ([1 - row_h, 1.0], [0.0, row_h])
    panels = ((1, 1, tokens), (1, 2, ["Σ"]), (2, 1, tokens), (2, 2, ["Σ"]))  # row, col, column labels
    axes = {}
    for n, (row, col, cols) in enumerate(panels, start=1):
        suffix = "" if n == 1 else str(n)
        xaxis, yaxis = matrix_axes_layout(tokens, cols)
        axes[f"xaxis{suffix}"] = dict(xaxis, anchor=f"y{suffix}", domain=x_domains[col - 1], tickangle=angle,
                                      tickfont=dict(size=11))
        axes[f"yaxis{suffix}"] = dict(yaxis, anchor=f"x{suffix}", domain=y_domains[row - 1], tickfont=dict(size=11),
                                      **({"showticklabels": False} if col == 2 else {}))
    annotations = [dict(text=title, x=0, xanchor="left", align="left", xref="paper", y=y_domains[i][1],
                        yref="paper", yanchor="bottom", yshift=labels_px + 4, showarrow=False, font=dict(size=16))
                   for i, title in enumerate(panel_titles)]
    titles = [labels.step.format(p=step_label(p, sep), scale=format_number(result.scale, 3, sep), kept=result.kept,
                                 total=result.ones.numel()) for p, result in sweep.items()]
    active = p_values.index(active_p)
    shown, slider, step_layouts = step_slider([step_label(p, sep) for p in p_values], 4, labels.slider_prefix,
                                              active, step_layouts=[{"title.text": t} for t in titles])
    traces = []
    for result in sweep.values():
        top = max(result.scale, 1.0)
        for n, (matrix, cols, colorscale, decimals, (zmin, zmax)) in enumerate((
            (result.ones, tokens, WEIGHTS_SCALE, 2, (0.0, top)),
            (result.ones_row_sums.unsqueeze(-1), ["Σ"], _SUM_SCALE, 1, (0.0, None)),  # (T,) -> (T, 1)
            (result.weights, tokens, WEIGHTS_SCALE, 3, (0.0, top)),
            (result.weights_row_sums.unsqueeze(-1), ["Σ"], _SUM_SCALE, 2, (0.0, None)),  # (T,) -> (T, 1)
        ), start=1):
            suffix = "" if n == 1 else str(n)
            trace = heatmap_trace(matrix, tokens, cols, colorscale=colorscale, zmin=zmin, zmax=zmax,
                                  decimals=decimals, showscale=False, separators=sep, colon=labels.colon,
                                  visible=shown[len(traces)])
            trace.update(xaxis=f"x{suffix}", yaxis=f"y{suffix}")
            traces.append(trace)
    lines = max(wrap_text(t, TITLE_WIDTH).count("<br>") for t in titles)
    # the top margin holds the step's title and the first matrix's head (and room for the longest step title);
    # the bottom one the slider
    top = max(50 + 8 * lines + head_px, 50 + 18 * max(t["title.text"].count("<br>") for t in step_layouts))
    layout = app_layout(step_layouts[active]["title.text"], plot_px + 50 + 8 * lines + head_px + 18 * lines + 110,
                        top=top, separators=sep)
    layout["margin"] = dict(layout["margin"], b=110)
    return go.Figure(traces, layout=dict(layout, annotations=annotations, sliders=[slider], **axes))


@dataclass(frozen=True)
class ConvergenceLabels:
    """Words of :func:`convergence_figure`, in the reader's language.

    Attributes:
        error: legend name of the measured line, with ``{p}`` (written with ``separators``).
        guide: legend name of the σ/√n guide.
        hover: a point's hover, with ``{n}`` and ``{value}`` (Plotly's ``%{x}``, ``%{y:.4f}`` passed in).
        masks_axis, error_axis: the axis titles.
        separators: Plotly's ``layout.separators`` of the reader's language.
    """

    error: str
    guide: str
    hover: str
    masks_axis: str
    error_axis: str
    separators: str = SEPARATORS


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
        x=table["masks"], y=table["max_abs_error"], mode="lines",
        name=labels.error.format(p=step_label(p, labels.separators)),
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
    return base_layout(fig, None, 380, separators=labels.separators)


@dataclass(frozen=True)
class TrainEvalLabels:
    """Words of :func:`train_eval_figure`, in the reader's language.

    Attributes:
        train_1, train_2, eval: the three panel titles.
        row: a row's label, with ``{token}`` and ``{sum}`` (the row sum, written with ``separators``).
        separators: Plotly's ``layout.separators`` of the reader's language.
        colon: what joins a hover's cell labels to the value, in the reader's typography (``"\u202f: "`` in French).
    """

    train_1: str
    train_2: str
    eval: str
    row: str
    separators: str = SEPARATORS
    colon: str = ": "


#: Pixel sizes of :func:`train_eval_figure`: a matrix row, the title and column labels over each matrix.
MODES_ROW_PX, MODES_HEAD_PX = 30, 34


def train_eval_figure(result: TrainVsEval, tokens: Sequence[str], labels: TrainEvalLabels) -> go.Figure:
    """Attention weights of two train() calls and one eval() call one above the other, rows labelled with
    their sums (side by side, three panels overprinted each other's row labels on a phone).

    Args:
        result: :func:`engine.sections.dropout.train_vs_eval`.
        tokens: the T token labels.
        labels: the figure's words.
    """
    tokens = list(tokens)
    sep = labels.separators
    matrices = (result.train_1, result.train_2, result.eval_1)
    angle, labels_px = column_labels(tokens, 11)
    head_px = MODES_HEAD_PX + labels_px
    matrix_px = MODES_ROW_PX * len(tokens)
    plot_px = 3 * matrix_px + 2 * head_px
    fig = make_subplots(rows=3, cols=1, subplot_titles=(labels.train_1, labels.train_2, labels.eval),
                        vertical_spacing=head_px / plot_px)
    fig.update_annotations(x=0, xanchor="left", align="left", yshift=labels_px + 4)
    zmax = float(torch.stack(matrices).max())
    for row, matrix in enumerate(matrices, start=1):
        sums = to_numpy(matrix.sum(dim=-1))  # (T, T) -> (T,)
        rows = [labels.row.format(token=t, sum=format_number(v, 2, sep)) for t, v in zip(tokens, sums, strict=True)]
        fig.add_trace(heatmap_trace(matrix, rows, tokens, zmin=0.0, zmax=zmax, decimals=3, showscale=False,
                                    separators=sep, colon=labels.colon), row=row, col=1)
        matrix_axes(fig, rows, tokens, row=row, col=1)
    fig.update_xaxes(tickangle=angle, tickfont=dict(size=11))
    fig.update_yaxes(tickfont=dict(size=11))
    return fig.update_layout(app_layout(None, plot_px + head_px + 20, top=head_px, separators=sep))
