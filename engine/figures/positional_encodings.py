"""Figures of section 7 (positional encodings): permutation sweep, causal visibility, tables, RoPE.

Built on :mod:`engine.figures.core`; no Streamlit. Large tables (block_size x n_embd) are sent
as numpy float32 arrays, which Plotly >= 6 encodes as compact base64, and carry no cell text.
Every word a figure shows (titles, axis titles, annotations, hover labels, the slider prefix)
comes from the caller, in the reader's language: one small frozen dataclass of labels per figure.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from engine import palette
from engine.figures.core import (
    MODEBAR_MARGIN,
    SIGNED_SCALE,
    add_step_slider,
    app_layout,
    base_layout,
    heatmap_trace,
    matrix_axes_layout,
    to_numpy,
    wrap_text,
)
from engine.sections.positional_encodings import RopeRotation, Visibility

#: The mark of :func:`visibility_figure`'s rows whose inputs are the same in both lines.
SAME_MARK = "✓"
#: Differences below this are drawn at this height on the log axis (an exact 0 has no logarithm).
LOG_FLOOR = 1e-10
#: Bar patterns, one per encoding in the order they are drawn (a second cue besides the colour).
PATTERNS = ("", "", "/", "x", ".", "-")


def encoding_colors(encodings: Sequence[str]) -> dict[str, str]:
    """One colour per encoding, in the page's colour meanings: the first (no position information) the residual
    stream's grey, the others shades of the position colour (``palette.POSITION``), darkest first."""
    shades = len(encodings) - 1
    return {e: palette.RESIDUAL if i == 0 else palette.lighten(palette.POSITION, 0.7 * (i - 1) / max(shades - 1, 1))
            for i, e in enumerate(encodings)}


@dataclass(frozen=True)
class PermutationLabels:
    """Words of :func:`permutation_figure`.

    Attributes:
        titles: the figure title at each n_layer, in the table's sorted layer order.
        yaxis: the y axis title (the measured difference).
        xaxis: the x axis title (the encodings).
        rounding: the legend entry of the dotted rounding line at each n_layer (its level written in it).
        exact_zero: bar text of a difference that is exactly 0.
        value: a bar's hover line, with ``{value}`` (the difference), e.g. "max |Δ logits|: {value}".
        slider_prefix: text before the slider's current n_layer.
        encodings: the name shown for each encoding key ("none", "learned", …); a key left out is shown as is.
        separators: Plotly's ``layout.separators`` (decimal sign, group separator) of the reader's language.
        value_texts: each difference of the table written in the page's number style; a difference left out is
            written by a d3 format (``3.0e-8``).
    """

    titles: Sequence[str]
    yaxis: str
    xaxis: str
    rounding: Sequence[str]
    exact_zero: str
    value: str
    slider_prefix: str
    encodings: Mapping[str, str] = field(default_factory=dict)
    separators: str = ".,"
    value_texts: Mapping[float, str] = field(default_factory=dict)


