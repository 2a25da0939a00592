"""The GPT Lab's engine: training jobs in background threads, an app-wide model registry, model helpers.

The Lab page (``views/lab.py``) lets a reader train the course's character-level GPT
(``engine.gpt``) while the page keeps answering. Everything here is plain Python and PyTorch
(no Streamlit), so it can be tested without a server:

* :class:`LabRunner` is created once per app (the page keeps it in ``st.cache_resource``). It
  holds the **registry** of finished models, keyed by :class:`RunKey` (model config, training
  config, corpus fingerprint) with a small LRU cap, and a **limit on concurrent trainings**
  across all sessions (a semaphore): a job submitted while the limit is reached waits in the
  "queued" state and its snapshot says why.
* :class:`TrainingJob` runs ``engine.training.train`` in a daemon thread with a
  ``threading.Event`` as stop flag. The training callbacks write into a lock-protected progress
  record; the page polls :meth:`Job.snapshot`, a frozen copy (step, loss history, tokens/s,
  ETA, state). Stopping keeps what was learned: ``train`` ends with an evaluation and returns
  the model as it is.
* :class:`ExperimentJob` runs one of the lesson's experiments (``engine.lab_experiments``) the
  same way, for the page's "rerun live" buttons.
* :class:`LabModel` is what a page holds for a reader: a trained, uploaded or shipped model with
  its tokenizer, summary and a content id (SHA-256 of the weights), so caches keyed by that id
  can never mix two readers' different models.

Isolation: a reader's own model lives in that reader's session. The registry only ever answers
a request with the model that *the same* settings on *the same* text produce (training is seeded),
so one reader can never obtain a model that another reader's different settings, text or
stopped run produced. Stopped runs are therefore never put in the registry.

Random numbers: ``train`` seeds PyTorch's global generator (initial weights) and dropout draws
its masks from it, while other pages seed the same generator chapter-style under
``engine.rng``'s process-wide lock. A job therefore holds that lock whenever it may draw: from
its start through the first step, during every step (released between steps, so a page waits
at most one step), and from the last evaluation until ``train`` has restored the generator.
Pages that seed under that lock (``engine.rng.uses_global_rng``) keep their chapter numbers while
a training runs, and do not change the training's dropout masks either.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path

import torch

from engine.corpus import Corpus, CorpusError, corpus_from_bytes
from engine.gpt import GPT, GPTConfig
from engine.rng import global_rng_lock, uses_global_rng
from engine.tokenizer import CharTokenizer
from engine.training import (
    Callbacks,
    CheckpointError,
    TrainConfig,
    TrainResult,
    checkpoint_from_bytes,
    load_checkpoint,
    train,
)

#: Where the model the app ships lives (made by ``python -m engine.train ... --out``).
SHIPPED_MODEL = Path(__file__).resolve().parents[1] / "assets" / "models" / "course_tang300"
#: Job states. "queued": waiting for a free training slot; the last three are final.
STATES = ("queued", "running", "done", "stopped", "error")
FINAL_STATES = ("done", "stopped", "error")


# ---------------------------------------------------------------------------------------------
# Keys and models
# ---------------------------------------------------------------------------------------------


def corpus_fingerprint(corpus: Corpus) -> str:
    """First 16 hex digits of the SHA-256 of the corpus's training text (UTF-8).

    Two corpora with the same text (and hence the same records, split and vocabulary) get the
    same fingerprint, whatever their names.
    """
    return hashlib.sha256(corpus.text.encode("utf-8")).hexdigest()[:16]


@dataclass(frozen=True)
class RunKey:
    """What determines a trained model: model config, training config, training text.

    Attributes:
        model: the GPT config with ``vocab_size`` set to the corpus's.
        train: the training config (steps, batch size, learning rate, seed, device ...).
        corpus: :func:`corpus_fingerprint` of the text.
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


def weights_id(model: GPT) -> str:
    """16 hex digits of the SHA-256 of the model's weights and config: equal ids mean equal models."""
    h = hashlib.sha256(json.dumps(model.config.to_dict(), sort_keys=True).encode("utf-8"))
    for name, tensor in model.state_dict().items():  # a fixed order: the module's registration order
        h.update(name.encode("utf-8"))
        h.update(tensor.detach().to("cpu").contiguous().numpy().tobytes())
    return h.hexdigest()[:16]


