"""Page 4's gates: what a kept cell is worth, what the rows of dropped-out weights sum to, where dropout acts."""

from __future__ import annotations

from engine import chapter
from engine.sections import dropout as sections
from ui.i18n import N_
from ui.questions import CHOICE, NUMBER, ORDER, Gate, Option

P = chapter.DROPOUT_P


KEPT = Gate(
    id="do_kept", page="dropout", kind=NUMBER,
    question=N_("dropout(ones(6, 6)) in train() mode at p = {p}: about half the cells become 0. What value does a "
                "cell that is kept hold?"),
    answer=sections.kept_value, defaults=lambda: {"seed": chapter.DROPOUT_SEED}, words=lambda seed: {"p": P},
    tolerance=0.01, decimals=1, exercise=(("seed", "int(seed)"),),
    note=N_("The survivors are multiplied by 1/(1 − p), so that each cell keeps its expected value: 1 on average, "
            "as without dropout."),
)


ROW_SUMS = Gate(
    id="do_row_sums", page="dropout", kind=ORDER,
    question=N_("Each row of the causal weights sums to 1. After dropout at p = {p} (seed {seed}), what do the six "
                "rows sum to?"),
    answer=sections.row_sums_kind, defaults=lambda: {"seed": chapter.DROPOUT_SEED}, exercise=(("seed", "int(seed)"),),
    words=lambda seed: {"p": P, "seed": str(seed), "one_minus_p": 1 - P}, decimals=1,
    options=(
        Option("all_one", N_("still 1 each: dropout keeps the rows normalised"),
               N_("Dropout acts after the softmax: nothing renormalises the rows again.")),
        Option("one_minus_p", N_("about 1 − p = {one_minus_p} each: dropout removes that share of the weight"),
               N_("That forgets the factor 1/(1 − p) on the survivors, which gives the weight back on average.")),
        Option("vary", N_("they differ from row to row, some above 1: 1 only on average over many masks"),
               N_("Each row keeps a random subset of its weights, doubled: its sum depends on which ones survived.")),
    ),
)


WHERE = Gate(
    id="do_where", page="dropout", kind=CHOICE,
    question=N_("The chapter's CausalAttention has a dropout layer (p = {p} here). Where does it act?"),
    answer=sections.where_dropout, defaults=lambda: {"p": P, "seed": chapter.DROPOUT_SEED},
    exercise=(("p", "float(layer_p)"), ("seed", "chapter.DROPOUT_SEED")),
    words=lambda p, seed: {"p": float(p)}, decimals=1,
    options=(
        Option("weights", N_("on attn_weights, after the softmax"),
               N_("In train() it zeroes weights and scales the others by 1/(1 − p): a row no longer sums to 1; in "
                  "eval() it does nothing.")),
        Option("scores", N_("on attn_scores, before the softmax"),
               N_("A score set to 0 is not a weight of 0, and the softmax would renormalise the row: the rows here "
                  "do not sum to 1 in train().")),
        Option("context", N_("on the context vectors, after the weighted sum"),
               N_("The weights themselves change in train(): zeros appear in the attention matrix.")),
    ),
)

GATES = (KEPT, ROW_SUMS, WHERE)
