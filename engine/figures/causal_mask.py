"""Figures of section 3 (causal mask): the two masking routes, the leakage test, triu masks.

Built on :mod:`engine.figures.core`; no Streamlit. Matrices read like the
printed tensors (row 0 on top, values in the cells, ``-inf`` written out).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import plotly.graph_objects as go

from engine.figures.core import (
    PALETTE,
    SEPARATORS,
    SIGNED_SCALE,
    WEIGHTS_SCALE,
    app_layout,
    attention_heatmap,
)
from engine.sections.causal_mask import Leakage, TwoWays

#: Two colours for a 0/1 mask: visible (0) light, hidden (1) dark.
MASK_SCALE = [[0.0, "#f3f6fa"], [1.0, "#5b6b80"]]
#: The neutral colour that outlines a row of NaN (an intended demonstration, not an error).
NAN_OUTLINE = "#5b6b80"


@dataclass(frozen=True)
class LeakageLabels:
    """The words of :func:`leakage_figure`, in the reader's language.

    Attributes:
        causal, no_mask: legend names of the two bar series.
        perturbed: the note beside the perturbed token's row.
        x_title, y_title: axis titles (the change; the output rows).
        separators: Plotly's ``layout.separators`` of the reader's language.
        value_format: writes a bar's value in the page's scientific style; ``None``: ``3,00e-08`` with the
            separators' decimal sign.
        colon: what joins a hover's label to its value, in the reader's typography (``"\u202f: "`` in French).
    """

    causal: str
    no_mask: str
    perturbed: str
    x_title: str
    y_title: str
    separators: str = SEPARATORS
    value_format: Callable[[float], str] | None = None
    colon: str = ": "


def two_ways_panels(result: TwoWays, tokens: Sequence[str], panel_titles: Sequence[str],
                    separators: str = SEPARATORS, colon: str = ": ") -> list[go.Figure]:
    """The two routes' six matrices (route 1: softmax, × tril, ÷ row sums; route 2: scores, −∞ mask, softmax) as
    six figures, one heatmap each.

    A page puts them in columns, which stack on a phone: in one 2 x 3 figure the panels' titles, ticks and
    cell numbers overlapped at phone width.

    Args:
        result: the result of :func:`engine.sections.causal_mask.mask_two_ways`.
        tokens: the T token labels.
        panel_titles: the six titles in the reader's language, route 1 (mask after the softmax) then route 2.
        separators: Plotly's ``layout.separators`` of the reader's language.
        colon: what joins a hover's label to its value, in the reader's typography (``"\u202f: "`` in French).

    Returns:
        Six figures with one (T, T) heatmap each, row 0 on top, the panel title as the figure's title.

    Raises:
        ValueError: unless there are six panel titles.
    """
    if len(panel_titles) != 6:
        raise ValueError(f"two_ways_panels needs 6 panel titles, got {len(panel_titles)}")
    tokens = list(tokens)
    matrices = (
        (result.attn_weights, WEIGHTS_SCALE),
        (result.masked_simple, WEIGHTS_SCALE),
        (result.masked_simple_norm, WEIGHTS_SCALE),
        (result.attn_scores, SIGNED_SCALE),
        (result.masked_scores, SIGNED_SCALE),
        (result.attn_weights_causal, WEIGHTS_SCALE),
    )
    out = []
    for (matrix, scale), title in zip(matrices, panel_titles, strict=True):
        zmin, zmax = (0.0, 1.0) if scale == WEIGHTS_SCALE else (None, None)
        fig = attention_heatmap(matrix, tokens, tokens, title=title, colorscale=scale, zmin=zmin, zmax=zmax,
                                height=380, separators=separators, colon=colon)
        fig.update_traces(showscale=False)
        out.append(fig)
    return out


def leakage_figure(leak: Leakage, tokens: Sequence[str], token_index: int, labels: LeakageLabels) -> go.Figure:
    """Per output row, the largest change of the context vector when one token is perturbed.

    Horizontal bars, one pair per output row (rows top to bottom as in the matrices), each value written at
    its bar's end: upright bars on a phone were too narrow for their values, which Plotly shrank to 3 px.

    Args:
        leak: the result of :func:`engine.sections.causal_mask.leakage_test`.
        tokens: the T token labels.
        token_index: the perturbed token (shaded).
        labels: legend names and titles in the reader's language.

    Returns:
        Grouped horizontal bars (causal vs no mask), one group per output row.
    """
    rows = list(range(len(tokens)))
    ticks = [f"{i} · {t}" for i, t in enumerate(tokens)]
    sep = labels.separators
    written = labels.value_format or (lambda v: f"{v:.2e}".replace(".", sep[0]))
    data, reach = [], 0.0
    for k, (column, name) in enumerate((("max_diff_causal", labels.causal), ("max_diff_full", labels.no_mask))):
        values = leak.table[column].to_numpy()
        reach = max(reach, float(values.max(initial=0.0)))
        data.append(dict(
            type="bar", orientation="h", y=rows, x=values.tolist(), name=name,
            marker_color=PALETTE[0] if k == 0 else "#8c8c8c",
            text=["0" if v == 0 else written(float(v)) for v in values],
            textposition="outside", textfont=dict(size=11), constraintext="none", cliponaxis=False,
            customdata=ticks, hovertemplate="%{customdata}" + labels.colon + "%{x:.3g}<extra>" + name + "</extra>",
        ))
    layout = app_layout(None, 90 + 44 * len(tokens), separators=sep)
    return go.Figure(data=data, layout=dict(
        layout, barmode="group",
        # room right of the longest bar for its value
        xaxis=dict(title=dict(text=labels.x_title), gridcolor="#eee", range=[0, 1.45 * (reach or 1.0)]),
        yaxis=dict(tickmode="array", tickvals=rows, ticktext=ticks, autorange="reversed",
                   title=dict(text=labels.y_title)),
        shapes=[dict(type="rect", xref="paper", x0=0, x1=1, y0=token_index - 0.5, y1=token_index + 0.5,
                     fillcolor="#ffdd57", opacity=0.25, line_width=0, layer="below")],
        annotations=[dict(x=1, xref="paper", xanchor="right", y=token_index - 0.5, yanchor="bottom",
                          text=labels.perturbed, showarrow=False, font=dict(size=12))],
        # the legend above the bars: under them it ran into the axis title on a phone
        legend=dict(orientation="h", x=0, y=1.02, yanchor="bottom"),
        margin=dict(layout["margin"], t=60, b=60),
    ))


def mask_heatmap(
    mask, tokens: Sequence[str], title: str | None = None, row_title: str | None = None, col_title: str | None = None,
    separators: str = SEPARATORS, colon: str = ": ",
) -> go.Figure:
    """A 0/1 mask (1 = hidden) as a two-colour matrix with the values written in.

    Args:
        mask: (T, T) tensor/array of 0/1 (or bool).
        tokens: the T token labels.
        title, row_title, col_title: in the reader's language (e.g. "query (row)", "key (column)").
        separators: Plotly's ``layout.separators`` of the reader's language.
        colon: what joins a hover's label to its value, in the reader's typography (``"\u202f: "`` in French).

    Returns:
        One heatmap, row 0 on top, its column labels and margins as :func:`attention_heatmap` sets them.
    """
    fig = attention_heatmap(mask, list(tokens), title=title, colorscale=MASK_SCALE, zmin=0, zmax=1, decimals=0,
                            row_title=row_title, col_title=col_title, separators=separators, colon=colon)
    return fig.update_traces(showscale=False)


def masked_row_figure(
    attn_weights,
    tokens: Sequence[str],
    nan_rows: Sequence[int],
    title: str | None = None,
    nan_label: str | None = None,
    row_title: str | None = None,
    col_title: str | None = None,
    separators: str = SEPARATORS,
    colon: str = ": ",
) -> go.Figure:
    """Attention weights in which whole rows may be NaN: those cells are written "nan" and the row outlined.

    The NaN row is the page's intended demonstration, so it is drawn in a neutral colour,
    not as an error: its cells are left uncoloured (a heatmap cannot colour NaN) with "nan"
    written in each, a dashed outline marks the row, and its tick label gains ``nan_label``.

    Args:
        attn_weights: (T, T) weights, NaN allowed.
        tokens: the T token labels.
        nan_rows: the rows to outline (those holding a NaN).
        title, nan_label, row_title, col_title: in the reader's language.
        separators: Plotly's ``layout.separators`` of the reader's language.
        colon: what joins a hover's label to its value, in the reader's typography (``"\u202f: "`` in French).

    Returns:
        One heatmap, row 0 on top, plus one outline per NaN row; the cells write 3 decimals (four ran into
        each other in a phone's or a column's narrow cells).
    """
    tokens = list(tokens)
    fig = attention_heatmap(attn_weights, tokens, title=title, zmax=1.0, decimals=3, row_title=row_title,
                            col_title=col_title, separators=separators, colon=colon)
    # no colour bar: the cells write their values, and a phone's cells need its width
    fig.update_traces(showscale=False)
    for row in nan_rows:
        fig.add_shape(type="rect", x0=-0.5, x1=len(tokens) - 0.5, y0=row - 0.5, y1=row + 0.5,
                      line=dict(color=NAN_OUTLINE, width=2, dash="dash"))
    if nan_label:
        ticks = [f"{token} · {nan_label}" if i in nan_rows else token for i, token in enumerate(tokens)]
        fig.update_yaxes(ticktext=ticks)
    return fig
