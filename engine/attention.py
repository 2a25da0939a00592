"""The chapter's attention variants, in the chapter's order.

Source: chapter "Mécanismes d'attention" (``003``), sections on simplified
self-attention, trainable weights, causal attention, dropout and multi-head
attention; Vaswani et al. (2017), "Attention Is All You Need", eq. 1.

1. Simplified self-attention (no trainable weights): :func:`dot_scores`,
   :func:`all_dot_scores`, :func:`naive_normalize`, :func:`softmax_naive`,
   :func:`softmax_stable`, :func:`context_vector`, :func:`all_context_vectors`,
   and :func:`simplified_self_attention`, which runs the three steps at once.
2. Trainable weights: :class:`SelfAttention_v1` (``nn.Parameter(torch.rand)``)
   and :class:`SelfAttention_v2` (``nn.Linear``).
3. Causal mask and dropout: :class:`CausalAttention`.
4. Multi-head: :class:`MultiHeadAttentionWrapper` (heads one after another) and
   :class:`MultiHeadAttention` (one projection split into heads, ``out_proj``).

Every module's ``forward(x, return_weights=False)`` returns ``context_vec`` and,
when asked, ``(context_vec, attn_weights)``: intermediates are returned, never
stashed on the module. Each ``forward`` writes the chapter's steps out in the
chapter's order (projections, scores, the causal mask in place, softmax of the
scores over sqrt(d_k), dropout, the weighted sum of the values), so the code a
page shows is the code that ran; faster kernels are timed in ``engine.bench``.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

#: The chapter's running example "Your journey starts with one step.", one 3-d
#: embedding per token (float32, shape (6, 3)).
CHAPTER_INPUTS: tuple[tuple[float, float, float], ...] = (
    (0.43, 0.15, 0.89),  # Your
    (0.55, 0.87, 0.66),  # journey
    (0.57, 0.85, 0.64),  # starts
    (0.22, 0.58, 0.33),  # with
    (0.77, 0.25, 0.10),  # one
    (0.05, 0.80, 0.55),  # step
)
#: The token each row of :data:`CHAPTER_INPUTS` stands for.
CHAPTER_TOKENS: tuple[str, ...] = ("Your", "journey", "starts", "with", "one", "step")


def chapter_inputs(dtype: torch.dtype = torch.float32) -> Tensor:
    """The chapter's six token embeddings as a fresh tensor.

    Returns:
        Tensor of shape (6, 3) and the given dtype (float32 by default).
    """
    return torch.tensor(CHAPTER_INPUTS, dtype=dtype)


def _check_rank(name: str, x: Tensor, ranks: tuple[int, ...]) -> None:
    """Raise ``ValueError`` unless ``x.dim()`` is one of ``ranks``."""
    if x.dim() not in ranks:
        expected = " or ".join(str(r) for r in ranks)
        raise ValueError(f"{name} must have rank {expected}, got shape {tuple(x.shape)} (rank {x.dim()})")


def _check_dropout(dropout: float) -> None:
    """Raise ``ValueError`` unless ``0 <= dropout < 1``."""
    if not 0.0 <= float(dropout) < 1.0:
        raise ValueError(f"dropout must be in [0, 1), got {dropout}")


# ---------------------------------------------------------------------------
# 1. Simplified self-attention (no trainable weights)
# ---------------------------------------------------------------------------


def dot_scores(inputs: Tensor, query: Tensor) -> Tensor:
    """Attention scores of one query against every token: ``attn_scores[i] = x_i · query``.

    Chapter section "simplified self-attention", step 1.

    Args:
        inputs: (T, d_in) token embeddings.
        query: (d_in,) the query token's embedding.

    Returns:
        (T,) attention scores, same dtype as ``inputs``.

    Raises:
        ValueError: if the ranks are not 2 and 1 or the embedding sizes differ.
    """
    _check_rank("inputs", inputs, (2,))
    _check_rank("query", query, (1,))
    if inputs.shape[1] != query.shape[0]:
        raise ValueError(f"query has d_in={query.shape[0]} but inputs have d_in={inputs.shape[1]}")
    return inputs @ query  # (T, d_in) @ (d_in,) -> (T,)


def all_dot_scores(inputs: Tensor) -> Tensor:
    """Scores for every pair of tokens at once: ``inputs @ inputs.T``.

    Entry (i, j) is the dot product of token i with token j, so row i equals
    ``dot_scores(inputs, inputs[i])``.

    Args:
        inputs: (T, d_in) token embeddings.

    Returns:
        (T, T) attention scores.

    Raises:
        ValueError: if ``inputs`` is not 2-d.
    """
    _check_rank("inputs", inputs, (2,))
    return inputs @ inputs.T  # (T, d_in) @ (d_in, T) -> (T, T)


def naive_normalize(attn_scores: Tensor, dim: int = -1) -> Tensor:
    """Divide scores by their sum: weights that add up to 1 but are not a softmax.

    Only meaningful for positive scores; a sum near zero blows up, and a negative
    score gives a negative "weight". Shown in the chapter as the first attempt.

    Args:
        attn_scores: scores of any shape; normalised along ``dim``.

    Returns:
        Tensor of the same shape and dtype.
    """
    return attn_scores / attn_scores.sum(dim=dim, keepdim=True)


def softmax_naive(attn_scores: Tensor, dim: int = -1) -> Tensor:
    """Textbook softmax ``exp(x) / sum(exp(x))`` without the max subtraction.

    In float32 ``exp`` overflows to ``inf`` for x above about 88.7 and underflows
    to 0 below about -103.3 (float16: above about 11.1 and below about -16.6), which
    turns the ratio into ``nan``. Kept to show that failure.

    Args:
        attn_scores: scores of any shape; normalised along ``dim``.

    Returns:
        Tensor of the same shape and dtype; may contain ``inf``/``nan``.
    """
    exp = torch.exp(attn_scores)
    return exp / exp.sum(dim=dim, keepdim=True)


def softmax_stable(attn_scores: Tensor, dim: int = -1) -> Tensor:
    """Softmax with the maximum subtracted first, as ``torch.softmax`` does.

    ``exp(x - max x) / sum(exp(x - max x))`` is the same function mathematically
    (the factor ``exp(-max x)`` cancels) but the largest term is ``exp(0) = 1``,
    so nothing overflows. A row of all ``-inf`` still gives ``nan`` (0 / 0).

    Args:
        attn_scores: scores of any shape; normalised along ``dim``.

    Returns:
        Tensor of the same shape and dtype.
    """
    shifted = attn_scores - attn_scores.amax(dim=dim, keepdim=True)
    exp = torch.exp(shifted)
    return exp / exp.sum(dim=dim, keepdim=True)


def softmax_jacobian(attn_weights: Tensor) -> Tensor:
    """Jacobian of the softmax at a point, from its weights: ``J[i, j] = w_i (δ_ij - w_j)``.

    Args:
        attn_weights: (T,) softmax output.

    Returns:
        (T, T) matrix of partial derivatives d w_i / d x_j.

    Raises:
        ValueError: if ``attn_weights`` is not 1-d.
    """
    _check_rank("attn_weights", attn_weights, (1,))
    w = attn_weights
    return torch.diag(w) - torch.outer(w, w)  # (T, T)


def context_vector(inputs: Tensor, attn_weights: Tensor) -> Tensor:
    """Weighted sum of the inputs: ``z = sum_i attn_weights[i] * inputs[i]``.

    Args:
        inputs: (T, d_in) token embeddings (or values).
        attn_weights: (T,) weights of one query.

    Returns:
        (d_in,) context vector.

    Raises:
        ValueError: on wrong ranks or mismatched T.
    """
    _check_rank("inputs", inputs, (2,))
    _check_rank("attn_weights", attn_weights, (1,))
    if inputs.shape[0] != attn_weights.shape[0]:
        raise ValueError(f"{attn_weights.shape[0]} weights for {inputs.shape[0]} tokens")
    return attn_weights @ inputs  # (T,) @ (T, d_in) -> (d_in,)


def all_context_vectors(inputs: Tensor, attn_weights: Tensor) -> Tensor:
    """Every context vector at once: ``attn_weights @ inputs``.

    Args:
        inputs: (T, d_in).
        attn_weights: (T, T), row i holds the weights of query i.

    Returns:
        (T, d_in), row i is the context vector of token i.
    """
    _check_rank("inputs", inputs, (2,))
    _check_rank("attn_weights", attn_weights, (2,))
    return attn_weights @ inputs  # (T, T) @ (T, d_in) -> (T, d_in)


def simplified_self_attention(inputs: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """The chapter's simplified self-attention for all tokens: scores, softmax, weighted sum.

    Args:
        inputs: (T, d_in) token embeddings; they serve as queries, keys and values.

    Returns:
        ``(context_vec, attn_weights, attn_scores)`` of shapes (T, d_in), (T, T), (T, T).
    """
    attn_scores = all_dot_scores(inputs)  # (T, T)
    attn_weights = torch.softmax(attn_scores, dim=-1)  # (T, T), rows sum to 1
    context_vec = all_context_vectors(inputs, attn_weights)  # (T, d_in)
    return context_vec, attn_weights, attn_scores


# ---------------------------------------------------------------------------
# 2. Trainable weights
# ---------------------------------------------------------------------------


def scaled_dot_product_step(
    x: Tensor, W_query: Tensor, W_key: Tensor, W_value: Tensor, query_index: int
) -> dict[str, Tensor]:
    """One query through trainable projections, step by step (chapter: trainable weights).

    Args:
        x: (T, d_in) inputs.
        W_query, W_key, W_value: (d_in, d_out) projection matrices.
        query_index: which token asks (0-based).

    Returns:
        dict with ``query`` (d_out,), ``keys`` (T, d_out), ``values`` (T, d_out),
        ``attn_scores`` (T,), ``attn_weights`` (T,) after the 1/sqrt(d_k) scale and
        softmax, and ``context_vec`` (d_out,).

    Raises:
        ValueError: on wrong ranks, mismatched sizes, or a query index outside [0, T).
    """
    _check_rank("x", x, (2,))
    for name, w in (("W_query", W_query), ("W_key", W_key), ("W_value", W_value)):
        _check_rank(name, w, (2,))
        if w.shape[0] != x.shape[1]:
            raise ValueError(f"{name} has {w.shape[0]} rows but x has d_in={x.shape[1]}")
    if not 0 <= query_index < x.shape[0]:
        raise ValueError(f"query_index must be in [0, {x.shape[0]}), got {query_index}")
    query = x[query_index] @ W_query  # (d_in,) @ (d_in, d_out) -> (d_out,)
    keys = x @ W_key  # (T, d_in) @ (d_in, d_out) -> (T, d_out)
    values = x @ W_value  # (T, d_out)
    attn_scores = keys @ query  # (T, d_out) @ (d_out,) -> (T,)
    d_k = keys.shape[-1]
    attn_weights = torch.softmax(attn_scores / d_k**0.5, dim=-1)  # (T,)
    context_vec = attn_weights @ values  # (T,) @ (T, d_out) -> (d_out,)
    return {
        "query": query,
        "keys": keys,
        "values": values,
        "attn_scores": attn_scores,
        "attn_weights": attn_weights,
        "context_vec": context_vec,
    }


def _check_mask_device(mask: Tensor, attn_scores: Tensor) -> None:
    """Raise the ``RuntimeError`` CUDA's ``masked_fill_`` raises when the mask is on another device.

    The meta and CPU kernels of the in-place fill do not check, so a mask kept as a plain attribute (which
    does not follow ``module.to``) would pass silently there; page 3 shows this error on the meta device.
    """
    if mask.device != attn_scores.device:
        raise RuntimeError(
            f"expected self and mask to be on the same device, but got mask on {mask.device} "
            f"and self on {attn_scores.device}"
        )


class SelfAttention_v1(nn.Module):
    """Self-attention with trainable ``nn.Parameter`` matrices drawn by ``torch.rand``.

    Chapter section "a compact self-attention class". Weights are uniform on
    [0, 1): all positive and of variance 1/12 whatever ``d_in`` (the chapter's
    point against this initialisation).

    Args:
        d_in: embedding size of the inputs.
        d_out: size of queries, keys and values (d_k = d_out).

    Shapes:
        ``forward(x)``: x (T, d_in) float -> context_vec (T, d_out) [, attn_weights (T, T)].

    Raises:
        ValueError: if sizes are not positive, or ``x`` is not 2-d with ``d_in`` columns.
    """

    def __init__(self, d_in: int, d_out: int):
        super().__init__()
        if d_in < 1 or d_out < 1:
            raise ValueError(f"d_in and d_out must be positive, got d_in={d_in}, d_out={d_out}")
        self.W_query = nn.Parameter(torch.rand(d_in, d_out))
        self.W_key = nn.Parameter(torch.rand(d_in, d_out))
        self.W_value = nn.Parameter(torch.rand(d_in, d_out))

    def forward(self, x: Tensor, return_weights: bool = False):
        _check_rank("x", x, (2,))
        if x.shape[1] != self.W_query.shape[0]:
            raise ValueError(f"x has d_in={x.shape[1]}, expected {self.W_query.shape[0]}")
        keys = x @ self.W_key  # (T, d_in) @ (d_in, d_out) -> (T, d_out)
        queries = x @ self.W_query  # (T, d_out)
        values = x @ self.W_value  # (T, d_out)
        attn_scores = queries @ keys.T  # (T, d_out) @ (d_out, T) -> (T, T)
        attn_weights = torch.softmax(attn_scores / keys.shape[-1] ** 0.5, dim=-1)  # (T, T), rows sum to 1
        context_vec = attn_weights @ values  # (T, T) @ (T, d_out) -> (T, d_out)
        return (context_vec, attn_weights) if return_weights else context_vec


class SelfAttention_v2(nn.Module):
    """Self-attention with ``nn.Linear`` projections (chapter: the improved class).

    ``nn.Linear(d_in, d_out)`` stores its matrix as (d_out, d_in) and computes
    ``x @ W.T``; its default initialisation is uniform on ±1/sqrt(d_in), so
    weights of both signs with variance 1/(3 d_in). Copying ``W.T`` of each
    Linear into :class:`SelfAttention_v1` gives identical outputs (exercise 3.1,
    see :func:`copy_v2_into_v1`).

    Args:
        d_in: embedding size of the inputs.
        d_out: size of queries, keys and values.
        qkv_bias: add a bias to the three projections.

    Shapes:
        ``forward(x)``: x (T, d_in) -> context_vec (T, d_out) [, attn_weights (T, T)].

    Raises:
        ValueError: if sizes are not positive, or ``x`` is not 2-d.
    """

    def __init__(self, d_in: int, d_out: int, qkv_bias: bool = False):
        super().__init__()
        if d_in < 1 or d_out < 1:
            raise ValueError(f"d_in and d_out must be positive, got d_in={d_in}, d_out={d_out}")
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)

    def forward(self, x: Tensor, return_weights: bool = False):
        _check_rank("x", x, (2,))
        keys = self.W_key(x)  # (T, d_in) -> (T, d_out)
        queries = self.W_query(x)  # (T, d_out)
        values = self.W_value(x)  # (T, d_out)
        attn_scores = queries @ keys.T  # (T, d_out) @ (d_out, T) -> (T, T)
        attn_weights = torch.softmax(attn_scores / keys.shape[-1] ** 0.5, dim=-1)  # (T, T), rows sum to 1
        context_vec = attn_weights @ values  # (T, T) @ (T, d_out) -> (T, d_out)
        return (context_vec, attn_weights) if return_weights else context_vec


@torch.no_grad()
def copy_v2_into_v1(sa_v1: SelfAttention_v1, sa_v2: SelfAttention_v2) -> SelfAttention_v1:
    """Exercise 3.1: give ``sa_v1`` the weights of ``sa_v2`` (transposed), in place.

    Args:
        sa_v1: target module, weights (d_in, d_out).
        sa_v2: source module without bias, Linear weights (d_out, d_in).

    Returns:
        ``sa_v1``, now computing the same function as ``sa_v2``.

    Raises:
        ValueError: if sizes differ or ``sa_v2`` has biases (v1 has none).
    """
    if sa_v2.W_query.bias is not None:
        raise ValueError("SelfAttention_v1 has no bias; build SelfAttention_v2 with qkv_bias=False")
    for name in ("W_query", "W_key", "W_value"):
        target = getattr(sa_v1, name)
        source = getattr(sa_v2, name).weight.T  # (d_out, d_in) -> (d_in, d_out)
        if target.shape != source.shape:
            raise ValueError(f"{name}: v1 is {tuple(target.shape)}, v2 transposed is {tuple(source.shape)}")
        target.copy_(source)
    return sa_v1


# ---------------------------------------------------------------------------
# 3. Causal attention with dropout
# ---------------------------------------------------------------------------


def causal_mask(context_length: int, device: torch.device | str | None = None) -> Tensor:
    """Bool (context_length, context_length) mask, True strictly above the diagonal (future tokens).

    Built with ``torch.triu(ones, diagonal=1)`` as in the chapter.

    Raises:
        ValueError: if ``context_length < 1``.
    """
    if context_length < 1:
        raise ValueError(f"context_length must be positive, got {context_length}")
    return torch.triu(torch.ones(context_length, context_length, device=device), diagonal=1).bool()


class CausalAttention(nn.Module):
    """Single-head causal self-attention with dropout on the weights (chapter: CausalAttention).

    Each token attends to itself and earlier tokens only: scores above the
    diagonal are set to ``-inf`` before the softmax, so their weights are 0 and
    rows still sum to 1. The mask is a registered buffer: it moves with
    ``.to(device)`` and is saved in ``state_dict()``.

    Args:
        d_in: embedding size of the inputs.
        d_out: size of queries, keys and values (d_k = d_out).
        context_length: longest sequence the mask covers.
        dropout: probability of zeroing an attention weight in training, in [0, 1).
        qkv_bias: add a bias to the projections.

    Shapes:
        ``forward(x)``: x (b, num_tokens, d_in) -> context_vec (b, num_tokens, d_out)
        [, attn_weights (b, num_tokens, num_tokens)].

    Raises:
        ValueError: on a dropout outside [0, 1), non-positive sizes, an input that
            is not 3-d, or ``num_tokens > context_length``.
    """

    def __init__(self, d_in: int, d_out: int, context_length: int, dropout: float, qkv_bias: bool = False):
        super().__init__()
        _check_dropout(dropout)
        if d_in < 1 or d_out < 1:
            raise ValueError(f"d_in and d_out must be positive, got d_in={d_in}, d_out={d_out}")
        self.d_out = d_out
        self.context_length = context_length
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("mask", causal_mask(context_length))

    def forward(self, x: Tensor, return_weights: bool = False):
        _check_rank("x", x, (3,))
        b, num_tokens, d_in = x.shape
        if num_tokens > self.context_length:
            raise ValueError(f"input has {num_tokens} tokens but context_length is {self.context_length}")
        keys = self.W_key(x)  # (b, T, d_in) -> (b, T, d_out)
        queries = self.W_query(x)  # (b, T, d_out)
        values = self.W_value(x)  # (b, T, d_out)
        attn_scores = queries @ keys.transpose(1, 2)  # (b, T, d_out) @ (b, d_out, T) -> (b, T, T)
        mask = self.mask[:num_tokens, :num_tokens]  # (T, T), True above the diagonal: the future
        _check_mask_device(mask, attn_scores)
        attn_scores.masked_fill_(mask, -torch.inf)  # in place: the scores are a fresh tensor no one else holds
        attn_weights = torch.softmax(attn_scores / keys.shape[-1] ** 0.5, dim=-1)  # (b, T, T)
        attn_weights = self.dropout(attn_weights)  # training only; the survivors are scaled by 1/(1 - p)
        context_vec = attn_weights @ values  # (b, T, T) @ (b, T, d_out) -> (b, T, d_out)
        return (context_vec, attn_weights) if return_weights else context_vec


# ---------------------------------------------------------------------------
# 4. Multi-head attention
# ---------------------------------------------------------------------------


class MultiHeadAttentionWrapper(nn.Module):
    """``num_heads`` independent :class:`CausalAttention` heads run in turn, outputs concatenated.

    Chapter section "stacking single-head attention layers". Each head has its
    own W_query/W_key/W_value of size (d_in, d_out), so the output has
    ``d_out * num_heads`` features.

    Shapes:
        ``forward(x)``: x (b, T, d_in) -> context_vec (b, T, num_heads * d_out)
        [, attn_weights (b, num_heads, T, T)].

    Raises:
        ValueError: on ``num_heads < 1`` or any :class:`CausalAttention` error.
    """

    def __init__(
        self, d_in: int, d_out: int, context_length: int, dropout: float, num_heads: int, qkv_bias: bool = False
    ):
        super().__init__()
        if num_heads < 1:
            raise ValueError(f"num_heads must be positive, got {num_heads}")
        self.heads = nn.ModuleList(
            [CausalAttention(d_in, d_out, context_length, dropout, qkv_bias) for _ in range(num_heads)]
        )

    def forward(self, x: Tensor, return_weights: bool = False):
        outputs = [head(x, return_weights=True) for head in self.heads]
        context_vec = torch.cat([out for out, _ in outputs], dim=-1)  # H × (b, T, d_out) -> (b, T, H*d_out)
        if not return_weights:
            return context_vec
        attn_weights = torch.stack([w for _, w in outputs], dim=1)  # H × (b, T, T) -> (b, H, T, T)
        return context_vec, attn_weights


class MultiHeadAttention(nn.Module):
    """Multi-head causal attention with one projection split into heads, then ``out_proj``.

    Chapter section "multi-head attention with weight splits". One Linear per
    role maps d_in -> d_out; ``view`` cuts d_out into ``num_heads`` slices of
    ``head_dim = d_out // num_heads``, ``transpose`` brings the head axis forward
    so one batched matmul scores every head, and the heads are glued back and
    mixed by ``out_proj``. The softmax scale uses the per-head ``head_dim``.

    Args:
        d_in: embedding size of the inputs.
        d_out: total output size, split across heads.
        context_length: longest sequence the mask covers.
        dropout: probability of zeroing an attention weight in training, in [0, 1).
        num_heads: number of heads; must divide ``d_out``.
        qkv_bias: add biases to the query/key/value projections.

    Shapes:
        ``forward(x)``: x (b, T, d_in) -> context_vec (b, T, d_out)
        [, attn_weights (b, num_heads, T, T)].

    Raises:
        ValueError: if ``d_out`` is not divisible by ``num_heads``, on a dropout
            outside [0, 1), an input that is not 3-d, or ``T > context_length``.
    """

    def __init__(
        self, d_in: int, d_out: int, context_length: int, dropout: float, num_heads: int, qkv_bias: bool = False
    ):
        super().__init__()
        _check_dropout(dropout)
        if num_heads < 1 or d_out < 1 or d_in < 1:
            raise ValueError(f"sizes must be positive, got d_in={d_in}, d_out={d_out}, num_heads={num_heads}")
        if d_out % num_heads != 0:
            raise ValueError(f"d_out={d_out} is not divisible by num_heads={num_heads}")
        self.d_out = d_out
        self.num_heads = num_heads
        self.head_dim = d_out // num_heads
        self.context_length = context_length
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("mask", causal_mask(context_length))

    def split_heads(self, t: Tensor) -> Tensor:
        """(b, T, d_out) -> (b, num_heads, T, head_dim), a view (no copy): the ``view`` and ``transpose``
        that :meth:`forward` writes out for keys, queries and values, for callers that need one projection's
        heads."""
        b, num_tokens, _ = t.shape
        t = t.view(b, num_tokens, self.num_heads, self.head_dim)  # (b, T, d_out) -> (b, T, H, d_h)
        return t.transpose(1, 2)  # (b, T, H, d_h) -> (b, H, T, d_h)

    def forward(self, x: Tensor, return_weights: bool = False, return_heads: bool = False):
        """Run the layer.

        Args:
            x: (b, T, d_in).
            return_weights: also return attn_weights (b, H, T, T).
            return_heads: return the concatenated head outputs *before* ``out_proj``
                instead of the projected ones (for comparing with the wrapper).
        """
        _check_rank("x", x, (3,))
        b, num_tokens, d_in = x.shape
        if num_tokens > self.context_length:
            raise ValueError(f"input has {num_tokens} tokens but context_length is {self.context_length}")
        keys = self.W_key(x)  # (b, T, d_in) -> (b, T, d_out)
        queries = self.W_query(x)  # (b, T, d_out)
        values = self.W_value(x)  # (b, T, d_out)
        keys = keys.view(b, num_tokens, self.num_heads, self.head_dim)  # (b, T, d_out) -> (b, T, H, d_h)
        queries = queries.view(b, num_tokens, self.num_heads, self.head_dim)  # (b, T, H, d_h)
        values = values.view(b, num_tokens, self.num_heads, self.head_dim)  # (b, T, H, d_h)
        keys = keys.transpose(1, 2)  # (b, T, H, d_h) -> (b, H, T, d_h)
        queries = queries.transpose(1, 2)  # (b, H, T, d_h)
        values = values.transpose(1, 2)  # (b, H, T, d_h)
        attn_scores = queries @ keys.transpose(2, 3)  # (b, H, T, d_h) @ (b, H, d_h, T) -> (b, H, T, T)
        mask = self.mask[:num_tokens, :num_tokens]  # (T, T), True above the diagonal: the future
        _check_mask_device(mask, attn_scores)
        attn_scores.masked_fill_(mask, -torch.inf)  # in place, broadcast over b and H
        attn_weights = torch.softmax(attn_scores / keys.shape[-1] ** 0.5, dim=-1)  # (b, H, T, T), d_k = head_dim
        attn_weights = self.dropout(attn_weights)  # training only
        context_vec = (attn_weights @ values).transpose(1, 2)  # (b, H, T, T) @ (b, H, T, d_h) -> (b, T, H, d_h)
        context_vec = context_vec.contiguous().view(b, num_tokens, self.d_out)  # (b, T, H, d_h) -> (b, T, d_out)
        if not return_heads:
            context_vec = self.out_proj(context_vec)  # (b, T, d_out)
        return (context_vec, attn_weights) if return_weights else context_vec


@torch.no_grad()
def copy_wrapper_into_split(wrapper: MultiHeadAttentionWrapper, mha: MultiHeadAttention) -> MultiHeadAttention:
    """Stack the wrapper's per-head weights into the split layer's projections, in place.

    Head h of the wrapper (Linear weight (head_dim, d_in)) becomes rows
    ``h*head_dim:(h+1)*head_dim`` of the split layer's (d_out, d_in) weight; the
    concatenated head outputs (``return_heads=True``) then match the wrapper's.

    Raises:
        ValueError: if head counts or sizes differ.
    """
    heads = list(wrapper.heads)
    if len(heads) != mha.num_heads:
        raise ValueError(f"wrapper has {len(heads)} heads, split layer has {mha.num_heads}")
    for name in ("W_query", "W_key", "W_value"):
        stacked = torch.cat([getattr(h, name).weight for h in heads], dim=0)  # H × (d_h, d_in) -> (d_out, d_in)
        target = getattr(mha, name).weight
        if stacked.shape != target.shape:
            raise ValueError(f"{name}: wrapper gives {tuple(stacked.shape)}, split layer has {tuple(target.shape)}")
        target.copy_(stacked)
        biases = [getattr(h, name).bias for h in heads]
        if getattr(mha, name).bias is not None and all(b is not None for b in biases):
            getattr(mha, name).bias.copy_(torch.cat(biases))
    return mha
