"""Section 5, multi-head attention: the experiments behind the page.

Sources: chapter ``003`` ("Mécanismes d'attention"), sections "stacking
single-head attention layers" (:class:`engine.attention.MultiHeadAttentionWrapper`,
exercise 3.2) and "multi-head attention with weight splits"
(:class:`engine.attention.MultiHeadAttention`); part 1 of lesson ``000``
(several heads: a 32-d vector cut into 4 heads of 8, one ``qkv`` Linear, the
parameter count that does not depend on the head count).

The lesson's layer, one Linear computing q, k and v together, is the
project's one fused-qkv class, :class:`engine.gpt.CausalSelfAttention` (the
chapter's classes keep three Linears); its parameters are counted with
:func:`engine.gpt.count_params`, the project's one counter.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd
import torch
from torch import Tensor

from engine import attention as A
from engine import chapter, gpt
from engine.diagrams.multi_head import SplitLayers, split_layers
from engine.rng import uses_global_rng
from engine.sections.memory_layout import score_tensor_bytes

#: Seed of the random character embeddings and the layer's weights on the page.
LESSON_SEED = 0
#: Longest line the layer is run on here.
MAX_LINE = 64


def divisors(n: int) -> list[int]:
    """Positive divisors of ``n`` in increasing order (the head counts that split ``n`` evenly).

    Raises:
        ValueError: if ``n < 1``.
    """
    if n < 1:
        raise ValueError(f"n must be positive, got {n}")
    return [k for k in range(1, n + 1) if n % k == 0]


@uses_global_rng
def check_split(d_out: int, num_heads: int) -> int:
    """``head_dim`` of a split of ``d_out`` into ``num_heads`` heads, as MultiHeadAttention checks it.

    Builds the chapter's :class:`engine.attention.MultiHeadAttention` (d_in 3,
    context_length 1), so the message is the class's own.

    Returns:
        ``d_out // num_heads``.

    Raises:
        ValueError: if a size is not positive or ``num_heads`` does not divide ``d_out``.
    """
    layer = A.MultiHeadAttention(3, d_out, context_length=1, dropout=0.0, num_heads=num_heads)
    return layer.head_dim


def nearest_divisors(d_out: int, num_heads: int) -> tuple[int, int]:
    """The closest head counts below and above ``num_heads`` that divide ``d_out`` (equal if it divides)."""
    divs = divisors(d_out)
    below = max([d for d in divs if d <= num_heads], default=divs[0])
    above = min([d for d in divs if d >= num_heads], default=divs[-1])
    return below, above


# ---------------------------------------------------------------------------
# The chapter's examples
# ---------------------------------------------------------------------------


def chapter_batch() -> Tensor:
    """The chapter's batch: the six 3-d embeddings twice, shape (2, 6, 3), float32."""
    inputs = A.chapter_inputs()
    return torch.stack((inputs, inputs), dim=0)  # 2 × (6, 3) -> (2, 6, 3)


@dataclass(frozen=True)
class HeadsOutput:
    """A multi-head layer's output on the chapter's batch.

    Attributes:
        context_vec: (2, 6, d_out) float32 context vectors.
        attn_weights: (2, num_heads, 6, 6) float32 attention weights.
    """

    context_vec: Tensor
    attn_weights: Tensor


@uses_global_rng
@torch.no_grad()
def wrapper_output(seed: int = chapter.MHA_WRAPPER_SEED, d_out: int = 2, num_heads: int = 2) -> HeadsOutput:
    """The chapter's MultiHeadAttentionWrapper on its batch (d_in 3, context_length 6, dropout 0).

    With seed 123, d_out 2 and 2 heads the first sequence equals
    :data:`engine.chapter.MHA_WRAPPER_OUTPUT`; with ``d_out=1`` this is
    exercise 3.2 (2 heads of 1 give 2-d context vectors).

    Returns:
        :class:`HeadsOutput` with context_vec (2, 6, num_heads·d_out) and attn_weights (2, num_heads, 6, 6).

    Raises:
        ValueError: on non-positive sizes.
    """
    torch.manual_seed(seed)
    wrapper = A.MultiHeadAttentionWrapper(3, d_out, context_length=6, dropout=0.0, num_heads=num_heads)
    context_vec, attn_weights = wrapper(chapter_batch(), return_weights=True)
    return HeadsOutput(context_vec, attn_weights)


