"""Tensor memory layout: where each logical element of a tensor lives in its storage.

Source: chapter ``003`` ("Mécanismes d'attention"), the multi-head section's
explanation of ``.view()``, ``.transpose()`` and ``.contiguous()`` on a 2×3
matrix, and the keys' path (b, T, d_out) -> (b, T, H, d_h) -> (b, H, T, d_h).

A strided tensor is a flat storage plus three numbers per view: ``shape``,
``stride`` (how many storage cells one step along each dimension skips) and
``storage_offset`` (the cell of element (0, 0, …)). Logical element
``(i_0, …, i_{n-1})`` lives in cell ``storage_offset + Σ_k i_k · stride[k]``
(:func:`index_map`). ``view`` and ``transpose`` only change those numbers;
``contiguous()`` and a ``reshape`` that cannot be a view copy the data into a
new storage whose cells follow the logical order.

Everything here works on CPU tensors of any dtype; storage indices are counted
in elements (not bytes) of the tensor's dtype. This module is generic: the
memory-layout page's experiments (the chapter's matrix, the reader's recipes,
the keys' head walk, the T² cost) live in :mod:`engine.sections.memory_layout`.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

# ---------------------------------------------------------------------------
# Introspection
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Layout:
    """Shape, strides and storage facts of one tensor.

    Attributes:
        shape: logical size of each dimension.
        stride: storage cells skipped by one step along each dimension (elements).
        storage_offset: storage cell of the first logical element.
        is_contiguous: ``Tensor.is_contiguous()``: reading in logical (row-major)
            order walks the storage cell after cell.
        numel: number of logical elements.
        storage_size: number of elements the underlying storage holds.
        storage_ptr: address of the storage (``untyped_storage().data_ptr()``);
            two tensors with the same value share their data.
        element_size: bytes per element.
    """

    shape: tuple[int, ...]
    stride: tuple[int, ...]
    storage_offset: int
    is_contiguous: bool
    numel: int
    storage_size: int
    storage_ptr: int
    element_size: int


def layout_of(t: Tensor) -> Layout:
    """The :class:`Layout` of ``t`` (any dtype, CPU or not; nothing is copied)."""
    storage = t.untyped_storage()
    return Layout(
        shape=tuple(t.shape),
        stride=tuple(t.stride()),
        storage_offset=int(t.storage_offset()),
        is_contiguous=bool(t.is_contiguous()),
        numel=int(t.numel()),
        storage_size=int(storage.nbytes() // t.element_size()),
        storage_ptr=int(storage.data_ptr()),
        element_size=int(t.element_size()),
    )


def shares_storage(a: Tensor, b: Tensor) -> bool:
    """True when ``a`` and ``b`` read the same memory (same ``untyped_storage().data_ptr()``)."""
    return a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()


def index_map(shape: Sequence[int], stride: Sequence[int], storage_offset: int = 0) -> Tensor:
    """Storage cell of every logical element: ``offset + Σ_k i_k · stride[k]``.

    Pure arithmetic on the three numbers that describe a strided view; it does
    not need the tensor itself.

    Args:
        shape: logical sizes (may be empty for a scalar, may contain 0).
        stride: one non-negative stride per dimension, in elements.
        storage_offset: cell of element (0, …, 0).

    Returns:
        int64 tensor of shape ``shape``; entry ``idx`` is the storage cell that
        logical element ``idx`` is read from.

    Raises:
        ValueError: if ``shape`` and ``stride`` differ in length, or a size,
            stride or the offset is negative.
    """
    shape = tuple(int(s) for s in shape)
    stride = tuple(int(s) for s in stride)
    if len(shape) != len(stride):
        raise ValueError(f"shape {shape} and stride {stride} have different lengths")
    if any(s < 0 for s in shape) or any(s < 0 for s in stride) or storage_offset < 0:
        raise ValueError(f"sizes, strides and offset must be non-negative: {shape}, {stride}, {storage_offset}")
    cells = torch.full(shape, int(storage_offset), dtype=torch.int64)
    for dim, (size, step) in enumerate(zip(shape, stride, strict=True)):
        along = torch.arange(size, dtype=torch.int64) * step  # (size,)
        view_shape = [1] * len(shape)
        view_shape[dim] = size
        cells = cells + along.view(view_shape)  # (size,) -> (1, …, size, …, 1), broadcast over the others
    return cells


def tensor_index_map(t: Tensor) -> Tensor:
    """:func:`index_map` of ``t``'s own shape, stride and storage offset (int64, shape ``t.shape``)."""
    return index_map(t.shape, t.stride(), t.storage_offset())


