"""Section 5, multi-head attention: the experiments behind the page.

Sources: chapter ``003`` ("Mécanismes d'attention"), sections "stacking
single-head attention layers" (:class:`engine.attention.MultiHeadAttentionWrapper`,
exercise 3.2) and "multi-head attention with weight splits"
(:class:`engine.attention.MultiHeadAttention`); part 1 of lesson ``000``
(several heads: a 32-d vector cut into 4 heads of 8, one ``qkv`` Linear, the
parameter count that does not depend on the head count).

The lesson's layer, one Linear computing q, k and v together, is
:class:`FusedQKVAttention` (the chapter's classes keep three Linears); the
benchmark ``python -m engine.bench attention`` times it beside the chapter's
classes.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import pandas as pd
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from engine import attention as A
from engine import chapter
from engine.layout import score_tensor_bytes
from engine.rng import uses_global_rng

#: The lesson's example line ("the white sun sets behind the mountains"), 5 characters.
LESSON_LINE = "白日依山尽"
#: Seed of the random character embeddings and the layer's weights on the page.
LESSON_SEED = 0
#: Ways :class:`FusedQKVAttention` can compute attention once q, k, v are split into heads.
BACKENDS = ("manual", "einsum", "sdpa_causal", "sdpa_mask")


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


class FusedQKVAttention(nn.Module):
    """Causal multi-head self-attention with one Linear for q, k and v (lesson ``000``, part 1).

    ``qkv`` maps n_embd -> 3·n_embd; its output is split into q, k, v, each cut
    into ``num_heads`` heads of ``head_dim = n_embd // num_heads`` by
    view/transpose; ``proj`` mixes the re-joined heads. Parameters:
    ``qkv`` n_embd·3·n_embd (+ 3·n_embd bias), ``proj`` n_embd² (+ n_embd), the
    same for every head count (n_embd 32 with biases: 3168 and 1056).

    Args:
        n_embd: model width (d_in = d_out).
        num_heads: number of heads; must divide ``n_embd``.
        context_length: longest sequence the causal mask covers.
        bias: biases in ``qkv`` and ``proj``.
        backend: how attention is computed after the split: "manual" (matmul,
            ``masked_fill(-inf)``, softmax, matmul), "einsum" (the same with
            ``torch.einsum``), "sdpa_causal" (``F.scaled_dot_product_attention``
            with ``is_causal=True``) or "sdpa_mask" (the same kernel given an
            explicit boolean mask).

    Shapes:
        ``forward(x)``: x (B, T, n_embd) float -> context_vec (B, T, n_embd)
        [, attn_weights (B, num_heads, T, T), only for "manual" and "einsum"].

    Raises:
        ValueError: if ``num_heads`` does not divide ``n_embd``, a size is not
            positive, the backend is unknown, the input is not 3-d, ``T >
            context_length``, or weights are asked of an SDPA backend.
    """

    def __init__(self, n_embd: int, num_heads: int, context_length: int, bias: bool = True, backend: str = "manual"):
        super().__init__()
        if n_embd < 1 or num_heads < 1 or context_length < 1:
            raise ValueError(f"sizes must be positive, got n_embd={n_embd}, num_heads={num_heads}, "
                             f"context_length={context_length}")
        if n_embd % num_heads != 0:
            raise ValueError(f"n_embd={n_embd} is not divisible by num_heads={num_heads}")
        if backend not in BACKENDS:
            raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
        self.n_embd = n_embd
        self.num_heads = num_heads
        self.head_dim = n_embd // num_heads
        self.context_length = context_length
        self.backend = backend
        self.qkv = nn.Linear(n_embd, 3 * n_embd, bias=bias)  # W_query | W_key | W_value stacked
        self.proj = nn.Linear(n_embd, n_embd, bias=bias)
        # allowed[i, j] is True where query i may look at key j (j <= i): SDPA's boolean-mask convention.
        self.register_buffer("allowed", torch.ones(context_length, context_length, dtype=torch.bool).tril())

    def forward(self, x: Tensor, return_weights: bool = False, return_steps: bool = False):
        """Run the layer.

        Args:
            x: (B, T, n_embd).
            return_weights: also return attn_weights (B, H, T, T).
            return_steps: return a dict of every intermediate tensor instead
                (``x``, ``qkv``, ``q``, ``q_heads``, ``k_heads``, ``v_heads``,
                ``attn_scores``, ``attn_weights``, ``context_heads``, ``merged``,
                ``context_vec``), for the shape table; manual/einsum only.
        """
        if x.dim() != 3:
            raise ValueError(f"x must be (B, T, n_embd), got shape {tuple(x.shape)}")
        B, T, C = x.shape
        if C != self.n_embd:
            raise ValueError(f"x has {C} features, the layer expects n_embd={self.n_embd}")
        if T > self.context_length:
            raise ValueError(f"input has {T} tokens but context_length is {self.context_length}")
        if (return_weights or return_steps) and self.backend.startswith("sdpa"):
            raise ValueError("the SDPA backends never form the attention weights; use backend 'manual'")
        qkv = self.qkv(x)  # (B, T, C) -> (B, T, 3C)
        q, k, v = qkv.split(C, dim=2)  # (B, T, 3C) -> 3 × (B, T, C)
        q_heads = q.view(B, T, self.num_heads, self.head_dim).transpose(1, 2)  # (B, T, C) -> (B, H, T, d_h)
        k_heads = k.view(B, T, self.num_heads, self.head_dim).transpose(1, 2)  # (B, T, C) -> (B, H, T, d_h)
        v_heads = v.view(B, T, self.num_heads, self.head_dim).transpose(1, 2)  # (B, T, C) -> (B, H, T, d_h)
        allowed = self.allowed[:T, :T]  # (T, T)
        attn_scores = attn_weights = None
        if self.backend == "sdpa_causal":
            context_heads = F.scaled_dot_product_attention(q_heads, k_heads, v_heads, is_causal=True)  # (B, H, T, d_h)
        elif self.backend == "sdpa_mask":
            context_heads = F.scaled_dot_product_attention(q_heads, k_heads, v_heads, attn_mask=allowed)  # (B, H, T, d_h)
        else:
            if self.backend == "einsum":
                attn_scores = torch.einsum("bhtd,bhsd->bhts", q_heads, k_heads)  # (B, H, T, d_h) x2 -> (B, H, T, T)
            else:
                attn_scores = q_heads @ k_heads.transpose(-2, -1)  # (B, H, T, d_h) @ (B, H, d_h, T) -> (B, H, T, T)
            masked = attn_scores.masked_fill(~allowed, float("-inf"))
            attn_weights = torch.softmax(masked / math.sqrt(self.head_dim), dim=-1)  # (B, H, T, T)
            if self.backend == "einsum":
                context_heads = torch.einsum("bhts,bhsd->bhtd", attn_weights, v_heads)  # -> (B, H, T, d_h)
            else:
                context_heads = attn_weights @ v_heads  # (B, H, T, T) @ (B, H, T, d_h) -> (B, H, T, d_h)
        merged = context_heads.transpose(1, 2).contiguous().view(B, T, C)  # (B, H, T, d_h) -> (B, T, H, d_h) -> (B, T, C)
        context_vec = self.proj(merged)  # (B, T, C)
        if return_steps:
            return {
                "x": x, "qkv": qkv, "q": q, "q_heads": q_heads, "k_heads": k_heads, "v_heads": v_heads,
                "attn_scores": attn_scores, "attn_weights": attn_weights, "context_heads": context_heads,
                "merged": merged, "context_vec": context_vec,
            }
        return (context_vec, attn_weights) if return_weights else context_vec


# ---------------------------------------------------------------------------
# The chapter's examples
# ---------------------------------------------------------------------------


def chapter_batch() -> Tensor:
    """The chapter's batch: the six 3-d embeddings twice, shape (2, 6, 3), float32."""
    inputs = A.chapter_inputs()
    return torch.stack((inputs, inputs), dim=0)  # 2 × (6, 3) -> (2, 6, 3)


