"""Section 6, memory layout: the experiments behind the page.

Source: chapter ``003`` ("Mécanismes d'attention"), the multi-head section's
explanation of ``.view()``, ``.transpose()`` and ``.contiguous()`` on a 2×3
matrix, and the keys' path (b, T, d_out) -> (b, T, H, d_h) -> (b, H, T, d_h)
in ``MultiHeadAttention.forward``; the T² size of the score tensor.

The generic introspection (:class:`engine.layout.Layout`, index maps, shared
storage, the memory walk) is :mod:`engine.layout`; this module runs the page's
experiments with it. Everything a reader types (shapes) is parsed and bounded
here, before any tensor is allocated.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import pandas as pd
import torch
from torch import Tensor

from engine import attention as A
from engine import chapter
from engine.layout import (
    Layout,
    MemoryWalk,
    layout_of,
    logical_order,
    memory_walk,
    reading_order_values,
    shares_storage,
    storage_elements,
    tensor_index_map,
)
from engine.rng import uses_global_rng

# ---------------------------------------------------------------------------
# The chapter's 2×3 matrix
# ---------------------------------------------------------------------------


def attempt(fn: Callable[[], Tensor]) -> tuple[Tensor | None, str | None]:
    """Run ``fn`` and return ``(result, None)``, or ``(None, message)`` if PyTorch raised.

    Used to show the real ``RuntimeError`` of ``.view()`` on a non-contiguous
    tensor, word for word, instead of a traceback.
    """
    try:
        return fn(), None
    except RuntimeError as err:
        return None, f"RuntimeError: {err}"


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


def layout_table(named: Sequence[tuple[str, Tensor]], reference: Tensor | None = None) -> pd.DataFrame:
    """One row per tensor: shape, stride, storage offset, is_contiguous, storage cells, shared or copy.

    Args:
        named: (label, tensor) pairs, e.g. ``[("M", m), ("M.T", m.T)]``.
        reference: the tensor "shared storage" is judged against (default: the first).

    Returns:
        DataFrame with columns ``tensor``, ``shape``, ``stride`` (text like ``(3, 2)``),
        ``storage_offset``, ``is_contiguous``, ``storage_cells`` (elements the storage holds)
        and ``memory``: ``"original"`` (the reference itself),
        ``"shared"`` (reads the reference's storage) or ``"copy"`` (its own storage).
    """
    if not named:
        return pd.DataFrame()
    ref = named[0][1] if reference is None else reference
    rows = []
    for label, t in named:
        lay = layout_of(t)
        memory = "original" if t is ref else "shared" if shares_storage(t, ref) else "copy"
        rows.append({
            "tensor": label,
            "shape": str(lay.shape),
            "stride": str(lay.stride),
            "storage_offset": lay.storage_offset,
            "is_contiguous": lay.is_contiguous,
            "storage_cells": lay.storage_size,
            "memory": memory,
        })
    return pd.DataFrame(rows)


@dataclass(frozen=True)
class ChapterLayout:
    """The chapter's 2×3 matrix after its operations.

    Attributes:
        table: :func:`layout_table` of :func:`chapter_operations`.
        view_3_2: ``M.view(3, 2)`` as nested lists.
        transposed: ``M.transpose(0, 1)`` as nested lists.
        storage: the cells under the transpose, in memory order (unchanged: [1, …, 6]).
        reading: the transpose's cells read in logical order ([1, 4, 2, 5, 3, 6]).
    """

    table: pd.DataFrame
    view_3_2: list
    transposed: list
    storage: list
    reading: list


def chapter_layout() -> ChapterLayout:
    """Run :func:`chapter_operations` on :func:`chapter_matrix` and collect what the chapter prints."""
    m = chapter_matrix()
    ops = chapter_operations(m)
    named = dict(ops)
    mt = named["M.transpose(0, 1)"]
    return ChapterLayout(
        table=layout_table(ops),
        view_3_2=named["M.view(3, 2)"].tolist(),
        transposed=mt.tolist(),
        storage=storage_elements(mt).tolist(),
        reading=reading_order_values(mt).tolist(),
    )


@dataclass(frozen=True)
class ViewVersusReshape:
    """Three ways to flatten a transposed matrix.

    Attributes:
        error: the real ``RuntimeError`` text of ``m.transpose(0, 1).view(-1)``.
        reshape: ``….reshape(-1)``, 1-d, own storage.
        contiguous_view: ``….contiguous().view(-1)``, 1-d, own storage.
        same_values: True when the two results hold the same values.
        table: :func:`layout_table` of m, its transpose and the two results.
    """

    error: str | None
    reshape: Tensor
    contiguous_view: Tensor
    same_values: bool
    table: pd.DataFrame


def view_versus_reshape(m: Tensor) -> ViewVersusReshape:
    """Flatten the transpose of a 2-d ``m`` three ways: ``view`` (fails), ``reshape``, ``contiguous().view``.

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
    return ViewVersusReshape(error, reshaped, packed, torch.equal(reshaped, packed), table)


# ---------------------------------------------------------------------------
# Shapes the reader types, bounded before anything is allocated
# ---------------------------------------------------------------------------

#: Largest starting tensor of the explorer (keeps the walk figure small), and most dimensions.
MAX_ELEMENTS, MAX_DIMS = 48, 4
#: Longest shape text read at all.
MAX_SHAPE_TEXT = 40
#: Stable keys of :class:`ShapeError` (the page words each one).
SHAPE_ERRORS = ("empty", "too_long", "not_a_shape", "too_many_dims", "not_positive", "two_inferred",
                "no_inferred", "too_large")
_SHAPE_TEXT = re.compile(r"^\(?\s*(-?[0-9]+(?:\s*,\s*-?[0-9]+)*)\s*,?\s*\)?$", re.ASCII)


class ShapeError(ValueError):
    """A typed shape that is refused.

    Attributes:
        reason: one of :data:`SHAPE_ERRORS`, for the page to word.
        params: numbers for the message (``limit``, ``count``).
    """

    def __init__(self, reason: str, message: str, **params: int):
        super().__init__(message)
        self.reason = reason
        self.params = params


def parse_shape(text: str, max_dims: int = MAX_DIMS, max_elements: int = MAX_ELEMENTS,
                allow_infer: bool = True) -> tuple[int, ...]:
    """Read a shape typed as ``"3, 2"``, ``"(2, 3)"`` or ``"6"``, bounded before any use.

    ASCII digits only (``int`` would accept "٣" or "３"), at most ``max_dims`` sizes, each
    positive or a single ``-1`` (inferred, when ``allow_infer``); every size and the product
    of the given sizes at most ``max_elements``. Sizes with more digits than ``max_elements``
    are refused before they are converted, so no number beyond the bound is ever built.

    Raises:
        ShapeError: (a ValueError) with ``reason`` one of :data:`SHAPE_ERRORS`.
    """
    text = text.strip()
    if not text:
        raise ShapeError("empty", "no shape given")
    if len(text) > MAX_SHAPE_TEXT:
        raise ShapeError("too_long", f"at most {MAX_SHAPE_TEXT} characters", limit=MAX_SHAPE_TEXT)
    match = _SHAPE_TEXT.match(text)
    if not match:
        raise ShapeError("not_a_shape", f"{text!r} is not a shape; type whole numbers separated by commas")
    parts = [p.strip() for p in match.group(1).split(",")]
    if len(parts) > max_dims:
        raise ShapeError("too_many_dims", f"at most {max_dims} dimensions, got {len(parts)}",
                         limit=max_dims, count=len(parts))
    if any(len(p.lstrip("-")) > len(str(max_elements)) for p in parts):
        raise ShapeError("too_large", f"a size above {max_elements}", limit=max_elements)
    dims = tuple(int(p) for p in parts)
    if any(d == 0 or d < -1 for d in dims):
        raise ShapeError("not_positive", f"sizes must be positive, got {dims}")
    if dims.count(-1) > 1:
        raise ShapeError("two_inferred", f"at most one -1, got {dims}")
    if -1 in dims and not allow_infer:
        raise ShapeError("no_inferred", f"-1 is not allowed here, got {dims}")
    if math.prod(d for d in dims if d > 0) > max_elements:
        raise ShapeError("too_large", f"more than {max_elements} elements: {dims}", limit=max_elements)
    return dims


def shape_or_default(text: str, default: tuple[int, ...], allow_infer: bool = True
                     ) -> tuple[tuple[int, ...], ShapeError | None]:
    """:func:`parse_shape`, or ``default`` and the refusal when the text is not a valid shape."""
    try:
        return parse_shape(text, allow_infer=allow_infer), None
    except ShapeError as err:
        return default, err


# ---------------------------------------------------------------------------
# Operations the reader can chain on a small tensor
# ---------------------------------------------------------------------------

#: Recipes offered on the page: stable key -> the steps they chain. Steps are
#: "view", "reshape" (to the reader's new shape), "transpose" (the two
#: dimensions chosen by the reader), "contiguous", "slice_from_1" (``[..., 1:]``)
#: and "every_other" (``[..., ::2]``).
RECIPES: dict[str, tuple[str, ...]] = {
    "view": ("view",),
    "reshape": ("reshape",),
    "transpose": ("transpose",),
    "transpose_contiguous": ("transpose", "contiguous"),
    "transpose_view": ("transpose", "view"),
    "transpose_reshape": ("transpose", "reshape"),
    "transpose_contiguous_view": ("transpose", "contiguous", "view"),
    "slice_from_1": ("slice_from_1",),
    "every_other": ("every_other",),
}


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
        new_shape: target shape of ``view``/``reshape`` steps (may hold one -1), from :func:`parse_shape`.
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


@dataclass(frozen=True)
class Exploration:
    """A recipe run on the tensor 1 … n of the reader's shape.

    Attributes:
        codes: the code of every step run (the last may have failed).
        errors: PyTorch's error texts (at most one).
        table: :func:`layout_table` of the start and every result.
        shown_code: the code of the last result (``"M"`` when the first step failed).
        walk: :func:`engine.layout.memory_walk` of that result.
        order: the storage cells it reads, in logical order.
    """

    codes: tuple[str, ...]
    errors: tuple[str, ...]
    table: pd.DataFrame
    shown_code: str
    walk: MemoryWalk
    order: tuple[int, ...]


def explore(shape: Sequence[int], recipe: str, new_shape: Sequence[int], dims: tuple[int, int]) -> Exploration:
    """Lay out 1 … n as ``shape`` (a fresh, contiguous storage), run ``recipe`` and describe the last result.

    Args:
        shape: 1 to :data:`MAX_DIMS` positive sizes, at most :data:`MAX_ELEMENTS` elements in all.
        recipe, new_shape, dims: as in :func:`run_recipe`.

    Raises:
        ValueError: for a shape outside those bounds (checked before anything is allocated)
            or an unknown recipe.
    """
    shape = tuple(int(s) for s in shape)
    if not 1 <= len(shape) <= MAX_DIMS or min(shape) < 1 or math.prod(shape) > MAX_ELEMENTS:
        raise ValueError(f"shape must have 1 to {MAX_DIMS} positive sizes and at most {MAX_ELEMENTS} elements, "
                         f"got {shape}")
    base = torch.arange(1, math.prod(shape) + 1).view(shape)  # (n,) -> shape, contiguous
    steps = run_recipe(base, recipe, new_shape, dims)
    done = [s for s in steps if s.tensor is not None]
    shown = done[-1] if done else Step("M", base, None)
    return Exploration(
        codes=tuple(s.code for s in steps),
        errors=tuple(s.error for s in steps if s.error),
        table=layout_table([("M", base)] + [(s.code, s.tensor) for s in done]),
        shown_code=shown.code,
        walk=memory_walk(shown.tensor),
        order=tuple(logical_order(shown.tensor)),
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
        title: the stage as code, e.g. ".transpose(1, 2)".
        code: the line of the chapter's MultiHeadAttention this stage is.
        layout: the real tensor's :class:`engine.layout.Layout` (b = 1).
        shares_previous: True when this stage reads the previous stage's storage.
        grid_heads: (rows, cols) int64 head of each logical element (b folded away,
            leading dims folded into rows).
        grid_cells: (rows, cols) int64 storage cell of each logical element.
        row_labels, col_labels: tick text of the grid (index names t, h, d, c, q, k and numbers).
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


def _stage(title: str, code: str, t: Tensor, heads: Tensor, previous: Tensor | None,
           dim_names: tuple[str, ...]) -> HeadStage:
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
        scores_heads = torch.arange(H).view(1, H, 1, 1).expand(1, H, T, T)  # (H,) -> (b, H, T, T)
        _, attn_weights = mha(x, return_weights=True)  # (b, H, T, T), causal softmax of the scores
        context = attn_weights @ values  # (b, H, T, T) @ (b, H, T, d_h) -> (b, H, T, d_h)
        context_heads = torch.arange(H).view(1, H, 1, 1).expand(1, H, T, d_h)  # (H,) -> (b, H, T, d_h)
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
               merged, back_heads.reshape(1, T, d_out), packed, ("t", "c")),  # (b, T, H, d_h) -> (b, T, d_out)
    ]


