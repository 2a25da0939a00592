"""Position information for the course's GPT: none, learned absolute, sinusoidal, rotary (RoPE), ALiBi.

Attention scores compare contents only, so without help a Transformer sees a set of tokens,
not a sequence (lesson "multi-head attention and positional encoding", part 2). Five answers,
each one :class:`PositionEncoding` record of :data:`ENCODINGS`, the one place their keys and
order are written (the model, the Lab and the pages ask the record what an encoding does):

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
* ``"alibi"``: Press, Smith & Lewis (2022), "Train Short, Test Long", section 3: nothing is added
  and nothing rotated; each head h adds -s_h·(i - j) to the score of query i and key j, a penalty
  growing with the distance at a fixed slope per head (:func:`alibi_slopes`, :func:`alibi_bias`).

Pure functions, no parameters and no Streamlit: the GPT builds its buffers from them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

#: ``PositionEncoding.table`` of an encoding whose table is a parameter, one trained row per position.
TRAINED_TABLE = "trained"
#: ``PositionEncoding.table`` of an encoding whose table is a formula of the position (a fixed buffer).
FIXED_TABLE = "fixed"


@dataclass(frozen=True)
class PositionEncoding:
    """What one position encoding does to the GPT: the record the model, the Lab and the pages ask.

    Attributes:
        key: the value of ``GPTConfig.pos_encoding`` (and of checkpoints' configs, URLs, results files).
        table: what is added to the token embeddings: :data:`TRAINED_TABLE` (an ``nn.Embedding`` of
            block_size rows, in the state_dict), :data:`FIXED_TABLE` (a formula, rebuilt from the config),
            or None (nothing is added).
        rotates_qk: q and k are rotated inside attention by their positions (needs an even head_dim).
        biases_scores: a fixed bias is added to the attention scores before the softmax.
        limited_to_block: no position at or past block_size exists (a trained table has no row for it).

    The papers behind each record are named in the module's docstring.
    """

    key: str
    table: str | None
    rotates_qk: bool
    biases_scores: bool
    limited_to_block: bool

    def __post_init__(self) -> None:
        if self.table not in (None, TRAINED_TABLE, FIXED_TABLE):
            raise ValueError(f"table must be None, {TRAINED_TABLE!r} or {FIXED_TABLE!r}, got {self.table!r}")

    @property
    def adds_table(self) -> bool:
        """Whether a table of vectors is added to the token embeddings (learned, sinusoidal)."""
        return self.table is not None

    @property
    def trained_table(self) -> bool:
        """Whether the added table is a parameter (the state_dict holds ``pos_emb.weight``)."""
        return self.table == TRAINED_TABLE

    def max_positions(self, block_size: int) -> int | None:
        """Most positions a model of context ``block_size`` can read at once: block_size, or None (no limit)."""
        return block_size if self.limited_to_block else None


NONE = PositionEncoding("none", table=None, rotates_qk=False, biases_scores=False, limited_to_block=False)  # Haviv 2022
LEARNED = PositionEncoding("learned", table=TRAINED_TABLE, rotates_qk=False, biases_scores=False,
                           limited_to_block=True)  # GPT-2, Radford et al. (2019)
SINUSOIDAL = PositionEncoding("sinusoidal", table=FIXED_TABLE, rotates_qk=False, biases_scores=False,
                              limited_to_block=False)  # Vaswani et al. (2017), section 3.5
ROPE = PositionEncoding("rope", table=None, rotates_qk=True, biases_scores=False,
                        limited_to_block=False)  # RoFormer, Su et al. (2021), section 3.4
ALIBI = PositionEncoding("alibi", table=None, rotates_qk=False, biases_scores=True,
                         limited_to_block=False)  # Train Short, Test Long, Press, Smith & Lewis (2022), section 3

#: Every position encoding the GPT knows, in the order pages, the Lab and tables list them.
ENCODINGS: tuple[PositionEncoding, ...] = (NONE, LEARNED, SINUSOIDAL, ROPE, ALIBI)
_BY_KEY = {enc.key: enc for enc in ENCODINGS}


def encoding(key: str) -> PositionEncoding:
    """The record of the encoding named ``key``.

    Raises:
        ValueError: for a key of no record of :data:`ENCODINGS` (the message lists them).
    """
    try:
        return _BY_KEY[key]
    except (KeyError, TypeError):
        raise ValueError(f"pos_encoding must be one of {tuple(_BY_KEY)}, got {key!r}") from None


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
            f"without this limit ({', '.join(e.key for e in ENCODINGS if not e.limited_to_block)})."
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


def alibi_slopes(num_heads: int) -> Tensor:
    """ALiBi's slope s_h of each head (the paper's m; page 7 keeps m for RoPE's position): the geometric
    sequence of Press, Smith & Lewis (2022), section 3.

    For a power of two n, s_h = 2^(-8h/n) for h = 1..n (8 heads: 1/2, 1/4, ..., 1/256; 4 heads: 1/4,
    1/16, 1/64, 1/256). For any other n, the paper's rule (its reference code): the n' = 2^floor(log2 n)
    slopes of n' heads, then every other slope of 2n' heads (the 1st, 3rd, ...) for the n - n' heads left.
    So 6 heads get 1/4, 1/16, 1/64, 1/256, then 1/2, 1/8.

    Args:
        num_heads: number of heads, >= 1.

    Returns:
        float64 (num_heads,), every slope in (0, 1).

    Raises:
        ValueError: if num_heads < 1.
    """
    if isinstance(num_heads, bool) or not isinstance(num_heads, int) or num_heads < 1:
        raise ValueError(f"num_heads must be a positive integer, got {num_heads!r}")

    def power_of_2(n: int) -> list[float]:
        return [2.0 ** (-8.0 * h / n) for h in range(1, n + 1)]

    low = 2 ** math.floor(math.log2(num_heads))  # the largest power of two <= num_heads
    slopes = power_of_2(low)
    if low < num_heads:
        slopes += power_of_2(2 * low)[0::2][: num_heads - low]
    return torch.tensor(slopes, dtype=torch.float64)


def alibi_bias(
    positions: Tensor | int | range | list[int],
    num_heads: int,
    key_positions: Tensor | int | range | list[int] | None = None,
) -> Tensor:
    """ALiBi's bias on the attention scores: -s_h · |i - j| for query position i and key position j.

    Press, Smith & Lewis (2022), section 3: the bias is added to q·k / sqrt(head_dim) before the softmax,
    and nothing is added to the input. Under the causal mask only j <= i is read, where it is the paper's
    -s_h·(i - j); the distance is taken as |i - j| so that a model without the mask penalises the future
    as the past (the paper defines causal models only). It depends on i - j alone, so a window that moves
    keeps its biases, and any position has one: a model reads past its block_size with no new table.

    Args:
        positions: (T_q,) query positions, or an int T for 0 .. T-1.
        num_heads: number of heads (slopes from :func:`alibi_slopes`).
        key_positions: (T_k,) key positions, or an int for 0 .. T_k-1; None: the same as ``positions``.

    Returns:
        float32 (num_heads, T_q, T_k): 0 on the diagonal, <= 0 everywhere, falling by m_h per step of distance.

    Raises:
        ValueError: if num_heads < 1 or the positions are not 1-d.
    """
    slopes = alibi_slopes(num_heads)  # (nh,)
    query = _as_positions(positions)  # (T_q,)
    key = query if key_positions is None else _as_positions(key_positions)  # (T_k,)
    distance = (query[:, None] - key[None, :]).abs()  # (T_q, 1) - (1, T_k) -> (T_q, T_k), float64
    bias = 0.0 - slopes[:, None, None] * distance[None, :, :]  # (nh, 1, 1) * (1, T_q, T_k) -> (nh, T_q, T_k); 0 - x: +0
    return bias.to(torch.float32)
