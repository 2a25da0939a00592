"""``python -m engine.bench attention``: the chapter's multi-head variants timed side by side.

Every variant computes the same function — causal multi-head self-attention
with biases, head_dim = C / H, the 1/sqrt(head_dim) scale and an output
projection — from the same weights, so their outputs agree to float rounding
(the table's last column) and only the speed differs:

* ``wrapper``: :class:`engine.attention.MultiHeadAttentionWrapper` (one
  CausalAttention per head, run in turn) followed by an output projection;
* ``split``: :class:`engine.attention.MultiHeadAttention` (three Linears, one
  view/transpose split, batched matmuls over the heads), the chapter's steps as written;
* ``split_folded``: the same layer with the 1/sqrt(head_dim) scale applied to the
  queries, (B, H, T, head_dim), before the product instead of to the (B, H, T, T)
  scores after it (:class:`FoldedScaleAttention`): what the chapter's plain order costs;
* ``fused_qkv``: one Linear for q, k, v together (lesson ``000``), manual attention;
* ``einsum``: the same with ``torch.einsum`` for the two products;
* ``sdpa_causal``: ``F.scaled_dot_product_attention(..., is_causal=True)``;
* ``sdpa_mask``: the same kernel with an explicit boolean mask;
* ``nn_mha``: ``torch.nn.MultiheadAttention`` with ``need_weights=False``.

Reference: when the book's package ``llms_from_scratch`` is installed (``pip install
llms-from-scratch==1.0.19 --no-deps``; it needs only torch), its ``ch03.MultiHeadAttention`` gets
the split layer's weights and is timed in the same interleaved rounds; it is reported beside the
table (``book_reference`` in the JSON) with the ratio ours / book, not as a row, so the table's
variants do not depend on what is installed. Without it, a note says it was skipped.

Each is timed forward (under ``torch.no_grad``) and forward+backward (sum of
the output, gradients of every parameter); the median of several runs is
reported; a size whose forward median is not below its forward+backward
median for some variant is measured again with twice the repeats (``--rounds``), and the
command exits with status 1 if that still holds. Runs are interleaved (variant after variant, repeat after repeat) so
a background load hits every variant alike. The run first prints the machine
(CPU model, ISA flags, torch threads) and the fp32 matmul ceiling it measured
before and after the timings (:mod:`engine.bench.machine`). Results print as a
table and go to a JSON file (default ``runs/bench_attention.json``).
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib.util
import json
import math
import os
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import pandas as pd
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from engine import attention as A
from engine.bench.machine import header_lines, matmul_ceiling
from engine.bench.machine import machine_info as _machine_info
from engine.rng import uses_global_rng

#: This command prints the machine and its measured ceiling itself (see engine.bench.__main__).
PRINTS_MACHINE = True

#: Variant name -> what it is (the table's second column).
VARIANTS: dict[str, str] = {
    "wrapper": "MultiHeadAttentionWrapper (heads in turn) + out_proj",
    "split": "MultiHeadAttention (weight splits)",
    "split_folded": "MultiHeadAttention, 1/sqrt(head_dim) folded into q",
    "fused_qkv": "one qkv Linear, matmul + masked_fill + softmax",
    "einsum": "one qkv Linear, torch.einsum",
    "sdpa_causal": "F.scaled_dot_product_attention(is_causal=True)",
    "sdpa_mask": "F.scaled_dot_product_attention(attn_mask=bool mask)",
    "nn_mha": "nn.MultiheadAttention(need_weights=False)",
}
#: The variant every output is compared with.
REFERENCE = "split"
#: The book's class, timed beside the table when its package is installed.
BOOK_REFERENCE = "llms_from_scratch.ch03.MultiHeadAttention"
DEFAULT_JSON = Path("runs") / "bench_attention.json"
#: A variant's median counts as stable when it is within this factor of the fastest run of its mode: above it,
#: other processes inflated most of the runs and the median says more about the machine than about the code.
STABLE_RATIO = 1.5
#: Timed runs per variant and mode of a full run, and the most rounds :func:`bench_size_checked` takes (each one
#: doubles the repeats) before it reports the size as still inconsistent.
DEFAULT_REPEATS, DEFAULT_ROUNDS = 15, 3


@dataclass(frozen=True)
class BenchSize:
    """One input size: x is (batch, seq_len, n_embd) float32, split into num_heads heads.

    Attributes:
        note: why the size differs from the one asked for (e.g. a reduced batch), or "".
    """

    batch: int
    seq_len: int
    n_embd: int
    num_heads: int
    note: str = ""

    def __post_init__(self) -> None:
        if min(self.batch, self.seq_len, self.n_embd, self.num_heads) < 1:
            raise ValueError(f"sizes must be positive, got {self}")
        if self.n_embd % self.num_heads:
            raise ValueError(f"n_embd={self.n_embd} is not divisible by num_heads={self.num_heads}")

    @property
    def label(self) -> str:
        """E.g. "B=8 × T=64 × C=256, H=4 (head_dim 64)"."""
        return (f"B={self.batch} × T={self.seq_len} × C={self.n_embd}, "
                f"H={self.num_heads} (head_dim {self.n_embd // self.num_heads})")


#: The chapter-sized input: small enough that every variant takes milliseconds.
SMALL = BenchSize(8, 64, 256, 4)
#: GPT-2 small's attention at its full context, 1024 × 768 with 12 heads, at batch 2 instead of 8 to keep the
#: default run short (docs/performance.md).
LARGE = BenchSize(2, 1024, 768, 12, note="batch reduced from 8 to 2 to keep the default run short; ratios can shift "
                                         "with the batch size")
#: For tests: runs in milliseconds.
TINY = BenchSize(2, 8, 16, 4)


#: Ways :class:`FusedQKVAttention` can compute attention once q, k, v are split into heads.
BACKENDS = ("manual", "einsum", "sdpa_causal", "sdpa_mask")


class FusedQKVAttention(nn.Module):
    """Causal multi-head self-attention with one Linear for q, k and v (lesson ``000``, part 1), several kernels.

    The benchmark's own layer: the app's model uses :class:`engine.gpt.CausalSelfAttention`
    (the same parameters); this one adds the einsum and SDPA-with-mask kernels timed here.

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
            context_heads = F.scaled_dot_product_attention(
                q_heads, k_heads, v_heads, attn_mask=allowed)  # (B, H, T, d_h)
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
        # (B, H, T, d_h) -> (B, T, H, d_h) -> (B, T, C)
        merged = context_heads.transpose(1, 2).contiguous().view(B, T, C)
        context_vec = self.proj(merged)  # (B, T, C)
        if return_steps:
            return {
                "x": x, "qkv": qkv, "q": q, "q_heads": q_heads, "k_heads": k_heads, "v_heads": v_heads,
                "attn_scores": attn_scores, "attn_weights": attn_weights, "context_heads": context_heads,
                "merged": merged, "context_vec": context_vec,
            }
        return (context_vec, attn_weights) if return_weights else context_vec


