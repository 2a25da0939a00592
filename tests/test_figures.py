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


def test_row_bars_keeps_order_and_text():
    fig = core.row_bars({"s": [3.0, 1.0]}, ["x", "x"])
    assert list(fig.layout.xaxis.ticktext) == ["x", "x"]
    assert list(fig.data[0].text) == ["3.0000", "1.0000"]


def test_vectors_3d_shape_check_and_highlight():
    fig = core.vectors_3d(torch.rand(4, 3), list("abcd"), highlight=2, extra={"z": [0.1, 0.2, 0.3]})
    assert len(fig.data) == 5
    assert fig.data[2].line.color == "#d62728"
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
