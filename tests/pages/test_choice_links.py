"""Choices with translated labels bound by ``ui.url.choice``: the link holds the option's own name in every language.

Streamlit's ``bind="query-params"`` wrote an option's displayed label into the URL, so a link made on the French page
(``ml_recipe=transpose(d0, d1).view(nouvelle forme)``) meant nothing on the German one. Each control below shows its
labels in the reader's language and writes the program's name of the option (``transpose_view``, ``7``); a label,
crafted text or an unknown name in a link is ignored (the control keeps its default, the link loses the value).
"""

import pytest
from streamlit.testing.v1 import AppTest

from engine.corpus import corpus_from_bytes
from engine.gpt import GPT
from engine.lab import models
from engine.presets import preset
from tests.plotly_json import captions, open_page, texts
from ui.i18n import LANGUAGES, translations

LAB = "views/lab.py"
#: (page, key, widget, the default, a value that is not the default, the message id of that value's label).
CHOICES = [
    ("views/memory_layout.py", "ml_recipe", "selectbox", "view", "transpose_view",
     "transpose(d0, d1).view(new shape)"),
    ("views/positional_encodings.py", "pe_score_mode", "radio", "rope", "sinusoidal",
     "sinusoidal table added to q and k"),
    (LAB, "lab_corpus", "radio", "tang", "song100", "Song ci (song100)"),
    (LAB, "lab_form_chars", "radio", 0, 7, None),
    (LAB, "lab_form_lines", "selectbox", 0, 4, None),
]
LANGS = tuple(LANGUAGES)
#: Values a link may hold that name no option: the old translated labels (added per control), Markdown and HTML.
CRAFTED = ["<img src=x onerror=alert(1)>", "[click](https://attacker.example/x)"]


def opened(script: str, lang: str, state: dict | None = None, **params: str) -> AppTest:
    """``script`` run once in ``lang`` with ``state`` in the session and ``params`` in the link."""
    at = open_page(script, 120, lang, state, params)
    assert not at.exception, [e.value for e in at.exception]
    return at


def control(at: AppTest, widget: str, key: str):
    return getattr(at, widget)(key=key)


def by_page(lab: bool) -> dict[str, list[tuple]]:
    pages: dict[str, list[tuple]] = {}
    for case in CHOICES:
        if (case[0] == LAB) == lab:
            pages.setdefault(case[0], []).append(case)
    return pages


def english_model() -> models.LabModel:
    """An untrained tiny model of an English text, so that the reader has a model of their own beside the shipped
    one and the Lab's model radio is drawn with both."""
    english = corpus_from_bytes(b"the cat sat on the mat\n\n" * 40, "cats.txt")
    tiny = GPT(preset("tiny", vocab_size=english.vocab_size)).eval()
    return models.LabModel(tiny, english.tokenizer, {}, "uploaded", models.weights_id(tiny, english.tokenizer))


@pytest.mark.parametrize("lang", LANGS)
@pytest.mark.parametrize("script", sorted(by_page(lab=False)) + [LAB])
def test_the_link_holds_the_options_own_name_whatever_the_language(script, lang):
    """A reader's choice (in the session) is written to the link as the option's name, and a link holding that name
    opens the same option, on the French, German and English page alike; the control shows the translated label.
    On the Lab, a reader with a model of their own who picks the shipped one gets ``lab_use=shipped``."""
    cases = by_page(script == LAB)[script]
    chosen = {key: value for _page, key, _widget, _default, value, _msgid in cases}
    own = {"lab_own": english_model(), "lab_use": "shipped"} if script == LAB else {}
    at = opened(script, lang, chosen | own)
    for _page, key, widget, _default, value, msgid in cases:
        shown = control(at, widget, key)
        assert shown.value == value and at.query_params[key] == str(value)
        if msgid is not None:
            assert translations(lang).gettext(msgid) in shown.options  # labels in the reader's language
    if own:
        radio = at.radio(key="lab_use")
        assert radio.value == "shipped" and at.query_params["lab_use"] == "shipped"
        assert radio.options == [translations(lang).gettext(m) for m in ("your model", "the shipped model")]
    at = opened(script, lang, **{key: str(value) for key, value in chosen.items()})
    for _page, key, widget, _default, value, _msgid in cases:
        assert control(at, widget, key).value == value and at.query_params[key] == str(value)


def old_label(key: str, msgid: str | None) -> str:
    """What an old link held for ``key``: the French label (the line-length radio's was the same in every
    language)."""
    if key == "lab_use":
        return translations("fr").gettext("the shipped model")
    return translations("fr").gettext(msgid) if msgid else "七言 · 7"


@pytest.mark.parametrize("script", sorted(by_page(lab=False)) + [LAB])
def test_a_label_or_crafted_value_in_the_link_is_ignored(script):
    """Old links held the label in the sender's language: the control keeps its default, no traceback, nothing
    rendered from the link, and the link loses the value."""
    cases = by_page(script == LAB)[script]
    if script == LAB:  # without a model of the reader's own, the shipped model is the default
        cases = [*cases, (LAB, "lab_use", "radio", "shipped", None, None)]
    for crafted in ["label", *CRAFTED]:
        params = {key: old_label(key, msgid) if crafted == "label" else crafted
                  for _page, key, _widget, _default, _value, msgid in cases}
        at = opened(script, "de", **params)
        for _page, key, widget, default, _value, _msgid in cases:
            assert control(at, widget, key).value == default, (key, params[key])
            assert key not in at.query_params
        assert "attacker.example" not in "\n".join(texts(at) + captions(at))