@uses_global_rng
@torch.no_grad()
def split_output(seed: int = chapter.MHA_SPLIT_SEED, d_out: int = 2, num_heads: int = 2) -> HeadsOutput:
    """The chapter's MultiHeadAttention (weight splits, out_proj) on its batch (d_in 3, dropout 0).

    With seed 123, d_out 2 and 2 heads the first row equals
    :data:`engine.chapter.MHA_SPLIT_FIRST_ROW`.

    Returns:
        :class:`HeadsOutput` with context_vec (2, 6, d_out) and attn_weights (2, num_heads, 6, 6).

    Raises:
        ValueError: if ``num_heads`` does not divide ``d_out`` (the class's message).
    """
    torch.manual_seed(seed)
    mha = A.MultiHeadAttention(3, d_out, context_length=6, dropout=0.0, num_heads=num_heads)
    context_vec, attn_weights = mha(chapter_batch(), return_weights=True)
    return HeadsOutput(context_vec, attn_weights)


@dataclass(frozen=True)
class CopyComparison:
    """The wrapper's heads against the split layer's, before and after copying the weights.

    Attributes:
        wrapper: (2, 6, d_out) the wrapper's context vectors.
        split: (2, 6, d_out) the split layer's, before ``out_proj``, after the copy.
        max_abs_diff_before: largest |split − wrapper| before the copy.
        max_abs_diff: the same after the copy (float rounding: below 1e-6).
    """

    wrapper: Tensor
    split: Tensor
    max_abs_diff_before: float
    max_abs_diff: float


@uses_global_rng
@torch.no_grad()
def wrapper_vs_split(seed: int = chapter.MHA_WRAPPER_SEED, head_dim: int = 2, num_heads: int = 2) -> CopyComparison:
    """Copy the wrapper's per-head weights into the split layer and compare the heads' outputs.

    The wrapper's head h (W_* of shape (head_dim, d_in)) becomes rows
    ``h·head_dim … (h+1)·head_dim`` of the split layer's W_* (d_out, d_in), via
    :func:`engine.attention.copy_wrapper_into_split`. Compared before
    ``out_proj`` (``return_heads=True``), the two layers then agree to float
    rounding; before the copy they do not.

    Args:
        seed: seed of the wrapper; the split layer is seeded with ``seed + 1``
            so the "before" comparison starts from different weights.
        head_dim: width of each wrapper head (the wrapper's d_out).
        num_heads: number of heads; the split layer has d_out = num_heads·head_dim.
    """
    batch = chapter_batch()
    torch.manual_seed(seed)
    wrapper = A.MultiHeadAttentionWrapper(3, head_dim, context_length=6, dropout=0.0, num_heads=num_heads)
    torch.manual_seed(seed + 1)
    mha = A.MultiHeadAttention(3, head_dim * num_heads, context_length=6, dropout=0.0, num_heads=num_heads)
    from_wrapper = wrapper(batch)  # (2, 6, H·d_h)
    before = mha(batch, return_heads=True)  # (2, 6, d_out), before out_proj
    A.copy_wrapper_into_split(wrapper, mha)
    after = mha(batch, return_heads=True)  # (2, 6, d_out)
    return CopyComparison(
        wrapper=from_wrapper,
        split=after,
        max_abs_diff_before=float((before - from_wrapper).abs().max()),
        max_abs_diff=float((after - from_wrapper).abs().max()),
    )


# ---------------------------------------------------------------------------
# The lesson's line, head by head
# ---------------------------------------------------------------------------


def line_embeddings(line: str, n_embd: int, seed: int = LESSON_SEED) -> Tensor:
    """Random (seeded) embeddings of a line's characters, one row per character: (1, T, n_embd).

    Stands in for an untrained GPT's token embedding: each distinct character
    gets one N(0, 1) vector (the table is indexed by the characters sorted), so
    a repeated character gets the same vector.

    Raises:
        ValueError: on an empty line or ``n_embd < 1``.
    """
    if not line:
        raise ValueError("the line is empty; type at least one character")
    if n_embd < 1:
        raise ValueError(f"n_embd must be positive, got {n_embd}")
    vocab = sorted(set(line))
    g = torch.Generator().manual_seed(seed)
    table = torch.randn(len(vocab), n_embd, generator=g)  # (vocab, n_embd)
    ids = torch.tensor([vocab.index(ch) for ch in line])  # (T,)
    return table[ids].unsqueeze(0)  # (T, n_embd) -> (1, T, n_embd)


