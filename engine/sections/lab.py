"""The Lab's section: the answers of its prediction gates, from the shipped exercise results
(``assets/lab_exercises.json``, written by ``python -m engine.lab.experiments``): 8 heads against the course's 4,
and which position encoding trains best.

The answers take the few numbers they need (:func:`heads_facts`, :func:`position_facts`), not the results file, so
the Lab's notebook, which carries the engine but not the file, runs them on the shipped numbers written out.
"""

from __future__ import annotations

from collections.abc import Mapping

from engine.lab import results
from engine.lab.experiments.definitions import EXERCISE_RUNS, EXERCISES

#: {run key: position encoding key} of the positions exercise's runs, read from their configurations (the course
#: model's is learned), so a run added there is answered by :func:`best_position`.
POSITION_RUNS = {key: EXERCISE_RUNS[key].config().pos_encoding for key in EXERCISES["positions"].runs}
#: The heads gate's options by the paired comparison's verdict (:data:`engine.lab.results.VERDICTS`), b = 8 heads.
HEADS_VERDICTS = {"b_beats_a": "down", "a_beats_b": "up", "no_detectable_difference": "same"}


def shipped() -> results.ExercisesFile | None:
    """The shipped exercise results (:data:`engine.lab.results.EXERCISES_FILE`); None when absent.

    Raises:
        ValueError: the file is damaged (:func:`engine.lab.results.read_exercises`).
    """
    return results.read_exercises(results.EXERCISES_FILE)


def _exercise(data: results.ExercisesFile | None, name: str) -> results.ExerciseSummary:
    summary = None if data is None else data.exercise(name)
    if summary is None:
        raise ValueError(f"no shipped results for the {name} exercise in {results.EXERCISES_FILE}: "
                         "run python -m engine.lab.experiments")
    return summary


def heads_facts(data: results.ExercisesFile | None) -> dict[str, object]:
    """What :func:`eight_heads` needs from the heads exercise: 8 heads (``heads_8``) against the course's 4, paired
    by seed: ``verdict`` (str), ``mean`` (float, nats, 8 heads minus 4) and ``seeds`` (int, how many pairs).

    Raises:
        ValueError: ``data`` is None or holds no heads exercise, or no ``heads_8`` pair yet.
    """
    pair = _exercise(data, "heads").comparison("heads_8")
    if pair is None:
        raise ValueError(f"no heads_8 pair in {results.EXERCISES_FILE} yet: run python -m engine.lab.experiments")
    return {"verdict": pair.verdict, "mean": float(pair.mean), "seeds": len(pair.seeds)}


def eight_heads(verdict: str, mean: float, seeds: int) -> str:
    """8 heads against the course's 4: ``down``, ``up`` or ``same`` (no difference the seeds can detect), from the
    paired comparison's ``verdict``; under two ``seeds`` no verdict can be drawn, and the answer is the sign of the
    ``mean`` difference in nats.

    Raises:
        ValueError: ``verdict`` is not one of :data:`engine.lab.results.VERDICTS`.
    """
    if verdict not in results.VERDICTS:
        raise ValueError(f"verdict must be one of {results.VERDICTS}, got {verdict!r}")
    if seeds < 2 or verdict not in HEADS_VERDICTS:
        return "down" if mean < 0 else "up"
    return HEADS_VERDICTS[verdict]


def position_facts(data: results.ExercisesFile | None) -> dict[str, object]:
    """What :func:`best_position` needs from the positions exercise: ``deltas``, {run key: mean validation loss
    minus the course model's, in nats}, the course model itself at 0.

    Raises:
        ValueError: ``data`` is None or holds no positions exercise.
    """
    return {"deltas": {"course": 0.0} | {c.b: float(c.mean) for c in _exercise(data, "positions").comparisons}}


def best_position(deltas: Mapping[str, float]) -> str:
    """The key of the position encoding (``engine.positions``) whose run has the lowest of ``deltas`` (nats against
    the course model, :func:`position_facts`).

    Raises:
        ValueError: ``deltas`` is empty or names a run that is not in the positions exercise.
    """
    unknown = set(deltas) - set(POSITION_RUNS)
    if not deltas or unknown:
        raise ValueError(f"deltas must name runs of {sorted(POSITION_RUNS)}, got {sorted(deltas)}")
    return POSITION_RUNS[min(deltas, key=deltas.get)]
