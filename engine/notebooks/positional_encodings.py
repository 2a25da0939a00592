"""The recipes of page 7's notebook, positional encodings (:mod:`engine.notebooks`)."""

from __future__ import annotations

from engine.notebooks.core import say, show
from engine.positions import ROPE, encoding
from engine.sections.positional_encodings import (
    permutation_by_layers,
    position_scores,
    rope_pair_table,
    rope_supported,
    seeded_rope_rotation,
    sinusoidal_position_table,
    untrained_table,
)


def positions_permutation(n_embd: int = 32, seed: int = 0):
    """max |logits(line) − logits(permuted line)| at the last position, by n_layer and encoding."""
    sweep = permutation_by_layers(n_embd=n_embd, n_head=4, seed=seed)
    for n_layer in sweep.by_layer.index:
        show(f"n_layer {n_layer}", sweep.by_layer.loc[n_layer].tolist())
    print("columns", list(sweep.by_layer.columns))


def positions_tables(table_block_size: int = 128, table_n_embd: int = 128, vector_seed: int = 0):
    """The untrained learned table and the sinusoidal one: their spread and how position pairs compare."""
    untrained = untrained_table(int(table_block_size), int(table_n_embd), vector_seed)
    sinusoidal = sinusoidal_position_table(int(table_block_size), int(table_n_embd))
    show("untrained.std", untrained.std)
    show("untrained.diagonal_spread", untrained.diagonal_spread, decimals=6)
    show("sinusoidal.table[0][:8]", sinusoidal.table[0, :8])
    show("sinusoidal.diagonal_spread", sinusoidal.diagonal_spread, decimals=6)


def positions_rope(head_dim: int = 16, rope_position: int = 3, vector_seed: int = 0):
    """One vector rotated by RoPE: each pair's angle at the position, and its unchanged length."""
    if rope_supported(int(head_dim)):
        rotation = seeded_rope_rotation(int(head_dim), vector_seed)
        pairs = rope_pair_table(rotation, int(rope_position))
        show("theta", pairs["theta"].tolist(), decimals=6)
        show("angle_deg", pairs["angle_deg"].tolist(), decimals=1)
        show("wavelength", pairs["wavelength"].tolist(), decimals=1)
        show("rotation.norms[0]", rotation.norms[0])
        show("rotation.norms[position]", rotation.norms[int(rope_position)])
    else:
        say("rope_supported", False)


def positions_scores(score_encoding: str = ROPE.key, head_dim: int = 16, score_T: int = 8, shift: int = 100,
                     vector_seed: int = 0):
    """The same q and k at every position pair: do the scores depend only on m − n?"""
    if not encoding(score_encoding).rotates_qk or rope_supported(int(head_dim)):
        scores = position_scores(score_encoding, int(head_dim), int(score_T), int(shift), vector_seed)
        show("scores", scores.attn_scores)
        show("shifted", scores.shifted)
        show("max_diagonal_spread", scores.max_diagonal_spread, decimals=6)
        show("max_shift_diff", scores.max_shift_diff, decimals=6)
        say("distance_only", scores.distance_only)


RECIPES = {"permutation_by_layers": positions_permutation, "untrained_table": positions_tables,
           "rope_rotation": positions_rope, "position_scores": positions_scores}