class FoldedScaleAttention(A.MultiHeadAttention):
    """:class:`engine.attention.MultiHeadAttention` with the softmax scale moved onto the queries.

    ``(q / s) · k = (q · k) / s`` with ``s = sqrt(head_dim)``: scaling the (B, H, T, head_dim) queries
    before the product gives the chapter's weights up to float rounding and skips the pass over the
    (B, H, T, T) scores that the chapter's ``attn_scores / keys.shape[-1]**0.5`` makes. Same parameters
    and buffers as the parent (load its ``state_dict``).

    Shapes:
        ``forward(x)``: x (B, T, d_in) float -> context_vec (B, T, d_out).
    """

    def forward(self, x: Tensor) -> Tensor:
        b, num_tokens, _ = x.shape
        queries = self.split_heads(self.W_query(x)) * self.head_dim**-0.5  # (B, T, d_in) -> (B, H, T, d_h), scaled
        keys = self.split_heads(self.W_key(x))  # (B, H, T, d_h)
        values = self.split_heads(self.W_value(x))  # (B, H, T, d_h)
        attn_scores = queries @ keys.transpose(2, 3)  # (B, H, T, d_h) @ (B, H, d_h, T) -> (B, H, T, T)
        attn_scores.masked_fill_(self.mask[:num_tokens, :num_tokens], -torch.inf)  # in place
        attn_weights = self.dropout(torch.softmax(attn_scores, dim=-1))  # (B, H, T, T), already scaled
        context_vec = (attn_weights @ values).transpose(1, 2)  # (B, H, T, d_h) -> (B, T, H, d_h)
        context_vec = context_vec.contiguous().view(b, num_tokens, self.d_out)  # (B, T, H, d_h) -> (B, T, d_out)
        return self.out_proj(context_vec)


