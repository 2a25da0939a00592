"""Training one run and measuring it: the loss over the whole validation split, by position, and samples.

:func:`measure_task` is what one worker of ``python -m engine.lab.experiments`` does for one run of the
exercises. :func:`train_run` and :func:`run_experiment` train the older sets (``definitions.EXPERIMENTS``); they
measure on a fixed sample of validation windows (:func:`loss_by_position`).
"""

from __future__ import annotations

import dataclasses
import datetime
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from engine.bench.machine import load_average
from engine.chapter import LESSON_PROMPT
from engine.corpus import Corpus
from engine.gpt import GPT, GPTConfig, config_params, eval_mode
from engine.lab.experiments.definitions import ALL_EXPERIMENTS, EXERCISE_RUNS, Budget, Run, Task
from engine.lab.generation import generate
from engine.lab.models import LabModel, corpus_fingerprint
from engine.presets import preset
from engine.training import Callbacks, TrainConfig, seeded_model, train

#: Validation windows of the fixed evaluation of the older sets (:func:`loss_by_position`, seed 7): batches of 16.
FIXED_EVAL_BATCHES = 40
#: Characters generated for each run's samples, from the lesson's prompt (engine.chapter.LESSON_PROMPT).
SAMPLE_CHARS = 40
#: The sampling rule of each run's second sample (the first is greedy).
SAMPLE_TEMPERATURE, SAMPLE_TOP_K = 0.8, 20
#: Windows per forward pass in :func:`split_loss`.
SPLIT_EVAL_BATCH = 32


@dataclass(frozen=True)
class SplitLoss:
    """Cross-entropy of a model over every non-overlapping window of one split.

    Attributes:
        mean: nats per predicted token, over ``windows * block_size`` tokens.
        by_position: nats at positions 0 … block_size - 1, each the mean over the windows.
        windows: number of windows of block_size tokens (the split's last ``< block_size`` tokens are left out).
        tokens: predicted tokens, ``windows * block_size``.
    """

    mean: float
    by_position: tuple[float, ...]
    windows: int
    tokens: int


@torch.no_grad()
def split_loss(model: GPT, ids: torch.Tensor, batch_size: int = SPLIT_EVAL_BATCH) -> SplitLoss:
    """The model's loss over the whole of ``ids`` cut into consecutive windows of block_size, in eval mode.

    Window ``w`` reads ``ids[w*T : (w+1)*T]`` and predicts ``ids[w*T+1 : (w+1)*T+1]`` (T = block_size), so every
    token but the last ``< T`` is predicted exactly once, at the position it falls on in its window: position 0
    without context, position T-1 with the most. The training mode is restored afterwards.

    Args:
        model: any GPT.
        ids: int tensor (N,) of token ids, e.g. ``corpus.val_ids``.
        batch_size: windows per forward pass (changes the memory, not the result beyond float rounding).

    Raises:
        ValueError: if ``ids`` holds fewer than block_size + 1 tokens, or batch_size < 1.
    """
    block_size = model.config.block_size
    windows = (len(ids) - 1) // block_size
    if windows < 1 or batch_size < 1:
        raise ValueError(f"split_loss needs more than block_size={block_size} tokens and batch_size >= 1; "
                         f"got {len(ids)} tokens, batch_size {batch_size}")
    device = next(model.parameters()).device
    span = windows * block_size
    x_all = ids[:span].long().view(windows, block_size)  # (N',) -> (W, T)
    y_all = ids[1:span + 1].long().view(windows, block_size)  # (N',) -> (W, T), shifted by one token
    total = torch.zeros(block_size, dtype=torch.float64)
    with eval_mode(model):
        for start in range(0, windows, batch_size):
            x = x_all[start:start + batch_size].to(device)  # (b, T)
            y = y_all[start:start + batch_size].to(device)  # (b, T)
            logits = model(x).logits  # (b, T, V)
            loss = F.cross_entropy(logits.transpose(1, 2), y, reduction="none")  # (b, V, T) vs (b, T) -> (b, T)
            total += loss.sum(dim=0).double().cpu()  # (T,)
    by_position = total / windows  # (T,)
    return SplitLoss(float(by_position.mean()), tuple(float(v) for v in by_position), windows, span)


