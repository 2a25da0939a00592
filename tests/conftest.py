"""Shared fixtures, and the test map: the folders mirror the code, and each folder is a marker.

=================  ============================================================================  ==============
folder             what its tests cover                                                          marker
=================  ============================================================================  ==============
tests/engine/      ``engine/``: the chapter classes, the GPT, training, the Lab's engine, corpus,   ``engine``
                   diagrams' DOT, budgets, start-up (pure Python and PyTorch, no Streamlit run)
tests/ui/          ``ui/``: numbers, translations and catalogs, navigation, "Code that ran",          ``ui``
                   tables and server-side diagrams
tests/content/     ``content/`` and ``locales/``: parts and quizzes in every language, the glossary's  ``content``
                   vocabulary, French typography, the prose's claims checked by running them
tests/pages/       ``views/`` under Streamlit's AppTest: every page in each language, its controls,   ``pages``
                   links, fragments, chart alternatives, notebooks
tests/browser/     the served app in Debian's Chromium (Playwright): deep links, phone width,        ``browser``
                   legibility at 390 and 1400 px, a training taken over after a reload
tests/operations/  install (uv and pip from local stand-in indexes), replicas behind nginx, load,  ``operations``
                   benchmarks' helpers, upload caps, the server's lean imports
tests/             ``test_architecture.py``: import and wording rules; ``test_markers.py``: markers   (none)
=================  ============================================================================  ==============

Markers beyond the folders: ``browser`` also marks the few Chromium tests outside tests/browser/
(operations' load and replica tests, one notebook test), ``install`` and ``replicas`` name two operations files.
``smoke`` marks the one AppTest run of every page inside the app (tests/pages/test_app.py). So
``pytest -m "not browser"`` runs everything without Chromium, ``pytest tests/engine`` (or ``-m engine``) the engine
alone, ``make check`` the fast tier (ruff, then ``-m "smoke or not (pages or browser or operations)"``) and
``make test`` everything.
"""

import os
import sys
from pathlib import Path

import pytest
import torch

from tests.plotly_json import open_page

# The page tests read each diagram's DOT source from st.graphviz_chart; the server-side layout that readers get
# (ui.diagram) is tested in tests/ui/test_diagram_render.py and, in Chromium, by the servers of
# tests/browser/test_browser.py.
os.environ.setdefault("ATTENTION_DIAGRAMS", "browser")
# The page tests read the live blocks that the prediction gates guard: gates off unless a test turns them on (the
# session's ``predict`` key, the link's ``predict=on``); tests/pages/test_gates.py tests the gates themselves.
os.environ.setdefault("ATTENTION_PREDICT", "off")


#: The folders under tests/, each the name of the marker its tests carry (declared in pytest.ini, which sets
#: --strict-markers).
FOLDER_MARKERS = ("engine", "ui", "content", "pages", "browser", "operations")
TESTS = Path(__file__).resolve().parent


def pytest_collection_modifyitems(config, items):
    """Mark each test with its folder's marker (tests/engine/... -> ``engine``), so markers follow the layout."""
    for item in items:
        parts = item.path.resolve().relative_to(TESTS).parts
        if len(parts) > 1 and parts[0] in FOLDER_MARKERS:
            item.add_marker(parts[0])


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