def permutation_figure(table: pd.DataFrame, labels: PermutationLabels, active_layers: int = 1) -> go.Figure:
    """The permutation experiment: one bar per encoding and the logits' float32 rounding level, a slider over n_layer.

    Args:
        table: DataFrame with ``n_layer``, ``pos_encoding``, ``max_abs_diff`` and ``rounding_level`` (see
            :func:`engine.sections.positional_encodings.permutation_experiment`).
        labels: the figure's words; one title and one rounding legend per n_layer.
        active_layers: the n_layer shown first.

    Returns:
        A figure with two traces per n_layer: the bars (one per encoding, in the table's order, named by
        ``labels.encodings``, log y axis, the exact value in ``customdata`` written on each bar) and a dotted line
        at that layer count's largest ``rounding_level`` (float32's rounding of the logits compared), named in the
        legend; ``layout.sliders[0]`` has one step per n_layer.

    Raises:
        ValueError: if ``active_layers`` is not in the table or the titles or rounding legends do not match the
            layers.
    """
    layers = sorted(int(n) for n in table["n_layer"].unique())
    if active_layers not in layers:
        raise ValueError(f"active_layers={active_layers} is not one of {layers}")
    if len(labels.titles) != len(layers) or len(labels.rounding) != len(layers):
        raise ValueError(f"need one title and one rounding legend per layer count ({len(layers)}), got "
                         f"{len(labels.titles)} and {len(labels.rounding)}")
    encodings = list(dict.fromkeys(table["pos_encoding"]))
    colors = encoding_colors(encodings)
    names = [labels.encodings.get(e, e) for e in encodings]
    values = table["max_abs_diff"].to_numpy(dtype=np.float64)
    top = math.ceil(math.log10(max(float(values.max()), 10 * float(table["rounding_level"].max())))) + 2
    traces = []
    for n_layer, rounding in zip(layers, labels.rounding, strict=True):
        part = table[table["n_layer"] == n_layer].set_index("pos_encoding").loc[encodings]
        diffs = part["max_abs_diff"].to_numpy(dtype=np.float64)
        level = float(part["rounding_level"].max())
        texts = [labels.value_texts.get(float(d), "%{customdata:.1e}") if d > 0 else labels.exact_zero
                 for d in diffs]
        traces.append(go.Bar(
            # constraintext "none": a value keeps its size above a narrow bar (a phone), never shrunk to fit it
            x=names, y=np.maximum(diffs, LOG_FLOOR), customdata=diffs, texttemplate=texts, textposition="outside",
            constraintext="none", cliponaxis=False,
            marker=dict(color=[colors[e] for e in encodings], line=dict(color=palette.INK, width=0.5),
                        pattern=dict(shape=list(PATTERNS[:len(encodings)]), fgcolor=palette.PAPER)),
            name=str(n_layer), showlegend=False,
            hovertemplate=[f"%{{x}}<br>{labels.value.format(value=text)}<extra></extra>" for text in texts],
        ))
        traces.append(go.Scatter(x=names, y=[level] * len(names), mode="lines", name=rounding, showlegend=True,
                                 line=dict(dash="dot", color="#777", width=2), hoverinfo="skip"))
    # one constructor call: cheaper than many updates
    fig = go.Figure(traces, layout=dict(
        separators=labels.separators,
        # the legend inside the plot, clear of the y tick labels on its left
        legend=dict(x=0.02, xanchor="left", y=0.99, yanchor="top", bgcolor="rgba(255,255,255,0.85)"),
        yaxis=dict(type="log", range=[math.log10(LOG_FLOOR), top], title_text=labels.yaxis,
                   gridcolor="#eee", exponentformat="power"),
        xaxis=dict(title_text=labels.xaxis),
    ))
    titles = list(labels.titles)
    base_layout(fig, titles[layers.index(active_layers)], 490, top=60, separators=labels.separators)
    fig.update_layout(showlegend=True)
    add_step_slider(
        fig, [str(n) for n in layers], traces_per_step=2, prefix=labels.slider_prefix,
        active=layers.index(active_layers), step_layouts=[{"title.text": t} for t in titles],
    )
    fig.layout.sliders[0].pad.t = 112  # the slider's current value clear of the x axis title and slanted names
    return fig


@dataclass(frozen=True)
class VisibilityLabels:
    """Words of :func:`visibility_figure`.

    Attributes:
        mask_title: title of the left panel (the causal mask).
        count_title: title of the right panel (tokens each position sees).
        count_axis: the right panel's x axis title.
        same_inputs: what the mark ✓ on a row label means, under the mask's title: the position's own character
            and visible characters are the same in both lines (its output after a layer without positions is then
            the same).
        cell_hover: hover text of a mask cell; may use Plotly's ``%{y}`` (query), ``%{x}`` (key), ``%{text}``.
        count_hover: hover text of a bar; may use ``%{y}`` (position) and ``%{x}`` (count).
    """

    mask_title: str
    count_title: str
    count_axis: str
    same_inputs: str
    cell_hover: str
    count_hover: str
    separators: str = ".,"


