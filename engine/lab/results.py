"""The Lab's shipped measurements, read once into frozen dataclasses: the exercises, dropout, its price.

Three files ship with the app:

* :data:`EXERCISES_FILE` (``assets/lab_exercises.json``, format ``lab-exercises/1``): the lesson's exercises 2
  and 3 and the runs without the causal mask, at a budget that trains below the bigram, written run by run by
  ``python -m engine.lab.experiments``, paired by seed, read by :func:`read_exercises` (section 6 of the Lab);
* :data:`DROPOUT_RESULTS_FILE` (``assets/lab_dropout.json``), written by the command's older sets in format
  ``lab-experiments/3`` (several seeds, their mean and sample standard deviation, and for each pair of runs
  the seed-noise verdict; ``lab-experiments/2``: one seed), read by :func:`read_results` and :func:`dropout_loss`;
* :data:`BENCH_TRAIN_FILE` (``assets/bench_train.json``), written by ``python -m engine.bench train``.

:func:`experiment_result` reads one experiment of a ``lab-experiments`` file (or ``run_experiment``'s dict). Every
reader checks types and finiteness and raises ``ValueError`` for a file it cannot read, so the page says
"cannot be read" instead of showing a traceback; the page then never looks at raw JSON. Nothing here imports
another module of ``engine.lab``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from engine.gpt import GPTConfig

ASSETS = Path(__file__).resolve().parents[2] / "assets"
#: The "dropout" experiment, the course preset's choice (format :data:`RESULTS_FORMAT`).
DROPOUT_RESULTS_FILE = ASSETS / "lab_dropout.json"
#: The training benchmark that measured the price of dropout (``python -m engine.bench train``).
BENCH_TRAIN_FILE = ASSETS / "bench_train.json"
#: The format of the older sets (the dropout file), and every such format read here (/2: one seed).
RESULTS_FORMAT = "lab-experiments/3"
READABLE_FORMATS = ("lab-experiments/2", RESULTS_FORMAT)
#: The dropout experiment's runs in the order the page lists them: {run key: (attn_dropout, resid_dropout)}.
DROPOUT_RUNS = {"dropout_0": (0.0, 0.0), "dropout_resid": (0.0, 0.1), "dropout_both": (0.1, 0.1)}
#: Most runs, seeds and loss values per run a file may hold (a file is bounded before it is trusted).
MAX_RUNS, MAX_SEEDS, MAX_POINTS = 16, 16, 4096


def _read_json(path: Path) -> object | None:
    """The JSON value of ``path``, None when there is no such file.

    Raises:
        ValueError: if the file is not valid UTF-8 JSON.
    """
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path}: not valid JSON ({exc})") from exc


def load_results(path: str | Path) -> dict | None:
    """The raw JSON of a results file of a :data:`READABLE_FORMATS` format; None when it does not exist.

    Raises:
        ValueError: if the file is not valid JSON or not a results file of those formats.
    """
    path = Path(path)
    data = _read_json(path)
    if data is None:
        return None
    if not isinstance(data, dict) or data.get("format") not in READABLE_FORMATS:
        raise ValueError(f"{path}: not a results file of format {READABLE_FORMATS}")
    return data


def _number(value, name: str, minimum: float = 0.0) -> float:
    """``value`` as a finite float >= ``minimum``; ValueError otherwise (bools and strings included)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < minimum:
        raise ValueError(f"{name} must be a finite number >= {minimum}, got {value!r}")
    return float(value)


def _count(value, name: str, minimum: int = 0) -> int:
    """``value`` as an int >= ``minimum``; ValueError otherwise."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return value


def _numbers(values, name: str, limit: int = MAX_POINTS) -> tuple[float, ...]:
    if not isinstance(values, list) or len(values) > limit:
        raise ValueError(f"{name} must be a list of at most {limit} numbers")
    return tuple(_number(v, name) for v in values)


@dataclass(frozen=True)
class History:
    """The loss curve of one run (its first seed): evaluation steps and the losses there, in nats."""

    step: tuple[int, ...]
    train_loss: tuple[float, ...]
    val_loss: tuple[float, ...]


@dataclass(frozen=True)
class Samples:
    """Continuations of ``prompt`` written by a run's model: greedy, and sampled at temperature 0.8, top-k 20."""

    prompt: str
    greedy: str
    sampled: str


