"""Elements of a fragment keep their place in the page whatever the controls do.

In the browser, Streamlit keeps an element of an ``st.fragment`` mounted across a full rerun only while its place
in the page (its delta path) is unchanged; a note that appears above it moves it, and the whole fragment — charts,
data grids, widgets — is then drawn anew although nothing in it changed. Conditional notes therefore sit in
``ui.page.slot()``. This test drives every page with random control values (the fuzz test's walk) and checks,
from the messages the script sends, that every widget and chart of a fragment that is sent in two consecutive runs
is sent to the same place.
"""

from __future__ import annotations

import random

import pytest
from streamlit.testing.v1 import AppTest, local_script_runner

from tests.pages.test_fuzz_pages import fuzzable_widgets, record_select_slider_options, set_random_values
from tests.plotly_json import ROOT
from ui.gates import PREDICT_KEY
from ui.nav import PAGES

CASES = 10


class Recorder:
    """Wraps AppTest's message parser: ``runs`` gets, per script run, ``{element id: (delta path, fragment id)}``
    for every element that has an id (widgets, charts)."""

    def __init__(self, parse):
        self.parse, self.runs = parse, []

    def __call__(self, msgs):
        places = {}
        for msg in msgs:
            if msg.WhichOneof("type") != "delta" or msg.delta.WhichOneof("type") != "new_element":
                continue
            element = msg.delta.new_element
            kind = element.WhichOneof("type")
            element_id = getattr(getattr(element, kind), "id", "") if kind else ""
            if element_id:
                places[element_id] = (tuple(msg.metadata.delta_path), msg.delta.fragment_id)
        self.runs.append(places)
        return self.parse(msgs)


def moved_fragment_elements(before: dict, after: dict) -> list[str]:
    """Ids of fragment elements sent in both runs to different places."""
    return [f"{element_id[-40:]}: {before[element_id][0]} -> {place}" for element_id, (place, fragment) in after.items()
            if fragment and element_id in before and before[element_id][0] != place]


@pytest.mark.parametrize("info", PAGES, ids=[p.url_path for p in PAGES])
def test_fragment_elements_keep_their_place(info, monkeypatch):
    recorder = Recorder(local_script_runner.parse_tree_from_messages)
    monkeypatch.setattr(local_script_runner, "parse_tree_from_messages", recorder)
    slider_options = record_select_slider_options(monkeypatch)
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120).run()
    at.switch_page(info.script).run()
    assert not at.exception
    fragments = {fragment for places in recorder.runs for _path, fragment in places.values() if fragment}
    for case in range(CASES):
        rng = random.Random(f"places-{info.url_path}-{case}")
        # not the prediction gates' switch: turning it shows or hides whole blocks, a new page rather than a note
        widgets = [w for w in fuzzable_widgets(at) if w.key != PREDICT_KEY]
        if not widgets:
            break
        applied = set_random_values(rng.sample(widgets, rng.randint(1, min(3, len(widgets)))), rng,
                                    slider_options)
        at.run()
        assert not at.exception, f"case {case} {applied}"
        moved = moved_fragment_elements(recorder.runs[-2], recorder.runs[-1])
        assert not moved, f"case {case} {applied} moved fragment elements: {moved}"
    if fragments:
        assert any(fragment for places in recorder.runs[2:] for _path, fragment in places.values()), \
            "no fragment element was seen after the first runs: the recorder missed them"
