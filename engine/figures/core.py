"""Plotly builders shared by every page: matrices, bar rows, 3-d vectors, in-figure sliders.

No Streamlit here: each function returns a ``plotly.graph_objects.Figure`` that a
page hands to ``st.plotly_chart``. Matrices read like a printed tensor: row 0 at
the top, column 0 on the left, values written in the cells.
"""

from __future__ import annotations

import math
import unicodedata
from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go
import torch

from engine import palette

#: Sequential colour scale for weights in [0, 1]: white to the attention-weights colour of every diagram.
WEIGHTS_SCALE = palette.WEIGHTS_SCALE
#: Diverging colour scale for signed values (scores, differences, embeddings), centred on white at 0.
SIGNED_SCALE = palette.SIGNED_SCALE
#: One colour per series / head (Okabe–Ito, readable by colour-blind readers).
PALETTE = palette.SERIES

_FONT = dict(family="Inter, Helvetica, Arial, sans-serif", size=13)


def to_numpy(values) -> np.ndarray:
    """Detach a tensor (any device/dtype) or sequence into a float64 numpy array."""
    if isinstance(values, torch.Tensor):
        return values.detach().to("cpu", torch.float64).numpy()
    return np.asarray(values, dtype=np.float64)


#: Plotly's ``layout.separators`` of English (decimal point, comma between groups): the default of every builder.
SEPARATORS = ".,"


def format_value(v: float, decimals: int = 4, separators: str = SEPARATORS) -> str:
    """Format one number for a cell: fixed decimals, or ``nan``/``inf``/``-inf`` as PyTorch prints them.

    Args:
        separators: Plotly's ``layout.separators`` of the reader's language (``ui.numbers.plotly_separators``):
            its first character is the decimal sign, so a cell reads as the figure's ticks and hovers do.
    """
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return format_number(v, decimals, separators, group=False)


def format_number(v: float, decimals: int = 0, separators: str = SEPARATORS, group: bool = True) -> str:
    """``v`` with ``decimals`` digits, written with Plotly's ``separators`` (decimal sign, then the group
    separator): what ``layout.separators`` makes of a d3 format, for the texts a figure builds itself
    (titles, cell and bar texts). A negative number takes the minus sign U+2212, as Plotly writes its ticks and
    ``ui.numbers`` its numbers (``−0.0330``)."""
    text = f"{v:,.{decimals}f}" if group else f"{v:.{decimals}f}"
    point, comma = (separators + ".,")[:2] if len(separators) < 2 else separators[:2]
    return text.translate({ord("."): point, ord(","): comma, ord("-"): "\u2212"})


def label_px(text: str, size: float = 13) -> float:
    """About how wide ``text`` is drawn at ``size`` px (0.6 em a character, 1 em a wide East Asian one): enough
    to choose a label's angle and the margin that holds it without measuring in a browser."""
    return sum(size if unicodedata.east_asian_width(c) in "WF" else 0.6 * size for c in text)


#: Right margin (px) that holds Plotly's vertical toolbar.
MODEBAR_MARGIN = 40
#: Longest title line (characters) that clears Plotly's vertical toolbar on a 390-px phone at the app's font.
TITLE_WIDTH = 38


def wrap_text(text: str, width: int) -> str:
    """``text`` with ``<br>`` between words so that no line is longer than ``width`` characters (a longer word
    keeps its own line; a wide East Asian character counts as two): titles of narrow panels that Plotly would
    otherwise clip at the figure's edge."""

    def size(s: str) -> int:
        return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in s)

    lines: list[str] = []
    for part in text.split("<br>"):
        lines.append("")
        for word in part.split(" "):
            if not lines[-1]:
                lines[-1] = word
            elif size(lines[-1]) + 1 + size(word) <= width:
                lines[-1] += " " + word
            else:
                lines.append(word)
    return "<br>".join(lines)


