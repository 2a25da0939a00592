"""Section 1, simplified self-attention: the experiments behind the page.

Source: chapter ``003`` ("Mécanismes d'attention"), simplified self-attention
without trainable weights, the softmax's numerical stability and its Jacobian
(beside the Jacobian of the plain divide-by-the-sum normalisation), and the
generalisation to all tokens with matrix products.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd
import torch
from torch import Tensor

from engine import attention as A
from engine import chapter

#: dtypes offered by the softmax-numerics demo, by name.
DTYPES: dict[str, torch.dtype] = {
    "float32": torch.float32,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "float64": torch.float64,
}
#: Stable column keys of the embeddings table: one per input dimension (d_in = 3 in the chapter).
DIM_KEYS: tuple[str, ...] = ("dim_0", "dim_1", "dim_2")
#: Bounds of an edited embedding coordinate (the editor's range).
EMBEDDING_BOUND = 10.0
#: Stable column keys of :attr:`SoftmaxNumerics.table`.
NUMERICS_COLUMNS: tuple[str, ...] = ("scaled_score", "exp_score", "naive_softmax", "stable_softmax", "torch_softmax")


@dataclass(frozen=True)
class EditedInputs:
    """The embeddings a reader edited, made whole.

    Attributes:
        inputs: (T, d_in) float32 embeddings, each coordinate in [-EMBEDDING_BOUND, EMBEDDING_BOUND].
        empty_cells: how many cells were empty (or not numbers) and took the chapter's value.
        is_chapter: True when ``inputs`` equal the chapter's at 6 decimals.
    """

    inputs: Tensor
    empty_cells: int
    is_chapter: bool


@dataclass(frozen=True)
class QueryWalkthrough:
    """The three steps for one query token.

    Attributes:
        attn_scores: (T,) dot products of the query with every input.
        naive_weights: (T,) the scores divided by their sum.
        attn_weights: (T,) ``torch.softmax`` of the scores.
        context_vec: (d_in,) the inputs weighted by ``attn_weights``.
    """

    attn_scores: Tensor
    naive_weights: Tensor
    attn_weights: Tensor
    context_vec: Tensor


@dataclass(frozen=True)
class SoftmaxNumerics:
    """Naive vs stable softmax on scaled scores in one dtype.

    Attributes:
        table: one row per token, columns :data:`NUMERICS_COLUMNS` (float64, possibly inf/nan
            in ``exp_score`` and ``naive_softmax``).
        naive_broken: how many naive weights are nan or inf.
        naive_underflowed: how many naive weights are exactly 0 where the stable softmax gives a positive
            weight (``exp`` underflowed without a nan: the naive column looks fine and is wrong).
        stable_finite: True when every stable weight is finite.
        stable_vs_torch: max |stable − torch.softmax| over the finite weights. In float16 and bfloat16 the
            stable column rounds every ``exp``, the sum and each ratio to the dtype, while ``torch.softmax`` (on
            the CPU) computes in float32 and rounds once, so they differ by a few units of the dtype's spacing.
        overflow, underflow: ``exp(x)`` is inf above ``overflow`` and exactly 0 below ``underflow``
            in that dtype (see :func:`exp_limits`).
    """

    table: pd.DataFrame
    naive_broken: int
    naive_underflowed: int
    stable_finite: bool
    stable_vs_torch: float
    overflow: float
    underflow: float


#: Scores with one negative entry (the issue's example): dividing them by their sum shows what "needs positive
#: scores" means, with numbers the page computes rather than states.
NEGATIVE_SCORES = (1.0, 1.0, -0.5)


@dataclass(frozen=True)
class NegativeScore:
    """Dividing scores with a negative entry by their sum (chapter section "attention weights": the naive
    normalisation the softmax replaces).

    Attributes:
        attn_scores: (n,) float32 scores, one of them negative.
        naive_weights: (n,) ``attn_scores / attn_scores.sum()``: they add up to 1, one is negative.
        total: the scores' sum S.
        positive_sum: the sum of the positive weights, 1 minus the negative ones, so above 1.
    """

    attn_scores: Tensor
    naive_weights: Tensor
    total: float
    positive_sum: float


def negative_score_example(scores: tuple[float, ...] = NEGATIVE_SCORES) -> NegativeScore:
    """:func:`engine.attention.naive_normalize` on scores with a negative entry.

    Raises:
        ValueError: if no score is negative or the scores add up to 0 (the division is undefined there).
    """
    attn_scores = torch.tensor(scores, dtype=torch.float32)  # (n,)
    if not (attn_scores < 0).any() or float(attn_scores.sum()) == 0:
        raise ValueError(f"need a negative score and a non-zero sum, got {scores}")
    weights = A.naive_normalize(attn_scores, dim=0)  # (n,)
    return NegativeScore(attn_scores=attn_scores, naive_weights=weights, total=float(attn_scores.sum()),
                         positive_sum=float(weights[weights > 0].sum()))


@dataclass(frozen=True)
class JacobianCheck:
    """A Jacobian from its closed form and from ``torch.autograd``.

    Attributes:
        closed_form: (T, T) float64, ``closed_form[i, j] = ∂w_i/∂x_j``.
        autograd: (T, T) float64 from ``torch.autograd.functional.jacobian``.
        max_abs_diff: largest |closed_form - autograd|.
    """

    closed_form: Tensor
    autograd: Tensor
    max_abs_diff: float


@dataclass(frozen=True)
class LoopVsMatmul:
    """All context vectors with loops and with matrix products.

    Attributes:
        attn_scores: (T, T) ``inputs @ inputs.T``.
        attn_weights: (T, T) row-wise softmax.
        context_vec: (T, d_in) ``attn_weights @ inputs``.
        loop_context: (T, d_in) the same from explicit loops.
        max_abs_diff: largest |loop_context - context_vec|.
    """

    attn_scores: Tensor
    attn_weights: Tensor
    context_vec: Tensor
    loop_context: Tensor
    max_abs_diff: float


def chapter_table() -> pd.DataFrame:
    """The chapter's six embeddings as a table: ``token`` then the columns :data:`DIM_KEYS`."""
    table = pd.DataFrame(A.CHAPTER_INPUTS, columns=list(DIM_KEYS))
    table.insert(0, "token", A.CHAPTER_TOKENS)
    return table


