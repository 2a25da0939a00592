"""Hover texts in the reader's typography: the colon that joins a label to its value has its narrow no-break space
in French (ui.numbers.colon), in the shared heatmap builder and in every chart of the Lab."""

from __future__ import annotations

import re

import numpy as np

from engine.figures.core import heatmap_trace
from ui.numbers import colon

#: A colon that ends a label (followed by a space) without the narrow no-break space French puts before it.
BARE_COLON = re.compile(r"(?<!\u202f): ")


def test_heatmap_hover_takes_the_callers_colon():
    french = heatmap_trace(np.eye(2), ["a", "b"], ["c", "d"], colon=colon("fr")).hovertemplate
    english = heatmap_trace(np.eye(2), ["a", "b"], ["c", "d"]).hovertemplate
    assert "%{customdata[1]}\u202f: %{text}" in french and not BARE_COLON.search(french)
    assert "%{customdata[1]}: %{text}" in english
