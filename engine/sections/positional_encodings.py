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
from engine.gpt import GPT, GPTConfig
from engine.rng import uses_global_rng
from engine.tokenizer import CharTokenizer

#: Every encoding's key, in the registry's order (``engine.positions.ENCODINGS``): what the page lists.
ENCODING_KEYS: tuple[str, ...] = tuple(enc.key for enc in positions.ENCODINGS)
#: The keys of the encodings that give the model position information (all but "none"), in the same order.
EXPLICIT_KEYS: tuple[str, ...] = tuple(enc.key for enc in positions.ENCODINGS
                                       if enc.adds_table or enc.rotates_qk or enc.biases_scores)
_NONE, _LEARNED = positions.NONE.key, positions.LEARNED.key
#: Layer counts the permutation figure's slider visits.
LAYERS: tuple[int, ...] = (1, 2, 3, 4, 5, 6)
#: What the lesson printed for the permutation experiment with its own model and initialisation, by
#: (n_layer, pos_encoding): "none" is its learned model with ``pos_emb.weight.zero_()``. Its initialisation is not
#: the app's, so the page compares orders of magnitude (:data:`ORDER_FACTOR`), never the digits.
LESSON_PERMUTATION: dict[tuple[int, str], float] = {
    (1, _NONE): 3.7e-08, (1, _LEARNED): 2.8e-03, (2, _NONE): 1.9e-02, (2, _LEARNED): 1.5e-02,
}
#: The positions where the lesson says the first layer's outputs of the two lines differ, counted from 1 as it does.
LESSON_FIRST_LAYER_DIFFER: tuple[int, ...] = (2, 3, 4)
#: Two differences are of the same order of magnitude when one is within this factor of the other.
ORDER_FACTOR = 10.0
#: float32's machine epsilon, 2**-23: the relative spacing of float32 numbers near 1.
FLOAT32_EPS = float(torch.finfo(torch.float32).eps)
#: A difference is float rounding when it is at most this many times the rounding level of the logits compared
#: (FLOAT32_EPS x their largest |value|): summing the same terms in another order moves a float32 result by a few
#: of its units in the last place. Measured on the page's sweep (n_embd 32/64/128, seeds 0-4): "none" at one
#: layer 0.9-4.1 times the level, every other cell above 8 000 times.
ROUNDING_FACTOR = 32.0
#: A difference is clearly real when it is above this many times the rounding level.
DIFFERENCE_FACTOR = 1000.0
#: A position table's similarity whose largest diagonal spread is at most this is only "a little" position-dependent:
#: 1 % of the range [-1, 1] a cosine similarity spans.
SMALL_SPREAD = 0.02
#: How far a similarity depends on absolute positions, from :func:`spread_kind`: not beyond float32 rounding, a little,
#: or a lot.
SPREAD_KINDS: tuple[str, ...] = ("rounding", "small", "large")
#: Distance between the positions compared by :attr:`PositionTable.far_similarity` (fewer if the table is shorter).
FAR_DISTANCE = 32
#: The score encodings the page contrasts: RoPE rotates q and k; "sinusoidal" adds the table to them.
SCORE_ENCODINGS: tuple[str, ...] = (positions.ROPE.key, positions.SINUSOIDAL.key)
#: Block size of the small model that reads sequences past it.
PAST_BLOCK_SIZE = 16
#: Vocabulary of that model (random token ids 0 .. 15).
PAST_VOCAB_SIZE = 16


# --- 1. the permutation experiment ---------------------------------------------------------------