class _WrapperWithProj(nn.Module):
    """The wrapper's concatenated heads followed by an output projection, like the other variants."""

    def __init__(self, wrapper: A.MultiHeadAttentionWrapper, out_proj: nn.Linear):
        super().__init__()
        self.wrapper = wrapper
        self.out_proj = out_proj

    def forward(self, x: Tensor) -> Tensor:
        return self.out_proj(self.wrapper(x))  # (B, T, H·d_h) -> (B, T, C)


class _TorchMHA(nn.Module):
    """``nn.MultiheadAttention`` as causal self-attention, without returning the weights."""

    def __init__(self, n_embd: int, num_heads: int, context_length: int):
        super().__init__()
        self.mha = nn.MultiheadAttention(n_embd, num_heads, bias=True, batch_first=True)
        # nn.MultiheadAttention's boolean mask is True where attention is NOT allowed (the opposite of SDPA's).
        self.register_buffer("future", A.causal_mask(context_length))

    def forward(self, x: Tensor) -> Tensor:
        T = x.shape[1]
        out, _ = self.mha(x, x, x, attn_mask=self.future[:T, :T], need_weights=False, is_causal=True)
        return out  # (B, T, C)


@uses_global_rng
def build_variants(size: BenchSize, seed: int = 0) -> dict[str, nn.Module]:
    """Every variant of :data:`VARIANTS` with the same weights (dropout 0, biases everywhere).

    The wrapper is drawn first (seeded); its per-head weights are stacked into
    the split layer with :func:`engine.attention.copy_wrapper_into_split`, and
    the split layer's W_query/W_key/W_value and out_proj are copied into the
    folded-scale layer, the fused-qkv layers and ``nn.MultiheadAttention``.

    Returns:
        name -> module, in :data:`VARIANTS` order, on CPU in float32.
    """
    C, H, T = size.n_embd, size.num_heads, size.seq_len
    d_h = C // H
    torch.manual_seed(seed)
    wrapper = A.MultiHeadAttentionWrapper(C, d_h, T, 0.0, H, qkv_bias=True)
    split = A.MultiHeadAttention(C, C, T, 0.0, H, qkv_bias=True)
    A.copy_wrapper_into_split(wrapper, split)
    out_proj = nn.Linear(C, C)
    folded = FoldedScaleAttention(C, C, T, 0.0, H, qkv_bias=True)
    modules: dict[str, nn.Module] = {"wrapper": _WrapperWithProj(wrapper, out_proj), "split": split,
                                     "split_folded": folded}
    with torch.no_grad():
        out_proj.load_state_dict(split.out_proj.state_dict())
        folded.load_state_dict(split.state_dict())
        W = torch.cat([split.W_query.weight, split.W_key.weight, split.W_value.weight])  # 3 × (C, C) -> (3C, C)
        b = torch.cat([split.W_query.bias, split.W_key.bias, split.W_value.bias])  # (3C,)
        for name, backend in (("fused_qkv", "manual"), ("einsum", "einsum"), ("sdpa_causal", "sdpa_causal"),
                              ("sdpa_mask", "sdpa_mask")):
            layer = FusedQKVAttention(C, H, T, bias=True, backend=backend)
            layer.qkv.weight.copy_(W)
            layer.qkv.bias.copy_(b)
            layer.proj.load_state_dict(split.out_proj.state_dict())
            modules[name] = layer
        torch_mha = _TorchMHA(C, H, T)
        torch_mha.mha.in_proj_weight.copy_(W)
        torch_mha.mha.in_proj_bias.copy_(b)
        torch_mha.mha.out_proj.load_state_dict(split.out_proj.state_dict())
        modules["nn_mha"] = torch_mha
    for m in modules.values():
        m.eval()  # dropout is 0 anyway; eval() lets nn.MultiheadAttention take its inference fast path
    return {name: modules[name] for name in VARIANTS}


