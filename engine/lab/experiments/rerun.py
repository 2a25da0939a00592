"""The Lab page's paired rerun of one comparison of an exercise, at a budget one reader's training can take.

The shipped runs (``python -m engine.lab.experiments``) train every configuration of an exercise for 1 000 steps of
batch 16 over three seeds and measure it on the whole validation split: hours on a 2-core server, and a batch whose
memory is over one training's cap (``engine.budget``). The page's rerun keeps what makes the shipped answer an
answer and shrinks the rest:

* the same pairing: for each seed, the reference (the course model) and the compared configuration start from the
  same weights (``measurement.paired_model``) and see the same batches (the trainer's generator seeded with the
  seed), so the difference of one seed owes nothing to luck of the draw that the other run did not share;
* the same seeds as the shipped runs, and the same paired test (``stats.paired_comparison``);
* a smaller budget: ``steps`` (the reader's choice) of ``batch_size`` windows, and the loss over the first
  ``val_windows`` windows of the validation split, the same windows for every run.

An exercise names its measure (``definitions.Exercise.measure``): the mean loss over the windows' positions, or,
for the runs without the causal mask, the loss at the last position, the only one where a model without the
mask cannot read its target and the one generation uses.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from engine import budget as caps
from engine.corpus import Corpus
from engine.lab.experiments.definitions import EXERCISE_BUDGET, EXERCISE_RUNS, EXERCISES, Budget
from engine.lab.experiments.measurement import paired_model, split_loss
from engine.lab.experiments.stats import paired_comparison
from engine.lab.models import corpus_fingerprint
from engine.lab.results import ExercisesFile, PairedDifference
from engine.lab.settings import Problem
from engine.presets import PRESETS, preset
from engine.training import Callbacks, train

#: The page's paired rerun (:func:`paired_rerun`): batch 4, the course preset's own, whose estimated memory stays
#: under one training's cap (batch 16, the shipped runs', is over it); the steps a reader may choose, and the default
#: (docs/architecture.md: with 300, neither of two comparisons told a difference; with 500, six of eight reached the
#: shipped verdict); the shipped runs' seeds (so each seed starts from the shipped runs' weights); the validation
#: windows measured; and the block_size every run trains at (every run is the course model with a few fields
#: changed, none of them its block_size).
RERUN_BATCH = PRESETS["course"].training.batch_size
RERUN_STEPS = (100, 1000)
RERUN_DEFAULT_STEPS = 500
RERUN_SEEDS = (1, 2, 3)
RERUN_VAL_WINDOWS = 512
#: Batches of each split in the trainer's two evaluations of a rerun's run (its start and end).
RERUN_EVAL_ITERS = 5
RERUN_BLOCK_SIZE = preset("course").block_size


@dataclass(frozen=True)
class RerunRun:
    """One training of a paired rerun and its losses on the rerun's validation windows (nats).

    Attributes:
        key: configuration (``definitions.EXERCISE_RUNS``); seed: weights and batch order.
        val_loss: mean over every position of every window; last_position_loss: at the window's last position;
        other_positions_loss: mean over the positions before it.
        history: the trainer's evaluations, ``(step, train_loss, val_loss)`` on a few batches.
        train_wall_s: seconds of training (evaluation excluded).
    """

    key: str
    seed: int
    val_loss: float
    last_position_loss: float
    other_positions_loss: float
    history: tuple[tuple[int, float, float], ...]
    train_wall_s: float

    def measured(self, measure: str) -> float:
        """The loss an exercise's comparison reads: ``"val_loss"`` or ``"last_position"`` (nats).

        Raises:
            ValueError: for another measure.
        """
        if measure == "val_loss":
            return self.val_loss
        if measure == "last_position":
            return self.last_position_loss
        raise ValueError(f"unknown measure {measure!r}; choose 'val_loss' or 'last_position'")


@dataclass(frozen=True)
class PairedRerun:
    """A finished paired rerun: its settings, its runs (seed by seed, the reference first) and the comparison.

    Attributes:
        exercise, reference, key: the exercise, its reference run and the configuration compared with it.
        measure: what ``comparison`` compares (``definitions.Exercise.measure``).
        steps, batch_size: the budget; planned_seeds: the seeds asked for; seeds: those whose two runs finished (all
            of them unless the rerun was stopped); val_windows: windows of block_size measured per run.
        corpus: the training text's name.
        runs: ``2 * len(seeds)`` runs; comparison: ``key`` minus ``reference`` per seed (negative: lower).
    """

    exercise: str
    reference: str
    key: str
    measure: str
    steps: int
    batch_size: int
    seeds: tuple[int, ...]
    val_windows: int
    corpus: str
    runs: tuple[RerunRun, ...]
    comparison: PairedDifference
    planned_seeds: tuple[int, ...] = ()

    @property
    def complete(self) -> bool:
        """True when every planned seed's two runs finished."""
        return self.seeds == self.planned_seeds

    def run(self, key: str, seed: int) -> RerunRun:
        """The run of configuration ``key`` with ``seed``.

        Raises:
            KeyError: when the rerun has no such run.
        """
        for r in self.runs:
            if r.key == key and r.seed == seed:
                return r
        raise KeyError(f"no run {key!r} with seed {seed}")

    def mean_of(self, key: str, field: str) -> float:
        """The mean over the finished seeds of one loss ``field`` of :class:`RerunRun` (nats) for configuration
        ``key``."""
        values = [getattr(r, field) for r in self.runs if r.key == key]
        return sum(values) / len(values)


