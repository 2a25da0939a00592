"""AppTest: page 4 (views/dropout.py) checks the chapter's seed-123 matrices and drives every control."""

import numpy as np
import pytest

from engine import chapter
from tests.plotly_json import badges, figures, texts

PAGE = "views/dropout.py"
P_LABELS = [f"{0.1 * i:.1f}" for i in range(10)]


def slider_figure(at):
    return next(f for f in figures(at) if f["layout"].get("sliders"))


def cell_values(trace):
    """The numbers written in a heatmap's cells (what the reader sees)."""
    return np.array([[float(v) for v in row] for row in trace["text"]])


def test_chapter_matrices_checked_green(fresh):
    green = badges(fresh, "green")
    assert any("dropout(ones(6, 6)), p = 0.5: matches the chapter" in b for b in green)
    assert any("dropout(causal attn_weights), p = 0.5: matches the chapter" in b for b in green)
    assert not badges(fresh, "red") and not badges(fresh, "gray")
    sums = next(t for t in texts(fresh) if t.startswith("At p = 0.5, seed 123: row sums of dropout(ones)"))
    assert "[8.0, 4.0, 10.0, 6.0, 6.0, 8.0]" in sums


def test_slider_figure_one_step_per_p_and_chapter_step(fresh):
    fig = slider_figure(fresh)
    slider = fig["layout"]["sliders"][0]
    assert [s["label"] for s in slider["steps"]] == P_LABELS
    assert slider["active"] == 5
    assert len(fig["data"]) == 4 * 10
    ones, ones_sums, weights, weight_sums = fig["data"][20:24]  # the p = 0.5 step
    np.testing.assert_allclose(cell_values(ones), np.array(chapter.DROPOUT_ONES))
    np.testing.assert_allclose(cell_values(weights), np.array(chapter.DROPOUT_CAUSAL), atol=5e-5)
    np.testing.assert_allclose(cell_values(ones_sums).ravel(), np.array(chapter.DROPOUT_ONES).sum(axis=1))
    np.testing.assert_allclose(cell_values(weight_sums).ravel(), np.array(chapter.DROPOUT_CAUSAL).sum(axis=1), atol=2e-4)
    for s, step in enumerate(slider["steps"]):
        visible = step["args"][0]["visible"]
        assert [i for i, v in enumerate(visible) if v] == list(range(4 * s, 4 * s + 4))
    # p = 0 keeps every weight; p = 0.9 scales survivors by 10
    assert set(cell_values(fig["data"][0]).ravel()) == {1.0}
    assert set(cell_values(fig["data"][36]).ravel()) <= {0.0, 10.0}


@pytest.mark.parametrize("seed", [0, 99_999])
def test_other_seed_differs_as_expected(at, seed):
    at.number_input(key="do_seed").set_value(seed).run()
    assert not at.exception
    gray = badges(at, "gray")
    assert any("dropout(ones(6, 6)), p = 0.5: differs from the chapter, as expected" in b for b in gray)
    assert not badges(at, "red")
    assert any(t.startswith(f"At p = 0.5, seed {seed}:") for t in texts(at))


@pytest.mark.parametrize("p", [0.1, 0.5, 0.9])
def test_mean_over_masks_converges(at, p):
    at.select_slider(key="do_mean_p").set_value(p).run()
    assert not at.exception
    line = next(t for t in texts(at) if t.startswith("After 2,000 masks: max |mean − weights| = **"))
    final = float(line.split("**")[1])
    sigma = float(line.split("/ √n = ")[1].split(")")[0])
    assert final < 4 * sigma
    if p == 0.1:
        assert final < 0.02
    fig = next(f for f in figures(at) if f["layout"]["xaxis"].get("type") == "log")
    assert len(fig["data"][0]["x"]) == 2000
    assert f"p = {p:.1f}" in fig["data"][0]["name"]


@pytest.mark.parametrize("p", [0.0, 0.5, 0.9])
def test_train_vs_eval(at, p):
    at.select_slider(key="do_layer_p").set_value(p).run()
    assert not at.exception
    green = badges(at, "green")
    assert any("eval(): deterministic, and identical to the same layer with p = 0" in b for b in green)
    assert "max |eval() output − output with p = 0| = 0.0e+00" in texts(at)
    if p == 0.0:
        assert any("nothing is dropped" in b for b in badges(at, "gray"))
    else:
        assert any("two calls on the same input give different weights" in b for b in badges(at, "blue"))
    fig = next(f for f in figures(at) if [a["text"] for a in f["layout"].get("annotations", [])][:3]
               == ["train(), call 1", "train(), call 2", "eval()"])
    eval_rows = cell_values(fig["data"][2]).sum(axis=1)
    np.testing.assert_allclose(eval_rows, np.ones(6), atol=4e-3)  # cells show 3 decimals