def app_layout(title: str | None = None, height: int | None = None, top: int | None = None,
               separators: str = SEPARATORS) -> dict:
    """The app's common layout (font, margins, white background, title) as a dict, to give ``go.Figure``.

    The title is wrapped at :data:`TITLE_WIDTH` characters, so that on a phone it stays clear of Plotly's
    toolbar at the right edge; each extra line adds 18 px to the top margin.

    Args:
        top: top margin in px; defaults to room for the title. Matrices, whose
            column labels sit on top, pass more.
        separators: Plotly's ``layout.separators`` (decimal sign, group separator) of the reader's language.
    """
    breaks = 0
    if title:
        title = wrap_text(title, TITLE_WIDTH)
        breaks = title.count("<br>")
    layout = dict(
        # Plotly anchors a title of several lines too high at the top edge and cuts its first line: each extra
        # line moves it down 12 px at the app's title font
        title=dict(text=title, x=0, xanchor="left", y=1, yanchor="top", pad=dict(t=8 + 12 * breaks)) if title
        else None,
        font=_FONT,
        # the right margin holds Plotly's vertical toolbar, clear of the plot and of the panel titles
        margin=dict(l=10, r=MODEBAR_MARGIN, t=(top if top is not None else (50 if title else 20)) + 18 * breaks,
                    b=10),
        plot_bgcolor="white",
        paper_bgcolor="white",
        separators=separators,
        # Plotly's toolbar runs down the right edge instead of across the top, where it covered the titles
        # of narrow (phone-width) charts.
        modebar=dict(orientation="v"),
    )
    if height is not None:
        layout["height"] = height
    return layout


def base_layout(
    fig: go.Figure, title: str | None = None, height: int | None = None, top: int | None = None,
    separators: str = SEPARATORS,
) -> go.Figure:
    """Apply :func:`app_layout` to a built figure (one ``update_layout`` call). A figure built in one
    ``go.Figure(data=..., layout=...)`` call with the layout merged in is cheaper still: an update of a
    figure that has traces costs Plotly's bookkeeping on every rerun (docs/architecture.md)."""
    fig.update_layout(app_layout(title, height, top, separators))
    return fig


def heatmap_trace(
    matrix,
    row_labels: Sequence[str] | None = None,
    col_labels: Sequence[str] | None = None,
    colorscale: str = WEIGHTS_SCALE,
    zmin: float | None = None,
    zmax: float | None = None,
    decimals: int = 4,
    show_values: bool = True,
    name: str | None = None,
    visible: bool = True,
    showscale: bool = True,
    separators: str = SEPARATORS,
    colon: str = ": ",
) -> go.Heatmap:
    """One heatmap trace for a (rows, cols) matrix, non-finite cells left blank but labelled.

    Rows and columns sit at integer positions so repeated tokens stay separate;
    the axes' tick labels carry the tokens (see :func:`matrix_axes`).

    Args:
        matrix: (rows, cols) tensor or array, any float dtype.
        row_labels, col_labels: tick text; defaults to indices.
        colorscale, zmin, zmax: colour mapping.
        decimals: digits written in each cell.
        show_values: write values in the cells.
        separators: the reader's ``layout.separators``; the cells' decimal sign follows it.
        colon: what joins the hover's cell labels to the value, in the reader's typography (``"\u202f: "`` in French).

    Raises:
        ValueError: if ``matrix`` is not 2-d.
    """
    z = to_numpy(matrix)
    if z.ndim != 2:
        raise ValueError(f"a heatmap needs a 2-d matrix, got shape {z.shape}")
    rows, cols = z.shape
    finite = np.isfinite(z)
    text = [[format_value(z[i, j], decimals, separators) for j in range(cols)] for i in range(rows)]
    # non-finite cells become gaps, their text stays; 4 decimals are what the cells and the hover show, and they
    # keep the JSON sent on every rerun short
    z_drawn = np.round(np.where(finite, z, np.nan), 4)
    row_labels = list(row_labels) if row_labels is not None else [str(i) for i in range(rows)]
    col_labels = list(col_labels) if col_labels is not None else [str(j) for j in range(cols)]
    customdata = np.array([[[row_labels[i], col_labels[j]] for j in range(cols)] for i in range(rows)], dtype=object)
    return go.Heatmap(
        z=z_drawn.tolist(),
        x=list(range(cols)),
        y=list(range(rows)),
        text=text,
        texttemplate="%{text}" if show_values and rows * cols <= 400 else None,
        # a fixed size that stays legible on a phone where the cells are wide enough for it (10 px from six columns
        # on, 9 px there when a cell's text has six characters or more, such as −0.033: at 10 px two of them touched
        # in a 390 px frame); wider matrices keep Plotly's automatic size
        textfont=dict(size=_cell_font_px(cols, max((len(t) for row in text for t in row), default=0)))
        if cols <= 8 else None,
        customdata=customdata,
        # [row, col] as a tensor is indexed, then the two labels: no words, so no translation needed.
        hovertemplate="[%{y}, %{x}] %{customdata[0]} · %{customdata[1]}" + colon + "%{text}<extra></extra>",
        colorscale=colorscale,
        zmin=zmin,
        zmax=zmax,
        zmid=0 if colorscale == SIGNED_SCALE and zmin is None else None,
        xgap=1,
        ygap=1,
        name=name,
        visible=visible,
        showscale=showscale,
        # a thin colour bar leaves the cells more of a phone's width
        colorbar=dict(thickness=12),
    )


