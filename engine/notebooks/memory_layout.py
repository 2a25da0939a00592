"""The recipes of page 6's notebook, the memory layout (:mod:`engine.notebooks`)."""

from __future__ import annotations

from engine import chapter
from engine.notebooks.core import say, show
from engine.sections.memory_layout import (
    DTYPE_BYTES,
    chapter_layout,
    explore,
    key_head_walk,
    score_cost,
    shape_or_default,
)


def memory_chapter():
    """The chapter's (2, 3) matrix: view, transpose, the storage and the transpose's reading order."""
    matrix = chapter_layout()
    show("M.view(3, 2)", matrix.view_3_2, chapter.LAYOUT_VIEW_3_2)
    show("M.transpose(0, 1)", matrix.transposed, chapter.LAYOUT_TRANSPOSED)
    show("storage", matrix.storage, chapter.LAYOUT_STORAGE)
    show("reading_order", matrix.reading, chapter.LAYOUT_TRANSPOSED_READING_ORDER)


def memory_explorer(start_shape: str = "2, 3", operation: str = "view", new_shape: str = "3, 2", d0: int = 0,
                    d1: int = 1):
    """The explorer: 1 … n laid out as the starting shape, the operation run, the storage cells it reads."""
    base, _error = shape_or_default(start_shape, (2, 3), allow_infer=False)
    target, _error = shape_or_default(new_shape, (-1,))
    run = explore(base, operation, target, (int(d0), int(d1)))
    say("explorer.ran", list(run.codes))
    say("explorer.errors", list(run.errors))
    show("explorer.reading_order", list(run.order))


def memory_cost(cost_batch: int = 8, cost_heads: int = 12, cost_head_dim: int = 64, cost_dtype: str = "float32"):
    """The bytes of attn_scores (growing with T²) and of q, k, v (growing with T)."""
    cost = score_cost(int(cost_batch), int(cost_heads), int(cost_head_dim), DTYPE_BYTES[cost_dtype])
    show("scores_bytes", cost.table["scores_bytes"].tolist())
    show("qkv_bytes", cost.table["qkv_bytes"].tolist())
    show("scores_short", cost.scores_short)
    show("scores_long", cost.scores_long)
    show("qkv_long", cost.qkv_long)
    show("growth", cost.growth)


def memory_heads(num_tokens: int = 4, num_heads: int = 2, head_dim: int = 2):
    """The keys of one sequence through the head split, stage by stage."""
    for stage in key_head_walk(num_tokens, num_heads, head_dim):
        show(f"{stage.title} shape", list(stage.layout.shape))


RECIPES = {"chapter_operations": memory_chapter, "explore": memory_explorer, "key_head_walk": memory_heads,
           "score_cost": memory_cost}