def comparable(exercise: str) -> tuple[str, ...]:
    """The configurations of ``exercise`` a rerun may compare with its reference, in the exercise's order.

    Raises:
        KeyError: for an unknown exercise.
    """
    ex = EXERCISES[exercise]
    return tuple(k for k in ex.runs if k != ex.reference)


def paired_rerun(
    exercise: str,
    key: str,
    corpus: Corpus,
    budget: Budget,
    seeds: Sequence[int],
    val_windows: int,
    on_run_start: Callable[[int, str, int], None] | None = None,
    callbacks: Callbacks | None = None,
    stop: threading.Event | Callable[[], bool] | None = None,
    run_cache: dict | None = None,
) -> PairedRerun | None:
    """Trains the reference of ``exercise`` and configuration ``key`` once per seed, paired, and compares them.

    Args:
        exercise: a key of ``definitions.EXERCISES``.
        key: one of :func:`comparable` (exercise).
        corpus: the training text; its validation split must hold more than block_size + 1 tokens.
        budget: steps, batch and schedule of every run.
        seeds: two or more for a verdict (one gives a difference without one).
        val_windows: the first this many windows of block_size of the validation split are measured (fewer when
            the split is shorter); the same windows for every run.
        on_run_start: called as ``on_run_start(index, run key, steps)`` before each of the ``2 * len(seeds)`` runs.
        callbacks: passed to every ``train`` call (progress).
        stop: an Event or a callable; when set (True) the current run stops, and the rerun is returned with the
            seeds whose two runs had finished (``complete`` False), or None when no seed had.
        run_cache: a dict-like reused across calls, keyed by (configuration, seed, budget, corpus fingerprint,
            val_windows): a reference run that another comparison of the same settings trained is reused.

    Returns:
        The :class:`PairedRerun`, or None when stopped before any seed's two runs finished.

    Raises:
        KeyError: for an unknown exercise or a key it cannot compare.
        ValueError: for no seed, val_windows < 1, or a text too short for block_size.

    Source: the pairing of ``python -m engine.lab.experiments`` (``measurement.measure_task``) at a smaller budget.
    """
    if key not in comparable(exercise):
        raise KeyError(f"exercise {exercise!r} compares {comparable(exercise)}, not {key!r}")
    if not seeds or val_windows < 1:
        raise ValueError(f"a rerun needs at least one seed and one window; got seeds {list(seeds)}, "
                         f"val_windows {val_windows}")
    ex = EXERCISES[exercise]
    base = preset("course")
    reference = dataclasses.replace(base, vocab_size=corpus.vocab_size)
    block = reference.block_size
    ids = corpus.val_ids[: val_windows * block + 1]  # (val_windows * T + 1,): the first windows and their targets
    fingerprint = corpus_fingerprint(corpus)
    should_stop = stop.is_set if isinstance(stop, threading.Event) else stop
    runs: list[RerunRun] = []
    windows = 0
    for index, (seed, run_key) in enumerate((s, k) for s in seeds for k in (ex.reference, key)):
        if should_stop is not None and should_stop():
            break
        if on_run_start is not None:
            on_run_start(index, run_key, budget.steps)
        cache_key = (run_key, seed, budget, fingerprint, val_windows)
        if run_cache is not None and cache_key in run_cache:
            run, windows = run_cache[cache_key]
            runs.append(run)
            continue
        config = dataclasses.replace(EXERCISE_RUNS[run_key].config(base), vocab_size=corpus.vocab_size)
        model, _own = paired_model(config, seed, reference)
        t0 = time.perf_counter()
        result = train(model, corpus, budget.train_config(seed), callbacks=callbacks, stop=stop)
        wall_s = time.perf_counter() - t0
        if result.stopped:
            break
        val = split_loss(result.model, ids)
        windows = val.windows
        before_last = val.by_position[:-1]
        history = tuple((int(s), float(t), float(v)) for s, t, v in zip(
            result.history["step"], result.history["train_loss"], result.history["val_loss"], strict=True))
        run = RerunRun(run_key, int(seed), val.mean, val.by_position[-1],
                       sum(before_last) / max(1, len(before_last)), history, wall_s)
        if run_cache is not None:
            run_cache[cache_key] = (run, windows)
        runs.append(run)
    done = tuple(s for s in seeds if sum(r.seed == s for r in runs) == 2)  # seeds whose two runs finished
    if not done:
        return None
    runs = [r for r in runs if r.seed in done]
    losses = {k: {r.seed: r.measured(ex.measure) for r in runs if r.key == k} for k in (ex.reference, key)}
    comparison = paired_comparison(ex.reference, key, losses[ex.reference], losses[key])
    return PairedRerun(exercise, ex.reference, key, ex.measure, budget.steps, budget.batch_size, done, windows,
                       corpus.name, tuple(runs), comparison, tuple(seeds))