@uses_global_rng
def permutation_experiment(
    n_layers: Iterable[int] = LAYERS,
    pos_encodings: Iterable[str] = ENCODING_KEYS,
    seed: int = 0,
    line_a: str = LESSON_LINE,
    line_b: str = PERMUTED_LINE,
    n_embd: int = 32,
    n_head: int = 4,
    zero_table: bool = False,
) -> pd.DataFrame:
    """Largest absolute difference between the last-position logits of two lines, untrained model.

    Lesson part 2. The model is a GPT with n_embd 32 and 4 heads (the lesson's small attention
    example), no dropout, block_size = the longer line's length, and a vocabulary made of the
    characters of the two lines only (sorted): an untrained model's behaviour does not depend on
    which other characters a corpus would add. Each (n_layer, pos_encoding) model is built after
    ``torch.manual_seed(seed)``, so every row is reproducible on its own; the global generator is
    held and restored by ``engine.rng.uses_global_rng``, so readers running this at the same time
    get the same numbers. With no position information and one layer the difference is float
    rounding (at most a few times ``rounding_level``, possibly 0): attention sums the same five vectors in another
    order. From two layers on it is clearly non-zero, because the causal mask lets each earlier position see
    a different prefix, which leaks order (Haviv et al., 2022).

    Args:
        n_layers: layer counts to try.
        pos_encodings: values of ``GPTConfig.pos_encoding`` to try (default: every one of the registry; "rope" needs
            an even head_dim = n_embd // n_head).
        seed: seed for the initial weights.
        line_a, line_b: the two lines; the lesson's second line permutes the first four characters.
        n_embd, n_head: model width and head count.
        zero_table: zero the learned table after init (``model.pos_emb.weight.zero_()``, the lesson's way to
            switch positions off); the other encodings are left as they are.

    Returns:
        DataFrame with columns ``n_layer`` (int), ``pos_encoding`` (str) and :data:`PERMUTATION_COLUMNS`
        (floats, logits units; see :func:`last_logits_difference`), one row per pair, layers outer, encodings
        inner.

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
            if zero_table and positions.encoding(pos_encoding).trained_table:
                with torch.no_grad():
                    model.pos_emb.weight.zero_()  # the lesson's way to switch positions off
            rows.append({"n_layer": n_layer, "pos_encoding": pos_encoding,
                         **last_logits_difference(model, idx_a, idx_b)})
    return pd.DataFrame(rows, columns=["n_layer", "pos_encoding", *PERMUTATION_COLUMNS])


#: The measured columns of :func:`permutation_experiment`.
PERMUTATION_COLUMNS = ("max_abs_diff", "logit_scale", "rounding_level")


def last_logits_difference(model: GPT, idx_a: Tensor, idx_b: Tensor) -> dict[str, float]:
    """How far a model's last-position logits for two token sequences differ, and float32's rounding at their size.

    Args:
        model: a GPT in eval mode.
        idx_a, idx_b: int64 (1, T_a) and (1, T_b) token ids.

    Returns:
        ``max_abs_diff`` = max |logits_a - logits_b| (logits units), ``logit_scale`` = the largest |logit| of
        either, ``rounding_level`` = :data:`FLOAT32_EPS` x ``logit_scale``, the spacing of float32 numbers of that
        size: a reordered sum of the same terms lands at most a few such steps away.
    """
    with torch.no_grad():
        last_a = model(idx_a).logits[0, -1]  # (1, T_a, vocab_size) -> (vocab_size,)
        last_b = model(idx_b).logits[0, -1]  # (1, T_b, vocab_size) -> (vocab_size,)
    scale = max(last_a.abs().max().item(), last_b.abs().max().item())
    return {"max_abs_diff": (last_a - last_b).abs().max().item(), "logit_scale": scale,
            "rounding_level": FLOAT32_EPS * scale}


@dataclass(frozen=True)
class PermutationSweep:
    """The permutation experiment for every layer count and encoding, in both layouts the page shows.

    Attributes:
        table: long DataFrame ``n_layer``, ``pos_encoding`` and :data:`PERMUTATION_COLUMNS` (see
            :func:`permutation_experiment`).
        by_layer: the differences, index ``n_layer``, one column per encoding in :data:`ENCODING_KEYS` order.
        levels: the rounding levels (``FLOAT32_EPS`` x the largest |logit|), laid out as ``by_layer``.
    """

    table: pd.DataFrame
    by_layer: pd.DataFrame
    levels: pd.DataFrame

    def diff(self, n_layer: int, pos_encoding: str) -> float:
        """max |logits(line) - logits(permuted)| at the last position for one cell of the sweep.

        Raises:
            KeyError: if the sweep has no such layer count or encoding.
        """
        return float(self.by_layer.loc[n_layer, pos_encoding])

    def rounding_level(self, n_layer: int, pos_encoding: str | None = None) -> float:
        """float32's rounding of one cell's logits (``FLOAT32_EPS`` x their largest |value|); with no encoding, the
        largest over the layer count's encodings (the figure's dotted line)."""
        if pos_encoding is None:
            return float(self.levels.loc[n_layer].max())
        return float(self.levels.loc[n_layer, pos_encoding])

    def ratio(self, n_layer: int, pos_encoding: str) -> float:
        """A cell's difference in units of its rounding level."""
        return self.diff(n_layer, pos_encoding) / self.rounding_level(n_layer, pos_encoding)

    def is_rounding(self, n_layer: int, pos_encoding: str) -> bool:
        """True when the two lines' outputs differ by float rounding only (<= ``ROUNDING_FACTOR`` rounding levels)."""
        return self.ratio(n_layer, pos_encoding) <= ROUNDING_FACTOR

    def differs(self, n_layer: int, pos_encoding: str) -> bool:
        """True when the two lines' outputs clearly differ (> ``DIFFERENCE_FACTOR`` rounding levels)."""
        return self.ratio(n_layer, pos_encoding) > DIFFERENCE_FACTOR


