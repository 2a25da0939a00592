"""Checkpoints of the course's GPT: saving, and loading only what was checked first.

A checkpoint holds weights (safetensors: no pickle, nothing executed on load) and a JSON
description (GPT config, tokenizer vocabulary, training summary). Two forms:

* a folder: ``model.safetensors`` + ``checkpoint.json`` (which records the weights' SHA-256, so
  a folder whose files do not belong together is refused); each file is written to a temporary
  file and moved into place with ``os.replace``, weights first;
* a single file (:func:`checkpoint_to_bytes`): safetensors whose header metadata holds the JSON,
  for the Lab page's download and upload.

Loading trusts nothing in the file. Before any tensor is allocated, :func:`inspect_checkpoint`
reads the safetensors header (an 8-byte length, then JSON), checks the declared config against
the caps of :mod:`engine.budget`, and checks every stored tensor's dtype, shape and byte range
against the shapes the config implies (read from the config alone, nothing built). Only then are the weights
read; a weight that is NaN or infinite is refused. A 420-byte file that declares n_embd 10^6
is refused from its header, with memory near the file's size.

The description is checked field by field like the tensors (:func:`check_description`): every config
field has its type (``causal`` a boolean, sizes integers, rates finite numbers), the vocabulary holds
no lone surrogate (which no UTF-8 text can produce and no page can send on), and the training summary
keeps only the fields this app writes, each of its type and within bounds (losses finite, a seed that
``torch.manual_seed`` takes, a history of equal-length lists of finite numbers). JSON allows ``1e400``
(read as infinity) and integers of any length; none of them gets past the header.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import struct
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import safetensors.torch
import torch

from engine import budget
from engine.gpt import GPT, GPTConfig, param_shapes
from engine.rng import uses_global_rng
from engine.tokenizer import CharTokenizer

#: Where the model the app ships lives (made by ``python -m engine.train ... --out``).
SHIPPED_MODEL = Path(__file__).resolve().parents[1] / "assets" / "models" / "course_tang"
CHECKPOINT_FORMAT = "engine-gpt-checkpoint/1"
WEIGHTS_FILE = "model.safetensors"
META_FILE = "checkpoint.json"
_META_KEY = "checkpoint"  # safetensors header metadata key in the single-file form
_DTYPE_BYTES = {"F32": 4}  # the only dtype this app writes


class CheckpointError(ValueError):
    """A checkpoint that is missing, corrupt, over the caps, or whose parts do not match each other.

    Attributes:
        reason: a stable key for pages to translate: "missing", "unreadable", "format", "config",
            "summary", "too_large", "shapes", "not_finite" or "mismatch".
    """

    def __init__(self, message: str, reason: str = "unreadable"):
        super().__init__(message)
        self.reason = reason


@dataclass
class Checkpoint:
    """A loaded checkpoint: the model (eval mode) with its config, tokenizer and training summary."""

    model: GPT
    tokenizer: CharTokenizer
    config: GPTConfig
    summary: dict = field(default_factory=dict)


@dataclass(frozen=True)
class CheckpointHeader:
    """What a checkpoint declares, checked, before its weights are read.

    Attributes:
        config: the GPT config (within the caps of :mod:`engine.budget`).
        tokenizer: the vocabulary (as many characters as ``config.vocab_size``).
        summary: the training summary (a dict, possibly empty).
        params: parameters the weights hold.
    """

    config: GPTConfig
    tokenizer: CharTokenizer
    summary: dict
    params: int


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
    return {name: t.detach().to("cpu", torch.float32).contiguous() for name, t in model.state_dict().items()}


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
    records the weights' SHA-256 so :func:`load_checkpoint` notices a mixed-up folder.

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
    """The single-file form: safetensors bytes (float32) whose header metadata holds the JSON description."""
    meta = _describe(model, tokenizer, summary)
    return safetensors.torch.save(_weights(model), metadata={_META_KEY: json.dumps(meta, ensure_ascii=False)})


def _safetensors_header(data: bytes, where: str) -> tuple[dict, int]:
    """The header JSON of a safetensors blob and where its tensor data starts (byte offset).

    Raises:
        CheckpointError: for a blob shorter than 8 bytes, a header length over
            ``budget.MAX_HEADER_BYTES`` or past the data, or a header that is not a JSON object.
    """
    if len(data) < 8:
        raise CheckpointError(f"{where}: not a safetensors checkpoint: the data is shorter than its 8-byte header")
    (length,) = struct.unpack("<Q", data[:8])
    if length > len(data) - 8:
        raise CheckpointError(f"{where}: not a safetensors checkpoint: the header length exceeds the data")
    if length > budget.MAX_HEADER_BYTES:
        raise CheckpointError(f"{where}: header of {length} bytes is over {budget.MAX_HEADER_BYTES}", "too_large")
    try:
        header = json.loads(data[8 : 8 + length].decode("utf-8"))
    except (ValueError, RecursionError) as exc:  # bad UTF-8 or JSON, an integer over Python's 4300 digits, nesting
        raise CheckpointError(f"{where}: not a safetensors checkpoint: unreadable header ({exc})") from exc
    if not isinstance(header, dict):
        raise CheckpointError(f"{where}: not a safetensors checkpoint: the header is not a JSON object")
    return header, 8 + length


def _check_format(meta: object, where: str) -> None:
    if not isinstance(meta, dict) or meta.get("format") != CHECKPOINT_FORMAT:
        found = meta.get("format") if isinstance(meta, dict) else type(meta).__name__
        raise CheckpointError(f"{where}: expected format {CHECKPOINT_FORMAT!r}, found {found!r}", "format")


# --- the description, field by field ---------------------------------------------------------------------------------
#: Longest text field of a summary (corpus name, device, torch version, command line), characters.
MAX_SUMMARY_TEXT = 1000
#: Most evaluations a summary's history may list: one every step of the longest training, and the first.
MAX_HISTORY_ROWS = budget.MAX_STEPS + 1
#: Largest loss a summary may state (nats): an untrained model over MAX_VOCAB characters starts near ln 6000 = 8.7.
MAX_LOSS = 1000.0
#: ``torch.manual_seed`` takes integers in [-2**63, 2**64); the app's seeds are non-negative.
MAX_SEED = 2**63 - 1
_BIG = 10**12  # bound of the summary's other counts and measurements (steps, seconds, tokens/s)

_CONFIG_FIELDS = {"vocab_size": "size", "block_size": "size", "n_embd": "size", "n_head": "size",
                  "n_layer": "size", "dropout": "rate", "attn_dropout": "rate?", "resid_dropout": "rate?",
                  "bias": "bool", "pos_encoding": "text", "causal": "bool"}
_TRAIN_FIELDS = {"steps": (1, budget.MAX_STEPS * 100), "batch_size": (1, _BIG), "learning_rate": (0.0, 10.0),
                 "min_lr_ratio": (0.0, 1.0), "warmup_steps": (0, _BIG), "weight_decay": (0.0, 10.0),
                 "beta1": (0.0, 1.0), "beta2": (0.0, 1.0), "grad_clip": (0.0, 1e6), "eval_interval": (1, _BIG),
                 "eval_iters": (1, _BIG), "seed": (0, MAX_SEED)}


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: object, low: float, high: float) -> bool:
    """A finite int or float (never a bool) in [low, high]; JSON's 1e400 is read as infinity and fails."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    if _is_int(value) and value.bit_length() > 64:  # 10**400: no float conversion needed to refuse it
        return False
    return math.isfinite(value) and low <= value <= high


