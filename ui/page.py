"""The one page shape: header -> prose -> live blocks -> code that ran -> check yourself.

Prose lives in ``content/en/<page>.md``, cut into named parts by lines of the
form ``<!-- part: name -->``; a page renders a part with :func:`prose`. The
"check yourself" questions are the part ``quiz``: each ``### question`` heading
is followed by its answer.
"""

from __future__ import annotations

import functools
import inspect
import re
from collections.abc import Callable, Sequence
from pathlib import Path

import streamlit as st

from engine import chapter

CONTENT_DIR = Path(__file__).resolve().parent.parent / "content" / "en"
_PART = re.compile(r"^<!--\s*part:\s*([\w-]+)\s*-->\s*$", re.MULTILINE)


@functools.cache
def load_parts(page: str) -> dict[str, str]:
    """Parse ``content/en/<page>.md`` into ``{part name: markdown}``.

    Raises:
        FileNotFoundError: if the file is missing (a packaging error, not user input).
    """
    text = (CONTENT_DIR / f"{page}.md").read_text(encoding="utf-8")
    pieces = _PART.split(text)
    return {name: body.strip() for name, body in zip(pieces[1::2], pieces[2::2])}


def prose(page: str, part: str) -> None:
    """Render one named part of a page's prose."""
    st.markdown(load_parts(page)[part])


def header(title: str, section: str, page: str | None = None) -> None:
    """Page title, the chapter section it accompanies, and the ``intro`` part of its prose."""
    st.title(title)
    st.caption(f"Accompanies: {section}")
    if page is not None:
        prose(page, "intro")


def chapter_check(label: str, value, expected, applies: bool = True, decimals: int = chapter.DECIMALS) -> bool:
    """A badge saying whether a live value equals the chapter's printed one at ``decimals`` decimals.

    Args:
        label: what is compared (e.g. "softmax weights").
        value: the live value (tensor, number or nested sequence).
        expected: the chapter's value.
        applies: False when the reader changed an input (seed, embedding) so
            the chapter's number is not expected; the badge then says so.

    Returns:
        True when the values match.
    """
    ok = chapter.matches(value, expected, decimals)
    if not applies:
        if ok:
            st.badge(f"{label}: equals the chapter's value", icon=":material/check:", color="green")
        else:
            st.badge(f"{label}: differs from the chapter, as expected with your inputs", icon=":material/tune:", color="gray")
    elif ok:
        st.badge(f"{label}: matches the chapter to {decimals} decimals", icon=":material/check_circle:", color="green")
    else:
        st.badge(f"{label}: does NOT match the chapter", icon=":material/error:", color="red")
    return ok


def verdict(ok: bool, passed: str, failed: str) -> bool:
    """A green badge saying ``passed`` when a live check holds, else a red one saying ``failed``; returns ``ok``."""
    if ok:
        st.badge(passed, icon=":material/check_circle:", color="green")
    else:
        st.badge(failed, icon=":material/error:", color="red")
    return ok


@functools.cache
def _source(obj: Callable | type) -> str:
    """``inspect.getsource`` once per object (the engine does not change while the app runs)."""
    return inspect.getsource(obj)


def show_code(*objects: Callable | type, label: str = "Code that ran") -> None:
    """An expander with the source of the engine functions/classes the page just called."""
    with st.expander(label, icon=":material/code:"):
        for obj in objects:
            st.caption(f"`{obj.__module__}.{obj.__qualname__}`")
            st.code(_source(obj), language="python")


def check_yourself(page: str) -> None:
    """The "check yourself" block: each question of the ``quiz`` part in its own expander."""
    st.subheader("Check yourself")
    body = load_parts(page)["quiz"]
    blocks = re.split(r"^###\s+", body, flags=re.MULTILINE)
    for block in blocks[1:]:
        question, _, answer = block.partition("\n")
        with st.expander(question.strip()):
            st.markdown(answer.strip())


def fmt_row(values: Sequence[float], decimals: int = chapter.DECIMALS) -> str:
    """``[0.1385, 0.2379, …]`` as the chapter prints a 1-d tensor."""
    return "[" + ", ".join(f"{float(v):.{decimals}f}" for v in values) + "]"
