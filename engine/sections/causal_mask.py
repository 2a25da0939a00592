"""Section 3, causal mask: the experiments behind the page.

Source: chapter ``003`` ("Mécanismes d'attention"), sections on causal attention
(masking after the softmax and renormalising vs masking scores with -inf),
``torch.triu``/``torch.tril``, the compact ``CausalAttention`` class and
``register_buffer``. The fully masked row is the classic pitfall of padding
masks (every position of a row hidden gives 0/0 in the softmax).
"""

from __future__ import annotations

import pandas as pd
import torch
from torch import Tensor

from engine import attention as A
from engine.rng import uses_global_rng

#: Ways to keep a fully masked row from turning into NaN, by name (see :func:`masked_row_demo`).
GUARDS: tuple[str, ...] = ("none (-inf)", "large finite negative", "nan_to_num after softmax", "keep the diagonal visible")


@uses_global_rng
def v2_scores(inputs: Tensor, seed: int = 789, d_out: int = 2) -> Tensor:
    """Unscaled scores ``queries @ keys.T`` of a SelfAttention_v2 built after ``manual_seed(seed)``.

    The chapter reuses its ``sa_v2`` (seed 789, d_out 2) for the causal section.

    Args:
        inputs: (T, d_in) float32.
        seed: ``torch.manual_seed`` before building the module.
        d_out: size of queries and keys.

    Returns:
        (T, T) attn_scores (no grad).

    Raises:
        ValueError: on a non-positive ``d_out`` or a non-2-d input.
    """
    if inputs.dim() != 2:
        raise ValueError(f"inputs must be (T, d_in), got shape {tuple(inputs.shape)}")
    torch.manual_seed(seed)
    sa_v2 = A.SelfAttention_v2(inputs.shape[1], d_out)
    with torch.no_grad():
        queries = sa_v2.W_query(inputs)  # (T, d_in) -> (T, d_out)
        keys = sa_v2.W_key(inputs)  # (T, d_out)
        return queries @ keys.T  # (T, d_out) @ (d_out, T) -> (T, T)


def mask_two_ways(attn_scores: Tensor, d_k: int) -> dict[str, Tensor | float]:
    """Causal weights twice: softmax, zero the future, renormalise — and -inf before the softmax.

    Chapter section "applying a causal attention mask". Renormalising the
    surviving weights of row i divides exp(s_ij / sqrt(d_k)) by the sum over
    j <= i only, which is exactly the softmax over the visible positions, so both
    routes give the same matrix (up to float rounding).

    Args:
        attn_scores: (T, T) unscaled scores.
        d_k: key size used in the 1/sqrt(d_k) scale (2 in the chapter).

    Returns:
        dict with ``attn_scores`` (T, T) as given, ``attn_weights`` (T, T) softmax of all scores, ``mask_simple`` (T, T) float
        ones on and below the diagonal (``tril``), ``masked_simple`` weights times that mask,
        ``row_sums`` (T,) of ``masked_simple``, ``masked_simple_norm`` (T, T) renormalised,
        ``mask`` (T, T) bool True above the diagonal (``triu(diagonal=1)``), ``masked_scores``
        (T, T) with -inf there, ``attn_weights_causal`` (T, T) softmax of the masked scores,
        ``max_abs_diff`` (float) between the two causal matrices.

    Raises:
        ValueError: if ``attn_scores`` is not square 2-d or ``d_k < 1``.
    """
    if attn_scores.dim() != 2 or attn_scores.shape[0] != attn_scores.shape[1]:
        raise ValueError(f"attn_scores must be (T, T), got shape {tuple(attn_scores.shape)}")
    if d_k < 1:
        raise ValueError(f"d_k must be positive, got {d_k}")
    T = attn_scores.shape[0]
    attn_weights = torch.softmax(attn_scores / d_k**0.5, dim=-1)  # (T, T)
    mask_simple = torch.tril(torch.ones(T, T))  # (T, T), 1 on and below the diagonal
    masked_simple = attn_weights * mask_simple  # (T, T), future weights zeroed
    row_sums = masked_simple.sum(dim=-1, keepdim=True)  # (T, 1)
    masked_simple_norm = masked_simple / row_sums  # (T, T), rows sum to 1 again
    mask = A.causal_mask(T)  # (T, T) bool, True strictly above the diagonal
    masked_scores = attn_scores.masked_fill(mask, float("-inf"))  # (T, T)
    attn_weights_causal = torch.softmax(masked_scores / d_k**0.5, dim=-1)  # (T, T)
    return {
        "attn_scores": attn_scores,
        "attn_weights": attn_weights,
        "mask_simple": mask_simple,
        "masked_simple": masked_simple,
        "row_sums": row_sums.squeeze(-1),  # (T, 1) -> (T,)
        "masked_simple_norm": masked_simple_norm,
        "mask": mask,
        "masked_scores": masked_scores,
        "attn_weights_causal": attn_weights_causal,
        "max_abs_diff": float((masked_simple_norm - attn_weights_causal).abs().max()),
    }