def paired_model(config: GPTConfig, seed: int, reference: GPTConfig) -> tuple[GPT, list[str]]:
    """A model of ``config`` with the weights of the ``reference`` model built from ``seed``, where shapes allow.

    Both are drawn as the chapter builds its models (``engine.training.seeded_model``: ``torch.manual_seed(seed)``
    then the constructor); every parameter of the new model with the reference's name and shape is then copied
    from it. So the runs of one seed start from the same weights whatever the head count (the shapes do not
    depend on it) or the mask, and differ only in the tensors a position encoding adds or removes.

    Returns:
        The model (on the CPU) and the sorted names of its parameters not copied from the reference.
    """
    model = seeded_model(config, seed)
    ref = dict(seeded_model(reference, seed).named_parameters())
    own = []
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name in ref and ref[name].shape == param.shape:
                param.copy_(ref[name])
            else:
                own.append(name)
    return model, sorted(own)


def samples(lab_model: LabModel, seed: int, chars: int = SAMPLE_CHARS) -> dict:
    """Greedy and sampled (:data:`SAMPLE_TEMPERATURE`, :data:`SAMPLE_TOP_K`, ``seed``) continuations of
    ``engine.chapter.LESSON_PROMPT``.

    Generation never emits the unknown token (``engine.lab.generation.generate``).
    """
    return {
        "prompt": LESSON_PROMPT,
        "greedy": generate(lab_model, LESSON_PROMPT, chars, temperature=0).text,
        "sampled": generate(lab_model, LESSON_PROMPT, chars, temperature=SAMPLE_TEMPERATURE,
                            top_k=SAMPLE_TOP_K, seed=seed).text,
    }


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")


def measure_task(task: Task, corpus: Corpus, budget: Budget, base: GPTConfig | None = None,
                 device: str | None = None, callbacks: Callbacks | None = None) -> dict:
    """Trains one run of the exercises and measures it.

    The weights come from :func:`paired_model` (the ``course`` run's where shapes allow), the batches from the
    trainer's generator seeded with ``task.seed``: the runs of one seed differ only in their configuration.

    Args:
        task: configuration key (``definitions.EXERCISE_RUNS``) and seed.
        corpus: the training text; the loss is measured on its whole validation split (:func:`split_loss`).
        budget: steps, batch and schedule.
        base: the model the runs vary (default: the "course" preset).
        device: "cpu", "cuda", "mps" or None (best available).
        callbacks: passed to ``engine.training.train`` (progress).

    Returns:
        JSON-ready dict: ``run_id``, ``key``, ``seed``, ``config``, ``params``, ``own_params`` (parameters not
        shared with the reference), ``history`` (the trainer's estimates: ``step``, ``train_loss``,
        ``val_loss``), ``val_loss`` (whole split, nats), ``val_loss_by_position``, ``val_windows``,
        ``val_tokens``, ``steps_done``, ``wall_s``, ``tokens_per_s``, ``device``, ``torch_threads``,
        ``load_start``/``load_end`` (1-minute load average), ``started``/``finished`` (UTC), ``samples``.

    Raises:
        KeyError: for an unknown configuration key.
        engine.training.TrainingDivergedError: if the loss becomes NaN or infinite.
    """
    base = base or preset("course")
    config = dataclasses.replace(EXERCISE_RUNS[task.key].config(base), vocab_size=corpus.vocab_size)
    reference = dataclasses.replace(base, vocab_size=corpus.vocab_size)
    started, load_start = _now(), load_average()
    model, own = paired_model(config, task.seed, reference)
    train_config = budget.train_config(task.seed, device)
    result = train(model, corpus, train_config, callbacks=callbacks)
    t0 = time.perf_counter()
    val = split_loss(result.model, corpus.val_ids)
    eval_s = time.perf_counter() - t0
    history = result.history
    return {
        "run_id": task.run_id,
        "key": task.key,
        "seed": task.seed,
        "config": config.to_dict(),
        "params": config_params(config),
        "own_params": own,
        "history": {"step": [int(s) for s in history["step"]],
                    "train_loss": [round(float(v), 4) for v in history["train_loss"]],
                    "val_loss": [round(float(v), 4) for v in history["val_loss"]]},
        "val_loss": round(val.mean, 5),
        "val_loss_by_position": [round(v, 4) for v in val.by_position],
        "val_windows": val.windows,
        "val_tokens": val.tokens,
        "steps_done": result.steps_done,
        "wall_s": round(result.wall_s + eval_s, 1),
        "train_wall_s": round(result.wall_s, 1),
        "tokens_per_s": round(result.tokens_per_s, 1),
        "device": result.device,
        "torch_threads": torch.get_num_threads(),
        "load_start": load_start,
        "load_end": load_average(),
        "started": started,
        "finished": _now(),
        "samples": samples(LabModel.from_result(result), task.seed),
    }