def _cell_font_px(cols: int, longest: int) -> int:
    """The cells' font size (px) of a heatmap of ``cols`` columns whose longest cell text has ``longest`` characters."""
    if cols < 6:
        return 11
    return 10 if longest < 6 else 9


def matrix_axes_layout(
    row_labels: Sequence[str],
    col_labels: Sequence[str],
    row_title: str | None = None,
    col_title: str | None = None,
) -> tuple[dict, dict]:
    """``(xaxis, yaxis)`` layout dicts of a heatmap: tokens as tick labels, column labels on top, y reversed so
    that row 0 is at the top."""
    yaxis = dict(tickmode="array", tickvals=list(range(len(row_labels))), ticktext=list(row_labels),
                 autorange="reversed", title=dict(text=row_title), showgrid=False)
    xaxis = dict(tickmode="array", tickvals=list(range(len(col_labels))), ticktext=list(col_labels), side="top",
                 title=dict(text=col_title), showgrid=False)
    return xaxis, yaxis


def matrix_axes(
    fig: go.Figure,
    row_labels: Sequence[str],
    col_labels: Sequence[str],
    row_title: str | None = None,
    col_title: str | None = None,
    row: int | None = None,
    col: int | None = None,
) -> go.Figure:
    """Label a heatmap's axes with tokens and reverse y so row 0 is at the top (of subplot ``row``, ``col``
    of a ``make_subplots`` figure when given), in one layout update."""
    xaxis, yaxis = matrix_axes_layout(row_labels, col_labels, row_title, col_title)
    if row is not None:
        subplot = fig.get_subplot(row, col)
        names = subplot.xaxis.plotly_name, subplot.yaxis.plotly_name
    else:
        names = "xaxis", "yaxis"
    fig.update_layout({names[0]: xaxis, names[1]: yaxis})
    return fig