def book_reference_available() -> bool:
    """Whether the book's package ``llms_from_scratch`` can be imported."""
    return importlib.util.find_spec("llms_from_scratch") is not None


@torch.no_grad()
def build_book_reference(split: A.MultiHeadAttention) -> nn.Module | None:
    """The book's ``MultiHeadAttention`` (``llms_from_scratch.ch03``) with ``split``'s weights.

    Returns None when the package is not installed.

    Same sizes, dropout 0, qkv biases; W_query, W_key, W_value and out_proj are copied, so the output
    equals ``split``'s to float rounding. Returned in eval mode.
    """
    if not book_reference_available():
        return None
    # an optional dependency, imported only when present (not a dodge around an import cycle)
    from llms_from_scratch.ch03 import MultiHeadAttention as BookMultiHeadAttention

    d_in, d_out = split.W_query.in_features, split.d_out
    book = BookMultiHeadAttention(d_in, d_out, split.context_length, 0.0, split.num_heads, qkv_bias=True)
    for name in ("W_query", "W_key", "W_value", "out_proj"):
        getattr(book, name).load_state_dict(getattr(split, name).state_dict())
    return book.eval()


def make_input(size: BenchSize, seed: int = 1) -> Tensor:
    """x of shape (batch, seq_len, n_embd), float32 N(0, 1), seeded."""
    g = torch.Generator().manual_seed(seed)
    return torch.randn(size.batch, size.seq_len, size.n_embd, generator=g)


def outputs(modules: dict[str, nn.Module], x: Tensor) -> dict[str, Tensor]:
    """Each variant's forward output (B, T, C) on ``x``, without gradients."""
    with torch.no_grad():
        return {name: m(x) for name, m in modules.items()}


def gradients(modules: dict[str, nn.Module], x: Tensor, grad_out: Tensor) -> dict[str, Tensor]:
    """d(sum(out · grad_out))/dx for each variant: (B, T, C).

    Equal across variants when they compute the same function."""
    result = {}
    for name, m in modules.items():
        xi = x.clone().requires_grad_(True)
        m(xi).backward(grad_out)
        result[name] = xi.grad
        m.zero_grad(set_to_none=True)
    return result


def _forward_fn(m: nn.Module, x: Tensor) -> Callable[[], None]:
    def run() -> None:
        with torch.no_grad():
            m(x)
    return run


def _forward_backward_fn(m: nn.Module, x: Tensor, grad_out: Tensor) -> Callable[[], None]:
    def run() -> None:
        m.zero_grad(set_to_none=True)
        m(x).backward(grad_out)
    return run


def time_interleaved(fns: dict[str, Callable[[], None]], repeats: int, warmup: int) -> dict[str, list[float]]:
    """Call every function ``warmup`` times, then ``repeats`` rounds of one call each; seconds per call.

    Returns:
        name -> ``repeats`` wall-clock durations in seconds (``time.perf_counter``).
    """
    for _ in range(warmup):
        for fn in fns.values():
            fn()
    samples: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            start = time.perf_counter()
            fn()
            samples[name].append(time.perf_counter() - start)
    return samples