@dataclass(frozen=True)
class RunResult:
    """One run of an experiment, its losses summarised over its seeds.

    Attributes:
        key: the run's stable key (``"heads_4"``, ``"no_mask"`` ...).
        config: the model it trained.
        params: its parameter count.
        history: the first seed's loss curve.
        train_loss: final training loss in nats, mean over the seeds.
        val_loss: validation loss in nats on the fixed windows (the same for every run and seed), mean over
            the seeds; a /2 file without fixed windows gives the trainer's last estimate.
        val_std: sample standard deviation of ``val_loss`` over the seeds; None for one seed.
        n_seeds: trainings summarised.
        last_position_loss: validation loss at the window's last position (the one generation uses), mean.
        loss_by_position: the first seed's validation loss at each position (block_size values).
        wall_s: the first seed's wall time in seconds.
        step_tokens_per_s: training tokens per second of the optimizer steps, mean over seeds (None when
            the file did not record it).
        samples: the first seed's continuations (None when absent).
    """

    key: str
    config: GPTConfig
    params: int
    history: History
    train_loss: float
    val_loss: float
    val_std: float | None
    n_seeds: int
    last_position_loss: float
    loss_by_position: tuple[float, ...]
    wall_s: float
    step_tokens_per_s: float | None
    samples: Samples | None

    @property
    def perplexity(self) -> float:
        """``exp(val_loss)``: as uncertain as a uniform choice among this many characters."""
        return math.exp(min(self.val_loss, 50.0))


@dataclass(frozen=True)
class Comparison:
    """Two runs' mean validation losses compared with the seed-noise rule of the file.

    Attributes:
        a, b: run keys; ``delta`` is mean_b − mean_a in nats.
        noise: the rule's bound in nats; None when a run has one seed.
        exceeds_noise: whether |delta| > noise; None when a run has one seed.
    """

    a: str
    b: str
    delta: float
    noise: float | None
    exceeds_noise: bool | None


@dataclass(frozen=True)
class ExperimentResult:
    """One experiment: its runs in the experiment's order, the training they shared, the comparisons.

    Attributes:
        name: the experiment's key (``"heads"``, ``"positions"``, ``"causal"``, ``"dropout"``).
        runs: one :class:`RunResult` per run.
        steps, batch_size: of every run's training.
        corpus: the training text's name.
        seeds: the seeds every run was trained with (empty when the file does not say).
        comparisons: one per pair of runs (empty for a /2 file or a live rerun).
    """

    name: str
    runs: tuple[RunResult, ...]
    steps: int
    batch_size: int
    corpus: str
    seeds: tuple[int, ...]
    comparisons: tuple[Comparison, ...]

    def run(self, key: str) -> RunResult:
        """The run of ``key``; raises KeyError for a key not in the experiment."""
        return {r.key: r for r in self.runs}[key]

    @property
    def several_seeds(self) -> bool:
        """True when some run was trained with more than one seed (the table then shows a spread)."""
        return any(r.n_seeds > 1 for r in self.runs)

    @property
    def same_params(self) -> bool:
        """True when every run has the same parameter count."""
        return len({r.params for r in self.runs}) == 1


def _run(data: Mapping) -> RunResult:
    key = str(data["key"])
    n = _count(data.get("n_seeds", 1), f"{key}: n_seeds", 1)
    if n > MAX_SEEDS:
        raise ValueError(f"{key}: more than {MAX_SEEDS} seeds")

    def mean(field: str) -> float:
        return _number(data.get(f"{field}_mean", data.get(field)), f"{key}: {field}")

    if "fixed_val_loss_mean" in data:
        val = _number(data["fixed_val_loss_mean"], f"{key}: fixed_val_loss_mean")
        std = _number(data["fixed_val_loss_std"], f"{key}: fixed_val_loss_std") if n > 1 else None
    else:
        val, std, n = _number(data.get("fixed_val_loss", data.get("final_val_loss")), f"{key}: final_val_loss"), None, 1
    h = data["history"]
    history = History(tuple(_count(s, f"{key}: step") for s in h["step"][:MAX_POINTS]),
                      _numbers(h["train_loss"], f"{key}: train_loss"), _numbers(h["val_loss"], f"{key}: val_loss"))
    if not len(history.step) == len(history.train_loss) == len(history.val_loss):
        raise ValueError(f"{key}: the loss curve's lists differ in length")
    by_position = _numbers(data["loss_by_position"], f"{key}: loss_by_position")
    if not by_position:
        raise ValueError(f"{key}: no loss by position")
    speed = data.get("step_tokens_per_s_mean", data.get("step_tokens_per_s"))
    s = data.get("samples")
    samples = None if s is None else Samples(str(s["prompt"]), str(s["greedy"]), str(s["sampled"]))
    return RunResult(key, GPTConfig.from_dict(dict(data["config"])), _count(data["params"], f"{key}: params", 1),
                     history, mean("final_train_loss"), val, std, n, mean("last_position_val_loss"), by_position,
                     _number(data["wall_s"], f"{key}: wall_s"),
                     None if speed is None else _number(speed, f"{key}: step_tokens_per_s"), samples)


