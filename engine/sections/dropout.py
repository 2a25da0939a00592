"""Section 4, dropout on the attention weights: the experiments behind the page.

Source: chapter ``003`` ("Mécanismes d'attention"), section on masking extra
attention weights with dropout (Hinton et al., 2012; Srivastava et al., 2014:
"inverted" dropout scales the survivors by 1/(1 - p) during training, so
nothing changes at evaluation time), and the ``CausalAttention`` class.
"""

from __future__ import annotations

import math

import pandas as pd
import torch
from torch import Tensor, nn

from engine import attention as A
from engine.sections import causal_mask as M
from engine.rng import uses_global_rng

#: Dropout rates the in-figure slider visits: 0, 0.1, ..., 0.9.
P_VALUES: tuple[float, ...] = tuple(round(0.1 * i, 1) for i in range(10))


def chapter_causal_weights(inputs: Tensor) -> Tensor:
    """The chapter's causal attention weights (SelfAttention_v2 with seed 789, d_out 2, -inf mask).

    Returns:
        (T, T) float32 weights, zero above the diagonal, rows summing to 1.
    """
    return M.mask_two_ways(M.v2_scores(inputs, seed=789, d_out=2), d_k=2).attn_weights_causal


@uses_global_rng
def dropout_pair(weights: Tensor, p: float, seed: int, device: str | torch.device = "cpu") -> dict[str, Tensor]:
    """``nn.Dropout(p)`` on a matrix of ones, then on the weights, each right after ``manual_seed(seed)``.

    Reseeding before each call (as the chapter does) gives both matrices the same
    mask, so the ones show which positions survived and with what factor.

    Args:
        weights: (T, T) attention weights.
        p: dropout rate in [0, 1).
        seed: value for ``torch.manual_seed`` (reseeds the global generators of every device).
        device: where dropout runs; the CUDA generator is a different algorithm from the
            CPU one, so the same seed gives different masks there.

    Returns:
        dict with ``ones`` and ``weights`` after dropout (T, T), on the CPU, their row sums
        ``ones_row_sums`` and ``weights_row_sums`` (T,), and ``scale`` = 1/(1 - p).

    Raises:
        ValueError: if ``p`` is outside [0, 1) or ``weights`` is not 2-d.
    """
    if not 0.0 <= p < 1.0:
        raise ValueError(f"p must be in [0, 1), got {p}")
    if weights.dim() != 2:
        raise ValueError(f"weights must be (T, T), got shape {tuple(weights.shape)}")
    dropout = nn.Dropout(p)  # a fresh module is in training mode
    weights = weights.to(device)
    torch.manual_seed(seed)
    ones = dropout(torch.ones_like(weights)).cpu()  # (T, T): 0 or 1/(1-p)
    torch.manual_seed(seed)
    dropped = dropout(weights).cpu()  # (T, T), same mask as ``ones``
    return {
        "ones": ones,
        "weights": dropped,
        "ones_row_sums": ones.sum(dim=-1),  # (T, T) -> (T,)
        "weights_row_sums": dropped.sum(dim=-1),  # (T,)
        "scale": torch.tensor(1.0 / (1.0 - p)),
    }


def dropout_sweep(weights: Tensor, seed: int, p_values: tuple[float, ...] = P_VALUES) -> dict[float, dict[str, Tensor]]:
    """:func:`dropout_pair` at every rate of ``p_values`` (for the in-figure slider).

    Returns:
        dict p -> the dict of :func:`dropout_pair`.
    """
    return {p: dropout_pair(weights, p, seed) for p in p_values}