def bench_size(size: BenchSize, repeats: int = 5, warmup: int = 1, backward: bool = True,
               variants: Sequence[str] | None = None) -> dict:
    """Time every variant on one input size.

    Args:
        size: the input.
        repeats: timed calls per variant and mode (the median is reported).
        warmup: untimed calls first.
        backward: also time forward+backward.
        variants: subset of :data:`VARIANTS` (default all).

    Returns:
        JSON-ready dict: the size's fields and ``label``, and ``results``: one
        dict per variant with ``variant``, ``description``, ``forward_ms``
        (median), ``forward_min_ms``, ``forward_samples_ms``,
        ``forward_backward_ms``, its min and samples (None without backward),
        ``max_abs_diff_vs_split``.
    """
    names = list(variants or VARIANTS)
    built = build_variants(size)
    modules = {n: m for n, m in built.items() if n in names}
    book = build_book_reference(built[REFERENCE])
    timed: dict[str, nn.Module] = {}
    for n, m in modules.items():  # the book's class right after ours, so each round times the pair back to back
        timed[n] = m
        if n == REFERENCE and book is not None:
            timed[BOOK_REFERENCE] = book
    if book is not None and REFERENCE not in timed:
        timed[BOOK_REFERENCE] = book
    x = make_input(size)
    outs = outputs(timed, x)
    reference = outs.get(REFERENCE, next(iter(outs.values())))
    fwd = time_interleaved({n: _forward_fn(m, x) for n, m in timed.items()}, repeats, warmup)
    bwd = None
    if backward:
        grad_out = torch.randn(x.shape, generator=torch.Generator().manual_seed(2))
        bwd = time_interleaved({n: _forward_backward_fn(m, x, grad_out) for n, m in timed.items()}, repeats, warmup)

    def row(n: str, description: str) -> dict:
        return {
            "variant": n,
            "description": description,
            "forward_ms": 1e3 * statistics.median(fwd[n]),
            "forward_min_ms": 1e3 * min(fwd[n]),
            "forward_samples_ms": [1e3 * s for s in fwd[n]],
            "forward_backward_ms": 1e3 * statistics.median(bwd[n]) if bwd else None,
            "forward_backward_min_ms": 1e3 * min(bwd[n]) if bwd else None,
            "forward_backward_samples_ms": [1e3 * s for s in bwd[n]] if bwd else None,
            "max_abs_diff_vs_split": float((outs[n] - reference).abs().max()),
        }

    results = [row(n, VARIANTS[n]) for n in names]
    book_row = None
    if book is not None:
        book_row = row(BOOK_REFERENCE, "the book's MultiHeadAttention (llms_from_scratch 1.0.19)")
        if REFERENCE in fwd:
            ours, book = statistics.median(fwd[REFERENCE]), statistics.median(fwd[BOOK_REFERENCE])
            book_row["split_over_book_forward"] = ours / book
            book_row["split_over_book_forward_backward"] = (
                statistics.median(bwd[REFERENCE]) / statistics.median(bwd[BOOK_REFERENCE]) if bwd else None
            )
            # the median of the per-round ratios: the pair ran back to back, so a load that changes more
            # slowly than one call cancels out of each ratio
            book_row["split_over_book_forward_paired"] = _paired_ratio(fwd[REFERENCE], fwd[BOOK_REFERENCE])
            book_row["split_over_book_forward_backward_paired"] = (
                _paired_ratio(bwd[REFERENCE], bwd[BOOK_REFERENCE]) if bwd else None
            )
    return {**asdict(size), "label": size.label, "results": results, "book_reference": book_row}


def size_checks(measured: dict) -> dict:
    """What one measured size says about its own reliability.

    A forward+backward call does the forward work and more, so a variant whose forward+backward median is not
    above its forward median was timed under a load that changed during the run; a median more than
    :data:`STABLE_RATIO` times its mode's fastest run is dominated by that load.

    Args:
        measured: one :func:`bench_size` result (or one ``sizes`` entry of a results file).

    Returns:
        ``{"unordered": [...], "unstable": [...]}``: the variants whose forward median is not below their
        forward+backward median (empty without backward times), and those with a median (either mode) above
        :data:`STABLE_RATIO` × its fastest run, in the file's order.
    """
    unordered, unstable = [], []
    for r in measured["results"]:
        fwd, fb = r["forward_ms"], r.get("forward_backward_ms")
        if fb is not None and not fwd < fb:
            unordered.append(r["variant"])
        pairs = ((fwd, r.get("forward_min_ms")), (fb, r.get("forward_backward_min_ms")))
        if any(median is not None and low is not None and median > STABLE_RATIO * low for median, low in pairs):
            unstable.append(r["variant"])
    return {"unordered": unordered, "unstable": unstable}