def _comparison(data: Mapping) -> Comparison:
    exceeds = data["exceeds_noise"]
    if exceeds is not None and not isinstance(exceeds, bool):
        raise ValueError(f"comparison {data['a']}/{data['b']}: exceeds_noise must be true, false or null")
    noise = data["noise"]
    return Comparison(str(data["a"]), str(data["b"]), _number(data["delta_mean"], "delta_mean", -math.inf),
                      None if noise is None else _number(noise, "noise"), exceeds)


def experiment_result(data: Mapping) -> ExperimentResult:
    """One experiment of a results file (or ``engine.lab.experiments.run_experiment``'s dict).

    Raises:
        ValueError: for a missing field, a value of the wrong type, a negative or non-finite loss, more than
            :data:`MAX_RUNS` runs or :data:`MAX_SEEDS` seeds.
    """
    try:
        runs = data["runs"]
        if not isinstance(runs, list) or not 1 <= len(runs) <= MAX_RUNS:
            raise ValueError(f"an experiment holds 1 to {MAX_RUNS} runs, got {runs!r:.40}")
        seeds = [s for s in data.get("seeds", []) if s is not None][:MAX_SEEDS]
        return ExperimentResult(str(data["name"]), tuple(_run(r) for r in runs),
                                _count(data["steps"], "steps", 1), _count(data["batch_size"], "batch_size", 1),
                                str(data["corpus"]), tuple(_count(s, "seed") for s in seeds),
                                tuple(_comparison(c) for c in data.get("comparisons", [])[:MAX_RUNS ** 2]))
    except (KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"not an experiment's results ({exc!r})") from exc


@dataclass(frozen=True)
class ResultsFile:
    """A results file of ``python -m engine.lab.experiments``: what ran, where, and each experiment.

    Attributes:
        command: the command line that wrote it.
        steps, batch_size, learning_rate: every run's training (peak learning rate).
        block_size: the base model's context length.
        corpus, corpus_vocab_size: the training text's name and its vocabulary size (tokens).
        cpu, threads, device: where it ran.
        total_wall_s: the command's wall time in seconds.
        complete: False when the command was interrupted.
        experiments: in the file's order.
    """

    command: str
    steps: int
    batch_size: int
    learning_rate: float
    block_size: int
    corpus: str
    corpus_vocab_size: int
    cpu: str
    threads: int
    device: str
    total_wall_s: float
    complete: bool
    experiments: tuple[ExperimentResult, ...]

    def get(self, name: str) -> ExperimentResult | None:
        """The experiment ``name``, or None when the file lacks it."""
        return next((e for e in self.experiments if e.name == name), None)

    @property
    def seeds(self) -> tuple[int, ...]:
        """Every seed any experiment was trained with, sorted."""
        return tuple(sorted({s for e in self.experiments for s in e.seeds}))