@uses_global_rng
@torch.no_grad()
def wrapper_output(seed: int = chapter.MHA_WRAPPER_SEED, d_out: int = 2, num_heads: int = 2) -> dict[str, Tensor]:
    """The chapter's MultiHeadAttentionWrapper on its batch (d_in 3, context_length 6, dropout 0).

    With seed 123, d_out 2 and 2 heads the first sequence equals
    :data:`engine.chapter.MHA_WRAPPER_OUTPUT`; with ``d_out=1`` this is
    exercise 3.2 (2 heads of 1 give 2-d context vectors).

    Returns:
        dict with ``context_vec`` (2, 6, num_heads·d_out) and ``attn_weights``
        (2, num_heads, 6, 6).

    Raises:
        ValueError: on non-positive sizes.
    """
    torch.manual_seed(seed)
    wrapper = A.MultiHeadAttentionWrapper(3, d_out, context_length=6, dropout=0.0, num_heads=num_heads)
    context_vec, attn_weights = wrapper(chapter_batch(), return_weights=True)
    return {"context_vec": context_vec, "attn_weights": attn_weights}


@uses_global_rng
@torch.no_grad()
def split_output(seed: int = chapter.MHA_SPLIT_SEED, d_out: int = 2, num_heads: int = 2) -> dict[str, Tensor]:
    """The chapter's MultiHeadAttention (weight splits, out_proj) on its batch (d_in 3, dropout 0).

    With seed 123, d_out 2 and 2 heads the first row equals
    :data:`engine.chapter.MHA_SPLIT_FIRST_ROW`.

    Returns:
        dict with ``context_vec`` (2, 6, d_out) and ``attn_weights`` (2, num_heads, 6, 6).

    Raises:
        ValueError: if ``num_heads`` does not divide ``d_out`` (the class's message).
    """
    torch.manual_seed(seed)
    mha = A.MultiHeadAttention(3, d_out, context_length=6, dropout=0.0, num_heads=num_heads)
    context_vec, attn_weights = mha(chapter_batch(), return_weights=True)
    return {"context_vec": context_vec, "attn_weights": attn_weights}