@uses_global_rng
def leakage_test(inputs: Tensor, token_index: int, delta: float, seed: int = 123, d_out: int = 2) -> pd.DataFrame:
    """Perturb one token's embedding and see which output rows move, with and without the mask.

    A ``CausalAttention`` (dropout 0) is built after ``manual_seed(seed)``; the
    same projections without a mask (a ``SelfAttention_v2`` loaded with its
    weights) serve as the contrast. ``delta`` is added to every coordinate of
    token ``token_index``. With the mask, rows before that token are bitwise
    unchanged: their scores never see the token's key and its value is
    multiplied by an exact 0.

    Args:
        inputs: (T, d_in) float32.
        token_index: the token perturbed, in [0, T).
        delta: amount added to each coordinate of that token's embedding.
        seed: seed of the projections.
        d_out: size of queries, keys and values.

    Returns:
        DataFrame, one row per token: ``token index``, ``max |Δ| causal``,
        ``changed (causal)``, ``max |Δ| no mask``, ``changed (no mask)``;
        "changed" means a nonzero difference.

    Raises:
        ValueError: if ``token_index`` is outside [0, T) or the input is not 2-d.
    """
    if inputs.dim() != 2:
        raise ValueError(f"inputs must be (T, d_in), got shape {tuple(inputs.shape)}")
    T, d_in = inputs.shape
    if not 0 <= token_index < T:
        raise ValueError(f"token_index must be in [0, {T}), got {token_index}")
    torch.manual_seed(seed)
    causal = A.CausalAttention(d_in, d_out, context_length=T, dropout=0.0)
    full = A.SelfAttention_v2(d_in, d_out)
    full.load_state_dict({k: v for k, v in causal.state_dict().items() if k != "mask"})
    perturbed = inputs.clone()
    perturbed[token_index] += delta
    with torch.no_grad():
        causal_diff = (causal(perturbed.unsqueeze(0)) - causal(inputs.unsqueeze(0))).squeeze(0)  # (1, T, d_out) -> (T, d_out)
        full_diff = full(perturbed) - full(inputs)  # (T, d_out)
    causal_max = causal_diff.abs().amax(dim=-1)  # (T,)
    full_max = full_diff.abs().amax(dim=-1)  # (T,)
    return pd.DataFrame(
        {
            "token index": range(T),
            "max |Δ| causal": causal_max.double().numpy(),
            "changed (causal)": (causal_max > 0).numpy(),
            "max |Δ| no mask": full_max.double().numpy(),
            "changed (no mask)": (full_max > 0).numpy(),
        }
    )


def triu_explorer(context_length: int, diagonal: int) -> dict[str, object]:
    """``torch.triu(ones, diagonal=k)`` read as a mask (1 = hidden), and what it lets each row see.

    k = 1 is the causal mask; k <= 0 also hides the token itself (row 0 then hides
    everything: a fully masked row); k >= 2 lets each token see k - 1 future
    tokens; k >= T hides nothing; k <= -(T - 1) hides everything.

    Args:
        context_length: T, size of the square matrix.
        diagonal: k, the offset passed to ``torch.triu``.

    Returns:
        dict with ``mask`` (T, T) float32 0/1, ``visible_per_row`` (list of T ints),
        ``fully_masked_rows`` (list of row indices), ``hides_diagonal`` (bool),
        ``future_visible`` (int, future tokens a row may see at most), ``is_causal`` (bool).

    Raises:
        ValueError: if ``context_length < 1``.
    """
    if context_length < 1:
        raise ValueError(f"context_length must be positive, got {context_length}")
    mask = torch.triu(torch.ones(context_length, context_length), diagonal=diagonal)  # (T, T)
    visible = (mask == 0).sum(dim=-1)  # (T,)
    return {
        "mask": mask,
        "visible_per_row": [int(v) for v in visible],
        "fully_masked_rows": [i for i, v in enumerate(visible.tolist()) if v == 0],
        "hides_diagonal": diagonal <= 0,
        "future_visible": max(0, min(diagonal - 1, context_length - 1)),
        "is_causal": diagonal == 1,
    }


