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
in elements (not bytes) of the tensor's dtype.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import pandas as pd
import torch
from torch import Tensor

from engine import attention as A
from engine import chapter
from engine.rng import uses_global_rng

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
    for dim, (size, step) in enumerate(zip(shape, stride)):
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


def attempt(fn: Callable[[], Tensor]) -> tuple[Tensor | None, str | None]:
    """Run ``fn`` and return ``(result, None)``, or ``(None, message)`` if PyTorch raised.

    Used to show the real ``RuntimeError`` of ``.view()`` on a non-contiguous
    tensor, word for word, instead of a traceback.
    """
    try:
        return fn(), None
    except RuntimeError as err:
        return None, f"RuntimeError: {err}"


# ---------------------------------------------------------------------------
# The chapter's 2×3 matrix
# ---------------------------------------------------------------------------


def chapter_matrix() -> Tensor:
    """The chapter's matrix [[1, 2, 3], [4, 5, 6]] as a fresh int64 tensor of shape (2, 3)."""
    return torch.tensor(chapter.LAYOUT_MATRIX)


def chapter_operations(m: Tensor) -> list[tuple[str, Tensor]]:
    """The chapter's operations on a (2, 3) matrix ``m``, labelled by their code.

    Returns:
        ``[("M", m), ("M.view(3, 2)", …), ("M.transpose(0, 1)", …),
        ("M.transpose(0, 1).contiguous()", …), ("M.reshape(3, 2)", …),
        ("M.transpose(0, 1).reshape(6)", …)]``; the first three and the reshape
        of ``m`` share ``m``'s storage, the last two are copies.

    Raises:
        RuntimeError: if ``m`` does not have 6 elements (PyTorch's own error).
    """
    mt = m.transpose(0, 1)  # (2, 3) -> (3, 2), strides (3, 1) -> (1, 3)
    return [
        ("M", m),
        ("M.view(3, 2)", m.view(3, 2)),  # (2, 3) -> (3, 2), same cells
        ("M.transpose(0, 1)", mt),
        ("M.transpose(0, 1).contiguous()", mt.contiguous()),  # (3, 2), copied in reading order
        ("M.reshape(3, 2)", m.reshape(3, 2)),  # (2, 3) -> (3, 2), a view since m is contiguous
        ("M.transpose(0, 1).reshape(6)", mt.reshape(6)),  # (3, 2) -> (6,), must copy
    ]


def reading_order_values(t: Tensor) -> Tensor:
    """The storage cells of ``t`` read in logical order, via :func:`logical_order`: equals ``t.flatten()``."""
    return storage_elements(t)[tensor_index_map(t).flatten()]


def view_versus_reshape(m: Tensor) -> dict[str, object]:
    """Flatten the transpose of a 2-d ``m`` three ways: ``view`` (fails), ``reshape``, ``contiguous().view``.

    Returns:
        dict with ``error`` (the real ``RuntimeError`` text of ``m.T.view(-1)``),
        ``reshape`` and ``contiguous_view`` (both 1-d, equal values, own
        storage), and ``table``: :func:`layout_table` of m, m.T and the two results.

    Raises:
        ValueError: if ``m`` is not 2-d with at least 2 rows and 2 columns (then the
            transpose would be contiguous and ``view`` would not fail).
    """
    if m.dim() != 2 or min(m.shape) < 2:
        raise ValueError(f"need a 2-d matrix with at least 2 rows and columns, got shape {tuple(m.shape)}")
    mt = m.transpose(0, 1)  # (r, c) -> (c, r)
    _, error = attempt(lambda: mt.view(-1))
    reshaped = mt.reshape(-1)  # (c, r) -> (c·r,), a copy
    packed = mt.contiguous().view(-1)  # (c, r) -> (c·r,), copy first, then a view of the copy
    table = layout_table([("M", m), ("M.transpose(0, 1)", mt), ("….reshape(-1)", reshaped),
                          ("….contiguous().view(-1)", packed)])
    return {"error": error, "reshape": reshaped, "contiguous_view": packed, "table": table}


# ---------------------------------------------------------------------------
# Operations the reader can chain on a small tensor
# ---------------------------------------------------------------------------