def rerun_budget(steps: int) -> Budget:
    """The training of every run of a paired rerun: ``steps`` of :data:`RERUN_BATCH` windows, the exercises' peak
    learning rate and floor (``EXERCISE_BUDGET``), a tenth of the steps of warm-up, and the trainer's evaluations
    only at the start and the end (the rerun measures its runs on :data:`RERUN_VAL_WINDOWS` windows).

    Raises:
        ValueError: for steps outside :data:`RERUN_STEPS`.
    """
    if not RERUN_STEPS[0] <= steps <= RERUN_STEPS[1]:
        raise ValueError(f"a rerun takes {RERUN_STEPS[0]} to {RERUN_STEPS[1]} steps, got {steps}")
    return dataclasses.replace(EXERCISE_BUDGET, steps=steps, batch_size=RERUN_BATCH, warmup_steps=steps // 10,
                               eval_interval=steps, eval_iters=RERUN_EVAL_ITERS)



@dataclass(frozen=True)
class RerunPlan:
    """A paired rerun the page may start, or the reasons it may not.

    Attributes:
        budget: every run's training (:func:`rerun_budget`).
        runs: trainings in the job, two per seed of :data:`RERUN_SEEDS`.
        memory_bytes: the largest run's estimated memory (None when a size alone is refused).
        seconds: every run's estimated training and measurement added up, on a server that is not busy (None
            likewise): not an upper bound.
        problems: empty when the rerun may start; "memory" for a run over one training's cap. The time is no
            refusal: a job stops at its cap (``engine.caps.MAX_JOB_WALL_S``) and keeps the seeds it finished.
    """

    budget: Budget
    runs: int
    memory_bytes: float | None
    seconds: float | None
    problems: tuple[Problem, ...]

    @property
    def ok(self) -> bool:
        """True when the rerun may start."""
        return not self.problems

    @property
    def over_cap(self) -> bool:
        """True when the estimate is over one job's time cap (the rerun may then stop before its last seed)."""
        return self.seconds is not None and self.seconds > caps.MAX_JOB_WALL_S


