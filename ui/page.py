"""The one page shape: header -> prose -> live blocks -> code that ran -> check yourself.

Prose lives in ``content/<lang>/<slug>.md``, cut into named parts by lines of the form
``<!-- part: name -->``; a page renders a part with :func:`prose`. The "check yourself"
questions are the part ``quiz``: each ``### question`` heading is followed by its answer.
A part missing in the reader's language falls back to English for that part only, with a
visible note. Functions here find the page that calls them from the call stack (the first
frame in ``views/``), so a view never repeats its own name.
"""

from __future__ import annotations

import functools
import inspect
import re
import sys
import textwrap
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

import streamlit as st
import torch

from engine import chapter
from engine.notebook import listing
from ui import gates, record
from ui.diagram import diagram
from ui.i18n import DEFAULT_LANGUAGE, _, current_language
from ui.nav import PageInfo, page_info
from ui.numbers import seq

ROOT = Path(__file__).resolve().parent.parent
CONTENT_DIR = ROOT / "content"
VIEWS_DIR = ROOT / "views"
#: Entries of a page's cache of figures keyed by control values (``st.cache_resource(max_entries=...)``). The cache
#: is shared by every reader of the process: it saves the redraw of the values a reader just left or a classmate
#: also chose; a class jumping across a control's range fills more entries than it hits, each holding a Plotly
#: figure, so more entries add memory while every reader stays, not speed.
FIGURE_CACHE_ENTRIES = 8
#: Entries of a cache of small figures (a few tens of KB each, as a score matrix of at most 16 positions): 64 of them
#: hold a class's recent values for a few MB.
SMALL_FIGURE_ENTRIES = 64
_PART = re.compile(r"^<!--\s*part:\s*([\w-]+)\s*-->\s*$", re.MULTILINE)


def current() -> PageInfo:
    """The registry entry of the page being drawn: the first caller whose file is in ``views/``.

    Raises:
        RuntimeError: when called from outside a page script.
    """
    frame = sys._getframe(1)
    while frame is not None:
        path = Path(frame.f_code.co_filename)
        if path.parent == VIEWS_DIR:
            return page_info(path.stem)
        frame = frame.f_back
    raise RuntimeError("ui.page functions must be called from a page script in views/")


@functools.cache
def load_parts(slug: str, lang: str = DEFAULT_LANGUAGE) -> dict[str, str]:
    """Parse ``content/<lang>/<slug>.md`` into ``{part name: markdown}``; ``{}`` when the file is missing."""
    path = CONTENT_DIR / lang / f"{slug}.md"
    if not path.is_file():
        return {}
    pieces = _PART.split(path.read_text(encoding="utf-8"))
    return {name: body.strip() for name, body in zip(pieces[1::2], pieces[2::2], strict=True)}


def part_text(slug: str, part: str, lang: str) -> tuple[str, bool]:
    """One part in ``lang``, or in English when ``lang`` lacks it; returns ``(markdown, fell_back)``.

    Raises:
        KeyError: if not even the English file has the part (a packaging error).
    """
    parts = load_parts(slug, lang)
    if part in parts:
        return parts[part], False
    return load_parts(slug, DEFAULT_LANGUAGE)[part], lang != DEFAULT_LANGUAGE


def _markdown(body: str, fell_back: bool) -> None:
    if fell_back:
        st.caption(_("This part is not translated yet: it is shown in English."))
    st.markdown(body)


def prose(part: str) -> None:
    """Render one named part of the current page's prose in the reader's language."""
    record.add(("prose", part, current().slug))
    _markdown(*part_text(current().slug, part, current_language()))


