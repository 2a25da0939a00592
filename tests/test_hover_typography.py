"""Hover texts in the reader's typography: the colon that joins a label to its value has its narrow no-break space
in French (ui.numbers.colon), in the shared heatmap builder and in every chart of the Lab."""

from __future__ import annotations

import re

import numpy as np
from streamlit.testing.v1 import AppTest

from engine.figures.core import heatmap_trace
from tests.plotly_json import ROOT, figures
from ui.numbers import colon

#: A colon that ends a label (followed by a space) without the narrow no-break space French puts before it.
BARE_COLON = re.compile(r"(?<!\u202f): ")


def test_heatmap_hover_takes_the_callers_colon():
    french = heatmap_trace(np.eye(2), ["a", "b"], ["c", "d"], colon=colon("fr")).hovertemplate
    english = heatmap_trace(np.eye(2), ["a", "b"], ["c", "d"]).hovertemplate
    assert "%{customdata[1]}\u202f: %{text}" in french and not BARE_COLON.search(french)
    assert "%{customdata[1]}: %{text}" in english


def hover_templates(fig: dict) -> list[str]:
    """Every hover template of a decoded figure (a trace's may be one string or one per point)."""
    found = []
    for trace in fig["data"]:
        template = trace.get("hovertemplate")
        found += template if isinstance(template, list) else [template] if template else []
    return found


def test_every_lab_chart_in_french_puts_the_narrow_space_before_its_colons():
    at = AppTest.from_file(str(ROOT / "views/lab.py"), default_timeout=60)
    at.session_state["lang"] = "fr"
    at.run()
    assert not at.exception
    templates = [t for fig in figures(at) for t in hover_templates(fig)]
    assert len(figures(at)) >= 4 and any("\u202f: " in t for t in templates)
    assert [t for t in templates if BARE_COLON.search(t)] == []
