"""The recipes of the Home page's notebook (:mod:`engine.notebooks`)."""

from __future__ import annotations

from engine import attention as A
from engine.notebooks.core import show


def home_inputs():
    """The six 3-d embeddings of the running example."""
    show("inputs", A.chapter_inputs())


RECIPES = {"chapter_inputs": home_inputs}
