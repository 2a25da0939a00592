"""engine.sections.memory_layout: the chapter's matrix, recipes and bounded shapes, the head walk, T² cost."""

import pytest
import torch

from engine import attention as A
from engine import chapter
from engine import layout as L
from engine.sections import memory_layout as S


def test_view_on_transposed_gives_the_real_runtime_error():
    mt = torch.arange(1, 7).view(2, 3).T
    result, error = S.attempt(lambda: mt.view(6))
    assert result is None
    assert error.startswith("RuntimeError: view size is not compatible with input tensor's size and stride")
    result, error = S.attempt(lambda: mt.reshape(6))
    assert error is None and result.tolist() == [1, 4, 2, 5, 3, 6]


def test_recipes():
    m = torch.arange(1, 7).view(2, 3)
    steps = S.run_recipe(m, "transpose_view", (6,))
    assert [s.code for s in steps] == ["M.transpose(0, 1)", "M.transpose(0, 1).view(6)"]
    assert steps[-1].tensor is None and "view size is not compatible" in steps[-1].error
    steps = S.run_recipe(m, "transpose_reshape", (6,))
    assert steps[-1].error is None and not L.shares_storage(steps[-1].tensor, m)
    steps = S.run_recipe(m, "transpose_contiguous_view", (3, 2))
    assert steps[-1].tensor.tolist() == [[1, 4], [2, 5], [3, 6]]
    steps = S.run_recipe(m, "view", (4, 2))
    assert steps[-1].error.startswith("RuntimeError: shape '[4, 2]' is invalid")
    steps = S.run_recipe(m, "transpose", (), dims=(0, 5))
    assert steps[-1].error.startswith("IndexError")
    steps = S.run_recipe(m, "reshape", (-1,))
    assert steps[-1].tensor.shape == (6,) and L.shares_storage(steps[-1].tensor, m)
    assert L.logical_order(S.run_recipe(m, "every_other")[-1].tensor) == [0, 2, 3, 5]
    with pytest.raises(ValueError, match="unknown recipe"):
        S.run_recipe(m, "flip", ())


@pytest.mark.parametrize("text, shape", [("3, 2", (3, 2)), ("(2, 3)", (2, 3)), ("6", (6,)), (" -1 , 2 ", (-1, 2)),
                                         ("1,2,3,1", (1, 2, 3, 1)), ("(6,)", (6,))])
def test_parse_shape(text, shape):
    assert S.parse_shape(text) == shape


@pytest.mark.parametrize("text, reason", [
    ("", "empty"), ("   ", "empty"), ("a, b", "not_a_shape"), ("3 2", "not_a_shape"), ("3.0, 2", "not_a_shape"),
    ("0, 6", "not_positive"), ("-2, 3", "not_positive"), ("-0", "not_positive"), ("-1, -1", "two_inferred"),
    ("1,1,1,1,1", "too_many_dims"), ("1," * 19 + "1", "too_many_dims"),
    ("99999999999999999999", "too_large"), ("9" * 5000, "too_long"), ("-99999999999999999999, 2", "too_large"),
    ("49", "too_large"), ("7, 7", "too_large"), ("-1, 49", "too_large"), ("100", "too_large"),
    ("٣, ٢", "not_a_shape"), ("３, ２", "not_a_shape"), ("2，3", "not_a_shape"), ("2; 3", "not_a_shape"),
    ("1e3", "not_a_shape"), ("0x10", "not_a_shape"), ("[2, 3]", "not_a_shape"),
])
def test_parse_shape_refuses_with_a_reason(text, reason):
    with pytest.raises(S.ShapeError) as refused:
        S.parse_shape(text)
    assert refused.value.reason == reason
    assert refused.value.reason in S.SHAPE_ERRORS
    assert isinstance(refused.value, ValueError)


def test_parse_shape_bounds_and_params():
    assert S.parse_shape("48") == (48,) and S.parse_shape("2, 2, 2, 6") == (2, 2, 2, 6)
    assert S.parse_shape("-1, 48") == (-1, 48)
    with pytest.raises(S.ShapeError) as refused:
        S.parse_shape("1, 2, 3, 4, 5")
    assert refused.value.params == {"limit": S.MAX_DIMS, "count": 5}
    with pytest.raises(S.ShapeError) as refused:
        S.parse_shape("-1, 6", allow_infer=False)
    assert refused.value.reason == "no_inferred"
    with pytest.raises(S.ShapeError) as refused:
        S.parse_shape("8, 8")
    assert refused.value.reason == "too_large" and refused.value.params == {"limit": S.MAX_ELEMENTS}


