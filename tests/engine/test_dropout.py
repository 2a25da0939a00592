"""Engine tests for section 4 (dropout): the chapter's seed-123 matrices, scaling, expectation, train vs eval."""

import json

import pytest
import torch

from engine import attention as A
from engine import chapter
from engine.figures import dropout as F
from engine.sections import dropout as D


def close(got, want):
    torch.testing.assert_close(torch.as_tensor(got, dtype=torch.float32), torch.tensor(want), atol=5e-5, rtol=0)


@pytest.fixture(scope="module")
def weights():
    return D.chapter_causal_weights(A.chapter_inputs())


def test_chapter_causal_weights(weights):
    close(weights, chapter.CAUSAL_WEIGHTS)


def test_seed_123_p_half_reproduces_the_chapter(weights):
    # The chapter notes dropout streams may differ across platforms; on this CPU build they match.
    pair = D.dropout_pair(weights, chapter.DROPOUT_P, chapter.DROPOUT_SEED)
    close(pair.ones, chapter.DROPOUT_ONES)
    close(pair.weights, chapter.DROPOUT_CAUSAL)
    assert pair.scale == 2.0 and pair.kept == int((pair.ones > 0).sum()) and pair.p == 0.5


@pytest.mark.parametrize("p", D.P_VALUES)
def test_survivors_are_scaled_and_share_the_mask(weights, p):
    pair = D.dropout_pair(weights, p, seed=7)
    kept = pair.ones > 0
    torch.testing.assert_close(pair.ones[kept], torch.full((int(kept.sum()),), 1 / (1 - p)))
    assert (pair.ones[~kept] == 0).all()
    torch.testing.assert_close(pair.weights, weights * pair.ones)
    torch.testing.assert_close(pair.ones_row_sums, pair.ones.sum(dim=-1))
    # the causal zeros stay zero
    assert torch.equal(torch.triu(pair.weights, diagonal=1), torch.zeros(6, 6))
    if p == 0.0:
        assert torch.equal(pair.weights, weights)


def test_device_mask_compares_with_the_cpu(weights):
    cpu = D.dropout_pair(weights, 0.5, seed=123)
    same = D.device_mask(weights, 0.5, 123, torch.device("cpu"), cpu)
    assert same.device == "cpu" and same.same_as_cpu and torch.equal(same.ones, cpu.ones)
    other = D.device_mask(weights, 0.5, 124, torch.device("cpu"), cpu)
    assert not other.same_as_cpu


def test_dropout_pair_rejects_bad_rates(weights):
    for p in (-0.1, 1.0):
        with pytest.raises(ValueError):
            D.dropout_pair(weights, p, seed=0)


def test_mean_over_2000_masks_is_within_0_02(weights):
    result = D.dropout_expectation(weights, p=0.1, n_masks=2000, seed=0)
    table = result.table
    assert len(table) == 2000 and result.masks == 2000
    assert result.final_error == table["max_abs_error"].iloc[-1] < 0.02
    assert result.final_error < table["max_abs_error"].iloc[0]
    assert result.error_after_10 == table["max_abs_error"].iloc[9]
    assert result.final_sigma == table["sigma_over_sqrt_n"].iloc[-1]


@pytest.mark.parametrize("p", [0.3, 0.5, 0.9])
def test_mean_error_shrinks_like_one_over_sqrt_n(weights, p):
    result = D.dropout_expectation(weights, p=p, n_masks=2000, seed=1)
    # within four standard errors of the noisiest cell (weight 1.0 in row 0)
    assert result.final_error < 4 * result.final_sigma
    early = result.table["max_abs_error"].iloc[:10].mean()
    assert result.final_error < early / 3


@pytest.mark.parametrize("n_masks", [0, 10_001])
def test_expectation_bounds_the_number_of_masks(weights, n_masks):
    with pytest.raises(ValueError):
        D.dropout_expectation(weights, p=0.5, n_masks=n_masks)


def test_train_vs_eval(weights):
    result = D.train_vs_eval(A.chapter_inputs(), p=0.5, seed=123)
    assert result.train_calls_differ
    assert result.eval_calls_equal
    assert result.eval_equals_no_dropout
    assert result.max_abs_diff_eval_vs_p0 == 0.0
    torch.testing.assert_close(result.eval_1.sum(dim=-1), torch.ones(6))
    assert not torch.allclose(result.train_row_sums, torch.ones(6))
    # with p = 0, train mode is deterministic too
    assert not D.train_vs_eval(A.chapter_inputs(), p=0.0, seed=123).train_calls_differ


SLIDER = F.SliderLabels("ones", "weights", "sum", "p={p} scale={scale} kept={kept}/{total}", "p = ")


def test_dropout_slider_figure_has_one_step_per_p(weights):
    sweep = D.dropout_sweep(weights, seed=chapter.DROPOUT_SEED)
    fig = F.dropout_slider_figure(sweep, list(A.CHAPTER_TOKENS), SLIDER, active_p=0.5)
    spec = json.loads(fig.to_json())
    steps = spec["layout"]["sliders"][0]["steps"]
    assert [s["label"] for s in steps] == [F.step_label(p) for p in D.P_VALUES] == [f"{p:.1f}" for p in D.P_VALUES]
    assert spec["layout"]["sliders"][0]["active"] == 5
    assert spec["layout"]["sliders"][0]["currentvalue"]["prefix"] == "p = "
    assert spec["layout"]["title"]["text"] == f"p=0.5 scale=2.000 kept={sweep[0.5].kept}/36"
    assert len(fig.data) == 4 * len(D.P_VALUES)
    step5 = fig.data[4 * 5]
    assert step5.visible is True and fig.data[0].visible is False
    assert [row[:3] for row in step5.text[:1]] == [["2.00", "2.00", "0.00"]]
    with pytest.raises(ValueError):
        F.dropout_slider_figure(sweep, list(A.CHAPTER_TOKENS), SLIDER, active_p=0.55)


def test_dropout_figures_follow_the_readers_separators(weights):
    """Issue 24: a French figure writes 0,5 and 2,00 in its labels, cells and title, and says so to Plotly."""
    sweep = D.dropout_sweep(weights, seed=chapter.DROPOUT_SEED)
    french = F.SliderLabels("ones", "weights", "sum", "p={p} scale={scale}", "p = ", separators=",\u202f")
    fig = F.dropout_slider_figure(sweep, list(A.CHAPTER_TOKENS), french, active_p=0.5)
    assert fig.layout.separators == ",\u202f"
    assert [s.label for s in fig.layout.sliders[0].steps][5] == "0,5"
    assert fig.layout.title.text == "p=0,5 scale=2,000"
    assert list(fig.data[4 * 5].text[0][:2]) == ["2,00", "2,00"]


def test_other_figures(weights):
    expectation = D.dropout_expectation(weights, p=0.5, n_masks=50)
    convergence = F.convergence_figure(expectation, 0.5, F.ConvergenceLabels("err {p}", "guide", "{n}: {value}",
                                                                             "n", "error"))
    assert [trace.name for trace in convergence.data] == ["err 0.5", "guide"]
    modes = F.train_eval_figure(D.train_vs_eval(A.chapter_inputs(), 0.5, 1), list(A.CHAPTER_TOKENS),
                                F.TrainEvalLabels("a", "b", "c", "{token}|{sum}"))
    assert len(modes.data) == 3
    assert [a.text for a in modes.layout.annotations] == ["a", "b", "c"]
    assert list(modes.layout.yaxis3.ticktext)[0] == f"{A.CHAPTER_TOKENS[0]}|1.00"
