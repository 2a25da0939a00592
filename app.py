"""Entry point: ``streamlit run app.py``. Builds the navigation and nothing else."""

import streamlit as st

from engine.device import configure_threads
from ui import state
from ui.nav import build_navigation
from ui.sidebar import render_sidebar


def run() -> None:
    """Set up the page, draw the shared sidebar, run the selected page and mirror its controls in the URL."""
    st.set_page_config(page_title="Attention, step by step", page_icon=":material/hub:", layout="wide")
    configure_threads()  # once per process (later calls change nothing): cores - 1, the rest for the server
    page = build_navigation()
    render_sidebar()
    state.start_run()
    page.run()
    state.publish()


if __name__ == "__main__":
    run()