@torch.no_grad()
def loss_by_position(model: GPT, corpus: Corpus, batch_size: int = 16, batches: int = 10, seed: int = 0
                     ) -> torch.Tensor:
    """Mean validation cross-entropy at each position of a fixed sample of windows, in eval mode.

    Generation only ever uses the prediction at the **last** position of the context, so
    ``loss_by_position(...)[-1]`` is the loss that matters for sampling; a model trained without
    the causal mask has a tiny loss at every other position (it reads the answer) and not there.
    :func:`split_loss` measures the whole split instead.

    Args:
        model: any GPT (eval mode is set for the measurement and restored).
        corpus: its validation split is used.
        batch_size, batches: windows per batch and number of batches (fixed by ``seed``).

    Returns:
        float32 tensor (block_size,) on the CPU: nats at positions 0 … block_size - 1.
    """
    device = next(model.parameters()).device
    generator = torch.Generator().manual_seed(seed)
    total = torch.zeros(model.config.block_size)
    with eval_mode(model):
        for _ in range(batches):
            x, y = corpus.get_batch("val", batch_size, model.config.block_size, generator, device)  # (B, T) each
            logits = model(x).logits  # (B, T, V)
            loss = F.cross_entropy(logits.transpose(1, 2), y, reduction="none")  # (B, V, T) vs (B, T) -> (B, T)
            total += loss.mean(dim=0).float().cpu()  # (T,)
    return total / batches


def train_run(
    run: Run,
    corpus: Corpus,
    train_config: TrainConfig,
    callbacks: Callbacks | None = None,
    stop: threading.Event | Callable[[], bool] | None = None,
    base: GPTConfig | None = None,
    eval_batches: int = 10,
) -> dict:
    """Trains one run of the older sets and measures it.

    ``fixed_val_loss`` is the mean of ``loss_by_position``: ``eval_batches`` batches of
    min(16, batch_size) validation windows drawn with seed 7, the same windows for every run and
    seed (``final_val_loss`` is the trainer's last estimate, on windows that depend on the seed).

    Returns:
        JSON-ready dict: ``key``, ``config`` (GPTConfig dict), ``params``, ``history`` (lists
        ``step``, ``train_loss``, ``val_loss``), ``final_train_loss``, ``final_val_loss``,
        ``loss_by_position`` (list of block_size floats), ``last_position_val_loss``,
        ``fixed_val_loss``, ``steps_done``, ``stopped``, ``wall_s``, ``tokens_per_s`` (training tokens per
        second of wall time, evaluations included), ``step_tokens_per_s`` (the same over the optimizer steps
        alone: forward, backward, clipping and update), ``device`` and ``samples`` (:func:`samples`).
    """
    config = dataclasses.replace(run.config(base), vocab_size=corpus.vocab_size)
    step_seconds: list[float] = []
    tokens_per_step = train_config.batch_size * config.block_size

    def on_step(step: int, loss: float, tokens_per_s: float) -> None:
        step_seconds.append(tokens_per_step / tokens_per_s)

    hooks = [Callbacks(on_step=on_step)] + ([] if callbacks is None else [callbacks])
    result = train(config, corpus, train_config, callbacks=hooks, stop=stop)
    per_position = loss_by_position(result.model, corpus, batch_size=min(16, train_config.batch_size),
                                    batches=eval_batches, seed=7)  # (block_size,)
    history = result.history
    return {
        "key": run.key,
        "config": config.to_dict(),
        "params": config_params(config),
        "history": {"step": [int(s) for s in history["step"]],
                    "train_loss": [round(float(v), 4) for v in history["train_loss"]],
                    "val_loss": [round(float(v), 4) for v in history["val_loss"]]},
        "final_train_loss": round(result.final_train_loss, 4),
        "final_val_loss": round(result.final_val_loss, 4),
        "loss_by_position": [round(float(v), 4) for v in per_position],
        "last_position_val_loss": round(float(per_position[-1]), 4),
        "fixed_val_loss": round(float(per_position.mean()), 4),
        "seed": train_config.seed,
        "steps_done": result.steps_done,
        "stopped": result.stopped,
        "wall_s": round(result.wall_s, 1),
        "tokens_per_s": round(result.tokens_per_s, 1),
        "step_tokens_per_s": round(len(step_seconds) * tokens_per_step / max(sum(step_seconds), 1e-9), 1),
        "device": result.device,
        "samples": samples(LabModel.from_result(result), train_config.seed),
    }


