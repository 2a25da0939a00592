"""Section 4, dropout on the attention weights: the experiments behind the page.

Source: chapter ``003`` ("Mécanismes d'attention"), section on masking extra
attention weights with dropout (Hinton et al., 2012; Srivastava et al., 2014:
"inverted" dropout scales the survivors by 1/(1 - p) during training, so
nothing changes at evaluation time), and the ``CausalAttention`` class.
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
from engine.sections import causal_mask

#: Dropout rates the in-figure slider visits: 0, 0.1, ..., 0.9.
P_VALUES: tuple[float, ...] = tuple(round(0.1 * i, 1) for i in range(10))


def chapter_causal_weights(inputs: Tensor) -> Tensor:
    """The chapter's causal attention weights (SelfAttention_v2 with seed 789, d_out 2, -inf mask).

    Returns:
        (T, T) float32 weights, zero above the diagonal, rows summing to 1.
    """
    scores = causal_mask.v2_scores(inputs, seed=chapter.SA_V2_SEED, d_out=2)  # (T, T)
    return causal_mask.mask_two_ways(scores, d_k=2).attn_weights_causal


@dataclass(frozen=True)
class DropoutPair:
    """``nn.Dropout(p)`` applied with one mask to a matrix of ones and to the weights.

    Attributes:
        p: the dropout rate.
        ones: (T, T) float32 dropout(ones): 0 where dropped, 1/(1 - p) where kept.
        weights: (T, T) float32 the weights after the same mask.
        ones_row_sums, weights_row_sums: (T,) their row sums.
        scale: 1/(1 - p), the factor of the survivors.
        kept: number of cells kept.
    """

    p: float
    ones: Tensor
    weights: Tensor
    ones_row_sums: Tensor
    weights_row_sums: Tensor
    scale: float
    kept: int


@uses_global_rng
def dropout_pair(weights: Tensor, p: float, seed: int, device: str | torch.device = "cpu") -> DropoutPair:
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
        A :class:`DropoutPair`, its tensors on the CPU.

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
    return DropoutPair(
        p=p,
        ones=ones,
        weights=dropped,
        ones_row_sums=ones.sum(dim=-1),  # (T, T) -> (T,)
        weights_row_sums=dropped.sum(dim=-1),  # (T, T) -> (T,)
        scale=1.0 / (1.0 - p),
        kept=int((ones > 0).sum()),
    )


def dropout_sweep(weights: Tensor, seed: int, p_values: tuple[float, ...] = P_VALUES) -> dict[float, DropoutPair]:
    """:func:`dropout_pair` at every rate of ``p_values`` (for the in-figure slider), keyed by p."""
    return {p: dropout_pair(weights, p, seed) for p in p_values}


@dataclass(frozen=True)
class DeviceMask:
    """The chapter's dropout on another device against the CPU.

    Attributes:
        device: the device type ("cuda", "mps").
        ones: (T, T) dropout(ones) drawn there (on the CPU now).
        same_as_cpu: True when it equals the CPU's mask for the same seed.
    """

    device: str
    ones: Tensor
    same_as_cpu: bool


def device_mask(weights: Tensor, p: float, seed: int, device: torch.device, cpu: DropoutPair) -> DeviceMask:
    """:func:`dropout_pair` on ``device`` with the same seed, compared with the CPU's result ``cpu``."""
    there = dropout_pair(weights, p, seed, device=device)
    return DeviceMask(device.type, there.ones, bool(torch.equal(there.ones, cpu.ones)))


@dataclass(frozen=True)
class Expectation:
    """The running mean of many dropped-out copies of the weights.

    Attributes:
        table: one row per n = 1 … n_masks: ``masks``, ``max_abs_error`` (max |mean of n − weights|
            over all cells) and ``sigma_over_sqrt_n`` (σ of the largest weight's cell / √n).
        masks: n_masks.
        final_error, final_sigma: the last row's two values.
        error_after_10: ``max_abs_error`` after 10 masks (after n_masks when fewer).
    """

    table: pd.DataFrame
    masks: int
    final_error: float
    final_sigma: float
    error_after_10: float


