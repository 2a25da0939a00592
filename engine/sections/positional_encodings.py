"""Section 7, positional encodings: the experiments behind the page.

Source: lesson ``000``/``002`` ("multi-head attention and positional encoding"), parts 2 and 3:
the permutation experiment "白日依山尽" vs "山依日白尽", why a causal model without positions
still tells the two lines apart after two layers (Haviv et al., 2022, "Transformer Language Models
without Positional Encodings Still Learn Positional Information"), GPT-2's learned absolute table
and its block_size limit, and rotary position encoding (RoFormer, Su et al., 2021); the sinusoidal
table follows Vaswani et al. (2017), section 3.5.

Every function returns data: tensors, DataFrames with snake_case columns, or small frozen
dataclasses. The page supplies every word the reader sees.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import torch
from torch import Tensor

from engine import positions
from engine.chapter import LESSON_LINE, PERMUTED_LINE
from engine.checkpoint import SHIPPED_MODEL, CheckpointError, load_checkpoint
from engine.diagrams.positional_encodings import PositionalEncodingsShapes
from engine.gpt import GPT, POS_ENCODINGS, GPTConfig
from engine.rng import uses_global_rng
from engine.tokenizer import CharTokenizer

#: Layer counts the permutation figure's slider visits.
LAYERS: tuple[int, ...] = (1, 2, 3, 4, 5, 6)
#: What the lesson printed for the permutation experiment, with its own initialisation: 1 layer without
#: positions, 2 layers without positions, 1 layer with learned positions (orders of magnitude to compare).
LESSON_ONE_LAYER_NONE = 3.7e-08
LESSON_TWO_LAYERS_NONE = 1.9e-02
LESSON_ONE_LAYER_LEARNED = 2.8e-03
#: A last-position difference below this is float32 rounding.
ROUNDING_LIMIT = 1e-5
#: A last-position difference above this is a real one.
DIFFERENCE_LIMIT = 1e-4
#: Largest diagonal spread and shift difference of a score matrix that depends on m - n only (float32).
DISTANCE_ONLY_LIMIT = 1e-3
#: Distance between the positions compared by :attr:`PositionTable.far_similarity` (fewer if the table is shorter).
FAR_DISTANCE = 32
#: The score encodings the page contrasts: RoPE rotates q and k; "sinusoidal" adds the table to them.
SCORE_ENCODINGS: tuple[str, ...] = ("rope", "sinusoidal")
#: Block size of the small model that reads sequences past it.
PAST_BLOCK_SIZE = 16
#: Vocabulary of that model (random token ids 0 .. 15).
PAST_VOCAB_SIZE = 16


# --- 1. the permutation experiment ---------------------------------------------------------------


@uses_global_rng
def permutation_experiment(
    n_layers: Iterable[int] = LAYERS,
    pos_encodings: Iterable[str] = positions.POS_ENCODINGS,
    seed: int = 0,
    line_a: str = LESSON_LINE,
    line_b: str = PERMUTED_LINE,
    n_embd: int = 32,
    n_head: int = 4,
) -> pd.DataFrame:
    """Largest absolute difference between the last-position logits of two lines, untrained model.

    Lesson part 2. The model is a GPT with n_embd 32 and 4 heads (the lesson's small attention
    example), no dropout, block_size = the longer line's length, and a vocabulary made of the
    characters of the two lines only (sorted): an untrained model's behaviour does not depend on
    which other characters a corpus would add. Each (n_layer, pos_encoding) model is built after
    ``torch.manual_seed(seed)``, so every row is reproducible on its own; the global generator is
    held and restored by ``engine.rng.uses_global_rng``, so readers running this at the same time
    get the same numbers. With no position information and one layer the difference is float
    rounding (~1e-7): attention sums the same five vectors in another order. From two layers on
    it is clearly non-zero, because the causal mask lets each earlier position see a different
    prefix, which leaks order (Haviv et al., 2022).

    Args:
        n_layers: layer counts to try.
        pos_encodings: values of ``GPTConfig.pos_encoding`` to try (default: all four; "rope" needs
            an even head_dim = n_embd // n_head).
        seed: seed for the initial weights.
        line_a, line_b: the two lines; the lesson's second line permutes the first four characters.
        n_embd, n_head: model width and head count.

    Returns:
        DataFrame with columns ``n_layer`` (int), ``pos_encoding`` (str), ``max_abs_diff`` (float,
        logits units), one row per pair, layers outer, encodings inner.

    Raises:
        ValueError: for an empty line or an invalid config value (unknown encoding, odd head_dim with rope).
    """
    if not line_a or not line_b:
        raise ValueError("both lines must hold at least one character")
    tokenizer = CharTokenizer(line_a + line_b)
    idx_a = tokenizer.encode_tensor(line_a)[None, :]  # (T_a,) -> (1, T_a)
    idx_b = tokenizer.encode_tensor(line_b)[None, :]  # (T_b,) -> (1, T_b)
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
                last_a = model(idx_a).logits[0, -1]  # (1, T_a, vocab_size) -> (vocab_size,)
                last_b = model(idx_b).logits[0, -1]  # (1, T_b, vocab_size) -> (vocab_size,)
            rows.append({"n_layer": n_layer, "pos_encoding": pos_encoding,
                         "max_abs_diff": (last_a - last_b).abs().max().item()})
    return pd.DataFrame(rows, columns=["n_layer", "pos_encoding", "max_abs_diff"])


@dataclass(frozen=True)
class PermutationSweep:
    """The permutation experiment for every layer count and encoding, in both layouts the page shows.

    Attributes:
        table: long DataFrame ``n_layer``, ``pos_encoding``, ``max_abs_diff`` (see :func:`permutation_experiment`).
        by_layer: the same values, index ``n_layer``, one column per encoding in ``positions.POS_ENCODINGS`` order.
    """

    table: pd.DataFrame
    by_layer: pd.DataFrame

    def diff(self, n_layer: int, pos_encoding: str) -> float:
        """max |logits(line) - logits(permuted)| at the last position for one cell of the sweep.

        Raises:
            KeyError: if the sweep has no such layer count or encoding.
        """
        return float(self.by_layer.loc[n_layer, pos_encoding])

    def is_rounding(self, n_layer: int, pos_encoding: str) -> bool:
        """True when the two lines' outputs differ by float rounding only (< ``ROUNDING_LIMIT``)."""
        return self.diff(n_layer, pos_encoding) < ROUNDING_LIMIT

    def differs(self, n_layer: int, pos_encoding: str) -> bool:
        """True when the two lines' outputs clearly differ (> ``DIFFERENCE_LIMIT``)."""
        return self.diff(n_layer, pos_encoding) > DIFFERENCE_LIMIT


def permutation_by_layers(n_embd: int = 32, n_head: int = 4, seed: int = 0,
                          layers: Sequence[int] = LAYERS) -> PermutationSweep:
    """The page's sweep: :func:`permutation_experiment` on the lesson's lines, all four encodings.

    Args:
        n_embd, n_head: model width and head count (head_dim = n_embd // n_head must be even for rope).
        seed: ``torch.manual_seed`` before each model is built.
        layers: the n_layer values.

    Returns:
        A :class:`PermutationSweep` with ``len(layers) * 4`` values.

    Raises:
        ValueError: from the experiment (e.g. odd head_dim with rope).
    """
    table = permutation_experiment(n_layers=tuple(layers), seed=seed, n_embd=n_embd, n_head=n_head)
    # long (n_layer x encodings, 3) -> wide (n_layer, encodings)
    by_layer = table.pivot(index="n_layer", columns="pos_encoding", values="max_abs_diff")
    return PermutationSweep(table=table, by_layer=by_layer[list(positions.POS_ENCODINGS)])


# --- 2. why: the causal mask ------------------------------------------------------------------------


@dataclass(frozen=True)
class Visibility:
    """What each position of two lines can see under the causal mask.

    Attributes:
        line, permuted: the two texts (T characters each).
        mask: int64 (T, T), 1 where query i may see key j (j <= i).
        counts: int64 (T,) = [1, 2, ..., T], the tokens each position sees.
        same_set: bool (T,), True where both lines see the same multiset of characters.
        same_inputs: bool (T,), True where both lines also hold the same character at that position: its
            query and the bag of keys and values it sees are then the same, so a layer without positions
            gives it the same output.
        same_positions: the positions where ``same_inputs`` holds.
    """

    line: str
    permuted: str
    mask: Tensor
    counts: Tensor
    same_set: Tensor
    same_inputs: Tensor
    same_positions: tuple[int, ...]


def causal_visibility(line: str = LESSON_LINE, permuted: str = PERMUTED_LINE) -> Visibility:
    """What each position of the two lines can see under the causal mask.

    Position t sees tokens 0..t, i.e. t + 1 of them (:func:`engine.positions.visible_token_counts`).
    A layer without positions gives position t the same output in both lines only where its own
    character (the query) and the multiset of characters it sees (keys and values) are both the
    same; for the lesson's lines that is position 4 alone (position 3 sees the same four characters,
    but its own is 山 in one line and 白 in the other).

    Args:
        line, permuted: the two texts, one token per character, same length T >= 1.

    Returns:
        A :class:`Visibility`.

    Raises:
        ValueError: for lines of different or zero length.
    """
    if len(line) != len(permuted) or not line:
        raise ValueError(f"the lines must be non-empty and of equal length, got {len(line)} and {len(permuted)}")
    T = len(line)
    counts = positions.visible_token_counts(T)  # (T,)
    mask = torch.ones(T, T, dtype=torch.int64).tril()  # (T, T)
    same_set = [sorted(line[: t + 1]) == sorted(permuted[: t + 1]) for t in range(T)]
    same_inputs = [s and line[t] == permuted[t] for t, s in enumerate(same_set)]
    return Visibility(line=line, permuted=permuted, mask=mask, counts=counts, same_set=torch.tensor(same_set),
                      same_inputs=torch.tensor(same_inputs),
                      same_positions=tuple(t for t, s in enumerate(same_inputs) if s))


@uses_global_rng
def first_layer_differences(line: str = LESSON_LINE, permuted: str = PERMUTED_LINE, n_embd: int = 32,
                            n_head: int = 4, seed: int = 0) -> Tensor:
    """How far the first block's outputs of two lines differ at each position, without position information.

    The model is the permutation experiment's (:func:`permutation_experiment`: same vocabulary, config
    and ``torch.manual_seed(seed)``) with ``pos_encoding="none"``; only its first block runs. Where
    :func:`causal_visibility` finds the same inputs the difference is float rounding; elsewhere it is
    a real difference, which the second layer's last query reads.

    Args:
        line, permuted: the two texts, same length T >= 1.
        n_embd, n_head: model width and head count.
        seed: seed for the initial weights.

    Returns:
        float32 (T,), entry t = max over features of |block_1(line)[t] - block_1(permuted)[t]|.

    Raises:
        ValueError: for lines of different or zero length, or an invalid config value.
    """
    if len(line) != len(permuted) or not line:
        raise ValueError(f"the lines must be non-empty and of equal length, got {len(line)} and {len(permuted)}")
    tokenizer = CharTokenizer(line + permuted)
    idx = torch.stack([tokenizer.encode_tensor(line), tokenizer.encode_tensor(permuted)])  # 2 x (T,) -> (2, T)
    config = GPTConfig(vocab_size=tokenizer.vocab_size, block_size=len(line), n_embd=n_embd, n_head=n_head,
                       n_layer=1, dropout=0.0, pos_encoding="none")
    torch.manual_seed(seed)
    model = GPT(config).eval()
    with torch.no_grad():
        out, _weights = model.blocks[0](model.embed(idx))  # (2, T) -> (2, T, n_embd)
    return (out[0] - out[1]).abs().amax(dim=-1)  # (T, n_embd) -> (T,)


# --- 3-4. learned and sinusoidal tables ---------------------------------------------------------------


def position_similarity(table: Tensor) -> Tensor:
    """Cosine similarity between every pair of rows of a position table.

    Args:
        table: float (P, n_embd).

    Returns:
        float32 (P, P), entry (m, n) = cos angle between the vectors of positions m and n.
        For the sinusoidal table it depends on m - n only (sin·sin + cos·cos = cos of the difference).
    """
    unit = torch.nn.functional.normalize(table.float(), dim=-1)  # (P, n_embd), rows of norm 1
    return unit @ unit.T  # (P, n_embd) @ (n_embd, P) -> (P, P)


def diagonal_spread(matrix: Tensor) -> float:
    """Largest (max - min) along any diagonal of a square (T, T) matrix; 0 for a Toeplitz matrix."""
    T = matrix.shape[0]
    return max(float(d.max() - d.min()) for d in (torch.diagonal(matrix, offset=o) for o in range(-(T - 1), T)))


@dataclass(frozen=True)
class PositionTable:
    """A position table and what the page reads from it.

    Attributes:
        table: float32 (P, n_embd), one row per position.
        similarity: float32 (P, P), :func:`position_similarity` of the rows.
        std: standard deviation of all entries.
        diagonal_spread: :func:`diagonal_spread` of ``similarity`` (0 when only the distance matters).
        neighbour_similarity: mean similarity of positions 1 apart; None when P < 2.
        far_distance: the distance compared by ``far_similarity``: min(FAR_DISTANCE, P - 1); 0 when P < 2.
        far_similarity: mean similarity of positions ``far_distance`` apart; None when P < 2.
    """

    table: Tensor
    similarity: Tensor
    std: float
    diagonal_spread: float
    neighbour_similarity: float | None
    far_distance: int
    far_similarity: float | None


def describe_table(table: Tensor) -> PositionTable:
    """Similarity, spread and diagonal means of a (P, n_embd) position table (P >= 1).

    Raises:
        ValueError: if the table is not 2-d or has no row.
    """
    if table.dim() != 2 or table.shape[0] < 1:
        raise ValueError(f"a position table must be 2-d with at least one row, got shape {tuple(table.shape)}")
    table = table.detach().float()
    P = table.shape[0]
    sim = position_similarity(table)  # (P, P)
    far = min(FAR_DISTANCE, P - 1)
    return PositionTable(
        table=table,
        similarity=sim,
        std=float(table.std()) if table.numel() > 1 else 0.0,
        diagonal_spread=diagonal_spread(sim),
        neighbour_similarity=float(torch.diagonal(sim, 1).mean()) if P > 1 else None,  # (P-1,) -> mean
        far_distance=far,
        far_similarity=float(torch.diagonal(sim, far).mean()) if P > 1 else None,  # (P-far,) -> mean
    )


@uses_global_rng
def learned_table(config: GPTConfig, seed: int = 0) -> Tensor:
    """The learned position table of an untrained GPT: ``pos_emb.weight`` right after init.

    Args:
        config: a GPTConfig; its pos_encoding is replaced by "learned".
        seed: ``torch.manual_seed`` before the model is built.

    Returns:
        float32 (block_size, n_embd), entries ~ normal(0, 0.02) (GPT-2 init).
    """
    torch.manual_seed(seed)
    model = GPT(GPTConfig(**{**config.to_dict(), "pos_encoding": "learned"}))
    return model.pos_emb.weight.detach().clone()


def untrained_table(block_size: int, n_embd: int, seed: int = 0) -> PositionTable:
    """The learned table of an untrained one-layer GPT (block_size x n_embd), described.

    Raises:
        ValueError: for a block_size or n_embd below 1 (from ``GPTConfig``).
    """
    config = GPTConfig(vocab_size=16, block_size=block_size, n_embd=n_embd, n_head=1, n_layer=1)
    return describe_table(learned_table(config, seed))


def sinusoidal_position_table(block_size: int, n_embd: int) -> PositionTable:
    """The sinusoidal table (Vaswani et al., 2017, section 3.5) of block_size x n_embd, described.

    An odd n_embd ends with a sine column without its cosine: the similarity then depends a little
    on absolute positions (a small ``diagonal_spread``); an even one depends on m - n only.

    Raises:
        ValueError: for a block_size below 1.
    """
    return describe_table(positions.sinusoidal_table(block_size, n_embd))


@dataclass(frozen=True)
class ShippedTable:
    """The app's shipped trained model, as the page's table section needs it.

    Attributes:
        pos_encoding: the model's position encoding; None when the checkpoint could not be read.
        table: the described learned table when ``pos_encoding == "learned"``, else None.
        error: the ``CheckpointError`` message (for logs and the reader's detail view), else None.
    """

    pos_encoding: str | None
    table: PositionTable | None
    error: str | None


def shipped_learned_table(path: str | Path = SHIPPED_MODEL) -> ShippedTable | None:
    """The learned position table of the app's shipped trained model, if there is one.

    Loads the checkpoint with :func:`engine.training.load_checkpoint` (which validates it).

    Args:
        path: the checkpoint folder or file.

    Returns:
        None when nothing is at ``path``; else a :class:`ShippedTable` (``error`` set when the
        checkpoint cannot be read, ``table`` None when the model uses another encoding).
    """
    path = Path(path)
    if not path.exists():
        return None
    try:
        ckpt = load_checkpoint(path)
    except CheckpointError as exc:
        return ShippedTable(pos_encoding=None, table=None, error=str(exc))
    encoding = ckpt.config.pos_encoding
    table = describe_table(ckpt.model.pos_emb.weight) if encoding == "learned" else None
    return ShippedTable(pos_encoding=encoding, table=table, error=None)


# --- 5. RoPE rotation ----------------------------------------------------------------------------------


def seeded_vectors(n: int, dim: int, seed: int) -> Tensor:
    """``n`` standard-normal vectors of size ``dim`` from a private generator seeded with ``seed``.

    Returns:
        float32 tensor of shape (n, dim); the global generator is not touched.
    """
    return torch.randn(n, dim, generator=torch.Generator().manual_seed(seed))


def rope_supported(head_dim: int) -> bool:
    """True when RoPE can rotate vectors of ``head_dim``: it turns pairs of dimensions, so head_dim must be even."""
    return head_dim >= 2 and head_dim % 2 == 0


@dataclass(frozen=True)
class RopeRotation:
    """One vector rotated by RoPE at positions 0 .. n_positions-1, pair by pair.

    Attributes:
        theta: float64 (head_dim/2,), radians per position of each pair.
        rotated: float32 (n_positions, head_dim).
        pairs: float32 (n_positions, head_dim/2, 2), the adjacent pairs (2i, 2i+1) of ``rotated``.
        angles: float64 (n_positions, head_dim/2), m * theta_i in radians.
        norms: float32 (n_positions,), the rotated vector's length (the same at every position).
        pair_norms: float32 (head_dim/2,), each pair's length (the same at every position).
    """

    theta: Tensor
    rotated: Tensor
    pairs: Tensor
    angles: Tensor
    norms: Tensor
    pair_norms: Tensor

    @property
    def n_pairs(self) -> int:
        """head_dim / 2."""
        return int(self.theta.shape[0])


def rope_rotation(vector: Tensor, n_positions: int, base: float = positions.BASE) -> RopeRotation:
    """One vector rotated by RoPE (Su et al., 2021, section 3.4) at positions 0 .. n_positions-1.

    Args:
        vector: float (head_dim,), head_dim even.
        n_positions: how many positions (>= 1).
        base: RoPE's frequency base.

    Returns:
        A :class:`RopeRotation`.

    Raises:
        ValueError: if head_dim is odd or n_positions < 1.
    """
    if n_positions < 1:
        raise ValueError(f"n_positions must be >= 1, got {n_positions}")
    head_dim = vector.shape[-1]
    theta = positions.rope_frequencies(head_dim, base)  # (hd/2,)
    x = vector.float().expand(n_positions, head_dim)  # (hd,) -> (P, hd): the same vector at every position
    rotated = positions.apply_rope(x, torch.arange(n_positions), base)  # (P, hd)
    angles = torch.arange(n_positions, dtype=torch.float64)[:, None] * theta[None, :]  # (P, 1) * (1, hd/2)
    return RopeRotation(
        theta=theta,
        rotated=rotated,
        pairs=rotated.unflatten(-1, (head_dim // 2, 2)),  # (P, hd) -> (P, hd/2, 2)
        angles=angles,
        norms=rotated.norm(dim=-1),
        pair_norms=vector.float().unflatten(-1, (head_dim // 2, 2)).norm(dim=-1),  # (hd,) -> (hd/2, 2) -> (hd/2,)
    )


def seeded_rope_rotation(head_dim: int, seed: int, n_positions: int = 128) -> RopeRotation:
    """:func:`rope_rotation` of the seeded vector :func:`seeded_vectors` (1, head_dim, seed) gives.

    Raises:
        ValueError: if head_dim is odd.
    """
    return rope_rotation(seeded_vectors(1, head_dim, seed)[0], n_positions)


def rope_pair_table(rotation: RopeRotation, position: int) -> pd.DataFrame:
    """One row per pair of dimensions: its frequency, its angle at ``position`` and its wavelength.

    Args:
        rotation: a :class:`RopeRotation`.
        position: 0 <= position < its n_positions.

    Returns:
        DataFrame with columns ``pair`` (int i), ``dims`` (str "(2i, 2i+1)"), ``theta`` (rad per
        position), ``angle_deg`` (m·theta_i in degrees, mod 360) and ``wavelength`` (2π / theta_i,
        in positions).

    Raises:
        ValueError: if ``position`` is out of range.
    """
    if not 0 <= position < rotation.angles.shape[0]:
        raise ValueError(f"position {position} outside [0, {rotation.angles.shape[0]})")
    theta = rotation.theta  # (hd/2,)
    return pd.DataFrame({
        "pair": list(range(rotation.n_pairs)),
        "dims": [f"({2 * i}, {2 * i + 1})" for i in range(rotation.n_pairs)],
        "theta": theta.tolist(),
        "angle_deg": torch.remainder(torch.rad2deg(rotation.angles[position]), 360).tolist(),
        "wavelength": (2 * torch.pi / theta).tolist(),
    })


def shown_pairs(n_pairs: int, at_most: int = 8) -> list[int]:
    """Pair indices to draw: all of at most ``at_most`` pairs, else ``at_most`` spread evenly (first and last in)."""
    if n_pairs <= at_most:
        return list(range(n_pairs))
    return sorted({round(i * (n_pairs - 1) / (at_most - 1)) for i in range(at_most)})


# --- 6. scores depend on the distance -----------------------------------------------------------------


@dataclass(frozen=True)
class ScoreMatrices:
    """The same q at every query position m and the same k at every key position n, twice.

    Attributes:
        attn_scores: float32 (T, T), scores for positions 0 .. T-1.
        shifted: float32 (T, T), scores for positions shift .. shift+T-1.
        shift: how far the second matrix's positions are moved.
        max_diagonal_spread: largest max - min within a diagonal of ``attn_scores``.
        max_shift_diff: max |attn_scores - shifted|.
    """

    attn_scores: Tensor
    shifted: Tensor
    shift: int
    max_diagonal_spread: float
    max_shift_diff: float

    @property
    def distance_only(self) -> bool:
        """True when the scores depend on m - n only: constant diagonals and unchanged by the shift."""
        return self.max_diagonal_spread < DISTANCE_ONLY_LIMIT and self.max_shift_diff < DISTANCE_ONLY_LIMIT


def _score_matrices(attn_scores: Tensor, shifted: Tensor, shift: int) -> ScoreMatrices:
    return ScoreMatrices(attn_scores=attn_scores, shifted=shifted, shift=shift,
                         max_diagonal_spread=diagonal_spread(attn_scores),
                         max_shift_diff=float((attn_scores - shifted).abs().max()))


def _check_scores_input(q: Tensor, k: Tensor, T: int, shift: int) -> None:
    if q.shape != k.shape or q.dim() != 1:
        raise ValueError(f"q and k must be 1-d of the same size, got {tuple(q.shape)} and {tuple(k.shape)}")
    if T < 1 or shift < 0:
        raise ValueError(f"need T >= 1 and shift >= 0, got T={T}, shift={shift}")


def rope_score_matrix(q: Tensor, k: Tensor, T: int, shift: int = 0, base: float = positions.BASE) -> ScoreMatrices:
    """q·k after RoPE for every pair of positions (m, n), and the same shifted by ``shift``.

    RoPE makes entry (m, n) a function of m - n (RoFormer, eq. 16): the matrix is constant along
    each diagonal (a Toeplitz matrix), and moving both positions by the same shift changes nothing.

    Args:
        q, k: float (head_dim,), head_dim even.
        T: number of positions (>= 1).
        shift: added to every position of the second matrix (>= 0).
        base: RoPE's frequency base.

    Returns:
        A :class:`ScoreMatrices`.

    Raises:
        ValueError: if head_dim is odd, shapes differ, T < 1 or shift < 0.
    """
    _check_scores_input(q, k, T, shift)

    def scores(start: int) -> Tensor:
        pos = torch.arange(start, start + T)  # (T,)
        q_rot = positions.apply_rope(q.float().expand(T, -1), pos, base)  # (hd,) -> (T, hd), q at start..start+T-1
        k_rot = positions.apply_rope(k.float().expand(T, -1), pos, base)  # (hd,) -> (T, hd)
        return q_rot @ k_rot.T  # (T, hd) @ (hd, T) -> (T, T)

    return _score_matrices(scores(0), scores(shift), shift)


def additive_score_matrix(q: Tensor, k: Tensor, T: int, shift: int = 0, base: float = positions.BASE) -> ScoreMatrices:
    """For contrast: (q + p_m)·(k + p_n) when the sinusoidal table is added instead of rotating.

    The cross terms q·p_n + p_m·k depend on the absolute positions, so the diagonals are not
    constant and a shift changes the matrix. Any head_dim works, odd included.

    Args:
        q, k: float (d,).
        T: number of positions (>= 1).
        shift: added to every position of the second matrix (>= 0).
        base: the sinusoidal frequency base.

    Returns:
        A :class:`ScoreMatrices`.

    Raises:
        ValueError: if shapes differ, T < 1 or shift < 0.
    """
    _check_scores_input(q, k, T, shift)
    table = positions.sinusoidal_encoding(torch.arange(shift + T), q.shape[0], base)  # (shift+T, d)

    def scores(p: Tensor) -> Tensor:
        q_pos = q.float() + p  # (d,) + (T, d) -> (T, d)
        k_pos = k.float() + p  # (T, d)
        return q_pos @ k_pos.T  # (T, d) @ (d, T) -> (T, T)

    return _score_matrices(scores(table[:T]), scores(table[shift:]), shift)


def position_scores(encoding: str, head_dim: int, T: int, shift: int, seed: int) -> ScoreMatrices:
    """The page's score matrices: seeded q and k (:func:`seeded_vectors` with ``seed + 1``) under one encoding.

    Args:
        encoding: "rope" (:func:`rope_score_matrix`) or "sinusoidal" (:func:`additive_score_matrix`).
        head_dim: size of q and k (even for rope).
        T, shift: as in :func:`rope_score_matrix`.
        seed: the page's seed.

    Raises:
        ValueError: for an unknown encoding, an odd head_dim with rope, T < 1 or shift < 0.
    """
    if encoding not in SCORE_ENCODINGS:
        raise ValueError(f"encoding must be one of {SCORE_ENCODINGS}, got {encoding!r}")
    q, k = seeded_vectors(2, head_dim, seed + 1)  # (2, hd) -> two (hd,)
    if encoding == "rope":
        return rope_score_matrix(q, k, T, shift)
    return additive_score_matrix(q, k, T, shift)


# --- 7. past block_size ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class PastBlockRun:
    """One encoding's model reading a sequence, maybe longer than its block_size.

    Attributes:
        pos_encoding: the encoding.
        logits_shape: (1, T, vocab_size) when it ran; None when the learned table had no row.
        error: the model's ValueError message (developer text, shown as the exception it is) when it did not run.
    """

    pos_encoding: str
    logits_shape: tuple[int, ...] | None
    error: str | None

    @property
    def ran(self) -> bool:
        """True when the model produced logits."""
        return self.logits_shape is not None


@dataclass(frozen=True)
class PastBlockSize:
    """Every encoding's run on T tokens with block_size ``block_size``.

    Attributes:
        T: the sequence length.
        block_size: the models' block_size.
        runs: one :class:`PastBlockRun` per encoding, in ``positions.POS_ENCODINGS`` order.
    """

    T: int
    block_size: int
    runs: tuple[PastBlockRun, ...]

    @property
    def all_ran(self) -> bool:
        """True when every encoding produced logits (T <= block_size)."""
        return all(run.ran for run in self.runs)

    @property
    def missing_positions(self) -> range:
        """The positions the learned table has no row for: block_size .. T-1 (empty when T <= block_size)."""
        return range(self.block_size, max(self.T, self.block_size))


@uses_global_rng
def run_past_block_size(T: int, block_size: int = PAST_BLOCK_SIZE, seed: int = 0) -> PastBlockSize:
    """Feed T random tokens to a small untrained GPT (block_size given) with each position encoding.

    Learned positions have no row past block_size and the model raises ValueError (the lesson's
    point); "none", sinusoidal and rope are nothing or formulas, so they run at any length.

    Args:
        T: sequence length (>= 1), may exceed block_size.
        block_size: the models' block_size (>= 1).
        seed: ``torch.manual_seed`` before each model and its random tokens.

    Returns:
        A :class:`PastBlockSize`.

    Raises:
        ValueError: for T or block_size below 1, or any error other than the learned table's limit.
    """
    if T < 1 or block_size < 1:
        raise ValueError(f"need T >= 1 and block_size >= 1, got T={T}, block_size={block_size}")
    runs = []
    for enc in positions.POS_ENCODINGS:
        torch.manual_seed(seed)
        model = GPT(GPTConfig(vocab_size=PAST_VOCAB_SIZE, block_size=block_size, n_embd=32, n_head=4, n_layer=1,
                              dropout=0.0, pos_encoding=enc)).eval()
        idx = torch.randint(0, PAST_VOCAB_SIZE, (1, T))  # (1, T) token ids
        try:
            with torch.no_grad():
                logits = model(idx).logits  # (1, T, vocab_size)
        except ValueError as exc:
            if enc != "learned" or T <= block_size:
                raise
            runs.append(PastBlockRun(pos_encoding=enc, logits_shape=None, error=str(exc)))
        else:
            runs.append(PastBlockRun(pos_encoding=enc, logits_shape=tuple(logits.shape), error=None))
    return PastBlockSize(T=T, block_size=block_size, runs=tuple(runs))


@uses_global_rng
def entry_shapes(n_embd: int, n_head: int, line: str = LESSON_LINE, encodings: Sequence[str] = POS_ENCODINGS,
                 ) -> dict[str, PositionalEncodingsShapes]:
    """Page 7's entry diagrams' shapes: each encoding's one-layer model built and run on ``line`` on the CPU.

    Every shape is read from that run: the ids, the token embeddings, the embedding with its position
    information, the attention weights (B, n_head, T, T), and the position table (learned, sinusoidal) or
    RoPE's cos table the model used for T positions. The models are as small as the page's sizes (one layer, a
    line of a few characters), so the run costs little; their random weights come from the global generator
    forked by ``uses_global_rng``, so no other reader's draws move. (The ``meta`` device would compute nothing,
    but its first use imports PyTorch's compiler.)

    Raises:
        ValueError: if ``n_head`` does not divide ``n_embd`` (from ``GPTConfig``).
    """
    tokenizer = CharTokenizer(line)
    idx = tokenizer.encode_tensor(line)[None, :]  # (T,) -> (1, T)
    T = idx.size(1)
    out = {}
    for encoding in encodings:
        config = GPTConfig(vocab_size=tokenizer.vocab_size, block_size=T, n_embd=n_embd, n_head=n_head, n_layer=1,
                             dropout=0.0, pos_encoding=encoding)
        model = GPT(config).eval()
        with torch.no_grad():
            tok_emb = model.tok_emb(idx)  # (1, T) -> (1, T, n_embd)
            x = model.embed(idx)  # (1, T, n_embd)
            attn_weights = model(idx, return_weights=True).attn_weights[0]  # (1, n_head, T, T)
        heads = tuple(attn_weights.shape[:3]) + (config.head_dim,)  # q, k: (1, n_head, T, head_dim)
        table = {"learned": lambda m: m.pos_emb.weight[:T], "sinusoidal": lambda m: m.pos_table[:T]}.get(encoding)
        rope = model.blocks[0].attn.rope_cos[:T] if encoding == "rope" else None  # (T, head_dim // 2)
        out[encoding] = PositionalEncodingsShapes(
            idx=tuple(idx.shape), tok_emb=tuple(tok_emb.shape), x=tuple(x.shape), q=heads, k=heads,
            attn_scores=tuple(attn_weights.shape),
            pos_table=tuple(table(model).shape) if table else None,
            rope=tuple(rope.shape) if rope is not None else None)
    return out
