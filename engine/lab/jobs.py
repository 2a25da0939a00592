"""Background jobs of the Lab: a training or a paired rerun of an exercise in a daemon thread, with a progress record.

A job waits for a slot of its runner (``engine.lab.runner``; one training at a time by default, handed
out first come, first served: a queued job's snapshot says its place in the queue), then runs
``engine.training.train`` (or the rerun's trainings) in its own thread with a
``threading.Event`` as stop flag. The training callbacks write into a lock-protected progress
record; a page polls :meth:`Job.snapshot`, a frozen copy. Stopping keeps what was learned:
``train`` ends with an evaluation and returns the model as it is.

A job ends with its reader. It holds a callable ``owner_alive`` (the page passes one that asks
Streamlit whether the reader's session is still connected) and stops itself, keeping its result,
once the owner has been gone for ``ORPHAN_GRACE_S`` seconds; a reader who reloads the page within
that time can take the job over (:meth:`Job.adopt`), from the same browser when the job knows which
browser started it (:attr:`Job.browser_id`). Readers who ask for the very same training while it is queued or
running follow it together (:meth:`Job.add_owner`, ``LabRunner.submit``): the job has one owner per browser, lives while
any of them is there, and a reader who stops it only leaves it while others remain (:meth:`Job.leave`). Every
job also stops at ``MAX_JOB_WALL_S`` seconds of
training (``engine.budget``), whatever it was asked to do. A job lets go of its training text once it
ends: the runner keeps finished jobs findable for a while, and an uploaded text belongs to its reader.

Threads, not processes: a child process that imports PyTorch to train would hold its own copy of
PyTorch before its first step (engine/budget_steps.json says what that costs); a thread shares
the one copy. The training draws no random number from the global generator
while it runs (``engine.training``), so it never makes a page wait, and no job changes a
process-wide setting such as the thread count.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import secrets
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from engine import budget
from engine.corpus import Corpus
from engine.gpt import GPTConfig
from engine.lab import experiments
from engine.lab.experiments.rerun import paired_rerun
from engine.lab.models import LabModel, corpus_fingerprint
from engine.training import Callbacks, TrainConfig, train

#: Job states. "queued": waiting for a free training slot; the last three are final.
STATES = ("queued", "running", "done", "stopped", "error")
FINAL_STATES = ("done", "stopped", "error")
#: Why a job stopped, when it was not asked to by its reader: keys for the page to translate.
#: "while_queued": stopped before it got a slot (nothing trained); "owner_left": the reader's session ended;
#: "wall_cap": it ran for MAX_JOB_WALL_S seconds; "by_reader": the reader pressed Stop.
STOP_REASONS = ("by_reader", "while_queued", "owner_left", "wall_cap")
#: Seconds a job outlives its reader's session, so that a reload can take it over.
ORPHAN_GRACE_S = 30.0
#: The environment variable an operator sets to the nice value (0 … 19) a Lab job's thread takes on Linux once it has
#: its slot: the training's threads then yield the cores to the readers' page runs when both want them, and take
#: what the pages leave. 0 leaves the training at the server's priority; another value, or none, means
#: :data:`DEFAULT_TRAINING_NICE`, which is 0: the class benchmark found no reliable gain for the moves and a slower
#: training (docs/architecture.md, "A training's priority is left to the operator").
TRAINING_NICE_ENV = "ATTENTION_TRAINING_NICE"
DEFAULT_TRAINING_NICE = 0
#: The largest nice value Linux has.
MAX_NICE = 19


def training_nice(environ: Mapping[str, str] = os.environ) -> int:
    """The nice value of :data:`TRAINING_NICE_ENV` in ``environ``: a whole number from 0 to :data:`MAX_NICE`, else
    :data:`DEFAULT_TRAINING_NICE`."""
    text = environ.get(TRAINING_NICE_ENV, "").strip()
    if text.isdigit() and int(text) <= MAX_NICE:
        return int(text)
    return DEFAULT_TRAINING_NICE


def lower_thread_priority(nice: int) -> int | None:
    """Raises the calling thread's nice value to ``nice`` (never lowers it; that needs privileges); Linux only.

    On Linux the nice value belongs to the thread, and the threads a thread starts inherit it, so PyTorch's intra-op
    threads that the job's thread starts for its training take it too (``sched(7)``); the process's other threads
    keep theirs. Returns the thread's nice value after the call, or None where it is left as it is (another
    system, ``nice`` 0, or a refusal)."""
    if not sys.platform.startswith("linux") or nice <= 0:
        return None
    try:
        tid = threading.get_native_id()
        current = os.getpriority(os.PRIO_PROCESS, tid)
        if current < nice:
            os.setpriority(os.PRIO_PROCESS, tid, min(nice, MAX_NICE))
        return os.getpriority(os.PRIO_PROCESS, tid)
    except OSError:
        return None


#: Steps the time left is measured over: the job's own latest steps (evaluations between them included), so the
#: estimate follows the server's load as it changes instead of the average since the start.
ETA_WINDOW_STEPS = 200


@dataclass(frozen=True)
class RunKey:
    """What determines a trained model: model config, training config, training text.

    Attributes:
        model: the GPT config with ``vocab_size`` set to the corpus's.
        train: the training config (steps, batch size, learning rate, seed, device ...).
        corpus: :func:`~engine.lab.models.corpus_fingerprint` of the text.
    """

    model: GPTConfig
    train: TrainConfig
    corpus: str

    @classmethod
    def make(cls, model: GPTConfig, train_config: TrainConfig, corpus: Corpus) -> RunKey:
        """The key of training ``model`` (its vocab_size replaced by the corpus's) on ``corpus``."""
        return cls(dataclasses.replace(model, vocab_size=corpus.vocab_size), train_config, corpus_fingerprint(corpus))

    def digest(self) -> str:
        """A short stable text id of the key (16 hex digits of a SHA-256 over its JSON)."""
        blob = json.dumps(
            {"model": self.model.to_dict(), "train": dataclasses.asdict(self.train), "corpus": self.corpus},
            sort_keys=True,
        )
        return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:16]