def test_shape_or_default():
    assert S.shape_or_default("3, 2", (2, 3)) == ((3, 2), None)
    shape, error = S.shape_or_default("99999999999999999999", (2, 3))
    assert shape == (2, 3) and error.reason == "too_large"


@pytest.mark.parametrize("shape", [(), (0,), (7, 7), (1, 1, 1, 1, 1), (99999999999999999999,)])
def test_explore_refuses_unbounded_shapes(shape):
    with pytest.raises(ValueError):
        S.explore(shape, "view", (-1,), (0, 1))


def test_explore():
    run = S.explore((2, 3), "transpose", (-1,), (0, 1))
    assert run.codes == ("M.transpose(0, 1)",) and run.errors == ()
    assert run.shown_code == "M.transpose(0, 1)" and run.order == (0, 3, 1, 4, 2, 5)
    assert run.table["memory"].tolist() == ["original", "shared"]
    assert run.walk.order == list(run.order)
    failed = S.explore((2, 3), "view", (4, 2), (0, 1))
    assert failed.shown_code == "M" and failed.order == tuple(range(6)) and len(failed.errors) == 1
    assert failed.errors[0].startswith("RuntimeError: shape '[4, 2]' is invalid")


def test_chapter_layout():
    result = S.chapter_layout()
    assert result.view_3_2 == [list(r) for r in chapter.LAYOUT_VIEW_3_2]
    assert result.transposed == [list(r) for r in chapter.LAYOUT_TRANSPOSED]
    assert result.storage == list(chapter.LAYOUT_STORAGE)
    assert result.reading == list(chapter.LAYOUT_TRANSPOSED_READING_ORDER)
    assert result.table["memory"].tolist() == ["original", "shared", "shared", "copy", "shared", "copy"]


def test_head_walk_table():
    table = S.head_walk_table(S.key_head_walk(3, 2, 2))
    assert list(table.columns) == ["stage", "shape", "stride", "is_contiguous", "shares_previous"]
    assert table["shares_previous"].tolist() == [False, True, True, False, False, True, False, True]


@pytest.mark.parametrize("element_size", [2, 4, 8])
def test_score_cost(element_size):
    cost = S.score_cost(8, 12, 64, element_size)
    assert cost.scores_short == 8 * 12 * S.SHORT_T**2 * element_size
    assert cost.scores_long == 8 * 12 * S.LONG_T**2 * element_size
    assert cost.qkv_long == 3 * 8 * S.LONG_T * 12 * 64 * element_size
    assert cost.growth == pytest.approx(cost.token_growth**2) and cost.token_growth == 8
    assert cost.table["T"].tolist() == list(S.LENGTHS)
    with pytest.raises(ValueError):
        S.score_cost(0, 12, 64, 4)


def test_layout_table_marks_views_and_copies():
    m = torch.arange(6).view(2, 3)
    table = S.layout_table([("M", m), ("M.T", m.T), ("copy", m.T.contiguous())])
    assert table["memory"].tolist() == ["original", "shared", "copy"]
    assert table["stride"].tolist() == ["(3, 1)", "(1, 3)", "(2, 1)"]
    assert table["is_contiguous"].tolist() == [True, False, True]