def read_results(path: str | Path) -> ResultsFile | None:
    """Reads a results file; None when it does not exist.

    Raises:
        ValueError: if it is not a results file of a :data:`READABLE_FORMATS` format or a value is missing,
            of the wrong type, negative or not finite.
    """
    data = load_results(path)
    if data is None:
        return None
    try:
        s, machine, corpus = data["settings"], data["machine"], data["corpus"]
        experiments = data["experiments"]
        if not isinstance(experiments, dict) or len(experiments) > MAX_RUNS:
            raise ValueError(f"{path}: experiments must be a mapping of at most {MAX_RUNS}")
        return ResultsFile(str(data["command"]), _count(s["steps"], "steps", 1), _count(s["batch_size"], "batch", 1),
                           _number(s["learning_rate"], "learning_rate"),
                           _count(s["base_model"]["block_size"], "block_size", 1), str(corpus["name"]),
                           _count(corpus["vocab_size"], "vocab_size", 1), str(machine["cpu"]),
                           _count(machine["torch_threads"], "torch_threads", 1), str(machine["device"]),
                           _number(data["total_wall_s"], "total_wall_s"), data.get("complete") is True,
                           tuple(experiment_result({"name": name, **e}) for name, e in experiments.items()))
    except (KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"{path}: not an experiments results file ({exc!r})") from exc


@dataclass(frozen=True)
class DropoutPrice:
    """What dropout costs in training speed, from the shipped training benchmark (one machine, one run).

    Attributes:
        cpu: the benchmark machine's CPU model.
        batch_size, block_size: of the timed course-preset steps.
        both_on, attn_off, both_off: tokens/s with attention and residual dropout 0.1, with attention
            dropout 0 (residual 0.1), with both 0.
        speedup: ((T, how many times faster a step is with attention dropout off, residual kept), ...) for
            each timed sequence length T, in increasing T.
    """

    cpu: str
    batch_size: int
    block_size: int
    both_on: float
    attn_off: float
    both_off: float
    speedup: tuple[tuple[int, float], ...]

    def speedup_at(self, seq_len: int) -> float | None:
        """The speed-up at sequence length ``seq_len``, or None when it was not timed."""
        return dict(self.speedup).get(seq_len)


#: The dropout rate of the training benchmark's "on" rows that :func:`dropout_price` reads.
PRICE_DROPOUT = 0.1


def dropout_price(path: Path | str = BENCH_TRAIN_FILE) -> DropoutPrice | None:
    """Reads :class:`DropoutPrice` from the benchmark file; None if it is missing, unreadable or lacks a setting."""
    rate = PRICE_DROPOUT
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        rows = {(r["attn_dropout"], r["resid_dropout"]): r for r in data["rows"]}
        on, attn_off, off = rows[(rate, rate)], rows[(0.0, rate)], rows[(0.0, 0.0)]
        scaling = {(r["attn_dropout"], r["resid_dropout"]): r for r in data["t_scaling"]}
        with_attn, without = scaling[(rate, rate)], scaling[(0.0, rate)]
        speedup = {_count(t, "seq_len", 1): _number(a, "step_ms") / _number(b, "step_ms", 1e-12) for t, a, b in
                   zip(with_attn["seq_lens"], with_attn["step_ms"], without["step_ms"], strict=True)}
        block = _count(data["config"]["block_size"], "block_size", 1)
        speedup[block] = _number(attn_off["tokens_per_s"], "tokens_per_s") / _number(on["tokens_per_s"], "", 1e-12)
        return DropoutPrice(str(data["machine"]["cpu"]), _count(on["batch_size"], "batch_size", 1), block,
                            _number(on["tokens_per_s"], "tokens_per_s"), _number(attn_off["tokens_per_s"], "t"),
                            _number(off["tokens_per_s"], "tokens_per_s"), tuple(sorted(speedup.items())))
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


@dataclass(frozen=True)
class DropoutRun:
    """One setting of the dropout experiment, summarised over its seeds.

    Attributes:
        key: the run key (a key of :data:`DROPOUT_RUNS`).
        attn_dropout, resid_dropout: the rates it trained with.
        val_loss_mean, val_loss_std: validation cross-entropy in nats on the fixed validation windows, mean and
            sample standard deviation over the seeds.
        tokens_per_s: training tokens per second over the optimizer steps (evaluations excluded), mean over seeds.
    """

    key: str
    attn_dropout: float
    resid_dropout: float
    val_loss_mean: float
    val_loss_std: float
    tokens_per_s: float