@uses_global_rng
def dropout_expectation(weights: Tensor, p: float, n_masks: int = 2000, seed: int = 0) -> pd.DataFrame:
    """The mean of many dropped-out copies of the weights converges back to the weights.

    Each surviving weight is scaled by 1/(1 - p), so every cell's expectation is
    the original weight: E[keep / (1 - p)] = 1. A cell with weight w has standard
    deviation w sqrt(p / (1 - p)), so the mean over n masks strays by about that
    divided by sqrt(n).

    Args:
        weights: (T, T) attention weights.
        p: dropout rate in [0, 1).
        n_masks: number of independent masks (one ``nn.Dropout`` call on n stacked copies).
        seed: ``torch.manual_seed`` before drawing.

    Returns:
        DataFrame with one row per n = 1 .. n_masks: ``masks``, ``max |mean - weights|``
        (over all cells, after n masks) and ``σ_max / √n`` (the standard deviation of the
        largest weight's cell divided by sqrt(n)).

    Raises:
        ValueError: if ``p`` is outside [0, 1) or ``n_masks < 1``.
    """
    if not 0.0 <= p < 1.0:
        raise ValueError(f"p must be in [0, 1), got {p}")
    if n_masks < 1:
        raise ValueError(f"n_masks must be positive, got {n_masks}")
    torch.manual_seed(seed)
    copies = weights.unsqueeze(0).expand(n_masks, *weights.shape)  # (T, T) -> (n, T, T)
    dropped = nn.Dropout(p)(copies)  # (n, T, T), an independent mask per copy
    counts = torch.arange(1, n_masks + 1, dtype=torch.float64).view(-1, 1, 1)  # (n, 1, 1)
    running_mean = dropped.double().cumsum(dim=0) / counts  # (n, T, T): mean of the first k copies
    max_err = (running_mean - weights.double()).abs().amax(dim=(1, 2))  # (n, T, T) -> (n,)
    sigma_max = float(weights.max()) * math.sqrt(p / (1.0 - p))
    return pd.DataFrame(
        {
            "masks": torch.arange(1, n_masks + 1).numpy(),
            "max |mean - weights|": max_err.numpy(),
            "σ_max / √n": sigma_max / counts.view(-1).sqrt().numpy(),
        }
    )


@uses_global_rng
def train_vs_eval(inputs: Tensor, p: float, seed: int, model_seed: int = 123) -> dict[str, Tensor | float | bool]:
    """``CausalAttention`` with dropout p, called twice in train() mode and twice in eval() mode.

    In training each call draws a new mask (weights zeroed at random, survivors
    scaled by 1/(1 - p), rows no longer summing to 1); ``eval()`` switches
    ``nn.Dropout`` off, so the output equals that of the same layer built with
    p = 0.

    Args:
        inputs: (T, d_in) float32; run as a batch of one.
        p: dropout rate in [0, 1).
        seed: ``torch.manual_seed`` before the two training calls.
        model_seed: seed the layer is built with (the chapter's 123).

    Returns:
        dict with ``train_1``, ``train_2``, ``eval_1`` (T, T) attention weights,
        ``train_row_sums`` (T,) of ``train_1``, ``eval_equals_no_dropout`` and
        ``eval_calls_equal`` (bool), ``train_calls_differ`` (bool),
        ``max_abs_diff_eval_vs_p0`` (float, context vectors).

    Raises:
        ValueError: if ``p`` is outside [0, 1).
    """
    T, d_in = inputs.shape
    torch.manual_seed(model_seed)
    layer = A.CausalAttention(d_in, 2, context_length=T, dropout=p)
    reference = A.CausalAttention(d_in, 2, context_length=T, dropout=0.0)
    reference.load_state_dict(layer.state_dict())
    x = inputs.unsqueeze(0)  # (T, d_in) -> (1, T, d_in)
    with torch.no_grad():
        layer.train()
        torch.manual_seed(seed)
        _, train_1 = layer(x, return_weights=True)  # (1, T, T)
        _, train_2 = layer(x, return_weights=True)
        layer.eval()
        eval_ctx_1, eval_1 = layer(x, return_weights=True)
        eval_ctx_2, _ = layer(x, return_weights=True)
        ref_ctx = reference(x)
    return {
        "train_1": train_1[0],  # (1, T, T) -> (T, T)
        "train_2": train_2[0],
        "eval_1": eval_1[0],
        "train_row_sums": train_1[0].sum(dim=-1),  # (T,)
        "train_calls_differ": not torch.equal(train_1, train_2),
        "eval_calls_equal": torch.equal(eval_ctx_1, eval_ctx_2),
        "eval_equals_no_dropout": torch.equal(eval_ctx_1, ref_ctx),
        "max_abs_diff_eval_vs_p0": float((eval_ctx_1 - ref_ctx).abs().max()),
    }
