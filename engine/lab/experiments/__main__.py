"""``python -m engine.lab.experiments``: trains the lesson's exercises into a results file, resumably.

Every run of the chosen exercises and seeds (``definitions.plan``: complete paired sets first) that the file
does not hold yet is trained in a worker process, up to ``--jobs`` at once with ``--threads`` torch threads
each, and stored the moment it ends; run the same command again to continue after a stop. ``--list`` prints
what is done and what is left without training.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import importlib
import shlex
import sys
from pathlib import Path

from engine.bench.machine import load_average, machine_info
from engine.corpus import BUILTIN_CORPORA, FALLBACK_NAME, TANG_NAME
from engine.device import pick_device
from engine.lab.experiments.definitions import EXERCISE_BUDGET, EXERCISES, Task, plan
from engine.lab.experiments.store import (
    EXERCISES_FILE,
    ResultsBusyError,
    ResultsFile,
    ResultsMismatchError,
    now,
    read_file,
)
from engine.lab.experiments.workers import CorpusSpec, WorkerSettings, run_tasks
from engine.lab.models import corpus_fingerprint
from engine.presets import PRESETS, preset

#: Most worker processes and threads per worker the command accepts.
MAX_JOBS = 64
MAX_THREADS = 256


def parse_seeds(text: str) -> list[int]:
    """``"1,2,3"`` -> ``[1, 2, 3]``; ``argparse.ArgumentTypeError`` unless 1 to 16 distinct seeds in [0, 2**31)."""
    try:
        seeds = [int(part) for part in text.split(",") if part.strip()]
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"seeds must be integers separated by commas, got {text!r}") from exc
    if not 1 <= len(seeds) <= 16 or len(set(seeds)) != len(seeds) or min(seeds) < 0 or max(seeds) >= 2**31:
        raise argparse.ArgumentTypeError(f"give 1 to 16 distinct seeds in [0, 2**31), got {text!r}")
    return seeds


def _bounded(low: int, high: int):
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from exc
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"expected an integer in [{low}, {high}], got {value}")
        return value
    return parse


def build_parser() -> argparse.ArgumentParser:
    """The command's options."""
    budget = EXERCISE_BUDGET
    p = argparse.ArgumentParser(prog="python -m engine.lab.experiments",
                                description="Train the lesson's exercises (heads, positions, no causal mask) into a "
                                            "results file; run again to resume.")
    p.add_argument("--out", default=str(EXERCISES_FILE), help="results file (default: assets/lab_exercises.json)")
    p.add_argument("--seeds", type=parse_seeds, default=[1, 2, 3], help="comma-separated seeds (default 1,2,3)")
    p.add_argument("--exercises", nargs="+", default=list(EXERCISES), choices=list(EXERCISES))
    p.add_argument("--jobs", type=_bounded(1, MAX_JOBS), default=1, help="worker processes at once")
    p.add_argument("--threads", type=_bounded(1, MAX_THREADS), default=1, help="torch threads per worker")
    p.add_argument("--device", default=None, choices=("cpu", "cuda", "mps"), help="default: the best available")
    p.add_argument("--corpus", default=TANG_NAME, choices=BUILTIN_CORPORA + (FALLBACK_NAME,))
    p.add_argument("--corpus-file", type=Path, default=None, help="train on this UTF-8 text instead of --corpus")
    p.add_argument("--base", default="course", choices=sorted(PRESETS), help="the model the runs vary")
    p.add_argument("--steps", type=_bounded(1, 1_000_000), default=budget.steps)
    p.add_argument("--batch-size", type=_bounded(1, 4096), default=budget.batch_size)
    p.add_argument("--lr", type=float, default=budget.learning_rate, help="peak learning rate")
    p.add_argument("--warmup", type=_bounded(0, 1_000_000), default=budget.warmup_steps)
    p.add_argument("--list", action="store_true", help="print what is done and left; train or write nothing")
    return p


#: The modules whose code decides a run's numbers; each session records their digests.
CODE_MODULES = ("engine.gpt", "engine.positions", "engine.sampling", "engine.training", "engine.corpus",
                "engine.tokenizer", "engine.lab.models", "engine.lab.generation", "engine.lab.poem_forms",
                "engine.lab.experiments.definitions", "engine.lab.experiments.measurement")


def code_digests() -> dict[str, str]:
    """{module: the first 16 hex digits of the SHA-256 of its source file} for :data:`CODE_MODULES`."""
    return {name: hashlib.sha256(Path(importlib.import_module(name).__file__).read_bytes()).hexdigest()[:16]
            for name in CODE_MODULES}