#: The most digits after the first significant one :func:`telling_digits` gives: a float32 holds about 7 significant
#: digits.
MOST_DIGITS = 6


def telling_digits(groups: Iterable[Iterable[float]], least: int = 1, most: int = MOST_DIGITS) -> int:
    """The fewest digits after the first significant one at which the different values of every group are written
    differently (``ui.numbers.sci``'s ``digits``: ``digits + 1`` significant digits, rounded as ``f"{v:.{digits}e}"``).

    Args:
        groups: the values a reader compares with each other, one iterable per group (a table's row), any unit.
        least, most: the range of digits tried (0 <= least <= most).

    Returns:
        An int in [least, most]; ``most`` when even that many digits write two different values alike.

    Raises:
        ValueError: if the range is empty or negative.
    """
    if not 0 <= least <= most:
        raise ValueError(f"need 0 <= least <= most, got least={least}, most={most}")
    groups = [[float(v) for v in group] for group in groups]
    for digits in range(least, most + 1):
        if all(len({f"{v:.{digits}e}" for v in group}) == len(set(group)) for group in groups):
            return digits
    return most


def sweep_of(table: pd.DataFrame, encodings: Sequence[str]) -> PermutationSweep:
    """A :class:`PermutationSweep` of an experiment's long table, one column per encoding in ``encodings`` order."""
    # long (n_layer x encodings, 5) -> wide (n_layer, encodings), once per measured column
    wide = {c: table.pivot(index="n_layer", columns="pos_encoding", values=c)[list(encodings)]
            for c in ("max_abs_diff", "rounding_level")}
    return PermutationSweep(table=table, by_layer=wide["max_abs_diff"], levels=wide["rounding_level"])


def permutation_by_layers(n_embd: int = 32, n_head: int = 4, seed: int = 0,
                          layers: Sequence[int] = LAYERS) -> PermutationSweep:
    """The page's sweep: :func:`permutation_experiment` on the lesson's lines, every encoding.

    Args:
        n_embd, n_head: model width and head count (head_dim = n_embd // n_head must be even for rope).
        seed: ``torch.manual_seed`` before each model is built.
        layers: the n_layer values.

    Returns:
        A :class:`PermutationSweep` with ``len(layers) * len(ENCODING_KEYS)`` values.

    Raises:
        ValueError: from the experiment (e.g. odd head_dim with rope).
    """
    table = permutation_experiment(n_layers=tuple(layers), seed=seed, n_embd=n_embd, n_head=n_head)
    return sweep_of(table, ENCODING_KEYS)


def zeroed_table_sweep(n_embd: int = 32, n_head: int = 4, seed: int = 0,
                       layers: Sequence[int] = (1, 2)) -> PermutationSweep:
    """The lesson's own way to switch positions off: the learned model of the same seed with
    ``model.pos_emb.weight.zero_()``, on the lesson's lines.

    Its other weights are another draw than the "none" model's (the table's draws come first), so the numbers
    differ from the "none" column, but both models have no position information.

    Returns:
        A :class:`PermutationSweep` with the one encoding "learned" (table zeroed).
    """
    table = permutation_experiment(n_layers=tuple(layers), pos_encodings=(_LEARNED,), seed=seed, n_embd=n_embd,
                                   n_head=n_head, zero_table=True)
    return sweep_of(table, (_LEARNED,))