def _is_text(value: object, limit: int = MAX_SUMMARY_TEXT) -> bool:
    """A string of at most ``limit`` characters without lone surrogates (it would not encode as UTF-8)."""
    if not isinstance(value, str) or len(value) > limit:
        return False
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _check_config_fields(config: object, where: str) -> None:
    if not isinstance(config, dict):
        raise CheckpointError(f"{where}: the config is not a JSON object", "config")
    for name, value in config.items():
        kind = _CONFIG_FIELDS.get(name)
        ok = {"size": lambda v: _is_int(v) and 1 <= v <= _BIG, "rate": lambda v: _is_number(v, 0.0, 1.0),
              "rate?": lambda v: v is None or _is_number(v, 0.0, 1.0), "bool": lambda v: isinstance(v, bool),
              "text": lambda v: _is_text(v, 32), None: lambda v: False}[kind](value)
        if not ok:
            shown = repr(value)[:40]
            raise CheckpointError(f"{where}: config field {name!r} = {shown} is not a valid {kind or 'field'}",
                                  "config")


def _check_summary(summary: object, where: str) -> dict:
    """The summary's fields this app writes, each checked; anything else in it is left out.

    Raises:
        CheckpointError: ("summary") for a summary that is not an object, or a known field of the
            wrong type or out of bounds.
    """
    if summary is None:
        return {}
    if not isinstance(summary, dict):
        raise CheckpointError(f"{where}: the training summary is not a JSON object", "summary")

    out: dict = {}
    for name, value in summary.items():
        if name in ("corpus", "device", "torch_version", "command", "preset"):
            ok = _is_text(value)
        elif name == "steps_done":
            ok = _is_int(value) and 0 <= value <= _BIG
        elif name == "stopped":
            ok = isinstance(value, bool)
        elif name in ("final_train_loss", "final_val_loss"):
            ok = _is_number(value, 0.0, MAX_LOSS)
        elif name in ("wall_s", "tokens_per_s"):
            ok = _is_number(value, 0.0, _BIG)
        elif name == "train_config":
            value, ok = _check_train_config(value, where), True
        elif name == "history":
            value, ok = _check_history(value, where), True
        else:
            continue
        if not ok:
            raise CheckpointError(f"{where}: summary field {name!r} = {repr(value)[:40]} is invalid", "summary")
        out[name] = value
    return out


