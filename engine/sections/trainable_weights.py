"""Section 2, trainable weights: the experiments behind the page.

Source: chapter ``003`` ("Mécanismes d'attention"), the sections on self-attention
with trainable weights (W_query, W_key, W_value drawn with ``torch.rand``), the
1/sqrt(d_k) scale of scaled dot-product attention (Vaswani et al., 2017, section
3.2.1 and footnote 4), the compact classes ``SelfAttention_v1``/``SelfAttention_v2``,
their initialisations, and exercise 3.1.
"""

from __future__ import annotations

import math

import pandas as pd
import torch
from torch import Tensor, nn

from engine import attention as A
from engine.rng import uses_global_rng

#: The key sizes the 1/sqrt(d_k) sweep visits: 1, 2, 4, ..., 1024.
DK_VALUES: tuple[int, ...] = tuple(2**i for i in range(11))
#: Input sizes at which the two initialisations are measured.
INIT_D_INS: tuple[int, ...] = (3, 16, 64, 256, 1024)


@uses_global_rng
def chapter_projections(seed: int, d_in: int, d_out: int) -> dict[str, Tensor]:
    """W_query, W_key, W_value drawn as in the chapter: ``manual_seed(seed)``, then three ``torch.rand``.

    The draw order (query, key, value) is the chapter's, so seed 123 with
    d_in 3 and d_out 2 gives its matrices.

    Args:
        seed: value passed to ``torch.manual_seed`` (reseeds the global generator).
        d_in: rows of each matrix (embedding size).
        d_out: columns of each matrix (size of queries, keys, values).

    Returns:
        dict ``W_query``, ``W_key``, ``W_value``, each (d_in, d_out) float32, uniform on [0, 1).

    Raises:
        ValueError: if ``d_in`` or ``d_out`` is not positive.
    """
    if d_in < 1 or d_out < 1:
        raise ValueError(f"d_in and d_out must be positive, got d_in={d_in}, d_out={d_out}")
    torch.manual_seed(seed)
    return {name: torch.rand(d_in, d_out) for name in ("W_query", "W_key", "W_value")}


def trainable_walkthrough(inputs: Tensor, seed: int, d_out: int, query_index: int) -> dict[str, Tensor]:
    """One query through seeded trainable projections: query, scores, scaled weights, context.

    Also returns the softmax of the *unscaled* scores so a page can show what
    the 1/sqrt(d_k) factor changes.

    Args:
        inputs: (T, d_in) float32 embeddings.
        seed: seed of the three ``torch.rand`` draws (123 is the chapter's).
        d_out: size of queries, keys and values (d_k = d_out).
        query_index: the token that asks, in [0, T) (1 = "journey" in the chapter).

    Returns:
        dict with ``W_query``, ``W_key``, ``W_value`` (d_in, d_out), ``query`` (d_out,),
        ``keys`` and ``values`` (T, d_out), ``attn_scores`` (T,), ``attn_weights`` (T,)
        with the scale, ``unscaled_weights`` (T,) without it, ``context_vec`` (d_out,).

    Raises:
        ValueError: on a bad ``d_out``, ``query_index`` or input shape.
    """
    if inputs.dim() != 2:
        raise ValueError(f"inputs must be (T, d_in), got shape {tuple(inputs.shape)}")
    weights = chapter_projections(seed, inputs.shape[1], d_out)
    steps = A.scaled_dot_product_step(inputs, weights["W_query"], weights["W_key"], weights["W_value"], query_index)
    steps["unscaled_weights"] = torch.softmax(steps["attn_scores"], dim=-1)  # (T,)
    return {**weights, **steps}


