"""Engine tests for section 1 (simplified self-attention): edited inputs, numerics, both Jacobians, loops."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from engine import attention as A
from engine import chapter
from engine.sections import self_attention as sections


def test_chapter_table_round_trips_to_the_chapter_inputs():
    edit = sections.inputs_from_table(sections.chapter_table())
    assert edit.is_chapter and edit.empty_cells == 0
    torch.testing.assert_close(edit.inputs, A.chapter_inputs())


def test_empty_and_text_cells_take_the_chapter_value_and_big_values_are_clipped():
    table = sections.chapter_table()
    table["dim_0"] = table["dim_0"].astype(object)
    table.loc[0, "dim_0"] = None
    table.loc[1, "dim_0"] = "abc"
    table.loc[2, "dim_1"] = 1e9
    edit = sections.inputs_from_table(table)
    assert edit.empty_cells == 2
    assert edit.inputs[0, 0] == A.chapter_inputs()[0, 0] and edit.inputs[1, 0] == A.chapter_inputs()[1, 0]
    assert edit.inputs[2, 1] == sections.EMBEDDING_BOUND
    assert not edit.is_chapter


def test_inputs_from_table_rejects_a_wrong_shape():
    with pytest.raises(ValueError):
        sections.inputs_from_table(sections.chapter_table().drop(columns=["dim_2"]))
    with pytest.raises(ValueError):
        sections.inputs_from_table(sections.chapter_table().iloc[:3])


def test_walkthrough_reproduces_the_chapter_and_rejects_bad_queries():
    steps = sections.query_walkthrough(A.chapter_inputs(), 1)
    assert chapter.matches(steps.naive_weights, chapter.SIMPLE_NAIVE_WEIGHTS_JOURNEY)
    assert chapter.matches(steps.context_vec, chapter.SIMPLE_CONTEXT_JOURNEY)
    with pytest.raises(ValueError):
        sections.query_walkthrough(A.chapter_inputs(), 6)
    with pytest.raises(ValueError):
        sections.query_walkthrough(A.chapter_inputs()[0], 0)


@pytest.mark.parametrize("scale, dtype, broken", [(1.0, torch.float32, 0), (100.0, torch.float32, 6),
                                                  (10.0, torch.float16, 6), (150.0, torch.float64, 0)])
def test_softmax_numerics_counts_the_broken_naive_weights(scale, dtype, broken):
    scores = sections.query_walkthrough(A.chapter_inputs(), 1).attn_scores
    numerics = sections.softmax_numerics(scores, scale, dtype)
    assert list(numerics.table.columns) == list(sections.NUMERICS_COLUMNS)
    naive = torch.tensor(numerics.table["naive_softmax"].to_numpy())
    assert numerics.naive_broken == int((~torch.isfinite(naive)).sum())
    assert (numerics.naive_broken > 0) == (broken > 0)
    assert numerics.stable_finite
    assert abs(numerics.table["stable_softmax"].sum() - 1) < 1e-2
    assert (numerics.overflow, numerics.underflow) == sections.exp_limits(dtype)


def test_exp_limits_of_float32():
    overflow, underflow = sections.exp_limits(torch.float32)
    assert torch.isinf(torch.exp(torch.tensor(overflow * 1.001)))
    assert torch.isfinite(torch.exp(torch.tensor(overflow * 0.999)))
    assert torch.exp(torch.tensor(underflow * 1.01)) == 0


def test_softmax_jacobian_equals_autograd():
    check = sections.jacobian_check(sections.query_walkthrough(A.chapter_inputs(), 1).attn_scores)
    assert check.closed_form.shape == (6, 6) and check.max_abs_diff < 1e-12
    torch.testing.assert_close(check.closed_form.sum(dim=0), torch.zeros(6, dtype=torch.float64))


def test_naive_jacobian_equals_autograd_and_depends_on_the_sum():
    scores = sections.query_walkthrough(A.chapter_inputs(), 1).attn_scores
    check = sections.naive_jacobian_check(scores)
    assert check is not None and check.max_abs_diff < 1e-12
    # rows i: (δ_ij − w_i)/Σx, so each column sums to (1 − Σ_i w_i)/Σx = 0
    torch.testing.assert_close(check.closed_form.sum(dim=0), torch.zeros(6, dtype=torch.float64))
    # the same weights from scores ten times larger: a Jacobian ten times smaller (the softmax's changes otherwise)
    torch.testing.assert_close(sections.naive_jacobian(10 * scores), check.closed_form / 10)
    total = float(scores.double().sum())
    torch.testing.assert_close(check.closed_form[0, 0], (1 - scores[0].double() / total) / total)


@settings(max_examples=30, deadline=None)
@given(st.lists(st.floats(0.01, 100.0), min_size=1, max_size=8))
def test_naive_jacobian_matches_autograd_for_any_positive_scores(values):
    check = sections.naive_jacobian_check(torch.tensor(values, dtype=torch.float64))
    assert check is not None
    torch.testing.assert_close(check.closed_form, check.autograd)


def test_naive_jacobian_needs_positive_scores():
    scores = torch.tensor([1.0, -0.5, 2.0])
    assert sections.naive_jacobian_check(scores) is None
    assert sections.naive_jacobian_check(torch.tensor([1.0, 0.0])) is None
    with pytest.raises(ValueError):
        sections.naive_jacobian(scores)
    with pytest.raises(ValueError):
        sections.naive_jacobian(torch.ones(2, 2))


def test_loops_equal_matmul():
    every = sections.loop_vs_matmul(A.chapter_inputs())
    assert every.max_abs_diff < 1e-6
    assert chapter.matches(every.context_vec, chapter.SIMPLE_ALL_CONTEXT)
    torch.testing.assert_close(every.loop_context, every.context_vec)
