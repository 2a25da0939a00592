"""The lesson's training experiments, one beyond it and one that chose a preset, as functions; plus the command.

Lesson ``000``/``002`` ("multi-head attention and positional encoding"), exercises:

* **heads** (exercise 2): the course's GPT (n_embd 128) with 1, 4 and 8 heads, same steps, the
  validation losses side by side. The parameter count is the same for every head count; only
  how the 128 dimensions are cut into heads changes.
* **positions** (exercise 3): no position information, GPT-2's learned table, RoPE (RoFormer,
  Su et al., 2021), and the fixed sinusoidal table (Vaswani et al., 2017) when the engine offers it.
* **causal** (beyond the lesson): the same model trained *without* the causal mask. Every
  position then sees the next character, which is its own target. To copy it, a query must learn
  to look exactly one position ahead. With the learned absolute table every position has to learn
  that on its own, which is slow: within the lesson's budget the unmasked model mostly memorises
  the training poems faster. With RoPE, "one position ahead" is a single pattern shared by all
  positions and the copy is found within a few hundred steps: the loss collapses towards 0, on
  the validation split as well. Either way the model is useless, because generation asks for the
  character after the *last* position, where nothing can be copied; the per-position validation
  loss shows it (low everywhere except at the last position).
* **dropout** (a preset choice, not a lesson exercise; :data:`PRESET_EXPERIMENTS`): the course model
  with no dropout (``dropout_0``), residual dropout 0.1 only (``dropout_resid``) and dropout 0.1 on the
  attention weights and the residual path (``dropout_both``), trained with the Lab's course-preset
  settings. It prices dropout in validation loss, as ``python -m engine.bench train`` prices it in
  speed, and each run also records its tokens/s. The course preset's dropout follows from both
  (``engine.gpt.PRESETS``). It writes its own file, :data:`DROPOUT_RESULTS_FILE`
  (``--experiments dropout --out assets/lab_dropout.json``), in the same format: a results file
  describes one command (its settings, machine, wall time), the lesson's experiments ship with
  other settings (300 steps of batch 8) than the preset's (1000 of batch 4), and rerunning one
  experiment then never rewrites the others' numbers. :func:`load_results` reads either file; the
  Lab's experiments section shows :data:`EXPERIMENTS`, and its dropout control states this file's
  numbers (``engine.lab.settings.dropout_loss``).

Run ``python -m engine.lab.experiments --corpus tang --seeds 1,2,3 [--steps N] [--batch-size B]``
to train every distinct configuration of the lesson's experiments once per seed (a configuration
shared by two experiments, the course's 4-head learned-position causal model, is trained once) and
write a JSON results file with loss curves, final losses, per-position validation loss, samples,
settings, wall times, tokens/s and the machine. The file is rewritten after each run, so an
interrupted command leaves the runs it finished (``"complete": false``). Experiments and runs are named by stable keys
(``"heads"``, ``"heads_4"`` ...); the page gives them words.

With several seeds (format ``lab-experiments/3``) the seeds run in the outer loop, so an
interrupted command leaves every run with the seeds it finished. Each run then carries its
per-seed values (``seed_results``) and their mean and sample standard deviation
(``fixed_val_loss_mean``/``_std`` ...), and each experiment a ``comparisons`` list: for every pair
of runs, whether the difference of the mean validation losses exceeds the seed noise by the rule
:data:`NOISE_RULE` (twice the standard error of the difference, Welch's form; with three seeds a
rough screen, not a significance test). The losses compared are measured on the same fixed
validation windows for every run and seed (:func:`loss_by_position`), so the spread is the seeds'
(initialisation, batches, dropout), not the evaluation's.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import math
import os
import platform
import shlex
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F

from engine.chapter import LESSON_PROMPT
from engine.corpus import BUILTIN_CORPORA, FALLBACK_NAME, TANG_NAME, Corpus, load_corpus
from engine.device import configure_threads, describe_device, pick_device
from engine.gpt import GPT, POS_ENCODINGS, GPTConfig, config_params, preset
from engine.lab.models import LabModel, corpus_fingerprint, generate
from engine.training import Callbacks, TrainConfig, train

RESULTS_FILE = Path(__file__).resolve().parents[2] / "assets" / "lab_experiments.json"
#: Results of the "dropout" experiment (same format as :data:`RESULTS_FILE`), read by
#: ``engine.lab.settings.dropout_loss``.
DROPOUT_RESULTS_FILE = RESULTS_FILE.with_name("lab_dropout.json")
RESULTS_FORMAT = "lab-experiments/3"
#: Formats :func:`load_results` reads; /2 files (one seed) have no seed statistics.
READABLE_FORMATS = ("lab-experiments/2", RESULTS_FORMAT)
#: Key and formula of the rule that says whether two runs differ by more than the seed noise.
NOISE_RULE = {"key": "welch_2se",
              "formula": "abs(mean_a - mean_b) > 2 * sqrt(std_a**2 / n_a + std_b**2 / n_b)",
              "std": "sample standard deviation over seeds (ddof 1)",  # data key
              "loss": "fixed_val_loss"}
#: Validation windows of the fixed evaluation (:func:`loss_by_position`, seed 7): batches of 16.
FIXED_EVAL_BATCHES = 40
#: Characters generated for each run's samples, from the lesson's prompt (engine.chapter.LESSON_PROMPT).
SAMPLE_CHARS = 40


@dataclass(frozen=True)
class Run:
    """One training of an experiment: a stable key and the fields changed from the course preset."""

    key: str
    overrides: tuple[tuple[str, object], ...] = ()

    def config(self, base: GPTConfig | None = None) -> GPTConfig:
        """The run's GPTConfig: ``base`` (default: the "course" preset) with the overrides applied."""
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
    "positions": Experiment("positions", tuple(
        run for run in (
            Run("none", (("pos_encoding", "none"),)),
            Run("learned"),
            Run("rope", (("pos_encoding", "rope"),)),
            Run("sinusoidal", (("pos_encoding", "sinusoidal"),)),
        ) if dict(run.overrides).get("pos_encoding", "learned") in POS_ENCODINGS
    )),
    "causal": Experiment("causal", (
        Run("causal"),
        Run("no_mask", (("causal", False),)),
        Run("no_mask_rope", (("causal", False), ("pos_encoding", "rope"))),
    )),
}