@dataclass(frozen=True)
class LessonComparison:
    """One of the lesson's printed permutation differences beside the app's.

    Attributes:
        n_layer, pos_encoding: the cell ("none" is the lesson's zeroed table).
        lesson, app: the two differences (logits units).
        factor: app / lesson.
        same_order: True when the factor is within [1 / ORDER_FACTOR, ORDER_FACTOR].
    """

    n_layer: int
    pos_encoding: str
    lesson: float
    app: float
    factor: float
    same_order: bool


def lesson_comparison(sweep: PermutationSweep) -> tuple[LessonComparison, ...]:
    """Every number of :data:`LESSON_PERMUTATION` beside the sweep's value for the same cell, by orders of magnitude.

    Raises:
        KeyError: if the sweep lacks a layer count or encoding the lesson printed.
    """
    out = []
    for (n_layer, encoding), lesson in LESSON_PERMUTATION.items():
        app = sweep.diff(n_layer, encoding)
        factor = app / lesson
        out.append(LessonComparison(n_layer=n_layer, pos_encoding=encoding, lesson=lesson, app=app, factor=factor,
                                    same_order=1 / ORDER_FACTOR <= factor <= ORDER_FACTOR))
    return tuple(out)


def comparison_digits(rows: Sequence[LessonComparison]) -> int:
    """How many digits after the first significant one the page writes the app's values of :func:`lesson_comparison`
    with (``ui.numbers.sci``'s ``digits``): :func:`telling_digits` of the values of each layer count, so that two
    encodings of one layer count read alike only when their differences are equal (2 for n_embd 32, seed 0: "none"
    6.0986e-3 and "learned" 6.1262e-3 at two layers, both 6.1e-3 with one digit).
    """
    layers = dict.fromkeys(r.n_layer for r in rows)
    return telling_digits([[r.app for r in rows if r.n_layer == n] for n in layers])


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


@dataclass(frozen=True)
class FirstLayer:
    """How far the first block's outputs of two lines differ at each position.

    Attributes:
        diff: float32 (T,), max over features of |block_1(line)[t] - block_1(permuted)[t]|.
        rounding_level: float (T,), ``FLOAT32_EPS`` x the largest |output| at position t in either line.
        agrees: bool (T,), True where ``diff`` is at most ``ROUNDING_FACTOR`` rounding levels (float rounding).
    """

    diff: Tensor
    rounding_level: Tensor
    agrees: Tensor