def head_walk_table(stages: Sequence[HeadStage]) -> pd.DataFrame:
    """One row per stage: ``stage`` (its code), ``shape``, ``stride`` (as text), ``is_contiguous``,
    ``shares_previous`` (reads the storage of the stage before)."""
    return pd.DataFrame([{
        "stage": s.title,
        "shape": str(s.layout.shape),
        "stride": str(s.layout.stride),
        "is_contiguous": s.layout.is_contiguous,
        "shares_previous": s.shares_previous,
    } for s in stages])


# ---------------------------------------------------------------------------
# The T² cost of the score tensor
# ---------------------------------------------------------------------------

#: Bytes per element of the dtypes offered on the page.
DTYPE_BYTES = {"float32": 4, "bfloat16 / float16": 2, "float64": 8}
#: Sequence lengths priced: T = 64 … 32768.
LENGTHS = tuple(2**k for k in range(6, 16))
#: GPT-2's context, and eight times it: the two lengths the page compares.
SHORT_T, LONG_T = 1024, 8192


def score_tensor_bytes(batch: int, num_heads: int, num_tokens: int, element_size: int = 4) -> int:
    """Bytes of one (B, H, T, T) score (or weight) tensor: ``B · H · T² · element_size``."""
    return int(batch) * int(num_heads) * int(num_tokens) ** 2 * int(element_size)


