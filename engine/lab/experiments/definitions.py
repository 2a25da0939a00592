"""What the experiments train: the runs, the experiments that compare them, the budget, the order.

Two sets live here:

* :data:`EXPERIMENTS` (and :data:`PRESET_EXPERIMENTS`): the older sets (one seed each, no shared starting
  weights), and the dropout runs behind the shipped ``assets/lab_dropout.json``
  (format ``lab-experiments/3``);
* :data:`EXERCISES`: the lesson's exercises 2 and 3 at the budget :data:`EXERCISE_BUDGET`, plus the runs
  without the causal mask, trained by ``python -m engine.lab.experiments`` into
  ``assets/lab_exercises.json`` (format ``lab-exercises/1``).

Every run is the course's GPT (``engine.presets.preset("course")``) with a few fields replaced.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from engine.gpt import GPTConfig
from engine.positions import ALIBI, ENCODINGS, LEARNED, NONE, ROPE, SINUSOIDAL
from engine.presets import preset
from engine.training import TrainConfig


@dataclass(frozen=True)
class Run:
    """One training of an experiment: a stable key and the fields changed from the course preset."""

    key: str
    overrides: tuple[tuple[str, object], ...] = ()

    def config(self, base: GPTConfig | None = None) -> GPTConfig:
        """The run's GPTConfig: ``base`` (default: the "course" preset) with the overrides applied.

        Raises:
            ValueError: if an override is not a valid GPTConfig value.
        """
        return dataclasses.replace(base or preset("course"), **dict(self.overrides))


@dataclass(frozen=True)
class Experiment:
    """A named set of runs compared on validation loss."""

    name: str
    runs: tuple[Run, ...]


#: The course's run in each experiment is the one without overrides.
EXPERIMENTS: dict[str, Experiment] = {
    "heads": Experiment("heads", (
        Run("heads_1", (("n_head", 1),)),
        Run("heads_4"),
        Run("heads_8", (("n_head", 8),)),
    )),
    # one run per encoding, named by its key; the course's (learned) changes nothing
    "positions": Experiment("positions", tuple(
        Run(enc.key, () if enc == LEARNED else (("pos_encoding", enc.key),)) for enc in ENCODINGS
    )),
    "causal": Experiment("causal", (
        Run("causal"),
        Run("no_mask", (("causal", False),)),
        Run("no_mask_rope", (("causal", False), ("pos_encoding", ROPE.key))),
    )),
}

#: Experiments that chose a preset rather than illustrate the lesson: not among the Lab's section-6
#: experiments, shipped in their own results file. Both rates are set explicitly in every run, so a run
#: means the same whatever the course preset's own dropout is.
PRESET_EXPERIMENTS: dict[str, Experiment] = {
    "dropout": Experiment("dropout", (
        Run("dropout_0", (("attn_dropout", 0.0), ("resid_dropout", 0.0))),
        Run("dropout_resid", (("attn_dropout", 0.0), ("resid_dropout", 0.1))),
        Run("dropout_both", (("attn_dropout", 0.1), ("resid_dropout", 0.1))),
    )),
}
#: Every experiment :func:`engine.lab.experiments.run_experiment` knows.
ALL_EXPERIMENTS: dict[str, Experiment] = {**EXPERIMENTS, **PRESET_EXPERIMENTS}


@dataclass(frozen=True)
class Budget:
    """The training every run of the exercises gets: steps, batch, learning-rate schedule, evaluation cadence.

    The schedule is the project's one (``engine.training.TrainConfig``: linear warm-up, cosine decay to
    ``learning_rate * min_lr_ratio``), the course preset's settings at 1 000 steps, the lesson's count.

    Raises:
        ValueError: for values ``TrainConfig`` refuses (see :meth:`train_config`).
    """

    steps: int = 1000  # optimizer steps (lesson 000/002, exercise 2)
    batch_size: int = 16  # windows of block_size characters per step
    learning_rate: float = 2e-3  # peak, after warm-up
    warmup_steps: int = 100
    min_lr_ratio: float = 0.1
    eval_interval: int = 100  # points of the loss curve (the trainer's estimate on eval_iters batches)
    eval_iters: int = 10

    def __post_init__(self) -> None:
        self.train_config(0)

    def train_config(self, seed: int, device: str | None = None) -> TrainConfig:
        """The ``TrainConfig`` of one run with this budget and ``seed`` (weights and batch order)."""
        return TrainConfig(steps=self.steps, batch_size=self.batch_size, learning_rate=self.learning_rate,
                           warmup_steps=self.warmup_steps, min_lr_ratio=self.min_lr_ratio,
                           eval_interval=min(self.eval_interval, self.steps), eval_iters=self.eval_iters,
                           seed=seed, device=device)

    def to_dict(self) -> dict:
        """The fields as a JSON-ready dict."""
        return dataclasses.asdict(self)


#: The exercises' budget: 1 000 steps of 16 windows of 128 characters (2.0 M training tokens, about 0.6 of one
#: pass over the Tang training split), peak learning rate 2e-3, dropout 0 (the course preset's).
EXERCISE_BUDGET = Budget()

#: Every distinct configuration the exercises train, by key. ``course`` is the course's model (4 heads, learned
#: positions, causal mask): the reference of every exercise, trained once per seed.
EXERCISE_RUNS: dict[str, Run] = {run.key: run for run in (
    Run("course"),
    Run("heads_1", (("n_head", 1),)),
    Run("heads_8", (("n_head", 8),)),
    Run("pos_none", (("pos_encoding", NONE.key),)),
    Run("pos_sinusoidal", (("pos_encoding", SINUSOIDAL.key),)),
    Run("pos_rope", (("pos_encoding", ROPE.key),)),
    Run("pos_alibi", (("pos_encoding", ALIBI.key),)),
    Run("no_mask_learned", (("causal", False),)),
    Run("no_mask_rope", (("causal", False), ("pos_encoding", ROPE.key))),
)}


@dataclass(frozen=True)
class Exercise:
    """Runs compared with a reference run, paired by seed.

    Attributes:
        name: stable key ("heads", "positions", "no_mask").
        runs: keys of :data:`EXERCISE_RUNS`, in the order a table lists them; ``reference`` among them.
        reference: the run every other one is compared with.
        measure: the loss a rerun's paired comparison reads (``rerun.RerunRun.measured``): ``"val_loss"``, the
            mean over the window's positions, or ``"last_position"``, where a model without the causal mask
            cannot read its target.
    """

    name: str
    runs: tuple[str, ...]
    reference: str = "course"
    measure: str = "val_loss"

    def __post_init__(self) -> None:
        if self.reference not in self.runs or not set(self.runs) <= set(EXERCISE_RUNS):
            raise ValueError(f"exercise {self.name!r}: runs must be keys of EXERCISE_RUNS and hold the reference")
        if self.measure not in ("val_loss", "last_position"):
            raise ValueError(f"exercise {self.name!r}: measure must be 'val_loss' or 'last_position'")


#: Lesson 000/002 exercise 2 (1, 4, 8 heads at n_embd 128), exercise 3 (position encodings, 4 heads; ALiBi, Press et al.
#: 2022, beside the lesson's four, trained later over the same seeds from the same starting weights), and the
#: course's model with the causal mask removed (learned positions and RoPE).
EXERCISES: dict[str, Exercise] = {
    "heads": Exercise("heads", ("heads_1", "course", "heads_8")),
    "positions": Exercise("positions", ("pos_none", "course", "pos_sinusoidal", "pos_rope", "pos_alibi")),
    "no_mask": Exercise("no_mask", ("course", "no_mask_learned", "no_mask_rope"), measure="last_position"),
}


@dataclass(frozen=True)
class Task:
    """One run to train: a configuration key of :data:`EXERCISE_RUNS` and a seed."""

    key: str
    seed: int

    @property
    def run_id(self) -> str:
        """The run's name in the results file, e.g. ``"heads_1@seed1"``."""
        return f"{self.key}@seed{self.seed}"


def plan(seeds: list[int] | tuple[int, ...], exercises: list[str] | tuple[str, ...] = tuple(EXERCISES)) -> list[Task]:
    """Every run of ``exercises`` over ``seeds``, each configuration once per seed, complete paired sets first.

    Exercise by exercise, seed by seed: all runs of the first exercise for the first seed, then for the second
    seed ..., then the next exercise (its reference runs are already planned). So a command stopped at any point
    leaves the most complete pairs it could.

    Raises:
        KeyError: for an unknown exercise name.
    """
    tasks: list[Task] = []
    for name in exercises:
        if name not in EXERCISES:
            raise KeyError(f"unknown exercise {name!r}; choose among {sorted(EXERCISES)}")
        for seed in seeds:
            for key in EXERCISES[name].runs:
                if Task(key, seed) not in tasks:
                    tasks.append(Task(key, seed))
    return tasks