@dataclass(frozen=True)
class Snapshot:
    """A consistent copy of a job's progress, safe to read from any thread.

    Attributes:
        state: one of :data:`STATES`.
        step, steps: optimizer steps done and planned (in the current run of an experiment).
        history: evaluations so far, ``(step, train_loss, val_loss)`` in nats.
        eval_elapsed_s: for each evaluation of ``history``, the seconds since its run's training started.
        step_losses: training-batch loss of every step so far (nats).
        tokens_per_s: recent training throughput (exponential average), 0 before the first step.
        elapsed_s: seconds since training started (queue time excluded).
        eta_s: estimated seconds left (None before the first step or when final), from this job's own measured
            rate over its latest :data:`ETA_WINDOW_STEPS` steps (evaluations included), so it follows the load.
        stop_reason: for "stopped", one of :data:`STOP_REASONS`; else "".
        error: for "error", the exception's type and message (for logs); else "".
        running, limit: while queued, the trainings holding the runner's slots and how many it has.
        position: while queued, the job's place in the queue (1: it gets the next free slot); else 0.
        run_index, run_count, run_key: for experiments, which run of how many is training.
    """

    state: str
    step: int
    steps: int
    history: tuple[tuple[int, float, float], ...] = ()
    eval_elapsed_s: tuple[float, ...] = ()
    step_losses: tuple[float, ...] = ()
    tokens_per_s: float = 0.0
    elapsed_s: float = 0.0
    eta_s: float | None = None
    stop_reason: str = ""
    error: str = ""
    running: int = 0
    limit: int = 0
    position: int = 0
    run_index: int = 0
    run_count: int = 1
    run_key: str = ""

    @property
    def finished(self) -> bool:
        """True in a final state (done, stopped, error)."""
        return self.state in FINAL_STATES

    @property
    def fraction(self) -> float:
        """Share of the whole job done, in [0, 1] (experiments count their runs)."""
        within = self.step / self.steps if self.steps else 0.0
        if self.state == "done":
            return 1.0
        return min(1.0, (self.run_index + within) / max(1, self.run_count))


