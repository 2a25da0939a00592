"""The recipes of page 1's notebook, self-attention without trainable weights (:mod:`engine.notebooks`)."""

from __future__ import annotations

import torch

from engine import attention as A
from engine import chapter
from engine.figures.core import SEPARATORS, attention_heatmap
from engine.notebooks.core import say, show
from engine.sections.self_attention import (
    DTYPES,
    jacobian_check,
    loop_vs_matmul,
    naive_jacobian_check,
    query_walkthrough,
    softmax_numerics,
)

#: The chapter's six embeddings as plain lists (the settings cell's default).
CHAPTER_INPUTS = [list(row) for row in A.CHAPTER_INPUTS]


def self_attention_query(inputs: list = CHAPTER_INPUTS, query_token: str = "journey"):
    """One query through the three steps (the page's section 2), checked against the chapter."""
    x = torch.tensor(inputs, dtype=torch.float32)  # (6, 3): the page's embeddings
    q = list(A.CHAPTER_TOKENS).index(query_token)
    steps = query_walkthrough(x, q)
    show("attn_scores", steps.attn_scores, chapter.SIMPLE_SCORES_JOURNEY)
    show("naive_weights", steps.naive_weights, chapter.SIMPLE_NAIVE_WEIGHTS_JOURNEY)
    show("attn_weights", steps.attn_weights, chapter.SIMPLE_SOFTMAX_WEIGHTS_JOURNEY)
    show("context_vec", steps.context_vec, chapter.SIMPLE_CONTEXT_JOURNEY)


def self_attention_numerics(inputs: list = CHAPTER_INPUTS, query_token: str = "journey", scale: float = 1.0,
                            dtype: str = "float32"):
    """Naive and stable softmax on the query's scores times ``scale`` in ``dtype`` (the page's section 3)."""
    x = torch.tensor(inputs, dtype=torch.float32)  # (6, 3): the page's embeddings
    steps = query_walkthrough(x, list(A.CHAPTER_TOKENS).index(query_token))
    numerics = softmax_numerics(steps.attn_scores, float(scale), DTYPES[dtype])
    for column in numerics.table.columns:
        show(column, numerics.table[column].tolist())
    show("naive_broken", numerics.naive_broken)
    say("stable_finite", numerics.stable_finite)
    show("overflow", numerics.overflow, decimals=2)
    show("underflow", numerics.underflow, decimals=2)


def self_attention_jacobian(inputs: list = CHAPTER_INPUTS, jacobian_query: str = "journey"):
    """The softmax's Jacobian and the divide-by-the-sum one, closed form against autograd (the page's section 4)."""
    x = torch.tensor(inputs, dtype=torch.float32)  # (6, 3): the page's embeddings
    attn_scores = A.dot_scores(x, x[list(A.CHAPTER_TOKENS).index(jacobian_query)])  # (6, 3), (3,) -> (6,)
    softmax_jac = jacobian_check(attn_scores)
    show("softmax_jacobian", softmax_jac.closed_form)
    say("softmax_matches_autograd", softmax_jac.max_abs_diff < 1e-12)
    naive_jac = naive_jacobian_check(attn_scores)
    if naive_jac is None:
        say("naive_jacobian", None)
    else:
        show("naive_jacobian", naive_jac.closed_form)
        say("naive_matches_autograd", naive_jac.max_abs_diff < 1e-12)


def self_attention_all(inputs: list = CHAPTER_INPUTS, number_separators: str = SEPARATORS):
    """Every token at once with matrix products (the page's section 5), and the page's heatmap of attn_weights
    (``number_separators``: the reader's decimal sign and group separator, as Plotly's ``layout.separators``)."""
    every = loop_vs_matmul(torch.tensor(inputs, dtype=torch.float32))  # (6, 3) inputs
    show("attn_scores[:2]", every.attn_scores[:2], chapter.SIMPLE_SCORES_FIRST_ROWS)
    show("context_vec", every.context_vec, chapter.SIMPLE_ALL_CONTEXT)
    attention_heatmap(every.attn_weights, list(A.CHAPTER_TOKENS), title="attn_weights = softmax(dim=-1)",
                      separators=number_separators).show()


RECIPES = {"query_walkthrough": self_attention_query, "softmax_numerics": self_attention_numerics,
           "dot_scores": self_attention_jacobian, "loop_vs_matmul": self_attention_all}