#: Recipes offered on the page: name -> the steps they chain. Steps are
#: ("view", shape), ("reshape", shape), ("transpose", None), ("contiguous", None),
#: ("slice_from_1", None) and ("every_other", None); "transpose" swaps the two
#: dimensions chosen by the reader.
RECIPES: dict[str, tuple[str, ...]] = {
    "view(new shape)": ("view",),
    "reshape(new shape)": ("reshape",),
    "transpose(d0, d1)": ("transpose",),
    "transpose(d0, d1).contiguous()": ("transpose", "contiguous"),
    "transpose(d0, d1).view(new shape)": ("transpose", "view"),
    "transpose(d0, d1).reshape(new shape)": ("transpose", "reshape"),
    "transpose(d0, d1).contiguous().view(new shape)": ("transpose", "contiguous", "view"),
    "[..., 1:] (drop the first column)": ("slice_from_1",),
    "[..., ::2] (every other column)": ("every_other",),
}

_SHAPE_TEXT = re.compile(r"^\(?\s*(-?\d+\s*(,\s*-?\d+\s*)*),?\s*\)?$")


def parse_shape(text: str, max_dims: int = 4) -> tuple[int, ...]:
    """Read a shape typed as ``"3, 2"``, ``"(2, 3)"`` or ``"6"``; at most one ``-1``.

    Raises:
        ValueError: on anything else (letters, empty text, zero or negative
            sizes other than one -1, more than ``max_dims`` dimensions); the
            message says what was wrong.
    """
    match = _SHAPE_TEXT.match(text.strip())
    if not match:
        raise ValueError(f"“{text}” is not a shape; type whole numbers separated by commas, e.g. 3, 2")
    dims = tuple(int(p) for p in match.group(1).split(","))
    if len(dims) > max_dims:
        raise ValueError(f"at most {max_dims} dimensions here, got {len(dims)}")
    if any(d == 0 or d < -1 for d in dims) or dims.count(-1) > 1:
        raise ValueError(f"sizes must be positive (one -1 is allowed, it is inferred), got {dims}")
    return dims


@dataclass(frozen=True)
class Step:
    """One operation of a recipe and what came out.

    Attributes:
        code: the Python expression so far, e.g. ``"M.transpose(0, 1).view(3, 2)"``.
        tensor: the result, or None if PyTorch raised.
        error: the exception text (``"RuntimeError: …"``) or None.
    """

    code: str
    tensor: Tensor | None
    error: str | None


def run_recipe(
    base: Tensor, recipe: str, new_shape: Sequence[int] = (), dims: tuple[int, int] = (0, 1), name: str = "M"
) -> list[Step]:
    """Apply a recipe of :data:`RECIPES` to ``base`` step by step, stopping at the first error.

    Args:
        base: the starting tensor (any shape with at least one dimension).
        recipe: a key of :data:`RECIPES`.
        new_shape: target shape of ``view``/``reshape`` steps (may hold one -1).
        dims: the two dimensions a ``transpose`` swaps (negative counts from the end).
        name: what the starting tensor is called in the code strings.

    Returns:
        One :class:`Step` per operation performed (the last one may carry an
        error and no tensor). PyTorch's own RuntimeError/IndexError text is kept.

    Raises:
        ValueError: for an unknown recipe name, or a 0-d ``base``.
    """
    if recipe not in RECIPES:
        raise ValueError(f"unknown recipe {recipe!r}; choose one of {list(RECIPES)}")
    if base.dim() == 0:
        raise ValueError("the starting tensor needs at least one dimension")
    shape_text = ", ".join(str(s) for s in new_shape)
    steps: list[Step] = []
    current, code = base, name
    for op in RECIPES[recipe]:
        if op == "view":
            code, fn = f"{code}.view({shape_text})", (lambda t=current: t.view(*new_shape))
        elif op == "reshape":
            code, fn = f"{code}.reshape({shape_text})", (lambda t=current: t.reshape(*new_shape))
        elif op == "transpose":
            code, fn = f"{code}.transpose({dims[0]}, {dims[1]})", (lambda t=current: t.transpose(*dims))
        elif op == "contiguous":
            code, fn = f"{code}.contiguous()", (lambda t=current: t.contiguous())
        elif op == "slice_from_1":
            code, fn = f"{code}[..., 1:]", (lambda t=current: t[..., 1:])
        else:
            code, fn = f"{code}[..., ::2]", (lambda t=current: t[..., ::2])
        try:
            result, error = fn(), None
        except (RuntimeError, IndexError) as err:
            result, error = None, f"{type(err).__name__}: {err}"
        steps.append(Step(code, result, error))
        if result is None:
            break
        current = result
    return steps