def lesson_config(n_embd: int, num_heads: int, block_size: int = 1) -> gpt.GPTConfig:
    """The GPT config of the lesson's attention layer: biases on, no dropout, causal, learned positions.

    Raises:
        ValueError: if ``num_heads`` does not divide ``n_embd`` or a size is not positive (GPTConfig's message).
    """
    return gpt.GPTConfig(n_embd=n_embd, n_head=num_heads, block_size=block_size, n_layer=1, bias=True, dropout=0.0)


@dataclass(frozen=True)
class ParamCounts:
    """Parameters of the lesson's attention layer.

    Attributes:
        qkv: 3·n_embd² weights + 3·n_embd biases (n_embd 32: 3168).
        proj: n_embd² weights + n_embd biases (n_embd 32: 1056).
        total: qkv + proj.
    """

    qkv: int
    proj: int
    total: int


def param_counts(n_embd: int, num_heads: int) -> ParamCounts:
    """Parameters of :class:`engine.gpt.CausalSelfAttention` for this width and head count.

    Summed over the shapes the layer stores (:func:`engine.gpt.attention_shapes`: nothing is built, no
    random numbers drawn); neither count depends on ``num_heads``, which only splits the same matrices.

    Raises:
        ValueError: if ``num_heads`` does not divide ``n_embd``.
    """
    shapes = gpt.attention_shapes(lesson_config(n_embd, num_heads))
    qkv, proj = (sum(math.prod(shape) for name, shape in shapes.items() if name.startswith(part))
                 for part in ("qkv.", "proj."))
    return ParamCounts(qkv=qkv, proj=proj, total=qkv + proj)


@dataclass(frozen=True)
class AttentionSteps:
    """Every intermediate tensor of :class:`engine.gpt.CausalSelfAttention` on one input (B, T, C).

    Attributes:
        x: (B, T, C) input. qkv: (B, T, 3C). q: (B, T, C), the first third.
        q_heads, k_heads, v_heads: (B, H, T, d_h), cut into heads (views, not contiguous).
        attn_scores: (B, H, T, T), q·kᵀ / √d_h before the mask.
        attn_weights: (B, H, T, T), causal softmax; rows sum to 1.
        context_heads: (B, H, T, d_h). merged: (B, T, C), heads joined. context_vec: (B, T, C) after proj.
    """

    x: Tensor
    qkv: Tensor
    q: Tensor
    q_heads: Tensor
    k_heads: Tensor
    v_heads: Tensor
    attn_scores: Tensor
    attn_weights: Tensor
    context_heads: Tensor
    merged: Tensor
    context_vec: Tensor


@torch.no_grad()
def attention_steps(layer: gpt.CausalSelfAttention, x: Tensor) -> AttentionSteps:
    """Run ``layer`` (causal, no dropout, no RoPE) step by step, keeping every intermediate tensor.

    The same operations as ``CausalSelfAttention.forward`` on its manual path, written out
    with the layer's own ``qkv``, ``mask`` and ``proj``; the results equal
    ``layer(x, return_weights=True)``.

    Args:
        layer: a causal :class:`engine.gpt.CausalSelfAttention` without rotary positions.
        x: float (B, T, C), C = the layer's n_embd, T <= its block_size.

    Raises:
        ValueError: if x is not 3-d or T exceeds the layer's mask.
    """
    if x.dim() != 3:
        raise ValueError(f"x must be (B, T, C), got shape {tuple(x.shape)}")
    B, T, C = x.shape
    if T > layer.mask.size(0):
        raise ValueError(f"{T} tokens but the layer's block_size is {layer.mask.size(0)}")
    H = layer.n_head
    d_h = C // H
    qkv = layer.qkv(x)  # (B, T, C) -> (B, T, 3C)
    q, k, v = qkv.split(C, dim=2)  # (B, T, 3C) -> 3 × (B, T, C)
    q_heads = q.view(B, T, H, d_h).transpose(1, 2)  # (B, T, C) -> (B, T, H, d_h) -> (B, H, T, d_h)
    k_heads = k.view(B, T, H, d_h).transpose(1, 2)  # (B, T, C) -> (B, H, T, d_h)
    v_heads = v.view(B, T, H, d_h).transpose(1, 2)  # (B, T, C) -> (B, H, T, d_h)
    attn_scores = q_heads @ k_heads.transpose(-2, -1) / d_h**0.5  # (B, H, T, d_h) @ (B, H, d_h, T) -> (B, H, T, T)
    masked = attn_scores.masked_fill(~layer.mask[:T, :T], float("-inf"))  # future keys hidden
    attn_weights = torch.softmax(masked, dim=-1)  # (B, H, T, T), rows sum to 1
    context_heads = attn_weights @ v_heads  # (B, H, T, T) @ (B, H, T, d_h) -> (B, H, T, d_h)
    merged = context_heads.transpose(1, 2).contiguous().view(B, T, C)  # (B, H, T, d_h) -> (B, T, H, d_h) -> (B, T, C)
    context_vec = layer.proj(merged)  # (B, T, C)
    return AttentionSteps(x, qkv, q, q_heads, k_heads, v_heads, attn_scores, attn_weights, context_heads, merged,
                          context_vec)


