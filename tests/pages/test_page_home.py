"""AppTest: the Home page (views/home.py, run through app.py) draws the RNN bottleneck beside attention."""

import pytest
from streamlit.testing.v1 import AppTest

from engine import attention as A
from engine.diagrams.core import shape_text
from engine.sections import self_attention as sections
from tests.plotly_json import ROOT, figures, open_page
from ui.i18n import TRANSLATED, translations
from ui.numbers import plotly_separators


def diagram(at, i: int = 0) -> str:
    """The ``i``-th diagram's DOT source: 0 the wide one, 1 and 2 its halves for a phone."""
    charts = at.get("graphviz_chart")
    assert len(charts) == 3
    return charts[i].proto.spec


def test_diagram_shows_the_shapes_of_the_example_vectors():
    at = open_page("app.py", 120)
    assert not at.exception, [e.value for e in at.exception]
    spec = diagram(at)
    states = A.chapter_inputs()
    step = sections.query_walkthrough(states, 0)
    for shape in (states[-1].shape, step.attn_weights.shape, step.context_vec.shape):  # the states draw no shape
        assert shape_text(tuple(shape)) in spec
    assert spec.count("cluster_") == 6  # two halves, each with an encoder and a decoder
    # a phone gets each half alone, one under the other
    assert diagram(at, 1).count("cluster_") == diagram(at, 2).count("cluster_") == 3
    assert "α " not in diagram(at, 1) and "α " in diagram(at, 2)
    for token in (A.CHAPTER_TOKENS[0], A.CHAPTER_TOKENS[-1]):
        assert token in spec


@pytest.mark.parametrize("lang", TRANSLATED)
def test_diagram_builds_in_french_and_german(lang):
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.session_state["lang"] = lang
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert "α " + shape_text(tuple(A.chapter_inputs()[:, 0].shape)) in diagram(at)  # one weight per encoder state


@pytest.mark.parametrize(("lang", "point"), [("fr", "Your = (0,43\u202f; 0,15\u202f; 0,89)"),
                                             ("de", "Your = (0,43; 0,15; 0,89)"), ("en", "Your = (0.43, 0.15, 0.89)")])
def test_the_3d_chart_writes_ticks_and_hovers_in_the_readers_format(lang, point):
    """Issue 36: the running example's ticks follow layout.separators and its hovers the reader's list format; its
    axes are the embedding's dimensions (dim 0 …), not x₀ …, which the chapter uses for tokens."""
    at = open_page("app.py", 120, lang=lang)
    chart = next(f for f in figures(at) if f["data"][0].get("type") == "scatter3d")
    assert chart["layout"]["separators"] == plotly_separators(lang)
    assert chart["data"][0]["hovertemplate"].startswith(point)
    dims = [chart["layout"]["scene"][axis]["title"]["text"] for axis in ("xaxis", "yaxis", "zaxis")]
    assert dims == [translations(lang).gettext("dim {i}").format(i=i) for i in range(3)]