#: Experiments that chose a preset rather than illustrate the lesson: not among the Lab's section-6
#: experiments, written to their own results file (:data:`DROPOUT_RESULTS_FILE`). Both rates are set
#: explicitly in every run, so a run means the same whatever the course preset's own dropout is.
PRESET_EXPERIMENTS: dict[str, Experiment] = {
    "dropout": Experiment("dropout", (
        Run("dropout_0", (("attn_dropout", 0.0), ("resid_dropout", 0.0))),
        Run("dropout_resid", (("attn_dropout", 0.0), ("resid_dropout", 0.1))),
        Run("dropout_both", (("attn_dropout", 0.1), ("resid_dropout", 0.1))),
    )),
}
#: Every experiment the command and :func:`run_experiment` know.
ALL_EXPERIMENTS: dict[str, Experiment] = {**EXPERIMENTS, **PRESET_EXPERIMENTS}


@torch.no_grad()
def loss_by_position(model: GPT, corpus: Corpus, batch_size: int = 16, batches: int = 10, seed: int = 0
                     ) -> torch.Tensor:
    """Mean validation cross-entropy at each position of the window, in eval mode.

    Generation only ever uses the prediction at the **last** position of the context, so
    ``loss_by_position(...)[-1]`` is the loss that matters for sampling; a model trained without
    the causal mask has a tiny loss at every other position (it reads the answer) and not there.

    Args:
        model: any GPT (eval mode is set for the measurement and restored).
        corpus: its validation split is used.
        batch_size, batches: windows per batch and number of batches (fixed by ``seed``).

    Returns:
        float32 tensor (block_size,) on the CPU: nats at positions 0 … block_size - 1.
    """
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    generator = torch.Generator().manual_seed(seed)
    total = torch.zeros(model.config.block_size)
    for _ in range(batches):
        x, y = corpus.get_batch("val", batch_size, model.config.block_size, generator, device)  # (B, T) each
        logits = model(x).logits  # (B, T, V)
        loss = F.cross_entropy(logits.transpose(1, 2), y, reduction="none")  # (B, V, T) vs (B, T) -> (B, T)
        total += loss.mean(dim=0).float().cpu()  # (T,)
    model.train(was_training)
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
    """Trains one run and measures it.

    ``fixed_val_loss`` is the mean of ``loss_by_position``: ``eval_batches`` batches of
    min(16, batch_size) validation windows drawn with seed 7, the same windows for every run and
    seed (``final_val_loss`` is the trainer's last estimate, on windows that depend on the seed).

    Returns:
        JSON-ready dict: ``key``, ``config`` (GPTConfig dict), ``params``, ``history`` (lists
        ``step``, ``train_loss``, ``val_loss``), ``final_train_loss``, ``final_val_loss``,
        ``loss_by_position`` (list of block_size floats), ``last_position_val_loss``,
        ``fixed_val_loss``, ``steps_done``, ``stopped``, ``wall_s``, ``tokens_per_s`` (training tokens per
        second of wall time, evaluations included), ``step_tokens_per_s`` (the same over the optimizer steps
        alone: forward, backward, clipping and update), ``device`` and ``samples``
        (greedy and sampled continuations of ``engine.chapter.LESSON_PROMPT``, temperature 0.8, top_k 20).
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
    lab_model = LabModel.from_result(result)
    samples = {
        "prompt": LESSON_PROMPT,
        "greedy": generate(lab_model, LESSON_PROMPT, SAMPLE_CHARS, temperature=0).text,
        "sampled": generate(lab_model, LESSON_PROMPT, SAMPLE_CHARS, temperature=0.8, top_k=20,
                            seed=train_config.seed).text,
    }
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
        "samples": samples,
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
    """Trains every run of one experiment on ``corpus`` and collects the results.

    Args:
        name: a key of :data:`ALL_EXPERIMENTS` ("heads", "positions", "causal", "dropout").
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