def attention_heatmap(
    weights,
    row_tokens: Sequence[str] | None = None,
    col_tokens: Sequence[str] | None = None,
    title: str | None = None,
    colorscale: str = WEIGHTS_SCALE,
    zmin: float | None = 0.0,
    zmax: float | None = None,
    decimals: int = 4,
    row_title: str | None = None,
    col_title: str | None = None,
    height: int | None = None,
    separators: str = SEPARATORS,
    colon: str = ": ",
) -> go.Figure:
    """Attention matrix as a heatmap that reads like the printed tensor.

    Args:
        weights: (T_q, T_k) tensor/array (weights, scores, masks, differences).
        row_tokens: labels of the rows (queries); ``col_tokens`` defaults to them.
        colorscale: :data:`WEIGHTS_SCALE` for weights, :data:`SIGNED_SCALE` for signed values.
        zmin, zmax: colour range; ``zmax`` defaults to the largest finite value.
        decimals: digits written in each cell.
        row_title, col_title: axis titles in the reader's language (e.g. "query", "key").
        separators: the reader's ``layout.separators`` (cells, ticks and hovers follow it).
        colon: what joins the hover's cell labels to the value, in the reader's typography (:func:`heatmap_trace`).

    Returns:
        A figure with row 0 at the top, tokens on both axes and values in the cells; the column labels
        slant when they would not fit a phone's columns level (:func:`column_labels`), and the top margin
        holds the title, the column axis title and the labels at their angle.
    """
    z = to_numpy(weights)
    if z.ndim != 2:
        raise ValueError(f"attention_heatmap needs a 2-d matrix, got shape {z.shape}")
    rows, cols = z.shape
    row_tokens = list(row_tokens) if row_tokens is not None else [str(i) for i in range(rows)]
    if col_tokens is not None:
        col_tokens = list(col_tokens)
    else:
        col_tokens = row_tokens if cols == rows else [str(j) for j in range(cols)]
    if colorscale == SIGNED_SCALE and zmin == 0.0:
        zmin = None
    xaxis, yaxis = matrix_axes_layout(row_tokens, col_tokens, row_title, col_title)
    angle, labels_px = column_labels(col_tokens)
    xaxis["tickangle"] = angle
    top = round((34 if title else 8) + (28 if col_title else 0) + labels_px)
    layout = app_layout(title, height or round(max(260, 48 * rows + 100 + labels_px)), top=top,
                        separators=separators)
    # one constructor call: a later update of the figure costs Plotly's bookkeeping on every rerun
    return go.Figure(
        data=[heatmap_trace(z, row_tokens, col_tokens, colorscale=colorscale, zmin=zmin, zmax=zmax,
                            decimals=decimals, separators=separators, colon=colon)],
        layout=dict(layout, xaxis=xaxis, yaxis=yaxis),
    )


#: Width (px) of a matrix's plot area on a 390-px phone, beside its row labels and colour bar: the narrowest its
#: columns get, from which :func:`column_labels` chooses the labels' angle.
PHONE_PLOT_PX = 210


def column_labels(labels: Sequence[str], size: float = 13) -> tuple[int, float]:
    """``(tickangle, height_px)`` of a matrix's column labels: level when the longest fits a phone's column,
    else slanted at -45° (neighbours stay apart while a column is wider than 1.6 lines), else upright; the
    height is what the labels take at that angle."""
    if not labels:
        return 0, 0.0
    column = PHONE_PLOT_PX / len(labels)
    longest = max(label_px(str(label), size) for label in labels)
    if longest + 6 <= column:
        return 0, size * 1.6
    if column * math.sin(math.pi / 4) > 1.6 * size:
        return -45, (longest + size) * math.sin(math.pi / 4) + 6
    return -90, longest + 8


#: Pixel sizes of :func:`step_bars`: a panel's bars, its title line, its token labels, one legend line.
STEP_PANEL_PX, STEP_TITLE_PX, STEP_TICKS_PX, STEP_LEGEND_PX = 170, 20, 34, 22