def _formula(text: str) -> str:
    """``text`` with the spaces around + and = of a formula ("t + 1") made no-break: a wrapped line keeps it whole."""
    return re.sub(r" ([+=−-]) ", "\u00a0\\1\u00a0", text)


def visibility_figure(visibility: Visibility, labels: VisibilityLabels) -> go.Figure:
    """What each position sees under the causal mask in both lines, and how many tokens that is.

    Left: the (T, T) mask; each visible cell names the character of both lines at that key
    position ("白/山"); rows whose query and visible characters are the same in both lines carry a ✓,
    explained under the title by ``labels.same_inputs`` (a short mark keeps the row labels short, so the cells
    keep their width and their text its size on a phone).
    Right: the visible-token count t + 1 of each position.

    Args:
        visibility: :func:`engine.sections.positional_encodings.causal_visibility` of the two lines.
        labels: the figure's words.

    Returns:
        A figure with a heatmap trace and a horizontal bar trace.
    """
    line, permuted = visibility.line, visibility.permuted
    mask = to_numpy(visibility.mask)
    counts = to_numpy(visibility.counts).astype(int)
    same = [bool(s) for s in to_numpy(visibility.same_inputs)]
    T = len(line)
    rows = [f"t={t} · {line[t]}/{permuted[t]}" + (f" {SAME_MARK}" if same[t] else "") for t in range(T)]
    cols = [str(j) for j in range(T)]
    # the two characters one above the other: side by side ("白/山") they fill a phone's cell and run into the next
    cell_text = [[f"{line[j]}<br>{permuted[j]}" if mask[i, j] else "" for j in range(T)] for i in range(T)]
    heat = go.Heatmap(
        z=mask, x=list(range(T)), y=list(range(T)), text=cell_text, texttemplate="%{text}",
        colorscale=[[0.0, "#f6f6f6"], [1.0, "#9ecae1"]], zmin=0, zmax=1, showscale=False, xgap=2, ygap=2,
        hovertemplate=f"{labels.cell_hover}<extra></extra>",
    )
    bars = go.Bar(x=counts, y=list(range(T)), orientation="h", text=[str(c) for c in counts], textposition="outside",
                  marker_color=palette.lighten(palette.MASK, 0.45), showlegend=False, xaxis="x2", yaxis="y2",
                  hovertemplate=f"{labels.count_hover}<extra></extra>")
    # two panels placed by axis domains (one constructor call; make_subplots is slow on every rerun)
    fig = go.Figure([heat, bars], layout=dict(
        separators=labels.separators,
        xaxis=dict(domain=[0, 0.66], side="top", tickmode="array", tickvals=list(range(T)), ticktext=cols,
                   showgrid=False),
        yaxis=dict(domain=[0, 0.86], autorange="reversed", tickmode="array", tickvals=list(range(T)), ticktext=rows,
                   showgrid=False),
        # the count panel's title sits under it, as its axis title: at its top right Plotly's toolbar would cover it
        xaxis2=dict(domain=[0.72, 1], anchor="y2", range=[0, T + 1.5], gridcolor="#eee",
                    title_text=wrap_text(_formula(labels.count_title), 16) + "<br>" + wrap_text(labels.count_axis, 16)),
        yaxis2=dict(domain=[0, 0.86], anchor="x2", autorange="reversed", showticklabels=False, showgrid=False),
        annotations=[
            dict(text=wrap_text(labels.mask_title, 34) + "<br>" + wrap_text(f"{SAME_MARK} {labels.same_inputs}", 34),
                 xref="paper", x=0, xanchor="left", y=1, yref="paper", yanchor="bottom", showarrow=False,
                 align="left"),
        ],
    ))
    lines = fig.layout.annotations[0].text.count("<br>")  # a wrapped title: 18 px per extra line
    below = fig.layout.xaxis2.title.text.count("<br>")  # the count panel's title lines under it
    return base_layout(fig, None, 60 * T + 140 + 18 * (lines + below), top=40 + 18 * lines,
                       separators=labels.separators)


