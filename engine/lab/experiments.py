"""The lesson's training experiments, and one beyond it, as functions; plus the command that ships their results.

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

Run ``python -m engine.lab.experiments --out assets/lab_experiments.json [--steps N] [--batch-size B]``
to train every distinct configuration once (a configuration shared by two experiments, the
course's 4-head learned-position causal model, is trained once) and write a JSON results file
with loss curves, final losses, per-position validation loss, samples, settings, wall times
and the machine. The file is rewritten after each run, so an interrupted command leaves the
runs it finished (``"complete": false``). Experiments and runs are named by stable keys
(``"heads"``, ``"heads_4"`` ...); the page gives them words.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
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
from engine.corpus import BUILTIN_CORPORA, FALLBACK_NAME, Corpus, load_corpus
from engine.device import configure_threads, describe_device, pick_device
from engine.gpt import GPT, POS_ENCODINGS, GPTConfig, config_params, preset
from engine.lab.models import LabModel, corpus_fingerprint, generate
from engine.training import Callbacks, TrainConfig, train

RESULTS_FILE = Path(__file__).resolve().parents[2] / "assets" / "lab_experiments.json"
RESULTS_FORMAT = "lab-experiments/2"
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
) -> dict:
    """Trains one run and measures it.

    Returns:
        JSON-ready dict: ``key``, ``config`` (GPTConfig dict), ``params``, ``history`` (lists
        ``step``, ``train_loss``, ``val_loss``), ``final_train_loss``, ``final_val_loss``,
        ``loss_by_position`` (list of block_size floats), ``last_position_val_loss``,
        ``steps_done``, ``stopped``, ``wall_s``, ``tokens_per_s``, ``device`` and ``samples``
        (greedy and sampled continuations of ``engine.chapter.LESSON_PROMPT``, temperature 0.8, top_k 20).
    """
    config = dataclasses.replace(run.config(base), vocab_size=corpus.vocab_size)
    result = train(config, corpus, train_config, callbacks=callbacks, stop=stop)
    per_position = loss_by_position(result.model, corpus, batch_size=min(16, train_config.batch_size), seed=7)
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
        "steps_done": result.steps_done,
        "stopped": result.stopped,
        "wall_s": round(result.wall_s, 1),
        "tokens_per_s": round(result.tokens_per_s, 1),
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
) -> dict:
    """Trains every run of one experiment on ``corpus`` and collects the results.

    Args:
        name: a key of :data:`EXPERIMENTS` ("heads", "positions", "causal").
        corpus: the training text.
        steps, batch_size, seed, device: the training settings (``TrainConfig.for_steps``).
        on_run_start: called as ``on_run_start(index, run key, steps)`` before each run (progress display).
        callbacks: passed to every ``train`` call.
        stop: an Event or a callable; when set (True), the current run stops early and no further run starts.
        run_cache: dict reused across calls, keyed by (GPTConfig, TrainConfig, corpus fingerprint):
            a configuration shared by two experiments is trained once.

    Returns:
        dict with ``name``, ``runs`` (list of :func:`train_run` dicts, in the
        experiment's order), ``steps``, ``batch_size``, ``corpus`` and ``stopped``.

    Raises:
        KeyError: for an unknown experiment name (the message lists the known ones).
    """
    if name not in EXPERIMENTS:
        raise KeyError(f"unknown experiment {name!r}; choose one of {sorted(EXPERIMENTS)}")
    experiment = EXPERIMENTS[name]
    train_config = TrainConfig.for_steps(steps, batch_size, seed=seed, device=device)
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
        outcome = train_run(run, corpus, train_config, callbacks=callbacks, stop=stop)
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


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m engine.lab.experiments",
                                description="Train the lesson's experiments and write a results file.")
    p.add_argument("--out", default=str(RESULTS_FILE), help="JSON file to write (default: assets/lab_experiments.json)")
    p.add_argument("--steps", type=int, default=1000, help="optimizer steps per run (the lesson: 1000)")
    p.add_argument("--batch-size", type=int, default=8, help="windows of block_size characters per step")
    p.add_argument("--seed", type=int, default=1337)
    p.add_argument("--corpus", default="tang300", choices=BUILTIN_CORPORA + (FALLBACK_NAME,))
    p.add_argument("--experiments", nargs="+", default=list(EXPERIMENTS), choices=list(EXPERIMENTS))
    p.add_argument("--device", default=None, help="cpu, cuda, mps (default: best available)")
    p.add_argument("--threads", type=int, default=None, help="CPU threads (default: all cores but one)")
    return p


def print_table(results: dict) -> None:
    """Prints one line per run of each experiment: losses and wall time."""
    for name, exp in results["experiments"].items():
        print(f"\n{name}")
        print(f"  {'run':<26} {'train':>7} {'val':>7} {'last pos':>8} {'wall s':>7}")
        for r in exp["runs"]:
            print(f"  {r['key']:<26} {r['final_train_loss']:7.4f} {r['final_val_loss']:7.4f} "
                  f"{r['last_position_val_loss']:8.4f} {r['wall_s']:7.1f}")


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    configure_threads(args.threads)
    corpus = load_corpus(args.corpus)
    if corpus.message:
        print(f"note: {corpus.message}")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    train_config = TrainConfig.for_steps(args.steps, args.batch_size, seed=args.seed, device=args.device)
    settings = dataclasses.asdict(train_config)
    results = {
        "format": RESULTS_FORMAT,
        "command": "python -m engine.lab.experiments " + shlex.join(sys.argv[1:] if argv is None else argv),
        "created": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "machine": machine_info(),
        "settings": {**settings, "base_model": preset("course").to_dict()},
        "corpus": {"name": corpus.name, "chars": len(corpus.text), "vocab_size": corpus.vocab_size,
                   "train_tokens": len(corpus.train_ids), "val_tokens": len(corpus.val_ids)},
        "experiments": {},
        "complete": False,
        "total_wall_s": 0.0,
    }
    run_cache: dict = {}
    started = time.perf_counter()

    def on_run_start(index: int, key: str, steps: int) -> None:
        print(f"[{time.perf_counter() - started:7.1f} s] {key}: {steps} steps of batch {args.batch_size}", flush=True)

    def on_eval(step: int, train_loss: float, val_loss: float) -> None:
        print(f"    step {step:5d}: train {train_loss:.4f}  val {val_loss:.4f}", flush=True)

    for name in args.experiments:
        print(f"== {name}", flush=True)
        results["experiments"][name] = run_experiment(
            name, corpus, args.steps, args.batch_size, args.seed, on_run_start=on_run_start,
            callbacks=Callbacks(on_eval=on_eval), run_cache=run_cache, device=args.device,
        )
        results["total_wall_s"] = round(time.perf_counter() - started, 1)
        out.write_text(json.dumps(results, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    results["complete"] = True
    out.write_text(json.dumps(results, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    print_table(results)
    print(f"\n{len(run_cache)} distinct runs in {results['total_wall_s']:.0f} s; wrote {out}")
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
    if not isinstance(data, dict) or data.get("format") != RESULTS_FORMAT:
        raise ValueError(f"{path}: not a {RESULTS_FORMAT} results file")
    return data


if __name__ == "__main__":
    sys.exit(main())
