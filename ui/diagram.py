"""Graphviz diagrams, laid out on the server: ``diagram(dot, alt)`` in place of ``st.graphviz_chart``.

``st.graphviz_chart`` lays the graph out in the browser (d3-graphviz over Graphviz compiled to WebAssembly).
When a control changes a diagram, d3-graphviz morphs the old drawing into the new one and samples every edge
point by point to do it, which costs more than the rest of the redraw (docs/architecture.md). Here Graphviz's
own ``dot`` program lays the graph out once per distinct source (cached), and the page shows the finished SVG as
an image, which the browser draws at once.

Where ``dot`` is not installed (it comes with the Debian package ``graphviz``, listed in ``packages.txt``), or
fails, or the environment variable ``ATTENTION_DIAGRAMS`` is ``browser``, the diagram falls back to
``st.graphviz_chart`` with the same source: the reader always gets the diagram.

:func:`colour_legend` writes the one caption that names the diagrams' colours, built from the roles of
``engine.palette``; every page with a diagram calls it instead of writing its own.
"""

from __future__ import annotations

import os
import shutil
import subprocess

import streamlit as st
from babel.lists import format_list

from engine import palette
from ui.i18n import N_, _, current_language

#: Environment variable choosing where diagrams are laid out: "server" (default) or "browser".
RENDERER_ENV = "ATTENTION_DIAGRAMS"
#: Seconds one layout may take (far above what the essay's diagrams need).
DOT_TIMEOUT_S = 10
#: Longest DOT source laid out on the server (far above the essay's diagrams).
MAX_DOT_CHARS = 100_000
#: The legend's entries, in its order: a role's colour in ``engine.palette`` and the words naming the role
#: and its colour (a message id). The diagrams and the heatmaps draw these roles in these colours.
LEGEND_ROLES: tuple[tuple[str, str], ...] = (
    (palette.QUERY, N_("queries purple")),
    (palette.KEY, N_("keys orange")),
    (palette.VALUE, N_("values green")),
    (palette.ATTN_SCORES, N_("scores vermillion")),
    (palette.ATTN_WEIGHTS, N_("attention weights blue")),
    (palette.CONTEXT, N_("context vectors sky blue")),
    (palette.MASK, N_("the mask black")),
    (palette.DROPOUT, N_("dropout yellow")),
    (palette.POSITION, N_("position information wine")),
)


def renderer() -> str:
    """"server" when diagrams are laid out by Graphviz's ``dot`` here, "browser" otherwise."""
    if os.environ.get(RENDERER_ENV, "server") == "browser" or shutil.which("dot") is None:
        return "browser"
    return "server"


@st.cache_data(show_spinner=False, max_entries=256)
def svg_of(dot: str) -> str | None:
    """The SVG of a DOT source laid out by Graphviz's ``dot`` (UTF-8 text), or None when it cannot be made.

    Bounded: a source longer than :data:`MAX_DOT_CHARS` or a layout longer than :data:`DOT_TIMEOUT_S`
    seconds gives None. The sources come from ``engine.diagrams``, which quotes every label.
    """
    if len(dot) > MAX_DOT_CHARS:
        return None
    try:
        done = subprocess.run(["dot", "-Tsvg"], input=dot.encode("utf-8"), capture_output=True,
                              timeout=DOT_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if done.returncode != 0:
        return None
    svg = done.stdout.decode("utf-8", errors="replace")
    return svg if "<svg" in svg else None


def diagram(dot: str, alt: str, width: str = "stretch") -> None:
    """Draws a Graphviz diagram: an SVG laid out on the server, else ``st.graphviz_chart``.

    Args:
        dot: Graphviz DOT source (``engine.diagrams``).
        alt: the diagram described in words, for screen readers (the reader's language).
        width: "stretch" (the column's width) or "content" (the diagram's own size, at most the column's).
    """
    svg = svg_of(dot) if renderer() == "server" else None
    if svg is None:
        st.graphviz_chart(dot, width=width, alt=alt)
    else:
        st.image(svg, width=width, alt=alt)


def legend_text() -> str:
    """The colour legend in the reader's language: one swatch and name per role of :data:`LEGEND_ROLES`.

    Each swatch is a "■" in the role's own colour (Streamlit's ``:color[…]{foreground="#RRGGBB"}``
    Markdown); the entries are joined as the language joins a list (Babel's ``format_list``).
    """
    entries = [f':color[■]{{foreground="{colour}"}} {_(words)}' for colour, words in LEGEND_ROLES]
    return _("Diagram colours, the same on every page and in the heatmaps: {colours}. Each arrow carries a "
             "tensor's name and shape.").format(colours=format_list(entries, locale=current_language()))


def colour_legend() -> None:
    """The caption under a page's diagram that names the colour of every role (:func:`legend_text`)."""
    st.caption(legend_text())
