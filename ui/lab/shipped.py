"""The Lab's shipped measurement files, read through ``engine.lab.results`` once per file version.

A file is read again when it changes (its modification time is part of the cache key). Each reader
returns ``(value, unreadable)``: ``(None, False)`` when the file is absent, ``(None, True)`` when it
exists but cannot be read, so the page says so instead of showing a traceback.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import streamlit as st

from engine.checkpoint import SHIPPED_MODEL
from engine.lab import results

#: The shipped model's loss over the whole validation split (``engine.lab.experiments.measurement.split_loss``),
#: beside its checkpoint; ``tests/content/test_prose_claims.py`` measures it again.
WHOLE_SPLIT_FILE = Path(SHIPPED_MODEL) / "whole_split.json"
WHOLE_SPLIT_FORMAT = "lab-whole-split/1"


@dataclass(frozen=True)
class WholeSplit:
    """The shipped model's validation loss over every window of the validation split.

    Attributes:
        val_loss: nats per predicted character; windows: windows of block_size characters; tokens: characters
            predicted (windows · block_size).
    """

    val_loss: float
    windows: int
    tokens: int


def _read(reader: Callable, path: Path) -> tuple[object | None, bool]:
    if not path.exists():
        return None, False
    try:
        return reader(str(path), path.stat().st_mtime), False
    except ValueError:
        return None, True


@st.cache_data(show_spinner=False, max_entries=4)
def _exercises(path: str, mtime: float) -> results.ExercisesFile | None:
    return results.read_exercises(path)


@st.cache_data(show_spinner=False, max_entries=4)
def _dropout_loss(path: str, mtime: float) -> results.DropoutLoss | None:
    return results.dropout_loss(path)


@st.cache_data(show_spinner=False, max_entries=4)
def _dropout_price(path: str, mtime: float) -> results.DropoutPrice | None:
    return results.dropout_price(path)


@st.cache_data(show_spinner=False, max_entries=4)
def _whole_split(path: str, mtime: float) -> WholeSplit:
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    weights = Path(path).parent / "model.safetensors"
    if not isinstance(data, dict) or data.get("format") != WHOLE_SPLIT_FORMAT:
        raise ValueError(f"{path} is not a {WHOLE_SPLIT_FORMAT} file")
    if data.get("model_sha256") != hashlib.sha256(weights.read_bytes()).hexdigest():
        raise ValueError(f"{path} measured other weights than {weights.name}")
    loss, windows, tokens = data.get("val_loss"), data.get("windows"), data.get("tokens")
    if not (isinstance(loss, int | float) and math.isfinite(loss) and 0 < loss < 100
            and all(isinstance(n, int) and 0 < n < 10**9 for n in (windows, tokens))):
        raise ValueError(f"{path}: val_loss, windows and tokens must be positive numbers")
    return WholeSplit(float(loss), windows, tokens)


#: The shipped model's checkpoint header, whose summary says how it was trained.
CHECKPOINT_FILE = Path(SHIPPED_MODEL) / "checkpoint.json"


@st.cache_data(show_spinner=False, max_entries=2)
def _training_budget(path: str, mtime: float) -> tuple[int, int]:
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    summary = data.get("summary") if isinstance(data, dict) else None
    summary = summary if isinstance(summary, dict) else {}
    train = summary.get("train_config") if isinstance(summary.get("train_config"), dict) else {}
    steps, batch = summary.get("steps_done"), train.get("batch_size")
    if not all(isinstance(n, int) and 0 < n < 10**7 for n in (steps, batch)):
        raise ValueError(f"{path}: the summary's steps_done and train_config.batch_size must be positive integers")
    return steps, batch


def training_budget() -> tuple[int, int] | None:
    """How the shipped model was trained: (optimizer steps done, windows per batch); None when its checkpoint header
    is absent or does not say."""
    try:
        return _read(_training_budget, CHECKPOINT_FILE)[0]
    except (OSError, json.JSONDecodeError):
        return None


def whole_split() -> WholeSplit | None:
    """The shipped model's loss over the whole validation split (None when absent, unreadable or measured on other
    weights than those shipped)."""
    try:
        return _read(_whole_split, WHOLE_SPLIT_FILE)[0]
    except OSError:
        return None


def exercises() -> tuple[results.ExercisesFile | None, bool]:
    """The lesson's exercises (:data:`engine.lab.results.EXERCISES_FILE`) and whether the file is unreadable."""
    return _read(_exercises, Path(results.EXERCISES_FILE))


def dropout_loss() -> tuple[results.DropoutLoss | None, bool]:
    """The dropout experiment (:data:`engine.lab.results.DROPOUT_RESULTS_FILE`) and whether it is unreadable."""
    return _read(_dropout_loss, Path(results.DROPOUT_RESULTS_FILE))


def dropout_price() -> results.DropoutPrice | None:
    """The training benchmark's price of dropout (None when absent or unreadable)."""
    return _read(_dropout_price, Path(results.BENCH_TRAIN_FILE))[0]