@dataclass
class LabModel:
    """A model the Lab can use: trained here, uploaded, or shipped with the app.

    Attributes:
        model: the GPT, in eval mode (on the device it was trained or loaded on).
        tokenizer: its character vocabulary.
        summary: JSON-ready training summary (losses, steps, wall time, history ...), as in checkpoints.
        source: "trained", "uploaded" or "shipped".
        model_id: :func:`weights_id`; caches of generations and attention maps are keyed by it.
        key: the :class:`RunKey` it was trained under (None for uploaded and shipped models).
        stopped: True when training was stopped before its last step.
    """

    model: GPT
    tokenizer: CharTokenizer
    summary: dict
    source: str
    model_id: str
    key: RunKey | None = None
    stopped: bool = False

    @property
    def config(self) -> GPTConfig:
        """The model's GPTConfig."""
        return self.model.config

    @classmethod
    def from_result(cls, result: TrainResult, key: RunKey | None) -> LabModel:
        """Wraps a ``TrainResult`` (source "trained")."""
        return cls(result.model, result.tokenizer, result.summary(), "trained", weights_id(result.model), key,
                   result.stopped)

    def describe(self) -> str:
        """One line: where it comes from, its size and its losses, e.g. for a caption."""
        c = self.config
        size = f"n_layer {c.n_layer}, n_head {c.n_head}, n_embd {c.n_embd}, block_size {c.block_size}, {c.pos_encoding}"
        if not c.causal:
            size += ", no causal mask"
        s = self.summary
        parts = [size, f"{self.model.num_params():,} parameters", f"vocabulary {self.tokenizer.vocab_size}"]
        if "steps_done" in s:
            parts.append(f"{s['steps_done']} steps{' (stopped)' if s.get('stopped') else ''} on {s.get('corpus', '?')}")
        if "final_val_loss" in s:
            parts.append(f"train loss {s['final_train_loss']:.3f}, val loss {s['final_val_loss']:.3f}")
        return " · ".join(parts)


def load_shipped(path: str | Path = SHIPPED_MODEL, device: str = "cpu") -> LabModel:
    """Loads the app's shipped checkpoint folder as a :class:`LabModel` (source "shipped").

    Raises:
        CheckpointError: if the folder is missing or its files are broken (message from ``load_checkpoint``).
    """
    ckpt = load_checkpoint(path, device=device)
    return LabModel(ckpt.model, ckpt.tokenizer, ckpt.summary, "shipped", weights_id(ckpt.model))


def read_checkpoint_upload(data: bytes, name: str = "upload") -> LabModel:
    """An uploaded single-file checkpoint (``checkpoint_to_bytes``) as a :class:`LabModel` on the CPU.

    Raises:
        CheckpointError: for anything that is not such a checkpoint (empty, truncated, foreign
            safetensors, mismatched config and weights); the message names ``name``.
    """
    if not data:
        raise CheckpointError(f"{name}: the file is empty")
    try:
        ckpt = checkpoint_from_bytes(data, device="cpu", where=name)
    except CheckpointError as exc:
        if str(exc).startswith(name):
            raise
        raise CheckpointError(f"{name}: {exc}") from exc  # some messages do not say which file
    return LabModel(ckpt.model, ckpt.tokenizer, ckpt.summary, "uploaded", weights_id(ckpt.model))


@dataclass(frozen=True)
class UploadResult:
    """What the page's corpus upload handler returns: a corpus, or the message to show instead."""

    corpus: Corpus | None
    error: str | None


def read_corpus_upload(data: bytes, name: str) -> UploadResult:
    """The page's handler for an uploaded text file: never raises for bad content.

    Args:
        data: the file's bytes.
        name: its file name (used in messages and as the corpus name).

    Returns:
        ``UploadResult(corpus, None)``, or ``UploadResult(None, message)`` for an empty,
        whitespace-only, binary (NUL bytes), non-UTF-8, over-20-MB or too-short file
        (the ``CorpusError`` message of ``engine.corpus``).
    """
    try:
        return UploadResult(corpus_from_bytes(data, name), None)
    except CorpusError as exc:
        return UploadResult(None, str(exc))


