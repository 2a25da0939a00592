"""The recipes of page 5's notebook, multi-head attention (:mod:`engine.notebooks`)."""

from __future__ import annotations

from engine import chapter
from engine.bench.attention import BenchSize, bench_size, results_table
from engine.notebooks.core import say, show
from engine.sections.multi_head import (
    LESSON_SEED,
    heads_on_line,
    page_line,
    split_check,
    split_output,
    wrapper_output,
    wrapper_vs_split,
)


def multi_head_wrapper(seed: int = chapter.MHA_WRAPPER_SEED):
    """The chapter's MultiHeadAttentionWrapper (2 heads of d_out 2) on its batch of two sequences."""
    wrapper = wrapper_output(seed)
    show("context_vecs[0]", wrapper.context_vec[0], chapter.MHA_WRAPPER_OUTPUT)
    print("shape", tuple(wrapper.context_vec.shape))


def multi_head_copy(seed: int = chapter.MHA_WRAPPER_SEED, copy_heads: int = 2, copy_dim: int = 2):
    """The split layer's first row, and the wrapper's weights copied into it (compared before out_proj)."""
    split = split_output(seed)
    show("split.context_vecs[0][0]", split.context_vec[0, 0], chapter.MHA_SPLIT_FIRST_ROW)
    compare = wrapper_vs_split(seed, head_dim=int(copy_dim), num_heads=int(copy_heads))
    show("copy.max_abs_diff_before", compare.max_abs_diff_before)
    say("copy.equal_after", compare.max_abs_diff < 1e-6)


def multi_head_split(try_d_out: int = 32, try_heads: int = 4):
    """Whether d_out splits into num_heads heads, as MultiHeadAttention checks it."""
    check = split_check(int(try_d_out), int(try_heads))
    say("split.head_dim", check.head_dim)
    say("split.error", check.error)
    show("split.nearest", list(check.nearest))


def multi_head_timing():
    """How to time the variants (the page's table holds the times measured where the app runs; a reader's
    machine gives others): a small input, three timed calls each."""
    timing = bench_size(BenchSize(2, 16, 32, 2), repeats=3)
    print(results_table({"sizes": [timing]}).to_string())


def multi_head_line(line: str = chapter.LESSON_LINE, n_embd: int = chapter.LESSON_N_EMBD, num_heads: int = 4,
                    max_line: int = 12):
    """The lesson's untrained layer on a line (the page keeps its first ``max_line`` characters): every head's
    attention weights."""
    used = page_line(line, max_line)
    run = heads_on_line(used.line, n_embd, num_heads, LESSON_SEED)
    show("attn_weights", run.attn_weights)


RECIPES = {"wrapper_output": multi_head_wrapper, "split_output": multi_head_copy, "heads_on_line": multi_head_line,
           "split_check": multi_head_split, "build_variants": multi_head_timing}
#: The timing cell shows how to measure, not a number the page shows (times depend on the machine).
TIMING = frozenset({multi_head_timing})
