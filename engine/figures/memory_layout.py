"""Figures of the memory-layout page: logical grid above storage cells, walked by a Plotly slider.

Each figure has two panels: on top the tensor as it prints (leading
dimensions folded into rows), below its storage as numbered cells in memory
order. Sliders inside the figure step through the logical order (which cell
each element is read from) or through the stages of the multi-head split;
moving them needs no rerun. Every word a figure shows comes from the caller,
in one small frozen dataclass of labels per figure (templates with named
placeholders, already translated).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from engine.figures.core import PALETTE, TITLE_WIDTH, add_step_slider, base_layout, format_value, wrap_text
from engine.layout import MemoryWalk, human_bytes
from engine.sections.memory_layout import HeadStage

#: Colour of a cell that holds data, of a storage cell the tensor never reads, and of the lit cell.
CELL_COLOUR, UNUSED_COLOUR, LIT_COLOUR = "#dbe9f6", "#f0f0f0", "#ff7f0e"
#: Storage cells per row of the multi-head memory strip, and per row of a strip whose cells carry two-digit numbers
#: (:func:`strip_width`): at 390 px a row of 16 leaves about 15 px a cell, where two digits at the figures' 13 px
#: font touch their neighbours; a row of 8 leaves about 30 px, and still reads at 1400 px.
STRIP_WIDTH, NUMBERED_STRIP_WIDTH = 16, 8
#: Largest grid (columns) and storage (cells) whose numbers are written in the cells: past them a phone's cells
#: are too small for the numbers, the colours still show each element's head and the hover gives the numbers.
TEXT_COLUMNS, TEXT_CELLS = 8, 64


def strip_width(n: int) -> int:
    """Cells per row of the head walk's storage strip of ``n`` cells: all of them up to :data:`STRIP_WIDTH` while
    their numbers (the reading positions 0 … n − 1) have one digit, :data:`NUMBERED_STRIP_WIDTH` while the cells
    carry two-digit numbers (n ≤ :data:`TEXT_CELLS`), :data:`STRIP_WIDTH` again past that, where the cells carry no
    number (their colours show the heads, the hover gives the numbers)."""
    if n <= 10:
        return max(n, 1)
    return NUMBERED_STRIP_WIDTH if n <= TEXT_CELLS else STRIP_WIDTH


def _flat_scale(colour: str) -> list:
    return [[0.0, colour], [1.0, colour]]


def _heads_scale(num_colours: int) -> list:
    """A stepped colour scale: integer z = h gets PALETTE[h] (z from -0.5 to num_colours - 0.5)."""
    scale = []
    for h in range(num_colours):
        scale.append([h / num_colours, PALETTE[h % len(PALETTE)]])
        scale.append([(h + 1) / num_colours, PALETTE[h % len(PALETTE)]])
    return scale


#: Largest grid (elements) of :func:`memory_walk_figure` whose cells also name their storage cell in small print.
WALK_SMALL_PRINT_CELLS = 12
#: Longest storage strip of :func:`memory_walk_figure` whose cells carry their values (one row of cells).
WALK_STRIP_TEXT_CELLS = 16
#: Room (px) between a bottom axis title and the in-figure slider's current value under it.
SLIDER_PAD_PX = 64
#: Longest line of the head walk's storage title: it fits a phone's 390 px at the app's font.
STORAGE_TITLE_CHARS = 40


def _breaks(titles: Sequence[str]) -> int:
    """Line breaks of the longest of ``titles`` once wrapped (:data:`engine.figures.core.TITLE_WIDTH`)."""
    return max(wrap_text(t, TITLE_WIDTH).count("<br>") for t in titles)


def _longest(titles: Sequence[str]) -> str:
    """The title that takes the most lines once wrapped for the figure (:data:`engine.figures.core.TITLE_WIDTH`)."""
    return max(titles, key=lambda t: wrap_text(t, TITLE_WIDTH).count("<br>"))


def _cell_text(v: float) -> str:
    return str(int(v)) if float(v).is_integer() else format_value(v, 2)


def _lit(rows: int, cols: int, r: int, c: int, text: str, hover: str) -> go.Heatmap:
    """A heatmap with a single filled cell (r, c), transparent elsewhere."""
    z = [[None] * cols for _ in range(rows)]
    z[r][c] = 1.0
    texts = [[""] * cols for _ in range(rows)]
    texts[r][c] = text
    return go.Heatmap(z=z, text=texts, texttemplate="%{text}", colorscale=_flat_scale(LIT_COLOUR), showscale=False,
                      hoverongaps=False, hovertemplate=hover + "<extra></extra>", xgap=2, ygap=2,
                      textfont=dict(color="white", size=14))


@dataclass(frozen=True)
class WalkLabels:
    """Words of :func:`memory_walk_figure`, in the reader's language.

    Attributes:
        storage_title: title of the storage panel.
        row_axis, cell_axis: y title of the grid, x title of the storage strip.
        cell: a grid cell's small print, with ``{cell}`` (the storage cell number).
        grid_hover: hover of a grid cell, with ``{row}``, ``{col}`` and ``{text}`` (Plotly's
            ``%{y}``, ``%{x}``, ``%{text}`` are passed in).
        storage_hover: hover of a storage cell, with ``{cell}`` and ``{text}``.
        step: each step's caption, with ``{k}``, ``{where}`` (the logical index) and ``{cell}``.
        slider_prefix: text before the slider's current value.
    """

    storage_title: str
    row_axis: str
    cell_axis: str
    cell: str
    grid_hover: str
    storage_hover: str
    step: str
    slider_prefix: str


def memory_walk_figure(walk: MemoryWalk, title: str, labels: WalkLabels, height: int | None = None) -> go.Figure:
    """The tensor's grid above its storage cells; a Plotly slider lights element k and the cell it is read from.

    Args:
        walk: from :func:`engine.layout.memory_walk`.
        title: figure title (the tensor's code); each step appends ``labels.step``.
        labels: the figure's words.

    Returns:
        Figure with two always-visible heatmaps (grid, storage) and two
        highlight traces per logical element, and ``layout.sliders[0]`` with one
        step per element in row-major order.
    """
    values = walk.grid_values.numpy()
    cells = walk.grid_cells.numpy()
    rows, cols = values.shape
    storage = walk.storage_values.numpy()
    n = storage.shape[0]
    read = np.zeros(n, dtype=bool)
    read[walk.order] = True

    fig = make_subplots(rows=2, cols=1, row_heights=[0.7, 0.3], vertical_spacing=0.16,
                        subplot_titles=("", labels.storage_title))
    # a cell names its storage cell in small print while the grid is small enough for it on a phone (the hover
    # always does)
    small_print = rows * cols <= WALK_SMALL_PRINT_CELLS
    grid_text = [[_cell_text(values[i, j]) + (f"<br><sub>{labels.cell.format(cell=cells[i, j])}</sub>"
                                              if small_print else "")
                  for j in range(cols)] for i in range(rows)]
    grid_hover = labels.grid_hover.format(row="%{y}", col="%{x}", text="%{text}") + "<extra></extra>"
    fig.add_trace(go.Heatmap(z=[[0.0] * cols for _ in range(rows)], text=grid_text, texttemplate="%{text}",
                             colorscale=_flat_scale(CELL_COLOUR), showscale=False, xgap=2, ygap=2,
                             hovertemplate=grid_hover), row=1, col=1)
    strip_text = [[_cell_text(storage[c]) for c in range(n)]]
    strip_hover = labels.storage_hover.format(cell="%{x}", text="%{text}") + "<extra></extra>"
    fig.add_trace(go.Heatmap(z=[[0.0 if read[c] else 1.0 for c in range(n)]], text=strip_text,
                             texttemplate="%{text}" if n <= WALK_STRIP_TEXT_CELLS else "",
                             colorscale=[[0.0, CELL_COLOUR], [1.0, UNUSED_COLOUR]], zmin=0, zmax=1, showscale=False,
                             xgap=2, ygap=2, hovertemplate=strip_hover), row=2, col=1)
    captions = []
    for k, cell in enumerate(walk.order):
        i, j = divmod(k, cols)
        # a 3-d start labels its rows "(0, 1)": the element's index is one flat tuple, (0, 1, 2), never ((0, 1), 2)
        row = walk.row_labels[i].strip("()")
        where = f"({row}, {j})" if rows > 1 or walk.row_labels[0] != "0" else f"({j})"
        captions.append(labels.step.format(k=k, where=where, cell=cell))
        # the lit cell repeats the grid cell's own text, in white on the highlight
        fig.add_trace(_lit(rows, cols, i, j, grid_text[i][j], captions[-1]), row=1, col=1)
        fig.add_trace(_lit(1, n, 0, cell, _cell_text(storage[cell]), captions[-1]), row=2, col=1)
    fig.update_yaxes(tickmode="array", tickvals=list(range(rows)), ticktext=walk.row_labels, autorange="reversed",
                     title_text=labels.row_axis, showgrid=False, row=1, col=1)
    fig.update_xaxes(tickmode="array", tickvals=list(range(cols)), ticktext=[str(j) for j in range(cols)], side="top",
                     showgrid=False, row=1, col=1)
    fig.update_yaxes(showticklabels=False, showgrid=False, row=2, col=1)
    fig.update_xaxes(tickmode="array", tickvals=list(range(n)), ticktext=[str(c) for c in range(n)],
                     title_text=labels.cell_axis, showgrid=False, row=2, col=1)
    titles = [f"{title} · {t}" for t in captions]
    # laid out for the step title of most lines, so that none is cut at the top edge (each step only swaps the text)
    base_layout(fig, _longest(titles), height or (min(44 * rows, 420) + 350 + 30 * _breaks(titles)))
    add_step_slider(fig, [str(k) for k in range(len(walk.order))], traces_per_step=2, prefix=labels.slider_prefix,
                    always_visible=2, step_layouts=[{"title.text": t} for t in titles])
    # the slider's current value sits under the storage strip's axis title, clear of it
    fig.layout.sliders[0].pad.t = SLIDER_PAD_PX
    # the title block (lines and Plotly's pad) above the column labels
    fig.layout.margin.t = 50 + 30 * _breaks(titles)
    return fig


@dataclass(frozen=True)
class HeadWalkLabels:
    """Words of :func:`head_walk_figure`, in the reader's language.

    Attributes:
        storage_title: title of the storage panel.
        head: a legend entry, with ``{h}``.
        grid_hover: hover of a grid cell, with ``{row}``, ``{col}``, ``{head}`` and ``{cell}``.
        storage_hover: hover of a storage cell, with ``{cell}``, ``{head}`` and ``{position}``.
        stage: each stage's title, with ``{title}`` (the code), ``{shape}``, ``{stride}``,
            ``{contiguity}`` and ``{storage}``.
        contiguous, not_contiguous: the two values of ``{contiguity}``.
        same_storage, new_storage: the two values of ``{storage}``.
        cells: a storage row's tick, with ``{first}`` and ``{last}``.
        cell_axis: x title of the storage panel.
        slider_prefix: text before the slider's current value.
    """

    storage_title: str
    head: str
    grid_hover: str
    storage_hover: str
    stage: str
    contiguous: str
    not_contiguous: str
    same_storage: str
    new_storage: str
    cells: str
    cell_axis: str
    slider_prefix: str


def head_walk_figure(stages: Sequence[HeadStage], num_heads: int, labels: HeadWalkLabels,
                     height: int | None = None) -> go.Figure:
    """The keys' path through the head split: elements coloured by head, a Plotly slider over the stages.

    Top panel: the stage's tensor as it prints (b = 1 left out; leading dims
    folded into rows), each element coloured by its head and labelled with
    the storage cell it lives in (up to :data:`TEXT_COLUMNS` columns). Bottom panel: the storage, :func:`strip_width`
    cells per row, each coloured by the head of the element it holds and
    labelled with that element's position in reading order (up to :data:`TEXT_CELLS` cells) — 0, 1, 2, … in
    sequence exactly when the tensor is contiguous.

    Args:
        stages: from :func:`engine.sections.memory_layout.key_head_walk`.
        num_heads: H, for the colour scale.
        labels: the figure's words.

    Returns:
        Figure with two traces per stage and ``layout.sliders[0]`` of one step per stage.
    """
    scale = _heads_scale(num_heads)
    # the storage title wrapped to a phone's width (a line Plotly cannot wrap runs out of the figure)
    fig = make_subplots(rows=2, cols=1, row_heights=[0.62, 0.38], vertical_spacing=0.12,
                        subplot_titles=("", wrap_text(labels.storage_title, STORAGE_TITLE_CHARS)))
    step_layouts = []
    legend = "   ".join(f"<span style='color:{PALETTE[h % len(PALETTE)]}'>■ {labels.head.format(h=h)}</span>"
                       for h in range(num_heads))
    max_rows = max(s.grid_heads.shape[0] for s in stages)
    max_strip_rows = max(math.ceil(s.memory_heads.numel() / strip_width(s.memory_heads.numel())) for s in stages)
    grid_hover = labels.grid_hover.format(row="%{customdata}", col="%{x}", head="%{z}", cell="%{text}")
    strip_hover = labels.storage_hover.format(cell="%{customdata}", head="%{z}", position="%{text}")
    for s in stages:
        heads = s.grid_heads.numpy()
        cells = s.grid_cells.numpy()
        rows, cols = heads.shape
        fig.add_trace(go.Heatmap(
            z=heads.astype(float).tolist(), text=cells.astype(str).tolist(),
            texttemplate="%{text}" if cols <= TEXT_COLUMNS else "", colorscale=scale, zmin=-0.5,
            zmax=num_heads - 0.5, showscale=False, xgap=1, ygap=1,
            customdata=[[s.row_labels[i]] * cols for i in range(rows)],
            hovertemplate=grid_hover + "<extra></extra>",
        ), row=1, col=1)
        n = s.memory_heads.numel()
        width = strip_width(n)
        strip_rows = math.ceil(n / width)
        mem_heads = np.full(strip_rows * width, np.nan)
        mem_heads[:n] = s.memory_heads.numpy()
        mem_text = np.full(strip_rows * width, "", dtype=object)
        mem_text[:n] = s.memory_order.numpy().astype(str)
        fig.add_trace(go.Heatmap(
            z=[[None if np.isnan(v) else float(v) for v in row] for row in mem_heads.reshape(strip_rows, width)],
            text=mem_text.reshape(strip_rows, width).tolist(), texttemplate="%{text}" if n <= TEXT_CELLS else "",
            colorscale=scale, zmin=-0.5, zmax=num_heads - 0.5, showscale=False, xgap=1, ygap=1, hoverongaps=False,
            customdata=(np.arange(strip_rows * width).reshape(strip_rows, width)).tolist(),
            hovertemplate=strip_hover + "<extra></extra>",
        ), row=2, col=1)
        lay = s.layout
        step_layouts.append({
            "title.text": labels.stage.format(
                title=s.title, shape=lay.shape, stride=lay.stride,
                contiguity=labels.contiguous if lay.is_contiguous else labels.not_contiguous,
                storage=labels.same_storage if s.shares_previous else labels.new_storage),
            "yaxis.tickvals": list(range(rows)),
            "yaxis.ticktext": s.row_labels,
            "yaxis.range": [max(rows, max_rows) - 0.5, -0.5],
            "xaxis.tickvals": list(range(cols)),
            "xaxis.ticktext": s.col_labels,
            "xaxis.range": [-0.5, cols - 0.5],
            "yaxis2.tickvals": list(range(strip_rows)),
            "yaxis2.ticktext": [labels.cells.format(first=r * width, last=min(n, (r + 1) * width) - 1)
                                for r in range(strip_rows)],
            "yaxis2.range": [max(strip_rows, max_strip_rows) - 0.5, -0.5],
            "xaxis2.range": [-0.5, width - 0.5],
        })
    fig.update_yaxes(tickmode="array", showgrid=False, row=1, col=1)
    fig.update_xaxes(tickmode="array", side="top", showgrid=False, row=1, col=1)
    fig.update_yaxes(tickmode="array", showgrid=False, row=2, col=1)
    fig.update_xaxes(showgrid=False, title_text=labels.cell_axis, row=2, col=1)
    breaks = _breaks([s["title.text"] for s in step_layouts])
    base_layout(fig, _longest([s["title.text"] for s in step_layouts]),
                height or (min(22 * max_rows, 560) + 60 * max_strip_rows + 280 + 30 * breaks))
    fig.add_annotation(text=legend, x=0, xref="paper", xanchor="left", y=1, yref="paper", yanchor="bottom", yshift=38,
                       showarrow=False, font=dict(size=14))
    # the title block (its lines and Plotly's pad), then the legend of heads, then the column labels
    fig.update_layout(margin=dict(t=118 + 30 * breaks))
    add_step_slider(fig, [f"{k}" for k in range(len(stages))], traces_per_step=2, prefix=labels.slider_prefix,
                    step_layouts=step_layouts)
    fig.layout.sliders[0].pad.t = SLIDER_PAD_PX
    return fig


@dataclass(frozen=True)
class CostLabels:
    """Words of :func:`score_cost_figure`, in the reader's language.

    Attributes:
        title: the figure's title.
        scores, qkv: legend names of the two lines.
        length_axis, bytes_axis: the axis titles.
        hover: a point's hover, with ``{T}`` and ``{size}``.
        size_text: writes a byte count for the axis labels and the hover, in the reader's number format and units.
        mark: the note on the marked length, with ``{T}`` (the length, written by ``count_text``).
        count_text: writes a whole number in the reader's format (the marked length).
        separators: Plotly's ``layout.separators`` of the reader's language (the T axis labels' groups).
    """

    title: str
    scores: str
    qkv: str
    length_axis: str
    bytes_axis: str
    hover: str
    size_text: Callable[[float], str] = human_bytes
    mark: str = "T = {T}"
    count_text: Callable[[int], str] = str
    separators: str = ".,"


def score_cost_figure(table: pd.DataFrame, labels: CostLabels, mark_length: int | None = 1024) -> go.Figure:
    """Log–log lines of the score tensor's bytes (∝ T²) and the q, k, v bytes (∝ T).

    Args:
        table: from :func:`engine.sections.memory_layout.score_cost_table`
            (columns ``T``, ``scores_bytes``, ``qkv_bytes``).
        labels: the figure's words.
        mark_length: a T to mark with a dotted vertical line (GPT-2's context, 1024), or None.

    The y axis is labelled in KiB/MiB/GiB/TiB (powers of 1024, by ``labels.size_text``), the hover gives the
    exact size; the T axis writes its lengths with d3's group separator, in the reader's ``separators``.

    Returns:
        A figure with two line traces on log–log axes.
    """
    fig = go.Figure()
    hover = labels.hover.format(T="%{x:,}", size="%{customdata}")
    for column, name, colour in (("scores_bytes", labels.scores, PALETTE[1]), ("qkv_bytes", labels.qkv, PALETTE[0])):
        values = [float(v) for v in table[column]]
        fig.add_scatter(x=table["T"].tolist(), y=values, mode="lines+markers",
                        name=name, line=dict(color=colour, width=3),
                        customdata=[labels.size_text(v) for v in values],
                        hovertemplate=hover + "<extra>" + name + "</extra>")
    lo = min(float(table[c].min()) for c in ("scores_bytes", "qkv_bytes"))
    hi = max(float(table[c].max()) for c in ("scores_bytes", "qkv_bytes"))
    # powers of two 2^(step·k), the coarsest step that still gives at least four labels in the range (powers of
    # 1024 alone left two labels on a narrow range)
    for step in (10, 5, 2, 1):
        ticks = [2.0**e for e in range(0, 61, step) if lo / 2 <= 2.0**e <= hi * 2]
        if len(ticks) >= 4:
            break
    fig.update_xaxes(type="log", title_text=labels.length_axis, gridcolor="#eee", tickmode="array",
                     tickvals=table["T"].tolist(), tickformat=",d")
    fig.update_yaxes(type="log", title_text=labels.bytes_axis, gridcolor="#eee", tickmode="array", tickvals=ticks,
                     ticktext=[labels.size_text(t) for t in ticks])
    if mark_length is not None:
        fig.add_vline(x=mark_length, line=dict(color="#999", dash="dot"),
                      annotation_text=labels.mark.format(T=labels.count_text(mark_length)),
                      annotation_position="top left")
    fig.update_layout(legend=dict(orientation="h", y=-0.36, yanchor="top"), separators=labels.separators,
                      margin_b=70)
    return base_layout(fig, labels.title, 420, separators=labels.separators)