@dataclass(frozen=True)
class DropoutLoss:
    """What dropout buys in validation loss within the course preset's training, and what it costs in speed.

    Read from the shipped results of ``python -m engine.lab.experiments --experiments dropout``.

    Attributes:
        runs: one :class:`DropoutRun` per key of :data:`DROPOUT_RUNS`, in that order.
        steps, batch_size, learning_rate: the training of every run.
        seeds: the seeds every run was trained with.
        corpus: the training text's name.
        cpu, threads: where it was measured.
        lowers_loss: ((run key with dropout, True when its mean validation loss is lower than without
            dropout by more than the seed noise), ...), in :data:`DROPOUT_RUNS` order.
    """

    runs: tuple[DropoutRun, ...]
    steps: int
    batch_size: int
    learning_rate: float
    seeds: tuple[int, ...]
    corpus: str
    cpu: str
    threads: int
    lowers_loss: tuple[tuple[str, bool], ...]

    @property
    def dropout_helps(self) -> bool:
        """True when some dropout setting lowers the validation loss beyond the seed noise."""
        return any(lowers for _key, lowers in self.lowers_loss)

    def lowers(self, key: str) -> bool:
        """Whether run ``key`` lowers the loss beyond the seed noise (False for ``dropout_0``)."""
        return dict(self.lowers_loss).get(key, False)

    def run(self, key: str) -> DropoutRun:
        """The run of ``key``; raises KeyError for a key not in :data:`DROPOUT_RUNS`."""
        return {r.key: r for r in self.runs}[key]


def dropout_loss(path: Path | str = DROPOUT_RESULTS_FILE) -> DropoutLoss | None:
    """Reads :class:`DropoutLoss` from the dropout experiment's results file; None when it does not exist.

    Raises:
        ValueError: if the file is not a results file (:func:`read_results`), lacks the "dropout" experiment,
            one of its three runs, a second seed, a speed, or the noise-rule comparisons with ``dropout_0``,
            or holds a rate that differs from :data:`DROPOUT_RUNS`.
    """
    results = read_results(path)
    if results is None:
        return None
    exp = results.get("dropout")
    if exp is None:
        raise ValueError(f"{path}: no dropout experiment")
    runs = []
    for key, rates in DROPOUT_RUNS.items():
        try:
            r = exp.run(key)
        except KeyError as exc:
            raise ValueError(f"{path}: run {key!r} missing") from exc
        if (r.config.attn_dropout_rate, r.config.resid_dropout_rate) != rates or r.val_std is None:
            raise ValueError(f"{path}: run {key!r} has other rates or fewer than two seeds")
        if r.step_tokens_per_s is None:
            raise ValueError(f"{path}: run {key!r} has no tokens/s")
        runs.append(DropoutRun(key, *rates, r.val_loss, r.val_std, r.step_tokens_per_s))
    lowers = {}
    for c in exp.comparisons:
        if c.a == "dropout_0" and c.b in DROPOUT_RUNS:
            if c.exceeds_noise is None:
                raise ValueError(f"{path}: comparison {c.a}/{c.b} has no noise verdict")
            lowers[c.b] = c.exceeds_noise and c.delta < 0
    if set(lowers) != set(DROPOUT_RUNS) - {"dropout_0"}:
        raise ValueError(f"{path}: comparisons with dropout_0 missing")
    return DropoutLoss(tuple(runs), exp.steps, exp.batch_size, results.learning_rate, exp.seeds, exp.corpus,
                       results.cpu, results.threads, tuple((k, lowers[k]) for k in DROPOUT_RUNS if k in lowers))


#: The lesson's exercises at the budget of ``engine.lab.experiments.EXERCISE_BUDGET`` (heads, positions, no mask;
#: paired by seed), written run by run by ``python -m engine.lab.experiments``.
EXERCISES_FILE = ASSETS / "lab_exercises.json"
EXERCISES_FORMAT = "lab-exercises/1"
#: The verdicts of a paired comparison (``engine.lab.experiments.stats.paired_comparison``): b's loss lower than
#: a's beyond the seed-to-seed spread, a's lower, neither, or fewer than two seeds to tell.
VERDICTS = ("b_beats_a", "a_beats_b", "no_detectable_difference", "too_few_seeds")
#: Most runs and sessions an exercises file may hold.
MAX_EXERCISE_RUNS, MAX_SESSIONS = 512, 1024