@uses_global_rng
def dropout_expectation(weights: Tensor, p: float, n_masks: int = 2000, seed: int = 0) -> Expectation:
    """The mean of many dropped-out copies of the weights converges back to the weights.

    Each surviving weight is scaled by 1/(1 - p), so every cell's expectation is
    the original weight: E[keep / (1 - p)] = 1. A cell with weight w has standard
    deviation w sqrt(p / (1 - p)), so the mean over n masks strays by about that
    divided by sqrt(n).

    Args:
        weights: (T, T) attention weights.
        p: dropout rate in [0, 1).
        n_masks: number of independent masks (one ``nn.Dropout`` call on n stacked copies), at most 10 000.
        seed: ``torch.manual_seed`` before drawing.

    Raises:
        ValueError: if ``p`` is outside [0, 1) or ``n_masks`` outside [1, 10 000].
    """
    if not 0.0 <= p < 1.0:
        raise ValueError(f"p must be in [0, 1), got {p}")
    if not 1 <= n_masks <= 10_000:
        raise ValueError(f"n_masks must be in [1, 10000], got {n_masks}")
    torch.manual_seed(seed)
    copies = weights.unsqueeze(0).expand(n_masks, *weights.shape)  # (T, T) -> (n, T, T)
    dropped = nn.Dropout(p)(copies)  # (n, T, T), an independent mask per copy
    counts = torch.arange(1, n_masks + 1, dtype=torch.float64).view(-1, 1, 1)  # (n, 1, 1)
    running_mean = dropped.double().cumsum(dim=0) / counts  # (n, T, T): mean of the first k copies
    max_err = (running_mean - weights.double()).abs().amax(dim=(1, 2))  # (n, T, T) -> (n,)
    sigma_max = float(weights.max()) * math.sqrt(p / (1.0 - p))
    table = pd.DataFrame({
        "masks": torch.arange(1, n_masks + 1).numpy(),
        "max_abs_error": max_err.numpy(),
        "sigma_over_sqrt_n": sigma_max / counts.view(-1).sqrt().numpy(),
    })
    return Expectation(
        table=table,
        masks=n_masks,
        final_error=float(max_err[-1]),
        final_sigma=float(table["sigma_over_sqrt_n"].iloc[-1]),
        error_after_10=float(max_err[min(10, n_masks) - 1]),
    )


@dataclass(frozen=True)
class TrainVsEval:
    """``CausalAttention`` with dropout, called twice in train() mode and twice in eval() mode.

    Attributes:
        train_1, train_2, eval_1: (T, T) attention weights of the first two train() calls and an eval() call.
        train_row_sums: (T,) row sums of ``train_1`` (not 1 when p > 0).
        train_calls_differ: the two train() calls gave different weights.
        eval_calls_equal: the two eval() calls gave the same output.
        eval_equals_no_dropout: eval() output equals the same layer built with p = 0.
        max_abs_diff_eval_vs_p0: largest |eval() output − p = 0 output| (context vectors).
    """

    train_1: Tensor
    train_2: Tensor
    eval_1: Tensor
    train_row_sums: Tensor
    train_calls_differ: bool
    eval_calls_equal: bool
    eval_equals_no_dropout: bool
    max_abs_diff_eval_vs_p0: float


@uses_global_rng
def train_vs_eval(inputs: Tensor, p: float, seed: int, model_seed: int = 123) -> TrainVsEval:
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
    return TrainVsEval(
        train_1=train_1[0],  # (1, T, T) -> (T, T)
        train_2=train_2[0],
        eval_1=eval_1[0],
        train_row_sums=train_1[0].sum(dim=-1),  # (T, T) -> (T,)
        train_calls_differ=not torch.equal(train_1, train_2),
        eval_calls_equal=torch.equal(eval_ctx_1, eval_ctx_2),
        eval_equals_no_dropout=torch.equal(eval_ctx_1, ref_ctx),
        max_abs_diff_eval_vs_p0=float((eval_ctx_1 - ref_ctx).abs().max()),
    )


# --- the page's prediction gates (``ui/questions/dropout.py``): their answers, which the page and its notebook's
# exercises both call --------------------------------------------------------------------------------------------


def chapter_pair(seed: int) -> DropoutPair:
    """Dropout at the chapter's rate on ones and on the chapter's causal weights (:func:`dropout_pair`, the step
    page 4's figure opens on)."""
    return dropout_pair(chapter_causal_weights(A.chapter_inputs()), chapter.DROPOUT_P, seed)


def kept_value(seed: int) -> float:
    """The value of a kept cell of dropout(ones(6, 6)): the largest cell of the dropped-out ones."""
    return float(chapter_pair(seed).ones.max())


def row_sums_kind(seed: int) -> str:
    """What the row sums of the dropped-out causal weights look like: ``all_one``, ``one_minus_p`` (every row near
    1 − p) or ``vary``."""
    sums = chapter_pair(seed).weights_row_sums
    if torch.allclose(sums, torch.ones_like(sums), atol=1e-4):
        return "all_one"
    if torch.allclose(sums, torch.full_like(sums, 1 - chapter.DROPOUT_P), atol=0.05):
        return "one_minus_p"
    return "vary"


def where_dropout(p: float, seed: int) -> str:
    """Where :class:`engine.attention.CausalAttention` applies dropout, read from :func:`train_vs_eval`:
    ``weights`` when each train() weight is 0 or the eval() weight × 1/(1 − p), ``scores`` when the train() rows
    still sum to 1 with zeros in them, ``context`` otherwise."""
    modes = train_vs_eval(A.chapter_inputs(), p, seed)
    train, evaluated = modes.train_1, modes.eval_1  # (T, T) each
    kept = train != 0
    if torch.allclose(train[kept], evaluated[kept] / (1 - p), atol=1e-6):
        return "weights"
    if torch.allclose(train.sum(-1), torch.ones(train.shape[0]), atol=1e-5):
        return "scores"
    return "context"