def inputs_from_table(table: pd.DataFrame) -> EditedInputs:
    """Turn an edited embeddings table into a tensor: empty cells take the chapter's value.

    Args:
        table: the chapter's table (:func:`chapter_table`) as a reader edited it; the columns
            :data:`DIM_KEYS` may hold numbers, None or text.

    Returns:
        :class:`EditedInputs` with (T, d_in) float32 inputs, clipped to ±EMBEDDING_BOUND.

    Raises:
        ValueError: if the table lacks a column of :data:`DIM_KEYS` or its row count differs
            from the chapter's.
    """
    reference = chapter_table()
    missing = [k for k in DIM_KEYS if k not in table.columns]
    if missing or len(table) != len(reference):
        raise ValueError(f"expected {len(reference)} rows with columns {DIM_KEYS}, got {table.shape}")
    values = table[list(DIM_KEYS)].apply(pd.to_numeric, errors="coerce").reset_index(drop=True)
    empty = values.isna()
    values = values.where(~empty, reference[list(DIM_KEYS)]).clip(-EMBEDDING_BOUND, EMBEDDING_BOUND)
    inputs = torch.tensor(values.to_numpy(dtype="float64"), dtype=torch.float32)  # (T, d_in)
    is_chapter = chapter.matches(inputs, A.CHAPTER_INPUTS, decimals=6)
    return EditedInputs(inputs, int(empty.to_numpy().sum()), is_chapter)


def query_walkthrough(inputs: Tensor, query_index: int) -> QueryWalkthrough:
    """The three steps for one query token, with the naive normalisation beside the softmax.

    Args:
        inputs: (T, d_in) float embeddings; they act as queries, keys and values.
        query_index: the token asking, in [0, T).

    Returns:
        :class:`QueryWalkthrough`: ``attn_scores``, ``naive_weights``, ``attn_weights`` (T,)
        and ``context_vec`` (d_in,).

    Raises:
        ValueError: if ``query_index`` is outside [0, T) or ``inputs`` is not 2-d.
    """
    if inputs.dim() != 2:
        raise ValueError(f"inputs must be (T, d_in), got shape {tuple(inputs.shape)}")
    if not 0 <= query_index < inputs.shape[0]:
        raise ValueError(f"query_index must be in [0, {inputs.shape[0]}), got {query_index}")
    query = inputs[query_index]  # (d_in,)
    attn_scores = A.dot_scores(inputs, query)  # (T,)
    naive_weights = A.naive_normalize(attn_scores)  # (T,)
    attn_weights = torch.softmax(attn_scores, dim=0)  # (T,)
    context_vec = A.context_vector(inputs, attn_weights)  # (d_in,)
    return QueryWalkthrough(attn_scores, naive_weights, attn_weights, context_vec)