#: The page's own CSS, sent once by :func:`header`:
#: - a table cell breaks its text only between words, never inside a word or a number ("wrappe|r",
#:   "1,549E-|30"): on a phone a data cell of st.table keeps its text on one line, a header or a prose table's cell
#:   wraps at spaces, and a table wider than its place scrolls sideways inside its own frame (st.table's frame, or
#:   the prose table itself, whose edge shows a shadow where more of it lies), so the page never scrolls
#:   sideways; on a desktop every cell wraps at spaces, so a table fits its column;
#: - badges wrap instead of cutting their verdict short with an ellipsis;
#: - titles keep their words whole on a phone (a smaller size there, no break inside a word);
#: - captions are dark enough for WCAG AA contrast (4.5:1) on the white page;
#: - :func:`diagram_for_width` shows a diagram's wide layout on a wide screen and its narrow parts on a phone.
_PAGE_CSS = """<style>
[data-testid='stMain'] td, [data-testid='stMain'] th, [data-testid='stMain'] td *, [data-testid='stMain'] th *
  {overflow-wrap: normal !important; word-break: normal !important; hyphens: manual !important;}
[data-testid='stMain'] th, [data-testid='stMain'] th *, [data-testid='stMain'] [data-testid='stMarkdownContainer'] td
  {white-space: normal !important;}
[data-testid='stMain'] [data-testid='stTable'] > div {overflow-x: auto !important;}
@media (max-width: 640px) {
  [data-testid='stMain'] [data-testid='stTable'] td, [data-testid='stMain'] [data-testid='stTable'] td *
    {white-space: nowrap !important;}
  [data-testid='stMain'] [data-testid='stMarkdownContainer'] table
    {display: block; max-width: 100%; overflow-x: auto; width: max-content;
     background: linear-gradient(to right, #fff 40%, rgba(255, 255, 255, 0)) left / 2.5em 100% no-repeat local,
       linear-gradient(to left, #fff 40%, rgba(255, 255, 255, 0)) right / 2.5em 100% no-repeat local,
       radial-gradient(farthest-side at 0 50%, rgba(0, 0, 0, .28), rgba(0, 0, 0, 0)) left / 1em 100% no-repeat scroll,
       radial-gradient(farthest-side at 100% 50%, rgba(0, 0, 0, .28), rgba(0, 0, 0, 0)) right / 1em 100% no-repeat
       scroll;}
  [data-testid='stMain'] [data-testid='stMarkdownContainer'] th,
  [data-testid='stMain'] [data-testid='stMarkdownContainer'] td {min-width: 6em;}
}
[data-testid='stMain'] .stMarkdownBadge {white-space: normal !important; overflow: visible !important;
  text-overflow: clip !important; max-width: 100%; height: auto !important; line-height: 1.4;}
[data-testid='stMain'] h1, [data-testid='stMain'] h2, [data-testid='stMain'] h3 {overflow-wrap: normal !important;
  word-break: normal !important;}
@media (max-width: 640px) {
  [data-testid='stMain'] h1 {font-size: 1.6rem !important;}
  [data-testid='stMain'] h3 {font-size: 1.15rem !important;}
}
[class*='st-key-diagram_narrow_'] {display: none;}
@media (max-width: 640px) {
  [class*='st-key-diagram_wide_'] {display: none;}
  [class*='st-key-diagram_narrow_'] {display: block;}
}
[data-testid='stCaptionContainer'] {opacity: 1 !important;}
[data-testid='stCaptionContainer'], [data-testid='stCaptionContainer'] p {color: #5a5c66 !important;}
</style>"""


def diagram_for_width(wide: str, narrow: Sequence[str], alt: str, key: str) -> None:
    """A diagram laid out for the screen: ``wide`` (DOT) on a screen wider than 640 px, the ``narrow`` DOT
    sources one under the other on a phone, each at its own size instead of shrunk until its text is
    unreadable. Both are sent; the page's CSS shows one (a server cannot know the reader's width).

    Args:
        wide: the diagram's DOT source for a wide screen.
        narrow: DOT sources of its parts, drawn top to bottom on a phone.
        alt: the diagram described in words (the reader's language), given to each image.
        key: a name for the pair, unique in the page.
    """
    with st.container(key=f"diagram_wide_{key}"):
        diagram(wide, alt=alt, width="stretch")
    with st.container(key=f"diagram_narrow_{key}"):
        for part in narrow:
            diagram(part, alt=alt, width="content")


def header() -> None:
    """The current page's title, the chapter section it accompanies, the ``intro`` part of its prose, and on pages
    2-7 and the Lab one question about an earlier page (:func:`ui.gates.retrieval`)."""
    st.html(_PAGE_CSS)
    info = current()
    record.start(("prose", "intro", info.slug))
    st.title(info.page_heading())
    st.caption(_("Accompanies: {section}").format(section=_(info.section)))
    _markdown(*part_text(info.slug, "intro", current_language()))
    gates.retrieval(info.slug)


