"""The app-wide part of the Lab: a registry of finished models, caches, the training slots, the jobs by token.

:class:`LabRunner` is created once per app (the page keeps it in ``st.cache_resource``). Every
session submits its jobs here, so the limit on concurrent trainings holds across sessions; a job
submitted while the limit is reached waits in the "queued" state.

Isolation: a reader's own model lives in that reader's session. The registry only ever answers
a request with the model that *the same* settings on *the same* text produce (training is seeded),
so one reader can never obtain a model that another reader's different settings, text or stopped
run produced. Stopped runs are therefore never put in the registry.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

from engine.corpus import Corpus
from engine.gpt import GPTConfig
from engine.lab.jobs import ExperimentJob, Job, RunKey, TrainingJob
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


@dataclass
class Submitted:
    """What :meth:`LabRunner.submit` returns: a new job, or a model found in the registry."""

    job: TrainingJob | None = None
    model: LabModel | None = None

    @property
    def reused(self) -> bool:
        """True when the registry already held a model for these settings."""
        return self.model is not None


@dataclass
class LabRunner:
    """The app-wide part of the Lab: model registry, experiment cache, concurrency limit, jobs by token.

    Args:
        max_concurrent: trainings (or experiment jobs) running at once; more wait queued.
        registry_size: finished models kept (LRU).
        experiment_cache_size: experiment reruns kept (LRU); twice as many single runs are kept, so a
            configuration two experiments share is trained once.
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
        self.run_cache = LRU(2 * self.experiment_cache_size)  # single experiment runs, shared between experiments
        self._jobs = LRU(self.jobs_kept)
        self._slots = threading.BoundedSemaphore(self.max_concurrent)
        self._lock = threading.Lock()
        self._running = 0
        self._waiting = 0

    # --- the JobHost side: called by jobs from their threads ----------------------------------------------------
    def acquire_slot(self, timeout: float) -> bool:
        """Takes a training slot within ``timeout`` seconds; True when taken."""
        return self._slots.acquire(timeout=timeout)

    def job_waiting(self, job: Job) -> None:
        """A job was started and waits for a slot; it becomes findable by its token."""
        self._jobs.put(job.token, job)
        with self._lock:
            self._waiting += 1

    def job_running(self, job: Job) -> None:
        """A job got its slot."""
        with self._lock:
            self._waiting -= 1
            self._running += 1

    def job_ended(self, job: Job, got_slot: bool) -> None:
        """A job ended; its slot (if it had one) is free again."""
        with self._lock:
            if got_slot:
                self._running -= 1
            else:
                self._waiting -= 1
        if got_slot:
            self._slots.release()

    # --- the page's side -----------------------------------------------------------------------------------------
    def running_count(self) -> int:
        """Jobs holding a slot now."""
        with self._lock:
            return self._running

    def waiting_count(self) -> int:
        """Jobs started but waiting for a slot."""
        with self._lock:
            return self._waiting

    def lookup(self, model_config: GPTConfig, train_config: TrainConfig, corpus: Corpus) -> LabModel | None:
        """The registry's model for exactly these settings and text, or None."""
        return self.registry.get(RunKey.make(model_config, train_config, corpus))

    def submit(self, plan: TrainingPlan, corpus: Corpus, owner_alive: Callable[[], bool] | None = None,
               **job_options) -> Submitted:
        """Starts a training job for a checked plan, unless the registry holds the model it gives.

        Args:
            plan: from ``engine.lab.settings.plan_training`` for ``corpus``.
            corpus: the training text.
            owner_alive: True while the submitting reader's session lasts (see ``engine.lab.jobs``).
            job_options: ``max_wall_s`` or ``orphan_grace_s`` for the job.

        Raises:
            ValueError: if the plan has problems (a training the caps or the text refuse) or
                was made for another text (its vocab_size differs).
        """
        if not plan.ok:
            raise ValueError(f"this training may not start: {[p.key for p in plan.problems]}")
        if plan.model.vocab_size != corpus.vocab_size:
            raise ValueError(f"the plan's vocab_size {plan.model.vocab_size} is not corpus {corpus.name!r}'s")
        found = self.lookup(plan.model, plan.train, corpus)
        if found is not None:
            return Submitted(model=found)
        job = TrainingJob(self, plan.model, plan.train, corpus, owner_alive=owner_alive, **job_options)
        return Submitted(job=job.start())

    def submit_experiment(self, name: str, corpus: Corpus, steps: int, batch_size: int, seed: int = 1337,
                          owner_alive: Callable[[], bool] | None = None, **job_options
                          ) -> tuple[ExperimentJob | None, dict | None]:
        """Reruns an experiment in the background, or returns its cached result.

        Returns:
            ``(job, None)`` for a new job, or ``(None, result)`` from the cache.
        """
        job = ExperimentJob(self, name, corpus, steps, batch_size, seed, owner_alive=owner_alive, **job_options)
        cached = self.experiment_cache.get(job.cache_key)
        if cached is not None:
            return None, cached
        return job.start(), None

    def find(self, token: str) -> Job | None:
        """The job with this token (kept for the last ``jobs_kept`` jobs), or None."""
        if not isinstance(token, str) or len(token) != 32:
            return None
        return self._jobs.get(token)

    def reattach(self, token: str, owner_alive: Callable[[], bool]) -> Job | None:
        """The job with this token, now owned by the caller, if its owner's session has ended.

        A reader who reloads the page gets a new session; the page keeps the job's token in the
        URL and calls this. A job whose owner is still connected is not handed to anyone else.
        """
        job = self.find(token)
        if job is None or not job.adopt(owner_alive):
            return None
        return job
