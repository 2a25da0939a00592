"""Server entry point: ``streamlit run serve.py`` (``make run``; Community Cloud's main file).

Streamlit's ASGI app (``st.App``) runs ``app.py`` for every reader, as ``streamlit run app.py`` would, and
gives the server a start-up hook: while the server starts, a background thread imports PyTorch and the page
modules and freezes them (``engine.startup.prepare_process``), so the first reader after a deploy or a
restart no longer waits for the imports. A reader who arrives before the thread is done waits on its lock,
as they would have waited for the imports. ``streamlit run app.py`` still works; it only prepares the
process on the first reader's run.
"""

import threading
from contextlib import asynccontextmanager

import streamlit as st

from engine.startup import prepare_process


@asynccontextmanager
async def lifespan(_app):
    """Start preparing the process when the server starts; nothing to undo when it stops."""
    threading.Thread(target=prepare_process, name="prepare-process", daemon=True).start()
    yield


app = st.App("app.py", lifespan=lifespan)