def step_bars(
    panels: Sequence[tuple[str, dict[str, object]]],
    labels: Sequence[str],
    colors: dict[str, str] | None = None,
    decimals: int = 4,
    separators: str = SEPARATORS,
) -> go.Figure:
    """Bar panels over the same tokens, one above the other (e.g. a query's scores, then its weights).

    One figure instead of one per step: a token's score and its weight sit in the same column, and a control
    that changes both redraws one chart instead of two (each chart Streamlit replaces costs the browser a new
    Plotly plot). Each panel has its title above it and the token names under it; panels of several series
    group their bars, write the values upright (a phone's bars are too narrow for them level) and name the
    series in a legend at the bottom, one line each. Sizes are fixed in pixels
    (:data:`STEP_PANEL_PX` …), and the left margin holds the y tick labels (up to 5 characters, "−0.25"), so
    Plotly never has to grow the margins and draw the figure a second time.

    Args:
        panels: ``(title, {series name: (T,) values})`` per panel, top to bottom.
        labels: the T token names, kept in order even when repeated.
        colors: series name -> ``#RRGGBB``; a series without one takes :data:`PALETTE` in turn.
        decimals: digits written on the bars.
        separators: the reader's ``layout.separators`` (bar texts, ticks and hovers follow it).

    Returns:
        A figure with one bar trace per series: the first panel on axes ``x``/``y``, the next on ``x2``/``y2``, …

    Raises:
        ValueError: if there is no panel, or a series does not have one value per token.
    """
    if not panels:
        raise ValueError("step_bars needs at least one panel")
    colors = colors or {}
    x = list(range(len(labels)))
    titles = [wrap_text(title, TITLE_WIDTH) for title, _series in panels]
    blocks = [STEP_TITLE_PX * (1 + t.count("<br>")) + STEP_PANEL_PX + STEP_TICKS_PX for t in titles]
    # one legend line per series of a grouped panel: on a phone two names do not fit on one line
    entries = sum(len(series) for _title, series in panels if len(series) > 1)
    legend = entries > 0
    plot_px = sum(blocks) + STEP_LEGEND_PX * entries
    data, layout, annotations, k = [], {}, [], 0
    top = plot_px  # pixels from the plot area's bottom to the top of the current panel's block
    for i, ((_title, series), title, block) in enumerate(zip(panels, titles, blocks, strict=True)):
        suffix = "" if i == 0 else str(i + 1)
        bar_top = top - (block - STEP_PANEL_PX - STEP_TICKS_PX)
        bar_bottom = bar_top - STEP_PANEL_PX
        values, grouped = [], len(series) > 1
        for name, raw in series.items():
            v = to_numpy(raw).astype(np.float64)
            if v.shape != (len(labels),):
                raise ValueError(f"series {name!r} needs {len(labels)} values, got shape {v.shape}")
            values.append(v[np.isfinite(v)])
            data.append(dict(
                type="bar", x=x, y=np.where(np.isfinite(v), v, np.nan).tolist(), name=name,
                xaxis=f"x{suffix}", yaxis=f"y{suffix}", showlegend=grouped,
                text=[format_value(a, decimals, separators) for a in v], textposition="outside", cliponaxis=False,
                textangle=-90 if grouped else 0, textfont=dict(size=11), constraintext="none",
                marker=dict(color=colors.get(name, PALETTE[k % len(PALETTE)])),
                hovertemplate="%{text}<extra>" + name + "</extra>",
            ))
            k += 1
        finite = np.concatenate(values) if values else np.zeros(1)
        high = max(float(finite.max(initial=0.0)), 0.0)
        low = min(float(finite.min(initial=0.0)), 0.0)
        span = (high - low) or 1.0
        room = 0.4 if grouped else 0.2  # an upright value needs more room than a level one
        layout[f"xaxis{suffix}"] = dict(tickmode="array", tickvals=x, ticktext=list(labels), anchor=f"y{suffix}",
                                        automargin=False)
        # room above (and below, for negative bars) for the values written outside the bars
        layout[f"yaxis{suffix}"] = dict(domain=[bar_bottom / plot_px, bar_top / plot_px], anchor=f"x{suffix}",
                                        range=[low - (room * span if low < 0 else 0), high + room * span],
                                        gridcolor="#eee", zerolinecolor="#999", automargin=False)
        annotations.append(dict(text=f"<b>{title}</b>", x=0, xref="paper", xanchor="left", y=top / plot_px,
                                yref="paper", yanchor="top", showarrow=False, align="left", font=dict(size=14)))
        top -= block
    common = app_layout(None, plot_px + 20, separators=separators)
    # fixed margins (the left one holds the y tick labels): Plotly never grows them, so it draws once
    common["margin"] = dict(common["margin"], l=52, t=10, b=10, autoexpand=False)
    return go.Figure(data=data, layout=dict(
        common, annotations=annotations, barmode="group",
        legend=dict(orientation="v", x=0, xanchor="left", y=0, yanchor="bottom", yref="paper") if legend else None,
        showlegend=legend, **layout))