class _Progress:
    """The mutable progress record a job's thread writes and :meth:`Job.snapshot` copies, under one lock."""

    def __init__(self, steps: int, run_count: int = 1, clock: Callable[[], float] = time.perf_counter):
        self.clock = clock
        self.lock = threading.Lock()
        self.state = "queued"
        self.step = 0
        self.steps = steps
        self.history: list[tuple[int, float, float]] = []
        self.eval_elapsed_s: list[float] = []
        self.step_losses: list[float] = []
        self.tokens_per_s = 0.0
        self.started: float | None = None
        self.run_started: float | None = None
        self.ended: float | None = None
        self.stop_reason = ""
        self.error = ""
        self.run_index = 0
        self.run_count = run_count
        self.run_key = ""
        self.marks: deque[tuple[int, float]] = deque(maxlen=ETA_WINDOW_STEPS + 1)  # (step, clock) of recent steps

    def start(self) -> None:
        with self.lock:
            self.state = "running"
            self.started = self.run_started = self.clock()
            self.marks.clear()
            self.marks.append((0, self.started))

    def new_run(self, index: int, key: str, steps: int) -> None:
        with self.lock:
            self.run_index, self.run_key, self.steps = index, key, steps
            self.step, self.history, self.step_losses, self.tokens_per_s = 0, [], [], 0.0
            self.eval_elapsed_s = []
            self.run_started = self.clock()
            self.marks.clear()
            self.marks.append((0, self.run_started))

    def on_step(self, step: int, loss: float, tokens_per_s: float) -> None:
        with self.lock:
            self.step = step
            self.marks.append((step, self.clock()))
            self.step_losses.append(loss)
            self.tokens_per_s = tokens_per_s if self.tokens_per_s == 0 else 0.8 * self.tokens_per_s + 0.2 * tokens_per_s

    def on_eval(self, step: int, train_loss: float, val_loss: float) -> None:
        with self.lock:
            self.history.append((step, train_loss, val_loss))
            now = self.clock()
            self.eval_elapsed_s.append(now - (self.run_started or now))

    def callbacks(self) -> Callbacks:
        return Callbacks(self.on_step, self.on_eval)

    def snapshot(self) -> Snapshot:
        with self.lock:
            now = self.ended or self.clock()
            elapsed = now - self.started if self.started is not None else 0.0
            eta = None
            if self.state == "running" and self.step > 0 and len(self.marks) > 1:
                first_step, first_at = self.marks[0]
                # seconds per step over the latest steps up to now (evaluations and a step under way included)
                per_step = (now - first_at) / (self.step - first_step)
                left_in_run = per_step * (self.steps - self.step)
                eta = left_in_run + per_step * self.steps * (self.run_count - self.run_index - 1)
            return Snapshot(
                state=self.state, step=self.step, steps=self.steps, history=tuple(self.history),
                eval_elapsed_s=tuple(self.eval_elapsed_s), step_losses=tuple(self.step_losses),
                tokens_per_s=self.tokens_per_s, elapsed_s=elapsed,
                eta_s=eta, stop_reason=self.stop_reason, error=self.error, run_index=self.run_index,
                run_count=self.run_count, run_key=self.run_key,
            )


class JobHost(Protocol):
    """What a job needs from its runner (``engine.lab.runner.LabRunner`` is one): a queue, slots, counts, caches."""

    max_concurrent: int
    registry: object
    experiment_cache: object
    run_cache: object

    def job_waiting(self, job: Job) -> None: ...
    def acquire_slot(self, job: Job, timeout: float) -> bool: ...
    def job_ended(self, job: Job, got_slot: bool) -> None: ...
    def running_count(self) -> int: ...
    def queue_position(self, job: Job) -> int: ...


def _always_alive() -> bool:
    return True