def score_cost_table(batch: int, num_heads: int, head_dim: int, lengths: Sequence[int],
                     element_size: int = 4) -> pd.DataFrame:
    """Bytes of the score tensor against the q/k/v tensors, for each sequence length T.

    Args:
        batch, num_heads, head_dim: B, H, d_h.
        lengths: the values of T.
        element_size: bytes per number (4 for float32, 2 for float16/bfloat16).

    Returns:
        DataFrame with ``T``, ``scores_bytes`` (B·H·T²·size, grows as T²),
        ``qkv_bytes`` (3·B·T·H·d_h·size, grows as T) and their ratio ``scores_per_qkv``.
    """
    rows = []
    for T in lengths:
        scores = score_tensor_bytes(batch, num_heads, T, element_size)
        qkv = 3 * int(batch) * int(T) * int(num_heads) * int(head_dim) * int(element_size)
        rows.append({"T": int(T), "scores_bytes": scores, "qkv_bytes": qkv, "scores_per_qkv": scores / qkv})
    return pd.DataFrame(rows)


@dataclass(frozen=True)
class ScoreCost:
    """The score tensor's size over :data:`LENGTHS`, and the two lengths the page compares.

    Attributes:
        table: :func:`score_cost_table`.
        scores_short, scores_long: bytes of the scores at T = :data:`SHORT_T` and :data:`LONG_T`.
        qkv_long: bytes of q, k, v together at T = :data:`LONG_T`.
        growth: ``scores_long / scores_short`` (64 for eight times the tokens).
        token_growth: ``LONG_T // SHORT_T`` (8).
    """

    table: pd.DataFrame
    scores_short: int
    scores_long: int
    qkv_long: int
    growth: float
    token_growth: int


