"""Entry point: ``streamlit run app.py``. Builds the navigation and nothing else."""

import streamlit as st

from engine.startup import prepare_process
from ui.gates import record_sidebar
from ui.i18n import _
from ui.nav import build_navigation
from ui.sidebar import language_selector, render_sidebar


def run() -> None:
    """Choose the language, set up the page, draw the shared sidebar, run the selected page, then the sidebar's
    record of the reader's predictions (after the page, so it counts this run's answers)."""
    prepare_process()  # once per process (later calls change nothing): threads, C heap, page modules, gc.freeze
    language_selector()
    st.set_page_config(page_title=_("Attention, step by step"), page_icon=":material/hub:", layout="wide")
    page = build_navigation()
    render_sidebar()
    page.run()
    record_sidebar()


if __name__ == "__main__":
    run()
