"""Page 6's gates: `view` on a transposed tensor, and what `transpose(1, 2)` does to the keys' storage."""

from __future__ import annotations

from engine.sections import memory_layout as sections
from ui.i18n import N_
from ui.questions import CHOICE, Gate, Option

VIEW = Gate(
    id="ml_view", page="memory_layout", kind=CHOICE,
    question=N_("M = [[1, 2, 3], [4, 5, 6]]. What does `M.transpose(0, 1).view(-1)` give, without `contiguous()`?"),
    answer=sections.view_outcome, defaults=lambda: {"comparison": sections.chapter_comparison()},
    exercise=(("comparison", "chapter_comparison()"),),
    options=(
        Option("error", N_("a RuntimeError"),
               N_("The transpose only swaps the strides: reading it in its new order jumps through memory, which one "
                  "stride cannot describe, so view refuses; reshape or contiguous().view make a copy.")),
        Option("transposed", N_("[1, 4, 2, 5, 3, 6], the transposed order"),
               N_("That is what reshape(-1) or contiguous().view(-1) give, from a copy: view never copies.")),
        Option("memory", N_("[1, 2, 3, 4, 5, 6], the order in memory"),
               N_("view keeps the logical order of the tensor it is called on, never silently the storage's; here it "
                  "cannot, and says so.")),
    ),
)


TRANSPOSE = Gate(
    id="ml_transpose", page="memory_layout", kind=CHOICE,
    question=N_("T = {T}, H = {H}, d_h = {d_h}: the keys (1, T, H, d_h) go through `.transpose(1, 2)`. What comes "
                "out?"),
    answer=sections.transpose_outcome, defaults=lambda: {"num_tokens": 4, "num_heads": 2, "head_dim": 2},
    words=lambda num_tokens, num_heads, head_dim: {"T": int(num_tokens), "H": int(num_heads), "d_h": int(head_dim)},
    exercise=(("num_tokens", "int(num_tokens)"), ("num_heads", "int(num_heads)"), ("head_dim", "int(head_dim)")),
    options=(
        Option("shared_not", N_("the same storage, no longer contiguous"),
               N_("transpose writes nothing: it swaps two strides, so reading head by head now jumps through the "
                  "token-major memory.")),
        Option("copy", N_("a copy, grouped head by head in memory"),
               N_("Only contiguous() (or an operation that writes a result) copies; transpose is a view.")),
        Option("shared_contiguous", N_("the same storage, still contiguous"),
               N_("Only when a swapped dimension has size 1 (one head or one token) is the new order still the memory "
                  "order.")),
    ),
)

GATES = (VIEW, TRANSPOSE)
