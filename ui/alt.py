"""Text alternatives of charts: what a chart shows and the values a sighted reader reads from it.

Each function returns one sentence in the reader's language (gettext) with every number in the reader's format
(:mod:`ui.numbers`), for ``st.plotly_chart(..., alt=...)``, which gives it to screen readers as the chart's
accessible name. Values inside a list are separated by " · " or " / ", never by a comma, which a French or
German reader would take for a decimal sign.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ui.i18n import _
from ui.numbers import num, significant


def _floats(values) -> list[float]:
    """``values`` (a tensor, an array or a sequence of numbers) as a flat list of floats."""
    flat = values.tolist() if hasattr(values, "tolist") else list(values)
    return [float(v) for v in flat]


def vector(values, decimals: int = 2) -> str:
    """A vector's values: "0,43 / 0,15 / 0,89"."""
    return " / ".join(num(v, decimals) for v in _floats(values))


def named(names: Sequence[str], values, decimals: int = 2) -> str:
    """Values each after its name: "Your 0,43 · journey 0,55"."""
    return " · ".join(f"{name} {num(v, decimals)}" for name, v in zip(names, _floats(values), strict=True))


def series(lines: Mapping[str, object], digits: int = 3) -> str:
    """Named series of values, each to ``digits`` significant digits: "torch.rand 0,0826 / 0,084 · nn.Linear 0,107"."""
    return " · ".join(f"{name} {' / '.join(significant(v, digits) for v in _floats(values))}"
                      for name, values in lines.items())


def paired(names: Sequence[str], first, second, digits: int = 3) -> str:
    """Two values after each name, to ``digits`` significant digits: "Your 0 / 0,123 · journey 0 / 0,0456"."""
    return " · ".join(f"{name} {significant(a, digits)} / {significant(b, digits)}"
                      for name, a, b in zip(names, _floats(first), _floats(second), strict=True))


def rows(matrix, row_names: Sequence[str], decimals: int = 2) -> str:
    """A matrix row by row: "Your: 0,95 / 1,50; journey: 1,50 / 2,71" (a (rows, cols) tensor or array)."""
    return "; ".join(f"{name}: {vector(row, decimals)}" for name, row in zip(row_names, matrix, strict=True))


def heatmap(title: str, matrix, row_names: Sequence[str], decimals: int = 2) -> str:
    """A heatmap of one (rows, cols) matrix: its title, its shape and its values row by row."""
    n_rows, n_cols = len(row_names), len(matrix[0]) if len(matrix) else 0
    return _("Heatmap “{title}”, {rows} × {cols}; row by row: {values}.").format(
        title=title, rows=n_rows, cols=n_cols, values=rows(matrix, row_names, decimals))


def heatmaps(panels: Mapping[str, object], row_names: Sequence[str], decimals: int = 2) -> str:
    """Several heatmaps side by side or stacked (title -> (rows, cols) matrix): each one's values row by row."""
    text = " ".join(_("“{title}”: {values}.").format(title=title, values=rows(matrix, row_names, decimals))
                    for title, matrix in panels.items())
    return _("Heatmaps, row by row ({rows}): {panels}").format(rows=" · ".join(row_names), panels=text)


def bars(panels: Sequence[tuple[str, Mapping[str, object]]], names: Sequence[str], decimals: int = 2) -> str:
    """Bar charts, one panel per (title, {series: one value per name}): each series' values after their names."""
    text = " ".join(
        _("“{title}”: {series}.").format(title=title, series="; ".join(
            f"{label}: {named(names, values, decimals)}" for label, values in series.items()))
        for title, series in panels)
    return _("Bar chart. {panels}").format(panels=text)


def vectors(title: str, points: Mapping[str, object], decimals: int = 2) -> str:
    """A 3-d chart of vectors (name -> 3 coordinates): each vector's coordinates after its name."""
    return _("3-d chart “{title}”, one arrow per vector (x / y / z): {values}.").format(
        title=title, values=" · ".join(f"{name} {vector(p, decimals)}" for name, p in points.items()))