def weighted_sum_bars(
    inputs,
    attn_weights,
    labels: Sequence[str],
    dim_labels: Sequence[str],
    title: str | None = None,
    total_name: str = "z",
    height: int = 330,
    separators: str = SEPARATORS,
    colon: str = ": ",
) -> go.Figure:
    """The context vector as the weighted sum it is: per dimension, one stacked bar segment per token.

    Segment (token i, dimension d) has height ``attn_weights[i] * inputs[i, d]``; the segments of a dimension
    add up to ``context_vec[d]`` (positive and negative parts stack on either side of 0, Plotly's "relative"
    bar mode), which a marker shows (chapter 3.3.1, step 3: z = Σ_i w_i x^(i)).

    Args:
        inputs: (T, d_in) tensor/array, the token vectors.
        attn_weights: (T,) weights of one query.
        labels: the T token names (one trace each, in order).
        dim_labels: the d_in dimension names (x axis).
        total_name: the marker's name in the legend (the context vector).
        separators: the reader's ``layout.separators`` (values, ticks and hovers follow it).
        colon: what joins a hover's name to its value, in the reader's typography (``"\u202f: "`` in French).

    Raises:
        ValueError: if the shapes do not agree.
    """
    x = to_numpy(inputs)
    w = to_numpy(attn_weights)
    if x.ndim != 2 or w.shape != (x.shape[0],) or len(labels) != x.shape[0] or len(dim_labels) != x.shape[1]:
        raise ValueError(f"weighted_sum_bars needs inputs (T, d_in), weights (T,) and T labels, d_in dimension "
                         f"names; got {x.shape}, {w.shape}, {len(labels)}, {len(dim_labels)}")
    parts = w[:, None] * x  # (T, 1) * (T, d_in) -> (T, d_in): token i's share of each dimension
    dims = list(range(x.shape[1]))
    data = [dict(type="bar", x=dims, y=np.round(parts[i], 6).tolist(), name=name,
                 marker=dict(color=PALETTE[i % len(PALETTE)]),
                 customdata=[[format_value(w[i], 4, separators), format_value(x[i, d], 4, separators)]
                             for d in dims],
                 hovertemplate=name + colon + "%{customdata[0]} × %{customdata[1]} = %{y:.4f}<extra></extra>")
            for i, name in enumerate(labels)]
    total = parts.sum(axis=0)  # (T, d_in) -> (d_in,): the context vector
    data.append(dict(type="scatter", x=dims, y=np.round(total, 6).tolist(), mode="markers+text", name=total_name,
                     text=[format_value(v, 4, separators) for v in total], textposition="top center",
                     cliponaxis=False,
                     marker=dict(symbol="diamond", size=12, color="#222", line=dict(color="white", width=1)),
                     hovertemplate=total_name + colon + "%{text}<extra></extra>"))
    # room above the stacks (and below, for negative parts) for the marker's value
    top = max(float(np.clip(parts, 0, None).sum(axis=0).max()), float(total.max()), 0.0)
    bottom = min(float(np.clip(parts, None, 0).sum(axis=0).min()), float(total.min()), 0.0)
    span = (top - bottom) or 1.0
    layout = dict(app_layout(title, height, separators=separators), barmode="relative",
                  # under the dimension labels, clear of them when the legend wraps on a phone
                  legend=dict(orientation="h", x=0, y=-0.2, yanchor="top"),
                  xaxis=dict(tickmode="array", tickvals=dims, ticktext=list(dim_labels)),
                  yaxis=dict(gridcolor="#eee", zerolinecolor="#999",
                             range=[bottom - (0.15 * span if bottom < 0 else 0), top + 0.25 * span]))
    return go.Figure(data=data, layout=layout)