@dataclass(frozen=True)
class ExerciseRun:
    """One training of the exercises: a configuration and a seed.

    Attributes:
        run_id: ``"<key>@seed<seed>"``.
        key: the configuration (``"course"``, ``"heads_1"``, ``"pos_rope"``, ``"no_mask_learned"`` ...).
        seed: initial weights (shared with the seed's other runs where shapes allow) and batch order.
        config: the model trained; params: its parameter count.
        history: the trainer's loss estimates during training (nats).
        val_loss: cross-entropy over the whole validation split, nats per character.
        val_loss_by_position: the same at each position 0 … block_size - 1 of the windows.
        val_windows: validation windows measured.
        steps_done, wall_s, tokens_per_s: the training (wall time includes the validation).
        device, cpu, torch_threads: where it ran (device: "CPU", "CUDA (NVIDIA H200)" ...).
        load_start, load_end: the machine's 1-minute load average when the run started and ended (None: unknown).
        samples: greedy and sampled continuations of the lesson's prompt.
    """

    run_id: str
    key: str
    seed: int
    config: GPTConfig
    params: int
    history: History
    val_loss: float
    val_loss_by_position: tuple[float, ...]
    val_windows: int
    steps_done: int
    wall_s: float
    tokens_per_s: float
    device: str
    cpu: str
    torch_threads: int
    load_start: float | None
    load_end: float | None
    samples: Samples


@dataclass(frozen=True)
class PairedDifference:
    """Run ``b`` against run ``a`` over the seeds both have; differences are b − a in nats (negative: b lower).

    Attributes:
        seeds, differences: the per-seed differences.
        mean: the effect in nats; sd: their sample standard deviation (None under two seeds).
        t_interval, bootstrap_interval: 95 % intervals of the mean (None under two seeds).
        detectable: the smallest difference these seeds could have detected (None under two seeds).
        verdict: one of :data:`VERDICTS`.
    """

    a: str
    b: str
    seeds: tuple[int, ...]
    differences: tuple[float, ...]
    mean: float
    sd: float | None
    t_interval: tuple[float, float] | None
    bootstrap_interval: tuple[float, float] | None
    detectable: float | None
    verdict: str


@dataclass(frozen=True)
class PositionCurve:
    """A configuration's validation loss by position: ``mean`` over its seeds, ``difference`` from the reference
    averaged over the shared seeds (None for the reference or without a shared seed); nats, block_size values."""

    key: str
    seeds: tuple[int, ...]
    mean: tuple[float, ...]
    difference: tuple[float, ...] | None

    def mean_difference(self, start: int, stop: int | None = None) -> float | None:
        """The difference from the reference averaged over positions ``start`` … ``stop - 1`` (nats; None for the
        reference, or when the range holds no position)."""
        if self.difference is None:
            return None
        part = self.difference[start:stop]
        return sum(part) / len(part) if part else None


@dataclass(frozen=True)
class ExerciseSummary:
    """One exercise: its configurations, the seeds where all of them are done, each compared with the reference."""

    name: str
    reference: str
    runs: tuple[str, ...]
    seeds_complete: tuple[int, ...]
    comparisons: tuple[PairedDifference, ...]
    by_position: tuple[PositionCurve, ...]

    def comparison(self, key: str) -> PairedDifference | None:
        """``key`` against the reference, or None when the file has no pair yet."""
        return next((c for c in self.comparisons if c.b == key), None)


@dataclass(frozen=True)
class ExercisesFile:
    """An exercises file: the shared training, every finished run, the exercises' summaries.

    Attributes:
        steps, batch_size, learning_rate, warmup_steps: every run's training.
        block_size, corpus, corpus_vocab_size, val_tokens: the base model's context and the text.
        seeds: the seeds planned; planned: runs planned; failed: worker failures recorded (tried again later).
        commands: the command line of each sitting that wrote the file.
        complete: True when every planned run is in the file.
    """

    steps: int
    batch_size: int
    learning_rate: float
    warmup_steps: int
    block_size: int
    corpus: str
    corpus_vocab_size: int
    val_tokens: int
    seeds: tuple[int, ...]
    planned: int
    failed: int
    commands: tuple[str, ...]
    complete: bool
    runs: tuple[ExerciseRun, ...]
    exercises: tuple[ExerciseSummary, ...]

    def exercise(self, name: str) -> ExerciseSummary | None:
        """The exercise ``name`` ("heads", "positions", "no_mask"), or None."""
        return next((e for e in self.exercises if e.name == name), None)

    def runs_of(self, key: str) -> tuple[ExerciseRun, ...]:
        """Every seed's run of configuration ``key``, in the file's order."""
        return tuple(r for r in self.runs if r.key == key)

    @property
    def devices(self) -> tuple[str, ...]:
        """The distinct devices the runs trained on ("CPU", "CUDA (NVIDIA H200)" ...), in the file's order."""
        return tuple(dict.fromkeys(r.device for r in self.runs))

    @property
    def wall_s(self) -> float:
        """The runs' wall times added up, in seconds (runs in parallel processes overlap in time)."""
        return sum(r.wall_s for r in self.runs)


