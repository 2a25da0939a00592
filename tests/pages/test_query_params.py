"""Shareable state: every control is bound to the URL with Streamlit's own ``bind="query-params"``.

A link reproduces what its sender saw; a malformed, out-of-range or crafted value in a link is
ignored (the control keeps its default) and is never rendered. Writing the URL and keeping values
across a page switch happen in the browser: ``tests/browser/test_browser.py`` checks those.
"""

import ast

import pytest
from streamlit.testing.v1 import AppTest

from tests.plotly_json import ROOT
from ui import url

#: Values an attacker could put in a shared link: Markdown links and images, HTML, huge numbers.
CRAFTED = ["[click](https://attacker.example/x)", "![img](https://attacker.example/i.png)",
           "<img src=x onerror=alert(1)>", "1e309", "99999999999999999999", "0x10", "nan", "\u202e", ""]


def page_at(script: str, **params) -> AppTest:
    at = AppTest.from_file(str(ROOT / script), default_timeout=60)
    at.query_params.update(params)
    return at.run()


def all_text(at: AppTest) -> str:
    parts = [el.value for kind in ("markdown", "caption", "error", "warning", "info", "success", "toast", "text")
             for el in getattr(at, kind)]
    return "\n".join(str(p) for p in parts)


def test_a_link_reproduces_the_senders_view():
    at = page_at("views/self_attention.py", sa_scale="100.0", sa_dtype="float16", sa_query="step")
    assert not at.exception
    assert at.slider(key="sa_scale").value == 100.0
    assert at.selectbox(key="sa_dtype").value == "float16"
    assert at.selectbox(key="sa_query").value == "step"


def test_a_broken_link_falls_back_to_defaults():
    at = page_at("views/self_attention.py", sa_scale="1e9", sa_dtype="float7", sa_query="nobody")
    assert not at.exception
    assert at.slider(key="sa_scale").value == 1.0
    assert at.selectbox(key="sa_dtype").value == "float32"
    assert at.selectbox(key="sa_query").value == "journey"


@pytest.mark.parametrize("value", CRAFTED)
def test_crafted_link_values_are_ignored_and_never_rendered(value):
    params = {"sa_scale": value, "sa_query": value, "ml_base": value}
    for script in ("views/self_attention.py", "views/memory_layout.py"):
        at = page_at(script, **params)
        assert not at.exception, [e.value for e in at.exception]
        assert "attacker.example" not in all_text(at) or script.endswith("memory_layout.py")
    at = page_at("views/self_attention.py", sa_scale=value, sa_query=value)
    assert at.slider(key="sa_scale").value == 1.0
    assert at.selectbox(key="sa_query").value == "journey"


def test_a_crafted_shape_in_the_link_is_shown_as_text_only():
    """The memory-layout page's shape box takes free text from the link: it is parsed, never rendered."""
    at = page_at("views/memory_layout.py", ml_base="[click](https://attacker.example/x)")
    assert not at.exception
    assert at.error, "an unparsable shape gets a clear message"
    rendered = "\n".join(str(el.value) for kind in ("markdown", "caption", "toast") for el in getattr(at, kind))
    assert "attacker.example" not in rendered


def bound_widget_keys(path) -> list[str]:
    keys = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call):
            kw = {k.arg: k.value for k in node.keywords}
            # ui.url.int_input and ui.url.choice bind too
            bound = "bind" in kw or getattr(node.func, "attr", None) in ("int_input", "choice")
            if bound and isinstance(kw.get("key"), ast.Constant):
                keys.append(kw["key"].value)
    return keys


def test_every_control_of_every_page_is_bound_to_the_url_under_a_unique_key():
    keys = [k for path in sorted((ROOT / "views").glob("*.py")) for k in bound_widget_keys(path)]
    assert len(keys) > 40
    assert len(keys) == len(set(keys)), "two pages share a URL parameter"


#: Every integer input bound to the URL, by page (ui.url.int_input).
INT_INPUTS = {"views/trainable_weights.py": ("tw_seed", "tw_seed_v2"), "views/dropout.py": ("do_seed",),
              "views/multi_head.py": ("mh_seed", "mh_try_d_out", "mh_try_heads"),
              "views/memory_layout.py": ("ml_d0", "ml_d1", "ml_cost_B", "ml_cost_H", "ml_cost_dh")}


@pytest.mark.parametrize("value", ["inf", "-Infinity", "1e309"])
@pytest.mark.parametrize("script", sorted(INT_INPUTS))
def test_an_infinite_number_in_the_link_leaves_an_integer_input_at_its_default(script, value):
    """Streamlit's binding turns a bound integer input's value into int(float(value)): an infinite one raised
    OverflowError in the page (``?tw_seed=inf``). The input shows its default, and the link loses the value."""
    keys = INT_INPUTS[script]
    defaults = page_at(script)
    at = page_at(script, **dict.fromkeys(keys, value))
    assert not at.exception, [e.value for e in at.exception]
    for key in keys:
        assert at.number_input(key=key).value == defaults.number_input(key=key).value
        assert key not in at.query_params
    at.number_input(key=keys[0]).increment().run()  # the input works on (the browser writes it to the URL)
    assert not at.exception
    assert at.number_input(key=keys[0]).value == defaults.number_input(key=keys[0]).value + 1


@pytest.mark.parametrize(("value", "unreadable"), [("inf", True), ("-inf", True), ("1e309", True), ("nan", False),
                                                   ("99999999999999999999", False), ("7", False), ("", False),
                                                   ("[x](y)", False)])
def test_which_values_no_control_can_read(value, unreadable):
    assert url.is_unreadable(value) is unreadable
