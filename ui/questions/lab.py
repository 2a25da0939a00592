"""The Lab's gates, answered by the shipped exercise results (``assets/lab_exercises.json``): 8 heads against the
course's 4, and which position encoding trains best."""

from __future__ import annotations

from engine.positions import ALIBI, LEARNED, NONE, ROPE, SINUSOIDAL
from engine.sections.lab import best_position, eight_heads, heads_facts, position_facts, shipped
from ui.i18n import N_
from ui.questions import ORDER, Gate, Option, encoding_options


def _heads_words(mean: float, seeds: int, **_) -> dict:
    return {"seeds": seeds, "delta": mean}


def _notebook_controls(facts) -> tuple[tuple[str, str], ...]:
    """A Lab gate's exercise controls: the shipped numbers its answer takes, written as Python literals (the
    notebook carries the engine, not the results file); none, and so no exercise, when the file is absent or
    damaged."""
    try:
        return tuple((name, repr(value)) for name, value in facts(shipped()).items())
    except ValueError:
        return ()


HEADS = Gate(
    id="lab_heads", page="lab", kind=ORDER,
    question=N_("The shipped runs train the course's GPT with 4 heads and with 8 ({seeds} seeds each). With 8 heads, "
                "the validation loss…"),
    answer=eight_heads, defaults=lambda: heads_facts(shipped()), words=_heads_words, decimals=3,
    exercise=_notebook_controls(heads_facts),
    options=(
        Option("down", N_("goes down beyond the seeds' spread"),
               N_("More heads split the same n_embd into smaller heads: the model has the same parameters, and "
                  "here the change ({delta} nats) says whether it helped.")),
        Option("up", N_("goes up beyond the seeds' spread"),
               N_("Smaller heads see less each; whether that costs more than several views gain is what the paired "
                  "seeds measure (here {delta} nats).")),
        Option("same", N_("does not change more than the seeds' spread"),
               N_("The same parameters, split differently: a difference of {delta} nats, which these seeds cannot "
                  "tell from noise.")),
    ),
)


POSITIONS = Gate(
    id="lab_positions", page="lab", kind=ORDER,
    question=N_("In the shipped runs, which position encoding gives the lowest validation loss?"),
    answer=best_position, defaults=lambda: position_facts(shipped()), exercise=_notebook_controls(position_facts),
    options=encoding_options({
        NONE: (N_("none"), N_("Without positions the model gets order only through the causal mask (page 7).")),
        LEARNED: (N_("learned absolute (the course's)"),
                  N_("A learned table must learn each position's vector from the data it sees.")),
        SINUSOIDAL: (N_("sinusoidal"),
                     N_("Fixed sines and cosines are added to the tokens, in the same n_embd coordinates as the "
                        "characters.")),
        ROPE: (N_("RoPE"),
               N_("RoPE adds nothing to the tokens: it rotates q and k, so a score depends on the distance between "
                  "two characters.")),
        ALIBI: (N_("ALiBi"),
                N_("ALiBi adds nothing to the tokens either: each head subtracts from a score a penalty that grows "
                   "with the distance between the two characters.")),
    }),
)

GATES = (HEADS, POSITIONS)
#: The gate asked before each exercise's shipped answer, by exercise name.
BY_EXERCISE = {"heads": HEADS, "positions": POSITIONS}
#: The facts each exercise's gate takes from the shipped results, by exercise name.
FACTS = {"heads": heads_facts, "positions": position_facts}