def run_experiment(
    name: str,
    corpus: Corpus,
    steps: int = 1000,
    batch_size: int = 32,
    seed: int = 1337,
    on_run_start: Callable[[int, str, int], None] | None = None,
    callbacks: Callbacks | None = None,
    stop: threading.Event | Callable[[], bool] | None = None,
    run_cache: dict | None = None,
    device: str | None = None,
    eval_batches: int = 10,
    eval_interval: int | None = None,
) -> dict:
    """Trains every run of one of the older experiments on ``corpus`` and collects the results.

    Args:
        name: a key of ``definitions.ALL_EXPERIMENTS`` ("heads", "positions", "causal", "dropout").
        corpus: the training text.
        steps, batch_size, seed, device: the training settings (``TrainConfig.for_steps``).
        on_run_start: called as ``on_run_start(index, run key, steps)`` before each run (progress display).
        callbacks: passed to every ``train`` call.
        stop: an Event or a callable; when set (True), the current run stops early and no further run starts.
        run_cache: dict reused across calls, keyed by (GPTConfig, TrainConfig, corpus fingerprint):
            a configuration shared by two experiments is trained once.
        eval_batches: batches of the fixed evaluation (:func:`train_run`).
        eval_interval: steps between two points of the loss curves (default: ``TrainConfig.for_steps``'s).

    Returns:
        dict with ``name``, ``runs`` (list of :func:`train_run` dicts, in the
        experiment's order), ``steps``, ``batch_size``, ``corpus`` and ``stopped``.

    Raises:
        KeyError: for an unknown experiment name (the message lists the known ones).
    """
    if name not in ALL_EXPERIMENTS:
        raise KeyError(f"unknown experiment {name!r}; choose one of {sorted(ALL_EXPERIMENTS)}")
    experiment = ALL_EXPERIMENTS[name]
    overrides = {} if eval_interval is None else {"eval_interval": eval_interval}
    train_config = TrainConfig.for_steps(steps, batch_size, seed=seed, device=device, **overrides)
    fingerprint = corpus_fingerprint(corpus)
    should_stop = stop.is_set if isinstance(stop, threading.Event) else stop
    runs, stopped = [], False
    for index, run in enumerate(experiment.runs):
        if should_stop is not None and should_stop():
            stopped = True
            break
        if on_run_start is not None:
            on_run_start(index, run.key, steps)
        cache_key = (run.config(), train_config, fingerprint)
        if run_cache is not None and cache_key in run_cache:
            runs.append({**run_cache[cache_key], "key": run.key})
            continue
        outcome = train_run(run, corpus, train_config, callbacks=callbacks, stop=stop, eval_batches=eval_batches)
        if outcome["stopped"]:
            stopped = True
            break
        if run_cache is not None:
            run_cache[cache_key] = outcome
        runs.append(outcome)
    return {"name": name, "runs": runs, "steps": steps, "batch_size": batch_size,
            "corpus": corpus.name, "stopped": stopped}
