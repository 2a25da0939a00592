"""engine.layout: the logical->storage index map against PyTorch itself, storage, reading order, sizes."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

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


def test_index_map_rejects_bad_input():
    with pytest.raises(ValueError):
        L.index_map((2, 3), (3,))
    with pytest.raises(ValueError):
        L.index_map((2, 3), (-1, 1))
    assert L.index_map((), ()).tolist() == 0


@settings(max_examples=60, deadline=None)
@given(strided_tensors())
def test_reading_order_values_equal_flatten(t):
    _fresh_values(t)
    assert torch.equal(L.reading_order_values(t), t.flatten())


def test_human_bytes_uses_iec_symbols():
    assert L.human_bytes(402_653_184) == "384.0 MiB" and L.human_bytes(400) == "400 B"
    assert L.human_bytes(1536) == "1.5 KiB" and L.human_bytes(1024**5) == "1024.0 TiB"
