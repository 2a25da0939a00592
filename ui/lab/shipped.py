"""The Lab's shipped measurement files, read through ``engine.lab.results`` once per file version.

A file is read again when it changes (its modification time is part of the cache key). Each reader
returns ``(value, unreadable)``: ``(None, False)`` when the file is absent, ``(None, True)`` when it
exists but cannot be read, so the page says so instead of showing a traceback.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import streamlit as st

from engine.lab import results


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


def exercises() -> tuple[results.ExercisesFile | None, bool]:
    """The lesson's exercises (:data:`engine.lab.results.EXERCISES_FILE`) and whether the file is unreadable."""
    return _read(_exercises, Path(results.EXERCISES_FILE))


def dropout_loss() -> tuple[results.DropoutLoss | None, bool]:
    """The dropout experiment (:data:`engine.lab.results.DROPOUT_RESULTS_FILE`) and whether it is unreadable."""
    return _read(_dropout_loss, Path(results.DROPOUT_RESULTS_FILE))


def dropout_price() -> results.DropoutPrice | None:
    """The training benchmark's price of dropout (None when absent or unreadable)."""
    return _read(_dropout_price, Path(results.BENCH_TRAIN_FILE))[0]
