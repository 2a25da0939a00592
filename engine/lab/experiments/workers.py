"""Runs the exercises' tasks in worker processes, at most ``jobs`` at a time, one process per run.

Each run trains in a fresh process (``multiprocessing``'s "spawn" start method by default), which sets its own
torch thread count, loads the corpus, trains, and sends its result back through a pipe before it exits. The
parent stores every result the moment it arrives (``store.ResultsFile.add_run``). A worker that dies (killed,
out of memory, an exception) loses only its own run: the parent records the failure and carries on with the
others, and the next command tries that run again.
"""

from __future__ import annotations

import multiprocessing
import signal
import traceback
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait

from engine.bench.machine import machine_info
from engine.corpus import Corpus, corpus_from_bytes, load_corpus
from engine.device import configure_threads, pick_device
from engine.gpt import GPTConfig
from engine.lab.experiments.definitions import Budget, Task
from engine.lab.experiments.measurement import measure_task
from engine.lab.experiments.store import ResultsFile
from engine.training import Callbacks


@dataclass(frozen=True)
class CorpusSpec:
    """How a worker gets the corpus: a built-in name, or a text's bytes and name (``corpus_from_bytes``)."""

    name: str
    data: bytes | None = None

    def load(self) -> Corpus:
        """The corpus (``engine.corpus.load_corpus`` or ``corpus_from_bytes``)."""
        return load_corpus(self.name) if self.data is None else corpus_from_bytes(self.data, self.name)


@dataclass(frozen=True)
class WorkerSettings:
    """What every worker of one command shares."""

    corpus: CorpusSpec
    budget: Budget
    base: GPTConfig
    device: str | None
    threads: int
    progress: bool = True  # each worker prints the trainer's loss estimates to its stdout


def train_in_worker(conn: Connection, task: Task, settings: WorkerSettings) -> None:
    """A worker's body: trains ``task`` and sends ``("ok", result)``, or ``("error", traceback)``, then closes.

    ``result`` is ``measurement.measure_task``'s dict with ``machine`` (``engine.bench.machine.machine_info`` for
    the device used) added.
    """
    try:
        configure_threads(settings.threads)
        corpus = settings.corpus.load()
        def on_eval(step: int, train_loss: float, val_loss: float) -> None:
            print(f"  {task.run_id} step {step}: train {train_loss:.4f} val {val_loss:.4f}", flush=True)

        progress = Callbacks(on_eval=on_eval) if settings.progress else None
        result = measure_task(task, corpus, settings.budget, settings.base, settings.device, progress)
        conn.send(("ok", {**result, "machine": machine_info(pick_device(settings.device))}))
    except Exception:  # reported to the parent, which records it as the run's failure
        conn.send(("error", traceback.format_exc()))
    finally:
        conn.close()


@dataclass
class _Running:
    task: Task
    process: multiprocessing.process.BaseProcess
    conn: Connection


class _Terminated(Exception):
    pass


def _raise_terminated(signum, frame):
    raise _Terminated


def run_tasks(tasks: Iterable[Task], results: ResultsFile, settings: WorkerSettings, jobs: int = 1,
              on_event: Callable[[str, Task, dict], None] | None = None, start_method: str = "spawn",
              target: Callable[[Connection, Task, WorkerSettings], None] = train_in_worker) -> dict[str, int]:
    """Trains every task not yet in ``results``, up to ``jobs`` worker processes at once, storing each as it ends.

    A SIGTERM or Ctrl-C to this process ends the workers it started and returns (their runs are tried again
    next time).

    Args:
        tasks: in the order to start them.
        results: the results file; tasks whose run id it holds are skipped.
        settings: handed to every worker.
        jobs: worker processes at once (>= 1).
        on_event: called as ``on_event(kind, task, details)`` with kind ``"start"`` (details: ``pid``),
            ``"done"`` (``result``), ``"failed"`` (``exitcode``, ``traceback``) or ``"terminated"`` (a task left
            unfinished).
        start_method: ``multiprocessing``'s start method for the workers.
        target: the workers' function (:func:`train_in_worker`).

    Returns:
        Counts: ``skipped`` (already in the file), ``done``, ``failed``, ``left`` (not finished: terminated).

    Raises:
        ValueError: if jobs < 1.
    """
    if jobs < 1:
        raise ValueError(f"jobs must be >= 1, got {jobs}")
    emit = on_event or (lambda kind, task, details: None)
    context = multiprocessing.get_context(start_method)
    tasks = list(tasks)
    todo = [task for task in tasks if task.run_id not in results.done]
    counts = {"skipped": len(tasks) - len(todo), "done": 0, "failed": 0, "left": 0}
    running: list[_Running] = []
    previous = signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        while todo or running:
            while todo and len(running) < jobs:
                task = todo.pop(0)
                parent, child = context.Pipe(duplex=False)
                process = context.Process(target=target, args=(child, task, settings), name=task.run_id, daemon=True)
                process.start()
                child.close()
                running.append(_Running(task, process, parent))
                emit("start", task, {"pid": process.pid})
            wait([r.conn for r in running] + [r.process.sentinel for r in running])
            for entry in list(running):
                message = None
                if entry.conn.poll():
                    try:
                        message = entry.conn.recv()
                    except EOFError:
                        message = None
                elif entry.process.is_alive():
                    continue
                entry.process.join()
                entry.conn.close()
                running.remove(entry)
                if message is not None and message[0] == "ok":
                    results.add_run(message[1])
                    counts["done"] += 1
                    emit("done", entry.task, {"result": message[1]})
                else:
                    failure = {"exitcode": entry.process.exitcode,
                               "traceback": None if message is None else message[1]}
                    results.add_failure(entry.task.run_id, failure)
                    counts["failed"] += 1
                    emit("failed", entry.task, failure)
    except (_Terminated, KeyboardInterrupt):
        counts["left"] = len(todo) + len(running)
        for entry in running:
            entry.process.terminate()
        for entry in running:
            entry.process.join()
            emit("terminated", entry.task, {})
    finally:
        signal.signal(signal.SIGTERM, previous)
    return counts
