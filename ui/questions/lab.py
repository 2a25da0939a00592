"""The Lab's gates, answered by the shipped exercise results (``assets/lab_exercises.json``): 8 heads against the
course's 4, and which position encoding trains best."""

from __future__ import annotations

from engine.lab import results
from engine.lab.experiments.definitions import EXERCISE_RUNS, EXERCISES
from engine.positions import ALIBI, LEARNED, NONE, ROPE, SINUSOIDAL
from ui.i18n import N_
from ui.questions import ORDER, Gate, Option

#: {run key: position encoding key} of the positions exercise's runs, read from their configurations (the course
#: model's is learned), so a run added there is answered here.
POSITION_RUNS = {key: EXERCISE_RUNS[key].config().pos_encoding for key in EXERCISES["positions"].runs}


def shipped() -> results.ExercisesFile | None:
    """The shipped exercise results (None when absent or unreadable)."""
    return results.read_exercises(results.EXERCISES_FILE)


def _comparison(data: results.ExercisesFile, exercise: str, run: str):
    return next(c for c in data.exercise(exercise).comparisons if c.b == run)


def eight_heads(data: results.ExercisesFile) -> str:
    """8 heads against the course's 4, paired by seed: ``down``, ``up`` or ``same`` (no difference the seeds can
    detect); with fewer than two seeds, the sign of the mean difference."""
    c = _comparison(data, "heads", "heads_8")
    verdict = {"b_beats_a": "down", "a_beats_b": "up", "no_detectable_difference": "same"}.get(c.verdict)
    return verdict or ("down" if c.mean < 0 else "up")


def _heads_words(data: results.ExercisesFile) -> dict:
    c = _comparison(data, "heads", "heads_8")
    return {"seeds": len(c.seeds), "delta": float(c.mean)}


HEADS = Gate(
    id="lab_heads", page="lab", kind=ORDER,
    question=N_("The shipped runs train the course's GPT with 4 heads and with 8 ({seeds} seeds each). With 8 heads, "
                "the validation loss…"),
    answer=eight_heads, defaults=lambda: {"data": shipped()}, words=_heads_words, decimals=3,
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


def best_position(data: results.ExercisesFile) -> str:
    """The encoding with the lowest mean validation loss in the positions exercise (the course's learned = 0)."""
    deltas = {"course": 0.0} | {c.b: c.mean for c in data.exercise("positions").comparisons}
    return POSITION_RUNS[min(deltas, key=deltas.get)]


POSITIONS = Gate(
    id="lab_positions", page="lab", kind=ORDER,
    question=N_("In the shipped runs, which position encoding gives the lowest validation loss?"),
    answer=best_position, defaults=lambda: {"data": shipped()},
    options=(
        Option(NONE.key, N_("none"),
               N_("Without positions the model gets order only through the causal mask (page 7).")),
        Option(LEARNED.key, N_("learned absolute (the course's)"),
               N_("A learned table must learn each position's vector from the data it sees.")),
        Option(SINUSOIDAL.key, N_("sinusoidal"),
               N_("Fixed sines and cosines are added to the tokens, in the same n_embd coordinates as the "
                  "characters.")),
        Option(ROPE.key, N_("RoPE"),
               N_("RoPE adds nothing to the tokens: it rotates q and k, so a score depends on the distance between two "
                  "characters.")),
        Option(ALIBI.key, N_("ALiBi"),
               N_("ALiBi adds nothing to the tokens either: each head subtracts from a score a penalty that grows with "
                  "the distance between the two characters.")),
    ),
)

GATES = (HEADS, POSITIONS)
#: The gate asked before each exercise's shipped answer, by exercise name.
BY_EXERCISE = {"heads": HEADS, "positions": POSITIONS}
