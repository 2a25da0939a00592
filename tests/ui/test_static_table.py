"""ui.page.static_table: short tables as static HTML, booleans as ✓/✗ in every language, numbers formatted."""

import math

import pandas as pd

from ui import page


def drawn(monkeypatch, frame, formats=None) -> str:
    """The HTML of the Styler that static_table hands to st.table."""
    seen = []
    monkeypatch.setattr(page.st, "table", seen.append)
    page.static_table(frame, formats)
    assert len(seen) == 1
    return seen[0].to_html()


def test_booleans_show_as_marks_and_the_index_is_hidden(monkeypatch):
    frame = pd.DataFrame({"pos_encoding": ["none", "learned"], "ran": [True, False]})
    html = drawn(monkeypatch, frame)
    assert "✓" in html and "✗" in html
    assert "True" not in html and "False" not in html
    assert "row_heading" not in html  # no index column
    assert frame["ran"].dtype == bool  # the data stays boolean


def test_number_formats_and_missing_values(monkeypatch):
    frame = pd.DataFrame({"token": ["a", "b"], "x": [0.123456, math.nan]})
    html = drawn(monkeypatch, frame, {"x": "{:.3g}"})
    assert "0.123" in html and "0.123456" not in html and "nan" in html