def bench_size_checked(size: BenchSize, repeats: int = DEFAULT_REPEATS, warmup: int = 1, backward: bool = True,
                       rounds: int = DEFAULT_ROUNDS, measure: Callable[..., dict] | None = None,
                       progress: Callable[[str], None] | None = None) -> dict:
    """:func:`bench_size`, measured again with twice the repeats while a variant's forward median is not below its
    forward+backward median (:func:`size_checks`), at most ``rounds`` times in all.

    Args:
        size, repeats, warmup, backward: as :func:`bench_size` (``repeats`` for the first round).
        rounds: the most measurements of this size (>= 1).
        measure: the measuring function (default :func:`bench_size`; a test passes its own).
        progress: called with a line saying what failed and that it measures again.

    Returns:
        The last round's result with ``checks``: :func:`size_checks` plus ``repeats`` (of the last round) and
        ``rounds`` (how many were taken). Its ``unordered`` list is not empty when the last round still failed.

    Raises:
        ValueError: if ``rounds`` or ``repeats`` is below 1.
    """
    if rounds < 1 or repeats < 1:
        raise ValueError(f"rounds and repeats must be at least 1, got {rounds} and {repeats}")
    measure = measure or bench_size
    for round_ in range(1, rounds + 1):
        measured = measure(size, repeats, warmup, backward)
        checks = size_checks(measured)
        if not checks["unordered"] or round_ == rounds:
            break
        if progress:
            progress(f"{size.label}: forward not below forward+backward for {', '.join(checks['unordered'])} "
                     f"with {repeats} repeats; measuring again with {2 * repeats}")
        repeats *= 2
    return {**measured, "checks": {**checks, "repeats": repeats, "rounds": round_}}


def _paired_ratio(ours: Sequence[float], theirs: Sequence[float]) -> float:
    """Median over rounds of ours[i] / theirs[i]."""
    return statistics.median(a / b for a, b in zip(ours, theirs, strict=False))


def machine_info() -> dict:
    """Where the numbers were measured (:func:`engine.bench.machine.machine_info`): CPU model, cores, ISA
    flags, torch threads, versions, OS, load."""
    return _machine_info()


def run_benchmark(sizes: Sequence[BenchSize], repeats: int = 5, warmup: int = 1, backward: bool = True,
                  progress: Callable[[str], None] | None = None, ceiling: bool = True, rounds: int = 1) -> dict:
    """The whole benchmark: machine info, settings, and :func:`bench_size_checked` for each size, in one run.

    With ``ceiling`` the fp32 matmul ceiling is measured before and after the sizes
    (``machine["matmul_ceiling_gflops"]``, a dict ``before``/``after``; None without). ``rounds`` > 1 measures a
    size again, with doubled repeats, while a variant's forward median is not below its forward+backward one.
    """
    started = time.perf_counter()
    load_at_start = machine_info()["load_average_1min"]
    ceiling_before = matmul_ceiling() if ceiling else None
    measured = []
    for size in sizes:
        if progress:
            progress(f"timing {len(VARIANTS)} variants on {size.label} …")
        measured.append(bench_size_checked(size, repeats, warmup, backward, rounds, progress=progress))
    ceiling_after = matmul_ceiling() if ceiling else None
    machine = machine_info()
    machine["load_average_1min_end"] = machine["load_average_1min"]
    machine["load_average_1min"] = load_at_start
    machine["matmul_ceiling_gflops"] = {"before": ceiling_before, "after": ceiling_after} if ceiling else None
    return {
        "benchmark": "attention",
        "created": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": machine,
        "settings": {"repeats": repeats, "warmup": warmup, "backward": backward, "dtype": "float32",
                     "statistic": "median", "rounds": rounds, "stable_ratio": STABLE_RATIO,
                     "seconds_total": round(time.perf_counter() - started, 1)},
        "sizes": measured,
    }


def results_table(data: dict) -> pd.DataFrame:
    """One row per (size, variant): median ms forward and forward+backward, slowdown vs the fastest median,
    the fastest single run of each (None in files written before it was recorded), output difference, and
    :func:`size_checks`' verdicts: ``ordered`` (forward median below forward+backward) and ``stable`` (medians
    within :data:`STABLE_RATIO` × the fastest run)."""
    rows = []
    for size in data["sizes"]:
        checks = size_checks(size)
        fastest_fwd = min(r["forward_ms"] for r in size["results"])
        bwd_values = [r["forward_backward_ms"] for r in size["results"] if r["forward_backward_ms"] is not None]
        fastest_bwd = min(bwd_values) if bwd_values else None
        for r in size["results"]:
            fb = r["forward_backward_ms"]
            rows.append({
                "size": size["label"],
                "variant": r["variant"],
                "what": r["description"],
                "forward ms": r["forward_ms"],
                "× fastest (fwd)": r["forward_ms"] / fastest_fwd,
                "forward+backward ms": fb,
                "× fastest (fwd+bwd)": fb / fastest_bwd if fb is not None and fastest_bwd else None,
                "forward min ms": r.get("forward_min_ms"),
                "forward+backward min ms": r.get("forward_backward_min_ms"),
                "max |out − split|": r["max_abs_diff_vs_split"],
                "ordered": r["variant"] not in checks["unordered"],
                "stable": r["variant"] not in checks["unstable"],
            })
    return pd.DataFrame(rows)