#: Pixel sizes of one block of :func:`stacked_tables_figure`, top to bottom, at the app's 13 px font.
#: A title line (bold title or subtitle).
TITLE_LINE_PX = 18
#: Room between the last title line and the column labels.
TITLE_GAP_PX = 4
#: The column labels above the heatmap (``side="top"``) with their tick marks.
COLUMN_LABELS_PX = 30
#: The horizontal colour bar under the heatmap with its tick labels, and the gap to the next panel's title.
COLORBAR_PX = 60
#: Pad between the heatmap's bottom edge and its colour bar.
COLORBAR_PAD_PX = 8
#: Longest title line (characters): one figure is drawn in a third of a desktop page.
TABLE_TITLE_CHARS = 30
#: Top margin (px) above the first panel's title.
TABLES_TOP_PX = 8


@dataclass(frozen=True)
class TablePanel:
    """One panel of :func:`stacked_tables_figure`: a large signed table and its words.

    Attributes:
        title: the panel's title (drawn bold; also the hover's trace name).
        table: (rows, cols) tensor or array, any float dtype.
        row_title, col_title: what a row and a column are (the row axis title, the hover labels).
        subtitle: a line under the title (e.g. what rows and columns are), or None.
        zmax: the colour range is [-zmax, zmax]; defaults to the table's largest |value|.
    """

    title: str
    table: object
    row_title: str
    col_title: str
    subtitle: str | None = None
    zmax: float | None = None


def _title_text(panel: TablePanel) -> str:
    """A panel's title (bold) and subtitle, wrapped for a figure a third of a desktop page wide."""
    return (f"<b>{wrap_text(panel.title, TABLE_TITLE_CHARS)}</b>"
            + (f"<br>{wrap_text(panel.subtitle, TABLE_TITLE_CHARS)}" if panel.subtitle else ""))


def title_lines(panel: TablePanel) -> int:
    """How many lines the title and subtitle of ``panel`` take in :func:`stacked_tables_figure`."""
    return _title_text(panel).count("<br>") + 1


