"""The recipes of page 4's notebook, dropout on the attention weights (:mod:`engine.notebooks`)."""

from __future__ import annotations

from engine import attention as A
from engine import chapter
from engine.notebooks.core import show
from engine.sections.dropout import chapter_causal_weights, dropout_expectation, dropout_pair, train_vs_eval


def dropout_chapter(seed: int = chapter.DROPOUT_SEED):
    """nn.Dropout(0.5) on ones and on the causal weights, each after manual_seed(seed)."""
    shown = dropout_pair(chapter_causal_weights(A.chapter_inputs()), chapter.DROPOUT_P, seed)
    show("dropout(ones)", shown.ones, chapter.DROPOUT_ONES)
    show("dropout(attn_weights)", shown.weights, chapter.DROPOUT_CAUSAL)


def dropout_mean(mean_p: float = 0.5):
    """The mean over 2 000 masks converges back to the weights."""
    expectation = dropout_expectation(chapter_causal_weights(A.chapter_inputs()), float(mean_p), n_masks=2000, seed=0)
    show("final_error", expectation.final_error)
    show("error_after_10", expectation.error_after_10)


def dropout_modes(layer_p: float = 0.5):
    """CausalAttention with dropout p, twice in train() mode, once in eval() mode."""
    modes = train_vs_eval(A.chapter_inputs(), float(layer_p), chapter.DROPOUT_SEED)
    show("train_1", modes.train_1)
    show("eval_1", modes.eval_1)
    print("train_calls_differ", modes.train_calls_differ)


RECIPES = {"dropout_pair": dropout_chapter, "dropout_expectation": dropout_mean, "train_vs_eval": dropout_modes}