def machine_line(data: dict) -> str:
    """E.g. "AMD EPYC · 2 cores (torch 2 threads) · torch 2.13.0+cpu · load 1.2 → 1.5 · measured 2026-11-30"."""
    m = data["machine"]
    load = ""
    if m.get("load_average_1min") is not None:
        end = m.get("load_average_1min_end")
        load = f" · load {m['load_average_1min']:.1f}" + (f" → {end:.1f}" if end is not None else "")
    return (f"{m['cpu']} · {m['cores']} cores (torch {m['torch_threads']} threads) · torch {m['torch']}{load} · "
            f"measured {data['created'][:10]}")


def format_table(data: dict) -> str:
    """The results as fixed-width text: the machine and its measured ceiling, then one block per input size
    (with the book's class beside it when it was timed, or a note that it was skipped)."""
    machine = data["machine"]
    ceiling = machine.get("matmul_ceiling_gflops")
    mean = None
    if ceiling and ceiling.get("before") is not None:
        mean = (ceiling["before"] + ceiling["after"]) / 2
    lines = [f"attention benchmark · {machine_line(data)}"]
    if "isa" in machine:
        lines += header_lines(machine, mean)
    if mean is not None:
        lines.append(f"  (ceiling before {ceiling['before']:.1f}, after {ceiling['after']:.1f} GFLOP/s)")
    lines.append(f"median of {data['settings']['repeats']} interleaved runs after {data['settings']['warmup']} "
                 "warm-up, float32")
    table = results_table(data)
    for size in data["sizes"]:
        lines += ["", f"input {size['label']}" + (f"  [{size['note']}]" if size.get("note") else "")]
        lines.append(f"  {'variant':<12} {'forward ms':>11} {'× best':>7} {'(min)':>9} "
                     f"{'fwd+bwd ms':>11} {'× best':>7} "
                     f"{'(min)':>9} {'max |diff|':>10}  what")

        def cell(v, fmt):
            return "—" if v is None or pd.isna(v) else format(v, fmt)

        for _, r in table[table["size"] == size["label"]].iterrows():
            lines.append(f"  {r['variant']:<12} {r['forward ms']:>11.2f} {r['× fastest (fwd)']:>7.2f} "
                         f"{cell(r['forward min ms'], '.2f'):>9} {cell(r['forward+backward ms'], '.2f'):>11} "
                         f"{cell(r['× fastest (fwd+bwd)'], '.2f'):>7} {cell(r['forward+backward min ms'], '.2f'):>9} "
                         f"{r['max |out − split|']:>10.1e}  {r['what']}")
        book = size.get("book_reference")
        if book is not None:
            fb = book["forward_backward_ms"]
            lines.append(f"  {'book':<12} {book['forward_ms']:>11.2f} {'':>7} {cell(book['forward_min_ms'], '.2f'):>9} "
                         f"{cell(fb, '.2f'):>11} {'':>7} {cell(book['forward_backward_min_ms'], '.2f'):>9} "
                         f"{book['max_abs_diff_vs_split']:>10.1e}  {BOOK_REFERENCE}")
            if book.get("split_over_book_forward") is not None:
                ratio_fb = book.get("split_over_book_forward_backward")
                lines.append(f"  split / book: {book['split_over_book_forward']:.2f}× forward"
                             + (f", {ratio_fb:.2f}× forward+backward" if ratio_fb is not None else "")
                             + " (ratio of medians; below 1: ours is faster)")
                paired_fb = book.get("split_over_book_forward_backward_paired")
                if book.get("split_over_book_forward_paired") is not None:
                    lines.append(f"  split / book, median of back-to-back pairs: "
                                 f"{book['split_over_book_forward_paired']:.2f}× forward"
                                 + (f", {paired_fb:.2f}× forward+backward" if paired_fb is not None else ""))
        elif "book_reference" in size:
            lines.append("  book reference skipped: llms_from_scratch is not installed "
                         "(pip install llms-from-scratch==1.0.19 --no-deps)")
    lines.append(f"\ntotal {data['settings']['seconds_total']} s")
    return "\n".join(lines)