def machine_info() -> dict:
    """Where the results were measured: CPU, threads, device, Python and PyTorch versions."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            names = [line.split(":", 1)[1].strip() for line in f if line.startswith("model name")]
        if names:
            cpu = names[0]
    except OSError:
        pass
    return {"cpu": cpu, "cpu_count": os.cpu_count(), "torch_threads": torch.get_num_threads(),
            "device": describe_device(pick_device()), "platform": platform.platform(),
            "python": platform.python_version(), "torch": torch.__version__}


#: Per-run values summarised over seeds (mean and sample standard deviation).
SEED_FIELDS = ("final_train_loss", "final_val_loss", "fixed_val_loss", "last_position_val_loss",
               "tokens_per_s", "step_tokens_per_s")


def mean_std(values: list[float]) -> tuple[float, float]:
    """Mean and sample standard deviation (ddof 1; 0.0 for a single value) of a non-empty list.

    Raises:
        ValueError: for an empty list.
    """
    if not values:
        raise ValueError("mean_std needs at least one value")
    n = len(values)
    mean = sum(values) / n
    var = sum((v - mean) ** 2 for v in values) / (n - 1) if n > 1 else 0.0
    return mean, math.sqrt(var)


def summarize_seeds(per_seed: list[dict]) -> dict:
    """One run trained with several seeds, as one run dict.

    Args:
        per_seed: :func:`train_run` dicts of the same run (same key), one per seed, in seed order.

    Returns:
        The first seed's dict (its curves, samples and per-position losses are the ones plotted)
        plus ``seeds`` (list of int), ``n_seeds``, ``seed_results`` (per seed: ``seed``, the
        :data:`SEED_FIELDS` it has, ``wall_s``, ``history``) and ``<field>_mean`` / ``<field>_std`` for
        each of them (losses in nats, throughputs in tokens/s; rounded to 4 decimals).

    Raises:
        ValueError: for an empty list or runs with different keys.
    """
    if not per_seed or len({r["key"] for r in per_seed}) != 1:
        raise ValueError("summarize_seeds needs one or more results of the same run")
    summary = dict(per_seed[0])
    summary["seeds"] = [r.get("seed") for r in per_seed]
    summary["n_seeds"] = len(per_seed)
    summary["seed_results"] = [{"seed": r.get("seed"), **{f: r[f] for f in SEED_FIELDS if f in r},
                                "wall_s": r["wall_s"], "history": r["history"]} for r in per_seed]
    for field in SEED_FIELDS:
        values = [r[field] for r in per_seed if field in r]
        if values:
            mean, std = mean_std(values)
            summary[f"{field}_mean"], summary[f"{field}_std"] = round(mean, 4), round(std, 4)
    return summary


def compare_runs(runs: list[dict], field: str = NOISE_RULE["loss"]) -> list[dict]:
    """For every pair of runs, whether the difference of their means exceeds the seed noise.

    The rule is :data:`NOISE_RULE`: ``|mean_a - mean_b| > 2 * sqrt(std_a²/n_a + std_b²/n_b)``.
    Pairs where either run has fewer than two seeds get ``exceeds_noise`` None (no spread known).

    Args:
        runs: :func:`summarize_seeds` dicts (``<field>_mean``, ``<field>_std``, ``n_seeds``).
        field: the loss compared.

    Returns:
        list of dicts ``a``, ``b`` (run keys, in the runs' order), ``delta_mean`` (mean_b - mean_a,
        nats), ``noise`` (the right-hand side, nats, or None) and ``exceeds_noise`` (bool or None).
    """
    out = []
    for i, a in enumerate(runs):
        for b in runs[i + 1:]:
            if f"{field}_mean" not in a or f"{field}_mean" not in b:
                continue
            delta = b[f"{field}_mean"] - a[f"{field}_mean"]
            n_a, n_b = a.get("n_seeds", 1), b.get("n_seeds", 1)
            if n_a < 2 or n_b < 2:
                noise, exceeds = None, None
            else:
                noise = 2 * math.sqrt(a[f"{field}_std"] ** 2 / n_a + b[f"{field}_std"] ** 2 / n_b)
                exceeds = abs(delta) > noise
            out.append({"a": a["key"], "b": b["key"], "delta_mean": round(delta, 4),
                        "noise": None if noise is None else round(noise, 4), "exceeds_noise": exceeds})
    return out


def combine_seeds(by_seed: list[dict]) -> dict:
    """One experiment's results over seeds, from :func:`run_experiment` dicts (one per seed).

    Runs missing from a later seed (an interrupted command) are summarised over the seeds they have.

    Returns:
        ``run_experiment``'s dict with ``runs`` replaced by :func:`summarize_seeds` dicts, plus
        ``seeds`` and ``comparisons`` (:func:`compare_runs`).
    """
    first = by_seed[0]
    keys = [r["key"] for r in first["runs"]]
    runs = [summarize_seeds([r for exp in by_seed for r in exp["runs"] if r["key"] == key]) for key in keys]
    return {**first, "runs": runs, "seeds": [exp.get("seed") for exp in by_seed],
            "stopped": any(exp["stopped"] for exp in by_seed), "comparisons": compare_runs(runs)}


def parse_seeds(text: str) -> list[int]:
    """``"1,2,3"`` -> ``[1, 2, 3]``; raises ``argparse.ArgumentTypeError`` unless 1 to 16 distinct seeds >= 0."""
    try:
        seeds = [int(part) for part in text.split(",") if part.strip()]
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"seeds must be integers separated by commas, got {text!r}") from exc
    if not 1 <= len(seeds) <= 16 or len(set(seeds)) != len(seeds) or min(seeds) < 0:
        raise argparse.ArgumentTypeError(f"give 1 to 16 distinct non-negative seeds, got {text!r}")
    return seeds


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m engine.lab.experiments",
                                description="Train the lesson's experiments and write a results file.")
    p.add_argument("--out", default=str(RESULTS_FILE), help="JSON file to write (default: assets/lab_experiments.json)")
    p.add_argument("--steps", type=int, default=1000, help="optimizer steps per run (the lesson: 1000)")
    p.add_argument("--batch-size", type=int, default=8, help="windows of block_size characters per step")
    p.add_argument("--seeds", type=parse_seeds, default=[1337], help="comma-separated seeds, e.g. 1,2,3")
    p.add_argument("--seed", type=int, default=None, help="one seed (same as --seeds N)")
    p.add_argument("--corpus", default=TANG_NAME, choices=BUILTIN_CORPORA + (FALLBACK_NAME,))
    p.add_argument("--experiments", nargs="+", default=list(EXPERIMENTS), choices=list(ALL_EXPERIMENTS),
                   help="default: the lesson's (not 'dropout', which writes to its own file: --out "
                        "assets/lab_dropout.json)")
    p.add_argument("--eval-interval", type=int, default=None, help="steps between points of the loss curves")
    p.add_argument("--eval-batches", type=int, default=FIXED_EVAL_BATCHES,
                   help="batches of 16 validation windows in the fixed final evaluation")
    p.add_argument("--device", default=None, help="cpu, cuda, mps (default: best available)")
    p.add_argument("--threads", type=int, default=None, help="CPU threads (default: all cores but one)")
    return p


def print_table(results: dict) -> None:
    """Prints one line per run of each experiment (losses over seeds, wall time, tokens/s), then the comparisons."""
    for name, exp in results["experiments"].items():
        print(f"\n{name}")
        print(f"  {'run':<14} {'seeds':>5} {'train':>16} {'val (fixed)':>16} {'last pos':>16} {'wall s':>7} "
              f"{'tokens/s':>9} {'steps tok/s':>11}")
        for r in exp["runs"]:
            cells = [f"{r.get(f + '_mean', r.get(f, float('nan'))):7.4f} ± {r.get(f + '_std', 0.0):6.4f}"
                     for f in ("final_train_loss", "fixed_val_loss", "last_position_val_loss")]
            speeds = [r.get(f + "_mean", r.get(f, float("nan"))) for f in ("tokens_per_s", "step_tokens_per_s")]
            print(f"  {r['key']:<14} {r.get('n_seeds', 1):5d} {cells[0]:>16} {cells[1]:>16} {cells[2]:>16} "
                  f"{r['wall_s']:7.1f} {speeds[0]:9.0f} {speeds[1]:11.0f}")
        for c in exp.get("comparisons", []):
            print(f"    {c['b']} - {c['a']}: {c['delta_mean']:+.4f} (noise {c['noise']}) "
                  + {True: "exceeds the seed noise", False: "within the seed noise", None: "no spread"}[
                      c["exceeds_noise"]])


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    seeds = [args.seed] if args.seed is not None else args.seeds
    configure_threads(args.threads)
    corpus = load_corpus(args.corpus)
    if corpus.message:
        print(f"note: {corpus.message}")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    interval = {} if args.eval_interval is None else {"eval_interval": args.eval_interval}
    train_config = TrainConfig.for_steps(args.steps, args.batch_size, seed=seeds[0], device=args.device, **interval)
    settings = dataclasses.asdict(train_config)
    results = {
        "format": RESULTS_FORMAT,
        "command": "python -m engine.lab.experiments " + shlex.join(sys.argv[1:] if argv is None else argv),
        "created": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "machine": machine_info(),
        "settings": {**settings, "seeds": seeds, "fixed_eval": {"batches": args.eval_batches,
                                                                "batch_size": min(16, args.batch_size), "seed": 7},
                     "base_model": preset("course").to_dict()},
        "noise_rule": NOISE_RULE,
        "corpus": {"name": corpus.name, "chars": len(corpus.text), "vocab_size": corpus.vocab_size,
                   "train_tokens": len(corpus.train_ids), "val_tokens": len(corpus.val_ids)},
        "experiments": {},
        "complete": False,
        "total_wall_s": 0.0,
    }
    by_seed: dict[str, list[dict]] = {name: [] for name in args.experiments}
    started = time.perf_counter()

    def on_run_start(index: int, key: str, steps: int) -> None:
        print(f"[{time.perf_counter() - started:7.1f} s] {key}: {steps} steps of batch {args.batch_size}", flush=True)

    def on_eval(step: int, train_loss: float, val_loss: float) -> None:
        print(f"    step {step:5d}: train {train_loss:.4f}  val {val_loss:.4f}", flush=True)

    def write() -> None:
        results["experiments"] = {name: combine_seeds(done) for name, done in by_seed.items() if done}
        results["total_wall_s"] = round(time.perf_counter() - started, 1)
        out.write_text(json.dumps(results, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")

    distinct = 0
    for seed in seeds:
        run_cache: dict = {}
        for name in args.experiments:
            print(f"== {name}, seed {seed}", flush=True)
            outcome = run_experiment(
                name, corpus, args.steps, args.batch_size, seed, on_run_start=on_run_start,
                callbacks=Callbacks(on_eval=on_eval), run_cache=run_cache, device=args.device,
                eval_batches=args.eval_batches, eval_interval=args.eval_interval,
            )
            by_seed[name].append({**outcome, "seed": seed})
            write()
        distinct += len(run_cache)
    results["complete"] = True
    write()
    print_table(results)
    print(f"\n{distinct} distinct runs in {results['total_wall_s']:.0f} s; wrote {out}")
    return 0


def load_results(path: str | Path = RESULTS_FILE) -> dict | None:
    """Reads a results file written by :func:`main`; None when it does not exist.

    Raises:
        ValueError: if the file is not valid JSON or not a results file of this format.
    """
    path = Path(path)
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: not valid JSON ({exc})") from exc
    if not isinstance(data, dict) or data.get("format") not in READABLE_FORMATS:
        raise ValueError(f"{path}: not a results file of format {READABLE_FORMATS}")
    return data


if __name__ == "__main__":
    sys.exit(main())