def is_count(expected) -> bool:
    """True when ``expected`` holds whole numbers only (ints, an integer tensor), which are compared exactly."""
    return not torch.as_tensor(expected).dtype.is_floating_point


def chapter_check(label: str, value, expected, applies: bool = True, decimals: int = chapter.DECIMALS,
                  source: str = "chapter") -> bool:
    """A badge saying whether a live value equals the chapter's printed one at ``decimals`` decimals.

    Whole numbers (a count, the chapter's 1 … 6 matrix; see :func:`is_count`) are compared exactly and their
    badge says so, since "to 4 decimals" says nothing about an integer.

    Args:
        label: what is compared (e.g. "softmax weights"), already in the reader's language.
        value: the live value (tensor, number or nested sequence).
        expected: the chapter's value.
        applies: False when the reader changed an input (seed, embedding) so
            the chapter's number is not expected; the badge then says so.
        source: ``"chapter"`` (chapter 3) or ``"lesson"`` (the course's lesson), whose number it is.

    Returns:
        True when the values match.

    Raises:
        ValueError: ``source`` is neither ``"chapter"`` nor ``"lesson"``.
    """
    if source not in ("chapter", "lesson"):
        raise ValueError(f"source must be 'chapter' or 'lesson', got {source!r}")
    exact = is_count(expected)
    if exact:
        # same shape first (matches), then every element equal, not only within half a unit
        ok = chapter.matches(value, expected, 0) and bool(
            torch.equal(torch.as_tensor(value, dtype=torch.float64).detach().cpu(),
                        torch.as_tensor(expected, dtype=torch.float64)))
    else:
        ok = chapter.matches(value, expected, decimals)
    if exact and applies:
        if ok:
            text = (_("{label}: matches the chapter exactly") if source == "chapter"
                    else _("{label}: matches the lesson exactly"))
            st.badge(text.format(label=label), icon=":material/check_circle:", color="green")
        else:
            text = (_("{label}: does NOT match the chapter") if source == "chapter"
                    else _("{label}: does NOT match the lesson"))
            st.badge(text.format(label=label), icon=":material/error:", color="red")
        return ok
    if not applies:
        if ok:
            st.badge(_("{label}: equals the chapter's value").format(label=label), icon=":material/check:",
                     color="green")
        else:
            st.badge(_("{label}: differs from the chapter, as expected with your settings").format(label=label),
                     icon=":material/tune:", color="gray")
    elif ok:
        st.badge(_("{label}: matches the chapter to {decimals} decimals").format(label=label, decimals=decimals),
                 icon=":material/check_circle:", color="green")
    else:
        st.badge(_("{label}: does NOT match the chapter").format(label=label), icon=":material/error:", color="red")
    return ok


def verdict(ok: bool, passed: str, failed: str) -> bool:
    """A green badge saying ``passed`` when a live check holds, else a red one saying ``failed``; returns ``ok``."""
    if ok:
        st.badge(passed, icon=":material/check_circle:", color="green")
    else:
        st.badge(failed, icon=":material/error:", color="red")
    return ok


def recorded() -> tuple[tuple, ...]:
    """What the page being drawn has shown since its :func:`header`, in order (``ui.record``): ``("prose", part,
    slug)``, ``("code", objects)`` and ``("gate", gate_id)`` items, its notebook's content (``ui.notebook``)."""
    return record.items()


_source_lock = threading.Lock()


@functools.cache
def _source(obj: Callable | type, docstring: bool) -> str:
    return textwrap.dedent(inspect.getsource(obj)) if docstring else listing(obj)


def source_of(obj: Callable | type, docstring: bool = False) -> str:
    """The source of ``obj`` (``inspect.getsource``), by default without its docstring.

    The docstrings hold shapes, errors and references for the developer; without them the reader
    sees about the length of the chapter's own listing. Prepared once per object and kept (the
    engine does not change while the app runs), under one lock: readers are threads, and Python
    3.11's ``ast.parse`` run by several threads at once can fail with ``SystemError: AST
    constructor recursion depth mismatch``, as several first visits to a fresh server showed.
    """
    with _source_lock:
        return _source(obj, docstring)