def storage_elements(t: Tensor) -> Tensor:
    """The whole storage under ``t`` as a 1-d tensor of ``t.dtype``, cell 0 first (a view, no copy).

    Cells no logical element of ``t`` reads (e.g. the column a slice skipped)
    are included: this is the memory, not the tensor.
    """
    n = t.untyped_storage().nbytes() // t.element_size()
    return torch.as_strided(t, (n,), (1,), 0)  # storage cells 0 … n-1, in memory order


def logical_order(t: Tensor) -> list[int]:
    """Storage cells in the order a row-major walk over ``t``'s logical indices reads them.

    ``[0, 1, 2, …]`` (shifted by the offset) exactly when ``t`` is contiguous.
    """
    return tensor_index_map(t).flatten().tolist()


def reading_order_values(t: Tensor) -> Tensor:
    """The storage cells of ``t`` read in logical order, via :func:`logical_order`: equals ``t.flatten()``."""
    return storage_elements(t)[tensor_index_map(t).flatten()]


@dataclass(frozen=True)
class MemoryWalk:
    """What the memory-walk figure draws for one tensor.

    Attributes:
        grid_values: (rows, cols) float64 values in logical layout: leading
            dimensions folded into rows, the last dimension across.
        grid_cells: (rows, cols) int64 storage cell of each logical element.
        row_labels: one label per grid row (the leading indices, e.g. "(1, 0)").
        storage_values: (n,) float64 contents of every storage cell.
        order: storage cells in logical reading order (length = numel).
    """

    grid_values: Tensor
    grid_cells: Tensor
    row_labels: list[str]
    storage_values: Tensor
    order: list[int]


def memory_walk(t: Tensor) -> MemoryWalk:
    """Fold ``t`` into a 2-d logical grid and pair every element with its storage cell.

    Args:
        t: tensor of 1 to 4 dimensions with numerical values.

    Returns:
        A :class:`MemoryWalk`; a 1-d tensor becomes one row.

    Raises:
        ValueError: for a 0-d tensor or more than 4 dimensions.
    """
    if not 1 <= t.dim() <= 4:
        raise ValueError(f"memory_walk needs 1 to 4 dimensions, got shape {tuple(t.shape)}")
    cols = t.shape[-1]
    lead = tuple(t.shape[:-1])
    rows = math.prod(lead) if lead else 1
    cells = tensor_index_map(t).reshape(rows, cols)  # (..., cols) -> (rows, cols), a copy of the map
    values = t.detach().to(torch.float64).reshape(rows, cols)  # (..., cols) -> (rows, cols)
    if len(lead) > 1:
        labels = [str(idx) for idx in itertools.product(*(range(s) for s in lead))]
    elif lead:
        labels = [str(i) for i in range(lead[0])]
    else:
        labels = ["0"]
    return MemoryWalk(
        grid_values=values,
        grid_cells=cells,
        row_labels=labels,
        storage_values=storage_elements(t.detach()).to(torch.float64).clone(),
        order=cells.flatten().tolist(),
    )


# ---------------------------------------------------------------------------
# Sizes
# ---------------------------------------------------------------------------


def human_bytes(n: float) -> str:
    """``1536 -> "1.5 KiB"``: a byte count with an IEC unit symbol (B, KiB, MiB, GiB, TiB), powers of 1024.

    One decimal (bytes shown whole). The unit symbols are the same in every language, so the
    result is shown as it is.
    """
    n = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{int(n)} B" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"