def layout_table(named: Sequence[tuple[str, Tensor]], reference: Tensor | None = None) -> pd.DataFrame:
    """One row per tensor: shape, stride, storage offset, is_contiguous, storage cells, shared or copy.

    Args:
        named: (label, tensor) pairs, e.g. ``[("M", m), ("M.T", m.T)]``.
        reference: the tensor "shared storage" is judged against (default: the first).

    Returns:
        DataFrame with columns ``tensor``, ``shape``, ``stride``, ``storage_offset``,
        ``is_contiguous``, ``storage cells``, ``memory`` ("shares M's storage" or
        "own storage (a copy)"); shapes and strides as text like ``(3, 2)``.
    """
    if not named:
        return pd.DataFrame()
    ref_label, ref = (named[0] if reference is None else ("reference", reference))
    rows = []
    for label, t in named:
        lay = layout_of(t)
        same = shares_storage(t, ref)
        if t is ref:
            memory = "original storage"
        elif same:
            memory = f"shares {ref_label}'s storage"
        else:
            memory = "own storage (a copy)"
        rows.append(
            {
                "tensor": label,
                "shape": str(lay.shape),
                "stride": str(lay.stride),
                "storage_offset": lay.storage_offset,
                "is_contiguous": lay.is_contiguous,
                "storage cells": lay.storage_size,
                "memory": memory,
            }
        )
    return pd.DataFrame(rows)


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
# The keys of multi-head attention, stage by stage
# ---------------------------------------------------------------------------

#: Bounds of the head-walk controls, so its figure stays small.
MAX_TOKENS, MAX_HEADS, MAX_HEAD_DIM = 8, 4, 4


@dataclass(frozen=True)
class HeadStage:
    """One stage of the keys' path through multi-head attention.

    Attributes:
        title: what happened, e.g. ".transpose(1, 2)".
        code: the line of the chapter's MultiHeadAttention this stage is.
        layout: the real tensor's :class:`Layout` (b = 1).
        shares_previous: True when this stage reads the previous stage's storage.
        grid_heads: (rows, cols) int64 head of each logical element (b folded away,
            leading dims folded into rows).
        grid_cells: (rows, cols) int64 storage cell of each logical element.
        row_labels, col_labels: tick text of the grid.
        memory_heads: (storage cells,) head of the element stored in each cell.
        memory_order: (storage cells,) position in logical reading order of the
            element stored in each cell.
    """

    title: str
    code: str
    layout: Layout
    shares_previous: bool
    grid_heads: Tensor
    grid_cells: Tensor
    row_labels: list[str]
    col_labels: list[str]
    memory_heads: Tensor
    memory_order: Tensor


