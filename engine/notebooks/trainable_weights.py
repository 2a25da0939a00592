"""The recipes of page 2's notebook, self-attention with trainable weights (:mod:`engine.notebooks`)."""

from __future__ import annotations

from engine import attention as A
from engine import chapter
from engine.notebooks.core import say, show
from engine.sections.trainable_weights import (
    dk_sweep,
    exercise_3_1,
    init_comparison,
    trainable_walkthrough,
    v1_v2_outputs,
)


def trainable_query(seed: int = chapter.TRAINABLE_SEED, d_out: int = 2, query_token: str = "journey"):
    """One query through seeded W_query, W_key, W_value (the page's section 2)."""
    q = list(A.CHAPTER_TOKENS).index(query_token)
    steps = trainable_walkthrough(A.chapter_inputs(), seed, d_out, q)
    show("query", steps.query, chapter.TRAINABLE_QUERY_2)
    show("attn_scores", steps.attn_scores, chapter.TRAINABLE_SCORES_2)
    show("attn_weights", steps.attn_weights, chapter.TRAINABLE_WEIGHTS_2)
    show("context_vec", steps.context_vec, chapter.TRAINABLE_CONTEXT_2)


def trainable_dk_sweep():
    """Why 1/sqrt(d_k): the spread of q·k and the largest softmax weight, by d_k (seeded: the same for everyone)."""
    sweep = dk_sweep()
    for column in sweep.stats.columns:
        show(f"dk.{column}", sweep.stats[column].tolist())


def trainable_init():
    """torch.rand against nn.Linear's initialisation, by d_in (seeded: the same for everyone)."""
    table = init_comparison()
    for init, rows in table.groupby("init", sort=False):
        for column in rows.columns.drop("init"):
            show(f"{init}.{column}", rows[column].tolist(), decimals=7)


def trainable_exercise(seed: int = chapter.TRAINABLE_SEED, d_out: int = 2, seed_v2: int = chapter.SA_V2_SEED):
    """Exercise 3.1: SelfAttention_v2's weights, transposed, copied into SelfAttention_v1."""
    exercise = exercise_3_1(A.chapter_inputs(), d_out, seed, seed_v2)
    show("max_abs_diff_before", exercise.max_abs_diff_before)
    show("max_abs_diff_after", exercise.max_abs_diff_after, decimals=10)
    say("equal_after", exercise.equal_after)


def trainable_classes(seed: int = chapter.TRAINABLE_SEED, d_out: int = 2, seed_v2: int = chapter.SA_V2_SEED):
    """SelfAttention_v1 and SelfAttention_v2 after their own seeds (the page's section 3)."""
    outputs = v1_v2_outputs(A.chapter_inputs(), d_out, seed, seed_v2)
    show("SelfAttention_v1", outputs.v1, chapter.SA_V1_OUTPUT)
    show("SelfAttention_v2", outputs.v2, chapter.SA_V2_OUTPUT)


RECIPES = {"trainable_walkthrough": trainable_query, "dk_sweep": trainable_dk_sweep,
           "v1_v2_outputs": trainable_classes, "init_comparison": trainable_init, "exercise_3_1": trainable_exercise}
