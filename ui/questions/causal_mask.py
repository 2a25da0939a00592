"""Page 3's gates: which mask gives the future exactly 0 weight, and how many rows a perturbed token changes."""

from __future__ import annotations

from engine import attention as A
from engine.sections import causal_mask as sections
from ui.i18n import N_
from ui.questions import CHOICE, NUMBER, Gate, Option


def _future_words(result: sections.TwoWays) -> dict:
    return {k: float(v) for k, v in sections.future_weights(result).items()}


FUTURE = Gate(
    id="cm_future", page="causal_mask", kind=CHOICE,
    question=N_("The mask hides the positions above the diagonal before the softmax. Which way of applying it gives "
                "the future exactly 0 weight?"),
    answer=sections.zero_future, defaults=lambda: {"result": sections.chapter_routes()}, words=_future_words,
    decimals=3, exercise=(("result", "chapter_routes()"),),
    options=(
        Option("neg_inf", N_("masked_fill with −∞"),
               N_("exp(−∞) = 0 exactly, so the future gets 0 and each row's softmax shares 1 among the past "
                  "and the token itself.")),
        Option("add_01", N_("adding the 0/1 mask (1 above the diagonal) to the scores"),
               N_("Adding 1 raises the future's scores: the future then gets more weight, not none (here {add_01} of "
                  "each row's weight on average).")),
        Option("times_tril", N_("multiplying the scores by the lower triangle (0 above the diagonal)"),
               N_("A score of 0 is not a weight of 0: exp(0) = 1, so the future keeps a share (here {times_tril} of "
                  "each row's weight on average).")),
    ),
)


LEAKAGE = Gate(
    id="cm_leakage", page="causal_mask", kind=NUMBER,
    question=N_("You add {delta} to every coordinate of “{token}” (row {row}). With the causal mask, how many of "
                "the {T} output rows change?"),
    answer=sections.changed_row_count,
    defaults=lambda: {"inputs": A.chapter_inputs(), "token_index": 2, "delta": 1.0},
    words=lambda inputs, token_index, delta: {"delta": float(delta), "token": A.CHAPTER_TOKENS[token_index],
                                              "row": int(token_index), "T": int(inputs.shape[0])},
    tolerance=0, decimals=0,
    exercise=(("inputs", "A.chapter_inputs()"), ("token_index", "A.CHAPTER_TOKENS.index(leak_token)"),
              ("delta", "float(leak_delta)")),
    note=N_("A row reads only itself and the rows before it: the perturbed token and every row after it move, none "
            "before it (and nothing at all when the perturbation is 0)."),
)

GATES = (FUTURE, LEAKAGE)
