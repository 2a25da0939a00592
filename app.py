"""Entry point: ``streamlit run app.py``. Builds the navigation and nothing else."""

import streamlit as st

from ui import state
from ui.i18n import _
from ui.nav import build_navigation
from ui.sidebar import language_selector, render_sidebar


def run() -> None:
    """Set up the page, choose the language, draw the shared sidebar, run the selected page, mirror the URL."""
    state.start_run()
    language_selector()
    st.set_page_config(page_title=_("Attention, step by step"), page_icon=":material/hub:", layout="wide")
    page = build_navigation()
    render_sidebar()
    page.run()
    state.publish()


if __name__ == "__main__":
    run()
