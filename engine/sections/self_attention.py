"""Section 1, simplified self-attention: the experiments behind the page.

Source: chapter ``003`` ("Mécanismes d'attention"), simplified self-attention
without trainable weights, the softmax's numerical stability and its Jacobian,
and the generalisation to all tokens with matrix products.
"""

from __future__ import annotations

import math

import pandas as pd
import torch
from torch import Tensor

from engine import attention as A

#: dtypes offered by the softmax-numerics demo, by name.
DTYPES: dict[str, torch.dtype] = {
    "float32": torch.float32,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "float64": torch.float64,
}


def query_walkthrough(inputs: Tensor, query_index: int) -> dict[str, Tensor]:
    """The three steps for one query token, with the naive normalisation beside the softmax.

    Args:
        inputs: (T, d_in) float embeddings; they act as queries, keys and values.
        query_index: the token asking, in [0, T).

    Returns:
        dict of ``attn_scores`` (T,), ``naive_weights`` (T,), ``attn_weights`` (T,)
        from ``torch.softmax``, ``context_vec`` (d_in,).

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
    return {
        "attn_scores": attn_scores,
        "naive_weights": naive_weights,
        "attn_weights": attn_weights,
        "context_vec": context_vec,
    }


def exp_limits(dtype: torch.dtype) -> tuple[float, float]:
    """Where ``exp`` leaves the finite, non-zero range of a dtype.

    Returns:
        ``(overflow, underflow)``: ``exp(x)`` is ``inf`` for x above ``overflow``
        (ln of the largest finite number) and exactly 0 below ``underflow`` (ln of
        the smallest subnormal). float32: about 88.72 and -103.28.
    """
    info = torch.finfo(dtype)
    smallest_subnormal = info.smallest_normal * info.eps
    return math.log(info.max), math.log(smallest_subnormal)


def softmax_numerics(attn_scores: Tensor, scale: float, dtype: torch.dtype) -> pd.DataFrame:
    """Naive vs max-subtracted softmax on ``scale * attn_scores`` in a chosen dtype.

    Multiplying the scores by a large factor mimics the large dot products of
    long or high-dimensional inputs. The naive column turns into ``nan`` once
    ``exp`` overflows (or every term underflows); the stable one stays finite.

    Args:
        attn_scores: (T,) scores (any float dtype; cast to ``dtype``).
        scale: factor applied before the softmax (may be negative).
        dtype: computation dtype (float16, bfloat16, float32, float64).

    Returns:
        DataFrame with one row per token: ``scaled score``, ``exp(score)``,
        ``naive softmax``, ``stable softmax``, ``torch.softmax`` (as float64 numbers,
        possibly inf/nan in the naive columns).
    """
    x = attn_scores.to(dtype) * torch.tensor(scale, dtype=dtype)  # (T,)
    naive = A.softmax_naive(x, dim=0)
    stable = A.softmax_stable(x, dim=0)
    reference = torch.softmax(x.float(), dim=0).to(dtype) if dtype in (torch.float16, torch.bfloat16) else torch.softmax(x, dim=0)
    return pd.DataFrame(
        {
            "scaled score": x.double().numpy(),
            "exp(score)": torch.exp(x).double().numpy(),
            "naive softmax": naive.double().numpy(),
            "stable softmax": stable.double().numpy(),
            "torch.softmax": reference.double().numpy(),
        }
    )


def jacobian_check(attn_scores: Tensor) -> dict[str, Tensor | float]:
    """The softmax Jacobian from the closed form ``w_i (δ_ij - w_j)`` and from autograd.

    Args:
        attn_scores: (T,) scores.

    Returns:
        dict with ``closed_form`` (T, T), ``autograd`` (T, T) from
        ``torch.autograd.functional.jacobian``, and ``max_abs_diff`` (float).
    """
    x = attn_scores.detach().double()
    weights = torch.softmax(x, dim=0)
    closed_form = A.softmax_jacobian(weights)  # (T, T)
    auto = torch.autograd.functional.jacobian(lambda s: torch.softmax(s, dim=0), x)  # (T, T)
    return {
        "closed_form": closed_form,
        "autograd": auto,
        "max_abs_diff": float((closed_form - auto).abs().max()),
    }


def loop_vs_matmul(inputs: Tensor) -> dict[str, Tensor | float]:
    """All context vectors with Python loops and with two matrix products; they agree.

    Args:
        inputs: (T, d_in).

    Returns:
        dict with ``attn_scores`` (T, T), ``attn_weights`` (T, T), ``context_vec``
        (T, d_in) from ``attn_weights @ inputs``, ``loop_context`` (T, d_in) from
        explicit loops, and ``max_abs_diff``.
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
    return {
        "attn_scores": attn_scores,
        "attn_weights": attn_weights,
        "context_vec": context_vec,
        "loop_context": loop_context,
        "max_abs_diff": float((loop_context - context_vec).abs().max()),
    }
