"""Position information for the course's GPT: none, learned absolute, sinusoidal, rotary (RoPE).

Attention scores compare contents only, so without help a Transformer sees a set of tokens,
not a sequence (lesson "multi-head attention and positional encoding", part 2). Four answers:

* ``"none"``: nothing is added. A causal model still learns some order, because the mask lets
  position t see t + 1 tokens (Haviv et al., 2022); see :func:`visible_token_counts`.
* ``"learned"``: GPT-2's absolute table, one trained vector per position, added to the token
  embedding; it has exactly ``block_size`` rows, so a later position has no vector
  (:func:`check_learned_positions`).
* ``"sinusoidal"``: the fixed table of Vaswani et al. (2017), section 3.5, added the same way;
  it is a formula, so any position has a row (:func:`sinusoidal_encoding`).
* ``"rope"``: Su et al. (2021), RoFormer, section 3.4: nothing is added to the input; inside
  attention, q and k of position m are rotated by angles m * theta_i, so q·k depends only on
  the distance between the two positions (:func:`apply_rope`).

Pure functions, no parameters and no Streamlit: the GPT builds its buffers from them.
"""

from __future__ import annotations

import torch
from torch import Tensor

#: The position encodings the GPT knows, in the order pages list them.
POS_ENCODINGS: tuple[str, ...] = ("none", "learned", "sinusoidal", "rope")

#: Base of the geometric frequency ladder in both sinusoidal and rotary encodings (Vaswani et al.; Su et al.).
BASE = 10000.0


def _as_positions(positions: Tensor | int | range | list[int]) -> Tensor:
    """Positions as a 1-d float64 tensor (an int n means 0 .. n-1)."""
    if isinstance(positions, int):
        if positions < 0:
            raise ValueError(f"a number of positions must be >= 0, got {positions}")
        return torch.arange(positions, dtype=torch.float64)
    pos = torch.as_tensor(list(positions) if isinstance(positions, range) else positions)
    if pos.dim() != 1:
        raise ValueError(f"positions must be 1-d, got shape {tuple(pos.shape)}")
    return pos.to(torch.float64)


def sinusoidal_encoding(positions: Tensor | int | range | list[int], n_embd: int, base: float = BASE) -> Tensor:
    """The sinusoidal position vectors of Vaswani et al. (2017), section 3.5, for any positions.

    Column 2i holds sin(pos / base^(2i / n_embd)) and column 2i + 1 holds cos of the same angle,
    so pair i turns at the frequency base^(-2i / n_embd): column 0 once per 2π positions, the last
    pair roughly once per 2π·base positions. An odd ``n_embd`` simply ends with a sine column
    (pair i = (n_embd - 1) / 2) that has no cosine partner.

    Args:
        positions: (T,) integer or float positions (any value, past a block_size too), or an
            int T meaning positions 0 .. T-1.
        n_embd: width of each vector (>= 1, odd allowed).
        base: the frequency base (10000 in the paper).

    Returns:
        float32 (T, n_embd); row 0 (position 0) is [0, 1, 0, 1, ...].

    Raises:
        ValueError: if n_embd < 1, base <= 0, or positions are not 1-d.
    """
    if n_embd < 1:
        raise ValueError(f"n_embd must be >= 1, got {n_embd}")
    if base <= 0:
        raise ValueError(f"base must be > 0, got {base}")
    pos = _as_positions(positions)  # (T,)
    pair = torch.arange(n_embd, dtype=torch.float64) // 2  # (n_embd,): pair index i of each column
    freq = base ** (-2.0 * pair / n_embd)  # (n_embd,): angular frequency of each column, radians per position
    angles = pos[:, None] * freq[None, :]  # (T, 1) * (1, n_embd) -> (T, n_embd), float64 for large positions
    is_sin = torch.arange(n_embd) % 2 == 0  # (n_embd,): even columns are sines
    table = torch.where(is_sin, torch.sin(angles), torch.cos(angles))  # (T, n_embd)
    return table.to(torch.float32)


