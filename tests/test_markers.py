"""The markers say what their names say: every test that drives Chromium carries ``browser``, so that
``pytest -m "not browser"`` runs no Chromium, and every folder's tests carry that folder's marker.

A test drives Chromium when its function, a module-level function or fixture it reaches (by call, by reference
or by a parameter naming a fixture), uses Playwright or the Chromium helpers (``sync_playwright``,
``async_playwright``, ``CHROMIUM``, ``legibility.chromium``). It carries ``browser`` when it lies in
tests/browser/ (conftest.py marks the folder), when its module's ``pytestmark`` names it, or when it is decorated
with it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.conftest import FOLDER_MARKERS

TESTS = Path(__file__).resolve().parent
CHROMIUM_NAMES = {"sync_playwright", "async_playwright", "CHROMIUM", "chromium"}


def _names(node: ast.AST) -> set[str]:
    """Every name and attribute name used inside ``node``."""
    found = set()
    for n in ast.walk(node):
        if isinstance(n, ast.Name):
            found.add(n.id)
        elif isinstance(n, ast.Attribute):
            found.add(n.attr)
    return found


def _marks_browser(decorators: list[ast.expr]) -> bool:
    return any("browser" in _names(d) and "mark" in _names(d) for d in decorators)


def chromium_tests_without_the_mark(path: Path) -> list[str]:
    """The tests of one module that drive Chromium and do not carry ``browser``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    functions = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}
    uses = {name for name, f in functions.items() if _names(f) & CHROMIUM_NAMES}
    reaches = {name: (_names(f) | {a.arg for a in f.args.args}) & functions.keys() for name, f in functions.items()}
    grown = True
    while grown:
        more = {name for name, targets in reaches.items() if targets & uses} - uses
        uses |= more
        grown = bool(more)
    module_marked = path.parent.name == "browser" or any(
        isinstance(n, ast.Assign) and any(getattr(t, "id", None) == "pytestmark" for t in n.targets)
        and "browser" in _names(n.value) for n in tree.body)
    return [name for name, f in functions.items() if name.startswith("test") and name in uses
            and not module_marked and not _marks_browser(f.decorator_list)]


def test_the_finder_sees_a_chromium_test_without_its_mark(tmp_path):
    """It flags a test reaching Playwright through a helper and a fixture, and accepts a marked one."""
    module = tmp_path / "test_x.py"
    module.write_text("import pytest\nfrom playwright.sync_api import sync_playwright\n\n"
                      "def helper():\n    with sync_playwright() as p:\n        pass\n\n"
                      "@pytest.fixture\ndef page():\n    helper()\n\n"
                      "def test_by_call():\n    helper()\n\n"
                      "def test_by_fixture(page):\n    pass\n\n"
                      "@pytest.mark.browser\ndef test_marked():\n    helper()\n\n"
                      "def test_plain():\n    assert 1\n")
    assert chromium_tests_without_the_mark(module) == ["test_by_call", "test_by_fixture"]


@pytest.mark.parametrize("path", sorted(TESTS.rglob("test_*.py")), ids=lambda p: str(p.relative_to(TESTS)))
def test_every_chromium_test_is_marked_browser(path):
    assert chromium_tests_without_the_mark(path) == []


def test_every_test_lies_in_a_marked_folder_or_is_a_whole_tree_rule():
    """Test files live in the folders conftest.py marks; at the top stand only the rules over the whole tree."""
    folders = {p.name for p in TESTS.iterdir() if p.is_dir() and not p.name.startswith((".", "_"))}
    assert folders == set(FOLDER_MARKERS)
    assert {p.name for p in TESTS.glob("test_*.py")} == {"test_architecture.py", "test_markers.py"}
