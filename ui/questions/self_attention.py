"""Page 1's gates: the query's own softmax weight, and which softmax survives a large score scale."""

from __future__ import annotations

from engine import attention as A
from engine.sections import self_attention as sections
from ui.i18n import N_
from ui.questions import CHOICE, NUMBER, Gate, Option

TOKENS = A.CHAPTER_TOKENS


SELF_WEIGHT = Gate(
    id="sa_self_weight", page="self_attention", kind=NUMBER,
    question=N_("After the softmax, what weight does the query “{token}” give to itself? The six weights sum "
                "to 1."),
    answer=sections.self_weight,
    defaults=lambda: {"inputs": A.chapter_inputs(), "q": 1},
    words=lambda inputs, q: {"token": TOKENS[q]},
    tolerance=0.02, decimals=4,
    exercise=(("inputs", "torch.tensor(inputs)"), ("q", "A.CHAPTER_TOKENS.index(query_token)")),
    note=N_("A token's score with itself is the squared length of its vector: large, but not always the largest; "
            "the softmax then gives it a share, never all of the weight."),
)


def _numerics_words(attn_scores, scale: float, dtype_name: str) -> dict:
    return {"scale": float(scale), "dtype": dtype_name, "top": float((attn_scores * scale).abs().max())}


SOFTMAX_OUTCOME = Gate(
    id="sa_softmax_outcome", page="self_attention", kind=CHOICE,
    question=N_("The scores are multiplied by {scale} and the softmax runs in {dtype}. What happens to the six "
                "weights?"),
    answer=sections.softmax_outcome,
    defaults=lambda: {"attn_scores": sections.query_walkthrough(A.chapter_inputs(), 1).attn_scores, "scale": 1.0,
                      "dtype_name": "float32"},
    words=_numerics_words, decimals=1,
    exercise=(("attn_scores",
               "query_walkthrough(torch.tensor(inputs),A.CHAPTER_TOKENS.index(query_token)).attn_scores"),
              ("scale", "float(scale)"), ("dtype_name", "dtype")),
    options=(
        Option("both_finite", N_("both softmaxes give six finite weights"),
               N_("True while every scaled score stays inside the range where exp is finite and not 0 (here the "
                  "largest |score| is {top}).")),
        Option("naive_breaks", N_("the naive softmax gets inf or nan, the stable one stays finite"),
               N_("exp of a large score is inf in the dtype (and of a very negative one exactly 0), so "
                  "exp(x)/sum gives inf/inf or 0/0 = nan; subtracting the largest score first keeps every exp "
                  "between 0 and 1.")),
        Option("both_break", N_("both get inf or nan"),
               N_("The stable form subtracts the largest score before exp: every exp is then at most 1 and at "
                  "least one is exactly 1, so its sum is never 0 nor inf.")),
    ),
)

GATES = (SELF_WEIGHT, SOFTMAX_OUTCOME)
