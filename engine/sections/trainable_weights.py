"""Section 2, trainable weights: the experiments behind the page.

Source: chapter ``003`` ("Mécanismes d'attention"), the sections on self-attention
with trainable weights (W_query, W_key, W_value drawn with ``torch.rand``), the
1/sqrt(d_k) scale of scaled dot-product attention (Vaswani et al., 2017, section
3.2.1 and footnote 4), the compact classes ``SelfAttention_v1``/``SelfAttention_v2``,
their initialisations, and exercise 3.1.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd
import torch
from torch import Tensor, nn

from engine import attention as A
from engine import chapter
from engine.rng import uses_global_rng

#: The key sizes the 1/sqrt(d_k) sweep visits: 1, 2, 4, ..., 1024.
DK_VALUES: tuple[int, ...] = tuple(2**i for i in range(11))
#: Input sizes at which the two initialisations are measured.
INIT_D_INS: tuple[int, ...] = (3, 16, 64, 256, 1024)
#: q·k pairs the 1/sqrt(d_k) sweep draws per d_k.
DK_SAMPLES = 10_000
#: Elements of the largest block :func:`vecdot_of_draws` draws at once (float32: 64 KiB): under ATen's
#: parallel grain (32 768 elements), so each block's product and sum run on the calling thread and the
#: blocks do not wake the thread pool one after another.
DRAW_BLOCK = 1 << 14
#: Elements that torch's CPU normal sampler transforms together (Box-Muller on blocks of 16):
#: a draw cut into blocks of a multiple of this many elements gives the same numbers as one draw.
_NORMAL_BLOCK = 16
#: Stable column keys of :attr:`DkSweep.stats`.
DK_COLUMNS: tuple[str, ...] = (
    "d_k", "var_scores", "var_scaled", "w_max_unscaled", "w_max_scaled", "grad_unscaled", "grad_scaled"
)
#: Stable column keys of :func:`init_comparison`'s table.
INIT_COLUMNS: tuple[str, ...] = (
    "d_in", "init", "share_negative", "var_w", "var_w_theory", "var_xw", "var_xw_theory"
)


@dataclass(frozen=True)
class ChapterSetup:
    """Which of the chapter's printed numbers the reader's settings should reproduce.

    Attributes:
        projections: seed 123 and d_out 2 (W_query, W_key, W_value and SelfAttention_v1).
        query: ``projections`` and the query token "journey" (the walkthrough's numbers).
    """

    projections: bool
    query: bool


@dataclass(frozen=True)
class Projections:
    """W_query, W_key, W_value, each (d_in, d_out) float32, uniform on [0, 1)."""

    W_query: Tensor
    W_key: Tensor
    W_value: Tensor


@dataclass(frozen=True)
class TrainableWalkthrough:
    """One query through the three projections.

    Attributes:
        projections: the three (d_in, d_out) matrices.
        query: (d_out,) the query token's projection.
        keys, values: (T, d_out).
        attn_scores: (T,) ``keys @ query``.
        attn_weights: (T,) ``softmax(attn_scores / sqrt(d_k))``.
        unscaled_weights: (T,) ``softmax(attn_scores)``, without the scale.
        context_vec: (d_out,) ``attn_weights @ values``.
    """

    projections: Projections
    query: Tensor
    keys: Tensor
    values: Tensor
    attn_scores: Tensor
    attn_weights: Tensor
    unscaled_weights: Tensor
    context_vec: Tensor


@dataclass(frozen=True)
class BoxStats:
    """Quartiles, 1st/99th percentiles and extremes of a 1-d sample (floats)."""

    p1: float
    q1: float
    median: float
    q3: float
    p99: float
    min: float
    max: float


@dataclass(frozen=True)
class DkSweep:
    """The 1/sqrt(d_k) sweep of :func:`dk_sweep`.

    Attributes:
        stats: one row per d_k, columns :data:`DK_COLUMNS`: ``var_scores`` = var(q·k),
            ``var_scaled`` = var(q·k/√d_k), ``w_max_*`` = mean largest softmax weight of a
            row, ``grad_*`` = mean w_max(1 - w_max), each without and with the scale.
        unscaled, scaled: d_k -> :class:`BoxStats` of q·k and of q·k/√d_k.
        n_samples: q·k pairs per d_k.
        num_keys: keys per softmax row of the ``w_max_*`` and ``grad_*`` columns.
    """

    stats: pd.DataFrame
    unscaled: dict[int, BoxStats]
    scaled: dict[int, BoxStats]
    n_samples: int
    num_keys: int


@dataclass(frozen=True)
class V1V2Outputs:
    """Context vectors (T, d_out) of SelfAttention_v1 and SelfAttention_v2 (no grad)."""

    v1: Tensor
    v2: Tensor


@dataclass(frozen=True)
class Exercise31:
    """Exercise 3.1 before and after copying v2's weights into v1.

    Attributes:
        v1_before, v2, v1_after: (T, d_out) context vectors.
        max_abs_diff_before, max_abs_diff_after: max |v1 - v2| (floats).
        exactly_equal: the outputs after the copy are bit for bit the same.
        equal_after: the outputs after the copy agree up to float32 rounding
            (``torch.testing.assert_close``'s default float32 tolerances). v1 computes ``x @ W`` and
            v2 ``nn.Linear``, which may run another kernel that adds the same products in
            another order; the last bits may then differ (7.45e-09 on an AVX-512 CPU).
    """

    v1_before: Tensor
    v2: Tensor
    v1_after: Tensor
    max_abs_diff_before: float
    max_abs_diff_after: float
    exactly_equal: bool
    equal_after: bool


def projections_are_chapter(seed: int, d_out: int) -> bool:
    """True when W_query, W_key, W_value are drawn as in the chapter (seed 123, d_out 2), whatever the query."""
    return seed == chapter.TRAINABLE_SEED and d_out == 2


def chapter_setup(seed: int, d_out: int, query_index: int) -> ChapterSetup:
    """Which of the walkthrough's chapter numbers apply (chapter: seed 123, d_out 2, query "journey")."""
    projections = projections_are_chapter(seed, d_out)
    return ChapterSetup(projections, projections and query_index == 1)


def v2_is_chapter(seed_v2: int, d_out: int) -> bool:
    """True when SelfAttention_v2 is built as in the chapter (seed 789, d_out 2)."""
    return seed_v2 == chapter.SA_V2_SEED and d_out == 2


@uses_global_rng
def chapter_projections(seed: int, d_in: int, d_out: int) -> Projections:
    """W_query, W_key, W_value drawn as in the chapter: ``manual_seed(seed)``, then three ``torch.rand``.

    The draw order (query, key, value) is the chapter's, so seed 123 with
    d_in 3 and d_out 2 gives its matrices.

    Args:
        seed: value passed to ``torch.manual_seed`` (reseeds the global generator).
        d_in: rows of each matrix (embedding size).
        d_out: columns of each matrix (size of queries, keys, values).

    Returns:
        :class:`Projections`, each (d_in, d_out) float32, uniform on [0, 1).

    Raises:
        ValueError: if ``d_in`` or ``d_out`` is not positive.
    """
    if d_in < 1 or d_out < 1:
        raise ValueError(f"d_in and d_out must be positive, got d_in={d_in}, d_out={d_out}")
    torch.manual_seed(seed)
    W_query = torch.rand(d_in, d_out)
    W_key = torch.rand(d_in, d_out)
    W_value = torch.rand(d_in, d_out)
    return Projections(W_query, W_key, W_value)


def trainable_walkthrough(inputs: Tensor, seed: int, d_out: int, query_index: int) -> TrainableWalkthrough:
    """One query through seeded trainable projections: query, scores, scaled weights, context.

    Also returns the softmax of the *unscaled* scores so a page can show what
    the 1/sqrt(d_k) factor changes.

    Args:
        inputs: (T, d_in) float32 embeddings.
        seed: seed of the three ``torch.rand`` draws (123 is the chapter's).
        d_out: size of queries, keys and values (d_k = d_out).
        query_index: the token that asks, in [0, T) (1 = "journey" in the chapter).

    Returns:
        :class:`TrainableWalkthrough`.

    Raises:
        ValueError: on a bad ``d_out``, ``query_index`` or input shape.
    """
    if inputs.dim() != 2:
        raise ValueError(f"inputs must be (T, d_in), got shape {tuple(inputs.shape)}")
    w = chapter_projections(seed, inputs.shape[1], d_out)
    steps = A.scaled_dot_product_step(inputs, w.W_query, w.W_key, w.W_value, query_index)
    unscaled_weights = torch.softmax(steps["attn_scores"], dim=-1)  # (T,)
    return TrainableWalkthrough(
        projections=w,
        query=steps["query"],
        keys=steps["keys"],
        values=steps["values"],
        attn_scores=steps["attn_scores"],
        attn_weights=steps["attn_weights"],
        unscaled_weights=unscaled_weights,
        context_vec=steps["context_vec"],
    )


def dk_sweep(
    d_ks: tuple[int, ...] = DK_VALUES, n_samples: int = DK_SAMPLES, num_keys: int = 8, seed: int = 0
) -> DkSweep:
    """Why 1/sqrt(d_k): statistics of q·k for random unit-variance q, k at each key size.

    For each d_k, ``n_samples`` independent pairs q, k ~ N(0, I_{d_k}) give the
    spread of the score q·k (variance d_k) and of q·k/sqrt(d_k) (variance 1).
    Separately, ``n_samples // num_keys`` queries each score ``num_keys`` keys;
    the softmax of each row, with and without the scale, gives the largest
    weight w_max and the softmax gradient factor w_max (1 - w_max), which
    collapses to 0 when the softmax turns one-hot (chapter, "why divide by
    sqrt(d_k)"; Vaswani et al., 2017, footnote 4). The draws are reduced block by
    block (:func:`vecdot_of_draws`): the same numbers as drawing q and k whole, without
    holding (n_samples, d_k) tensors, so the sweep's memory does not grow with d_k.

    Args:
        d_ks: key sizes to visit.
        n_samples: number of q·k pairs per d_k (also the number of scores in the softmax rows).
        num_keys: keys per softmax row (a short context); must divide ``n_samples``.
        seed: seed of a private ``torch.Generator`` (the global one is untouched).

    Returns:
        :class:`DkSweep`.

    Raises:
        ValueError: if a size is not positive or ``num_keys`` does not divide ``n_samples``.
    """
    if n_samples < 2 or num_keys < 2 or any(d < 1 for d in d_ks):
        raise ValueError(f"need n_samples >= 2, num_keys >= 2 and positive d_k, got {n_samples}, {num_keys}, {d_ks}")
    if n_samples % num_keys != 0:
        raise ValueError(f"num_keys={num_keys} must divide n_samples={n_samples}")
    gen = torch.Generator().manual_seed(seed)
    n_rows = n_samples // num_keys
    rows, unscaled, scaled_boxes = [], {}, {}
    for d_k in d_ks:
        # q (N, d_k) then k (N, d_k) ~ N(0, I): q·k of each pair, drawn and reduced block by block
        scores = vecdot_of_draws(gen, n_samples, (d_k,), (d_k,))  # (N,)
        scaled = scores / math.sqrt(d_k)  # (N,)
        # one query (R, 1, d_k) per row against num_keys keys (R, num_keys, d_k), likewise
        row_scores = vecdot_of_draws(gen, n_rows, (1, d_k), (num_keys, d_k))  # (R, num_keys)
        w_unscaled = torch.softmax(row_scores, dim=-1).amax(dim=-1)  # (R,) largest weight per row
        w_scaled = torch.softmax(row_scores / math.sqrt(d_k), dim=-1).amax(dim=-1)  # (R,)
        rows.append(
            (
                d_k,
                float(scores.var()),
                float(scaled.var()),
                float(w_unscaled.mean()),
                float(w_scaled.mean()),
                float((w_unscaled * (1 - w_unscaled)).mean()),
                float((w_scaled * (1 - w_scaled)).mean()),
            )
        )
        unscaled[d_k] = _box_stats(scores)
        scaled_boxes[d_k] = _box_stats(scaled)
    return DkSweep(pd.DataFrame(rows, columns=list(DK_COLUMNS)), unscaled, scaled_boxes, n_samples, num_keys)


def vecdot_of_draws(
    gen: torch.Generator, n: int, a_shape: tuple[int, ...], b_shape: tuple[int, ...], block: int = DRAW_BLOCK
) -> Tensor:
    """``vecdot(randn(n, *a_shape), randn(n, *b_shape))`` drawn from ``gen``, holding neither draw whole.

    The result is bit for bit what drawing ``a`` whole, then ``b`` whole, then reducing gives,
    and ``gen`` ends where those two draws leave it: a copy of ``gen`` draws ``a`` in blocks of
    rows while ``gen``, moved past ``a``, draws the matching blocks of ``b``. Every block but
    the last holds a multiple of 16 elements and the last at least 16 (or the whole draw),
    so torch's CPU normal sampler consumes and transforms the generator's numbers as in one
    draw. ``a`` is drawn twice (once to move ``gen`` past it) so that neither the
    (n, *a_shape) and (n, *b_shape) float32 tensors nor their product are ever held whole.

    Args:
        gen: CPU generator, advanced past both draws.
        n: rows of each draw.
        a_shape, b_shape: shapes of one row of each draw; they broadcast, last sizes equal.
        block: most elements of one draw's block (at least 16 per block whatever its value).

    Returns:
        (n, *broadcast(a_shape, b_shape)[:-1]) float32.

    Raises:
        ValueError: if ``n`` is not positive or a row shape is empty or holds a size below 1.
        RuntimeError: (torch's) if the row shapes do not broadcast or their last sizes differ.
    """
    if n < 1 or not a_shape or not b_shape or min(a_shape + b_shape) < 1:
        raise ValueError(f"need n >= 1 and non-empty positive row shapes, got {n}, {a_shape}, {b_shape}")
    size_a, size_b = math.prod(a_shape), math.prod(b_shape)
    unit = math.lcm(_NORMAL_BLOCK // math.gcd(_NORMAL_BLOCK, size_a), _NORMAL_BLOCK // math.gcd(_NORMAL_BLOCK, size_b))
    step = max(unit, block // max(size_a, size_b) // unit * unit)  # rows per block
    starts = list(range(0, n, step))
    if len(starts) > 1 and (n - starts[-1]) * min(size_a, size_b) < _NORMAL_BLOCK:
        starts.pop()  # a last block under 16 elements joins the one before it
    counts = [end - start for start, end in zip(starts, starts[1:] + [n], strict=True)]
    gen_a = torch.Generator().set_state(gen.get_state())
    for count in counts:
        torch.randn(count, *a_shape, generator=gen)  # moves gen past a, to where b starts
    parts = [
        torch.linalg.vecdot(torch.randn(count, *a_shape, generator=gen_a), torch.randn(count, *b_shape, generator=gen))
        for count in counts
    ]  # each (count, *a_shape), (count, *b_shape) -> (count, *broadcast[:-1])
    return torch.cat(parts)  # (n, *broadcast[:-1])


def _box_stats(x: Tensor) -> BoxStats:
    """Quartiles, 1st/99th percentiles and extremes of a 1-d sample, as floats."""
    qs = torch.quantile(x.double(), torch.tensor([0.01, 0.25, 0.5, 0.75, 0.99], dtype=torch.float64))
    p1, q1, median, q3, p99 = (float(v) for v in qs)
    return BoxStats(p1, q1, median, q3, p99, float(x.min()), float(x.max()))


@uses_global_rng
def init_comparison(
    d_ins: tuple[int, ...] = INIT_D_INS, d_out: int = 512, n_tokens: int = 256, seed: int = 0
) -> pd.DataFrame:
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
        DataFrame, one row per (d_in, init), columns :data:`INIT_COLUMNS`: ``d_in``, ``init``
        ("torch.rand" or "nn.Linear"), ``share_negative``, ``var_w`` (measured var(W)),
        ``var_w_theory``, ``var_xw`` (measured var(x·W)), ``var_xw_theory``.

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
            rows.append((d_in, name, float((w < 0).float().mean()), float(w.var()), var_w, float(out.var()), var_out))
    return pd.DataFrame(rows, columns=list(INIT_COLUMNS))


def _seeded_v1_v2(d_in: int, d_out: int, seed_v1: int, seed_v2: int) -> tuple[A.SelfAttention_v1, A.SelfAttention_v2]:
    """SelfAttention_v1 built right after ``manual_seed(seed_v1)``, SelfAttention_v2 after ``manual_seed(seed_v2)``."""
    torch.manual_seed(seed_v1)
    sa_v1 = A.SelfAttention_v1(d_in, d_out)
    torch.manual_seed(seed_v2)
    return sa_v1, A.SelfAttention_v2(d_in, d_out)


@uses_global_rng
def v1_v2_outputs(inputs: Tensor, d_out: int, seed_v1: int, seed_v2: int) -> V1V2Outputs:
    """SelfAttention_v1 and SelfAttention_v2 built after their own seeds, run on the inputs.

    Chapter: v1 with seed 123 and v2 with seed 789 at d_out 2.

    Args:
        inputs: (T, d_in).
        d_out: size of queries, keys and values.
        seed_v1, seed_v2: ``torch.manual_seed`` before building each module.

    Returns:
        :class:`V1V2Outputs`: (T, d_out) context vectors (no grad).

    Raises:
        ValueError: on a non-positive ``d_out`` or a non-2-d input.
    """
    sa_v1, sa_v2 = _seeded_v1_v2(inputs.shape[1], d_out, seed_v1, seed_v2)
    with torch.no_grad():
        return V1V2Outputs(sa_v1(inputs), sa_v2(inputs))


@uses_global_rng
def exercise_3_1(inputs: Tensor, d_out: int, seed_v1: int, seed_v2: int) -> Exercise31:
    """Exercise 3.1: copy SelfAttention_v2's weights (transposed) into SelfAttention_v1.

    Args:
        inputs: (T, d_in).
        d_out: size of queries, keys and values.
        seed_v1, seed_v2: seeds the two modules are built with.

    Returns:
        :class:`Exercise31`; equality after the copy is judged up to float rounding, never bit for bit.

    Raises:
        ValueError: on a non-positive ``d_out`` or a non-2-d input.
    """
    sa_v1, sa_v2 = _seeded_v1_v2(inputs.shape[1], d_out, seed_v1, seed_v2)
    with torch.no_grad():
        v1_before = sa_v1(inputs)  # (T, d_out)
        v2 = sa_v2(inputs)  # (T, d_out)
        A.copy_v2_into_v1(sa_v1, sa_v2)
        v1_after = sa_v1(inputs)  # (T, d_out)
    max_abs_diff_after = float((v1_after - v2).abs().max())
    return Exercise31(
        v1_before=v1_before,
        v2=v2,
        v1_after=v1_after,
        max_abs_diff_before=float((v1_before - v2).abs().max()),
        max_abs_diff_after=max_abs_diff_after,
        exactly_equal=max_abs_diff_after == 0.0,
        equal_after=_close(v1_after, v2),
    )


#: ``torch.testing.assert_close``'s default (rtol, atol) per dtype. The page does not call assert_close itself: its
#: first call imports torch.distributed's tensor types and SymPy, tens of megabytes in a server process.
CLOSE_TOLERANCES = {torch.float16: (1e-3, 1e-5), torch.bfloat16: (1.6e-2, 1e-5), torch.float32: (1.3e-6, 1e-5),
                    torch.float64: (1e-7, 1e-7)}


def _close(actual: Tensor, expected: Tensor) -> bool:
    """True when the pair has one shape and dtype and agrees within ``torch.testing.assert_close``'s default
    tolerances for that dtype (:data:`CLOSE_TOLERANCES`; NaN never equals NaN)."""
    if actual.shape != expected.shape or actual.dtype != expected.dtype or actual.dtype not in CLOSE_TOLERANCES:
        return False
    rtol, atol = CLOSE_TOLERANCES[actual.dtype]
    return bool(torch.allclose(actual, expected, rtol=rtol, atol=atol))


# --- the page's prediction gates (``ui/questions/trainable_weights.py``): their answers, which the page and its
# notebook's exercises both call ---------------------------------------------------------------------------------

#: The divisors a reader may believe in, by option key: d_k is the keys' size (d_out), d_model the embeddings' (d_in).
DIVISORS = {
    "sqrt_dk": lambda d_k, d_in: math.sqrt(d_k),
    "sqrt_dmodel": lambda d_k, d_in: math.sqrt(d_in),
    "dk": lambda d_k, d_in: float(d_k),
    "none": lambda d_k, d_in: 1.0,
}


def divisor_used(inputs: Tensor, seed: int, d_out: int, q: int) -> str:
    """The key of :data:`DIVISORS` whose divisor reproduces the weights of :func:`trainable_walkthrough` (the
    first one, in :data:`DIVISORS` order, when several give the same number)."""
    steps = trainable_walkthrough(inputs, seed, d_out, q)
    for key, divisor in DIVISORS.items():
        candidate = torch.softmax(steps.attn_scores / divisor(d_out, inputs.shape[1]), dim=-1)  # (T,)
        if torch.allclose(candidate, steps.attn_weights, atol=1e-6):
            return key
    raise ValueError("the walkthrough's weights match none of the divisors")


def largest_weight_trend(sweep: DkSweep) -> str:
    """How the mean largest softmax weight without the scale moves from the smallest to the largest d_k of
    :func:`dk_sweep`: ``grows``, ``stays`` (within 0.05) or ``shrinks``."""
    w_max = sweep.stats["w_max_unscaled"]
    change = float(w_max.iloc[-1] - w_max.iloc[0])
    return "stays" if abs(change) <= 0.05 else ("grows" if change > 0 else "shrinks")
