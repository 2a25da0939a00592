"""ui.diagram: Graphviz diagrams laid out on the server (dot -Tsvg), with st.graphviz_chart as the fallback."""

import base64
import shutil

import pytest
from streamlit.testing.v1 import AppTest

from tests.plotly_json import ROOT
from ui import diagram as D

needs_dot = pytest.mark.skipif(shutil.which("dot") is None, reason="make test installs Debian's graphviz")


def home_dot() -> str:
    """The Home page's diagram source, as the page builds it."""
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120).run()
    assert not at.exception
    return at.get("graphviz_chart")[0].proto.spec


@needs_dot
def test_svg_of_lays_out_a_diagram_with_its_labels():
    dot = home_dot()
    svg = D.svg_of(dot)
    assert svg is not None and "<svg" in svg and "</svg>" in svg
    assert "encoder" in dot.lower() and "encoder" in svg.lower()  # the labels are drawn as text


@needs_dot
@pytest.mark.parametrize("dot", [
    "digraph { a -> ",  # malformed: dot exits with an error
    'digraph { a [label="' + "x" * (D.MAX_DOT_CHARS + 1) + '"] }',  # longer than the bound: never run
    "",
])
def test_svg_of_refuses_bad_sources_without_raising(dot):
    assert D.svg_of(dot) is None


def run_home(monkeypatch, renderer: str) -> AppTest:
    monkeypatch.setenv(D.RENDERER_ENV, renderer)
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120).run()
    assert not at.exception
    return at


@needs_dot
def test_the_page_shows_the_server_laid_svg_as_an_image_with_its_alt_text(monkeypatch):
    at = run_home(monkeypatch, "server")
    assert not at.get("graphviz_chart")
    images = [img for element in at.get("image") for img in element.proto.imgs]
    svgs = [img for img in images if img.url.startswith("data:image/svg+xml;base64,")]
    assert len(svgs) == 1
    svg = base64.b64decode(svgs[0].url.split(",", 1)[1]).decode("utf-8")
    assert "<svg" in svg and "encoder" in svg.lower()
    assert svgs[0].alt  # described for screen readers


def test_browser_rendering_and_a_missing_dot_fall_back_to_graphviz_chart(monkeypatch):
    assert run_home(monkeypatch, "browser").get("graphviz_chart")
    monkeypatch.setattr(D.shutil, "which", lambda name: None)
    assert D.renderer() == "browser"
    monkeypatch.setenv(D.RENDERER_ENV, "server")
    assert D.renderer() == "browser"
