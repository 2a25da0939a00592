"""The numbers the chapters print, and the rule for "matches the chapter".

These are reference values read from the chapters (``003``: "Mécanismes
d'attention"; ``000``/``002``: the multi-head and position lesson), float32 on
CPU. Pages compare live engine output with them; tests pin the engine to them.
They are never used as outputs.
"""

from __future__ import annotations

import math

import torch

#: Decimals the chapters print and the app compares at.
DECIMALS = 4

#: Chapter 003, simplified self-attention with query "journey" (token index 1).
SIMPLE_SCORES_JOURNEY = (0.9544, 1.4950, 1.4754, 0.8434, 0.7070, 1.0865)
SIMPLE_NAIVE_WEIGHTS_JOURNEY = (0.1455, 0.2278, 0.2249, 0.1285, 0.1077, 0.1656)
SIMPLE_SOFTMAX_WEIGHTS_JOURNEY = (0.1385, 0.2379, 0.2333, 0.1240, 0.1082, 0.1581)
SIMPLE_CONTEXT_JOURNEY = (0.4419, 0.6515, 0.5683)
#: All context vectors of the simplified version (rows = tokens).
SIMPLE_ALL_CONTEXT = (
    (0.4421, 0.5931, 0.5790),
    (0.4419, 0.6515, 0.5683),
    (0.4431, 0.6496, 0.5671),
    (0.4304, 0.6298, 0.5510),
    (0.4671, 0.5910, 0.5266),
    (0.4177, 0.6503, 0.5645),
)
#: First rows of ``inputs @ inputs.T`` as printed (the chapter elides the rest).
SIMPLE_SCORES_FIRST_ROWS = (
    (0.9995, 0.9544, 0.9422, 0.4753, 0.4576, 0.6310),
    (0.9544, 1.4950, 1.4754, 0.8434, 0.7070, 1.0865),
)

#: Chapter 003, trainable weights: ``torch.manual_seed(123)`` then three ``torch.rand(3, 2)``.
TRAINABLE_SEED = 123
TRAINABLE_QUERY_2 = (0.4306, 1.4551)
TRAINABLE_SCORES_2 = (1.2705, 1.8524, 1.8111, 1.0795, 0.5577, 1.5440)
TRAINABLE_WEIGHTS_2 = (0.1500, 0.2264, 0.2199, 0.1311, 0.0906, 0.1820)
TRAINABLE_CONTEXT_2 = (0.3061, 0.8210)

#: SelfAttention_v1 with seed 123 and SelfAttention_v2 with seed 789 on the inputs (d_out 2).
SA_V1_SEED = 123
SA_V1_OUTPUT = (
    (0.2996, 0.8053),
    (0.3061, 0.8210),
    (0.3058, 0.8203),
    (0.2948, 0.7939),
    (0.2927, 0.7891),
    (0.2990, 0.8040),
)
SA_V2_SEED = 789
SA_V2_OUTPUT = (
    (-0.0739, 0.0713),
    (-0.0748, 0.0703),
    (-0.0749, 0.0702),
    (-0.0760, 0.0685),
    (-0.0763, 0.0679),
    (-0.0754, 0.0693),
)
#: SelfAttention_v2 (seed 789) weights before masking, and the causal weights.
SA_V2_WEIGHTS = (
    (0.1921, 0.1646, 0.1652, 0.1550, 0.1721, 0.1510),
    (0.2041, 0.1659, 0.1662, 0.1496, 0.1665, 0.1477),
    (0.2036, 0.1659, 0.1662, 0.1498, 0.1664, 0.1480),
    (0.1869, 0.1667, 0.1668, 0.1571, 0.1661, 0.1564),
    (0.1830, 0.1669, 0.1670, 0.1588, 0.1658, 0.1585),
    (0.1935, 0.1663, 0.1666, 0.1542, 0.1666, 0.1529),
)
CAUSAL_WEIGHTS = (
    (1.0000, 0.0, 0.0, 0.0, 0.0, 0.0),
    (0.5517, 0.4483, 0.0, 0.0, 0.0, 0.0),
    (0.3800, 0.3097, 0.3103, 0.0, 0.0, 0.0),
    (0.2758, 0.2460, 0.2462, 0.2319, 0.0, 0.0),
    (0.2175, 0.1983, 0.1984, 0.1888, 0.1971, 0.0),
    (0.1935, 0.1663, 0.1666, 0.1542, 0.1666, 0.1529),
)
#: Unscaled masked scores (before dividing by sqrt(d_k)); -inf above the diagonal.
CAUSAL_MASKED_SCORES = (
    (0.2899, -math.inf, -math.inf, -math.inf, -math.inf, -math.inf),
    (0.4656, 0.1723, -math.inf, -math.inf, -math.inf, -math.inf),
    (0.4594, 0.1703, 0.1731, -math.inf, -math.inf, -math.inf),
    (0.2642, 0.1024, 0.1036, 0.0186, -math.inf, -math.inf),
    (0.2183, 0.0874, 0.0882, 0.0177, 0.0786, -math.inf),
    (0.3408, 0.1270, 0.1290, 0.0198, 0.1290, 0.0078),
)

