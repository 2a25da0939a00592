"""Shared fixtures."""

import os
import sys

import pytest
import torch

from tests.plotly_json import open_page

# The page tests read each diagram's DOT source from st.graphviz_chart; the server-side layout that readers get
# (ui.diagram) is tested in tests/test_diagram_render.py and, in Chromium, by tests/test_browser.py's servers.
os.environ.setdefault("ATTENTION_DIAGRAMS", "browser")


@pytest.fixture(autouse=True)
def restore_main_module():
    """Give ``__main__`` back after each test: Streamlit's script runner installs each AppTest script as
    ``__main__`` and leaves it there, and a process that multiprocessing spawns later re-runs ``__main__``'s file
    (an AppTest script built from a function with arguments then fails in the child with a NameError)."""
    main = sys.modules["__main__"]
    yield
    sys.modules["__main__"] = main


def _page(request):
    """Run the page named by the test module's ``PAGE`` (and ``PAGE_TIMEOUT``, default 60 s); it must not raise."""
    app = open_page(request.module.PAGE, getattr(request.module, "PAGE_TIMEOUT", 60))
    assert not app.exception, [e.value for e in app.exception]
    return app


@pytest.fixture
def at(request):
    """A freshly run page for tests that move its controls."""
    return _page(request)


@pytest.fixture(scope="module")
def fresh(request):
    """One run of the page shared by a module's read-only tests."""
    return _page(request)


@pytest.fixture(scope="module")
def one_thread():
    """Run a module's tiny models on one thread: faster, and no stalls when other jobs share the CPU."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