def _check_train_config(train: object, where: str) -> dict:
    if not isinstance(train, dict):
        raise CheckpointError(f"{where}: summary field 'train_config' is not a JSON object", "summary")
    out = {}
    for name, value in train.items():
        if name == "device":
            ok = value is None or _is_text(value, 32)
        elif name in _TRAIN_FIELDS:
            low, high = _TRAIN_FIELDS[name]
            ok = (_is_int(value) if isinstance(low, int) else True) and _is_number(value, low, high)
        else:
            continue
        if not ok:
            raise CheckpointError(f"{where}: train_config field {name!r} = {repr(value)[:40]} is invalid", "summary")
        out[name] = value
    return out


def _check_history(history: object, where: str) -> dict:
    if not isinstance(history, dict):
        raise CheckpointError(f"{where}: summary field 'history' is not a JSON object", "summary")
    lengths = set()
    for name, column in history.items():
        if (not _is_text(name, 32) or not isinstance(column, list) or len(column) > MAX_HISTORY_ROWS
                or not all(_is_number(v, -_BIG, _BIG) for v in column)):
            raise CheckpointError(f"{where}: the history's column {str(name)[:32]!r} is not a list of finite "
                                  f"numbers (at most {MAX_HISTORY_ROWS})", "summary")
        lengths.add(len(column))
    if len(lengths) > 1:
        raise CheckpointError(f"{where}: the history's columns differ in length ({sorted(lengths)})", "summary")
    return dict(history)


def check_description(meta: object, where: str = "checkpoint") -> tuple[GPTConfig, CharTokenizer, dict]:
    """A checkpoint's JSON description checked field by field: its config, vocabulary and training summary.

    Args:
        meta: the parsed JSON (format, config, tokenizer, summary).
        where: names the file in messages.

    Returns:
        ``(config, tokenizer, summary)``; the summary holds only the fields this app writes.

    Raises:
        CheckpointError: "format" for a foreign format; "config" for a config field of the wrong type
            or out of range, an unknown config field, or a vocabulary that is invalid or holds a lone
            surrogate; "summary" for an invalid summary field.
    """
    _check_format(meta, where)
    _check_config_fields(meta.get("config"), where)
    tokenizer_dict = meta.get("tokenizer")
    if isinstance(tokenizer_dict, dict) and not all(
            _is_text(tokenizer_dict.get(key) or "", budget.MAX_HEADER_BYTES) for key in ("chars", "unk")):
        raise CheckpointError(f"{where}: the vocabulary holds a character that is not valid Unicode text "
                              "(a lone surrogate)", "config")
    try:
        config = GPTConfig.from_dict(meta["config"])
        tokenizer = CharTokenizer.from_dict(tokenizer_dict)
    except (KeyError, TypeError, ValueError) as exc:
        raise CheckpointError(f"{where}: invalid config or tokenizer ({exc})", "config") from exc
    return config, tokenizer, _check_summary(meta.get("summary"), where)