def _optional(value, name: str, minimum: float = 0.0) -> float | None:
    return None if value is None else _number(value, name, minimum)


def _interval(value, name: str) -> tuple[float, float] | None:
    if value is None:
        return None
    if not isinstance(value, list) or len(value) != 2:
        raise ValueError(f"{name} must be two numbers")
    low, high = (_number(v, name, -math.inf) for v in value)
    return low, high


def _signed(values, name: str) -> tuple[float, ...]:
    if not isinstance(values, list) or len(values) > MAX_POINTS:
        raise ValueError(f"{name} must be a list of at most {MAX_POINTS} numbers")
    return tuple(_number(v, name, -math.inf) for v in values)


def _exercise_run(data: Mapping) -> ExerciseRun:
    rid = str(data["run_id"])
    h = data["history"]
    history = History(tuple(_count(s, f"{rid}: step") for s in h["step"][:MAX_POINTS]),
                      _numbers(h["train_loss"], f"{rid}: train_loss"), _numbers(h["val_loss"], f"{rid}: val_loss"))
    if not len(history.step) == len(history.train_loss) == len(history.val_loss):
        raise ValueError(f"{rid}: the loss curve's lists differ in length")
    config = GPTConfig.from_dict(dict(data["config"]))
    by_position = _numbers(data["val_loss_by_position"], f"{rid}: val_loss_by_position")
    if len(by_position) != config.block_size:
        raise ValueError(f"{rid}: {len(by_position)} positions for block_size {config.block_size}")
    s, machine = data["samples"], data["machine"]
    return ExerciseRun(rid, str(data["key"]), _count(data["seed"], f"{rid}: seed"), config,
                       _count(data["params"], f"{rid}: params", 1), history,
                       _number(data["val_loss"], f"{rid}: val_loss"), by_position,
                       _count(data["val_windows"], f"{rid}: val_windows", 1),
                       _count(data["steps_done"], f"{rid}: steps_done"), _number(data["wall_s"], f"{rid}: wall_s"),
                       _number(data["tokens_per_s"], f"{rid}: tokens_per_s"), str(machine["device_name"]),
                       str(machine["cpu"]), _count(data["torch_threads"], f"{rid}: torch_threads", 1),
                       _optional(data["load_start"], f"{rid}: load_start"),
                       _optional(data["load_end"], f"{rid}: load_end"),
                       Samples(str(s["prompt"]), str(s["greedy"]), str(s["sampled"])))


def _paired(data: Mapping) -> PairedDifference:
    name = f"{data['a']}/{data['b']}"
    if data["verdict"] not in VERDICTS:
        raise ValueError(f"{name}: unknown verdict {data['verdict']!r:.40}")
    seeds = tuple(_count(s, f"{name}: seed") for s in data["seeds"][:MAX_SEEDS])
    differences = _signed(data["differences"], f"{name}: differences")
    if len(differences) != len(seeds) or not seeds:
        raise ValueError(f"{name}: one difference per seed")
    c = PairedDifference(str(data["a"]), str(data["b"]), seeds, differences,
                         _number(data["mean"], f"{name}: mean", -math.inf), _optional(data["sd"], f"{name}: sd"),
                         _interval(data["t_interval"], f"{name}: t_interval"),
                         _interval(data["bootstrap_interval"], f"{name}: bootstrap_interval"),
                         _optional(data["detectable"], f"{name}: detectable"), str(data["verdict"]))
    if not _follows(c.verdict, c.t_interval) or (c.t_interval is None) != (len(seeds) < 2):
        raise ValueError(f"{name}: verdict {c.verdict!r} does not follow from its interval and seeds")
    return c