def sinusoidal_table(block_size: int, n_embd: int, base: float = BASE) -> Tensor:
    """The fixed table a GPT with ``pos_encoding="sinusoidal"`` adds to its token embeddings.

    Args:
        block_size: number of rows (positions 0 .. block_size-1), >= 1.
        n_embd: number of columns, >= 1 (odd allowed).

    Returns:
        float32 (block_size, n_embd), row t = :func:`sinusoidal_encoding` of position t.

    Raises:
        ValueError: if block_size < 1 or n_embd < 1.
    """
    if block_size < 1:
        raise ValueError(f"block_size must be >= 1, got {block_size}")
    return sinusoidal_encoding(block_size, n_embd, base)


def check_learned_positions(T: int, block_size: int) -> None:
    """Raise the learned table's error when a sequence needs a row the table does not have.

    A learned absolute table (GPT-2's ``pos_emb``) is an ``nn.Embedding(block_size, n_embd)``:
    positions 0 .. block_size-1 each have one trained row and nothing exists beyond.

    Args:
        T: number of positions the sequence needs (0 .. T-1).
        block_size: rows in the table.

    Raises:
        ValueError: if T > block_size, naming the first position without a row.
    """
    if T > block_size:
        raise ValueError(
            f"position {block_size} is past the learned position table: it has {block_size} rows "
            f"(block_size {block_size}, positions 0..{block_size - 1}) and a sequence of {T} tokens needs "
            f"positions up to {T - 1}. Crop to the last {block_size} tokens, or use a position encoding "
            f"computed by a formula (sinusoidal, rope)."
        )


