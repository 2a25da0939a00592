"""The lesson's measurements ("multi-head attention and positional encoding") as functions returning tables.

* ``attention_param_counts``: one attention layer's parameters for several head counts (the
  count does not change: n_embd 32 gives qkv 3168 and proj 1056 whatever n_head is).
* ``permutation_experiment``: how much the last position's output differs between "白日依山尽"
  and "山依日白尽" in an untrained, seeded GPT, by number of layers and position encoding. With
  no position information and one layer the difference is float rounding (~1e-7): attention
  sums the same five vectors in another order. From two layers on it is clearly non-zero,
  because the causal mask lets each earlier position see a different prefix, which leaks order
  (Haviv et al., 2022, "Transformer Language Models without Positional Encodings Still Learn
  Positional Information").
"""

from __future__ import annotations

from collections.abc import Iterable

import pandas as pd
import torch

from engine.gpt import GPT, CausalSelfAttention, GPTConfig
from engine.rng import uses_global_rng
from engine.tokenizer import CharTokenizer


def attention_param_counts(n_embd: int = 32, head_counts: Iterable[int] = (1, 2, 4, 8), bias: bool = True) -> pd.DataFrame:
    """Parameters of one ``CausalSelfAttention`` layer for each head count.

    Returns:
        DataFrame with columns n_head, head_dim, qkv_params, proj_params, total_params
        (n_embd 32 with biases: 3168, 1056, 4224 on every row).

    Raises:
        ValueError: if a head count does not divide n_embd (from ``GPTConfig``).
    """
    rows = []
    for n_head in head_counts:
        config = GPTConfig(vocab_size=1, block_size=1, n_embd=n_embd, n_head=n_head, n_layer=1, bias=bias)
        attn = CausalSelfAttention(config)
        qkv = sum(p.numel() for p in attn.qkv.parameters())
        proj = sum(p.numel() for p in attn.proj.parameters())
        rows.append({"n_head": n_head, "head_dim": config.head_dim, "qkv_params": qkv,
                     "proj_params": proj, "total_params": qkv + proj})
    return pd.DataFrame(rows)


@uses_global_rng
def permutation_experiment(
    n_layers: Iterable[int] = range(1, 7),
    pos_encodings: Iterable[str] = ("none", "learned", "sinusoidal", "rope"),
    seed: int = 0,
    line_a: str = "白日依山尽",
    line_b: str = "山依日白尽",
    n_embd: int = 32,
    n_head: int = 4,
) -> pd.DataFrame:
    """Largest absolute difference between the last-position logits of two lines, untrained model.

    The model is a GPT with n_embd 32 and 4 heads (the lesson's small attention example), no
    dropout, block_size = the longer line's length, and a vocabulary made of the characters of
    the two lines only (sorted): an untrained model's behaviour does not depend on which other
    characters a corpus would add. Each (n_layer, pos_encoding) model is built after
    ``torch.manual_seed(seed)``, so every row is reproducible on its own; the global generator is
    held and restored by ``engine.rng.uses_global_rng``, so readers running this at the same time
    get the same numbers.

    Args:
        n_layers: layer counts to try.
        pos_encodings: values of ``GPTConfig.pos_encoding`` to try (default: all four; "rope" needs
            an even head_dim = n_embd // n_head).
        seed: seed for the initial weights.
        line_a, line_b: the two lines; the lesson's second line permutes the first four characters.

    Returns:
        DataFrame with columns n_layer, pos_encoding, max_abs_diff (float), one row per pair.

    Raises:
        ValueError: for an empty line or an invalid config value.
    """
    if not line_a or not line_b:
        raise ValueError("both lines must hold at least one character")
    tokenizer = CharTokenizer(line_a + line_b)
    idx_a = tokenizer.encode_tensor(line_a)[None, :]  # (1, T_a)
    idx_b = tokenizer.encode_tensor(line_b)[None, :]  # (1, T_b)
    rows = []
    for n_layer in n_layers:
        for pos_encoding in pos_encodings:
            config = GPTConfig(
                vocab_size=tokenizer.vocab_size, block_size=max(len(line_a), len(line_b)), n_embd=n_embd,
                n_head=n_head, n_layer=n_layer, dropout=0.0, pos_encoding=pos_encoding,
            )
            torch.manual_seed(seed)
            model = GPT(config).eval()
            with torch.no_grad():
                last_a = model(idx_a).logits[0, -1]  # (vocab_size,)
                last_b = model(idx_b).logits[0, -1]  # (vocab_size,)
            rows.append({"n_layer": n_layer, "pos_encoding": pos_encoding,
                         "max_abs_diff": (last_a - last_b).abs().max().item()})
    return pd.DataFrame(rows)