@uses_global_rng
@torch.no_grad()
def wrapper_vs_split(seed: int = chapter.MHA_WRAPPER_SEED, head_dim: int = 2, num_heads: int = 2) -> dict[str, Tensor | float]:
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

    Returns:
        dict with ``wrapper`` and ``split`` context vectors (2, 6, d_out)
        after the copy, ``max_abs_diff_before`` and ``max_abs_diff`` (floats).
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
    return {
        "wrapper": from_wrapper,
        "split": after,
        "max_abs_diff_before": float((before - from_wrapper).abs().max()),
        "max_abs_diff": float((after - from_wrapper).abs().max()),
    }


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


@uses_global_rng
def param_counts(n_embd: int, num_heads: int, bias: bool = True) -> dict[str, int]:
    """Parameters of the lesson's attention layer, counted on a real :class:`FusedQKVAttention`.

    Returns:
        dict with ``qkv`` (3·n_embd² + 3·n_embd), ``proj`` (n_embd² + n_embd)
        and ``total``; none depends on ``num_heads`` (n_embd 32: 3168 and 1056).

    Raises:
        ValueError: if ``num_heads`` does not divide ``n_embd``.
    """
    layer = FusedQKVAttention(n_embd, num_heads, context_length=1, bias=bias)
    qkv = sum(p.numel() for p in layer.qkv.parameters())
    proj = sum(p.numel() for p in layer.proj.parameters())
    return {"qkv": qkv, "proj": proj, "total": qkv + proj}


def _shape_row(step: str, code: str, t: Tensor) -> dict:
    return {
        "step": step,
        "code": code,
        "shape": str(tuple(t.shape)),
        "stride": str(tuple(t.stride())),
        "is_contiguous": bool(t.is_contiguous()),
    }