def score_cost(batch: int, num_heads: int, head_dim: int, element_size: int) -> ScoreCost:
    """:func:`score_cost_table` over :data:`LENGTHS` and its values at :data:`SHORT_T` and :data:`LONG_T`.

    Raises:
        ValueError: if a size is not a positive integer.
    """
    for label, value in (("batch", batch), ("num_heads", num_heads), ("head_dim", head_dim),
                         ("element_size", element_size)):
        if int(value) < 1:
            raise ValueError(f"{label} must be positive, got {value}")
    table = score_cost_table(batch, num_heads, head_dim, LENGTHS, element_size)
    by_length = table.set_index("T")
    short, long = by_length.loc[SHORT_T], by_length.loc[LONG_T]
    return ScoreCost(
        table=table,
        scores_short=int(short["scores_bytes"]),
        scores_long=int(long["scores_bytes"]),
        qkv_long=int(long["qkv_bytes"]),
        growth=float(long["scores_bytes"]) / float(short["scores_bytes"]),
        token_growth=LONG_T // SHORT_T,
    )


@dataclass(frozen=True)
class SavedScores:
    """What autograd keeps of the (B, H, T, T) tables for the backward pass of one attention layer.

    Attributes:
        training: float tensors of that shape saved by a forward pass with gradients on, with dropout (distinct
            storages: a tensor saved by two operations counts once), and their dtypes (``"float32"``).
        training_masks: boolean tensors of that shape saved as well (the causal mask's broadcast and dropout's
            keep-mask are not float tables, listed apart).
        inference: float tensors of that shape saved under ``torch.no_grad()`` (0: nothing is kept).
        shape: the table's shape (B, H, T, T).
    """

    training: int
    training_masks: int
    inference: int
    shape: tuple[int, int, int, int]