def load_results(path: str | os.PathLike) -> dict:
    """Read a results file written by this command.

    Raises:
        FileNotFoundError: if it does not exist.
        ValueError: if it is not an attention-benchmark file.
    """
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    if data.get("benchmark") != "attention" or "sizes" not in data:
        raise ValueError(f"{path} is not an attention-benchmark results file")
    return data


def _parse_size(text: str) -> BenchSize:
    try:
        b, t, c, h = (int(p) for p in text.lower().replace("x", ",").split(","))
        return BenchSize(b, t, c, h)
    except ValueError as err:
        raise argparse.ArgumentTypeError(f"size must be B,T,C,H with H dividing C (e.g. 8,64,256,4): {err}") from err


def main(argv: list[str]) -> int:
    """Command line: ``python -m engine.bench attention [--quick] [--json PATH] [--size B,T,C,H …]``."""
    parser = argparse.ArgumentParser(prog="python -m engine.bench attention", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small input only, 3 repeats (a few seconds)")
    parser.add_argument("--json", default=str(DEFAULT_JSON),
                        help=f"where to write the results (default {DEFAULT_JSON})")
    parser.add_argument("--size", action="append", type=_parse_size, metavar="B,T,C,H",
                        help="input size to time instead of the defaults (repeatable)")
    parser.add_argument("--repeats", type=int, default=None,
                        help=f"timed runs per variant (default {DEFAULT_REPEATS}, quick 3)")
    parser.add_argument("--rounds", type=int, default=DEFAULT_ROUNDS,
                        help="measure a size again, with twice the repeats, while a variant's forward median is not "
                             f"below its forward+backward median, at most this many times in all (default "
                             f"{DEFAULT_ROUNDS})")
    parser.add_argument("--warmup", type=int, default=1, help="untimed runs first (default 1)")
    parser.add_argument("--no-backward", action="store_true", help="time the forward pass only")
    args = parser.parse_args(argv)
    sizes = args.size or ([SMALL] if args.quick else [SMALL, LARGE])
    repeats = args.repeats or (3 if args.quick else DEFAULT_REPEATS)
    if repeats < 1 or args.warmup < 0 or args.rounds < 1:
        parser.error("--repeats and --rounds must be at least 1 and --warmup at least 0")
    data = run_benchmark(sizes, repeats, args.warmup, not args.no_backward,
                         progress=lambda msg: print(msg, file=sys.stderr, flush=True), rounds=args.rounds)
    print(format_table(data))
    failed = False
    for size in data["sizes"]:
        checks = size["checks"]
        if checks["unordered"]:
            failed = True
            print(f"error: {size['label']}: forward is not below forward+backward for "
                  f"{', '.join(checks['unordered'])} after {checks['rounds']} rounds ({checks['repeats']} repeats): "
                  "the machine is too busy for these timings; rerun on a quiet machine", file=sys.stderr)
        if checks["unstable"]:
            print(f"note: {size['label']}: median above {STABLE_RATIO}× the fastest run for "
                  f"{', '.join(checks['unstable'])} (noisy)", file=sys.stderr)
    machine = data["machine"]
    busiest = max(v for v in (machine["load_average_1min"], machine["load_average_1min_end"]) if v is not None) \
        if machine["load_average_1min"] is not None else None
    if busiest is not None and machine["cores"] and busiest > machine["cores"]:
        print(f"warning: load average {busiest:.1f} on {machine['cores']} cores — other processes competed for the "
              "CPU; timings are inflated and noisy (compare ratios, or rerun on a quiet machine)", file=sys.stderr)
    out = Path(args.json)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(data, indent=1), encoding="utf-8")
    print(f"wrote {out}")
    return 1 if failed else 0