def plan_rerun(exercise: str, key: str, corpus: Corpus | None, steps: int) -> RerunPlan:
    """Checks the page's paired rerun of ``key`` against the reference of ``exercise`` before it starts: a text that
    holds the course model's block_size, each run under one training's memory cap; and estimates its time.

    Args:
        exercise, key: a key of ``definitions.EXERCISES`` and a configuration it compares.
        corpus: the training text, or None.
        steps: each run's steps, in :data:`RERUN_STEPS`.

    Raises:
        KeyError: for an unknown exercise or configuration; ValueError: for steps outside :data:`RERUN_STEPS`.
    """
    plan = rerun_budget(steps)
    reference = EXERCISES[exercise].reference
    if key not in EXERCISES[exercise].runs or key == reference:
        raise KeyError(f"exercise {exercise!r} does not compare {key!r}")
    runs = 2 * len(RERUN_SEEDS)
    if corpus is None:
        return RerunPlan(plan, runs, None, None, (Problem("no_corpus"),))
    problems: list[Problem] = []
    if RERUN_BLOCK_SIZE > corpus.max_block_size:
        problems.append(Problem("block_size", RERUN_BLOCK_SIZE, corpus.max_block_size))
    memory, seconds = 0.0, 0.0
    for run_key in (reference, key):
        config = dataclasses.replace(EXERCISE_RUNS[run_key].config(), vocab_size=corpus.vocab_size)
        estimate, refusals = caps.training_refusals(config, plan.batch_size, steps, plan.eval_interval,
                                                    plan.eval_iters)
        problems += [Problem(r.key, r.value, r.limit) for r in refusals
                     if r.key != "time" and Problem(r.key, r.value, r.limit) not in problems]
        if estimate is None:
            return RerunPlan(plan, runs, None, None, tuple(problems))
        memory = max(memory, estimate.memory_bytes)
        measuring = caps.estimate(config, RERUN_VAL_WINDOWS, 1).step_flops / 3 / caps.FLOPS_PER_S  # forward only
        seconds += (estimate.seconds + measuring) * len(RERUN_SEEDS)
    return RerunPlan(plan, runs, memory, seconds, tuple(problems))


def shipped_comparison(data: ExercisesFile, exercise: str, key: str) -> PairedDifference | None:
    """The shipped runs' paired comparison of ``key`` with the exercise's reference (``data``:
    ``engine.lab.results.read_exercises``), on the measure the rerun uses (``Exercise.measure``): the file's own
    comparison for the mean loss, computed from the runs' last-position losses for ``"last_position"``; None when
    the file has no such pair."""
    ex = EXERCISES[exercise]
    if ex.measure == "val_loss":
        summary = data.exercise(exercise)
        return None if summary is None else next((c for c in summary.comparisons if c.b == key), None)
    ref = {r.seed: r.val_loss_by_position[-1] for r in data.runs_of(ex.reference)}
    run = {r.seed: r.val_loss_by_position[-1] for r in data.runs_of(key)}
    if not set(ref) & set(run):
        return None
    return paired_comparison(ex.reference, key, ref, run)
