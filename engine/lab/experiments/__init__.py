"""The lesson's training experiments (lesson 000/002, exercises 2 and 3), and the command that trains them.

* :mod:`~engine.lab.experiments.definitions`: the runs, the experiments that compare them, the budget, the
  order in which the command trains them;
* :mod:`~engine.lab.experiments.measurement`: training one run; its loss over the whole validation split and
  by position; samples;
* :mod:`~engine.lab.experiments.stats`: paired comparisons over seeds (and the older sets' mean/std screen);
* :mod:`~engine.lab.experiments.store`: the results file, written atomically after every run, read to resume;
* :mod:`~engine.lab.experiments.workers`: the worker processes, one per run, ``--jobs`` at a time;
* :mod:`~engine.lab.experiments.rerun`: the Lab page's paired rerun of one comparison of an exercise, at a
  budget one reader's training can take (run in the background by ``engine.lab.jobs.PairedRerunJob``);
* ``__main__``: ``python -m engine.lab.experiments`` (``--help``).

Each module imports only those listed before it. The exercises (:data:`EXERCISES`):

* **heads** (exercise 2): the course's GPT (n_embd 128) with 1, 4 and 8 heads. The parameter shapes do not
  depend on the head count, so the runs of a seed start from identical weights and differ only in how the 128
  dimensions are cut into heads;
* **positions** (exercise 3): none, GPT-2's learned table, the fixed sinusoidal table (Vaswani et al., 2017),
  RoPE (Su et al., 2021), 4 heads;
* **no_mask**: the course's model without the causal mask, with learned positions and with RoPE. Every
  position then sees its own target, the next character; the loss by position shows the copy everywhere but
  at the last position, the only one generation uses.

The files' names and formats, and their readers, are ``engine.lab.results``'s (re-exported here for the
callers of the older sets). The older sets (:data:`EXPERIMENTS`, the dropout runs) are trained by
:func:`run_experiment`; the dropout runs are shipped in ``lab_dropout.json``.
Nothing here holds a sentence for the reader: results are data and stable keys.
"""

from engine.lab.experiments.definitions import (
    ALL_EXPERIMENTS,
    EXERCISE_BUDGET,
    EXERCISE_RUNS,
    EXERCISES,
    EXPERIMENTS,
    PRESET_EXPERIMENTS,
    Budget,
    Exercise,
    Experiment,
    Run,
    Task,
    plan,
)
from engine.lab.experiments.measurement import (
    FIXED_EVAL_BATCHES,
    SAMPLE_CHARS,
    SplitLoss,
    loss_by_position,
    measure_task,
    paired_model,
    run_experiment,
    split_loss,
    train_run,
)
from engine.lab.experiments.stats import (
    NOISE_RULE,
    compare_runs,
    comparison_to_dict,
    mean_std,
    paired_comparison,
    summarize_seeds,
)
from engine.lab.experiments.store import EXERCISES_FILE, EXERCISES_FORMAT
from engine.lab.results import DROPOUT_RESULTS_FILE, READABLE_FORMATS, RESULTS_FORMAT, load_results

__all__ = [
    "ALL_EXPERIMENTS", "DROPOUT_RESULTS_FILE", "EXERCISES", "EXERCISES_FILE", "EXERCISES_FORMAT", "EXERCISE_BUDGET",
    "EXERCISE_RUNS", "EXPERIMENTS", "FIXED_EVAL_BATCHES", "NOISE_RULE", "PRESET_EXPERIMENTS", "READABLE_FORMATS",
    "RESULTS_FORMAT", "SAMPLE_CHARS", "Budget", "Exercise", "Experiment", "comparison_to_dict", "Run",
    "SplitLoss", "Task", "compare_runs", "load_results", "loss_by_position", "mean_std", "measure_task",
    "paired_comparison", "paired_model", "plan", "run_experiment", "split_loss", "summarize_seeds", "train_run",
]
