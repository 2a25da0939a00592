"""Section 7, positional encodings: the experiments behind the page.

Source: lesson ``000``/``002`` ("multi-head attention and positional encoding"), parts 2 and 3:
the permutation experiment "白日依山尽" vs "山依日白尽", why a causal model without positions
still tells the two lines apart after two layers (Haviv et al., 2022), GPT-2's learned absolute
table and its block_size limit, and rotary position encoding (RoFormer, Su et al., 2021); the
sinusoidal table follows Vaswani et al. (2017), section 3.5.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from pathlib import Path

import pandas as pd
import torch
from torch import Tensor

from engine import experiments, positions
from engine.gpt import GPT, GPTConfig
from engine.training import CheckpointError, load_checkpoint
from engine.rng import uses_global_rng

#: The lesson's line and its permutation: same last character, the four before it shuffled.
LINE = "白日依山尽"
PERMUTED = "山依日白尽"
#: Layer counts the permutation figure's slider visits.
LAYERS: tuple[int, ...] = (1, 2, 3, 4, 5, 6)
#: Where the app's shipped trained model lives (made by ``python -m engine.train``).
SHIPPED_MODEL = Path(__file__).resolve().parents[2] / "assets" / "models" / "course_tang300"


@contextlib.contextmanager
def one_thread() -> Iterator[None]:
    """Run the block with ``torch.set_num_threads(1)``, then restore the previous count.

    The page's models are tiny (a few thousand to a few hundred thousand parameters): splitting
    their small matrix products over threads costs more than it saves, and on a busy 2-core machine
    the waiting threads make a 0.2 s sweep take 10 s. Performance only; results do not change.
    """
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def permutation_by_layers(
    n_embd: int = 32,
    n_head: int = 4,
    seed: int = 0,
    layers: Sequence[int] = LAYERS,
    pos_encodings: Sequence[str] = positions.POS_ENCODINGS,
    line: str = LINE,
    permuted: str = PERMUTED,
) -> pd.DataFrame:
    """The permutation experiment for every layer count and encoding (lesson part 2).

    For each n_layer and encoding, an untrained seeded GPT reads both lines; the value is the
    largest absolute difference between the two last-position logit vectors. A thin wrapper over
    :func:`engine.experiments.permutation_experiment` with the page's defaults (all four encodings,
    1 … 6 layers).

    Args:
        n_embd, n_head: model width and head count (head_dim = n_embd // n_head must be even for rope).
        seed: ``torch.manual_seed`` before each model is built.
        layers: the n_layer values.
        pos_encodings: encodings to compare.
        line, permuted: the two texts.

    Returns:
        DataFrame with columns ``n_layer`` (int), ``pos_encoding`` (str), ``max_abs_diff``
        (float, logits units), one row per (n_layer, encoding), layers outer, encodings inner.

    Raises:
        ValueError: from the experiment (e.g. an empty line, odd head_dim with rope).
    """
    with one_thread():
        table = experiments.permutation_experiment(
            n_layers=tuple(layers), pos_encodings=tuple(pos_encodings), seed=seed, line_a=line, line_b=permuted,
            n_embd=n_embd, n_head=n_head,
        )
    return table[["n_layer", "pos_encoding", "max_abs_diff"]].reset_index(drop=True)


def seeded_vectors(n: int, dim: int, seed: int) -> Tensor:
    """``n`` standard-normal vectors of size ``dim`` from a private generator seeded with ``seed``.

    Returns:
        float32 tensor of shape (n, dim); the global generator is not touched.
    """
    return torch.randn(n, dim, generator=torch.Generator().manual_seed(seed))


def causal_visibility(line: str = LINE, permuted: str = PERMUTED) -> dict[str, Tensor]:
    """What each position of the two lines can see under the causal mask.

    Position t sees tokens 0..t, i.e. t + 1 of them. Where both lines see the same characters
    in another order (for the lesson's lines: positions 3 and 4), a layer without positions gives
    the same output; where they see different characters (positions 0, 1, 2) it does not.

    Args:
        line, permuted: the two texts, one token per character, same length T >= 1.

    Returns:
        dict with ``mask`` int64 (T, T) (1 where query i may see key j, i.e. j <= i), ``counts``
        int64 (T,) = [1, 2, ..., T] (:func:`engine.positions.visible_token_counts`) and
        ``same_set`` bool (T,): True where both lines see the same multiset of characters.

    Raises:
        ValueError: for lines of different or zero length.
    """
    if len(line) != len(permuted) or not line:
        raise ValueError(f"the lines must be non-empty and of equal length, got {len(line)} and {len(permuted)}")
    T = len(line)
    counts = positions.visible_token_counts(T)  # (T,)
    mask = torch.ones(T, T, dtype=torch.int64).tril()  # (T, T)
    same_set = torch.tensor([sorted(line[: t + 1]) == sorted(permuted[: t + 1]) for t in range(T)])  # (T,)
    return {"mask": mask, "counts": counts, "same_set": same_set}


@uses_global_rng
def learned_table(config: GPTConfig, seed: int = 0) -> Tensor:
    """The learned position table of an untrained GPT: ``pos_emb.weight`` right after init.

    Args:
        config: a GPTConfig; its pos_encoding is replaced by "learned".
        seed: ``torch.manual_seed`` before the model is built.

    Returns:
        float32 (block_size, n_embd), entries ~ normal(0, 0.02) (GPT-2 init).
    """
    with one_thread():
        torch.manual_seed(seed)
        model = GPT(GPTConfig(**{**config.to_dict(), "pos_encoding": "learned"}))
    return model.pos_emb.weight.detach().clone()


def shipped_learned_table(path: str | Path = SHIPPED_MODEL) -> dict | None:
    """The learned position table of the app's shipped trained model, if there is one.

    Loads the checkpoint with :func:`engine.training.load_checkpoint`.

    Args:
        path: the checkpoint folder or file.

    Returns:
        None when nothing is at ``path``; else a dict with ``table`` float32 (block_size, n_embd)
        or None (the model uses another encoding), ``config`` (GPTConfig), ``summary`` (dict)
        and ``error`` (str or None, a checkpoint that cannot be read).
    """
    path = Path(path)
    if not path.exists():
        return None
    try:
        ckpt = load_checkpoint(path)
    except CheckpointError as exc:
        return {"table": None, "config": None, "summary": {}, "error": str(exc)}
    table = ckpt.model.pos_emb.weight.detach().clone() if ckpt.config.pos_encoding == "learned" else None
    return {"table": table, "config": ckpt.config, "summary": ckpt.summary, "error": None}


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


def rope_rotation(vector: Tensor, n_positions: int, base: float = positions.BASE) -> dict[str, Tensor]:
    """One vector rotated by RoPE at positions 0 .. n_positions-1, pair by pair.

    Args:
        vector: float (head_dim,), head_dim even.
        n_positions: how many positions (>= 1).
        base: RoPE's frequency base.

    Returns:
        dict with ``theta`` float64 (head_dim/2,) radians per position, ``rotated`` float32
        (n_positions, head_dim), ``pairs`` float32 (n_positions, head_dim/2, 2) (the adjacent
        pairs (2i, 2i+1)), ``angles`` float64 (n_positions, head_dim/2) = m * theta_i in radians,
        ``norms`` float32 (n_positions,) and ``pair_norms`` float32 (head_dim/2,) (each pair's length,
        the same at every position).

    Raises:
        ValueError: if head_dim is odd or n_positions < 1.
    """
    if n_positions < 1:
        raise ValueError(f"n_positions must be >= 1, got {n_positions}")
    head_dim = vector.shape[-1]
    theta = positions.rope_frequencies(head_dim, base)  # (hd/2,)
    x = vector.float().expand(n_positions, head_dim)  # (hd,) -> (P, hd): the same vector at every position
    rotated = positions.apply_rope(x, torch.arange(n_positions), base)  # (P, hd)
    pairs = rotated.unflatten(-1, (head_dim // 2, 2))  # (P, hd) -> (P, hd/2, 2)
    angles = torch.arange(n_positions, dtype=torch.float64)[:, None] * theta[None, :]  # (P, 1) * (1, hd/2)
    return {
        "theta": theta,
        "rotated": rotated,
        "pairs": pairs,
        "angles": angles,
        "norms": rotated.norm(dim=-1),
        "pair_norms": vector.float().unflatten(-1, (head_dim // 2, 2)).norm(dim=-1),
    }


def rope_score_matrix(q: Tensor, k: Tensor, T: int, shift: int = 0, base: float = positions.BASE) -> dict[str, Tensor | float]:
    """q·k after RoPE for every pair of positions (m, n), and the same shifted by ``shift``.

    The same q sits at every query position m and the same k at every key position n, so any
    change across the matrix comes from the positions alone. RoPE makes entry (m, n) a function
    of m - n: the matrix is constant along each diagonal (a Toeplitz matrix), and moving both
    positions by the same shift changes nothing.

    Args:
        q, k: float (head_dim,), head_dim even.
        T: number of positions (>= 1).
        shift: added to every position of the second matrix (>= 0).
        base: RoPE's frequency base.

    Returns:
        dict with ``attn_scores`` float32 (T, T) for positions 0..T-1, ``shifted`` (T, T) for
        positions shift..shift+T-1, ``by_distance`` float32 (2T-1,) the score at each distance
        m - n = -(T-1) .. T-1 (first entry of each diagonal), ``max_shift_diff`` float
        (max |attn_scores - shifted|), ``max_diagonal_spread`` float (largest max - min within a diagonal).

    Raises:
        ValueError: if head_dim is odd, shapes differ, T < 1 or shift < 0.
    """
    if q.shape != k.shape or q.dim() != 1:
        raise ValueError(f"q and k must be 1-d of the same size, got {tuple(q.shape)} and {tuple(k.shape)}")
    if T < 1 or shift < 0:
        raise ValueError(f"need T >= 1 and shift >= 0, got T={T}, shift={shift}")

    def scores(start: int) -> Tensor:
        pos = torch.arange(start, start + T)  # (T,)
        q_rot = positions.apply_rope(q.float().expand(T, -1), pos, base)  # (T, hd): q at positions start..start+T-1
        k_rot = positions.apply_rope(k.float().expand(T, -1), pos, base)  # (T, hd)
        return q_rot @ k_rot.T  # (T, hd) @ (hd, T) -> (T, T)

    attn_scores, shifted = scores(0), scores(shift)
    return {
        "attn_scores": attn_scores,
        "shifted": shifted,
        "by_distance": _by_distance(attn_scores),
        "max_shift_diff": float((attn_scores - shifted).abs().max()),
        "max_diagonal_spread": diagonal_spread(attn_scores),
    }


def additive_score_matrix(q: Tensor, k: Tensor, table: Tensor) -> dict[str, Tensor | float]:
    """For contrast: (q + p_m)·(k + p_n) when a position table is added instead of rotating.

    Args:
        q, k: float (d,).
        table: float (T, d) position vectors p_0 .. p_{T-1} (e.g. the sinusoidal table).

    Returns:
        dict with ``attn_scores`` float32 (T, T) and ``max_diagonal_spread`` float: not 0, because
        q·p_n + p_m·k depend on the absolute positions.
    """
    q_pos = q.float() + table.float()  # (d,) + (T, d) -> (T, d)
    k_pos = k.float() + table.float()  # (T, d)
    attn_scores = q_pos @ k_pos.T  # (T, d) @ (d, T) -> (T, T)
    return {"attn_scores": attn_scores, "max_diagonal_spread": diagonal_spread(attn_scores)}


def diagonal_spread(matrix: Tensor) -> float:
    """Largest (max - min) along any diagonal of a square matrix; 0 for a Toeplitz matrix."""
    T = matrix.shape[0]
    return max(float(d.max() - d.min()) for d in (torch.diagonal(matrix, offset=o) for o in range(-(T - 1), T)))


def _by_distance(matrix: Tensor) -> Tensor:
    """First entry of each diagonal, ordered by m - n from -(T-1) to T-1: (2T-1,)."""
    T = matrix.shape[0]
    return torch.stack([torch.diagonal(matrix, offset=-d)[0] for d in range(-(T - 1), T)])


@uses_global_rng
def run_past_block_size(T: int, block_size: int = 16, seed: int = 0) -> pd.DataFrame:
    """Feed T tokens to a small untrained GPT (block_size given) with each position encoding.

    Learned positions have no row past block_size and raise; "none", sinusoidal and rope are
    formulas or nothing at all, so they run at any length.

    Args:
        T: sequence length (>= 1), may exceed block_size.
        block_size: the model's block_size.
        seed: ``torch.manual_seed`` before each model and the random tokens.

    Returns:
        DataFrame with ``pos_encoding``, ``ran`` (bool), ``logits shape`` (str or "") and
        ``message`` (the ValueError's text when it did not run), one row per encoding.
    """
    rows = []
    with one_thread():
        for enc in positions.POS_ENCODINGS:
            torch.manual_seed(seed)
            model = GPT(GPTConfig(vocab_size=16, block_size=block_size, n_embd=32, n_head=4, n_layer=1, dropout=0.0,
                                  pos_encoding=enc)).eval()
            idx = torch.randint(0, 16, (1, T))  # (1, T) token ids
            try:
                with torch.no_grad():
                    logits = model(idx).logits  # (1, T, vocab_size)
            except ValueError as exc:
                rows.append({"pos_encoding": enc, "ran": False, "logits shape": "", "message": str(exc)})
            else:
                rows.append({"pos_encoding": enc, "ran": True, "logits shape": str(tuple(logits.shape)), "message": ""})
    return pd.DataFrame(rows)
