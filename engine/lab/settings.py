"""The Lab's rules: which settings a reader may choose, and what must hold before a training starts.

The page (``views/lab.py``) draws its controls from these ranges and asks :func:`plan_training`
whether a training may start; the runner asks again before it queues one. Caps and estimates come
from :mod:`engine.budget`; the schedule from ``TrainConfig.for_steps``.
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass
from pathlib import Path

from engine import budget
from engine.corpus import Corpus
from engine.gpt import POS_ENCODINGS, GPTConfig, preset
from engine.lab.results import DROPOUT_RESULTS_FILE, load_results
from engine.training import TrainConfig

#: Choices of the Lab's controls (within the caps of engine.budget).
N_LAYERS = (1, budget.MAX_N_LAYER)
N_EMBDS = (16, 32, 48, 64, 96, 128, 192, 256)
BLOCK_SIZES = (8, 16, 32, 64, 128, 256)
BATCH_SIZES = (1, 2, 4, 8, 16, 32, 64)
LEARNING_RATES = (1e-4, 3e-4, 5e-4, 1e-3, 2e-3, 3e-3, 5e-3, 1e-2)
STEPS = (1, budget.MAX_STEPS)
DROPOUT = (0.0, 0.5)
SEEDS = (0, 99_999)
DEFAULT_SEED = 1337
#: Training settings of the two preset buttons (the model sizes are engine.gpt's "quick" and "course" presets).
#: Both fit engine.budget's caps on the 2,500-character Tang poems: the course model at batch 4 (the batch of the
#: shipped experiment results; ~200 MB estimated, batch 8 would be ~265 MB). The quick run takes 1 to 6 minutes on
#: this project's shared 2-core CPU.
PRESET_TRAINING = {
    "quick": {"steps": 400, "batch_size": 8, "learning_rate": 2e-3},
    "course": {"steps": 1000, "batch_size": 4, "learning_rate": 1e-3},
}
#: Batch size and step range of the experiments' live reruns.
RERUN_BATCH = 8
RERUN_STEPS = (10, 1000)
#: Generation controls: new characters, temperature, top-k (0 = all characters).
GENERATE_LENGTH = (1, 300)
TEMPERATURE = (0.0, 2.0)
TOP_K = (0, 5000)
#: Top-p (nucleus sampling): the probability mass of the most likely characters kept (1 = all characters).
TOP_P = (0.05, 1.0)
#: Poem forms: characters per line (5: 五言, 7: 七言), lines (句) per poem (an even number: the corpus's couplets),
#: and the shortest and longest line the model may write when only the number of lines is chosen.
POEM_LINE_LENGTHS = (5, 7)
POEM_LINES = (2, 16)
POEM_FREE_LINE = (3, 9)


def head_choices(n_embd: int, pos_encoding: str) -> tuple[int, ...]:
    """Head counts allowed for ``n_embd``: its divisors, and with RoPE only those giving an even head_dim.

    Raises:
        ValueError: for n_embd < 1 or an unknown pos_encoding.
    """
    if n_embd < 1:
        raise ValueError(f"n_embd must be >= 1, got {n_embd}")
    if pos_encoding not in POS_ENCODINGS:
        raise ValueError(f"pos_encoding must be one of {POS_ENCODINGS}, got {pos_encoding!r}")
    return tuple(h for h in range(1, n_embd + 1)
                 if n_embd % h == 0 and (pos_encoding != "rope" or (n_embd // h) % 2 == 0))


def default_heads(n_embd: int, pos_encoding: str, wanted: int | None = None) -> int:
    """``wanted`` when allowed, else the quick preset's head count when allowed, else the first choice."""
    choices = head_choices(n_embd, pos_encoding)
    for h in (wanted, preset("quick").n_head):
        if h in choices:
            return h
    return choices[0]


@dataclass(frozen=True)
class Problem:
    """Why a training may not start: a stable key for the page, with the value and the limit.

    Attributes:
        key: "no_corpus", "block_size" (longer than the text allows), or a key of
            ``engine.budget.Refusal`` ("n_layer", "memory", "time" ...).
        value, limit: what was asked for and the most allowed (bytes for "memory", seconds for "time").
    """

    key: str
    value: float = 0
    limit: float = 0