def stacked_tables_figure(panels: Sequence[TablePanel], heatmap_height: int = 280,
                          lines: Sequence[int] | None = None, separators: str = ".,", colon: str = ": ") -> go.Figure:
    """Large signed tables stacked top to bottom in one figure (e.g. a block_size x n_embd position table and its
    (block_size, block_size) similarity), row 0 on top, column labels on top.

    Each panel has its own title (bold) and optional subtitle above it, its own symmetric colour range (a learned
    table at init spans about ±0.06, the sinusoidal one ±1, a similarity ±1) and its own horizontal colour bar
    underneath; values are in the hover, not in the cells. Panels are stacked in ONE figure: page 7 draws one
    chart per column (a table and its similarity), so a control redraws two charts instead of four (every chart
    Streamlit replaces is a full new Plotly plot in the browser); they are stacked, not side by side, so that
    on a phone, where the columns stack too, nothing is squeezed into half a screen.

    Every part has a fixed place in pixels (titles at :data:`TITLE_LINE_PX` a line, the column labels in
    :data:`COLUMN_LABELS_PX`, the heatmap in ``heatmap_height``, the colour bar in :data:`COLORBAR_PX`), turned
    into paper fractions of the plot area: the margins are fixed and never grown by Plotly.

    Args:
        panels: the panels, top to bottom; tables may have different shapes.
        heatmap_height: height in px of each heatmap.
        lines: title lines to make room for, per panel (at least each title's own, :func:`title_lines`): figures
            drawn side by side pass the largest of each row, so that their panels line up.
        separators: Plotly's ``layout.separators`` of the reader's language (the hover's and colour bars' numbers).
        colon: what joins a hover's cell labels to the value, in the reader's typography (``"\u202f: "`` in French).

    Returns:
        A figure with one heatmap trace per panel (z: the (rows, cols) table as a float32 array) on axes
        x, y (first panel), x2, y2, …; its height is the sum of the panels' blocks plus the margins.

    Raises:
        ValueError: if there is no panel, a table is not 2-d, or ``lines`` does not have one entry per panel.
    """
    if not panels:
        raise ValueError("stacked_tables_figure needs at least one panel")
    if lines is not None and len(lines) != len(panels):
        raise ValueError(f"lines needs one entry per panel ({len(panels)}), got {len(lines)}")
    tables = []
    for panel in panels:
        z = to_numpy(panel.table).astype(np.float32)  # (rows, cols) float64 -> float32: half the JSON
        if z.ndim != 2:
            raise ValueError(f"panel {panel.title!r} must be 2-d, got shape {z.shape}")
        tables.append(z)
    texts = [_title_text(p) for p in panels]
    lines = [max(title_lines(p), wanted) for p, wanted in zip(panels, lines or [0] * len(panels), strict=True)]
    title_px = [TITLE_LINE_PX * n + TITLE_GAP_PX for n in lines]
    plot_px = sum(title_px) + len(panels) * (COLUMN_LABELS_PX + heatmap_height + COLORBAR_PX)

    def paper(px: float) -> float:
        """Paper y of a point ``px`` pixels under the plot area's top edge."""
        return 1 - px / plot_px

    traces, axes, annotations = [], {}, []
    top = 0  # px from the plot area's top to the current panel's title
    for i, (panel, z, text, title) in enumerate(zip(panels, tables, texts, title_px, strict=True)):
        heat_top = top + title + COLUMN_LABELS_PX
        heat_bottom = heat_top + heatmap_height
        suffix = "" if i == 0 else str(i + 1)
        limit = float(panel.zmax if panel.zmax is not None else max(float(np.abs(z).max(initial=0.0)), 1e-12))
        traces.append(go.Heatmap(
            z=z, xaxis=f"x{suffix}", yaxis=f"y{suffix}", colorscale=SIGNED_SCALE, zmin=-limit, zmax=limit, zmid=0,
            colorbar=dict(orientation="h", x=0.5, xanchor="center", len=1, lenmode="fraction",
                          y=paper(heat_bottom + COLORBAR_PAD_PX), yanchor="top", ypad=0, thickness=10,
                          tickformat=".2g"),
            hovertemplate=f"{panel.row_title} %{{y}} · {panel.col_title} %{{x}}{colon}%{{z:.4f}}"
                          f"<extra>{panel.title}</extra>",
        ))
        axes[f"xaxis{suffix}"] = dict(anchor=f"y{suffix}", side="top", showgrid=False, automargin=False)
        axes[f"yaxis{suffix}"] = dict(domain=[paper(heat_bottom), paper(heat_top)], anchor=f"x{suffix}",
                                      autorange="reversed", showgrid=False, title_text=panel.row_title,
                                      automargin=False)
        annotations.append(dict(text=text, x=0, xref="paper", xanchor="left", y=paper(top + title - TITLE_GAP_PX),
                                yref="paper", yanchor="bottom", showarrow=False, align="left"))
        top = heat_bottom + COLORBAR_PX
    rows = max(z.shape[0] for z in tables)
    common = app_layout(None, plot_px + TABLES_TOP_PX, top=TABLES_TOP_PX)
    # Fixed margins, not grown by Plotly: a new figure whose margins grow is drawn twice (Plotly measures the
    # tick labels and colour bars, then draws again) on every redraw. So
    # titles, column labels and colour bars all sit inside the plot area, placed above; the left margin holds
    # the rotated row title and the row numbers (8 px a digit), the right one Plotly's toolbar.
    common["margin"] = dict(common["margin"], l=56 + 8 * len(str(rows - 1)), r=MODEBAR_MARGIN, b=0,
                            autoexpand=False)
    # one constructor call with axis domains: cheaper on every rerun than make_subplots and updates
    return go.Figure(traces, layout=dict(common, annotations=annotations, separators=separators, **axes))