def test_key_head_walk_follows_the_chapter_class():
    T, H, d_h = 3, 2, 2
    stages = S.key_head_walk(T, H, d_h)
    assert [s.layout.shape for s in stages] == [(1, 3, 4), (1, 3, 2, 2), (1, 2, 3, 2), (1, 2, 3, 3), (1, 2, 3, 2),
                                               (1, 3, 2, 2), (1, 3, 2, 2), (1, 3, 4)]
    assert [s.layout.is_contiguous for s in stages] == [True, True, False, True, True, False, True, True]
    assert [s.shares_previous for s in stages] == [False, True, True, False, False, True, False, True]
    keys, viewed, split = stages[0], stages[1], stages[2]
    # view keeps every element in its cell; the transpose reads cells out of order
    assert viewed.grid_cells.flatten().tolist() == list(range(12))
    assert split.grid_cells.flatten().tolist() == [0, 1, 4, 5, 8, 9, 2, 3, 6, 7, 10, 11]
    # memory before the copy: token-major with heads interleaved; the scores are grouped by head
    assert keys.memory_heads.tolist() == [0, 0, 1, 1] * 3
    assert stages[3].memory_heads.tolist() == [0] * 9 + [1] * 9
    assert split.grid_heads[:3].unique().tolist() == [0] and split.grid_heads[3:].unique().tolist() == [1]
    # contiguous() packs the context back token-major, as the keys were
    assert stages[6].memory_heads.tolist() == keys.memory_heads.tolist()
    assert stages[5].memory_order.tolist() == [0, 1, 4, 5, 8, 9, 2, 3, 6, 7, 10, 11]


def test_key_head_walk_split_equals_split_heads():
    torch.manual_seed(0)
    mha = A.MultiHeadAttention(6, 6, context_length=4, dropout=0.0, num_heads=3)
    keys = torch.randn(1, 4, 6)
    manual = keys.view(1, 4, 3, 2).transpose(1, 2)  # what key_head_walk does
    assert torch.equal(manual, mha.split_heads(keys)) and manual.stride() == mha.split_heads(keys).stride()


@pytest.mark.parametrize("args", [(0, 1, 1), (9, 1, 1), (2, 5, 1), (2, 2, 0), (2, 2, 5)])
def test_key_head_walk_bounds(args):
    with pytest.raises(ValueError, match="must be in"):
        S.key_head_walk(*args)


def test_extreme_head_walk_stays_small():
    stages = S.key_head_walk(S.MAX_TOKENS, S.MAX_HEADS, S.MAX_HEAD_DIM)
    assert max(s.grid_heads.numel() for s in stages) == S.MAX_HEADS * S.MAX_TOKENS**2
    assert all((s.memory_heads >= 0).all() for s in stages)


def test_score_cost_grows_as_t_squared():
    table = S.score_cost_table(8, 12, 64, [128, 256, 1024])
    assert table["scores_bytes"].tolist() == [8 * 12 * 128**2 * 4, 8 * 12 * 256**2 * 4, 8 * 12 * 1024**2 * 4]
    assert table["scores_bytes"].iloc[1] == 4 * table["scores_bytes"].iloc[0]
    assert table["qkv_bytes"].iloc[1] == 2 * table["qkv_bytes"].iloc[0]
    assert S.score_tensor_bytes(8, 12, 1024) == 402_653_184


def test_chapter_operations_and_constants():
    m = S.chapter_matrix()
    assert m.tolist() == [list(r) for r in chapter.LAYOUT_MATRIX]
    ops = dict(S.chapter_operations(m))
    assert ops["M.view(3, 2)"].tolist() == [list(r) for r in chapter.LAYOUT_VIEW_3_2]
    mt = ops["M.transpose(0, 1)"]
    assert mt.tolist() == [list(r) for r in chapter.LAYOUT_TRANSPOSED]
    assert L.storage_elements(mt).tolist() == list(chapter.LAYOUT_STORAGE)
    assert L.reading_order_values(mt).tolist() == list(chapter.LAYOUT_TRANSPOSED_READING_ORDER)
    shared = {label: L.shares_storage(t, m) for label, t in ops.items()}
    assert shared == {"M": True, "M.view(3, 2)": True, "M.transpose(0, 1)": True,
                      "M.transpose(0, 1).contiguous()": False, "M.reshape(3, 2)": True,
                      "M.transpose(0, 1).reshape(6)": False}


def test_view_versus_reshape():
    result = S.view_versus_reshape(S.chapter_matrix())
    assert result.error.startswith("RuntimeError: view size is not compatible")
    assert result.reshape.tolist() == result.contiguous_view.tolist() == [1, 4, 2, 5, 3, 6]
    assert result.table["memory"].tolist() == ["original", "shared", "copy", "copy"]
    with pytest.raises(ValueError):
        S.view_versus_reshape(torch.arange(3).view(1, 3))