def exp_limits(dtype: torch.dtype) -> tuple[float, float]:
    """Where ``torch.exp`` leaves the finite, non-zero range of a dtype, found by running it.

    Each threshold is bisected on ``torch.exp`` of a 0-d tensor of ``dtype`` (60 halvings from a bracket
    taken from ``torch.finfo``): what the page says is what ``exp`` does, rounding included. The zero
    threshold is not ln of the smallest subnormal (float32: -103.28), where ``exp`` is still that
    subnormal, but about half a subnormal further down, where it rounds to 0 (float32: near -103.97).

    Returns:
        ``(overflow, underflow)`` (float64): ``exp(x)`` is ``inf`` for x above ``overflow`` and exactly 0
        for x below ``underflow``, within 1e-12 of the dtype's own switch points.
    """
    info = torch.finfo(dtype)

    def switch(finite: float, beyond: float, past) -> float:
        for _ in range(60):
            mid = (finite + beyond) / 2
            if past(torch.exp(torch.tensor(mid, dtype=dtype))):
                beyond = mid
            else:
                finite = mid
        return (finite + beyond) / 2

    smallest_subnormal = info.smallest_normal * info.eps
    overflow = switch(math.log(info.max) - 1.0, math.log(info.max) + 1.0, torch.isinf)
    underflow = switch(math.log(smallest_subnormal) + 1.0, math.log(smallest_subnormal) - 2.0, lambda e: e == 0)
    return overflow, underflow


def softmax_numerics(attn_scores: Tensor, scale: float, dtype: torch.dtype) -> SoftmaxNumerics:
    """Naive vs max-subtracted softmax on ``scale * attn_scores`` in a chosen dtype.

    Multiplying the scores by a large factor mimics the large dot products of
    long or high-dimensional inputs. The naive column turns into ``nan`` once
    ``exp`` overflows (or every term underflows); the stable one stays finite.

    Args:
        attn_scores: (T,) scores (any float dtype; cast to ``dtype``).
        scale: factor applied before the softmax (may be negative).
        dtype: computation dtype (float16, bfloat16, float32, float64).

    Returns:
        :class:`SoftmaxNumerics`, its table with one row per token and the columns
        :data:`NUMERICS_COLUMNS`.
    """
    x = attn_scores.to(dtype) * torch.tensor(scale, dtype=dtype)  # (T,)
    naive = A.softmax_naive(x, dim=0)
    stable = A.softmax_stable(x, dim=0)
    low_precision = dtype in (torch.float16, torch.bfloat16)
    reference = torch.softmax(x.float(), dim=0).to(dtype) if low_precision else torch.softmax(x, dim=0)
    table = pd.DataFrame(
        dict(zip(NUMERICS_COLUMNS, (v.double().numpy() for v in (x, torch.exp(x), naive, stable, reference)),
                 strict=True))
    )
    overflow, underflow = exp_limits(dtype)
    finite = torch.isfinite(stable) & torch.isfinite(reference)  # (T,)
    return SoftmaxNumerics(
        table=table,
        naive_broken=int((~torch.isfinite(naive)).sum()),
        naive_underflowed=int(((naive == 0) & (stable > 0)).sum()),
        stable_finite=bool(torch.isfinite(stable).all()),
        stable_vs_torch=float((stable[finite].double() - reference[finite].double()).abs().max()) if finite.any()
        else 0.0,
        overflow=overflow,
        underflow=underflow,
    )


def jacobian_check(attn_scores: Tensor) -> JacobianCheck:
    """The softmax Jacobian from the closed form ``w_i (δ_ij - w_j)`` and from autograd.

    Args:
        attn_scores: (T,) scores.

    Returns:
        :class:`JacobianCheck` in float64.
    """
    x = attn_scores.detach().double()
    weights = torch.softmax(x, dim=0)
    closed_form = A.softmax_jacobian(weights)  # (T, T)
    auto = torch.autograd.functional.jacobian(lambda s: torch.softmax(s, dim=0), x)  # (T, T)
    return JacobianCheck(closed_form, auto, float((closed_form - auto).abs().max()))