def _expected_shapes(config: GPTConfig) -> dict[str, tuple[int, ...]]:
    """Name -> shape of every weight a GPT with ``config`` stores (``engine.gpt.param_shapes``: nothing built)."""
    return param_shapes(config)


def inspect_checkpoint(meta: object, header: dict, data_bytes: int, where: str = "checkpoint") -> CheckpointHeader:
    """Checks a checkpoint's description and tensor table before anything is allocated.

    Args:
        meta: the JSON description (format, config, tokenizer, summary).
        header: the safetensors header (tensor name -> dtype, shape, data_offsets).
        data_bytes: length of the tensor data that follows the header.
        where: names the file in messages.

    Returns:
        The checked :class:`CheckpointHeader`.

    Raises:
        CheckpointError: for a foreign format ("format"); an invalid config or tokenizer, or a
            vocabulary whose size differs from the config's ("config"); an invalid training summary
            ("summary", see :func:`check_description`); sizes over the caps of
            :mod:`engine.budget` ("too_large"); a tensor table whose names, dtypes, shapes or
            byte ranges differ from what the config implies ("shapes").
    """
    config, tokenizer, summary = check_description(meta, where)
    if tokenizer.vocab_size != config.vocab_size:
        raise CheckpointError(
            f"{where}: tokenizer has {tokenizer.vocab_size} characters but the config says vocab_size "
            f"{config.vocab_size}", "config"
        )
    refusals = budget.size_refusals(config)
    if refusals:
        worst = ", ".join(f"{r.key} {r.value} > {r.limit}" for r in refusals)
        raise CheckpointError(f"{where}: the model is larger than this app allows ({worst})", "too_large")
    expected = _expected_shapes(config)
    stored = {k: v for k, v in header.items() if k != "__metadata__"}
    if set(stored) != set(expected):
        missing, extra = sorted(set(expected) - set(stored)), sorted(set(stored) - set(expected))
        raise CheckpointError(
            f"{where}: the weights do not match the config (missing {missing[:5]}, unexpected {extra[:5]})", "shapes"
        )
    end = 0
    for name, shape in expected.items():
        entry = stored[name]
        if not isinstance(entry, dict) or entry.get("dtype") not in _DTYPE_BYTES:
            raise CheckpointError(f"{where}: weight {name} is not float32", "shapes")
        offsets = entry.get("data_offsets")
        if entry.get("shape") != list(shape) or not (isinstance(offsets, list) and len(offsets) == 2
                                                      and all(isinstance(o, int) for o in offsets)):
            raise CheckpointError(
                f"{where}: weight {name} has shape {entry.get('shape')}, the config implies {list(shape)}", "shapes"
            )
        if offsets[1] - offsets[0] != math.prod(shape) * _DTYPE_BYTES[entry["dtype"]] or offsets[0] < 0:
            raise CheckpointError(f"{where}: weight {name}'s byte range does not fit its shape", "shapes")
        end = max(end, offsets[1])
    if end != data_bytes:
        raise CheckpointError(f"{where}: {data_bytes} bytes of weights, the tensor table accounts for {end}", "shapes")
    return CheckpointHeader(config=config, tokenizer=tokenizer, summary=summary,
                            params=sum(math.prod(s) for s in expected.values()))


@uses_global_rng
def _empty_model(config: GPTConfig) -> GPT:
    """A GPT to load weights into; its throwaway initial draws stay inside engine.rng's lock."""
    return GPT(config)