# ---------------------------------------------------------------------------------------------
# Using a model: generation and attention maps
# ---------------------------------------------------------------------------------------------


def prepare_prompt(tokenizer: CharTokenizer, prompt: str, block_size: int) -> dict:
    """How a prompt reaches the model: unknown characters dropped, the context cropped.

    Args:
        tokenizer: the model's vocabulary.
        prompt: the reader's text.
        block_size: the model's context_length.

    Returns:
        dict with ``ids`` (list of int, never empty: an empty prompt becomes a newline when the
        vocabulary has one, else the first character of the vocabulary), ``kept`` (the prompt
        without unknown characters), ``unknown`` (list of dropped characters, first appearance
        order), ``started_from`` ("prompt", "newline" or "first character") and ``cropped``
        (int: how many leading characters the model does not see, since it reads only the last
        block_size).
    """
    unknown = tokenizer.unknown_chars(prompt)
    ids = tokenizer.encode(prompt, errors="drop")
    kept = tokenizer.decode(ids)
    started_from = "prompt"
    if not ids:
        if "\n" in tokenizer.stoi:
            ids, started_from = [tokenizer.stoi["\n"]], "newline"
        else:
            ids, started_from = [0], "first character"
    return {"ids": ids, "kept": kept, "unknown": unknown, "started_from": started_from,
            "cropped": max(0, len(ids) - block_size)}


def generate(
    lab_model: LabModel,
    prompt: str,
    max_new_tokens: int = 60,
    temperature: float = 0.8,
    top_k: int | None = 20,
    seed: int = 0,
) -> dict:
    """Continues a prompt with a model, as the engine documents (``GPT.generate``).

    Unknown characters are dropped (``CharTokenizer.encode(errors="drop")``) and reported; a
    prompt longer than block_size is fed to the model cropped to its last block_size characters
    (``GPT.generate`` crops at every step); temperature 0 is greedy; sampling uses a private
    generator seeded with ``seed``, so the same settings give the same text.

    Returns:
        dict with ``text`` (the kept prompt followed by the new characters), ``new`` (the new
        characters only) and the keys of :func:`prepare_prompt`.

    Raises:
        ValueError: for a negative temperature or max_new_tokens, or top_k < 1.
    """
    model = lab_model.model
    info = prepare_prompt(lab_model.tokenizer, prompt, model.config.block_size)
    device = next(model.parameters()).device
    idx = torch.tensor([info["ids"]], dtype=torch.long, device=device)  # (1, T)
    generator = torch.Generator(device=device).manual_seed(seed)
    out = model.generate(idx, max_new_tokens, temperature=temperature, top_k=top_k, generator=generator)
    new = lab_model.tokenizer.decode(out[0, idx.size(1) :].tolist())  # (T + n,) -> the n new ids
    return {**info, "new": new, "text": info["kept"] + new}


@torch.no_grad()
def attention_maps(lab_model: LabModel, line: str, max_len: int = 32) -> dict:
    """Every layer's and head's attention weights on a line (the manual attention path).

    Args:
        lab_model: the model.
        line: the text to read; unknown characters are dropped, and only its first
            ``min(max_len, block_size)`` known characters are used.
        max_len: the longest line drawn (keeps the heatmaps readable).

    Returns:
        dict with ``attn_weights`` float32 (n_layer, n_head, T, T) on the CPU (row i: how query
        i spreads its attention over keys 0..i), ``tokens`` (list of T characters), ``unknown``
        (dropped characters) and ``cut`` (characters left out at the end). ``T`` is 0 (and
        ``attn_weights`` has shape (n_layer, n_head, 0, 0)) when no character is known.
    """
    model, tokenizer = lab_model.model, lab_model.tokenizer
    unknown = tokenizer.unknown_chars(line)
    ids = tokenizer.encode(line, errors="drop")
    limit = min(max_len, model.config.block_size)
    cut = max(0, len(ids) - limit)
    ids = ids[:limit]
    c = model.config
    if not ids:
        return {"attn_weights": torch.zeros(c.n_layer, c.n_head, 0, 0), "tokens": [], "unknown": unknown, "cut": cut}
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    try:
        out = model(torch.tensor([ids], dtype=torch.long, device=device), return_weights=True)
    finally:
        model.train(was_training)
    weights = torch.stack([w[0] for w in out.attn_weights]).float().cpu()  # n_layer x (1, nh, T, T) -> (n_layer, nh, T, T)
    return {"attn_weights": weights, "tokens": list(tokenizer.decode(ids)), "unknown": unknown, "cut": cut}


