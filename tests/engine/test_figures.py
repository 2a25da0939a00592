"""engine.figures.core: matrices read like printed tensors; non-finite values never break a chart."""

import math

import numpy as np
import plotly.graph_objects as go
import pytest
import torch

from engine.figures import core


def test_heatmap_row_zero_on_top_with_values_and_token_ticks():
    w = torch.tensor([[1.0, 0.0], [0.25, 0.75]])
    fig = core.attention_heatmap(w, ["a", "b"])
    assert fig.layout.yaxis.autorange == "reversed"
    assert list(fig.layout.yaxis.ticktext) == ["a", "b"]
    trace = fig.data[0]
    assert trace.text[1][0] == "0.2500" and trace.text[0][0] == "1.0000"
    assert list(trace.y) == [0, 1]


def test_repeated_tokens_stay_separate():
    fig = core.attention_heatmap(torch.eye(3), ["月", "月", "明"])
    assert list(fig.data[0].x) == [0, 1, 2]
    assert list(fig.layout.xaxis.ticktext) == ["月", "月", "明"]


def test_nonfinite_cells_are_gaps_with_text():
    w = torch.tensor([[float("nan"), float("-inf")], [0.5, float("inf")]])
    trace = core.attention_heatmap(w).data[0]
    assert trace.text[0][0] == "nan" and trace.text[0][1] == "-inf" and trace.text[1][1] == "inf"
    z = trace.z
    assert math.isnan(z[0][0]) and math.isnan(z[1][1]) and z[1][0] == 0.5


def test_heatmap_rejects_non_matrix():
    with pytest.raises(ValueError, match="2-d"):
        core.attention_heatmap(torch.ones(3))


def step_panels(fig) -> list[tuple[float, float]]:
    """The y domains of a step_bars figure's panels, top panel first."""
    return [tuple(fig.layout[f"yaxis{'' if i == 0 else i + 1}"].domain) for i in range(len(fig.layout.annotations))]


def test_step_bars_one_figure_panels_top_to_bottom_sharing_the_tokens():
    fig = core.step_bars([("scores", {"s": [3.0, -1.0]}), ("weights", {"a": [0.5, 0.5], "b": [0.9, 0.1]})],
                         ["x", "x"], colors={"s": "#D55E00"})
    assert [t.name for t in fig.data] == ["s", "a", "b"]
    assert [t.yaxis for t in fig.data] == ["y", "y2", "y2"] and [t.xaxis for t in fig.data] == ["x", "x2", "x2"]
    assert list(fig.layout.xaxis.ticktext) == list(fig.layout.xaxis2.ticktext) == ["x", "x"]  # repeated tokens kept
    assert list(fig.data[0].text) == ["3.0000", "\u22121.0000"]
    assert fig.data[0].marker.color == "#D55E00" and fig.data[1].marker.color != fig.data[2].marker.color
    (top_low, top_high), (low, high) = step_panels(fig)
    assert 0 <= low < high < top_low < top_high <= 1  # panel 1 above panel 2, no overlap
    # a one-series panel needs no legend entry; a grouped one writes its values upright, a phone's bars are narrow
    assert fig.data[0].showlegend is False and fig.data[1].showlegend is True
    # one legend line per grouped series, inside the figure: two names do not fit one line on a phone
    assert fig.layout.legend.orientation == "v" and fig.layout.legend.y == 0
    single = core.step_bars([("scores", {"s": [3.0, -1.0]})], ["x", "x"])
    assert single.layout.showlegend is False
    assert fig.layout.height - single.layout.height > 2 * core.STEP_LEGEND_PX
    assert fig.data[0].textangle == 0 and fig.data[1].textangle == -90
    # room for the negative bar's value under it, and for the largest value above it
    assert fig.layout.yaxis.range[0] < -1.0 and fig.layout.yaxis.range[1] > 3.0
    # fixed margins: Plotly never grows them (and never draws the figure twice)
    assert fig.layout.margin.autoexpand is False
    assert fig.layout.xaxis.automargin is False and fig.layout.yaxis2.automargin is False
    assert all(0 <= a.y <= 1 for a in fig.layout.annotations)


def test_step_bars_keeps_nan_and_rejects_bad_input():
    fig = core.step_bars([("t", {"s": [float("nan"), 1.0]})], ["a", "b"])
    assert math.isnan(fig.data[0].y[0]) and fig.data[0].text[0] == "nan"
    with pytest.raises(ValueError, match="at least one panel"):
        core.step_bars([], ["a"])
    with pytest.raises(ValueError, match="needs 2 values"):
        core.step_bars([("t", {"s": [1.0, 2.0, 3.0]})], ["a", "b"])


def test_vectors_3d_shape_check_and_highlight():
    fig = core.vectors_3d(torch.rand(4, 3), list("abcd"), highlight=2, extra={"z": [0.1, 0.2, 0.3]})
    assert len(fig.data) == 5
    widths = [trace.line.width for trace in fig.data[:4]]
    assert widths[2] > max(widths[:2] + widths[3:])
    # one colour per vector, each named in the legend; the extra vector shares the first vector's colour
    assert len({trace.line.color for trace in fig.data[:4]}) == 4 and fig.layout.showlegend
    assert fig.data[4].line.color == fig.data[0].line.color and fig.data[4].line.dash == "dash"
    with pytest.raises(ValueError, match=r"\(N, 3\)"):
        core.vectors_3d(torch.rand(4, 2), list("abcd"))