@uses_global_rng
def first_layer_differences(line: str = LESSON_LINE, permuted: str = PERMUTED_LINE, n_embd: int = 32,
                            n_head: int = 4, seed: int = 0) -> FirstLayer:
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
        A :class:`FirstLayer`.

    Raises:
        ValueError: for lines of different or zero length, or an invalid config value.
    """
    if len(line) != len(permuted) or not line:
        raise ValueError(f"the lines must be non-empty and of equal length, got {len(line)} and {len(permuted)}")
    tokenizer = CharTokenizer(line + permuted)
    idx = torch.stack([tokenizer.encode_tensor(line), tokenizer.encode_tensor(permuted)])  # 2 x (T,) -> (2, T)
    config = GPTConfig(vocab_size=tokenizer.vocab_size, block_size=len(line), n_embd=n_embd, n_head=n_head,
                       n_layer=1, dropout=0.0, pos_encoding=_NONE)
    torch.manual_seed(seed)
    model = GPT(config).eval()
    with torch.no_grad():
        out, _weights = model.blocks[0](model.embed(idx))  # (2, T) -> (2, T, n_embd)
    diff = (out[0] - out[1]).abs().amax(dim=-1)  # (T, n_embd) -> (T,)
    level = FLOAT32_EPS * out.abs().amax(dim=(0, 2))  # (2, T, n_embd) -> (T,)
    return FirstLayer(diff=diff, rounding_level=level, agrees=diff <= ROUNDING_FACTOR * level)


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


def spread_kind(spread: float) -> str:
    """How far a cosine similarity with this largest diagonal spread depends on absolute positions.

    Returns:
        "rounding" when the spread is at most ``ROUNDING_FACTOR`` x ``FLOAT32_EPS`` (similarities are at most 1, so
        that is their float32 rounding), "small" up to :data:`SMALL_SPREAD`, else "large" (at most 2).
    """
    if spread <= ROUNDING_FACTOR * FLOAT32_EPS:
        return "rounding"
    return "small" if spread <= SMALL_SPREAD else "large"


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
    model = GPT(GPTConfig(**{**config.to_dict(), "pos_encoding": _LEARNED}))
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
    table = describe_table(ckpt.model.pos_emb.weight) if ckpt.config.encoding.trained_table else None
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
        rounding_level: ``FLOAT32_EPS`` x the largest |q_m| x |k_n| of the vectors dotted, a bound on every
            score's size, so float32's rounding of them: two scores that should be equal may differ by a few.
    """

    attn_scores: Tensor
    shifted: Tensor
    shift: int
    max_diagonal_spread: float
    max_shift_diff: float
    rounding_level: float

    @property
    def constant_diagonals(self) -> bool:
        """True when every diagonal of ``attn_scores`` is constant up to ``ROUNDING_FACTOR`` rounding levels."""
        return self.max_diagonal_spread <= ROUNDING_FACTOR * self.rounding_level

    @property
    def shift_tested(self) -> bool:
        """False for a shift of 0: the two matrices are then the same computation, and their equality shows nothing."""
        return self.shift > 0

    @property
    def shift_invariant(self) -> bool:
        """True when the shift changes no score by more than ``ROUNDING_FACTOR`` rounding levels."""
        return self.max_shift_diff <= ROUNDING_FACTOR * self.rounding_level

    @property
    def distance_only(self) -> bool:
        """True when the scores depend on m - n only: constant diagonals, and unchanged by a shift that is not 0."""
        return self.constant_diagonals and self.shift_tested and self.shift_invariant


def _score_matrices(first: tuple[Tensor, float], second: tuple[Tensor, float], shift: int) -> ScoreMatrices:
    (attn_scores, bound_a), (shifted, bound_b) = first, second
    return ScoreMatrices(attn_scores=attn_scores, shifted=shifted, shift=shift,
                         max_diagonal_spread=diagonal_spread(attn_scores),
                         max_shift_diff=float((attn_scores - shifted).abs().max()),
                         rounding_level=FLOAT32_EPS * max(bound_a, bound_b))


def scores_and_bound(q_pos: Tensor, k_pos: Tensor) -> tuple[Tensor, float]:
    """q_pos @ k_pos.T, (T, d) @ (d, T) -> (T, T), and the largest |q_m| x |k_n| (a bound on every score)."""
    bound = float(q_pos.norm(dim=-1).max() * k_pos.norm(dim=-1).max())  # (T, d) -> (T,) -> ()
    return q_pos @ k_pos.T, bound


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

    def scores(start: int) -> tuple[Tensor, float]:
        pos = torch.arange(start, start + T)  # (T,)
        q_rot = positions.apply_rope(q.float().expand(T, -1), pos, base)  # (hd,) -> (T, hd), q at start..start+T-1
        k_rot = positions.apply_rope(k.float().expand(T, -1), pos, base)  # (hd,) -> (T, hd)
        return scores_and_bound(q_rot, k_rot)  # (T, hd) @ (hd, T) -> (T, T)

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

    def scores(p: Tensor) -> tuple[Tensor, float]:
        q_pos = q.float() + p  # (d,) + (T, d) -> (T, d)
        k_pos = k.float() + p  # (T, d)
        return scores_and_bound(q_pos, k_pos)  # (T, d) @ (d, T) -> (T, T)

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
    if positions.encoding(encoding).rotates_qk:
        return rope_score_matrix(q, k, T, shift)
    return additive_score_matrix(q, k, T, shift)


