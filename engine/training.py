"""Training the course's GPT: the loop, with callbacks, a stop flag and its own random generators.

The loop is the usual one for a small GPT (nanoGPT's ``train.py``, minGPT's trainer): random
windows of the training split, AdamW (weight decay on matrices only; :mod:`engine.optim`'s class on
PyTorch's fused kernel), linear warm-up then cosine decay of the learning rate, gradient clipping,
and every ``eval_interval`` steps a mean loss over ``eval_iters`` fixed batches of each split. It
prints nothing: progress goes to callbacks, which the Lab page turns into a progress bar and a live
loss chart, and ``python -m engine.train`` into lines of text. The caller names the device
(``TrainConfig.device``, resolved by ``engine.device``).

Random numbers: a training never draws from PyTorch's global generator while it runs, so it can
run in a thread beside pages that seed that generator chapter-style (``engine.rng``). The initial
weights are drawn once, under ``engine.rng``'s lock, from ``torch.manual_seed(seed)`` (as the
chapter builds its models); the batches come from a ``torch.Generator`` seeded with ``seed``; the
dropout masks from a second one on the training device (see :func:`private_dropout`). Checkpoints
live in ``engine.checkpoint``.

Resuming: given a ``state_dir``, :func:`train` writes a resumable state there after every
evaluation (weights, AdamW's moments, both generators' states, the step, the history and every
step's loss) and, if the folder already holds one, continues from it with the same schedule, so a
long run survives an interruption and N steps in one go equal N/2, a restart, and N/2 more.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import math
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import safetensors.torch
import torch
from torch import nn

from engine.checkpoint import _atomic_write
from engine.corpus import Corpus
from engine.device import pick_device, training_autocast_dtype
from engine.gpt import GPT, GPTConfig, eval_mode
from engine.optim import FusedAdamW, fused_supported
from engine.rng import uses_global_rng
from engine.tokenizer import CharTokenizer

#: What :func:`make_optimizer` returns, and what a resumable state saves and restores.
Optimizer = FusedAdamW | torch.optim.Optimizer


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

    @classmethod
    def for_steps(cls, steps: int, batch_size: int, **overrides) -> TrainConfig:
        """The project's one schedule for a run of ``steps`` steps (the Lab, the experiments, the CLI).

        Warm-up over min(50, steps // 10) steps; an evaluation every max(5, steps // 20) steps
        (about 20 points on a loss curve; at least 5 steps apart, so short runs do not spend most
        of their time evaluating) on 10 batches per split. ``overrides`` replace any field
        (learning_rate, seed, device ...).

        Raises:
            ValueError: for steps or batch_size < 1, or an invalid override.
        """
        if not isinstance(steps, int) or steps < 1:
            raise ValueError(f"steps must be a positive integer, got {steps!r}")
        schedule = {"warmup_steps": min(50, steps // 10), "eval_interval": max(5, steps // 20), "eval_iters": 10}
        return cls(steps=steps, batch_size=batch_size, **{**schedule, **overrides})

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


class EarlyStop:
    """Stops a training whose validation loss has risen: pass it to :func:`train` as a callback and as ``stop``.

    After ``patience`` evaluations in a row whose validation loss is above the best seen so far, :meth:`__call__`
    answers True, so the run ends at its next step (with an evaluation, as any stopped run). The usual guard
    against a model that has begun to learn its training text by heart (Prechelt, "Early stopping — but when?",
    1998). ``patience`` 0 never stops.

    Attributes:
        best: the lowest validation loss seen (nats; inf before the first evaluation).
        best_step: the step of that evaluation (-1 before it).
        stopped_at: the step of the evaluation that stopped the run, or None.

    Raises:
        ValueError: for a negative patience.
    """

    def __init__(self, patience: int = 2):
        if not isinstance(patience, int) or patience < 0:
            raise ValueError(f"patience must be a non-negative integer, got {patience!r}")
        self.patience = patience
        self.best, self.best_step, self.stopped_at = math.inf, -1, None
        self._worse = 0

    def on_eval(self, step: int, train_loss: float, val_loss: float) -> None:
        if val_loss < self.best:
            self.best, self.best_step, self._worse = val_loss, step, 0
            return
        self._worse += 1
        if self.patience and self._worse >= self.patience and self.stopped_at is None:
            self.stopped_at = step

    def __call__(self) -> bool:
        return self.stopped_at is not None


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


def make_optimizer(model: torch.nn.Module, config: TrainConfig) -> Optimizer:
    """AdamW (Loshchilov & Hutter, 2019) with weight decay on parameters of 2+ dimensions except embeddings.

    Two groups, in this order: the decayed matrices ("weight_decay": ``config.weight_decay``) and
    the rest (0.0); lr ``config.learning_rate``, betas ``(config.beta1, config.beta2)``, eps 1e-8.
    Where every parameter is one PyTorch's fused kernel takes (``engine.optim.fused_supported``),
    an :class:`engine.optim.FusedAdamW`, which steps exactly as ``torch.optim.AdamW(fused=True)``
    without importing PyTorch's compiler stack, as the Optimizer base class does on first use;
    elsewhere ``torch.optim.AdamW`` without the fused kernel (that one may import ``torch._dynamo``).
    Parameters with ``requires_grad`` False are left out.
    """
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
    if fused_supported(decay + no_decay):
        return FusedAdamW(groups, **kwargs)  # one kernel per step
    return torch.optim.AdamW(groups, **kwargs)


@torch.no_grad()
def estimate_loss(model: GPT, corpus: Corpus, batch_size: int, eval_iters: int, seed: int) -> dict[str, float]:
    """Mean loss (nats) over ``eval_iters`` batches of each split, in eval mode (no dropout).

    The batches come from a generator seeded with ``seed``, so every call sees the same windows.
    """
    device = next(model.parameters()).device
    out = {}
    with eval_mode(model):
        for split in ("train", "val"):
            generator = torch.Generator().manual_seed(seed)
            losses = [
                model(*corpus.get_batch(split, batch_size, model.config.block_size, generator, device)).loss.item()
                for _ in range(eval_iters)
            ]
            out[split] = sum(losses) / len(losses)
    return out


@uses_global_rng
def seeded_model(config: GPTConfig, seed: int) -> GPT:
    """``torch.manual_seed(seed)`` then ``GPT(config)``, under engine.rng's lock: the chapter's way, thread-safe.

    The lock is held only while the weights are drawn (milliseconds), and the global generator's
    state is restored afterwards.
    """
    torch.manual_seed(seed)
    return GPT(config)


class GeneratorDropout(nn.Module):
    """Dropout whose masks come from a given ``torch.Generator`` instead of the global one.

    Same rule as ``nn.Dropout`` (Srivastava et al., 2014): in training, each element is zeroed
    with probability ``p`` and the others scaled by ``1 / (1 - p)``; in eval mode the identity.

    Args:
        p: drop probability in [0, 1).
        generator: a generator on the device of the inputs.
    """

    def __init__(self, p: float, generator: torch.Generator):
        super().__init__()
        self.p = p
        self.generator = generator

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x of any shape -> the same shape."""
        if not self.training or self.p == 0:
            return x
        keep = torch.empty_like(x).bernoulli_(1 - self.p, generator=self.generator)  # 1 with probability 1 - p
        return x * keep / (1 - self.p)


@contextlib.contextmanager
def private_dropout(model: GPT, generator: torch.Generator) -> Iterator[bool]:
    """Within the block, every dropout of ``model`` draws its masks from ``generator``.

    Each ``nn.Dropout`` is swapped for a :class:`GeneratorDropout` of the same ``p``. The fused
    attention kernel (``F.scaled_dot_product_attention``) draws its dropout from the global
    generator and takes no generator, so its ``dropout_p`` is set to 0 and, when the model has
    attention dropout (``attn_dropout_rate``: ``attn_dropout``, else ``dropout``), the block yields
    True: the caller then runs the model with ``return_weights=True``, whose manual attention path
    applies the (swapped) ``attn_dropout`` module to the attention weights. Everything is put back on exit.

    Yields:
        True when the model must take the manual attention path for its attention dropout.
    """
    swapped: list[tuple[nn.Module, str, object]] = []
    for module in model.modules():
        for name, child in list(module.named_children()):
            if isinstance(child, nn.Dropout):
                swapped.append((module, name, child))
                setattr(module, name, GeneratorDropout(child.p, generator))
        if isinstance(getattr(module, "dropout", None), float) and not isinstance(module, nn.Dropout):
            swapped.append((module, "dropout", module.dropout))
            module.dropout = 0.0
    try:
        yield model.config.attn_dropout_rate > 0
    finally:
        for module, name, original in reversed(swapped):
            setattr(module, name, original)


STATE_FORMAT = "engine-train-state/1"
STATE_FILE = "state.json"  # names the tensors file of the same state; written last, so it never names a partial one
MAX_STATE_JSON_BYTES = 64 * 2**20  # history and step losses of the longest run the budget allows, with room


class ResumeError(ValueError):
    """A resumable state that cannot be continued: unreadable, damaged, or from another run's settings."""


def _state_tensors(model: GPT, optimizer: Optimizer, batches: torch.Generator,
                   masks: torch.Generator) -> dict[str, torch.Tensor]:
    """Everything of a run's state that is a tensor, under flat names (safetensors holds no nesting)."""
    tensors = {f"model.{name}": t.detach().to("cpu").contiguous() for name, t in model.state_dict().items()}
    for index, slots in optimizer.state_dict()["state"].items():
        for slot, value in slots.items():
            tensors[f"optimizer.{index}.{slot}"] = torch.as_tensor(value).detach().to("cpu").contiguous()
    tensors["rng.batches"] = batches.get_state()
    tensors["rng.masks"] = masks.get_state()
    return tensors


def _resume_key(model: GPT, corpus: Corpus, config: TrainConfig) -> dict:
    """What a state must share with the run that continues it (the device may change)."""
    return {"model_config": model.config.to_dict(), "corpus": corpus.name, "vocab_size": corpus.vocab_size,
            "train_config": {k: v for k, v in dataclasses.asdict(config).items() if k != "device"}}


def save_train_state(folder: Path, *, model: GPT, optimizer: Optimizer, batches: torch.Generator,
                     masks: torch.Generator, key: dict, step: int, history: list[dict],
                     step_losses: list[float], elapsed_s: float) -> None:
    """Writes a resumable state into ``folder``: ``state-<step>.safetensors`` then ``state.json``.

    Each file is written atomically (temporary file + rename), the tensors first; ``state.json``
    names its tensors file and their SHA-256, so a crash at any moment leaves the previous complete
    state. Older tensors files are removed once the new JSON is in place.
    """
    folder.mkdir(parents=True, exist_ok=True)
    name = f"state-{step}.safetensors"
    data = safetensors.torch.save(_state_tensors(model, optimizer, batches, masks))
    _atomic_write(folder / name, data)
    meta = {"format": STATE_FORMAT, **key, "step": step, "tensors": name,
            "tensors_sha256": hashlib.sha256(data).hexdigest(), "elapsed_s": elapsed_s,
            "history": history, "step_losses": step_losses}
    _atomic_write(folder / STATE_FILE, json.dumps(meta).encode("utf-8"))
    for old in folder.glob("state-*.safetensors"):
        if old.name != name:
            old.unlink(missing_ok=True)


def _finite_numbers(values: object, length: int | None = None) -> bool:
    return (isinstance(values, list) and (length is None or len(values) == length)
            and all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in values))