@dataclass(frozen=True)
class RopePairLabels:
    """Words of :func:`rope_pairs_figure`; templates use named placeholders.

    Attributes:
        panel: each panel's title; placeholders ``{pair}``, ``{dim_a}``, ``{dim_b}``, ``{theta}``
            (rad per position) and ``{angle}`` (degrees mod 360), the last two as written by ``number``, e.g.
            "pair {pair} (dims {dim_a}, {dim_b})<br>θ = {theta} rad/pos · {angle}°".
        earlier: hover name of the trail of earlier positions.
        position: hover label of the arrow's tip; placeholder ``{position}``.
        pair: hover name of the arrow; placeholder ``{pair}``.
        point: a point's coordinates as a Plotly hover template (``%{x:.3f}``, ``%{y:.3f}``).
        theta_text, angle_text: write θ_i (rad per position) and the angle (degrees) in the reader's number
            format.
        separators: Plotly's ``layout.separators`` of the reader's language.
    """

    panel: str
    earlier: str
    position: str
    pair: str
    point: str = "(%{x:.3f}, %{y:.3f})"
    theta_text: Callable[[float], str] = "{:.3g}".format
    angle_text: Callable[[float], str] = "{:.1f}".format
    separators: str = ".,"


#: Panels per row of :func:`rope_pairs_figure`: four keep a phone's panels wide enough for their titles.
PAIRS_PER_ROW = 4
#: Most pairs :func:`rope_pairs_figure` draws (two rows).
MAX_PAIRS = 8