def position_tables(lab_model: LabModel, seed: int | None = None) -> dict | None:
    """The learned position table of a model next to the table an untrained model starts with.

    Args:
        lab_model: a model with ``pos_encoding == "learned"``.
        seed: the seed of the untrained model; default: the training seed from the summary
            (the table the trained one actually started from), else 1337.

    Returns:
        None when the model has no learned table; else dict with ``trained`` and ``untrained``
        float32 (block_size, n_embd) on the CPU, ``seed`` (int), and the mean cosine similarity
        of neighbouring rows ``neighbour_sim_trained`` / ``neighbour_sim_untrained`` (float):
        training makes nearby positions alike, random init does not.
    """
    config = lab_model.config
    if config.pos_encoding != "learned":
        return None
    if seed is None:
        seed = int(lab_model.summary.get("train_config", {}).get("seed", 1337))
    untrained = _initial_position_table(config, seed)  # (block_size, n_embd)
    trained = lab_model.model.pos_emb.weight.detach().float().cpu()  # (block_size, n_embd)

    def neighbour_sim(table: torch.Tensor) -> float:
        if table.size(0) < 2:
            return float("nan")
        unit = torch.nn.functional.normalize(table, dim=1)  # (block_size, n_embd), rows of length 1
        return float((unit[:-1] * unit[1:]).sum(dim=1).mean())  # cos(row t, row t+1), averaged

    return {"trained": trained, "untrained": untrained, "seed": seed,
            "neighbour_sim_trained": neighbour_sim(trained), "neighbour_sim_untrained": neighbour_sim(untrained)}


@uses_global_rng
def _initial_position_table(config: GPTConfig, seed: int) -> torch.Tensor:
    """``pos_emb`` of a GPT built after ``torch.manual_seed(seed)``, as ``train`` builds it: (block_size, n_embd)."""
    torch.manual_seed(seed)
    return GPT(config).pos_emb.weight.detach().float()


@contextlib.contextmanager
def torch_threads(n: int):
    """Runs the block with ``n`` intra-op CPU threads in this thread, then restores the previous count.

    A page's small inference (one line, one generated character at a time) gains little from a
    second thread, and on a busy 2-core machine two threads that wait for each other can make it
    many times slower; the count is per calling thread (OpenMP).

    Raises:
        ValueError: if n < 1.
    """
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def count_params(config: GPTConfig) -> int:
    """Parameters of a GPT with this config, counted without allocating its weights (meta device)."""
    with torch.device("meta"):
        return GPT(config).num_params()


