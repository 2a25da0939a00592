"""``python -m engine.bench queue``: several readers press the Lab's one-click training at once; how should
the server share its cores between their trainings?

The class case of the teacher's page: ``--trainers`` readers (default 5) submit the Lab's one-click training
(preset :data:`engine.presets.DEFAULT_PRESET` with its own steps, batch and learning rate, on the Lab's default
corpus) within the same second, each with a seed of its own, as five students who moved the seed would. For
each queue policy of ``--policies`` (``LabRunner.max_concurrent``: 1 trains one at a time, the others wait in
the queue; 5 trains all five at once on the same cores), one after the other in the same run, with the server's
thread setting (``engine.device.configure_threads``), it polls every job's snapshot as the page does and
reports per job:

- **wait**: seconds from the click to the first step (the queue);
- **to bigram**: seconds of training until the validation loss first goes below the corpus's bigram line (the
  page's star), and from the click;
- **end**: seconds of training and from the click, the steps done, and whether the 15-minute cap stopped it;
- **the estimate's error**: the page's "time left" (``Snapshot.eta_s``, from the job's own latest steps) taken
  when the job had done 10 %, 25 % and 50 % of its steps, against the time it then really took, as
  ``estimate / actual - 1``; and the estimate shown before the click (``budget.estimate``) against the
  training's real duration.

For each policy: when the last job ended (the makespan) and the mean time from click to end. Writes
``--json`` (default ``runs/bench_queue.json``) with the machine and its fp32 matmul ceiling, measured before
and after, once after each policy (``complete`` says whether every policy ran). The policies run one after the
other, so a load that changes during the run favours the later ones: read them beside the load average.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch

from engine import budget
from engine.baselines import corpus_baselines
from engine.bench.machine import header_lines, machine_info
from engine.bench.train import matmul_gflops
from engine.corpus import DEFAULT_CORPUS, load_corpus
from engine.device import configure_threads
from engine.lab.jobs import Snapshot, first_below
from engine.lab.runner import LabRunner
from engine.lab.settings import DEFAULT_SEED, plan_training
from engine.presets import DEFAULT_PRESET, PRESETS, preset

#: This command prints the machine and its measured ceiling itself (see engine.bench.__main__).
PRINTS_MACHINE = True
#: Shares of a job's steps at which its time-left estimate is compared with the time it then took.
ESTIMATE_AT = (0.10, 0.25, 0.50)
#: Seconds between two polls of the jobs' snapshots (the page polls every second).
POLL_S = 0.5


@dataclass
class JobRecord:
    """What one job's polled snapshots say: when it started, its estimates on the way, how it ended."""

    seed: int
    estimate_before_s: float
    started_s: float | None = None  # from the click, first poll that saw it running
    estimates: dict[float, tuple[float, float]] = field(default_factory=dict)  # share -> (elapsed_s, eta_s)
    final: Snapshot | None = None
    ended_s: float | None = None  # from the click

    def observe(self, snap: Snapshot, since_click_s: float) -> None:
        """Takes one polled snapshot ``since_click_s`` seconds after the click."""
        if snap.state == "running" and self.started_s is None:
            self.started_s = since_click_s - snap.elapsed_s
        if snap.state == "running" and snap.eta_s is not None and snap.steps:
            for share in ESTIMATE_AT:
                if share not in self.estimates and snap.step >= share * snap.steps:
                    self.estimates[share] = (snap.elapsed_s, snap.eta_s)
        if snap.finished and self.final is None:
            self.final, self.ended_s = snap, since_click_s

    def row(self, bigram: float) -> dict:
        """The job's figures (seconds; errors as estimate / actual - 1)."""
        snap = self.final
        crossing = first_below(snap.history, snap.eval_elapsed_s, bigram)
        started = self.started_s if self.started_s is not None else self.ended_s
        errors = {f"{share:.2f}": eta / (snap.elapsed_s - elapsed) - 1
                  for share, (elapsed, eta) in self.estimates.items() if snap.elapsed_s > elapsed}
        return {"seed": self.seed, "state": snap.state, "stop_reason": snap.stop_reason, "steps_done": snap.step,
                "steps": snap.steps, "wait_s": started, "training_s": snap.elapsed_s, "end_s": self.ended_s,
                "bigram_step": crossing[0] if crossing else None,
                "bigram_training_s": crossing[2] if crossing else None,
                "bigram_click_s": started + crossing[2] if crossing else None,
                "final_val_loss": snap.history[-1][2] if snap.history else None,
                "estimate_errors": errors,
                "estimate_before_s": self.estimate_before_s,
                "estimate_before_error": self.estimate_before_s / snap.elapsed_s - 1 if snap.elapsed_s else None}