def _build(meta: object, weights: bytes, device: str | torch.device, where: str) -> Checkpoint:
    header, start = _safetensors_header(weights, where)
    checked = inspect_checkpoint(meta, header, len(weights) - start, where)
    try:
        tensors = safetensors.torch.load(weights)
    except Exception as exc:  # safetensors raises its own SafetensorError for corrupt data
        raise CheckpointError(f"{where}: the weights cannot be read ({exc})") from exc
    bad = [name for name, t in tensors.items() if not bool(torch.isfinite(t).all())]
    if bad:
        raise CheckpointError(f"{where}: weights hold NaN or infinite values ({', '.join(bad[:5])})", "not_finite")
    model = _empty_model(checked.config)
    try:
        model.load_state_dict(tensors, strict=True)
    except RuntimeError as exc:
        raise CheckpointError(f"{where}: the weights do not match the config ({exc})", "shapes") from exc
    model.to(device).eval()
    return Checkpoint(model=model, tokenizer=checked.tokenizer, config=checked.config, summary=checked.summary)


def checkpoint_from_bytes(data: bytes, device: str | torch.device = "cpu", where: str = "checkpoint") -> Checkpoint:
    """Loads the single-file form made by :func:`checkpoint_to_bytes`, checking it first (see the module).

    Raises:
        CheckpointError: if the bytes are empty, over ``budget.MAX_CHECKPOINT_BYTES``, not such a
            checkpoint, truncated, inconsistent, over the caps, or hold a NaN/inf weight; the
            message starts with ``where`` and :attr:`CheckpointError.reason` says which.
    """
    if not data:
        raise CheckpointError(f"{where}: the file is empty", "missing")
    if len(data) > budget.MAX_CHECKPOINT_BYTES:
        raise CheckpointError(f"{where}: {len(data)} bytes is over {budget.MAX_CHECKPOINT_BYTES}", "too_large")
    header, _ = _safetensors_header(data, where)
    raw = (header.get("__metadata__") or {}).get(_META_KEY) if isinstance(header.get("__metadata__"), dict) else None
    if raw is None:
        raise CheckpointError(f"{where}: safetensors data without a '{_META_KEY}' description (not made by this app)",
                              "format")
    try:
        meta = json.loads(raw)
    except (TypeError, ValueError, RecursionError) as exc:
        raise CheckpointError(f"{where}: the embedded description is not valid JSON ({exc})", "format") from exc
    return _build(meta, data, device, where)


def load_checkpoint(path: str | Path, device: str | torch.device = "cpu") -> Checkpoint:
    """Loads a checkpoint folder (:func:`save_checkpoint`) or a single file (:func:`checkpoint_to_bytes`).

    Raises:
        CheckpointError: if the path or one of its files is missing, a file is corrupt or too
            large, the weights' SHA-256 differs from the one recorded, or weights, config and
            tokenizer do not match (see :func:`inspect_checkpoint`).
    """
    path = Path(path)
    if path.is_file():
        if path.stat().st_size > budget.MAX_CHECKPOINT_BYTES:
            raise CheckpointError(f"{path}: {path.stat().st_size} bytes is over {budget.MAX_CHECKPOINT_BYTES}",
                                  "too_large")
        return checkpoint_from_bytes(path.read_bytes(), device, where=str(path))
    if not path.is_dir():
        raise CheckpointError(f"no checkpoint at {path}", "missing")
    meta_path, weights_path = path / META_FILE, path / WEIGHTS_FILE
    for needed in (meta_path, weights_path):
        if not needed.is_file():
            raise CheckpointError(f"{path}: {needed.name} is missing", "missing")
    for needed, cap in ((meta_path, budget.MAX_HEADER_BYTES), (weights_path, budget.MAX_CHECKPOINT_BYTES)):
        if needed.stat().st_size > cap:
            raise CheckpointError(f"{needed}: {needed.stat().st_size} bytes is over {cap}", "too_large")
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
    except (ValueError, RecursionError) as exc:
        raise CheckpointError(f"{meta_path}: not valid JSON ({exc})", "format") from exc
    _check_format(meta, str(meta_path))
    weights = weights_path.read_bytes()
    if meta.get("weights_sha256") != hashlib.sha256(weights).hexdigest():
        raise CheckpointError(
            f"{weights_path}: its SHA-256 does not match the one in {META_FILE} "
            "(the files come from different saves, or one is damaged)", "mismatch"
        )
    return _build(meta, weights, device, str(path))