def _stage(title: str, code: str, t: Tensor, heads: Tensor, previous: Tensor | None, dim_names: tuple[str, ...]) -> HeadStage:
    """Describe tensor ``t`` (b = 1) whose element heads are ``heads`` (same shape)."""
    inner = t[0]  # (b=1, ...) -> (...)
    inner_heads = heads[0]
    cells = tensor_index_map(inner) + (t.storage_offset() - inner.storage_offset())
    n_cells = t.untyped_storage().nbytes() // t.element_size()
    flat_cells = cells.flatten()
    memory_heads = torch.full((n_cells,), -1, dtype=torch.int64)
    memory_heads[flat_cells] = inner_heads.flatten().to(torch.int64)
    memory_order = torch.full((n_cells,), -1, dtype=torch.int64)
    memory_order[flat_cells] = torch.arange(flat_cells.numel())
    cols = inner.shape[-1]
    lead = tuple(inner.shape[:-1])
    rows = math.prod(lead)
    if len(lead) == 1:
        row_labels = [f"{dim_names[0]}{i}" for i in range(lead[0])]
    else:
        row_labels = [f"{dim_names[0]}{a}·{dim_names[1]}{b}" for a in range(lead[0]) for b in range(lead[1])]
    col_labels = [f"{dim_names[-1]}{j}" for j in range(cols)]
    return HeadStage(
        title=title,
        code=code,
        layout=layout_of(t),
        shares_previous=previous is not None and shares_storage(t, previous),
        grid_heads=inner_heads.reshape(rows, cols).to(torch.int64),  # (..., cols) -> (rows, cols)
        grid_cells=cells.reshape(rows, cols),  # (..., cols) -> (rows, cols)
        row_labels=row_labels,
        col_labels=col_labels,
        memory_heads=memory_heads,
        memory_order=memory_order,
    )


@uses_global_rng
def key_head_walk(num_tokens: int, num_heads: int, head_dim: int, seed: int = 0) -> list[HeadStage]:
    """The keys (and scores, context) of one sequence through the chapter's head split and back.

    Follows ``MultiHeadAttention.forward`` of chapter ``003``: W_key(x) is
    (b, T, d_out); ``view`` makes it (b, T, H, d_h) on the same storage;
    ``transpose(1, 2)`` gives (b, H, T, d_h), still the same storage but no
    longer contiguous; ``queries @ keys.transpose(2, 3)`` writes new
    (b, H, T, T) scores grouped by head; the context (b, H, T, d_h) goes back
    with ``transpose(1, 2)``, ``contiguous()`` (a copy, token-major again) and
    ``view(b, T, d_out)``. Batch size b = 1; the layer is the chapter's
    :class:`engine.attention.MultiHeadAttention` with seeded random weights and
    inputs: the values do not matter here, only where each element sits.

    Args:
        num_tokens: T, 1 … :data:`MAX_TOKENS`.
        num_heads: H, 1 … :data:`MAX_HEADS`.
        head_dim: d_h, 1 … :data:`MAX_HEAD_DIM`; d_out = H · d_h.
        seed: seed of the random inputs and weights.

    Returns:
        Eight :class:`HeadStage` in order.

    Raises:
        ValueError: if a size is outside its bounds.
    """
    for label, value, top in (("num_tokens", num_tokens, MAX_TOKENS), ("num_heads", num_heads, MAX_HEADS),
                              ("head_dim", head_dim, MAX_HEAD_DIM)):
        if not 1 <= int(value) <= top:
            raise ValueError(f"{label} must be in [1, {top}], got {value}")
    T, H, d_h = int(num_tokens), int(num_heads), int(head_dim)
    d_out = H * d_h
    torch.manual_seed(seed)
    mha = A.MultiHeadAttention(d_out, d_out, context_length=T, dropout=0.0, num_heads=H)
    x = torch.randn(1, T, d_out)  # (b, T, d_in) with d_in = d_out
    head_of_feature = torch.arange(d_out) // d_h  # (d_out,), feature c belongs to head c // d_h

    with torch.no_grad():
        keys = mha.W_key(x)  # (b, T, d_in) -> (b, T, d_out)
        keys_heads = head_of_feature.expand(1, T, d_out)  # (b, T, d_out)
        keys_4d = keys.view(1, T, H, d_h)  # (b, T, d_out) -> (b, T, H, d_h)
        keys_4d_heads = keys_heads.reshape(1, T, H, d_h)  # (b, T, d_out) -> (b, T, H, d_h)
        keys_bh = keys_4d.transpose(1, 2)  # (b, T, H, d_h) -> (b, H, T, d_h)
        keys_bh_heads = keys_4d_heads.transpose(1, 2)  # (b, H, T, d_h)
        queries = mha.split_heads(mha.W_query(x))  # (b, T, d_out) -> (b, H, T, d_h)
        values = mha.split_heads(mha.W_value(x))  # (b, T, d_out) -> (b, H, T, d_h)
        attn_scores = queries @ keys_bh.transpose(2, 3)  # (b, H, T, d_h) @ (b, H, d_h, T) -> (b, H, T, T)
        scores_heads = torch.arange(H).view(1, H, 1, 1).expand(1, H, T, T)  # (b, H, T, T)
        _, attn_weights = mha(x, return_weights=True)  # (b, H, T, T), causal softmax of the scores
        context = attn_weights @ values  # (b, H, T, T) @ (b, H, T, d_h) -> (b, H, T, d_h)
        context_heads = torch.arange(H).view(1, H, 1, 1).expand(1, H, T, d_h)  # (b, H, T, d_h)
        back = context.transpose(1, 2)  # (b, H, T, d_h) -> (b, T, H, d_h)
        back_heads = context_heads.transpose(1, 2)  # (b, T, H, d_h)
        packed = back.contiguous()  # (b, T, H, d_h), a copy in logical order
        merged = packed.view(1, T, d_out)  # (b, T, H, d_h) -> (b, T, d_out)

    return [
        _stage("keys = W_key(x)", "keys = self.W_key(x)  # (b, T, d_out)", keys, keys_heads, None, ("t", "c")),
        _stage(".view(b, T, H, d_h)", "keys = keys.view(b, num_tokens, self.num_heads, self.head_dim)",
               keys_4d, keys_4d_heads, keys, ("t", "h", "d")),
        _stage(".transpose(1, 2)", "keys = keys.transpose(1, 2)  # (b, H, T, d_h)",
               keys_bh, keys_bh_heads, keys_4d, ("h", "t", "d")),
        _stage("attn_scores = queries @ keys.transpose(2, 3)", "attn_scores = queries @ keys.transpose(2, 3)",
               attn_scores, scores_heads, keys_bh, ("h", "q", "k")),
        _stage("context = attn_weights @ values", "context_vec = attn_weights @ values  # (b, H, T, d_h)",
               context, context_heads, attn_scores, ("h", "t", "d")),
        _stage("context.transpose(1, 2)", "context_vec = context_vec.transpose(1, 2)  # (b, T, H, d_h)",
               back, back_heads, context, ("t", "h", "d")),
        _stage(".contiguous()", "context_vec = context_vec.contiguous()", packed, back_heads, back, ("t", "h", "d")),
        _stage(".view(b, T, d_out)", "context_vec = context_vec.view(b, num_tokens, self.d_out)",
               merged, back_heads.reshape(1, T, d_out), packed, ("t", "c")),
    ]