# ---------------------------------------------------------------------------------------------
# Jobs
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Snapshot:
    """A consistent copy of a job's progress, safe to read from any thread.

    Attributes:
        state: one of :data:`STATES`.
        step, steps: optimizer steps done and planned (in the current run of an experiment).
        history: evaluations so far, ``(step, train_loss, val_loss)`` in nats.
        step_losses: training-batch loss of every step so far (nats).
        tokens_per_s: recent training throughput (exponential average), 0 before the first step.
        elapsed_s: seconds since training started (queue time excluded).
        eta_s: estimated seconds left (None before the first step or when final).
        message: why it waits ("queued"), what failed ("error"), or a note.
        run_index, run_count, run_label: for experiments, which run of how many is training.
    """

    state: str
    step: int
    steps: int
    history: tuple[tuple[int, float, float], ...] = ()
    step_losses: tuple[float, ...] = ()
    tokens_per_s: float = 0.0
    elapsed_s: float = 0.0
    eta_s: float | None = None
    message: str = ""
    run_index: int = 0
    run_count: int = 1
    run_label: str = ""

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

    def __init__(self, steps: int, run_count: int = 1):
        self.lock = threading.Lock()
        self.state = "queued"
        self.step = 0
        self.steps = steps
        self.history: list[tuple[int, float, float]] = []
        self.step_losses: list[float] = []
        self.tokens_per_s = 0.0
        self.started: float | None = None
        self.run_started: float | None = None
        self.ended: float | None = None
        self.message = ""
        self.run_index = 0
        self.run_count = run_count
        self.run_label = ""

    def new_run(self, index: int, label: str, steps: int) -> None:
        with self.lock:
            self.run_index, self.run_label, self.steps = index, label, steps
            self.step, self.history, self.step_losses, self.tokens_per_s = 0, [], [], 0.0
            self.run_started = time.perf_counter()

    def on_step(self, step: int, loss: float, tokens_per_s: float) -> None:
        with self.lock:
            self.step = step
            self.step_losses.append(loss)
            self.tokens_per_s = tokens_per_s if self.tokens_per_s == 0 else 0.8 * self.tokens_per_s + 0.2 * tokens_per_s

    def on_eval(self, step: int, train_loss: float, val_loss: float) -> None:
        with self.lock:
            self.history.append((step, train_loss, val_loss))

    def snapshot(self) -> Snapshot:
        with self.lock:
            now = self.ended or time.perf_counter()
            elapsed = now - self.started if self.started is not None else 0.0
            eta = None
            if self.state == "running" and self.step > 0 and self.run_started is not None:
                per_step = (now - self.run_started) / self.step  # seconds per step, evaluations included
                left_in_run = per_step * (self.steps - self.step)
                eta = left_in_run + per_step * self.steps * (self.run_count - self.run_index - 1)
            return Snapshot(
                state=self.state, step=self.step, steps=self.steps, history=tuple(self.history),
                step_losses=tuple(self.step_losses), tokens_per_s=self.tokens_per_s, elapsed_s=elapsed,
                eta_s=eta, message=self.message, run_index=self.run_index, run_count=self.run_count,
                run_label=self.run_label,
            )


class _StepLock:
    """Holds ``engine.rng``'s global-RNG lock while a job may draw from the global generator.

    Used as ``train``'s stop check (called before each step: take the lock, then answer) and
    through the callbacks (release after each step; take it again at the final evaluation, so
    ``train`` leaves ``fork_rng`` under the lock). Every call comes from the job's own thread.
    """

    def __init__(self, stop_event: threading.Event):
        self.stop_event = stop_event
        self.held = False
        self._lock = global_rng_lock()

    def acquire(self) -> None:
        if not self.held:
            self._lock.acquire()
            self.held = True

    def release(self) -> None:
        if self.held:
            self.held = False
            self._lock.release()
            time.sleep(0.001)  # a page waiting for the lock gets it before the next step takes it again

    def __call__(self) -> bool:
        self.acquire()
        return self.stop_event.is_set()

    def is_set(self) -> bool:
        """The stop flag, without touching the lock (``run_experiment`` checks it between runs)."""
        return self.stop_event.is_set()

    def callbacks(self, progress: _Progress) -> Callbacks:
        """``train`` callbacks that report to ``progress`` and release / retake the lock."""

        def on_step(step: int, loss: float, tokens_per_s: float) -> None:
            progress.on_step(step, loss, tokens_per_s)
            self.release()

        def on_eval(step: int, train_loss: float, val_loss: float) -> None:
            progress.on_eval(step, train_loss, val_loss)
            if step >= progress.steps:  # the last evaluation: what follows restores the generator
                self.acquire()

        return Callbacks(on_step, on_eval)