def rope_pairs_figure(rotation: RopeRotation, position: int, pairs: Sequence[int], labels: RopePairLabels) -> go.Figure:
    """Chosen pairs of dimensions of one vector, rotated by RoPE at ``position``: one 2-d panel each, in rows of
    :data:`PAIRS_PER_ROW`.

    Each panel shows the circle the pair moves on (its length never changes), the faint trail of
    the pair at positions 0..position, and an arrow to where it is at ``position``.

    Args:
        rotation: :func:`engine.sections.positional_encodings.rope_rotation` of one vector.
        position: the position drawn (0 <= position < its n_positions).
        pairs: indices i of the pairs (2i, 2i+1) to draw (at most :data:`MAX_PAIRS`).
        labels: the figure's words.

    Returns:
        A figure with 3 traces per pair (circle, trail, arrow).

    Raises:
        ValueError: if the position or a pair index is out of range.
    """
    pts = to_numpy(rotation.pairs)  # (P, hd/2, 2)
    theta = to_numpy(rotation.theta)  # (hd/2,)
    radius = to_numpy(rotation.pair_norms)  # (hd/2,)
    if not 0 <= position < pts.shape[0]:
        raise ValueError(f"position {position} outside [0, {pts.shape[0]})")
    if any(not 0 <= i < pts.shape[1] for i in pairs) or not 1 <= len(pairs) <= MAX_PAIRS:
        raise ValueError(f"pairs must be 1 to {MAX_PAIRS} indices in [0, {pts.shape[1]}), got {list(pairs)}")
    n = len(pairs)
    per_row = min(n, PAIRS_PER_ROW)
    rows = -(-n // per_row)  # ceil(n / per_row)
    gap = 0.03
    width = (1 - gap * (per_row - 1)) / per_row
    row_height = 1 / rows  # each row: its panels in the top 70 %, their titles below
    ring = np.linspace(0, 2 * np.pi, 73)
    reach = float(max(radius[list(pairs)].max(), 1e-6)) * 1.15
    traces, layout, annotations = [], {}, []
    for c, i in enumerate(pairs):
        color = palette.POSITION  # one meaning on the page: position information (each pair has its own panel)
        suffix = "" if c == 0 else str(c + 1)
        axes = dict(xaxis=f"x{suffix}", yaxis=f"y{suffix}", showlegend=False)
        trail = pts[: position + 1, i]
        x, y = pts[position, i]
        traces += [
            go.Scatter(x=radius[i] * np.cos(ring), y=radius[i] * np.sin(ring), mode="lines",
                       line=dict(color="#ddd", width=1), hoverinfo="skip", **axes),
            go.Scatter(x=trail[:, 0], y=trail[:, 1], mode="markers", marker=dict(size=4, color=color, opacity=0.3),
                       hovertemplate=f"{labels.point}<extra>{labels.earlier}</extra>", **axes),
            go.Scatter(x=[0, x], y=[0, y], mode="lines+markers", line=dict(color=color, width=3),
                       marker=dict(size=[0, 9], color=color),
                       hovertemplate=f"{labels.position.format(position=position)}{labels.point}"
                                     f"<extra>{labels.pair.format(pair=i)}</extra>", **axes),
        ]
        left = (c % per_row) * (width + gap)
        bottom = 1 - (c // per_row + 1) * row_height
        frame = dict(range=[-reach, reach], showticklabels=False, zeroline=True, zerolinecolor="#eee", showgrid=False)
        layout[f"xaxis{suffix}"] = dict(domain=[left, left + width], anchor=f"y{suffix}", **frame)
        layout[f"yaxis{suffix}"] = dict(domain=[bottom + 0.3 * row_height, bottom + row_height], anchor=f"x{suffix}",
                                        scaleanchor=f"x{suffix}", scaleratio=1, **frame)
        theta_i = float(theta[i])
        text = labels.panel.format(pair=i, dim_a=2 * i, dim_b=2 * i + 1,
                                   theta=labels.theta_text(theta_i),
                                   angle=labels.angle_text(math.degrees(position * theta_i) % 360))
        # a group in parentheses ("(dims 2, 3)") stays on one line: its spaces do not break
        text = re.sub(r"\([^()]*\)", lambda group: group[0].replace(" ", "\u00a0"), text)
        annotations.append(dict(
            # wrapped to a phone's panel width (a quarter of 390 px)
            text="<br>".join(wrap_text(line, 13) for line in text.split("<br>")),
            # under its panel: above it, on a phone, Plotly's toolbar would cover the last panels' titles
            xref="paper", x=left + width / 2, xanchor="center", y=bottom + 0.27 * row_height, yref="paper",
            yanchor="top", showarrow=False, font=dict(size=11),
        ))
    # one constructor call with axis domains: make_subplots and per-panel updates are slow on every rerun
    return go.Figure(traces, layout=dict(app_layout(None, 300 * rows, top=20), annotations=annotations,
                                         separators=labels.separators, **layout))


#: Most positions whose scores are written in the cells: past them the cells of a half-page figure are too small
#: for the numbers, which stay in the hover.
SCORE_VALUE_POSITIONS = 10


def score_limit(matrices: Sequence[object]) -> float:
    """The largest finite |score| of ``matrices`` (1.0 when all are 0 or not finite): the colour range
    [-limit, limit] that score matrices drawn side by side share.

    Non-finite cells (the causal mask's -inf above an ALiBi bias's diagonal) are drawn as gaps, so they do not
    count; every drawn cell lies inside the range.

    Args:
        matrices: (T, T) tensors or arrays, any float dtype (scores, or ALiBi's bias in score units).
    """
    return max(float(np.abs(z[np.isfinite(z)]).max(initial=0.0)) for z in map(to_numpy, matrices)) or 1.0


#: The colour bar's ticks of :func:`score_matrices_figure`, as fractions of its limit: its two ends and 0 are labelled,
#: so the reader reads the range that every cell lies in (labels between them, such as −0.875, would not fit the
#: right margin of a half-page figure).
SCORE_TICKS = (-1.0, 0.0, 1.0)


def score_matrices_figure(matrices: dict[str, object], position_labels: dict[str, Sequence[str]], row_title: str,
                          hover: str, decimals: int = 2, limit: float | None = None,
                          separators: str = ".,", show_values: bool | None = None) -> go.Figure:
    """Score matrices side by side (e.g. RoPE at positions 0.. and shifted), values in the cells.

    Args:
        matrices: panel title -> (T, T) scores.
        position_labels: panel title -> the T position labels of that panel (queries = keys).
        row_title: the first panel's y axis title (the query position).
        hover: hover text of a cell; may use Plotly's ``%{customdata[0]}`` (query position),
            ``%{customdata[1]}`` (key position) and ``%{text}`` (the score).
        decimals: digits written in each cell (for at most :data:`SCORE_VALUE_POSITIONS` positions).
        limit: the colour range is [-limit, limit]; defaults to :func:`score_limit` of ``matrices``. Pass the
            same limit to figures drawn side by side (one panel each, so that they stack on a phone) to keep
            their colours comparable.
        separators: Plotly's ``layout.separators`` of the reader's language.
        show_values: write the values in the cells; None: when there are at most :data:`SCORE_VALUE_POSITIONS`
            positions.

    Returns:
        A figure with one heatmap trace per matrix on a shared, symmetric colour range (``zmin = -limit``,
        ``zmax = limit``), its colour bar's ticks at :data:`SCORE_TICKS` times the limit, ends included.
    """
    n = len(matrices)
    if limit is None:
        limit = score_limit(list(matrices.values()))
    # short title lines: on a phone the right panel's title would reach under Plotly's toolbar
    titles = [wrap_text(name, 18) for name in matrices]
    lines = max(t.count("<br>") for t in titles)
    gap = 0.12 / max(n - 1, 1)
    width = (1 - gap * (n - 1)) / n
    digits = max(len(label) for labels in position_labels.values() for label in labels)
    traces, axes, annotations = [], {}, []
    for c, (name, matrix) in enumerate(matrices.items()):
        labels = list(position_labels[name])
        suffix = "" if c == 0 else str(c + 1)
        left = c * (width + gap)
        trace = heatmap_trace(matrix, labels, labels, colorscale=SIGNED_SCALE, zmin=-limit, zmax=limit,
                              decimals=decimals, showscale=c == n - 1, separators=separators,
                              show_values=len(labels) <= SCORE_VALUE_POSITIONS if show_values is None
                              else show_values)
        trace.update(xaxis=f"x{suffix}", yaxis=f"y{suffix}", hovertemplate=f"{hover}<extra></extra>",
                     colorbar=dict(tickvals=[t * limit for t in SCORE_TICKS], tickformat=".3~g"))
        traces.append(trace)
        xaxis, yaxis = matrix_axes_layout(labels, labels, row_title if c == 0 else None, None)
        axes[f"xaxis{suffix}"] = dict(xaxis, domain=[left, left + width], anchor=f"y{suffix}", automargin=False)
        axes[f"yaxis{suffix}"] = dict(yaxis, anchor=f"x{suffix}", automargin=False)
        # above the column labels, which Plotly turns upright when they crowd (shifted positions: 4 digits)
        annotations.append(dict(text=titles[c], x=left + width / 2, xref="paper", xanchor="center", y=1.0,
                                yref="paper", yanchor="bottom", yshift=max(36, 18 + 10 * digits), showarrow=False,
                                font=dict(size=16)))
    T = len(next(iter(position_labels.values())))
    layout = app_layout(None, max(320, 34 * T + 160) + 18 * lines, top=110 + 18 * lines)
    # Fixed margins, not grown by Plotly (a figure whose margins grow is drawn twice): the left one holds the row
    # title and the position labels (7 px a digit), the right one the colour bar with its labels and the toolbar
    layout["margin"] = dict(layout["margin"], l=60 + 7 * digits, r=70, autoexpand=False)
    # one constructor call with axis domains: cheaper on every rerun than make_subplots and updates
    return go.Figure(traces, layout=dict(layout, annotations=annotations, separators=separators, **axes))
