"""ui.url.choice on the Lab's position-encoding selector: translated labels, the program's names in the link."""

import pytest
from streamlit.testing.v1 import AppTest

from engine.lab import settings as rules
from engine.positions import ENCODINGS
from engine.presets import DEFAULT_PRESET, PRESETS
from tests.plotly_json import ROOT
from ui import url
from ui.i18n import translations

PAGE = "views/lab.py"
#: The message ids of the position encodings' names (ui.positions.NAMES), in the registry's order.
POSITION_NAMES = {"none": "none", "learned": "learned", "sinusoidal": "sinusoidal", "rope": "RoPE", "alibi": "ALiBi"}
POS_ENCODINGS = [e.key for e in ENCODINGS]


def page_with(lang: str, **params: str) -> AppTest:
    """The Lab opened once in ``lang`` from a link with ``params``."""
    at = AppTest.from_file(str(ROOT / PAGE), default_timeout=60)
    at.session_state["lang"] = lang
    at.query_params.update(params)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_position_encoding_link_holds_the_encoding_the_selector_names_in_the_readers_language():
    """Issue 24: the selector names each encoding in the reader's language; the link holds the program's name
    (``rope``), so a link made on the French page opens the same encoding on the German one."""
    french = page_with("fr")
    names = [translations("fr").gettext(POSITION_NAMES[k]) for k in POS_ENCODINGS]
    assert translations("fr").gettext("learned") != "learned"  # the French label is not the program's name
    assert french.selectbox(key="lab_pos").options == names
    assert french.selectbox(key="lab_pos").value == PRESETS[DEFAULT_PRESET].model.pos_encoding
    assert "lab_pos" not in french.query_params
    french = page_with("fr", lab_pos="rope")
    assert french.selectbox(key="lab_pos").value == "rope" and french.query_params["lab_pos"] == "rope"
    assert french.selectbox(key="lab_n_head").options == [str(h) for h in rules.head_choices(64, "rope")]
    # choosing writes the link (in English: AppTest's rerun formats the other widgets' options in English)
    at = page_with("en")
    at.selectbox(key="lab_pos").set_value("sinusoidal").run()
    assert not at.exception and at.query_params["lab_pos"] == "sinusoidal"
    at.selectbox(key="lab_pos").set_value(PRESETS[DEFAULT_PRESET].model.pos_encoding).run()
    assert "lab_pos" not in at.query_params  # the default leaves the link
    german = page_with("de", lab_pos="sinusoidal")
    assert german.selectbox(key="lab_pos").value == "sinusoidal" and german.query_params["lab_pos"] == "sinusoidal"
    assert german.selectbox(key="lab_pos").options[POS_ENCODINGS.index("sinusoidal")] == translations(
        "de").gettext("sinusoidal")
    for crafted in ("RoPE", "apprise", "<img src=x onerror=alert(1)>", ""):
        opened = page_with("en", lab_pos=crafted)
        assert opened.selectbox(key="lab_pos").value == PRESETS[DEFAULT_PRESET].model.pos_encoding
        assert "lab_pos" not in opened.query_params


def test_a_default_outside_the_options_is_refused():
    with pytest.raises(ValueError, match="not one of"):
        url.choice(lambda *a, **k: None, "label", ("a", "b"), key="k", default="c", format_func=str)
