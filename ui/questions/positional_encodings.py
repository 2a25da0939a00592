"""Page 7's gates: how the difference without positions changes with depth, and which encoding stays blind to
order with one layer."""

from __future__ import annotations

from engine import chapter
from engine.positions import ALIBI, LEARNED, NONE, ROPE, SINUSOIDAL
from engine.sections import positional_encodings as sections
from ui.i18n import N_
from ui.questions import ORDER, Gate, Option, encoding_options

#: Heads of page 7's untrained models.
N_HEAD = 4


def first_sweep() -> sections.PermutationSweep:
    """The permutation sweep of a first visit (n_embd 32, seed 0), as page 7 computes it."""
    return sections.permutation_by_layers(n_embd=32, n_head=N_HEAD, seed=0)


#: The sweep in the notebook: its recipe's call, with the reader's n_embd and seed.
SWEEP_EXERCISE = (("sweep", "permutation_by_layers(n_embd=n_embd,n_head=4,seed=seed)"),)
_LINES = {"line": chapter.LESSON_LINE, "permuted": chapter.PERMUTED_LINE}

DEPTH = Gate(
    id="pe_depth", page="positional_encodings", kind=ORDER,
    question=N_("No position information at all (none): how does the difference between “{line}” and “{permuted}” "
                "at the last position change from 1 layer to 2?"),
    answer=sections.none_by_depth, defaults=lambda: {"sweep": first_sweep()}, words=lambda **_controls: dict(_LINES),
    recall=False, exercise=SWEEP_EXERCISE,
    options=(
        Option("never", N_("it stays 0 at every depth: attention cannot see order"),
               N_("True of one layer only: from the second layer on, each position has mixed a different number of "
                  "tokens through the causal mask, and that count carries order.")),
        Option("from_two", N_("float rounding at 1 layer, clearly non-zero from 2 layers"),
               N_("One layer's last position averages the same set of tokens in both lines; the second layer reads "
                  "outputs that already depend on how many tokens each position could see.")),
        Option("from_one", N_("clearly non-zero already at 1 layer"),
               N_("At the last position one causal layer sees every token of both lines: the same set, in another "
                  "order, gives the same weighted sum.")),
    ),
)


BLIND_OPTIONS = encoding_options({
    NONE: (N_("none"), N_("Without positions the last position's weighted sum is the same sum in another order.")),
    LEARNED: (N_("learned absolute"),
              N_("It adds a per-position vector to each token: the permuted line gets other sums, even untrained.")),
    SINUSOIDAL: (N_("sinusoidal"), N_("Like the learned table, but fixed: each position adds its own sines and "
                                      "cosines.")),
    ROPE: (N_("RoPE"),
           N_("RoPE adds nothing to the tokens, but it rotates q and k by their positions: the scores depend on "
              "distances, which the permutation changes.")),
    ALIBI: (N_("ALiBi"),
            N_("ALiBi adds nothing to the tokens either, but it lowers each score by a penalty that grows with the "
               "distance between query and key: the permutation moves the characters, so the penalties change.")),
})

BLIND = Gate(
    id="pe_blind", page="positional_encodings", kind=ORDER,
    question=N_("One layer, “{line}” against “{permuted}”: which encoding leaves the last position's output the same "
                "up to float rounding?"),
    answer=sections.blind_encoding, defaults=lambda: {"sweep": first_sweep()}, words=lambda **_controls: dict(_LINES),
    recall=False, exercise=SWEEP_EXERCISE,
    options=BLIND_OPTIONS,
)

GATES = (DEPTH, BLIND)
