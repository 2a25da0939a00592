"""Entry point: ``streamlit run app.py``. Builds the navigation and nothing else."""

import streamlit as st

from engine.device import configure_malloc, configure_threads
from ui.i18n import _
from ui.nav import build_navigation
from ui.sidebar import language_selector, render_sidebar


def run() -> None:
    """Choose the language, set up the page, draw the shared sidebar, run the selected page."""
    configure_threads()  # once per process (later calls change nothing): cores - 1, the rest for the server
    configure_malloc()  # readers are threads: fewer malloc arenas, big blocks returned at once
    language_selector()
    st.set_page_config(page_title=_("Attention, step by step"), page_icon=":material/hub:", layout="wide")
    page = build_navigation()
    render_sidebar()
    page.run()


if __name__ == "__main__":
    run()