@uses_global_rng
@torch.no_grad()
def heads_on_line(line: str = LESSON_LINE, n_embd: int = chapter.LESSON_N_EMBD, num_heads: int = 4,
                  seed: int = LESSON_SEED) -> dict[str, object]:
    """Run the lesson's untrained attention layer on a line and return every head's weights.

    The layer is :class:`FusedQKVAttention` (biases on, causal) with weights
    seeded by ``seed``; inputs come from :func:`line_embeddings`.

    Args:
        line: the characters (T = len(line), 1 … 64).
        n_embd: model width; 32 as in the lesson.
        num_heads: must divide ``n_embd``.
        seed: seed of embeddings and weights.

    Returns:
        dict with ``tokens`` (list of T characters), ``attn_weights`` (H, T, T)
        float32, ``shapes`` (DataFrame: step, code, shape, stride,
        is_contiguous — (1, T, n_embd) -> (1, H, T, d_h) -> scores (1, H, T, T)
        -> back), ``params`` (see :func:`param_counts`) and ``score_bytes``
        (bytes of the float32 (1, H, T, T) score tensor).

    Raises:
        ValueError: on an empty or too long line, or a head count that does not divide ``n_embd``.
    """
    if len(line) > 64:
        raise ValueError(f"at most 64 characters here, got {len(line)}")
    x = line_embeddings(line, n_embd, seed)  # (1, T, n_embd)
    torch.manual_seed(seed)
    layer = FusedQKVAttention(n_embd, num_heads, context_length=max(len(line), 1))
    steps = layer(x, return_steps=True)
    H, T = num_heads, len(line)
    shapes = pd.DataFrame([
        _shape_row("input x", "x", steps["x"]),
        _shape_row("q, k, v together", "qkv = self.qkv(x)", steps["qkv"]),
        _shape_row("q after split", "q, k, v = qkv.split(n_embd, dim=2)", steps["q"]),
        _shape_row("q cut into heads", "q.view(B, T, H, d_h).transpose(1, 2)", steps["q_heads"]),
        _shape_row("attention scores", "q @ k.transpose(-2, -1)", steps["attn_scores"]),
        _shape_row("attention weights", "softmax(masked scores / √d_h)", steps["attn_weights"]),
        _shape_row("context per head", "attn_weights @ v", steps["context_heads"]),
        _shape_row("heads joined", "transpose(1, 2).contiguous().view(B, T, n_embd)", steps["merged"]),
        _shape_row("after proj", "self.proj(merged)", steps["context_vec"]),
    ])
    return {
        "tokens": list(line),
        "attn_weights": steps["attn_weights"][0],  # (1, H, T, T) -> (H, T, T)
        "shapes": shapes,
        "params": param_counts(n_embd, num_heads),
        "score_bytes": score_tensor_bytes(1, H, T, steps["attn_scores"].element_size()),
    }


def cost_table(n_embd: int, lengths: Sequence[int], batch: int = 1) -> pd.DataFrame:
    """Parameters and score-tensor bytes for every head count that divides ``n_embd``.

    Args:
        n_embd: model width.
        lengths: sequence lengths T to price the score tensor at.
        batch: B of the score tensor.

    Returns:
        DataFrame with ``num_heads``, ``head_dim``, ``qkv params``, ``proj params``
        (constant down the columns) and one ``attn_scores bytes at T=…`` column
        per length (float32 (batch, H, T, T), growing with H and T²).
    """
    rows = []
    for H in divisors(n_embd):
        counts = param_counts(n_embd, H)
        row = {"num_heads": H, "head_dim": n_embd // H, "qkv params": counts["qkv"], "proj params": counts["proj"]}
        for T in lengths:
            row[f"attn_scores bytes at T={T}"] = score_tensor_bytes(batch, H, T)
        rows.append(row)
    return pd.DataFrame(rows)