#: The rows of the shape table: (stable key, the code that makes the tensor, the AttentionSteps field).
SHAPE_STEPS: tuple[tuple[str, str, str], ...] = (
    ("input", "x", "x"),
    ("qkv", "qkv = self.qkv(x)", "qkv"),
    ("q_split", "q, k, v = qkv.split(n_embd, dim=2)", "q"),
    ("q_heads", "q.view(B, T, H, d_h).transpose(1, 2)", "q_heads"),
    ("attn_scores", "q @ k.transpose(-2, -1) / √d_h", "attn_scores"),
    ("attn_weights", "softmax(masked scores)", "attn_weights"),
    ("context_heads", "attn_weights @ v", "context_heads"),
    ("merged", "transpose(1, 2).contiguous().view(B, T, n_embd)", "merged"),
    ("context_vec", "self.proj(merged)", "context_vec"),
)


def shape_table(steps: AttentionSteps) -> pd.DataFrame:
    """One row per step of :data:`SHAPE_STEPS`.

    Returns:
        DataFrame with ``step`` (its key), ``code``, ``shape``, ``stride`` (as text) and ``is_contiguous``.
    """
    rows = []
    for key, code, field in SHAPE_STEPS:
        t = getattr(steps, field)
        rows.append({"step": key, "code": code, "shape": str(tuple(t.shape)), "stride": str(tuple(t.stride())),
                     "is_contiguous": bool(t.is_contiguous())})
    return pd.DataFrame(rows)


@dataclass(frozen=True)
class HeadsOnLine:
    """The lesson's untrained attention layer run on one line.

    Attributes:
        tokens: the T characters.
        attn_weights: (H, T, T) float32, one causal weight matrix per head.
        shapes: :func:`shape_table` of the run.
        params: :func:`param_counts` of the layer.
        score_bytes: bytes of the float32 (1, H, T, T) score tensor.
        layers: the layer's linear layers with their sizes, read from the module that ran (the diagram's boxes).
    """

    tokens: list[str]
    attn_weights: Tensor
    shapes: pd.DataFrame
    params: ParamCounts
    score_bytes: int
    layers: SplitLayers


@uses_global_rng
@torch.no_grad()
def heads_on_line(line: str = chapter.LESSON_LINE, n_embd: int = chapter.LESSON_N_EMBD, num_heads: int = 4,
                  seed: int = LESSON_SEED) -> HeadsOnLine:
    """Run the lesson's untrained attention layer on a line and return every head's weights.

    The layer is :class:`engine.gpt.CausalSelfAttention` (:func:`lesson_config`: biases on,
    causal, no dropout) with weights seeded by ``seed``; inputs come from :func:`line_embeddings`;
    it is run step by step by :func:`attention_steps`.

    Args:
        line: the characters (T = len(line), 1 … :data:`MAX_LINE`).
        n_embd: model width; 32 as in the lesson.
        num_heads: must divide ``n_embd``.
        seed: seed of embeddings and weights.

    Raises:
        ValueError: on an empty or too long line, or a head count that does not divide ``n_embd``.
    """
    if len(line) > MAX_LINE:
        raise ValueError(f"at most {MAX_LINE} characters here, got {len(line)}")
    x = line_embeddings(line, n_embd, seed)  # (1, T, n_embd)
    config = lesson_config(n_embd, num_heads, block_size=len(line))
    torch.manual_seed(seed)
    layer = gpt.CausalSelfAttention(config).eval()
    steps = attention_steps(layer, x)
    return HeadsOnLine(
        tokens=list(line),
        attn_weights=steps.attn_weights[0],  # (1, H, T, T) -> (H, T, T)
        shapes=shape_table(steps),
        params=param_counts(n_embd, num_heads),
        score_bytes=score_tensor_bytes(1, num_heads, len(line), steps.attn_scores.element_size()),
        layers=split_layers(layer),
    )