def rope_frequencies(head_dim: int, base: float = BASE) -> Tensor:
    """RoPE's angular frequency of each pair of dimensions, theta_i = base^(-2i / head_dim).

    RoFormer (Su et al., 2021), eq. (15). Pair i is the adjacent pair of dimensions (2i, 2i+1)
    (see :func:`apply_rope`); pair 0 turns by 1 radian per position, the last pair almost not at all.

    Args:
        head_dim: size of one head's q and k; must be even.
        base: the frequency base (10000 in the paper).

    Returns:
        float64 (head_dim // 2,), decreasing from 1.

    Raises:
        ValueError: if head_dim is odd or < 2, or base <= 0.
    """
    if head_dim < 2 or head_dim % 2:
        raise ValueError(
            f"RoPE rotates pairs of dimensions, so head_dim must be even and >= 2; got head_dim {head_dim}"
        )
    if base <= 0:
        raise ValueError(f"base must be > 0, got {base}")
    i = torch.arange(head_dim // 2, dtype=torch.float64)  # (head_dim/2,)
    return base ** (-2.0 * i / head_dim)


def rope_cos_sin(
    positions: Tensor | int | range | list[int], head_dim: int, base: float = BASE
) -> tuple[Tensor, Tensor]:
    """The cos/sin cache of RoPE: angle m * theta_i for every position m and pair i.

    Args:
        positions: (T,) positions (integers or floats, any value), or an int T for 0 .. T-1.
        head_dim: even size of one head.
        base: the frequency base.

    Returns:
        (cos, sin), each float32 (T, head_dim // 2); angles are computed in float64 first, so
        large positions keep their precision.

    Raises:
        ValueError: if head_dim is odd (see :func:`rope_frequencies`) or positions are not 1-d.
    """
    theta = rope_frequencies(head_dim, base)  # (hd/2,)
    angles = _as_positions(positions)[:, None] * theta[None, :]  # (T, 1) * (1, hd/2) -> (T, hd/2)
    return torch.cos(angles).to(torch.float32), torch.sin(angles).to(torch.float32)


def rotate_pairs(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """Rotate each adjacent pair (x[..., 2i], x[..., 2i+1]) by the angle whose cos/sin are given.

    (a, b) -> (a cos - b sin, a sin + b cos): a 2-d rotation per pair, so norms are kept.

    Args:
        x: float (..., T, head_dim), e.g. q or k of shape (B, n_head, T, head_dim).
        cos, sin: (T, head_dim // 2), e.g. from :func:`rope_cos_sin`; broadcast over the leading dims.

    Returns:
        Tensor of x's shape and dtype.

    Raises:
        ValueError: if the last dimension is odd or the cache does not match (T, head_dim // 2).
    """
    T, head_dim = x.shape[-2], x.shape[-1]
    if head_dim % 2:
        raise ValueError(f"RoPE needs an even head_dim, got {head_dim}")
    if cos.shape != (T, head_dim // 2) or sin.shape != cos.shape:
        raise ValueError(
            f"cos/sin must be (T, head_dim // 2) = ({T}, {head_dim // 2}), "
            f"got {tuple(cos.shape)} and {tuple(sin.shape)}"
        )
    pairs = x.unflatten(-1, (head_dim // 2, 2))  # (..., T, hd) -> (..., T, hd/2, 2)
    a, b = pairs[..., 0], pairs[..., 1]  # each (..., T, hd/2): dimensions 2i and 2i+1
    cos, sin = cos.to(x.dtype), sin.to(x.dtype)
    rotated = torch.stack((a * cos - b * sin, a * sin + b * cos), dim=-1)  # (..., T, hd/2, 2)
    return rotated.flatten(-2)  # (..., T, hd/2, 2) -> (..., T, hd)


def apply_rope(x: Tensor, positions: Tensor | int | range | list[int] | None = None, base: float = BASE) -> Tensor:
    """Rotary position encoding (RoFormer, Su et al., 2021, section 3.4) applied to q or k.

    Pairing: **adjacent pairs** (2i, 2i+1), as in the paper's eq. (34) — not the "first half with
    second half" layout some libraries use. Pair i of the vector at position m turns by the angle
    m * theta_i with theta_i = base^(-2i / head_dim) (:func:`rope_frequencies`). Since both q and k
    are rotated, q_m · k_n = Re[sum_i q_i conj(k_i) e^{j (m - n) theta_i}] depends on m - n only.

    Args:
        x: float (B, n_head, T, head_dim) (any leading dims work), head_dim even.
        positions: (T,) positions of the T rows; None means 0 .. T-1. Any values, including
            positions past a model's block_size.
        base: the frequency base (10000).

    Returns:
        Tensor of x's shape and dtype; the identity at position 0, and every vector keeps its norm.

    Raises:
        ValueError: if head_dim is odd, or positions do not have T entries.
    """
    T, head_dim = x.shape[-2], x.shape[-1]
    if head_dim % 2:
        raise ValueError(
            f"RoPE rotates pairs of dimensions, so head_dim must be even; got head_dim {head_dim}"
        )
    pos = _as_positions(T if positions is None else positions)  # (T,)
    if pos.numel() != T:
        raise ValueError(f"positions has {pos.numel()} entries but x has T = {T} rows")
    cos, sin = rope_cos_sin(pos, head_dim, base)  # (T, hd/2) each
    return rotate_pairs(x, cos.to(x.device), sin.to(x.device))


def visible_token_counts(T: int) -> Tensor:
    """How many tokens position t can attend to under a causal mask: t + 1.

    This count is the order signal a causal Transformer gets without any position encoding
    (Haviv et al., 2022): after one layer, outputs at different positions average over
    different numbers of tokens, so a second layer can tell positions apart.

    Args:
        T: sequence length, >= 1.

    Returns:
        int64 (T,) = row sums of the (T, T) lower-triangular mask = [1, 2, ..., T].

    Raises:
        ValueError: if T < 1.
    """
    if T < 1:
        raise ValueError(f"T must be >= 1, got {T}")
    mask = torch.ones(T, T, dtype=torch.int64).tril()  # (T, T): 1 where key j <= query i
    return mask.sum(dim=-1)  # (T,)