@dataclass(frozen=True)
class TrainingPlan:
    """A training the page may start, or the reasons it may not.

    Attributes:
        model: the GPT config with the corpus's vocab_size (vocab 1 without a corpus).
        train: the training config (``TrainConfig.for_steps``).
        estimate: memory and time (None when the sizes alone are refused).
        problems: empty when the training may start.
        fitting_batch: the largest batch size that fits the caps with these other settings
            (None when none does), for the page to suggest.
    """

    model: GPTConfig
    train: TrainConfig
    estimate: budget.Estimate | None
    problems: tuple[Problem, ...]
    fitting_batch: int | None

    @property
    def ok(self) -> bool:
        """True when the training may start."""
        return not self.problems


def plan_training(model: GPTConfig, corpus: Corpus | None, steps: int, batch_size: int, learning_rate: float,
                  seed: int = DEFAULT_SEED, device: str | None = None) -> TrainingPlan:
    """Checks a Lab training before it starts: a text, a block_size the text allows, the caps.

    Args:
        model: the model's sizes (vocab_size is replaced by the corpus's).
        corpus: the training text, or None when the reader has none yet.
        steps, batch_size, learning_rate, seed, device: the training settings.

    Raises:
        ValueError: for settings no control can produce (steps < 1, an invalid learning rate).
    """
    model = dataclasses.replace(model, vocab_size=corpus.vocab_size if corpus is not None else 1)
    train = TrainConfig.for_steps(steps, batch_size, learning_rate=learning_rate, seed=seed, device=device)
    problems: list[Problem] = []
    if corpus is None:
        problems.append(Problem("no_corpus"))
    elif model.block_size > corpus.max_block_size:
        problems.append(Problem("block_size", model.block_size, corpus.max_block_size))
    estimate, refusals = budget.training_refusals(model, batch_size, steps, train.eval_interval, train.eval_iters)
    problems += [Problem(r.key, r.value, r.limit) for r in refusals]
    fitting = None
    if any(r.key in ("memory", "time") for r in refusals):
        fitting = budget.largest_batch(model, steps, train.eval_interval, train.eval_iters, BATCH_SIZES)
    return TrainingPlan(model, train, estimate, tuple(problems), fitting)


#: The training benchmark that measured the price of dropout (``python -m engine.bench train``).
BENCH_TRAIN_FILE = Path(__file__).resolve().parents[2] / "assets" / "bench_train.json"


@dataclass(frozen=True)
class DropoutPrice:
    """What dropout costs in training speed, from the shipped training benchmark (one machine, one run).

    Attributes:
        cpu: the benchmark machine's CPU model.
        batch_size, block_size: of the timed course-preset steps.
        both_on, attn_off, both_off: tokens/s with attention and residual dropout 0.1, with attention
            dropout 0 (residual 0.1), with both 0.
        speedup: {T: how many times faster a step is with attention dropout off (residual kept)} for each
            timed sequence length T.
    """

    cpu: str
    batch_size: int
    block_size: int
    both_on: float
    attn_off: float
    both_off: float
    speedup: dict