def naive_jacobian(attn_scores: Tensor) -> Tensor:
    """Jacobian of ``w_i = x_i / Σx``: ``∂w_i/∂x_j = (δ_ij - w_i) / Σx``.

    By the quotient rule, ∂(x_i/S)/∂x_j = δ_ij/S - x_i/S² = (δ_ij - w_i)/S with
    S = Σ_k x_k. Unlike the softmax's, it depends on the sum S itself: the
    same weights from scores ten times larger have a Jacobian ten times smaller.

    Args:
        attn_scores: (T,) positive scores.

    Returns:
        (T, T) float64 matrix ``J[i, j] = ∂w_i/∂x_j``.

    Raises:
        ValueError: if ``attn_scores`` is not 1-d or a score is not positive (the
            quotients are then no weights, and S may be 0).
    """
    if attn_scores.dim() != 1:
        raise ValueError(f"attn_scores must be (T,), got shape {tuple(attn_scores.shape)}")
    if not bool((attn_scores > 0).all()):
        raise ValueError("divide-by-the-sum weights need positive scores")
    x = attn_scores.detach().double()
    total = x.sum()
    weights = x / total  # (T,)
    eye = torch.eye(x.shape[0], dtype=torch.float64)  # (T, T)
    return (eye - weights.unsqueeze(1)) / total  # (T, T) - (T, 1) -> (T, T): row i subtracts w_i


def naive_jacobian_check(attn_scores: Tensor) -> JacobianCheck | None:
    """:func:`naive_jacobian` checked against ``torch.autograd``; None unless every score is positive.

    Args:
        attn_scores: (T,) scores.

    Returns:
        :class:`JacobianCheck` in float64, or None when a score is 0 or negative (the
        normalisation then gives no weights, see :func:`engine.attention.naive_normalize`).
    """
    if not bool((attn_scores > 0).all()):
        return None
    x = attn_scores.detach().double()
    closed_form = naive_jacobian(x)  # (T, T)
    auto = torch.autograd.functional.jacobian(lambda s: A.naive_normalize(s, dim=0), x)  # (T, T)
    return JacobianCheck(closed_form, auto, float((closed_form - auto).abs().max()))


def loop_vs_matmul(inputs: Tensor) -> LoopVsMatmul:
    """All context vectors with Python loops and with two matrix products; they agree.

    Args:
        inputs: (T, d_in).

    Returns:
        :class:`LoopVsMatmul`.
    """
    context_vec, attn_weights, attn_scores = A.simplified_self_attention(inputs)
    T = inputs.shape[0]
    loop_scores = torch.empty(T, T, dtype=inputs.dtype)
    for i in range(T):
        for j in range(T):
            loop_scores[i, j] = torch.dot(inputs[i], inputs[j])
    loop_weights = torch.softmax(loop_scores, dim=-1)
    loop_context = torch.zeros_like(inputs)
    for i in range(T):
        for j in range(T):
            loop_context[i] += loop_weights[i, j] * inputs[j]
    return LoopVsMatmul(attn_scores, attn_weights, context_vec, loop_context,
                        float((loop_context - context_vec).abs().max()))


# --- the page's prediction gates (``ui/questions/self_attention.py``): their answers, which the page and its
# notebook's exercises both call ---------------------------------------------------------------------------------


def self_weight(inputs: Tensor, q: int) -> float:
    """``attn_weights[q]`` of :func:`query_walkthrough` for query ``q``: the weight the query gives itself."""
    return float(query_walkthrough(inputs, q).attn_weights[q])


def softmax_outcome(attn_scores: Tensor, scale: float, dtype_name: str) -> str:
    """Which softmax keeps finite weights (:func:`softmax_numerics` in the dtype named ``dtype_name``):
    ``both_finite``, ``naive_breaks`` or ``both_break``."""
    numerics = softmax_numerics(attn_scores, scale, DTYPES[dtype_name])
    if not numerics.stable_finite:
        return "both_break"
    return "naive_breaks" if numerics.naive_broken else "both_finite"