def run_policy(max_concurrent: int, trainers: int, steps: int, corpus, bigram: float, batch_size: int | None = None,
               learning_rate: float | None = None) -> dict:
    """``trainers`` one-click trainings submitted at once to a runner with ``max_concurrent`` slots (the preset's
    batch size and peak learning rate unless given: to compare a candidate preset on several seeds).

    Returns:
        ``{"max_concurrent", "jobs": [JobRecord.row ...], "makespan_s", "mean_end_s"}``.

    Raises:
        RuntimeError: if a job ends in error.
    """
    training = PRESETS[DEFAULT_PRESET].training
    runner = LabRunner(max_concurrent=max_concurrent, registry_size=trainers)
    plans = [plan_training(preset(DEFAULT_PRESET), corpus, steps, batch_size or training.batch_size,
                           learning_rate or training.learning_rate, seed=DEFAULT_SEED + i) for i in range(trainers)]
    records = [JobRecord(seed=p.train.seed, estimate_before_s=p.estimate.seconds) for p in plans]
    clicked = time.monotonic()
    jobs = [runner.submit(plan, corpus, browser_id=f"bench-{i}").job for i, plan in enumerate(plans)]
    while any(r.final is None for r in records):
        time.sleep(POLL_S)
        now = time.monotonic() - clicked
        for job, record in zip(jobs, records, strict=True):
            record.observe(job.snapshot(), now)
    failed = [r.final.error for r in records if r.final.state == "error"]
    if failed:
        raise RuntimeError(f"a training failed: {failed[0]}")
    rows = [r.row(bigram) for r in records]
    ends = [row["end_s"] for row in rows]
    return {"max_concurrent": max_concurrent, "jobs": rows, "makespan_s": max(ends),
            "mean_end_s": statistics.fmean(ends)}


def _cell(value: float | None, width: int, digits: int = 0) -> str:
    return f"{'—':>{width}}" if value is None else f"{value:{width}.{digits}f}"