def dropout_price(path: Path | str = BENCH_TRAIN_FILE) -> DropoutPrice | None:
    """Reads :class:`DropoutPrice` from the benchmark file; None if it is missing or lacks the three settings."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        rows = {(r["attn_dropout"], r["resid_dropout"]): r for r in data["rows"]}
        on, attn_off, off = rows[(0.1, 0.1)], rows[(0.0, 0.1)], rows[(0.0, 0.0)]
        scaling = {(r["attn_dropout"], r["resid_dropout"]): r for r in data["t_scaling"]}
        with_attn, without = scaling[(0.1, 0.1)], scaling[(0.0, 0.1)]
        speedup = {int(t): float(a) / float(b) for t, a, b in
                   zip(with_attn["seq_lens"], with_attn["step_ms"], without["step_ms"], strict=True)}
        speedup[int(data["config"]["block_size"])] = float(attn_off["tokens_per_s"]) / float(on["tokens_per_s"])
        return DropoutPrice(str(data["machine"]["cpu"]), int(on["batch_size"]), int(data["config"]["block_size"]),
                            float(on["tokens_per_s"]), float(attn_off["tokens_per_s"]), float(off["tokens_per_s"]),
                            speedup)
    except (OSError, ValueError, KeyError, TypeError):
        return None


#: The dropout experiment's runs (``engine.lab.experiments.PRESET_EXPERIMENTS["dropout"]``), in the order the
#: page lists them: {run key: (attn_dropout, resid_dropout)}.
DROPOUT_RUNS = {"dropout_0": (0.0, 0.0), "dropout_resid": (0.0, 0.1), "dropout_both": (0.1, 0.1)}


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
        steps, batch_size, learning_rate: the training of every run (the course preset button's, when the
            file was made with those settings).
        seeds: the seeds every run was trained with.
        corpus: the training text's name.
        cpu, threads: where it was measured.
        lowers_loss: {run key with dropout: True when its mean validation loss is lower than without dropout
            by more than the seed noise (``engine.lab.experiments.NOISE_RULE``)}.
    """

    runs: tuple[DropoutRun, ...]
    steps: int
    batch_size: int
    learning_rate: float
    seeds: tuple[int, ...]
    corpus: str
    cpu: str
    threads: int
    lowers_loss: dict

    @property
    def dropout_helps(self) -> bool:
        """True when some dropout setting lowers the validation loss beyond the seed noise."""
        return any(self.lowers_loss.values())

    def run(self, key: str) -> DropoutRun:
        """The run of ``key``; raises KeyError for a key not in :data:`DROPOUT_RUNS`."""
        return {r.key: r for r in self.runs}[key]


def dropout_loss(path: Path | str = DROPOUT_RESULTS_FILE) -> DropoutLoss | None:
    """Reads :class:`DropoutLoss` from the dropout experiment's results file; None when it does not exist.

    Raises:
        ValueError: if the file is not a results file (``engine.lab.experiments.load_results``), lacks the
            "dropout" experiment, one of its three runs, a second seed, or the noise-rule comparisons, or
            holds a value of the wrong type or a rate that differs from :data:`DROPOUT_RUNS`.
    """
    data = load_results(path)
    if data is None:
        return None
    try:
        exp = data["experiments"]["dropout"]
        by_key = {r["key"]: r for r in exp["runs"]}
        runs = []
        for key, rates in DROPOUT_RUNS.items():
            r = by_key[key]
            config = GPTConfig.from_dict(r["config"])
            if (config.attn_dropout_rate, config.resid_dropout_rate) != rates or int(r["n_seeds"]) < 2:
                raise ValueError(f"{path}: run {key!r} has other rates or fewer than two seeds")
            runs.append(DropoutRun(key, *rates, float(r["fixed_val_loss_mean"]), float(r["fixed_val_loss_std"]),
                                   float(r["step_tokens_per_s_mean"])))
        lowers = {}
        for c in exp["comparisons"]:
            if c["a"] == "dropout_0" and c["b"] in DROPOUT_RUNS:
                if not isinstance(c["exceeds_noise"], bool):
                    raise ValueError(f"{path}: comparison {c['a']}/{c['b']} has no noise verdict")
                lowers[c["b"]] = bool(c["exceeds_noise"] and float(c["delta_mean"]) < 0)
        if set(lowers) != set(DROPOUT_RUNS) - {"dropout_0"}:
            raise ValueError(f"{path}: comparisons with dropout_0 missing")
        settings = data["settings"]
        values = [*(v for r in runs for v in (r.val_loss_mean, r.val_loss_std, r.tokens_per_s)),
                  float(settings["learning_rate"])]
        if not all(math.isfinite(v) and v >= 0 for v in values):
            raise ValueError(f"{path}: a loss, spread, speed or learning rate is negative or not finite")
        return DropoutLoss(tuple(runs), int(exp["steps"]), int(exp["batch_size"]), float(settings["learning_rate"]),
                           tuple(int(s) for s in exp["seeds"]), str(exp["corpus"]), str(data["machine"]["cpu"]),
                           int(data["machine"]["torch_threads"]), lowers)
    except (KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"{path}: not a dropout experiment's results ({exc!r})") from exc
