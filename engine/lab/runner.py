"""The app-wide part of the Lab: a registry of finished models, caches, the training slots, the jobs by token.

:class:`LabRunner` is created once per app (the page keeps it in ``st.cache_resource``). Every
session submits its jobs here, so the limit on concurrent trainings holds across sessions; a job
submitted while the limit is reached waits in the "queued" state, in a first-come-first-served queue
(a job's snapshot says its place), not in a race of whoever polls first when a slot frees.

One browser, one training: a page may pass an opaque ``browser_id`` (the same in every tab of one
browser); a browser that already has a queued or running job gets :class:`BrowserBusy` instead of a
second place in the queue, so several tabs cannot hold the slot in turn. A job started with a
``browser_id`` is handed over after a reload only to that browser (:meth:`LabRunner.reclaim`,
:meth:`LabRunner.reattach`): a link someone shared, token or not, takes nothing.

One training for the same settings: a reader who asks for exactly the settings and text of a training that
is queued or running (the same ``RunKey``) follows that job as one more owner (``Job.add_owner``) instead of
queuing it again; it counts as that browser's job, and the reader's Stop only takes them out of it while
others follow it (``Job.leave``). A class that clicks the same one-click training trains it once.

Isolation: a reader's own model lives in that reader's session. The registry only ever answers
a request with the model that *the same* settings on *the same* text produce (training is seeded),
so one reader can never obtain a model that another reader's different settings, text or stopped
run produced. Stopped runs are therefore never put in the registry.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from engine.corpus import Corpus
from engine.gpt import GPTConfig
from engine.lab.experiments import Budget
from engine.lab.experiments.rerun import PairedRerun
from engine.lab.jobs import Job, PairedRerunJob, RunKey, TrainingJob
from engine.lab.models import LabModel
from engine.lab.settings import TrainingPlan
from engine.training import TrainConfig


class LRU:
    """A small thread-safe least-recently-used mapping.

    Args:
        capacity: most entries kept; putting one more drops the least recently used.

    Raises:
        ValueError: if capacity < 1.
    """

    def __init__(self, capacity: int):
        if capacity < 1:
            raise ValueError(f"capacity must be >= 1, got {capacity}")
        self.capacity = capacity
        self._data: OrderedDict = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key, default=None):
        """The value for ``key`` (now the most recently used), or ``default``."""
        with self._lock:
            if key not in self._data:
                return default
            self._data.move_to_end(key)
            return self._data[key]

    def put(self, key, value) -> None:
        """Stores ``value``; drops the least recently used entry when over capacity."""
        with self._lock:
            self._data[key] = value
            self._data.move_to_end(key)
            while len(self._data) > self.capacity:
                self._data.popitem(last=False)

    def __getitem__(self, key):
        """The value for ``key``; raises ``KeyError`` when absent."""
        with self._lock:
            self._data.move_to_end(key)
            return self._data[key]

    def __setitem__(self, key, value) -> None:
        self.put(key, value)

    def keys(self) -> list:
        """Keys from least to most recently used."""
        with self._lock:
            return list(self._data)

    def __len__(self) -> int:
        with self._lock:
            return len(self._data)

    def __contains__(self, key) -> bool:
        with self._lock:
            return key in self._data


class BrowserBusy(Exception):
    """A browser asked for a second training while its first is queued or running.

    Attributes:
        job: the browser's job that is queued or running.
    """

    def __init__(self, job: Job, message: str = ""):
        super().__init__(message)
        self.job = job


@dataclass
class Submitted:
    """What :meth:`LabRunner.submit` returns: a new job, a job of the same settings the caller now follows
    (``joined``), or a model found in the registry."""

    job: TrainingJob | None = None
    model: LabModel | None = None
    joined: bool = False

    @property
    def reused(self) -> bool:
        """True when the registry already held a model for these settings."""
        return self.model is not None


@dataclass
class LabRunner:
    """The app-wide part of the Lab: model registry, experiment cache, concurrency limit, jobs by token.

    Args:
        max_concurrent: trainings (or paired reruns) running at once; more wait queued.
        registry_size: finished models kept (LRU).
        experiment_cache_size: paired reruns kept (LRU); twice as many single runs are kept, so the reference
            runs two comparisons of the same settings share are trained once.
        jobs_kept: jobs findable by token (LRU), so a reader who reloads can take theirs over.
    """

    max_concurrent: int = 1
    registry_size: int = 6
    experiment_cache_size: int = 8
    jobs_kept: int = 32
    registry: LRU = field(init=False)
    experiment_cache: LRU = field(init=False)
    run_cache: LRU = field(init=False)

    def __post_init__(self) -> None:
        if self.max_concurrent < 1:
            raise ValueError(f"max_concurrent must be >= 1, got {self.max_concurrent}")
        self.registry = LRU(self.registry_size)
        self.experiment_cache = LRU(self.experiment_cache_size)
        self.run_cache = LRU(2 * self.experiment_cache_size)  # single runs of the reruns, shared between comparisons
        self._jobs = LRU(self.jobs_kept)
        self._by_browser = LRU(self.jobs_kept)  # browser_id -> its latest jobs, newest last
        self._changed = threading.Condition(threading.RLock())  # guards the queue and the running list
        self._queue: deque[Job] = deque()  # waiting jobs, first submitted first
        self._running: list[Job] = []

    # --- the JobHost side: called by jobs from their threads ----------------------------------------------------
    def job_waiting(self, job: Job) -> None:
        """A job was started: it joins the end of the queue and becomes findable by its token (and browser)."""
        self._jobs.put(job.token, job)
        with self._changed:
            self._queue.append(job)
            if job.browser_id is not None:
                latest = self._by_browser.get(job.browser_id, ())
                self._by_browser.put(job.browser_id, (*latest[-3:], job))

    def acquire_slot(self, job: Job, timeout: float) -> bool:
        """Gives ``job`` a slot within ``timeout`` seconds if it is first in the queue and a slot is free.

        Returns:
            True when the job now holds a slot (it left the queue); False after ``timeout``.
        """
        deadline = time.monotonic() + timeout
        with self._changed:
            while not (self._queue and self._queue[0] is job and len(self._running) < self.max_concurrent):
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._changed.wait(left)
            self._queue.popleft()
            self._running.append(job)
            self._changed.notify_all()  # the next job in the queue is now first
            return True

    def job_ended(self, job: Job, got_slot: bool) -> None:
        """A job ended: its slot is free again, or it left the queue without one."""
        with self._changed:
            if got_slot:
                self._running.remove(job)
            elif job in self._queue:
                self._queue.remove(job)
            self._changed.notify_all()

    def queue_position(self, job: Job) -> int:
        """The job's place in the queue (1: next to get a slot), or 0 when it is not waiting."""
        with self._changed:
            for place, waiting in enumerate(self._queue, start=1):
                if waiting is job:
                    return place
            return 0

    # --- the page's side -----------------------------------------------------------------------------------------
    def running_count(self) -> int:
        """Jobs holding a slot now."""
        with self._changed:
            return len(self._running)

    def waiting_count(self) -> int:
        """Jobs started but waiting for a slot."""
        with self._changed:
            return len(self._queue)

    def browser_job(self, browser_id: str | None) -> Job | None:
        """The queued or running job started from this browser, or None (always None without an id)."""
        if browser_id is None:
            return None
        with self._changed:
            return next((j for j in (*self._running, *self._queue) if browser_id in j.browser_ids), None)

    def _check_browser(self, browser_id: str | None) -> None:
        busy = self.browser_job(browser_id)
        if busy is not None:
            raise BrowserBusy(busy, f"browser {browser_id} already has a {busy.snapshot().state} job")

    def lookup(self, model_config: GPTConfig, train_config: TrainConfig, corpus: Corpus) -> LabModel | None:
        """The registry's model for exactly these settings and text, or None."""
        return self.registry.get(RunKey.make(model_config, train_config, corpus))

    def submit(self, plan: TrainingPlan, corpus: Corpus, owner_alive: Callable[[], bool] | None = None,
               browser_id: str | None = None, **job_options) -> Submitted:
        """Starts a training job for a checked plan, unless the registry holds the model it gives or the same
        training is already queued or running (then the caller follows that job: ``Submitted.joined``).

        Args:
            plan: from ``engine.lab.settings.plan_training`` for ``corpus``.
            corpus: the training text.
            owner_alive: True while the submitting reader's session lasts (see ``engine.lab.jobs``).
            browser_id: an opaque id, the same in every tab of one browser (None: no per-browser limit, and
                no following of another reader's job).
            job_options: ``max_wall_s`` or ``orphan_grace_s`` for a new job (a followed job keeps its own).

        Raises:
            ValueError: if the plan has problems (a training the caps or the text refuse) or
                was made for another text (its vocab_size differs).
            BrowserBusy: if ``browser_id`` already has a queued or running job (a model the registry
                holds is still returned).
        """
        if not plan.ok:
            raise ValueError(f"this training may not start: {[p.key for p in plan.problems]}")
        if plan.model.vocab_size != corpus.vocab_size:
            raise ValueError(f"the plan's vocab_size {plan.model.vocab_size} is not corpus {corpus.name!r}'s")
        found = self.lookup(plan.model, plan.train, corpus)
        if found is not None:
            return Submitted(model=found)
        key = RunKey.make(plan.model, plan.train, corpus)
        with self._changed:  # the check and the place in the queue at once: two tabs cannot both pass
            self._check_browser(browser_id)
            same = next((j for j in (*self._running, *self._queue) if isinstance(j, TrainingJob) and j.key == key),
                        None)
            if same is not None and same.add_owner(owner_alive, browser_id):
                latest = self._by_browser.get(browser_id, ())
                self._by_browser.put(browser_id, (*latest[-3:], same))
                return Submitted(job=same, joined=True)
            job = TrainingJob(self, plan.model, plan.train, corpus, owner_alive=owner_alive, browser_id=browser_id,
                              **job_options)
            return Submitted(job=job.start())

    def submit_rerun(self, exercise: str, key: str, corpus: Corpus, budget: Budget, seeds: Sequence[int],
                     val_windows: int, owner_alive: Callable[[], bool] | None = None, browser_id: str | None = None,
                     **job_options) -> tuple[PairedRerunJob | None, PairedRerun | None]:
        """Runs a paired rerun (``engine.lab.experiments.rerun.paired_rerun``) in the background, or returns the
        result of the same rerun that this server already finished.

        Returns:
            ``(job, None)`` for a new job, or ``(None, result)`` from the cache.

        Raises:
            BrowserBusy: as :meth:`submit` (a rerun's trainings take the same slot).
        """
        job = PairedRerunJob(self, exercise, key, corpus, budget, seeds, val_windows, owner_alive=owner_alive,
                             browser_id=browser_id, **job_options)
        cached = self.experiment_cache.get(job.cache_key)
        if cached is not None:
            return None, cached
        with self._changed:
            self._check_browser(browser_id)
            return job.start(), None

    def find(self, token: str) -> Job | None:
        """The job with this token (kept for the last ``jobs_kept`` jobs), or None."""
        if not isinstance(token, str) or len(token) != 32:
            return None
        return self._jobs.get(token)

    def reattach(self, token: str, owner_alive: Callable[[], bool], browser_id: str | None = None) -> Job | None:
        """The job with this token, now owned by the caller, if its owner's session has ended.

        A job whose owner is still connected is not handed to anyone else, and a job started from a
        known browser only to that browser (``Job.adopt``): a token copied into a shared link takes nothing.
        """
        job = self.find(token)
        if job is None or not job.adopt(owner_alive, browser_id):
            return None
        return job

    def reclaim(self, browser_id: str | None, owner_alive: Callable[[], bool],
                kind: type[Job] = TrainingJob) -> Job | None:
        """The latest job of ``kind`` this browser started, now owned by the caller, if its owner's session ended.

        A reader who reloads the page gets a new session in the same browser; the page calls this
        instead of keeping a token in the URL, so no link carries anything that finds the job.

        Returns:
            The job (queued, running, or ended within its grace time), or None (always None without an id).
        """
        if browser_id is None:
            return None
        job = next((j for j in reversed(self._by_browser.get(browser_id, ())) if isinstance(j, kind)), None)
        if job is None or not job.adopt(owner_alive, browser_id):
            return None
        return job
