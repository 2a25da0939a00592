"""ui.diagram: Graphviz diagrams laid out on the server (dot -Tsvg), with st.graphviz_chart as the fallback."""

import ast
import base64
import shutil

import pytest
from streamlit.testing.v1 import AppTest

from engine import palette
from tests.plotly_json import ROOT
from ui import diagram as D
from ui.i18n import DEFAULT_LANGUAGE, LANG_KEY, LANGUAGES, translations


@pytest.fixture
def needs_dot():
    """Graphviz's dot on the PATH (Debian's graphviz, installed by ``make run``)."""
    assert shutil.which("dot"), "install Debian's graphviz (make run does)"


def home_dot() -> str:
    """The Home page's diagram source, as the page builds it."""
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120).run()
    assert not at.exception
    return at.get("graphviz_chart")[0].proto.spec


def test_svg_of_lays_out_a_diagram_with_its_labels(needs_dot):
    dot = home_dot()
    svg = D.svg_of(dot)
    assert svg is not None and "<svg" in svg and "</svg>" in svg
    assert "encoder" in dot.lower() and "encoder" in svg.lower()  # the labels are drawn as text


@pytest.mark.parametrize("dot", [
    "digraph { a -> ",  # malformed: dot exits with an error
    'digraph { a [label="' + "x" * (D.MAX_DOT_CHARS + 1) + '"] }',  # longer than the bound: never run
    "",
])
def test_svg_of_refuses_bad_sources_without_raising(dot, needs_dot):
    assert D.svg_of(dot) is None


def run_home(monkeypatch, renderer: str) -> AppTest:
    monkeypatch.setenv(D.RENDERER_ENV, renderer)
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120).run()
    assert not at.exception
    return at


def test_the_page_shows_the_server_laid_svg_as_an_image_with_its_alt_text(monkeypatch, needs_dot):
    at = run_home(monkeypatch, "server")
    assert not at.get("graphviz_chart")
    images = [img for element in at.get("image") for img in element.proto.imgs]
    svgs = [img for img in images if img.url.startswith("data:image/svg+xml;base64,")]
    # Home's diagram for a wide screen, then its two halves (RNN, attention) for a phone (ui.page.diagram_for_width)
    assert len(svgs) == 3
    texts = [base64.b64decode(img.url.split(",", 1)[1]).decode("utf-8") for img in svgs]
    assert all("<svg" in svg for svg in texts)
    assert "encoder" in texts[0].lower()
    assert len(texts[0]) > max(len(texts[1]), len(texts[2]))  # the whole is larger than either half
    assert all(img.alt for img in svgs)  # each described for screen readers


def test_browser_rendering_and_a_missing_dot_fall_back_to_graphviz_chart(monkeypatch):
    assert run_home(monkeypatch, "browser").get("graphviz_chart")
    monkeypatch.setattr(D.shutil, "which", lambda name: None)
    assert D.renderer() == "browser"
    monkeypatch.setenv(D.RENDERER_ENV, "server")
    assert D.renderer() == "browser"


#: The legend's message id, read from ui/diagram.py's call (tests assert on ids, not on the English text).
_LEGEND_ID = next(node.args[0].value if isinstance(node.args[0], ast.Constant) else None
                  for node in ast.walk(ast.parse((ROOT / "ui" / "diagram.py").read_text(encoding="utf-8")))
                  if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "_"
                  and node.args and isinstance(node.args[0], ast.Constant) and "{colours}" in node.args[0].value)


def _legend_page():
    from ui.diagram import colour_legend

    colour_legend()


@pytest.mark.parametrize("lang", LANGUAGES)
def test_the_colour_legend_names_each_palette_role_in_its_own_colour(lang):
    at = AppTest.from_function(_legend_page)
    at.session_state[LANG_KEY] = lang
    at.run()
    assert not at.exception
    (caption,) = [c.value for c in at.caption]
    catalog = translations(lang)
    colours = [colour for colour, _ in D.LEGEND_ROLES]
    assert len(set(colours)) == len(colours) == 9 and set(colours) <= {
        getattr(palette, name) for name in dir(palette) if name.isupper() and isinstance(getattr(palette, name), str)}
    for colour, words in D.LEGEND_ROLES:
        assert f':color[■]{{foreground="{colour}"}} {catalog.gettext(words)}' in caption
        assert (catalog.gettext(words) != words) == (lang != DEFAULT_LANGUAGE)
    head = catalog.gettext(_LEGEND_ID).split("{colours}")[0]
    assert caption.startswith(head) and caption.count("■") == len(colours)