# ---------------------------------------------------------------------------
# The T² cost of the score tensor
# ---------------------------------------------------------------------------


def score_tensor_bytes(batch: int, num_heads: int, num_tokens: int, element_size: int = 4) -> int:
    """Bytes of one (B, H, T, T) score (or weight) tensor: ``B · H · T² · element_size``."""
    return int(batch) * int(num_heads) * int(num_tokens) ** 2 * int(element_size)


def score_cost_table(batch: int, num_heads: int, head_dim: int, lengths: Sequence[int], element_size: int = 4) -> pd.DataFrame:
    """Bytes of the score tensor against the q/k/v tensors, for each sequence length T.

    Args:
        batch, num_heads, head_dim: B, H, d_h.
        lengths: the values of T.
        element_size: bytes per number (4 for float32, 2 for float16/bfloat16).

    Returns:
        DataFrame with ``T``, ``attn_scores bytes`` (B·H·T²·size, grows as T²)
        and ``q, k, v bytes`` (3·B·T·H·d_h·size, grows as T), and their ratio.
    """
    rows = []
    for T in lengths:
        scores = score_tensor_bytes(batch, num_heads, T, element_size)
        qkv = 3 * int(batch) * int(T) * int(num_heads) * int(head_dim) * int(element_size)
        rows.append({"T": int(T), "attn_scores bytes": scores, "q, k, v bytes": qkv, "scores / qkv": scores / qkv})
    return pd.DataFrame(rows)


def human_bytes(n: float) -> str:
    """``1536 -> "1.5 KiB"``, powers of 1024, one decimal (bytes shown whole)."""
    n = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{int(n)} B" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"