@dataclass(frozen=True)
class PageLine:
    """The line the page runs, and why it differs from what the reader typed.

    Attributes:
        line: the characters used.
        issue: None, ``"empty"`` (the lesson's line is used instead) or ``"too_long"`` (cut to the limit).
        typed_length: how many characters the reader typed.
    """

    line: str
    issue: str | None
    typed_length: int


def page_line(typed: str, max_length: int) -> PageLine:
    """The reader's line, or the lesson's when it is empty, cut to ``max_length`` characters."""
    if not typed:
        return PageLine(chapter.LESSON_LINE, "empty", 0)
    if len(typed) > max_length:
        return PageLine(typed[:max_length], "too_long", len(typed))
    return PageLine(typed, None, len(typed))


def cost_table(n_embd: int, lengths: Sequence[int], batch: int = 1) -> pd.DataFrame:
    """Parameters and score-tensor bytes for every head count that divides ``n_embd``.

    Args:
        n_embd: model width.
        lengths: sequence lengths T to price the score tensor at.
        batch: B of the score tensor.

    Returns:
        DataFrame with ``num_heads``, ``head_dim``, ``qkv_params``, ``proj_params``
        (constant down the columns) and one ``scores_bytes_<T>`` column per length
        (float32 (batch, H, T, T), growing with H and T²).
    """
    rows = []
    for H in divisors(n_embd):
        counts = param_counts(n_embd, H)
        row = {"num_heads": H, "head_dim": n_embd // H, "qkv_params": counts.qkv, "proj_params": counts.proj}
        for T in lengths:
            row[f"scores_bytes_{T}"] = score_tensor_bytes(batch, H, T)
        rows.append(row)
    return pd.DataFrame(rows)


@dataclass(frozen=True)
class SplitCheck:
    """Whether ``d_out`` splits into ``num_heads`` heads, as MultiHeadAttention checks it.

    Attributes:
        head_dim: ``d_out // num_heads`` when the split works, else None.
        error: the class's own ValueError text when it refuses, else None.
        ratio: ``d_out / num_heads`` (not whole when refused).
        nearest: the closest head counts that divide ``d_out`` (one or two, increasing).
    """

    head_dim: int | None
    error: str | None
    ratio: float
    nearest: tuple[int, ...]


def split_check(d_out: int, num_heads: int) -> SplitCheck:
    """:func:`check_split`, with the nearest head counts that work when it refuses.

    Raises:
        ValueError: if a size is not positive.
    """
    if d_out < 1 or num_heads < 1:
        raise ValueError(f"sizes must be positive, got d_out={d_out}, num_heads={num_heads}")
    nearest = tuple(sorted(set(nearest_divisors(d_out, num_heads))))
    try:
        return SplitCheck(check_split(d_out, num_heads), None, d_out / num_heads, nearest)
    except ValueError as err:
        return SplitCheck(None, str(err), d_out / num_heads, nearest)


#: Columns of :func:`bench_rows`: (stable key, column of ``engine.bench.attention.results_table``).
BENCH_COLUMNS = (
    ("variant", "variant"),
    ("forward_ms", "forward ms"),  # data key
    ("forward_ratio", "× fastest (fwd)"),
    ("forward_backward_ms", "forward+backward ms"),  # data key
    # the fastest single run: None in files written before it was recorded
    ("forward_min_ms", "forward min ms"),  # data key
    ("max_abs_diff", "max |out − split|"),
    ("stable", "stable"),
    ("ordered", "ordered"),
)


def bench_rows(table: pd.DataFrame, size_label: str, results: Sequence[dict] = ()) -> pd.DataFrame:
    """The rows of one input size of a benchmark results table, with the page's few columns.

    Args:
        table: ``engine.bench.attention.results_table`` output.
        size_label: the ``size`` value to keep.
        results: that size's ``results`` entries of the file, whose ``forward_samples_ms`` give each variant's
            interquartile range (the spread :func:`bench_verdict` compares medians with).

    Returns:
        DataFrame with the stable columns of :data:`BENCH_COLUMNS`, one row per variant, and ``forward_iqr``
        after ``forward_ms``: the ``(q1, q3)`` of :func:`interquartile_range`, None for a variant without recorded
        runs. A variant whose forward+backward median is not above its forward median (``ordered`` False: the
        load changed during the run, since the backward pass only adds work) gets no forward+backward time
        (None): a table or chart never shows forward+backward faster than forward alone.
    """
    rows = table[table["size"] == size_label]
    frame = pd.DataFrame({key: rows[column].tolist() if column in rows else [None] * len(rows)
                          for key, column in BENCH_COLUMNS})
    frame["ordered"] = frame["ordered"].map(lambda v: v is not False)
    frame["forward_backward_ms"] = frame["forward_backward_ms"].astype(object).where(frame["ordered"], None)
    quartiles = {r.get("variant"): interquartile_range(r.get("forward_samples_ms")) for r in results}
    frame.insert(frame.columns.get_loc("forward_ms") + 1, "forward_iqr",
                 pd.Series([quartiles.get(v) for v in frame["variant"]], index=frame.index, dtype=object))
    return frame


@dataclass(frozen=True)
class BenchVerdict:
    """What one input size of a benchmark file says about the chapter's two constructions.

    Attributes:
        batch, seq_len, n_embd, num_heads: the input size (B, T, C, H).
        wrapper_ms, split_ms: median forward time of MultiHeadAttentionWrapper (+ out_proj) and of
            MultiHeadAttention, in milliseconds.
        wrapper_faster: True when the wrapper's median is below the split layer's.
        ratio: the slower median over the faster one (>= 1).
        wrapper_iqr, split_iqr: the first and third quartiles of each one's recorded forward runs, in ms
            (None for a file without per-run times).
        within_noise: True when both recorded runs and :func:`within_noise_of` holds for them (a median inside
            the other's interquartile range, either way), so the gap between them is no larger than the spread of
            the runs and the file cannot say which is faster: the same rule as ``fastest_rivals``.
        fastest: the variant key with the lowest median forward time, and its time in ms.
        fastest_iqr: the first and third quartiles of ``fastest``'s forward runs (None without per-run times).
        fastest_rivals: the other variants, by median, that ``fastest`` is within the noise of: one's median
            lies inside the other's interquartile range (either way), or their medians are equal. Empty when
            ``fastest`` is faster than every other variant beyond the spread of the runs.
        score_bytes: bytes of the float32 (B, H, T, T) score tensor the split layer sweeps; head_bytes: one
            head's (B, T, T) slice, what the wrapper handles at a time.
    """

    batch: int
    seq_len: int
    n_embd: int
    num_heads: int
    wrapper_ms: float
    split_ms: float
    wrapper_faster: bool
    ratio: float
    fastest: str
    fastest_ms: float
    score_bytes: int
    head_bytes: int
    wrapper_iqr: tuple[float, float] | None = None
    split_iqr: tuple[float, float] | None = None
    within_noise: bool = False
    fastest_rivals: tuple[str, ...] = ()
    fastest_iqr: tuple[float, float] | None = None


MAX_BENCH_SAMPLES = 10_000


def interquartile_range(samples) -> tuple[float, float] | None:
    """The first and third quartiles of one variant's recorded run times (``statistics.quantiles``, inclusive).

    Args:
        samples: the ``forward_samples_ms`` list of a benchmark file, positive finite numbers.

    Returns:
        ``(q1, q3)`` in the samples' unit, or None when ``samples`` is not a list of 2 to
        :data:`MAX_BENCH_SAMPLES` positive finite numbers (a file that did not record its runs).
    """
    if not isinstance(samples, list) or not 2 <= len(samples) <= MAX_BENCH_SAMPLES:
        return None
    if not all(isinstance(v, int | float) and not isinstance(v, bool) and 0 < v < math.inf for v in samples):
        return None
    q1, _median, q3 = statistics.quantiles([float(v) for v in samples], n=4, method="inclusive")
    return q1, q3


def within_noise_of(median_a: float, iqr_a: tuple[float, float] | None, median_b: float,
                    iqr_b: tuple[float, float] | None) -> bool:
    """Whether two variants' medians are within the noise of each other's runs.

    Args:
        median_a, median_b: the two median forward times (ms).
        iqr_a, iqr_b: their interquartile ranges (:func:`interquartile_range`), None for a variant without
            recorded runs, whose side is then judged by its median alone.

    Returns:
        True when the medians are equal or either median lies inside the other's interquartile range: then the
        gap between them is no larger than the spread of one of them, and the file cannot order the two.
    """
    return (median_a == median_b or (iqr_b is not None and iqr_b[0] <= median_a <= iqr_b[1])
            or (iqr_a is not None and iqr_a[0] <= median_b <= iqr_a[1]))


def bench_verdict(size: dict) -> BenchVerdict | None:
    """Which of the chapter's two constructions was faster at one input size of a benchmark file.

    Args:
        size: one entry of the file's ``sizes`` (``engine.bench.attention`` schema: ``batch``, ``seq_len``,
            ``n_embd``, ``num_heads`` and ``results``, a list of ``{"variant", "forward_ms", …}``).

    Returns:
        A :class:`BenchVerdict`, or None when the entry lacks the wrapper or the split layer, or a
        positive time for them (a file from another version of the benchmark). The two count as equal
        (``within_noise``) when one's median lies inside the other's interquartile range: a load that
        moved during the run spreads every variant's runs, and a gap smaller than that spread says nothing
        about which construction is faster. An entry without per-run times is judged by its medians alone.
        The variant with the lowest median is named fastest of all only when it is within the noise
        (:func:`within_noise_of`) of no other variant; the others it is within the noise of are its
        ``fastest_rivals``. The rule looks at every variant, not only the runner-up by median: a variant
        with a higher median can have runs spread lower than the runner-up's, and it looks at the fastest's
        own spread as well as the others', since a fastest median whose own runs range over every other
        median does not order them.
    """
    try:
        times = {r["variant"]: float(r["forward_ms"]) for r in size["results"]}
        samples = {r["variant"]: r.get("forward_samples_ms") for r in size["results"]}
        batch, seq_len = int(size["batch"]), int(size["seq_len"])
        n_embd, num_heads = int(size["n_embd"]), int(size["num_heads"])
        wrapper, split = times["wrapper"], times["split"]
    except (AttributeError, KeyError, TypeError, ValueError):
        return None
    if not (wrapper > 0 and split > 0) or min(batch, seq_len, n_embd, num_heads) < 1:
        return None
    fastest = min(times, key=times.get)
    quartiles = {name: interquartile_range(runs) for name, runs in samples.items()}
    rivals = tuple(sorted((name for name in times if name != fastest and within_noise_of(
        times[fastest], quartiles[fastest], times[name], quartiles[name])), key=times.get))
    scores = score_tensor_bytes(batch, num_heads, seq_len)
    wrapper_iqr, split_iqr = quartiles["wrapper"], quartiles["split"]
    # one rule for the two constructions and for the fastest variant's rivals, so the page cannot call split
    # "faster" than the wrapper in one sentence and "within the noise" of it in the next
    within_noise = wrapper_iqr is not None and split_iqr is not None and within_noise_of(wrapper, wrapper_iqr, split,
                                                                                          split_iqr)
    return BenchVerdict(batch=batch, seq_len=seq_len, n_embd=n_embd, num_heads=num_heads, wrapper_ms=wrapper,
                        split_ms=split, wrapper_faster=wrapper < split, ratio=max(wrapper, split) / min(wrapper, split),
                        fastest=fastest, fastest_ms=times[fastest], score_bytes=scores,
                        head_bytes=scores // num_heads, wrapper_iqr=wrapper_iqr, split_iqr=split_iqr,
                        within_noise=within_noise, fastest_rivals=rivals, fastest_iqr=quartiles[fastest])


# --- the page's prediction gates (``ui/questions/multi_head.py``): their answers, which the page and its
# notebook's exercises both call ---------------------------------------------------------------------------------


def qkv_count(n_embd: int, num_heads: int) -> float:
    """The qkv projection's parameters (weights and biases) of :func:`param_counts`."""
    return float(param_counts(n_embd, num_heads).qkv)


def heads_trend(n_embd: int) -> str:
    """How the qkv count of :func:`param_counts` moves from 1 head to the most heads n_embd allows: ``same``,
    ``more`` or ``fewer``."""
    one, most = (param_counts(n_embd, h).qkv for h in (1, max(divisors(n_embd))))
    return "same" if one == most else ("more" if most > one else "fewer")
