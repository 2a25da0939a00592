"""The shared "Technical details" drawer (ui.page.technical_details): collapsed, labelled in the reader's language,
holding what is put in it and nothing of the reading path."""

import pytest
from streamlit.testing.v1 import AppTest

from ui.i18n import LANG_KEY, LANGUAGES

LABELS = {"en": "Technical details", "fr": "Détails techniques", "de": "Technische Details"}


def _drawer_page():
    import streamlit as st

    from ui.page import technical_details

    st.markdown("lesson")
    with technical_details():
        st.caption("recorded on a busy machine")


@pytest.mark.parametrize("lang", LANGUAGES)
def test_the_drawer_is_collapsed_and_speaks_the_readers_language(lang):
    at = AppTest.from_function(_drawer_page)
    at.session_state[LANG_KEY] = lang
    at.run()
    assert not at.exception
    (box,) = at.expander
    assert box.label == LABELS[lang]
    assert box.proto.expanded is False
    assert [c.value for c in box.caption] == ["recorded on a busy machine"]
    assert [m.value for m in at.markdown] == ["lesson"]
