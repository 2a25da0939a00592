"""Hover texts in the reader's typography: the colon that joins a label to its value has its narrow no-break space
in French (ui.numbers.colon), in the shared heatmap builder, in every chart of Home, pages 1-7 and the Lab."""

from __future__ import annotations

import re

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from engine.figures.core import heatmap_trace
from tests.plotly_json import ROOT, figures
from ui.nav import PAGES
from ui.numbers import colon

#: The essay's pages 1-7 (the Lab and the glossary have their own tests or no chart).
ESSAY_PAGES = [p.script for p in PAGES[1:] if p.slug not in ("lab", "glossary")]
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


def french_templates(script: str) -> tuple[int, list[str]]:
    """The number of charts of ``script`` opened in French, and their hover templates."""
    at = AppTest.from_file(str(ROOT / script), default_timeout=120)
    at.session_state["lang"] = "fr"
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return len(figures(at)), [t for fig in figures(at) for t in hover_templates(fig)]


@pytest.mark.parametrize("script", ESSAY_PAGES)
def test_every_chart_of_the_essay_in_french_puts_the_narrow_space_before_its_colons(script):
    """Pages 1-7: each page's charts join labels and values with the reader's colon (heatmap cells, bars, lines),
    none with a bare ': '."""
    charts, templates = french_templates(script)
    assert charts >= 3 and any("\u202f: " in t for t in templates)
    assert [t for t in templates if BARE_COLON.search(t)] == []


def test_home_in_french_has_no_bare_colon_in_a_hover():
    charts, templates = french_templates("app.py")
    assert charts >= 1 and [t for t in templates if BARE_COLON.search(t)] == []


def test_the_colon_follows_the_language():
    """In English the same hovers keep the plain ': ' (the colon is the reader's, not French everywhere)."""
    at = AppTest.from_file(str(ROOT / "views/causal_mask.py"), default_timeout=120)
    at.session_state["lang"] = "en"
    at.run()
    assert not at.exception
    templates = [t for fig in figures(at) for t in hover_templates(fig)]
    assert any(": " in t for t in templates) and not [t for t in templates if "\u202f" in t]