@uses_global_rng
def saved_score_tensors(batch: int = 2, num_heads: int = 2, num_tokens: int = 6, head_dim: int = 2,
                        dropout: float = 0.1, seed: int = 123) -> SavedScores:
    """Count the (B, H, T, T) tensors autograd saves in one forward pass of the chapter's ``MultiHeadAttention``.

    The saved tensors are read with ``torch.autograd.graph.saved_tensors_hooks`` (every tensor an operation keeps
    for its backward), in training mode with dropout and gradients on, then under ``torch.no_grad()``. This is
    what page 6's sentence on the backward pass states, computed instead of asserted: the attention weights are
    activations, never parameters, yet training keeps them (the softmax's backward needs its output, the product
    with the values needs the weights it multiplied) until the backward pass has used them.

    Args:
        batch, num_heads, num_tokens, head_dim: the sizes (positive ints); d_in = d_out = num_heads · head_dim.
        dropout: the attention dropout rate in [0, 1).
        seed: ``torch.manual_seed`` for the weights, the input and dropout's mask.

    Raises:
        ValueError: if a size is not positive or dropout is outside [0, 1) (from ``MultiHeadAttention``).
    """
    d = num_heads * head_dim
    torch.manual_seed(seed)
    layer = A.MultiHeadAttention(d, d, context_length=num_tokens, dropout=dropout, num_heads=num_heads).train()
    x = torch.randn(batch, num_tokens, d, requires_grad=True)
    shape = (batch, num_heads, num_tokens, num_tokens)

    def count(grad: bool) -> tuple[int, int]:
        seen: dict[int, torch.dtype] = {}

        def pack(t: Tensor) -> Tensor:
            if tuple(t.shape) == shape:
                seen[t.untyped_storage().data_ptr()] = t.dtype
            return t

        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t), torch.set_grad_enabled(grad):
            layer(x)
        floats = sum(1 for dtype in seen.values() if dtype.is_floating_point)
        return floats, len(seen) - floats

    training, masks = count(True)
    inference, _ = count(False)
    return SavedScores(training=training, training_masks=masks, inference=inference, shape=shape)


# --- the page's prediction gates (``ui/questions/memory_layout.py``): their answers, which the page and its
# notebook's exercises both call ---------------------------------------------------------------------------------


def chapter_comparison() -> ViewVersusReshape:
    """:func:`view_versus_reshape` of the chapter's matrix, as page 6 computes it."""
    return view_versus_reshape(chapter_matrix())


def view_outcome(comparison: ViewVersusReshape) -> str:
    """What ``M.transpose(0, 1).view(-1)`` gave: ``error`` (the real RuntimeError), else the order of its values."""
    if comparison.error is not None:
        return "error"
    return "transposed" if comparison.same_values else "memory"


def transpose_outcome(num_tokens: int, num_heads: int, head_dim: int) -> str:
    """The ``.transpose(1, 2)`` stage of :func:`key_head_walk`: ``shared_not`` (same storage, not contiguous),
    ``copy`` (new storage) or ``shared_contiguous``."""
    stage = next(s for s in key_head_walk(num_tokens, num_heads, head_dim) if s.title == ".transpose(1, 2)")
    if not stage.shares_previous:
        return "copy"
    return "shared_contiguous" if stage.layout.is_contiguous else "shared_not"