class Job:
    """A piece of work in a daemon thread that waits for a training slot of its :class:`LabRunner`.

    Subclasses implement :meth:`_work`, which receives the progress record and the stop event
    and returns the job's result. Read progress with :meth:`snapshot`, ask it to stop with
    :meth:`stop`, and take :attr:`result` once the snapshot is final.
    """

    def __init__(self, runner: LabRunner, steps: int, run_count: int = 1):
        self.runner = runner
        self.stop_event = threading.Event()
        self._rng = _StepLock(self.stop_event)
        self._progress = _Progress(steps, run_count)
        self.result = None
        self._thread = threading.Thread(target=self._run, name=f"lab-{type(self).__name__}", daemon=True)

    def start(self) -> Job:
        """Starts the thread (it first waits for a free slot); returns the job."""
        with self.runner._lock:
            self.runner._waiting += 1
        self._thread.start()
        return self

    def stop(self) -> None:
        """Asks the job to stop: before the next step when training, at once when queued."""
        self.stop_event.set()

    def join(self, timeout: float | None = None) -> bool:
        """Waits for the thread to end; True if it did within ``timeout`` seconds."""
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def snapshot(self) -> Snapshot:
        """The current progress; a queued job's message says how many trainings hold the slots."""
        snap = self._progress.snapshot()
        if snap.state == "queued":
            running, limit = self.runner.running_count(), self.runner.max_concurrent
            message = (f"Queued: this server trains at most {limit} model{'s' if limit > 1 else ''} at once and "
                       f"{running} {'is' if running == 1 else 'are'} training now; yours starts as soon as a slot is free.")
            snap = dataclasses.replace(snap, message=message)
        return snap

    def _run(self) -> None:
        p = self._progress
        got_slot = False
        state, message = "error", ""
        try:
            while not (got_slot := self.runner._slots.acquire(timeout=0.1)):
                if self.stop_event.is_set():
                    state, message = "stopped", "Stopped while queued: nothing was trained."
                    return
            with self.runner._lock:
                self.runner._waiting -= 1
                self.runner._running += 1
            if self.runner.threads is not None:
                torch.set_num_threads(self.runner.threads)  # this thread's intra-op threads only (OpenMP is per thread)
            with p.lock:
                p.state = "running"
                p.started = p.run_started = time.perf_counter()
            self._rng.acquire()  # building the model draws its initial weights
            self.result, stopped = self._work(p, self.stop_event)
            state = "stopped" if stopped else "done"
        except Exception as exc:  # reported in the snapshot; the page shows the message
            state, message = "error", f"{type(exc).__name__}: {exc}"
        finally:
            self._rng.release()
            with self.runner._lock:
                if got_slot:
                    self.runner._running -= 1
                else:
                    self.runner._waiting -= 1
            if got_slot:
                self.runner._slots.release()
            with p.lock:  # last: a final snapshot means the slot and the lock are free again
                p.state, p.message, p.ended = state, message, time.perf_counter()

    def _work(self, progress: _Progress, stop: threading.Event) -> tuple[object, bool]:
        """Does the work; returns ``(result, stopped early)``."""
        raise NotImplementedError


class TrainingJob(Job):
    """Trains one GPT (``engine.training.train``) in the background.

    Attributes:
        key: the run's :class:`RunKey`.
        result: a :class:`LabModel` once done or stopped after at least one step; None while running,
            after an error, or when stopped while queued. Done runs are also put in the runner's registry.
    """

    def __init__(self, runner: LabRunner, model_config: GPTConfig, train_config: TrainConfig, corpus: Corpus):
        super().__init__(runner, train_config.steps)
        self.key = RunKey.make(model_config, train_config, corpus)
        self.corpus = corpus

    def _work(self, progress: _Progress, stop: threading.Event) -> tuple[LabModel | None, bool]:
        result = train(self.key.model, self.corpus, self.key.train, callbacks=self._rng.callbacks(progress),
                       stop=self._rng)
        if result.steps_done == 0:  # stopped before the first step: nothing was learned
            return None, True
        lab_model = LabModel.from_result(result, self.key)
        if not result.stopped:
            self.runner.registry.put(self.key, lab_model)
        return lab_model, result.stopped