def _coordinates(vector, decimals: int, separators: str, between: str | None = None) -> str:
    """A point's coordinates for a hover: ``0.43, 0.15, 0.89``, or ``0,43 ; 0,15 ; 0,89`` where the decimal sign
    is a comma (a comma between them would read as a decimal sign); ``between``, when given, is the reader's
    list separator (``ui.numbers.list_separator``: ``"; "`` in German)."""
    if between is None:
        between = " ; " if separators[:1] == "," else ", "
    return between.join(format_value(float(c), decimals, separators) for c in vector)


def vectors_3d(
    vectors,
    labels: Sequence[str],
    highlight: int | None = None,
    extra: dict[str, object] | None = None,
    title: str | None = None,
    height: int = 460,
    axis_titles: Sequence[str] = ("x₀", "x₁", "x₂"),
    extra_text: bool = True,
    separators: str = SEPARATORS,
    between: str | None = None,
) -> go.Figure:
    """3-d arrows from the origin to each vector (the running example's embeddings), named in a legend.

    Each vector has its own colour and legend entry (an extra vector shares its colour with the vector of the
    same rank): names written at the tips overlapped where two tips nearly meet (journey, starts), and a
    WebGL scene's texts cannot be measured in the page. The legend, in SVG, sits under the scene.

    Args:
        vectors: (N, 3) tensor/array.
        labels: N names.
        highlight: index drawn thicker (e.g. the query token).
        extra: name -> (3,) vectors drawn dashed (e.g. a context vector).
        extra_text: list each extra vector in the legend (False: in its hover only, for many vectors).
        separators: the reader's ``layout.separators`` (ticks and hovers follow it).
        between: what separates a hover's coordinates, the reader's list separator (default: from ``separators``).

    Raises:
        ValueError: if vectors are not (N, 3).
    """
    v = to_numpy(vectors)
    if v.ndim != 2 or v.shape[1] != 3:
        raise ValueError(f"vectors_3d needs shape (N, 3), got {v.shape}")
    data = []
    for i, (vec, name) in enumerate(zip(v, labels, strict=True)):
        color = PALETTE[i % len(PALETTE)]
        data.append(dict(
            type="scatter3d", x=[0, vec[0]], y=[0, vec[1]], z=[0, vec[2]], mode="lines+markers",
            line=dict(width=9 if i == highlight else 5, color=color), marker=dict(size=[0, 5], color=color),
            name=name, legendgroup=str(i),
            hovertemplate=f"{name} = (" + _coordinates(vec, 2, separators, between) + ")<extra></extra>",
        ))
    for i, (name, vec) in enumerate((extra or {}).items()):
        e = to_numpy(vec)
        color = PALETTE[i % len(PALETTE)]
        data.append(dict(
            type="scatter3d", x=[0, e[0]], y=[0, e[1]], z=[0, e[2]], mode="lines+markers",
            line=dict(width=5, color=color, dash="dash"), marker=dict(size=[0, 4], color=color, symbol="diamond"),
            name=name, legendgroup=str(i), showlegend=extra_text,
            hovertemplate=f"{name} = (" + _coordinates(e, 4, separators, between) + ")<extra></extra>",
        ))
    layout = dict(
        app_layout(title, height, separators=separators),
        scene=dict(
            xaxis=dict(title=dict(text=axis_titles[0]), range=[0, 1]),
            yaxis=dict(title=dict(text=axis_titles[1]), range=[0, 1]),
            zaxis=dict(title=dict(text=axis_titles[2]), range=[0, 1]),
            aspectmode="cube",
            # far enough that the tick labels stay inside a phone-width figure
            camera=dict(eye=dict(x=1.6, y=1.45, z=0.95)),
        ),
        showlegend=True,
        legend=dict(orientation="h", x=0, xanchor="left", y=0, yanchor="top"),
    )
    return go.Figure(data=data, layout=layout)