@dataclass(frozen=True)
class AlibiBias:
    """ALiBi's bias on the scores of every head, for positions 0 .. T-1 and for the same positions shifted.

    Attributes:
        slopes: float64 (num_heads,), each head's slope s_h (:func:`engine.positions.alibi_slopes`; the paper's
            m, which page 7 keeps for RoPE's query position).
        bias: float32 (num_heads, T, T), -s_h * |i - j| (the causal mask reads j <= i only).
        shifted: float32 (num_heads, T, T), the same for positions shift .. shift+T-1.
        shift: how far the second positions are moved.
        max_diagonal_spread: the largest max - min along a diagonal of any head's bias.
        max_shift_diff: max |bias - shifted|.
    """

    slopes: Tensor
    bias: Tensor
    shifted: Tensor
    shift: int
    max_diagonal_spread: float
    max_shift_diff: float

    @property
    def shift_tested(self) -> bool:
        """False for a shift of 0: the two biases are then the same computation."""
        return self.shift > 0

    @property
    def distance_only(self) -> bool:
        """True when every head's bias is constant along its diagonals and a shift that is not 0 changes nothing
        (the biases are exact in float32 here: multiples of powers of two)."""
        return self.max_diagonal_spread == 0 and self.shift > 0 and self.max_shift_diff == 0


def alibi_score_bias(num_heads: int, T: int, shift: int = 0) -> AlibiBias:
    """ALiBi's bias (Press, Smith & Lewis, 2022, section 3) as the page shows it beside RoPE's scores.

    Raises:
        ValueError: if num_heads < 1, T < 1 or shift < 0.
    """
    if T < 1 or shift < 0:
        raise ValueError(f"need T >= 1 and shift >= 0, got T={T}, shift={shift}")
    bias = positions.alibi_bias(T, num_heads)  # (nh, T, T)
    shifted = positions.alibi_bias(range(shift, shift + T), num_heads)  # (nh, T, T)
    return AlibiBias(slopes=positions.alibi_slopes(num_heads), bias=bias, shifted=shifted, shift=shift,
                     max_diagonal_spread=max(diagonal_spread(b) for b in bias),
                     max_shift_diff=float((bias - shifted).abs().max()))


# --- 7. past block_size ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class PastBlockRun:
    """One encoding's model reading a sequence, maybe longer than its block_size.

    Attributes:
        pos_encoding: the encoding.
        logits_shape: (1, T, vocab_size) when it ran; None when the learned table had no row.
        error: the model's ValueError message (developer text, shown as the exception it is) when it did not run.
        far_weight: when it ran on more than block_size tokens, float (n_head,): the share of each head's attention
            weight that the last query puts on keys at least block_size positions back, which no trained window
            holds; else None.
    """

    pos_encoding: str
    logits_shape: tuple[int, ...] | None
    error: str | None
    far_weight: Tensor | None = None

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
        runs: one :class:`PastBlockRun` per encoding, in :data:`ENCODING_KEYS` order.
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

    def run(self, pos_encoding: str) -> PastBlockRun:
        """The run of one encoding.

        Raises:
            KeyError: for an encoding that did not run here.
        """
        found = [r for r in self.runs if r.pos_encoding == pos_encoding]
        if not found:
            raise KeyError(pos_encoding)
        return found[0]


#: Heads of the models that read past block_size (so ALiBi's slopes are 1/4, 1/16, 1/64, 1/256).
PAST_N_HEAD = 4