class ExperimentJob(Job):
    """Runs one of the lesson's experiments (``engine.lab_experiments.run_experiment``) in the background.

    Attributes:
        cache_key: the key its result is stored under in the runner's experiment cache.
        result: the experiment's results dict once done (None when stopped or failed).
    """

    def __init__(self, runner: LabRunner, name: str, corpus: Corpus, steps: int, batch_size: int, seed: int = 1337):
        from engine import lab_experiments

        runs = lab_experiments.EXPERIMENTS[name].runs
        super().__init__(runner, steps, run_count=len(runs))
        self.name, self.corpus, self.steps, self.batch_size, self.seed = name, corpus, steps, batch_size, seed
        self.cache_key = (name, corpus_fingerprint(corpus), steps, batch_size, seed)

    def _work(self, progress: _Progress, stop: threading.Event) -> tuple[dict | None, bool]:
        from engine import lab_experiments

        outcome = lab_experiments.run_experiment(
            self.name, self.corpus, steps=self.steps, batch_size=self.batch_size, seed=self.seed,
            on_run_start=progress.new_run, callbacks=self._rng.callbacks(progress), stop=self._rng,
            run_cache=self.runner.run_cache,
        )
        if outcome["stopped"]:
            return None, True
        self.runner.experiment_cache.put(self.cache_key, outcome)
        return outcome, False


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
    """The app-wide part of the Lab: model registry, experiment cache, concurrency limit.

    Create one per process (the page uses ``st.cache_resource``); every session submits its
    jobs here, so the limit holds across sessions.

    Args:
        max_concurrent: trainings (or experiment jobs) running at once; more wait queued.
        registry_size: finished models kept (LRU).
        experiment_cache_size: experiment reruns kept (LRU); twice as many single runs are kept, so a
            configuration two experiments share is trained once.
        threads: CPU threads of each job's intra-op work (``torch.set_num_threads`` in the job's own
            thread); None keeps PyTorch's default. On a small shared CPU, leaving one core to the web
            server keeps pages responsive, and a single thread does not stall when other processes
            take the cores (two threads that wait for each other can run ten times slower then).
    """

    max_concurrent: int = 1
    registry_size: int = 6
    experiment_cache_size: int = 8
    threads: int | None = None
    registry: LRU = field(init=False)
    experiment_cache: LRU = field(init=False)
    run_cache: LRU = field(init=False)

    def __post_init__(self) -> None:
        if self.max_concurrent < 1:
            raise ValueError(f"max_concurrent must be >= 1, got {self.max_concurrent}")
        if self.threads is not None and self.threads < 1:
            raise ValueError(f"threads must be >= 1 or None, got {self.threads}")
        self.registry = LRU(self.registry_size)
        self.experiment_cache = LRU(self.experiment_cache_size)
        self.run_cache = LRU(2 * self.experiment_cache_size)  # single experiment runs, shared between experiments
        self._slots = threading.BoundedSemaphore(self.max_concurrent)
        self._lock = threading.Lock()
        self._running = 0
        self._waiting = 0

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

    def submit(self, model_config: GPTConfig, train_config: TrainConfig, corpus: Corpus) -> Submitted:
        """Starts a training job, unless the registry already holds the model these settings give.

        Raises:
            ValueError: for a block_size the corpus is too short for (checked here, before queuing).
        """
        found = self.lookup(model_config, train_config, corpus)
        if found is not None:
            return Submitted(model=found)
        if model_config.block_size > corpus.max_block_size:
            raise ValueError(
                f"block_size {model_config.block_size} is too long for corpus {corpus.name!r}: its shorter split "
                f"allows at most {corpus.max_block_size}"
            )
        return Submitted(job=TrainingJob(self, model_config, train_config, corpus).start())

    def submit_experiment(self, name: str, corpus: Corpus, steps: int, batch_size: int, seed: int = 1337
                          ) -> tuple[ExperimentJob | None, dict | None]:
        """Reruns an experiment in the background, or returns its cached result: ``(job, None)`` or ``(None, result)``."""
        job = ExperimentJob(self, name, corpus, steps, batch_size, seed)
        cached = self.experiment_cache.get(job.cache_key)
        if cached is not None:
            return None, cached
        return job.start(), None


def wait_until_finished(job: Job, timeout: float, poll: float = 0.05) -> Snapshot:
    """Polls ``job.snapshot()`` until it is final or ``timeout`` seconds pass; returns the last snapshot."""
    deadline = time.monotonic() + timeout
    snap = job.snapshot()
    while not snap.finished and time.monotonic() < deadline:
        time.sleep(poll)
        snap = job.snapshot()
    return snap


def describe_eta(seconds: float | None) -> str:
    """ "about 1 min 05 s left", "about 12 s left" or "estimating …" for a progress label."""
    if seconds is None:
        return "estimating time left …"
    seconds = max(0, round(seconds))
    if seconds >= 60:
        return f"about {seconds // 60} min {seconds % 60:02d} s left"
    return f"about {seconds} s left"