def step_slider(
    step_labels: Sequence[str],
    traces_per_step: int,
    prefix: str,
    active: int = 0,
    always_visible: int = 0,
    step_layouts: Sequence[dict] | None = None,
) -> tuple[list[bool], dict, list[dict] | None]:
    """The parts of a Plotly slider that shows one group of traces per step, for a figure built in one call.

    Args:
        step_labels, traces_per_step, prefix, active, always_visible: as :func:`add_step_slider`.
        step_layouts: optional layout changes per step, in Plotly's dotted paths (``"title.text"``).

    Returns:
        ``(visible, slider, step_layouts)``: each trace's ``visible`` at the active step (``always_visible`` traces
        first, then the groups in step order), the ``layout.sliders[0]`` dict, and the step layouts with their
        titles wrapped at :data:`TITLE_WIDTH` (None when none were given).

    Raises:
        ValueError: if ``active`` is not a step.
    """
    n_steps = len(step_labels)
    if not 0 <= active < n_steps:
        raise ValueError(f"active step {active} outside [0, {n_steps})")
    if step_layouts is not None:
        step_layouts = [{**s, "title.text": wrap_text(s["title.text"], TITLE_WIDTH)} if s.get("title.text") else s
                        for s in step_layouts]
    steps = []
    for s, label in enumerate(step_labels):
        visible = [True] * always_visible + [False] * (n_steps * traces_per_step)
        for t in range(traces_per_step):
            visible[always_visible + s * traces_per_step + t] = True
        args: list = [{"visible": visible}]
        if step_layouts is not None:
            args.append(step_layouts[s])
        steps.append(dict(method="update", label=str(label), args=args))
    shown = [True] * always_visible + [(i // traces_per_step) == active for i in range(n_steps * traces_per_step)]
    slider = dict(active=active, currentvalue=dict(prefix=prefix), pad=dict(t=40), steps=steps)
    return shown, slider, step_layouts


def add_step_slider(
    fig: go.Figure,
    step_labels: Sequence[str],
    traces_per_step: int,
    prefix: str,
    active: int = 0,
    always_visible: int = 0,
    step_layouts: Sequence[dict] | None = None,
) -> go.Figure:
    """Add a Plotly slider (``layout.sliders``) that shows one group of traces per step.

    The figure must hold ``always_visible`` traces first (shown at every step),
    then ``len(step_labels)`` groups of ``traces_per_step`` traces in step order.
    Moving the slider only toggles visibility in the browser: no rerun.

    Args:
        step_labels: label of each step (e.g. "d_k=64").
        traces_per_step: traces in each group.
        prefix: text before the current label (e.g. "dropout p = ").
        active: step shown first.
        step_layouts: optional layout changes per step (e.g. titles, annotations).

    Raises:
        ValueError: if the trace count does not match.
    """
    expected = always_visible + len(step_labels) * traces_per_step
    if len(fig.data) != expected:
        raise ValueError(f"figure has {len(fig.data)} traces, expected {expected}")
    shown, slider, step_layouts = step_slider(step_labels, traces_per_step, prefix, active, always_visible,
                                              step_layouts)
    if step_layouts is not None:  # step titles wrapped like base_layout's, with room for the longest
        lines = max((s.get("title.text") or "").count("<br>") for s in step_layouts)
        fig.update_layout(margin_t=max(fig.layout.margin.t or 0, 50 + 18 * lines))
    for i, trace in enumerate(fig.data):
        if i >= always_visible:
            trace.visible = shown[i]
    if step_layouts is not None:
        fig.update_layout(step_layouts[active])
    fig.update_layout(sliders=[slider])
    return fig