#: The file's rounding of nats (5 decimals): an interval's end this close to 0 may have crossed it when rounded.
_ROUNDING = 1e-5


def _follows(verdict: str, t_interval: tuple[float, float] | None) -> bool:
    """Whether ``verdict`` is what :func:`interval_verdict` gives for ``t_interval`` before the file's rounding."""
    if t_interval is None or verdict == VERDICTS[3]:
        return t_interval is None and verdict == VERDICTS[3]
    low, high = t_interval
    return {VERDICTS[0]: high <= _ROUNDING, VERDICTS[1]: low >= -_ROUNDING,
            VERDICTS[2]: low <= _ROUNDING and high >= -_ROUNDING}[verdict]


def interval_verdict(t_interval: tuple[float, float] | None) -> str:
    """The :data:`VERDICTS` entry a 95 % interval of b − a implies: wholly below 0, wholly above, holding 0, none.

    The rule of ``engine.lab.experiments.stats.paired_comparison``; the reader refuses a file whose verdicts
    do not follow it, so the page's sentences, chosen by the verdict, always agree with the numbers they quote.
    """
    if t_interval is None:
        return VERDICTS[3]
    low, high = t_interval
    return VERDICTS[0] if high < 0 else VERDICTS[1] if low > 0 else VERDICTS[2]


def _summary(name: str, data: Mapping) -> ExerciseSummary:
    curves = tuple(PositionCurve(str(key), tuple(_count(s, "seed") for s in c["seeds"][:MAX_SEEDS]),
                                 _numbers(c["mean"], f"{name}/{key}: mean"),
                                 None if c["difference"] is None else _signed(c["difference"], f"{name}/{key}"))
                   for key, c in list(data["by_position"].items())[:MAX_RUNS])
    return ExerciseSummary(name, str(data["reference"]), tuple(str(k) for k in data["runs"][:MAX_RUNS]),
                           tuple(_count(s, "seed") for s in data["seeds_complete"][:MAX_SEEDS]),
                           tuple(_paired(c) for c in data["comparisons"][:MAX_RUNS]), curves)


def read_exercises(path: str | Path = EXERCISES_FILE) -> ExercisesFile | None:
    """Reads an exercises file (:data:`EXERCISES_FORMAT`); None when it does not exist.

    A file of a command still running is readable: it holds the runs finished so far (``complete`` False).

    Raises:
        ValueError: if it is not valid JSON or not of that format, holds more than :data:`MAX_EXERCISE_RUNS` runs,
            or a value is missing, of the wrong type, negative where a loss or a time is, or not finite.
    """
    path = Path(path)
    data = _read_json(path)
    if data is None:
        return None
    if not isinstance(data, dict) or data.get("format") != EXERCISES_FORMAT:
        raise ValueError(f"{path}: not a results file of format {EXERCISES_FORMAT}")
    try:
        s, runs, sessions = data["settings"], data["runs"], data["sessions"]
        if not isinstance(runs, dict) or len(runs) > MAX_EXERCISE_RUNS or len(sessions) > MAX_SESSIONS:
            raise ValueError(f"{path}: more than {MAX_EXERCISE_RUNS} runs or {MAX_SESSIONS} sittings")
        b, corpus = s["budget"], s["corpus"]
        return ExercisesFile(
            _count(b["steps"], "steps", 1), _count(b["batch_size"], "batch_size", 1),
            _number(b["learning_rate"], "learning_rate"), _count(b["warmup_steps"], "warmup_steps"),
            _count(s["base_model"]["block_size"], "block_size", 1), str(corpus["name"]),
            _count(corpus["vocab_size"], "vocab_size", 1), _count(corpus["val_tokens"], "val_tokens", 1),
            tuple(_count(x, "seed") for x in s["seeds"][:MAX_SEEDS]),
            _count(len(data["planned"]), "planned"), _count(len(data["failed"]), "failed"),
            tuple(str(x["command"]) for x in sessions), data.get("complete") is True,
            tuple(_exercise_run(r) for r in runs.values()),
            tuple(_summary(str(name), e) for name, e in list(data["exercises"].items())[:MAX_RUNS]))
    except (KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"{path}: not an exercises results file ({exc!r})") from exc
