"""Page 5's gates: the qkv parameter count, and whether more heads mean more parameters."""

from __future__ import annotations

from engine import chapter
from engine.sections import multi_head as sections
from ui.i18n import N_
from ui.questions import NUMBER, ORDER, Gate, Option

QKV = Gate(
    id="mh_qkv", page="multi_head", kind=NUMBER,
    question=N_("n_embd {n_embd}, {heads} heads: how many parameters does the qkv projection hold, weights and "
                "biases together?"),
    answer=sections.qkv_count, defaults=lambda: {"n_embd": chapter.LESSON_N_EMBD, "num_heads": 4},
    words=lambda n_embd, num_heads: {"n_embd": int(n_embd), "heads": int(num_heads)},
    tolerance=0, decimals=0, exercise=(("n_embd", "int(n_embd)"), ("num_heads", "int(num_heads)")),
    note=N_("One Linear(n_embd, 3·n_embd) makes queries, keys and values for every head at once: 3·n_embd² "
            "weights and 3·n_embd biases."),
)


MORE_HEADS = Gate(
    id="mh_more_heads", page="multi_head", kind=ORDER,
    question=N_("At n_embd {n_embd}, going from 1 head to {most} heads, the qkv parameter count…"),
    answer=sections.heads_trend, defaults=lambda: {"n_embd": chapter.LESSON_N_EMBD},
    exercise=(("n_embd", "int(n_embd)"),),
    words=lambda n_embd: {"n_embd": int(n_embd), "most": int(max(sections.divisors(n_embd)))},
    options=(
        Option("same", N_("stays the same"),
               N_("The heads split the same n_embd columns into num_heads groups of head_dim = n_embd / num_heads: "
                  "more heads, smaller heads, the same matrices.")),
        Option("more", N_("grows with the heads: each head has its own matrices"),
               N_("Each head does have its own columns, but they are a slice of one n_embd-wide matrix: their "
                  "number does not change the matrix.")),
        Option("fewer", N_("shrinks: each head is smaller"),
               N_("Each head is smaller, but there are more of them: head_dim · num_heads stays n_embd.")),
    ),
)

GATES = (QKV, MORE_HEADS)
