"""Shareable state: controls are mirrored in the URL, and a link reproduces them."""

from tests.plotly_json import ROOT
from streamlit.testing.v1 import AppTest


def app_at(script: str, **params) -> AppTest:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    for k, v in params.items():
        at.query_params[k] = v
    at.run()
    at.switch_page(script).run()
    return at


def test_controls_are_written_to_the_url():
    at = app_at("views/self_attention.py")
    at.slider(key="sa_scale").set_value(42.0).run()
    at.selectbox(key="sa_dtype").set_value("float16").run()
    assert not at.exception
    assert at.query_params["sa_scale"] == "42.0"
    assert at.query_params["sa_dtype"] == "float16"
    assert at.query_params["sa_query"] == "journey"


def test_a_link_reproduces_the_senders_view():
    at = AppTest.from_file(str(ROOT / "views/self_attention.py"), default_timeout=60)
    at.query_params.update({"sa_scale": "100.0", "sa_dtype": "float16", "sa_query": "step"})
    at.run()
    assert not at.exception
    assert at.slider(key="sa_scale").value == 100.0
    assert at.selectbox(key="sa_dtype").value == "float16"
    assert at.selectbox(key="sa_query").value == "step"
    assert at.error, "float16 at scale 100 must overflow the naive softmax"


def test_a_broken_link_falls_back_to_defaults():
    at = AppTest.from_file(str(ROOT / "views/self_attention.py"), default_timeout=60)
    at.query_params.update({"sa_scale": "1e9", "sa_dtype": "float7", "sa_query": "nobody"})
    at.run()
    assert not at.exception
    assert at.slider(key="sa_scale").value == 1.0
    assert at.selectbox(key="sa_dtype").value == "float32"
    assert at.selectbox(key="sa_query").value == "journey"
    assert len(at.toast) == 3
