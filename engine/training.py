"""Training the course's GPT: device choice, the loop with callbacks and a stop flag, checkpoints.

The loop is the usual one for a small GPT (nanoGPT's ``train.py``, minGPT's trainer): random
windows of the training split, AdamW (weight decay on matrices only), linear warm-up then cosine
decay of the learning rate, gradient clipping, and every ``eval_interval`` steps a mean loss over
``eval_iters`` fixed batches of each split. It prints nothing: progress goes to callbacks, which
the Lab page turns into a progress bar and a live loss chart, and ``python -m engine.train`` into
lines of text. The device comes from ``engine.device.pick_device`` (CUDA, then MPS, then CPU).

Checkpoints hold weights (safetensors: no pickle, nothing executed on load) and a JSON
description (GPT config, tokenizer vocabulary, training summary). Two forms:

* a folder: ``model.safetensors`` + ``checkpoint.json`` (which records the weights' SHA-256, so
  a folder whose files do not belong together is refused); each file is written to a temporary
  file and moved into place with ``os.replace``, weights first;
* a single file (``checkpoint_to_bytes``): safetensors whose header metadata holds the JSON, for
  the Lab page's download and upload.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import struct
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
import safetensors.torch
import torch

from engine.corpus import Corpus
from engine.device import pick_device
from engine.gpt import GPT, GPTConfig
from engine.tokenizer import CharTokenizer

CHECKPOINT_FORMAT = "engine-gpt-checkpoint/1"
WEIGHTS_FILE = "model.safetensors"
META_FILE = "checkpoint.json"
_META_KEY = "checkpoint"  # safetensors header metadata key in the single-file form


# ---------------------------------------------------------------------------------------------
# Training loop
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TrainConfig:
    """Settings of one training run. Frozen, so it can key a cache.

    Raises:
        ValueError: for non-positive steps/sizes/intervals, a negative learning rate or weight
            decay, or warmup_steps > steps.
    """

    steps: int = 1000  # optimizer steps
    batch_size: int = 32  # B: windows per step (tokens per step = B * block_size)
    learning_rate: float = 1e-3  # peak learning rate, reached after warm-up
    min_lr_ratio: float = 0.1  # cosine decay ends at learning_rate * min_lr_ratio
    warmup_steps: int = 50  # linear warm-up from 0 to learning_rate
    weight_decay: float = 0.1  # AdamW decay, applied to matrices only (not biases, LayerNorm, embeddings)
    beta1: float = 0.9  # AdamW first-moment decay
    beta2: float = 0.99  # AdamW second-moment decay (0.99 rather than 0.999: small batches, few steps)
    grad_clip: float = 1.0  # max global gradient norm; 0 disables clipping
    eval_interval: int = 100  # evaluate train and val loss every this many steps (and at 0 and the end)
    eval_iters: int = 20  # batches per split in each evaluation
    seed: int = 1337  # seeds the initial weights, the batches and dropout
    device: str | None = None  # None: pick_device() chooses; else "cpu", "cuda", "mps"

    def __post_init__(self) -> None:
        for name in ("steps", "batch_size", "eval_interval", "eval_iters"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if self.learning_rate <= 0 or self.weight_decay < 0 or self.grad_clip < 0:
            raise ValueError(
                f"learning_rate must be > 0 and weight_decay, grad_clip >= 0; got {self.learning_rate}, "
                f"{self.weight_decay}, {self.grad_clip}"
            )
        if not 0 <= self.warmup_steps <= self.steps:
            raise ValueError(f"warmup_steps must be in [0, steps={self.steps}], got {self.warmup_steps}")
        if not 0 <= self.min_lr_ratio <= 1:
            raise ValueError(f"min_lr_ratio must be in [0, 1], got {self.min_lr_ratio}")

    def lr_at(self, step: int) -> float:
        """Learning rate used for optimizer step ``step`` (1-based): warm-up, then cosine decay."""
        if step <= self.warmup_steps:
            return self.learning_rate * step / max(1, self.warmup_steps)
        progress = (step - self.warmup_steps) / max(1, self.steps - self.warmup_steps)
        cosine = 0.5 * (1 + math.cos(math.pi * min(1.0, progress)))
        return self.learning_rate * (self.min_lr_ratio + (1 - self.min_lr_ratio) * cosine)


@dataclass
class Callbacks:
    """Hooks called by ``train``; any may be None.

    on_step(step, loss, tokens_per_s): after each optimizer step; step is 1-based, loss is the
        batch's cross-entropy in nats, tokens_per_s the throughput of that step.
    on_eval(step, train_loss, val_loss): after each evaluation (step 0 is before training).
    """

    on_step: Callable[[int, float, float], None] | None = None
    on_eval: Callable[[int, float, float], None] | None = None


class TrainingDivergedError(RuntimeError):
    """The loss became NaN or infinite; the message gives the step and the learning rate."""


@dataclass
class TrainResult:
    """What ``train`` returns.

    Attributes:
        model: the trained GPT (on the training device, in eval mode).
        tokenizer: the corpus tokenizer the model was trained with.
        history: DataFrame with one row per evaluation: step, train_loss, val_loss, elapsed_s.
        step_losses: the training-batch loss of every step, in nats.
        stopped: True if the stop flag ended the run before ``steps``.
        steps_done: optimizer steps taken.
        wall_s: seconds spent in ``train`` (evaluations included).
        tokens_per_s: training tokens per second over the whole run (evaluations included).
        device: the device used, e.g. "cpu".
        corpus_name, train_config: what the run used.
    """

    model: GPT
    tokenizer: CharTokenizer
    history: pd.DataFrame
    step_losses: list[float]
    stopped: bool
    steps_done: int
    wall_s: float
    tokens_per_s: float
    device: str
    corpus_name: str
    train_config: TrainConfig

    @property
    def final_train_loss(self) -> float:
        """Train loss of the last evaluation (nats)."""
        return float(self.history["train_loss"].iloc[-1])

    @property
    def final_val_loss(self) -> float:
        """Validation loss of the last evaluation (nats)."""
        return float(self.history["val_loss"].iloc[-1])

    def summary(self) -> dict:
        """A JSON-ready summary, stored in checkpoints."""
        return {
            "corpus": self.corpus_name,
            "steps_done": self.steps_done,
            "stopped": self.stopped,
            "final_train_loss": round(self.final_train_loss, 4),
            "final_val_loss": round(self.final_val_loss, 4),
            "wall_s": round(self.wall_s, 1),
            "tokens_per_s": round(self.tokens_per_s, 1),
            "device": self.device,
            "train_config": dataclasses.asdict(self.train_config),
            "history": self.history.round(4).to_dict(orient="list"),
            "torch_version": torch.__version__,
        }


def make_optimizer(model: torch.nn.Module, config: TrainConfig) -> torch.optim.AdamW:
    """AdamW with weight decay on parameters of 2+ dimensions except embeddings; fused where supported."""
    decay, no_decay = [], []
    for name, param in model.named_parameters():
        if not param.requires_grad:
            continue
        (decay if param.dim() >= 2 and "emb" not in name else no_decay).append(param)
    groups = [
        {"params": decay, "weight_decay": config.weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]
    kwargs = dict(lr=config.learning_rate, betas=(config.beta1, config.beta2))
    try:
        return torch.optim.AdamW(groups, fused=True, **kwargs)  # one kernel per step where the device has it
    except (RuntimeError, ValueError):
        return torch.optim.AdamW(groups, **kwargs)


@torch.no_grad()
def estimate_loss(model: GPT, corpus: Corpus, batch_size: int, eval_iters: int, seed: int) -> dict[str, float]:
    """Mean loss (nats) over ``eval_iters`` batches of each split, in eval mode (no dropout).

    The batches come from a generator seeded with ``seed``, so every call sees the same windows.
    """
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    out = {}
    for split in ("train", "val"):
        generator = torch.Generator().manual_seed(seed)
        losses = [
            model(*corpus.get_batch(split, batch_size, model.config.block_size, generator, device)).loss.item()
            for _ in range(eval_iters)
        ]
        out[split] = sum(losses) / len(losses)
    model.train(was_training)
    return out


def _stop_fn(stop: threading.Event | Callable[[], bool] | None) -> Callable[[], bool]:
    if stop is None:
        return lambda: False
    if isinstance(stop, threading.Event):
        return stop.is_set
    if callable(stop):
        return stop
    raise TypeError(f"stop must be a threading.Event, a callable or None, got {type(stop).__name__}")


def _callbacks(callbacks: Callbacks | Sequence[Callbacks] | None) -> list:
    if callbacks is None:
        return []
    if isinstance(callbacks, Sequence):
        return list(callbacks)
    return [callbacks]


def train(
    model_or_config: GPT | GPTConfig,
    corpus: Corpus,
    config: TrainConfig = TrainConfig(),
    callbacks: Callbacks | Sequence[Callbacks] | None = None,
    stop: threading.Event | Callable[[], bool] | None = None,
) -> TrainResult:
    """Trains a GPT on a corpus.

    Args:
        model_or_config: a ``GPT`` (trained further; its vocab_size must equal the corpus's) or a
            ``GPTConfig`` (a new model is built with vocab_size set to the corpus's, seeded by
            ``config.seed``).
        corpus: supplies the batches and the tokenizer.
        config: steps, batch size, learning rate schedule, evaluation cadence, seed, device.
        callbacks: one ``Callbacks`` or several (any object with ``on_step`` / ``on_eval``
            attributes works); called from this thread.
        stop: a ``threading.Event`` or a callable returning True to stop; checked before each step.
            A stopped run still ends with an evaluation and returns normally.

    Returns:
        A ``TrainResult`` (model in eval mode, evaluation history, stopped flag, timings).

    Raises:
        ValueError: if the vocabularies differ or block_size is too long for the corpus.
        TrainingDivergedError: if a training loss is NaN or infinite.
    """
    device = pick_device(config.device)
    tokenizer = corpus.tokenizer
    with torch.random.fork_rng(devices=[device.index or 0] if device.type == "cuda" else []):
        torch.manual_seed(config.seed)
        if isinstance(model_or_config, GPTConfig):
            model = GPT(dataclasses.replace(model_or_config, vocab_size=tokenizer.vocab_size))
        else:
            model = model_or_config
            if model.config.vocab_size != tokenizer.vocab_size:
                raise ValueError(
                    f"the model's vocab_size {model.config.vocab_size} differs from corpus "
                    f"{corpus.name!r}'s {tokenizer.vocab_size}"
                )
        block_size = model.config.block_size
        if block_size > corpus.max_block_size:
            raise ValueError(
                f"block_size {block_size} is too long for corpus {corpus.name!r}: its shorter split "
                f"allows at most {corpus.max_block_size}"
            )
        model.to(device)
        optimizer = make_optimizer(model, config)
        generator = torch.Generator().manual_seed(config.seed)
        hooks = _callbacks(callbacks)
        should_stop = _stop_fn(stop)
        history: list[dict] = []
        step_losses: list[float] = []
        tokens_per_step = config.batch_size * block_size
        start = time.perf_counter()

        def evaluate(step: int) -> None:
            losses = estimate_loss(model, corpus, config.batch_size, config.eval_iters, config.seed + 1)
            history.append(
                {"step": step, "train_loss": losses["train"], "val_loss": losses["val"],
                 "elapsed_s": time.perf_counter() - start}
            )
            for hook in hooks:
                if getattr(hook, "on_eval", None):
                    hook.on_eval(step, losses["train"], losses["val"])

        evaluate(0)
        model.train()
        step, stopped = 0, False
        while step < config.steps:
            if should_stop():
                stopped = True
                break
            step += 1
            t0 = time.perf_counter()
            lr = config.lr_at(step)
            for group in optimizer.param_groups:
                group["lr"] = lr
            x, y = corpus.get_batch("train", config.batch_size, block_size, generator, device)  # (B, T) each
            loss = model(x, y).loss
            loss_value = loss.item()
            if not math.isfinite(loss_value):
                raise TrainingDivergedError(
                    f"the training loss became {loss_value} at step {step} (learning rate {lr:.3g}); "
                    "try a lower learning rate or keep gradient clipping on"
                )
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            if config.grad_clip > 0:
                torch.nn.utils.clip_grad_norm_(model.parameters(), config.grad_clip)
            optimizer.step()
            step_losses.append(loss_value)
            tokens_per_s = tokens_per_step / max(time.perf_counter() - t0, 1e-9)
            for hook in hooks:
                if getattr(hook, "on_step", None):
                    hook.on_step(step, loss_value, tokens_per_s)
            if step % config.eval_interval == 0 or step == config.steps:
                evaluate(step)
        if history[-1]["step"] != step:
            evaluate(step)
        model.eval()
        wall_s = time.perf_counter() - start
    return TrainResult(
        model=model,
        tokenizer=tokenizer,
        history=pd.DataFrame(history),
        step_losses=step_losses,
        stopped=stopped,
        steps_done=step,
        wall_s=wall_s,
        tokens_per_s=step * tokens_per_step / max(wall_s, 1e-9),
        device=str(device),
        corpus_name=corpus.name,
        train_config=config,
    )


# ---------------------------------------------------------------------------------------------
# Checkpoints
# ---------------------------------------------------------------------------------------------


class CheckpointError(ValueError):
    """A checkpoint that is missing, corrupt, or whose parts do not match each other."""


@dataclass
class Checkpoint:
    """A loaded checkpoint: the model (eval mode) with its config, tokenizer and training summary."""

    model: GPT
    tokenizer: CharTokenizer
    config: GPTConfig
    summary: dict = field(default_factory=dict)


def _describe(model: GPT, tokenizer: CharTokenizer, summary: dict | None) -> dict:
    if model.config.vocab_size != tokenizer.vocab_size:
        raise ValueError(
            f"model vocab_size {model.config.vocab_size} differs from tokenizer vocab_size {tokenizer.vocab_size}"
        )
    return {
        "format": CHECKPOINT_FORMAT,
        "config": model.config.to_dict(),
        "tokenizer": tokenizer.to_dict(),
        "summary": summary or {},
    }


def _weights(model: GPT) -> dict[str, torch.Tensor]:
    return {name: t.detach().to("cpu").contiguous() for name, t in model.state_dict().items()}


def _atomic_write(path: Path, data: bytes) -> None:
    """Writes ``data`` to a temporary file beside ``path``, then renames it over ``path``."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.chmod(tmp, 0o644)  # mkstemp makes the file private (0600); a checkpoint is for others to read
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def save_checkpoint(path: str | Path, model: GPT, tokenizer: CharTokenizer, summary: dict | None = None) -> Path:
    """Writes a checkpoint folder: ``model.safetensors`` and ``checkpoint.json``.

    Both files are written atomically (temporary file + ``os.replace``), weights first; the JSON
    records the weights' SHA-256 so ``load_checkpoint`` notices a mixed-up folder.

    Returns:
        The folder path.

    Raises:
        ValueError: if the model and tokenizer vocabulary sizes differ.
    """
    folder = Path(path)
    folder.mkdir(parents=True, exist_ok=True)
    meta = _describe(model, tokenizer, summary)
    weights = safetensors.torch.save(_weights(model))
    meta["weights_sha256"] = hashlib.sha256(weights).hexdigest()
    _atomic_write(folder / WEIGHTS_FILE, weights)
    _atomic_write(folder / META_FILE, (json.dumps(meta, ensure_ascii=False, indent=1) + "\n").encode("utf-8"))
    return folder


def checkpoint_to_bytes(model: GPT, tokenizer: CharTokenizer, summary: dict | None = None) -> bytes:
    """The single-file form: safetensors bytes whose header metadata holds the JSON description."""
    meta = _describe(model, tokenizer, summary)
    return safetensors.torch.save(_weights(model), metadata={_META_KEY: json.dumps(meta, ensure_ascii=False)})


def _header_metadata(data: bytes) -> dict:
    """Reads the ``__metadata__`` of a safetensors blob (8-byte little-endian length, then JSON)."""
    if len(data) < 8:
        raise CheckpointError("not a safetensors checkpoint: the data is shorter than its 8-byte header length")
    (length,) = struct.unpack("<Q", data[:8])
    if length > len(data) - 8:
        raise CheckpointError("not a safetensors checkpoint: the header length exceeds the data")
    try:
        header = json.loads(data[8 : 8 + length].decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CheckpointError(f"not a safetensors checkpoint: unreadable header ({exc})") from exc
    return header.get("__metadata__") or {}


def _check_format(meta: object, where: str) -> None:
    if not isinstance(meta, dict) or meta.get("format") != CHECKPOINT_FORMAT:
        found = meta.get("format") if isinstance(meta, dict) else type(meta).__name__
        raise CheckpointError(f"{where}: expected format {CHECKPOINT_FORMAT!r}, found {found!r}")


def _build(meta: dict, weights: bytes, device: str | torch.device, where: str) -> Checkpoint:
    _check_format(meta, where)
    try:
        config = GPTConfig.from_dict(meta["config"])
        tokenizer = CharTokenizer.from_dict(meta["tokenizer"])
    except (KeyError, TypeError, ValueError) as exc:
        raise CheckpointError(f"{where}: invalid config or tokenizer ({exc})") from exc
    if tokenizer.vocab_size != config.vocab_size:
        raise CheckpointError(
            f"{where}: tokenizer has {tokenizer.vocab_size} characters but the config says vocab_size "
            f"{config.vocab_size}"
        )
    try:
        tensors = safetensors.torch.load(weights)
    except Exception as exc:  # safetensors raises its own SafetensorError for corrupt data
        raise CheckpointError(f"{where}: the weights cannot be read ({exc})") from exc
    model = GPT(config)
    try:
        model.load_state_dict(tensors, strict=True)
    except RuntimeError as exc:
        raise CheckpointError(f"{where}: the weights do not match the config ({exc})") from exc
    model.to(device).eval()
    return Checkpoint(model=model, tokenizer=tokenizer, config=config, summary=meta.get("summary") or {})


def checkpoint_from_bytes(data: bytes, device: str | torch.device = "cpu", where: str = "checkpoint") -> Checkpoint:
    """Loads the single-file form made by ``checkpoint_to_bytes``.

    Raises:
        CheckpointError: if the bytes are not such a checkpoint, or are truncated or inconsistent.
    """
    raw = _header_metadata(data).get(_META_KEY)
    if raw is None:
        raise CheckpointError(f"{where}: safetensors data without a '{_META_KEY}' description (not made by this app)")
    try:
        meta = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise CheckpointError(f"{where}: the embedded description is not valid JSON ({exc})") from exc
    return _build(meta, data, device, where)


def load_checkpoint(path: str | Path, device: str | torch.device = "cpu") -> Checkpoint:
    """Loads a checkpoint folder (``save_checkpoint``) or a single file (``checkpoint_to_bytes``).

    Raises:
        CheckpointError: if the path or one of its files is missing, a file is corrupt, the
            weights' SHA-256 differs from the one recorded, or weights, config and tokenizer
            do not match.
    """
    path = Path(path)
    if path.is_file():
        return checkpoint_from_bytes(path.read_bytes(), device, where=str(path))
    if not path.is_dir():
        raise CheckpointError(f"no checkpoint at {path}")
    meta_path, weights_path = path / META_FILE, path / WEIGHTS_FILE
    for needed in (meta_path, weights_path):
        if not needed.is_file():
            raise CheckpointError(f"{path}: {needed.name} is missing")
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CheckpointError(f"{meta_path}: not valid JSON ({exc})") from exc
    _check_format(meta, str(meta_path))
    weights = weights_path.read_bytes()
    if meta.get("weights_sha256") != hashlib.sha256(weights).hexdigest():
        raise CheckpointError(
            f"{weights_path}: its SHA-256 does not match the one in {META_FILE} "
            "(the files come from different saves, or one is damaged)"
        )
    return _build(meta, weights, device, str(path))