def test_step_slider_one_step_per_value_and_visibility():
    fig = go.Figure()
    fig.add_scatter(y=[0, 1])  # always visible
    for s in range(3):
        fig.add_bar(y=[s])
        fig.add_bar(y=[s + 1])
    core.add_step_slider(fig, ["a", "b", "c"], traces_per_step=2, prefix="p = ", always_visible=1, active=1)
    steps = fig.layout.sliders[0].steps
    assert [s.label for s in steps] == ["a", "b", "c"]
    assert steps[2].args[0]["visible"] == [True, False, False, False, False, True, True]
    assert [t.visible for t in fig.data] == [None, False, False, True, True, False, False]
    with pytest.raises(ValueError, match="expected"):
        core.add_step_slider(fig, ["a"], traces_per_step=2, prefix="")


def test_weighted_sum_bars_stack_to_the_context_vector():
    inputs = torch.tensor([[1.0, -2.0], [0.5, 4.0], [-1.0, 0.0]])  # (T=3, d_in=2)
    weights = torch.tensor([0.2, 0.5, 0.3])
    fig = core.weighted_sum_bars(inputs, weights, ["a", "b", "c"], ["d0", "d1"], total_name="z")
    parts = np.array([trace.y for trace in fig.data[:-1]])
    np.testing.assert_allclose(parts, (weights[:, None] * inputs).numpy(), atol=1e-6)
    np.testing.assert_allclose(fig.data[-1].y, (weights @ inputs).numpy(), atol=1e-6)
    assert fig.layout.barmode == "relative" and fig.data[-1].name == "z"
    with pytest.raises(ValueError, match="weighted_sum_bars"):
        core.weighted_sum_bars(inputs, weights[:2], ["a", "b", "c"], ["d0", "d1"])


def head_walk_labels():
    from engine.figures.memory_layout import HeadWalkLabels

    return HeadWalkLabels(storage_title="storage", head="head {h}", grid_hover="{row} {col} {head} {cell}",
                          storage_hover="cell {cell}: head {head}, reading position {position}",
                          stage="{title} {shape} {stride} {contiguity} {storage}", contiguous="c",
                          not_contiguous="nc", same_storage="same", new_storage="new", cells="cells {first}–{last}",
                          cell_axis="cell within the row", slider_prefix="stage ")


@pytest.mark.parametrize("n, width", [(1, 1), (6, 6), (10, 10), (11, 8), (16, 8), (64, 8), (65, 16), (256, 16)])
def test_head_walk_strip_rows_of_eight_while_its_cells_carry_two_digits(n, width):
    """At 390 px a row of 16 cells leaves about 15 px a cell, too narrow for two digits at the figures' font: a
    strip whose cells carry two-digit numbers has rows of 8; one-digit numbers fit one row, and past
    ``TEXT_CELLS`` the cells carry no number and keep rows of 16."""
    from engine.figures import memory_layout as F

    assert F.strip_width(n) == width
    assert F.NUMBERED_STRIP_WIDTH == 8 and F.STRIP_WIDTH == 16 and F.TEXT_CELLS == 64


@pytest.mark.parametrize("T, H, d_h", [(4, 2, 2), (2, 1, 2), (8, 4, 4), (4, 4, 4)])
def test_head_walk_strip_rows_hover_and_ticks_follow_the_width(T, H, d_h):
    """Every stage's strip: rows of ``strip_width`` cells, numbers written exactly up to ``TEXT_CELLS`` cells (so
    never two-digit numbers in rows of 16), each cell's hover naming its own storage cell and each row's tick its
    cells' range; the panel is tall enough for the stage with the most rows."""
    from engine.figures import memory_layout as F
    from engine.sections.memory_layout import key_head_walk

    stages = key_head_walk(T, H, d_h)
    fig = F.head_walk_figure(stages, H, head_walk_labels())
    steps = fig.layout.sliders[0].steps
    for k, stage in enumerate(stages):
        n = stage.memory_heads.numel()
        width = F.strip_width(n)
        strip = fig.data[2 * k + 1]
        rows = math.ceil(n / width)
        assert len(strip.z) == rows and all(len(row) == width for row in strip.z)
        numbered = strip.texttemplate == "%{text}"
        assert numbered == (n <= F.TEXT_CELLS)
        if numbered and n > 10:
            assert width == F.NUMBERED_STRIP_WIDTH
        flat = [c for row in strip.customdata for c in row]
        assert flat == list(range(rows * width))
        texts = [x for row in strip.text for x in row][:n]
        assert sorted(int(x) for x in texts) == list(range(n))  # each reading position once
        layout = steps[k].args[1]
        assert layout["xaxis2.range"] == [-0.5, width - 0.5]
        assert layout["yaxis2.ticktext"] == [f"cells {r * width}–{min(n, (r + 1) * width) - 1}" for r in range(rows)]
    assert "cell %{customdata}: head %{z}, reading position %{text}" in fig.data[1].hovertemplate