def show_code(*objects: Callable | type, label: str | None = None, docstring: bool = False) -> None:
    """An expander with the source of the engine functions/classes the page just called.

    Args:
        objects: the functions and classes whose code produced what the page shows.
        label: the expander's title (default: "Code that ran", translated).
        docstring: show docstrings too (default False: the chapter's listing length).
    """
    record.add(("code", objects))
    with st.expander(label or _("Code that ran"), icon=":material/code:"):
        for obj in objects:
            st.caption(f"`{obj.__module__}.{obj.__qualname__}`")
            st.code(source_of(obj, docstring), language="python")


def technical_details(part: str | None = None):
    """The one collapsed "Technical details" block of a section: the workshop behind the lesson (recording notes,
    throughput figures, command lines, measurement internals), out of the reading path but one click away.

    Use it as ``with page.technical_details(): ...`` to put elements in it, or ``page.technical_details("part")``
    to show a named part of the current page's prose in it (then it is drawn at once). One block per section: what
    the reader needs to follow the lesson never goes in it.

    Args:
        part: a part of the current page's prose (``content/<lang>/<slug>.md``) to show inside, or None.

    Returns:
        The expander (``st.expander``, collapsed, its label in the reader's language), a context manager.

    Raises:
        KeyError: ``part`` is given and not even the English prose has it (a packaging error).
    """
    box = st.expander(_("Technical details"), icon=":material/build:", expanded=False)
    if part is not None:
        record.add(("prose", part, current().slug))
        with box:
            _markdown(*part_text(current().slug, part, current_language()))
    return box


def check_yourself() -> None:
    """The "check yourself" block: each question of the current page's ``quiz`` part in its own expander."""
    st.subheader(_("Check yourself"))
    record.add(("prose", "quiz", current().slug))
    body, fell_back = part_text(current().slug, "quiz", current_language())
    if fell_back:
        st.caption(_("This part is not translated yet: it is shown in English."))
    blocks = re.split(r"^###\s+", body, flags=re.MULTILINE)
    for block in blocks[1:]:
        question, _sep, answer = block.partition("\n")
        with st.expander(question.strip()):
            st.markdown(answer.strip())


def static_table(frame, formats: dict[str, str] | None = None, missing: str = "nan") -> None:
    """A short table (a few rows) as static HTML (``st.table``), without the index.

    A control that redraws a short table answers faster this way: Streamlit's interactive grid took about
    200 ms to redraw six rows in the browser. True/False cells show as ✓/✗, the same in every language; the
    data behind them stays boolean.

    Args:
        frame: a pandas DataFrame, its headers already in the reader's language.
        formats: column -> format string (``"{:.4g}"``) or callable for number columns.
        missing: what a missing value shows (default "nan", as PyTorch prints it; "—" for a value left out).
    """
    marks = {c: (lambda v: "✓" if v else "✗") for c in frame.columns if frame[c].dtype == bool}
    st.table(frame.style.format({**marks, **(formats or {})}, na_rep=missing).hide(axis="index"))


def slot():
    """A place in the page for what is shown only sometimes (a note, a warning, a panel that needs a valid
    control), that counts as one element whether it holds nothing, one element or several.

    Use it as ``with page.slot(): if ...: st.warning(...)``. In the browser, Streamlit keeps an element of an
    ``st.fragment`` mounted across a full rerun only while it stays at the same place in the page; a note that
    appears above it moves it, and every chart, table and widget of the fragment is then drawn anew although
    nothing in it changed (page 2's seed redrew both its data grids and three unchanged charts that way).
    Elements built in a slot keep every element after them at its place.

    Returns:
        A container (``st.empty().container()``): empty, it shows nothing.
    """
    return st.empty().container()


def fmt_row(values: Sequence[float], decimals: int = chapter.DECIMALS) -> str:
    """A 1-d tensor's values in a sentence, in the reader's format (:func:`ui.numbers.seq`): ``[0.1385, 0.2379]``
    (en), ``[0,1385 ; 0,2379]`` (fr), ``[0,1385; 0,2379]`` (de). What PyTorch prints goes in a code block instead."""
    return seq(values, decimals)