def dk_sweep(
    d_ks: tuple[int, ...] = DK_VALUES, n_samples: int = 10_000, num_keys: int = 8, seed: int = 0
) -> dict[str, object]:
    """Why 1/sqrt(d_k): statistics of q·k for random unit-variance q, k at each key size.

    For each d_k, ``n_samples`` independent pairs q, k ~ N(0, I_{d_k}) give the
    spread of the score q·k (variance d_k) and of q·k/sqrt(d_k) (variance 1).
    Separately, ``n_samples // num_keys`` queries each score ``num_keys`` keys;
    the softmax of each row, with and without the scale, gives the largest
    weight w_max and the softmax gradient factor w_max (1 - w_max), which
    collapses to 0 when the softmax turns one-hot (chapter, "why divide by
    sqrt(d_k)"; Vaswani et al., 2017, footnote 4).

    Args:
        d_ks: key sizes to visit.
        n_samples: number of q·k pairs per d_k (also the number of scores in the softmax rows).
        num_keys: keys per softmax row (a short context); must divide ``n_samples``.
        seed: seed of a private ``torch.Generator`` (the global one is untouched).

    Returns:
        dict with ``stats`` (DataFrame, one row per d_k: ``d_k``, ``var(q·k)``,
        ``var(q·k/√d_k)``, ``mean w_max`` and ``mean w_max(1-w_max)`` without and with
        the scale), ``boxes`` (dict d_k -> {"unscaled"/"scaled": dict of q1, median, q3,
        p1, p99, min, max as floats}) and ``n_samples``.

    Raises:
        ValueError: if a size is not positive or ``num_keys`` does not divide ``n_samples``.
    """
    if n_samples < 2 or num_keys < 2 or any(d < 1 for d in d_ks):
        raise ValueError(f"need n_samples >= 2, num_keys >= 2 and positive d_k, got {n_samples}, {num_keys}, {d_ks}")
    if n_samples % num_keys != 0:
        raise ValueError(f"num_keys={num_keys} must divide n_samples={n_samples}")
    gen = torch.Generator().manual_seed(seed)
    n_rows = n_samples // num_keys
    rows, boxes = [], {}
    for d_k in d_ks:
        q = torch.randn(n_samples, d_k, generator=gen)  # (N, d_k)
        k = torch.randn(n_samples, d_k, generator=gen)  # (N, d_k)
        scores = torch.linalg.vecdot(q, k)  # (N, d_k), (N, d_k) -> (N,): independent q·k samples
        scaled = scores / math.sqrt(d_k)  # (N,)
        row_q = torch.randn(n_rows, 1, d_k, generator=gen)  # (R, 1, d_k): one query per row
        row_k = torch.randn(n_rows, num_keys, d_k, generator=gen)  # (R, num_keys, d_k)
        row_scores = torch.linalg.vecdot(row_q, row_k)  # (R, 1, d_k), (R, num_keys, d_k) -> (R, num_keys)
        w_unscaled = torch.softmax(row_scores, dim=-1).amax(dim=-1)  # (R,) largest weight per row
        w_scaled = torch.softmax(row_scores / math.sqrt(d_k), dim=-1).amax(dim=-1)  # (R,)
        rows.append(
            {
                "d_k": d_k,
                "var(q·k)": float(scores.var()),
                "var(q·k/√d_k)": float(scaled.var()),
                "mean w_max, unscaled": float(w_unscaled.mean()),
                "mean w_max, scaled": float(w_scaled.mean()),
                "mean w_max(1-w_max), unscaled": float((w_unscaled * (1 - w_unscaled)).mean()),
                "mean w_max(1-w_max), scaled": float((w_scaled * (1 - w_scaled)).mean()),
            }
        )
        boxes[d_k] = {"unscaled": _box_stats(scores), "scaled": _box_stats(scaled)}
    return {"stats": pd.DataFrame(rows), "boxes": boxes, "n_samples": n_samples}


def _box_stats(x: Tensor) -> dict[str, float]:
    """Quartiles, 1st/99th percentiles and extremes of a 1-d sample, as floats."""
    qs = torch.quantile(x.double(), torch.tensor([0.01, 0.25, 0.5, 0.75, 0.99], dtype=torch.float64))
    p1, q1, median, q3, p99 = (float(v) for v in qs)
    return {"p1": p1, "q1": q1, "median": median, "q3": q3, "p99": p99, "min": float(x.min()), "max": float(x.max())}