def print_summary(data: dict) -> None:
    """One line per exercise run (mean loss over seeds) and per paired comparison."""
    for name, exercise in data["exercises"].items():
        print(f"\n{name} (seeds complete: {exercise['seeds_complete']})")
        for key in exercise["runs"]:
            runs = [r for r in data["runs"].values() if r["key"] == key]
            if runs:
                losses = " ".join(f"{r['val_loss']:.4f}" for r in runs)
                last = sum(r["val_loss_by_position"][-1] for r in runs) / len(runs)
                print(f"  {key:<16} val {losses} (seeds {[r['seed'] for r in runs]}), last position {last:.4f}, "
                      f"{runs[0]['device']}")
        for c in exercise["comparisons"]:
            interval = c["t_interval"]
            text = "" if interval is None else f"  95% t [{interval[0]:+.4f}, {interval[1]:+.4f}]"
            detect = "" if c["detectable"] is None else f"  detectable {c['detectable']:.4f}"
            print(f"  {c['b']} - {c['a']}: {c['mean']:+.4f} nats over seeds {c['seeds']}{text}{detect}  {c['verdict']}")


def print_event(kind: str, task: Task, details: dict) -> None:
    """One log line per event of ``workers.run_tasks``."""
    stamp = now()
    if kind == "start":
        print(f"{stamp} start {task.run_id} (pid {details['pid']})", flush=True)
    elif kind == "done":
        result = details["result"]
        print(f"{stamp} done {task.run_id}: val {result['val_loss']:.4f} nats, {result['wall_s']:.0f} s", flush=True)
    elif kind == "failed":
        last = (details["traceback"] or "").strip().splitlines()[-1:] or [f"exitcode {details['exitcode']}"]
        print(f"{stamp} FAILED {task.run_id}: {last[0]}", flush=True)
    else:
        print(f"{stamp} stopped {task.run_id}: it is trained again next time", flush=True)


def main(argv: list[str] | None = None) -> int:
    """Runs the command; returns the exit status (0 when nothing failed, 1 when a run failed, 2 for bad settings)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if not 0 < args.lr <= 1:
        parser.error(f"--lr must be in (0, 1], got {args.lr}")
    try:
        budget = dataclasses.replace(EXERCISE_BUDGET, steps=args.steps, batch_size=args.batch_size,
                                     learning_rate=args.lr, warmup_steps=min(args.warmup, args.steps))
        device = str(pick_device(args.device))
    except ValueError as exc:
        parser.error(str(exc))
    if args.corpus_file is not None:
        if not args.corpus_file.is_file():
            parser.error(f"--corpus-file {args.corpus_file} is not a file")
        spec = CorpusSpec(args.corpus_file.name, args.corpus_file.read_bytes())
    else:
        spec = CorpusSpec(args.corpus)
    corpus = spec.load()
    base = preset(args.base, vocab_size=corpus.vocab_size)
    if base.block_size > corpus.max_block_size:
        parser.error(f"corpus {corpus.name!r} is too short for block_size {base.block_size}")
    tasks = plan(args.seeds, args.exercises)
    settings = {
        "budget": budget.to_dict(),
        "base_model": base.to_dict(),
        "corpus": {"name": corpus.name, "fingerprint": corpus_fingerprint(corpus), "vocab_size": corpus.vocab_size,
                   "train_tokens": len(corpus.train_ids), "val_tokens": len(corpus.val_ids),
                   "message": corpus.message},
        "validation": "whole_split",  # data key: every non-overlapping window (measurement.split_loss)
        "init": "paired_with_course",  # data key: measurement.paired_model
        "batches": "seeded_by_run_seed",  # data key: the same batches for every run of a seed
        "exercises": args.exercises,
        "seeds": args.seeds,
    }
    if args.list:
        existing = read_file(Path(args.out)) or {"runs": {}, "exercises": {}}
        left = [t.run_id for t in tasks if t.run_id not in existing["runs"]]
        print(f"{len(tasks)} runs planned, {len(tasks) - len(left)} in {args.out}; left: {' '.join(left) or 'none'}")
        print_summary(existing)
        return 0
    command = "python -m engine.lab.experiments " + shlex.join(sys.argv[1:] if argv is None else argv)
    session = {"command": command, "started": now(), "jobs": args.jobs, "threads": args.threads,
               "machine": machine_info(device), "load_start": load_average(), "code": code_digests()}
    try:
        results = ResultsFile(Path(args.out), settings, [t.run_id for t in tasks], session)
    except (ResultsMismatchError, ResultsBusyError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    left = [t.run_id for t in tasks if t.run_id not in results.done]
    print(f"{len(tasks)} runs planned, {len(tasks) - len(left)} in {args.out}, {len(left)} to train "
          f"({budget.steps} steps of batch {budget.batch_size}, lr {budget.learning_rate:g}, {device}, "
          f"{args.jobs} job(s) x {args.threads} thread(s))", flush=True)
    worker = WorkerSettings(spec, budget, base, args.device, args.threads)
    counts = run_tasks(tasks, results, worker, jobs=args.jobs, on_event=print_event)
    print(f"{counts['done']} trained, {counts['skipped']} already there, {counts['failed']} failed, "
          f"{counts['left']} left; wrote {args.out}", flush=True)
    results.end_session(ended=now(), load_end=load_average())
    results.close()
    print_summary(results.data)
    return 1 if counts["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