@uses_global_rng
def run_past_block_size(T: int, block_size: int = PAST_BLOCK_SIZE, seed: int = 0) -> PastBlockSize:
    """Feed T random tokens to a small untrained GPT (block_size given) with each position encoding.

    Learned positions have no row past block_size and the model raises ValueError (the lesson's
    point); the others are nothing, formulas or a bias by distance, so they run at any length. Past block_size
    each run also reports where its last query's attention goes: ALiBi's bias, -s_h per step of distance, leaves
    little weight on the keys farther back than a trained window (Press, Smith & Lewis, 2022, section 4), while an
    untrained model without a bias spreads it almost evenly.

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
    for enc in positions.ENCODINGS:
        torch.manual_seed(seed)
        model = GPT(GPTConfig(vocab_size=PAST_VOCAB_SIZE, block_size=block_size, n_embd=32, n_head=PAST_N_HEAD,
                              n_layer=1, dropout=0.0, pos_encoding=enc.key)).eval()
        idx = torch.randint(0, PAST_VOCAB_SIZE, (1, T))  # (1, T) token ids
        try:
            with torch.no_grad():
                out = model(idx, return_weights=True)  # logits (1, T, vocab_size), weights n_layer x (1, nh, T, T)
        except ValueError as exc:
            if not enc.limited_to_block or T <= block_size:
                raise
            runs.append(PastBlockRun(pos_encoding=enc.key, logits_shape=None, error=str(exc)))
            continue
        last = out.attn_weights[0][0, :, -1, :]  # (1, nh, T, T) -> (nh, T): the last query's weights per head
        far = last[:, : T - block_size].sum(dim=-1) if T > block_size else None  # keys 0 .. T-1-block_size: (nh,)
        runs.append(PastBlockRun(pos_encoding=enc.key, logits_shape=tuple(out.logits.shape), error=None,
                                 far_weight=far))
    return PastBlockSize(T=T, block_size=block_size, runs=tuple(runs))


@uses_global_rng
def entry_shapes(n_embd: int, n_head: int, line: str = LESSON_LINE, encodings: Sequence[str] = ENCODING_KEYS,
                 ) -> dict[str, PositionalEncodingsShapes]:
    """Page 7's entry diagrams' shapes: each encoding's one-layer model built and run on ``line`` on the CPU.

    Every shape is read from that run: the ids, the token embeddings, the embedding with its position
    information, the attention weights (B, n_head, T, T), the position table (learned, sinusoidal),
    RoPE's cos table or ALiBi's score bias the model used for T positions, and the qkv layer's weight. The models
    are as small as the page's sizes (one layer, a line of a few characters), so the run costs little; their
    random weights come from the global generator forked by ``uses_global_rng``, so no other reader's draws
    move. (The ``meta`` device would compute nothing, but its first use imports PyTorch's compiler.)

    Raises:
        ValueError: if ``n_head`` does not divide ``n_embd`` (from ``GPTConfig``).
    """
    tokenizer = CharTokenizer(line)
    idx = tokenizer.encode_tensor(line)[None, :]  # (T,) -> (1, T)
    T = idx.size(1)
    out = {}
    for key in encodings:
        config = GPTConfig(vocab_size=tokenizer.vocab_size, block_size=T, n_embd=n_embd, n_head=n_head, n_layer=1,
                           dropout=0.0, pos_encoding=key)
        enc = config.encoding
        model = GPT(config).eval()
        attn = model.blocks[0].attn
        with torch.no_grad():
            tok_emb = model.tok_emb(idx)  # (1, T) -> (1, T, n_embd)
            x = model.embed(idx)  # (1, T, n_embd)
            attn_weights = model(idx, return_weights=True).attn_weights[0]  # (1, n_head, T, T)
        heads = tuple(attn_weights.shape[:3]) + (config.head_dim,)  # q, k: (1, n_head, T, head_dim)
        table = (model.pos_emb.weight if enc.trained_table else model.pos_table)[:T] if enc.adds_table else None
        out[key] = PositionalEncodingsShapes(
            idx=tuple(idx.shape), tok_emb=tuple(tok_emb.shape), x=tuple(x.shape), q=heads, k=heads,
            attn_scores=tuple(attn_weights.shape),
            pos_table=tuple(table.shape) if table is not None else None,  # (T, n_embd)
            rope=tuple(attn.rope_cos[:T].shape) if enc.rotates_qk else None,  # (T, head_dim // 2)
            bias=tuple(attn.score_bias[:, :T, :T].shape) if enc.biases_scores else None,  # (n_head, T, T)
            qkv=tuple(attn.qkv.weight.shape))  # (3 * n_embd, n_embd)
    return out


# --- the page's prediction gates (``ui/questions/positional_encodings.py``): their answers, which the page and
# its notebook's exercises both call -----------------------------------------------------------------------------


def none_by_depth(sweep: PermutationSweep) -> str:
    """How the difference without positions moves with depth: ``from_one`` (clearly non-zero at 1 layer),
    ``from_two`` (rounding at 1, clearly non-zero at 2), ``never``."""
    if sweep.differs(1, positions.NONE.key):
        return "from_one"
    return "from_two" if sweep.differs(2, positions.NONE.key) else "never"


def blind_encoding(sweep: PermutationSweep) -> str:
    """The first encoding of :data:`engine.positions.ENCODINGS` whose one-layer difference is float rounding."""
    return next((e.key for e in positions.ENCODINGS if sweep.is_rounding(1, e.key)), positions.NONE.key)