class Job:
    """A piece of work in a daemon thread that waits for a training slot of its runner.

    Subclasses implement :meth:`_work`, which receives the progress record and a stop check
    (a callable, True when the job must stop) and returns ``(result, stopped early)``. Read
    progress with :meth:`snapshot`, ask it to stop with :meth:`stop`, and take :attr:`result`
    once the snapshot is final.

    Args:
        runner: the :class:`JobHost` (a ``LabRunner``) whose slots it waits for.
        steps: planned steps (of each run).
        run_count: runs (experiments train several models).
        owner_alive: True while the reader who started the job is still there (default: always).
        max_wall_s: seconds of training after which the job stops itself (default: ``budget.MAX_JOB_WALL_S``).
        orphan_grace_s: seconds the job outlives its last owner before it stops.
        browser_id: an opaque id of the browser that started the job (see ``LabRunner.submit``), or None.

    Attributes:
        token: a random id (32 hex digits) a page may keep, to find the job again after a reload.
    """

    def __init__(self, runner: JobHost, steps: int, run_count: int = 1,
                 owner_alive: Callable[[], bool] | None = None, max_wall_s: float = budget.MAX_JOB_WALL_S,
                 orphan_grace_s: float = ORPHAN_GRACE_S, browser_id: str | None = None):
        self.runner = runner
        self._starter = browser_id
        self.stop_event = threading.Event()
        self.token = secrets.token_hex(16)
        self.max_wall_s = max_wall_s
        self.orphan_grace_s = orphan_grace_s
        # one (liveness check, browser id) per owner: the reader who started the job first, then those who joined
        self._owners: list[tuple[Callable[[], bool], str | None]] = [(owner_alive or _always_alive, browser_id)]
        self._owner_lock = threading.Lock()
        self._orphaned_since: float | None = None
        self._stop_reason = "by_reader"
        self._progress = _Progress(steps, run_count)
        self.result = None
        self._thread = threading.Thread(target=self._run, name=f"lab-{type(self).__name__}", daemon=True)

    def start(self) -> Job:
        """Starts the thread (it first waits for a free slot); returns the job."""
        self.runner.job_waiting(self)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Asks the job to stop: before the next step when training, at once when queued."""
        self.stop_event.set()

    def join(self, timeout: float | None = None) -> bool:
        """Waits for the thread to end; True if it did within ``timeout`` seconds."""
        self._thread.join(timeout)
        return not self._thread.is_alive()

    @property
    def browser_id(self) -> str | None:
        """The opaque id of the browser that started the job, or None (it stays the starter's after others join)."""
        return self._starter

    @property
    def browser_ids(self) -> tuple[str | None, ...]:
        """The browsers that follow the job now: the starter's first (while it follows), then those who joined."""
        with self._owner_lock:
            return tuple(browser for _alive, browser in self._owners)

    @staticmethod
    def _alive(check: Callable[[], bool]) -> bool:
        try:
            return bool(check())
        except Exception:  # a liveness check that fails says nothing: keep the job
            return True

    def owner_present(self) -> bool:
        """Whether any owner's session is still there (asks each owner's ``owner_alive`` callable)."""
        with self._owner_lock:
            checks = [alive for alive, _browser in self._owners]
        return any(self._alive(alive) for alive in checks)

    def add_owner(self, owner_alive: Callable[[], bool] | None, browser_id: str | None) -> bool:
        """Makes another reader an owner of this job: they follow it, and it lives while any owner is there.

        ``LabRunner.submit`` calls it for a reader who asks for exactly the settings of a job that is queued or
        running (the same ``RunKey``), instead of queuing the same training a second time.

        Args:
            owner_alive: the new owner's liveness check (None: always alive).
            browser_id: the new owner's browser; without one, no join (owners are told apart by browser).

        Returns:
            True when the caller now owns the job too; False without a browser id, when that browser already
            owns it, or when the job has finished or been asked to stop.
        """
        if browser_id is None or self.stop_event.is_set() or self._progress.ended is not None:
            return False
        with self._owner_lock:
            if any(browser == browser_id for _alive, browser in self._owners):
                return False
            self._owners.append((owner_alive or _always_alive, browser_id))
            self._orphaned_since = None
        return True

    def leave(self, browser_id: str | None) -> bool:
        """The Stop of one owner: that owner leaves the job, which goes on while other owners remain.

        Args:
            browser_id: the leaving owner's browser.

        Returns:
            True when the job goes on for other owners who are still there; False when it was asked to stop
            (the caller was its only owner, or the others have gone).
        """
        with self._owner_lock:
            others = [(alive, browser) for alive, browser in self._owners if browser != browser_id]
            if any(self._alive(alive) for alive, _browser in others):
                self._owners = others  # unchanged when the caller was no owner: not the caller's to stop
                return True
        self.stop()
        return False

    def adopt(self, owner_alive: Callable[[], bool], browser_id: str | None = None) -> bool:
        """Hands one owner's place in the job to a new session (a reader who reloaded the page), if that owner is gone.

        Args:
            owner_alive: the new session's liveness check.
            browser_id: the browser asking; a job that knows its owners' browsers goes only to one of them.

        Returns:
            True when the caller now holds that owner's place; False when no owner came from this browser (a
            link someone shared cannot take the job), when that owner is still there, or when the job ended
            more than ``orphan_grace_s`` seconds ago (an old link cannot fetch a finished model).
        """
        ended = self._progress.ended
        if ended is not None and time.perf_counter() - ended > self.orphan_grace_s:
            return False
        with self._owner_lock:
            places = [i for i, (_alive, browser) in enumerate(self._owners)
                      if browser == browser_id or (browser is None and i == 0)]
            if not places or self._alive(self._owners[places[0]][0]):
                return False
            self._owners[places[0]] = (owner_alive, self._owners[places[0]][1])
            self._orphaned_since = None
        return True

    def should_stop(self) -> bool:
        """The stop check ``train`` calls before each step: asked to, owner gone too long, or wall cap reached."""
        if self.stop_event.is_set():
            return True
        now = time.perf_counter()
        snap_started = self._progress.started
        if snap_started is not None and now - snap_started >= self.max_wall_s:
            return self._end("wall_cap")
        if self.owner_present():
            self._orphaned_since = None
        else:
            self._orphaned_since = self._orphaned_since or now
            if now - self._orphaned_since >= self.orphan_grace_s:
                return self._end("owner_left")
        return False

    def _end(self, reason: str) -> bool:
        self._stop_reason = reason
        self.stop_event.set()
        return True

    def snapshot(self) -> Snapshot:
        """The current progress; a queued job's snapshot says how many trainings hold the slots and its place."""
        snap = self._progress.snapshot()
        if snap.state == "queued":
            snap = dataclasses.replace(snap, running=self.runner.running_count(), limit=self.runner.max_concurrent,
                                       position=self.runner.queue_position(self))
        return snap

    def _run(self) -> None:
        p = self._progress
        got_slot = False
        state, reason, error = "error", "", ""
        try:
            while not (got_slot := self.runner.acquire_slot(self, timeout=0.1)):
                if self.should_stop():
                    state = "stopped"
                    reason = "while_queued" if self._stop_reason == "by_reader" else self._stop_reason
                    return
            lower_thread_priority(training_nice())  # before the work starts PyTorch's threads for this one
            p.start()
            self.result, stopped = self._work(p, self.should_stop)
            state = "stopped" if stopped else "done"
            reason = self._stop_reason if stopped else ""
        except Exception as exc:  # reported in the snapshot; the page shows that it failed
            state, error = "error", f"{type(exc).__name__}: {exc}"
        finally:
            self._release()
            self.runner.job_ended(self, got_slot)
            with p.lock:  # last: a final snapshot means the slot is free again
                p.state, p.stop_reason, p.error, p.ended = state, reason, error, time.perf_counter()

    def _release(self) -> None:
        """Drops what the job needed only while it worked (its training text), once it ends."""

    def _work(self, progress: _Progress, should_stop: Callable[[], bool]) -> tuple[object, bool]:
        """Does the work; returns ``(result, stopped early)``."""
        raise NotImplementedError


class TrainingJob(Job):
    """Trains one GPT (``engine.training.train``) in the background.

    Attributes:
        key: the run's :class:`RunKey`.
        result: a :class:`~engine.lab.models.LabModel` once done or stopped after at least one
            step; None while running, after an error, or when stopped while queued. Done runs are
            also put in the runner's registry.
    """

    def __init__(self, runner: JobHost, model_config: GPTConfig, train_config: TrainConfig, corpus: Corpus,
                 **options):
        super().__init__(runner, train_config.steps, **options)
        self.key = RunKey.make(model_config, train_config, corpus)
        self.corpus = corpus

    def _work(self, progress: _Progress, should_stop: Callable[[], bool]) -> tuple[LabModel | None, bool]:
        result = train(self.key.model, self.corpus, self.key.train, callbacks=progress.callbacks(), stop=should_stop)
        if result.steps_done == 0:  # stopped before the first step: nothing was learned
            return None, True
        lab_model = LabModel.from_result(result)
        if not result.stopped:
            self.runner.registry.put(self.key, lab_model)
        return lab_model, result.stopped

    def _release(self) -> None:
        self.corpus = None


class PairedRerunJob(Job):
    """Runs the Lab page's paired rerun of one comparison (``engine.lab.experiments.rerun.paired_rerun``) in the
    background, ``2 * len(seeds)`` trainings in one job (one slot, one time cap).

    Attributes:
        cache_key: the key its result is stored under in the runner's experiment cache.
        result: the :class:`~engine.lab.experiments.rerun.PairedRerun` once done, or once stopped after at least
            one seed's two runs (then with those seeds only, and not cached); None otherwise.
    """

    def __init__(self, runner: JobHost, exercise: str, key: str, corpus: Corpus, budget: experiments.Budget,
                 seeds: Sequence[int], val_windows: int, **options):
        super().__init__(runner, budget.steps, run_count=2 * len(seeds), **options)
        self.exercise, self.key, self.corpus, self.budget = exercise, key, corpus, budget
        self.seeds, self.val_windows = tuple(seeds), val_windows
        self.cache_key = (exercise, key, corpus_fingerprint(corpus), budget, self.seeds, val_windows)

    def _work(self, progress: _Progress, should_stop: Callable[[], bool]) -> tuple[object, bool]:
        outcome = paired_rerun(self.exercise, self.key, self.corpus, self.budget, self.seeds, self.val_windows,
                               on_run_start=progress.new_run, callbacks=progress.callbacks(), stop=should_stop,
                               run_cache=self.runner.run_cache)
        if outcome is None or not outcome.complete:  # stopped: the seeds it finished, kept for this reader only
            return outcome, True
        self.runner.experiment_cache.put(self.cache_key, outcome)
        return outcome, False

    def _release(self) -> None:
        self.corpus = None


def steps_by_cap(snap: Snapshot, max_wall_s: float) -> int | None:
    """The step a running single training reaches when the time cap stops it, at its measured pace (``eta_s``), or
    None when it is expected to end before the cap (or is not running, or has no estimate yet).

    Args:
        snap: the job's snapshot; its ``eta_s`` spreads the time left over the steps left.
        max_wall_s: the job's cap (seconds of training, ``Job.max_wall_s``).
    """
    if snap.state != "running" or snap.eta_s is None or snap.run_count != 1 or snap.step >= snap.steps:
        return None
    left_s = max(0.0, max_wall_s - snap.elapsed_s)
    if snap.eta_s <= left_s:
        return None
    per_step = snap.eta_s / (snap.steps - snap.step)  # seconds per step at the measured pace
    return min(snap.steps - 1, snap.step + int(left_s / per_step))


def first_below(history: Sequence[tuple[int, float, float]], eval_elapsed_s: Sequence[float],
                line: float) -> tuple[int, float, float] | None:
    """The first evaluation whose validation loss is below ``line`` (nats), as (step, val_loss, seconds).

    ``eval_elapsed_s`` holds, for each evaluation of ``history``, the seconds since the training started
    (``Snapshot.eval_elapsed_s``); an evaluation without its time is not counted. Returns None while no
    evaluation is below the line.
    """
    for (step, _train, val), seconds in zip(history, eval_elapsed_s, strict=False):
        if val < line:
            return step, val, seconds
    return None


def wait_until_finished(job: Job, timeout: float, poll: float = 0.05) -> Snapshot:
    """Polls ``job.snapshot()`` until it is final or ``timeout`` seconds pass; returns the last snapshot."""
    deadline = time.monotonic() + timeout
    snap = job.snapshot()
    while not snap.finished and time.monotonic() < deadline:
        time.sleep(poll)
        snap = job.snapshot()
    return snap
