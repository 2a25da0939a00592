"""Plotly figure builders (no Streamlit).

``engine.figures.core`` holds the builders every page shares (attention heatmap,
bar panels, 3-d vectors, the in-figure step slider); each essay section keeps its
own builders in ``engine.figures.<section>``.
"""

from engine.figures.core import (
    PALETTE,
    SIGNED_SCALE,
    WEIGHTS_SCALE,
    add_step_slider,
    attention_heatmap,
    base_layout,
    heatmap_trace,
    matrix_axes,
    step_bars,
    to_numpy,
    vectors_3d,
    weighted_sum_bars,
)

__all__ = [
    "PALETTE",
    "SIGNED_SCALE",
    "WEIGHTS_SCALE",
    "add_step_slider",
    "attention_heatmap",
    "base_layout",
    "heatmap_trace",
    "matrix_axes",
    "step_bars",
    "to_numpy",
    "vectors_3d",
    "weighted_sum_bars",
]
