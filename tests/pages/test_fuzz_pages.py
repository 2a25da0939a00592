"""Control fuzzing: every page, driven by a seeded random walk over all its widgets.

Each case sets every widget on the page to a random value — extremes and invalid
combinations included — reruns, and asserts that the page raised nothing and that
no chart draws a NaN or an infinity (a deliberate gap is sent as ``null``; Plotly
>= 6 typed arrays are decoded first). ``FUZZ_CASES`` (default 50) sets the number
of cases per page; the seed of a failing case is in the assertion message.
"""

from __future__ import annotations

import math
import os
import random

import numpy as np
import pytest
from streamlit.elements.widgets.select_slider import SelectSliderMixin
from streamlit.testing.v1 import AppTest

from tests.plotly_json import ROOT, figures
from ui.i18n import LANG_KEY
from ui.nav import PAGES

CASES = int(os.environ.get("FUZZ_CASES", "50"))
#: Widgets that start long work (training) are left to the pages' own tests.
SKIP_KEYS_WITH = ("train", "download", "upload", "stop", "rerun_experiment")
# The language selector relabels every option of the page: a case that switched it would set the other widgets
# by labels of the old language. Languages have their own tests (tests/ui/test_i18n.py, each page's fr/de runs).
STRINGS = ["", " ", "白日依山尽，黄河入海流。", "Your journey starts with one step.", "\x00\x01binary", "é" * 300,
           "山" * 1000, "🙂 emoji", "a"]


def record_select_slider_options(monkeypatch) -> dict:
    """``{key: options}`` of every ``st.select_slider`` the script draws from now on, as the script passed them.

    AppTest's ``SelectSlider`` holds only the options' labels, and its ``set_value`` wants the option itself:
    Streamlit 1.67 serialises the value with the widget's ``format_func`` and, unlike ``Selectbox``, ``Radio`` and
    ``Multiselect``, has no fallback to a label (``num("0.5")`` raises where ``str("0.5")`` happened to work).
    Wraps ``SelectSliderMixin._select_slider``, which ``st.select_slider`` and ``column.select_slider`` both call.
    """
    options_by_key = {}
    draw = SelectSliderMixin._select_slider

    def recording(self, label, options=(), *args, key=None, **kwargs):
        options_by_key[key] = list(options)
        return draw(self, label, options, *args, key=key, **kwargs)

    monkeypatch.setattr(SelectSliderMixin, "_select_slider", recording)
    return options_by_key


def random_value(widget, rng: random.Random, slider_options: dict):
    """A random valid-by-type value for a widget, biased towards its extremes; ``slider_options`` is
    :func:`record_select_slider_options`' record."""
    kind = type(widget).__name__
    if kind == "Slider":
        lo, hi = widget.min, widget.max
        value = widget.value
        if isinstance(value, (tuple, list)):
            a, b = sorted(rng.choice([lo, hi, rng.uniform(lo, hi)]) for _ in range(2))
            return _cast(a, lo), _cast(b, lo)
        return _cast(rng.choice([lo, hi, lo, hi, rng.uniform(lo, hi)]), lo)
    if kind == "SelectSlider":
        return rng.choice(slider_options[widget.key]) if widget.options else None
    if kind in ("Selectbox", "Radio"):
        options = list(widget.options)
        return rng.choice(options) if options else None
    if kind == "Multiselect":
        options = list(widget.options)
        return rng.sample(options, rng.randint(0, len(options))) if options else []
    if kind in ("Checkbox", "Toggle"):
        return rng.random() < 0.5
    if kind == "NumberInput":
        lo = widget.min if widget.min is not None else -1e6
        hi = widget.max if widget.max is not None else 1e6
        return _cast(rng.choice([lo, hi, rng.uniform(lo, hi)]), widget.value if widget.value is not None else lo)
    if kind in ("TextInput", "TextArea"):
        return rng.choice(STRINGS)
    return None


def _cast(value, like):
    return int(round(value)) if isinstance(like, int) and not isinstance(like, bool) else float(value)


def non_finite_in_charts(at) -> list[str]:
    """Descriptions of every NaN/inf numeric value drawn in the page's Plotly charts."""
    problems = []
    for i, fig in enumerate(figures(at)):
        for t, trace in enumerate(fig.get("data", [])):
            for key in ("x", "y", "z", "r", "theta", "values", "lat", "lon"):
                if key not in trace:
                    continue
                arr = trace[key]
                flat = arr.ravel() if isinstance(arr, np.ndarray) else np.asarray(arr, dtype=object).ravel()
                for v in flat:
                    if isinstance(v, (float, np.floating)) and not math.isfinite(float(v)):
                        problems.append(f"chart {i} trace {t} {key} has {v}")
                        break
    return problems


def fuzzable_widgets(at):
    kinds = ("slider", "select_slider", "selectbox", "radio", "multiselect", "checkbox", "toggle", "number_input",
             "text_input", "text_area")
    widgets = []
    for kind in kinds:
        for w in getattr(at, kind):
            key = w.key or ""
            if any(s in key for s in SKIP_KEYS_WITH) or key == LANG_KEY:
                continue
            widgets.append(w)
    return widgets


def set_random_values(widgets, rng: random.Random, slider_options: dict) -> dict:
    """Set each of ``widgets`` to a :func:`random_value`; returns ``{key: value}`` of those set (a widget that a
    rerun removed, or one without a random value, is skipped). Selectboxes, radios and multiselects are set by
    their labels, as the browser sends them; select sliders by the option (:func:`record_select_slider_options`)."""
    applied = {}
    for w in widgets:
        value = random_value(w, rng, slider_options)
        if value is None:
            continue
        try:
            w.set_value(value)
        except Exception:  # a stale widget after a rerun removed it: skip it
            continue
        applied[w.key] = value
    return applied


@pytest.mark.parametrize("info", PAGES, ids=[p.url_path for p in PAGES])
def test_random_controls_never_break_a_page(info, monkeypatch):
    slider_options = record_select_slider_options(monkeypatch)
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120).run()
    at.switch_page(info.script).run()
    assert not at.exception
    for case in range(CASES):
        rng = random.Random(f"{info.url_path}-{case}")
        widgets = fuzzable_widgets(at)
        if not widgets:
            break
        applied = set_random_values(rng.sample(widgets, rng.randint(1, len(widgets))), rng, slider_options)
        at.run()
        assert not at.exception, f"case {case} {applied}: {[e.value for e in at.exception]}"
        bad = non_finite_in_charts(at)
        assert not bad, f"case {case} {applied}: {bad}"