def masked_row_demo(attn_scores: Tensor, row: int, guard: str, d_k: int = 2) -> dict[str, object]:
    """Hide every position of one row (as a padding mask would) and apply a guard against NaN.

    With the plain -inf fill, that row's softmax is exp(-inf)/sum = 0/0 = NaN,
    and the NaN spreads to its context vector and, in training, to every gradient.
    Guards:

    * ``"large finite negative"``: fill with ``torch.finfo(dtype).min`` instead of -inf;
      the row becomes uniform (it silently attends to every position) but stays finite.
    * ``"nan_to_num after softmax"``: keep -inf, replace NaN weights by 0; the row's
      context vector is 0.
    * ``"keep the diagonal visible"``: never mask position (i, i); the row attends to itself.

    Args:
        attn_scores: (T, T) unscaled scores.
        row: the row whose every position is hidden (on top of the causal mask).
        guard: one of :data:`GUARDS`.
        d_k: key size for the 1/sqrt(d_k) scale.

    Returns:
        dict with ``mask`` (T, T) bool, ``attn_weights`` (T, T) (may hold NaN),
        ``nan_rows`` (list of row indices with a NaN) and ``row_weights`` (T,) of that row.

    Raises:
        ValueError: on an unknown guard or a row outside [0, T).
    """
    if guard not in GUARDS:
        raise ValueError(f"unknown guard {guard!r}; choose one of {GUARDS}")
    T = attn_scores.shape[0]
    if not 0 <= row < T:
        raise ValueError(f"row must be in [0, {T}), got {row}")
    mask = A.causal_mask(T).clone()  # (T, T) bool
    mask[row] = True  # every key hidden from this query
    if guard == "keep the diagonal visible":
        mask &= ~torch.eye(T, dtype=torch.bool)  # (T, T): position (i, i) always visible
    fill = torch.finfo(attn_scores.dtype).min if guard == "large finite negative" else float("-inf")
    masked_scores = attn_scores.masked_fill(mask, fill)  # (T, T)
    attn_weights = torch.softmax(masked_scores / d_k**0.5, dim=-1)  # (T, T)
    if guard == "nan_to_num after softmax":
        attn_weights = torch.nan_to_num(attn_weights, nan=0.0)
    nan_rows = [i for i in range(T) if bool(torch.isnan(attn_weights[i]).any())]
    return {"mask": mask, "attn_weights": attn_weights, "nan_rows": nan_rows, "row_weights": attn_weights[row]}


class CausalAttentionPlainMask(A.CausalAttention):
    """Counter-example: :class:`engine.attention.CausalAttention` with the mask as a plain attribute.

    Same parameters and forward; only ``self.mask`` is an ordinary tensor
    attribute instead of a registered buffer, so ``.to()`` leaves it where it
    was and ``state_dict()`` does not contain it.
    """

    def __init__(self, d_in: int, d_out: int, context_length: int, dropout: float, qkv_bias: bool = False):
        super().__init__(d_in, d_out, context_length, dropout, qkv_bias)
        mask = self._buffers.pop("mask")  # unregister the buffer ...
        self.mask = mask  # ... and keep the same tensor as a plain attribute


class CausalAttentionNonPersistent(A.CausalAttention):
    """:class:`engine.attention.CausalAttention` with ``register_buffer(..., persistent=False)``.

    The mask still follows ``.to()``, but is left out of ``state_dict()`` (it is
    rebuilt by ``__init__`` anyway).
    """

    def __init__(self, d_in: int, d_out: int, context_length: int, dropout: float, qkv_bias: bool = False):
        super().__init__(d_in, d_out, context_length, dropout, qkv_bias)
        mask = self._buffers.pop("mask")
        self.register_buffer("mask", mask, persistent=False)


#: The three ways of holding the mask compared by :func:`buffer_demo`.
MASK_HOLDERS: dict[str, type[A.CausalAttention]] = {
    "register_buffer (the chapter)": A.CausalAttention,
    "register_buffer(persistent=False)": CausalAttentionNonPersistent,
    "plain attribute self.mask = ...": CausalAttentionPlainMask,
}


@uses_global_rng
def buffer_demo(target: str | torch.device = "meta", context_length: int = 6) -> pd.DataFrame:
    """Where the mask goes with ``.to(target)`` and whether it is saved, for each way of holding it.

    On a machine without a GPU, ``target="meta"`` (tensors with shapes but no
    data) shows the same thing as ``"cuda"`` would: parameters and buffers move,
    a plain attribute stays on the CPU, and the forward pass then fails with a
    device-mismatch ``RuntimeError``.

    Args:
        target: device passed to ``module.to``: "meta", "cuda", "cpu", ...
        context_length: size of the mask.

    Returns:
        DataFrame, one row per entry of :data:`MASK_HOLDERS`: ``mask held as``,
        ``state_dict() keys``, ``mask in state_dict()``, ``in named_buffers()``, ``weights after .to()``,
        ``mask after .to()``, ``forward after .to()`` ("ok, shape (...)" or the error).
    """
    rows = []
    for label, cls in MASK_HOLDERS.items():
        torch.manual_seed(123)
        module = cls(3, 2, context_length, 0.0)
        keys = ", ".join(module.state_dict().keys())
        in_state = "mask" in module.state_dict()
        buffers = [name for name, _ in module.named_buffers()]
        module.to(target)
        x = torch.rand(2, context_length, 3, device=target)  # (b, T, d_in)
        try:
            with torch.no_grad():
                out = module(x)
            outcome = f"ok, shape {tuple(out.shape)}"
        except RuntimeError as err:
            outcome = f"RuntimeError: {str(err).splitlines()[0]}"
        rows.append(
            {
                "mask held as": label,
                "state_dict() keys": keys,
                "mask in state_dict()": in_state,
                "in named_buffers()": "mask" in buffers,
                "weights after .to()": str(module.W_query.weight.device),
                "mask after .to()": str(module.mask.device),
                "forward after .to()": outcome,
            }
        )
    return pd.DataFrame(rows)