def load_train_state(folder: Path, *, model: GPT, optimizer: Optimizer, batches: torch.Generator,
                     masks: torch.Generator, key: dict) -> tuple[int, list[dict], list[float], float] | None:
    """Restores the state in ``folder`` into the model, the optimizer and both generators.

    Everything is checked before a tensor is allocated: the JSON's size, format and fields (the step
    within the run, a history of finite numbers, one loss per step), the settings against ``key``
    (same model, corpus and schedule), the tensors file's size against what the model's state can
    take, its SHA-256, then every tensor's name, dtype and shape.

    Returns:
        (step, history rows, step losses, elapsed seconds), or None when ``folder`` holds no state.

    Raises:
        ResumeError: for anything that does not fit, with what and where.
    """
    meta_path = folder / STATE_FILE
    if not meta_path.exists():
        return None
    where = str(meta_path)
    if meta_path.stat().st_size > MAX_STATE_JSON_BYTES:
        raise ResumeError(f"{where}: larger than {MAX_STATE_JSON_BYTES} bytes")
    try:
        meta = json.loads(meta_path.read_bytes())
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ResumeError(f"{where}: not JSON ({exc})") from exc
    if not isinstance(meta, dict) or meta.get("format") != STATE_FORMAT:
        raise ResumeError(f"{where}: not a training state of format {STATE_FORMAT}")
    for field, expected in key.items():
        if meta.get(field) != expected:
            raise ResumeError(f"{where}: its {field} {meta.get(field)!r} differs from this run's {expected!r}")
    step, elapsed = meta.get("step"), meta.get("elapsed_s")
    steps = key["train_config"]["steps"]
    if not (isinstance(step, int) and not isinstance(step, bool) and 1 <= step <= steps):
        raise ResumeError(f"{where}: step {step!r} is not in [1, {steps}]")
    if not _finite_numbers([elapsed]) or elapsed < 0:
        raise ResumeError(f"{where}: elapsed_s {elapsed!r} is not a non-negative number")
    history, step_losses = meta.get("history"), meta.get("step_losses")
    columns = ("step", "train_loss", "val_loss", "elapsed_s")
    if not (isinstance(history, list) and 1 <= len(history) <= steps + 1
            and all(isinstance(row, dict) and set(row) == set(columns) and _finite_numbers(list(row.values()))
                    for row in history)):
        raise ResumeError(f"{where}: its history is not a list of evaluations of finite numbers")
    if not _finite_numbers(step_losses, step):
        raise ResumeError(f"{where}: step_losses is not {step} finite numbers")
    name = meta.get("tensors")
    if not (isinstance(name, str) and name == f"state-{step}.safetensors"):
        raise ResumeError(f"{where}: its tensors file {name!r} is not state-{step}.safetensors")
    expected = _state_tensors(model, optimizer, batches, masks)  # the live state: names, dtypes and shapes
    tensors_path = folder / name
    # The fresh optimizer holds no moments yet: the file may add two per parameter and a step each, and a header of
    # at most 256 bytes per tensor.
    params_bytes = sum(p.numel() * p.element_size() for group in optimizer.param_groups for p in group["params"])
    n_params = sum(len(group["params"]) for group in optimizer.param_groups)
    limit = (sum(t.numel() * t.element_size() for t in expected.values()) + 2 * params_bytes + 4 * n_params
             + 256 * (len(expected) + 3 * n_params) + 16)
    if not tensors_path.exists() or tensors_path.stat().st_size > limit:
        raise ResumeError(f"{tensors_path}: missing or larger than the {limit} bytes this model's state can take")
    data = tensors_path.read_bytes()
    if hashlib.sha256(data).hexdigest() != meta.get("tensors_sha256"):
        raise ResumeError(f"{tensors_path}: its SHA-256 differs from the one {STATE_FILE} records")
    try:
        tensors = safetensors.torch.load(data)
    except Exception as exc:  # safetensors raises its own error types for malformed files
        raise ResumeError(f"{tensors_path}: not a safetensors file ({exc})") from exc
    params = [p for group in optimizer.param_groups for p in group["params"]]
    optimizer_state: dict[int, dict[str, torch.Tensor]] = {}
    for tensor_name, tensor in tensors.items():
        kind, _, rest = tensor_name.partition(".")
        if kind == "optimizer":
            index_text, _, slot = rest.partition(".")
            if not index_text.isdigit() or int(index_text) >= len(params) or slot not in ("step", "exp_avg",
                                                                                         "exp_avg_sq"):
                raise ResumeError(f"{tensors_path}: unexpected tensor {tensor_name!r}")
            shape = () if slot == "step" else tuple(params[int(index_text)].shape)
            if tensor.dtype != torch.float32 or tuple(tensor.shape) != shape:
                raise ResumeError(f"{tensors_path}: {tensor_name} is {tensor.dtype} {tuple(tensor.shape)}, "
                                  f"expected torch.float32 {shape}")
            optimizer_state.setdefault(int(index_text), {})[slot] = tensor
        elif tensor_name not in expected or expected[tensor_name].dtype != tensor.dtype or (
                tensor_name.startswith("model.") and expected[tensor_name].shape != tensor.shape):
            raise ResumeError(f"{tensors_path}: unexpected tensor {tensor_name!r} {tensor.dtype} {tuple(tensor.shape)}")
    missing = sorted(n for n in expected if not n.startswith("optimizer.") and n not in tensors)
    if missing or len(optimizer_state) != len(params) or any(len(s) != 3 for s in optimizer_state.values()):
        raise ResumeError(f"{tensors_path}: incomplete state (missing {missing[:3]} or optimizer slots)")
    if not all(torch.isfinite(t).all() for n, t in tensors.items() if not n.startswith("rng.")):
        raise ResumeError(f"{tensors_path}: a weight or a moment is NaN or infinite")
    model.load_state_dict({n.removeprefix("model."): t for n, t in tensors.items() if n.startswith("model.")})
    try:
        batches.set_state(tensors["rng.batches"])
        masks.set_state(tensors["rng.masks"])
    except RuntimeError as exc:
        raise ResumeError(f"{tensors_path}: a generator state that does not fit ({exc})") from exc
    optimizer.load_state_dict({"state": optimizer_state, "param_groups": optimizer.state_dict()["param_groups"]})
    return step, history, [float(v) for v in step_losses], float(elapsed)


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
    state_dir: str | Path | None = None,
) -> TrainResult:
    """Trains a GPT on a corpus.

    Args:
        model_or_config: a ``GPT`` (trained further; its vocab_size must equal the corpus's) or a
            ``GPTConfig`` (a new model is built with vocab_size set to the corpus's, by
            :func:`seeded_model` with ``config.seed``).
        corpus: supplies the batches and the tokenizer.
        config: steps, batch size, learning rate schedule, evaluation cadence, seed, device.
        callbacks: one ``Callbacks`` or several (any object with ``on_step`` / ``on_eval``
            attributes works); called from this thread.
        stop: a ``threading.Event`` or a callable returning True to stop; checked before each step.
            A stopped run still ends with an evaluation and returns normally.
        state_dir: a folder for resumable states (see :func:`save_train_state`), written after
            every evaluation but the first; if it already holds one, the run continues from its
            step (weights, optimizer moments, generators, history), skipping the evaluation at 0.

    Returns:
        A ``TrainResult`` (model in eval mode, evaluation history, stopped flag, timings).

    Raises:
        ValueError: if the vocabularies differ or block_size is too long for the corpus.
        ResumeError: if ``state_dir`` holds a state that is damaged or from other settings.
        TrainingDivergedError: if a training loss is NaN or infinite.

    The global random generator is not touched after the model is built (see the module docstring).
    """
    device = pick_device(config.device)
    tokenizer = corpus.tokenizer
    if isinstance(model_or_config, GPTConfig):
        model = seeded_model(dataclasses.replace(model_or_config, vocab_size=tokenizer.vocab_size), config.seed)
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
    autocast_dtype = training_autocast_dtype(device)  # None (float32) unless the CPU has AMX and bf16 is adopted
    optimizer = make_optimizer(model, config)
    batches = torch.Generator().manual_seed(config.seed)
    masks = torch.Generator(device=device).manual_seed(config.seed)
    hooks = _callbacks(callbacks)
    should_stop = _stop_fn(stop)
    history: list[dict] = []
    step_losses: list[float] = []
    tokens_per_step = config.batch_size * block_size
    folder = None if state_dir is None else Path(state_dir)
    key = _resume_key(model, corpus, config)
    resumed = None if folder is None else load_train_state(folder, model=model, optimizer=optimizer,
                                                           batches=batches, masks=masks, key=key)
    start = time.perf_counter()

    def evaluate(step: int) -> None:
        losses = estimate_loss(model, corpus, config.batch_size, config.eval_iters, config.seed + 1)
        history.append(
            {"step": step, "train_loss": losses["train"], "val_loss": losses["val"],
             "elapsed_s": time.perf_counter() - start}
        )
        if folder is not None and step > 0:
            save_train_state(folder, model=model, optimizer=optimizer, batches=batches, masks=masks, key=key,
                             step=step, history=history, step_losses=step_losses, elapsed_s=history[-1]["elapsed_s"])
        for hook in hooks:
            if getattr(hook, "on_eval", None):
                hook.on_eval(step, losses["train"], losses["val"])

    if resumed is None:
        evaluate(0)
        step = 0
    else:
        step, history[:], step_losses[:], elapsed = resumed
        start -= elapsed  # elapsed_s and wall_s go on from the interrupted run's clock
    stopped = False
    with private_dropout(model, masks) as manual_attention:
        model.train()
        while step < config.steps:
            if should_stop():
                stopped = True
                break
            step += 1
            t0 = time.perf_counter()
            lr = config.lr_at(step)
            for group in optimizer.param_groups:
                group["lr"] = lr
            x, y = corpus.get_batch("train", config.batch_size, block_size, batches, device)  # (B, T) each
            with (torch.autocast(device.type, dtype=autocast_dtype) if autocast_dtype is not None
                  else contextlib.nullcontext()):
                loss = model(x, y, return_weights=manual_attention).loss
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