#: Dropout p=0.5 after ``torch.manual_seed(123)`` on a 6x6 matrix of ones, then on the causal weights.
DROPOUT_SEED = 123
DROPOUT_P = 0.5
DROPOUT_ONES = (
    (2.0, 2.0, 0.0, 2.0, 2.0, 0.0),
    (0.0, 0.0, 0.0, 2.0, 0.0, 2.0),
    (2.0, 2.0, 2.0, 2.0, 0.0, 2.0),
    (0.0, 2.0, 2.0, 0.0, 0.0, 2.0),
    (0.0, 2.0, 0.0, 2.0, 0.0, 2.0),
    (0.0, 2.0, 2.0, 2.0, 2.0, 0.0),
)
DROPOUT_CAUSAL = (
    (2.0000, 0.0, 0.0, 0.0, 0.0, 0.0),
    (0.0, 0.0, 0.0, 0.0, 0.0, 0.0),
    (0.7599, 0.6194, 0.6206, 0.0, 0.0, 0.0),
    (0.0, 0.4921, 0.4925, 0.0, 0.0, 0.0),
    (0.0, 0.3966, 0.0, 0.3775, 0.0, 0.0),
    (0.0, 0.3327, 0.3331, 0.3084, 0.3331, 0.0),
)

#: CausalAttention (seed 123, d_out 2, dropout 0) on the batch of two copies: first sequence.
#: MultiHeadAttentionWrapper (seed 123, 2 heads of d_out 2): first sequence.
MHA_WRAPPER_SEED = 123
MHA_WRAPPER_OUTPUT = (
    (-0.4519, 0.2216, 0.4772, 0.1063),
    (-0.5874, 0.0058, 0.5891, 0.3257),
    (-0.6300, -0.0632, 0.6202, 0.3860),
    (-0.5675, -0.0843, 0.5478, 0.3589),
    (-0.5526, -0.0981, 0.5321, 0.3428),
    (-0.5299, -0.1081, 0.5077, 0.3493),
)
#: MultiHeadAttention with weight splits (seed 123, d_in 3, d_out 2, 2 heads, out_proj): first row.
MHA_SPLIT_SEED = 123
MHA_SPLIT_FIRST_ROW = (0.3190, 0.4858)

#: Lesson 000/002: one attention layer at n_embd 32 (with biases), whatever the head count.
LESSON_N_EMBD = 32
LESSON_QKV_PARAMS = 3168
LESSON_PROJ_PARAMS = 1056

#: Chapter 003, memory layout: the 2x3 matrix, its view(3, 2), its transpose, and the transpose's
#: elements in logical reading order (its storage still holds 1 … 6 in order).
LAYOUT_MATRIX = ((1, 2, 3), (4, 5, 6))
LAYOUT_VIEW_3_2 = ((1, 2), (3, 4), (5, 6))
LAYOUT_TRANSPOSED = ((1, 4), (2, 5), (3, 6))
LAYOUT_STORAGE = (1, 2, 3, 4, 5, 6)
LAYOUT_TRANSPOSED_READING_ORDER = (1, 4, 2, 5, 3, 6)


def matches(value, expected, decimals: int = DECIMALS) -> bool:
    """True when ``value`` equals ``expected`` at ``decimals`` decimals (tolerance half a unit).

    Works for scalars and nested sequences / tensors of the same shape; ``-inf``
    matches ``-inf``. A shape mismatch or a NaN is a mismatch.
    """
    got = torch.as_tensor(value, dtype=torch.float64).detach().cpu()
    want = torch.as_tensor(expected, dtype=torch.float64)
    if got.shape != want.shape:
        return False
    if torch.isnan(got).any():
        return False
    same_inf = torch.isinf(want) & (got == want)
    close = (got - want).abs() <= 0.5 * 10 ** (-decimals) + 1e-9
    return bool((same_inf | close).all())

#: Lessons 000/002, the permutation experiment: Wang Zhihuan's line and the same characters reordered.
LESSON_LINE = "白日依山尽"
PERMUTED_LINE = "山依日白尽"
#: The prompt the lesson samples from (the first two characters of ``LESSON_LINE``).
LESSON_PROMPT = "白日"
#: Prompts the shipped model's samples start from (``LESSON_PROMPT`` first).
SAMPLE_PROMPTS = (LESSON_PROMPT, "明月", "春")
