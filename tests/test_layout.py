"""engine.layout: the logical->storage index map against PyTorch itself, and the page's helpers."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from engine import attention as A
from engine import chapter
from engine import layout as L


def _fresh_values(t: torch.Tensor) -> torch.Tensor:
    """Put 0, 1, 2, … in the storage of ``t`` so every cell holds its own index."""
    storage = L.storage_elements(t)
    storage.copy_(torch.arange(storage.numel(), dtype=t.dtype))
    return t


@st.composite
def strided_tensors(draw):
    """A small tensor, then a random permutation, optional slicing with steps, and optional transpose."""
    ndim = draw(st.integers(1, 4))
    shape = draw(st.lists(st.integers(1, 5), min_size=ndim, max_size=ndim))
    t = torch.zeros(shape, dtype=torch.float64)
    perm = draw(st.permutations(range(ndim)))
    t = t.permute(*perm)
    index = []
    for size in t.shape:
        start = draw(st.integers(0, size - 1))
        step = draw(st.integers(1, 3))
        index.append(slice(start, None, step))
    t = t[tuple(index)]
    if ndim >= 2 and draw(st.booleans()):
        a, b = draw(st.lists(st.integers(0, ndim - 1), min_size=2, max_size=2, unique=True))
        t = t.transpose(a, b)
    return t


@settings(max_examples=150, deadline=None)
@given(strided_tensors())
def test_index_map_matches_the_tensors_own_values(t):
    _fresh_values(t)
    cells = L.tensor_index_map(t)
    assert cells.shape == t.shape
    torch.testing.assert_close(cells.to(torch.float64), t, atol=0, rtol=0)


@settings(max_examples=150, deadline=None)
@given(strided_tensors())
def test_index_map_matches_as_strided(t):
    storage = torch.arange(L.layout_of(t).storage_size, dtype=torch.int64)
    expected = torch.as_strided(storage, t.shape, t.stride(), t.storage_offset())
    assert torch.equal(L.index_map(t.shape, t.stride(), t.storage_offset()), expected)


def test_seeded_permutations_of_a_4d_tensor():
    g = torch.Generator().manual_seed(0)
    for _ in range(50):
        shape = torch.randint(1, 6, (4,), generator=g).tolist()
        base = torch.arange(torch.tensor(shape).prod().item()).reshape(shape)
        perm = torch.randperm(4, generator=g).tolist()
        view = base.permute(*perm)
        assert L.tensor_index_map(view).tolist() == view.tolist()
        assert L.logical_order(view) == view.flatten().tolist()
        assert L.shares_storage(view, base)
        assert L.logical_order(view.contiguous()) == list(range(view.numel()))


def test_chapter_matrix_view_transpose_contiguous():
    m = torch.tensor([[1, 2, 3], [4, 5, 6]])
    assert L.logical_order(m) == [0, 1, 2, 3, 4, 5]
    viewed = m.view(3, 2)
    assert L.logical_order(viewed) == [0, 1, 2, 3, 4, 5] and L.shares_storage(viewed, m)
    assert L.layout_of(viewed).stride == (2, 1)
    mt = m.transpose(0, 1)
    assert L.logical_order(mt) == [0, 3, 1, 4, 2, 5]  # reads 1, 4, 2, 5, 3, 6
    assert L.layout_of(mt).stride == (1, 3) and not L.layout_of(mt).is_contiguous and L.shares_storage(mt, m)
    packed = mt.contiguous()
    assert not L.shares_storage(packed, m)
    assert L.storage_elements(packed).tolist() == [1, 4, 2, 5, 3, 6]
    assert L.storage_elements(mt).tolist() == [1, 2, 3, 4, 5, 6]


def test_slice_has_an_offset_and_storage_shows_skipped_cells():
    m = torch.arange(1, 7).view(2, 3)
    tail = m[..., 1:]
    lay = L.layout_of(tail)
    assert lay.storage_offset == 1 and lay.storage_size == 6 and lay.shape == (2, 2)
    assert L.logical_order(tail) == [1, 2, 4, 5]
    walk = L.memory_walk(tail)
    assert walk.grid_values.tolist() == [[2, 3], [5, 6]]
    assert walk.storage_values.tolist() == [1, 2, 3, 4, 5, 6]
    assert walk.order == [1, 2, 4, 5]


def test_view_on_transposed_gives_the_real_runtime_error():
    mt = torch.arange(1, 7).view(2, 3).T
    result, error = L.attempt(lambda: mt.view(6))
    assert result is None
    assert error.startswith("RuntimeError: view size is not compatible with input tensor's size and stride")
    result, error = L.attempt(lambda: mt.reshape(6))
    assert error is None and result.tolist() == [1, 4, 2, 5, 3, 6]


def test_recipes():
    m = torch.arange(1, 7).view(2, 3)
    steps = L.run_recipe(m, "transpose(d0, d1).view(new shape)", (6,))
    assert [s.code for s in steps] == ["M.transpose(0, 1)", "M.transpose(0, 1).view(6)"]
    assert steps[-1].tensor is None and "view size is not compatible" in steps[-1].error
    steps = L.run_recipe(m, "transpose(d0, d1).reshape(new shape)", (6,))
    assert steps[-1].error is None and not L.shares_storage(steps[-1].tensor, m)
    steps = L.run_recipe(m, "transpose(d0, d1).contiguous().view(new shape)", (3, 2))
    assert steps[-1].tensor.tolist() == [[1, 4], [2, 5], [3, 6]]
    steps = L.run_recipe(m, "view(new shape)", (4, 2))
    assert steps[-1].error.startswith("RuntimeError: shape '[4, 2]' is invalid")
    steps = L.run_recipe(m, "transpose(d0, d1)", (), dims=(0, 5))
    assert steps[-1].error.startswith("IndexError")
    steps = L.run_recipe(m, "reshape(new shape)", (-1,))
    assert steps[-1].tensor.shape == (6,) and L.shares_storage(steps[-1].tensor, m)
    assert L.logical_order(L.run_recipe(m, "[..., ::2] (every other column)")[-1].tensor) == [0, 2, 3, 5]
    with pytest.raises(ValueError, match="unknown recipe"):
        L.run_recipe(m, "flip", ())


@pytest.mark.parametrize("text, shape", [("3, 2", (3, 2)), ("(2, 3)", (2, 3)), ("6", (6,)), (" -1 , 2 ", (-1, 2)),
                                         ("1,2,3,1", (1, 2, 3, 1)), ("(6,)", (6,))])
def test_parse_shape(text, shape):
    assert L.parse_shape(text) == shape


@pytest.mark.parametrize("text", ["", "a, b", "3 2", "0, 6", "-1, -1", "1,1,1,1,1", "-2, 3"])
def test_parse_shape_rejects(text):
    with pytest.raises(ValueError):
        L.parse_shape(text)


def test_layout_table_marks_views_and_copies():
    m = torch.arange(6).view(2, 3)
    table = L.layout_table([("M", m), ("M.T", m.T), ("copy", m.T.contiguous())])
    assert table["memory"].tolist() == ["original storage", "shares M's storage", "own storage (a copy)"]
    assert table["stride"].tolist() == ["(3, 1)", "(1, 3)", "(2, 1)"]
    assert table["is_contiguous"].tolist() == [True, False, True]


def test_key_head_walk_follows_the_chapter_class():
    T, H, d_h = 3, 2, 2
    stages = L.key_head_walk(T, H, d_h)
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
        L.key_head_walk(*args)


def test_extreme_head_walk_stays_small():
    stages = L.key_head_walk(L.MAX_TOKENS, L.MAX_HEADS, L.MAX_HEAD_DIM)
    assert max(s.grid_heads.numel() for s in stages) == L.MAX_HEADS * L.MAX_TOKENS**2
    assert all((s.memory_heads >= 0).all() for s in stages)


def test_score_cost_grows_as_t_squared():
    table = L.score_cost_table(8, 12, 64, [128, 256, 1024])
    assert table["attn_scores bytes"].tolist() == [8 * 12 * 128**2 * 4, 8 * 12 * 256**2 * 4, 8 * 12 * 1024**2 * 4]
    assert table["attn_scores bytes"].iloc[1] == 4 * table["attn_scores bytes"].iloc[0]
    assert table["q, k, v bytes"].iloc[1] == 2 * table["q, k, v bytes"].iloc[0]
    assert L.score_tensor_bytes(8, 12, 1024) == 402_653_184
    assert L.human_bytes(402_653_184) == "384.0 MiB" and L.human_bytes(400) == "400 B"


def test_index_map_rejects_bad_input():
    with pytest.raises(ValueError):
        L.index_map((2, 3), (3,))
    with pytest.raises(ValueError):
        L.index_map((2, 3), (-1, 1))
    assert L.index_map((), ()).tolist() == 0


def test_chapter_operations_and_constants():
    m = L.chapter_matrix()
    assert m.tolist() == [list(r) for r in chapter.LAYOUT_MATRIX]
    ops = dict(L.chapter_operations(m))
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
    result = L.view_versus_reshape(L.chapter_matrix())
    assert result["error"].startswith("RuntimeError: view size is not compatible")
    assert result["reshape"].tolist() == result["contiguous_view"].tolist() == [1, 4, 2, 5, 3, 6]
    assert result["table"]["memory"].tolist() == ["original storage", "shares M's storage", "own storage (a copy)",
                                                  "own storage (a copy)"]
    with pytest.raises(ValueError):
        L.view_versus_reshape(torch.arange(3).view(1, 3))


@settings(max_examples=60, deadline=None)
@given(strided_tensors())
def test_reading_order_values_equal_flatten(t):
    _fresh_values(t)
    assert torch.equal(L.reading_order_values(t), t.flatten())