def print_policy(result: dict) -> None:
    """One table per policy: a row per job, then the makespan and the mean end."""
    print(f"\nmax_concurrent = {result['max_concurrent']} (seconds; 'click' counts from the click, 'train' from the "
          "job's first step)")
    shares = [f"{s:.2f}" for s in ESTIMATE_AT]
    print(f"{'seed':>5} {'wait':>6} {'bigram train':>12} {'bigram click':>12} {'end train':>9} {'end click':>9} "
          f"{'steps':>9} {'val loss':>8} " + " ".join(f"{'eta err @' + s:>12}" for s in shares)
          + f" {'before err':>10}")
    for row in result["jobs"]:
        errors = " ".join(_cell(None if row["estimate_errors"].get(s) is None else 100 * row["estimate_errors"][s],
                                11) + "%" for s in shares)
        before = row["estimate_before_error"]
        print(f"{row['seed']:5d} {_cell(row['wait_s'], 6)} {_cell(row['bigram_training_s'], 12)} "
              f"{_cell(row['bigram_click_s'], 12)} {_cell(row['training_s'], 9)} {_cell(row['end_s'], 9)} "
              f"{row['steps_done']:>4}/{row['steps']:<4} {_cell(row['final_val_loss'], 8, 3)} {errors} "
              f"{_cell(None if before is None else 100 * before, 9)}%"
              + (f"  stopped: {row['stop_reason']}" if row["state"] == "stopped" else ""))
    print(f"last end {result['makespan_s']:.0f} s after the click; mean end {result['mean_end_s']:.0f} s")


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m engine.bench queue", description=__doc__.split("\n")[0])
    p.add_argument("--trainers", type=int, default=5, help="trainings submitted at once (default 5)")
    p.add_argument("--policies", default="1,5", help="comma-separated max_concurrent values (default 1,5)")
    p.add_argument("--steps", type=int, default=None, help="steps of each training (default: the preset's)")
    p.add_argument("--batch-size", type=int, default=None, help="windows per step (default: the preset's)")
    p.add_argument("--learning-rate", type=float, default=None, help="peak learning rate (default: the preset's)")
    p.add_argument("--threads", type=int, default=None, help="torch threads (default: the server's setting)")
    p.add_argument("--json", default="runs/bench_queue.json", help="where to write the results")
    args = p.parse_args(argv)
    policies = [int(v) for v in args.policies.split(",")]
    if args.trainers < 1 or min(policies) < 1 or (args.steps is not None and args.steps < 1):
        p.error("--trainers, --policies and --steps must be positive")
    configure_threads(args.threads)
    corpus = load_corpus(DEFAULT_CORPUS)
    bigram = corpus_baselines(corpus).bigram.val_nats
    steps = args.steps or PRESETS[DEFAULT_PRESET].training.steps
    machine = machine_info()
    ceiling_before = matmul_gflops()
    for line in header_lines(machine, ceiling_before):
        print(line, flush=True)
    batch = args.batch_size or PRESETS[DEFAULT_PRESET].training.batch_size
    rate = args.learning_rate or PRESETS[DEFAULT_PRESET].training.learning_rate
    print(f"{args.trainers} one-click trainings ({DEFAULT_PRESET}, {steps} steps of batch {batch}, peak lr {rate:g}, "
          f"corpus {corpus.name}) "
          f"submitted at once; bigram val loss {bigram:.4f}; cap {budget.MAX_JOB_WALL_S} s of training", flush=True)
    out = Path(args.json)
    out.parent.mkdir(parents=True, exist_ok=True)
    results = []

    def write(ceiling_after: float | None) -> None:  # after each policy: a run cut short keeps what it measured
        out.write_text(json.dumps({
            "benchmark": "queue", "created": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            "machine": machine, "torch": torch.__version__,
            "ceiling_gflops": {"before": ceiling_before, "after": ceiling_after}, "preset": DEFAULT_PRESET,
            "steps": steps, "batch_size": args.batch_size or PRESETS[DEFAULT_PRESET].training.batch_size,
            "learning_rate": args.learning_rate or PRESETS[DEFAULT_PRESET].training.learning_rate,
            "trainers": args.trainers, "corpus": corpus.name, "bigram_val": bigram,
            "cap_s": budget.MAX_JOB_WALL_S, "policies": results, "complete": len(results) == len(policies),
        }, indent=1) + "\n")

    for max_concurrent in policies:
        results.append(run_policy(max_concurrent, args.trainers, steps, corpus, bigram, args.batch_size,
                                  args.learning_rate))
        print_policy(results[-1])
        machine["load_average_1min_after"] = machine_info()["load_average_1min"]
        write(None)
    ceiling_after = matmul_gflops()
    print(f"\nceiling before {ceiling_before:.1f}, after {ceiling_after:.1f} GFLOP/s; load "
          f"{machine['load_average_1min']} before / {machine['load_average_1min_after']} after")
    write(ceiling_after)
    print(f"written to {out}")
    return 0
