"""Page 2's gates: which number the scores are divided by, and what the largest weight does without the scale."""

from __future__ import annotations

from engine import attention as A
from engine import chapter
from engine.sections import trainable_weights as sections
from ui.i18n import N_
from ui.questions import CHOICE, ORDER, Gate, Option


def _scale_words(inputs, seed: int, d_out: int, q: int) -> dict:
    return {"token": A.CHAPTER_TOKENS[q], "d_k": d_out, "d_in": int(inputs.shape[1])}


SCALE = Gate(
    id="tw_scale", page="trainable_weights", kind=CHOICE,
    question=N_("Before the softmax, the scores of “{token}” (d_out = {d_k}) are divided by a number. Which one?"),
    answer=sections.divisor_used,
    defaults=lambda: {"inputs": A.chapter_inputs(), "seed": chapter.TRAINABLE_SEED, "d_out": 2, "q": 1},
    words=_scale_words,
    exercise=(("inputs", "A.chapter_inputs()"), ("seed", "int(seed)"), ("d_out", "int(d_out)"),
              ("q", "A.CHAPTER_TOKENS.index(query_token)")),
    options=(
        Option("sqrt_dk", N_("√d_k = √{d_k}, the size of the keys"),
               N_("A score sums d_k products, so its variance grows like d_k; dividing by √d_k brings it back to "
                  "about 1 whatever d_k is.")),
        Option("sqrt_dmodel", N_("√d_model = √{d_in}, the size of the embeddings"),
               N_("The embeddings' size d_in does not set the spread of q·k: the keys and queries have d_k "
                  "coordinates after the projection, and only those are summed.")),
        Option("dk", N_("d_k = {d_k}"),
               N_("Dividing by d_k shrinks the spread to about 1/√d_k: for large d_k the scores all tend to 0 and the "
                  "softmax becomes uniform.")),
        Option("none", N_("nothing: the raw scores go into the softmax"),
               N_("Without a scale the scores' spread grows with d_k and the softmax saturates: one weight near 1, the "
                  "others near 0, and gradients w(1−w) near 0.")),
    ),
)


def _sweep_words(sweep: sections.DkSweep) -> dict:
    d_k = sweep.stats["d_k"]
    return {"n": int(sweep.num_keys), "first": int(d_k.iloc[0]), "last": int(d_k.iloc[-1]),
            "uniform": 1 / sweep.num_keys, "then": float(sweep.stats["w_max_unscaled"].iloc[-1])}


LARGEST_WEIGHT = Gate(
    id="tw_largest_weight", page="trainable_weights", kind=ORDER,
    question=N_("Random queries and keys, {n} keys per softmax, no scale: as d_k grows from {first} to {last}, what "
                "does the largest of the {n} weights do, on average?"),
    answer=sections.largest_weight_trend,
    defaults=lambda: {"sweep": sections.dk_sweep()},
    words=_sweep_words, decimals=2, recall=False, exercise=(("sweep", "dk_sweep()"),),
    options=(
        Option("grows", N_("it grows towards 1"),
               N_("The scores spread like √d_k, so one of them soon dominates: without the scale the softmax picks "
                  "almost one key (here {then} at d_k = {last}).")),
        Option("stays", N_("it stays near 1/{n} = {uniform}"),
               N_("That would need the scores to stay close together; their spread grows with d_k when nothing "
                  "divides them.")),
        Option("shrinks", N_("it shrinks towards 0"),
               N_("The largest of {n} weights is at least 1/{n}: it can never go below the uniform share.")),
    ),
)

GATES = (SCALE, LARGEST_WEIGHT)