@uses_global_rng
def init_comparison(d_ins: tuple[int, ...] = INIT_D_INS, d_out: int = 512, n_tokens: int = 256, seed: int = 0) -> pd.DataFrame:
    """``torch.rand`` vs ``nn.Linear``'s default initialisation, measured at several d_in.

    ``torch.rand(d_in, d_out)`` (SelfAttention_v1) is uniform on [0, 1): no
    negative weights and variance 1/12 whatever d_in, so for unit-variance
    zero-mean inputs the projected features x·W have variance d_in · E[W²] =
    d_in / 3, growing with d_in. ``nn.Linear(d_in, d_out)`` (SelfAttention_v2)
    draws uniformly on ±1/sqrt(d_in): half the weights negative, variance
    1/(3 d_in), and output variance 1/3 at every d_in (chapter, "improved
    version with nn.Linear"; PyTorch's ``kaiming_uniform_(a=sqrt(5))``).

    Args:
        d_ins: input sizes to measure.
        d_out: columns drawn per matrix (more columns, better estimates).
        n_tokens: number of random N(0, 1) input rows used to measure the output variance.
        seed: global seed set once before all draws.

    Returns:
        DataFrame, one row per (d_in, init): ``d_in``, ``init`` ("torch.rand" or
        "nn.Linear"), ``share negative``, ``var(W) measured``, ``var(W) theory``,
        ``var(x·W) measured``, ``var(x·W) theory``.

    Raises:
        ValueError: if a size is not positive.
    """
    if d_out < 1 or n_tokens < 2 or any(d < 1 for d in d_ins):
        raise ValueError(f"sizes must be positive, got d_ins={d_ins}, d_out={d_out}, n_tokens={n_tokens}")
    torch.manual_seed(seed)
    rows = []
    for d_in in d_ins:
        x = torch.randn(n_tokens, d_in)  # (n_tokens, d_in), unit variance
        w_rand = torch.rand(d_in, d_out)  # (d_in, d_out), as SelfAttention_v1
        w_linear = nn.Linear(d_in, d_out, bias=False).weight.detach().T  # (d_out, d_in) -> (d_in, d_out)
        for name, w, var_w, var_out in (
            ("torch.rand", w_rand, 1 / 12, d_in / 3),
            ("nn.Linear", w_linear, 1 / (3 * d_in), 1 / 3),
        ):
            out = x @ w  # (n_tokens, d_in) @ (d_in, d_out) -> (n_tokens, d_out)
            rows.append(
                {
                    "d_in": d_in,
                    "init": name,
                    "share negative": float((w < 0).float().mean()),
                    "var(W) measured": float(w.var()),
                    "var(W) theory": var_w,
                    "var(x·W) measured": float(out.var()),
                    "var(x·W) theory": var_out,
                }
            )
    return pd.DataFrame(rows)


def _seeded_v1_v2(d_in: int, d_out: int, seed_v1: int, seed_v2: int) -> tuple[A.SelfAttention_v1, A.SelfAttention_v2]:
    """SelfAttention_v1 built right after ``manual_seed(seed_v1)``, SelfAttention_v2 after ``manual_seed(seed_v2)``."""
    torch.manual_seed(seed_v1)
    sa_v1 = A.SelfAttention_v1(d_in, d_out)
    torch.manual_seed(seed_v2)
    return sa_v1, A.SelfAttention_v2(d_in, d_out)


@uses_global_rng
def v1_v2_outputs(inputs: Tensor, d_out: int, seed_v1: int, seed_v2: int) -> dict[str, Tensor]:
    """SelfAttention_v1 and SelfAttention_v2 built after their own seeds, run on the inputs.

    Chapter: v1 with seed 123 and v2 with seed 789 at d_out 2.

    Args:
        inputs: (T, d_in).
        d_out: size of queries, keys and values.
        seed_v1, seed_v2: ``torch.manual_seed`` before building each module.

    Returns:
        dict ``v1`` and ``v2``: (T, d_out) context vectors (no grad).

    Raises:
        ValueError: on a non-positive ``d_out`` or a non-2-d input.
    """
    sa_v1, sa_v2 = _seeded_v1_v2(inputs.shape[1], d_out, seed_v1, seed_v2)
    with torch.no_grad():
        return {"v1": sa_v1(inputs), "v2": sa_v2(inputs)}


@uses_global_rng
def exercise_3_1(inputs: Tensor, d_out: int, seed_v1: int, seed_v2: int) -> dict[str, Tensor | float]:
    """Exercise 3.1: copy SelfAttention_v2's weights (transposed) into SelfAttention_v1.

    Args:
        inputs: (T, d_in).
        d_out: size of queries, keys and values.
        seed_v1, seed_v2: seeds the two modules are built with.

    Returns:
        dict with ``v1_before``, ``v2``, ``v1_after`` (T, d_out) context vectors and
        ``max_abs_diff_before`` / ``max_abs_diff_after`` (floats, max |v1 - v2|).

    Raises:
        ValueError: on a non-positive ``d_out`` or a non-2-d input.
    """
    sa_v1, sa_v2 = _seeded_v1_v2(inputs.shape[1], d_out, seed_v1, seed_v2)
    with torch.no_grad():
        v1_before = sa_v1(inputs)  # (T, d_out)
        v2 = sa_v2(inputs)  # (T, d_out)
        A.copy_v2_into_v1(sa_v1, sa_v2)
        v1_after = sa_v1(inputs)  # (T, d_out)
    return {
        "v1_before": v1_before,
        "v2": v2,
        "v1_after": v1_after,
        "max_abs_diff_before": float((v1_before - v2).abs().max()),
        "max_abs_diff_after": float((v1_after - v2).abs().max()),
    }
