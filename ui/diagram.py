"""Graphviz diagrams, laid out on the server: ``diagram(dot, alt)`` in place of ``st.graphviz_chart``.

``st.graphviz_chart`` lays the graph out in the browser (d3-graphviz over Graphviz compiled to WebAssembly,
a 770 KB script). When a control changes a diagram, d3-graphviz morphs the old drawing into the new one and
samples every edge pixel by pixel to do it: on page 5, moving num_heads spent about 350 ms per move in
``getPointAtLength`` (headless Chromium, 2-core AMD EPYC), more than the rest of the redraw. Here Graphviz's own
``dot`` program lays the graph out once per distinct source (cached), and the page shows the finished SVG as an
image, which the browser draws at once.

Where ``dot`` is not installed (it comes with the Debian package ``graphviz``, listed in ``packages.txt``), or
fails, or the environment variable ``ATTENTION_DIAGRAMS`` is ``browser``, the diagram falls back to
``st.graphviz_chart`` with the same source: the reader always gets the diagram.
"""

from __future__ import annotations

import os
import shutil
import subprocess

import streamlit as st

#: Environment variable choosing where diagrams are laid out: "server" (default) or "browser".
RENDERER_ENV = "ATTENTION_DIAGRAMS"
#: Seconds one layout may take (the essay's diagrams take 20-40 ms).
DOT_TIMEOUT_S = 10
#: Longest DOT source laid out on the server (the essay's diagrams are 2 000-5 000 characters).
MAX_DOT_CHARS = 100_000


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
