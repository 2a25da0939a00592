"""A page of the essay as a Jupyter notebook (nbformat v4) that runs on its own.

The notebook holds, in the page's order, the page's prose (Markdown handed in by the caller, in the reader's
language), the listings the page shows under "Code that ran" (the same source, :func:`listing`), and after a
listing the cells of :mod:`engine.notebook_recipes` that print the numbers the page shows with the reader's
settings, beside the chapters' printed values where the page checks them.

It needs no file outside itself and no install of this project: its first code cell carries the source of every
``engine`` module the listings and recipes import (their import closure, read from the modules' own files) and
registers them as in-memory modules, so the notebook runs what the app ran, at the version the app ran, with
only :data:`REQUIREMENTS` installed (``torch``, ``numpy``, ``pandas``, and ``plotly`` for the page's charts). The
listings are then defined again in the notebook's own namespace, so a reader who edits one and reruns the cells
below sees its effect.
"""

from __future__ import annotations

import ast
import builtins
import inspect
import json
import sys
import textwrap
import types
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from engine import notebook_recipes

if TYPE_CHECKING:
    import nbformat

#: The packages the notebook needs, with the versions the app runs (pyproject.toml pins the same).
REQUIREMENTS: tuple[str, ...] = ("torch==2.13.0", "numpy==2.3.5", "pandas==2.3.3", "plotly==6.5.0")
#: Kernel name written into the notebook's metadata.
KERNEL = {"name": "python3", "display_name": "Python 3", "language": "python"}
#: Tag of the cells that print the page's numbers (the test reads their output).
NUMBERS_TAG = "numbers"
#: Largest settings value accepted, as the length of its Python literal (a Lab corpus slice included).
MAX_SETTING_CHARS = 400_000


@dataclass(frozen=True)
class Prose:
    """A Markdown cell: one part of the page's prose, already in the reader's language."""

    markdown: str


@dataclass(frozen=True)
class Listing:
    """The objects one "Code that ran" expander of the page shows, in its order."""

    objects: tuple[Callable | type, ...]


@dataclass(frozen=True)
class NotebookLabels:
    """Every sentence of the notebook's own cells, in the reader's language (from the caller).

    Attributes:
        title: the notebook's first heading (the page's title).
        about: Markdown under the title: what the notebook is, how to run it (may name the packages).
        engine: Markdown before the cell that carries the engine's modules.
        settings: Markdown before the cell of the reader's settings.
        numbers: Markdown before each cell that prints the page's numbers.
        timing: Markdown before a cell that times code (:data:`engine.notebook_recipes.TIMING`): times depend on
            the machine, so the notebook shows how to measure them instead of the page's.
        method_note: Markdown before a listing of a method, shown as text (it runs inside its class).
    """

    title: str
    about: str
    engine: str
    settings: str
    numbers: str
    timing: str
    method_note: str


@dataclass(frozen=True)
class _Imports:
    """The import statements a notebook needs, one per name, and the engine modules they reach."""

    lines: dict[str, str] = field(default_factory=dict)
    modules: set[str] = field(default_factory=set)


def listing(obj: Callable | type) -> str:
    """The listing of ``obj`` as the page shows it: its source without docstrings (``inspect.getsource``).

    The same text as ``ui.page.source_of``: a docstring line is dropped, every other line kept as written.
    """
    source = textwrap.dedent(inspect.getsource(obj))
    drop: set[int] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and ast.get_docstring(node):
            doc = node.body[0]
            drop.update(range(doc.lineno - 1, doc.end_lineno))
    lines = source.splitlines(keepends=True)
    return "".join(line for i, line in enumerate(lines) if i not in drop)


def body_of(function: Callable) -> str:
    """The body of ``function`` without its ``def`` line and docstring, dedented (a recipe's cell)."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
    node = tree.body[0]
    if not isinstance(node, ast.FunctionDef):
        raise TypeError(f"{function!r} is not a function")
    statements = node.body[1:] if ast.get_docstring(node) else node.body
    lines = textwrap.dedent(inspect.getsource(function)).splitlines()
    first, last = statements[0].lineno - 1, statements[-1].end_lineno
    return textwrap.dedent("\n".join(lines[first:last]))


def is_method(obj: Callable | type) -> bool:
    """True for an object defined inside a class (its listing runs only there)."""
    return "." in obj.__qualname__


def _free_names(source: str) -> set[str]:
    """Names a piece of code reads that it never binds itself, builtins excepted."""
    tree = ast.parse(source)
    loaded, bound = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            (loaded if isinstance(node.ctx, ast.Load) else bound).add(node.id)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            bound.add(node.name)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, ast.alias):
            bound.add((node.asname or node.name).split(".")[0])
    return {n for n in loaded - bound if not hasattr(builtins, n)}


def _global_names(source: str) -> set[str]:
    """Names a recipe's body declares ``global``: what its cell sets for a later cell to read."""
    return {name for node in ast.walk(ast.parse(source)) if isinstance(node, ast.Global) for name in node.names}


def _import_line(name: str, value: object, home: str) -> str:
    """One import statement binding ``name`` to ``value`` as the module ``home`` has it."""
    if isinstance(value, types.ModuleType):
        parent, _dot, child = value.__name__.rpartition(".")
        if parent:
            node = ast.ImportFrom(module=parent, names=[ast.alias(child, None if child == name else name)], level=0)
        else:
            node = ast.Import(names=[ast.alias(value.__name__, None if value.__name__ == name else name)])
        return ast.unparse(node)
    origin = getattr(value, "__module__", None)
    if not (origin in sys.modules and getattr(sys.modules[origin], name, None) is value):
        origin = _imported_from(home).get(name, home)  # a constant: where ``home`` imports it from
    return ast.unparse(ast.ImportFrom(module=origin, names=[ast.alias(name, None)], level=0))


def _imported_from(home: str) -> dict[str, str]:
    """``{name: module}`` of the ``from module import name`` statements at the top of module ``home``."""
    tree = ast.parse(_module_file_source(home))
    return {alias.asname or alias.name: node.module for node in tree.body
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module for alias in node.names}


def _add_imports(imports: _Imports, source: str, home: str, defined: set[str]) -> None:
    """Add the imports ``source`` (code of module ``home``) needs, except the names a notebook cell defines.

    Raises:
        ValueError: when one name would be bound to two different objects in the notebook.
    """
    namespace = vars(sys.modules[home])
    for name in sorted(_free_names(source) - defined):
        if name not in namespace:
            continue
        line = _import_line(name, namespace[name], home)
        if imports.lines.setdefault(name, line) != line:
            raise ValueError(f"{name!r} is imported two ways: {imports.lines[name]!r} and {line!r}")
        value = namespace[name]
        module = value.__name__ if isinstance(value, types.ModuleType) else line.split()[1]
        if module.split(".")[0] == "engine":
            imports.modules.add(module)


def _module_file_source(name: str) -> str:
    """The source of module ``name`` as its file holds it."""
    return inspect.getsource(sys.modules[name])


def engine_closure(modules: set[str]) -> list[str]:
    """The engine modules ``modules`` need, packages included, each after every engine module it imports (in
    an import circle, such as a package whose ``__init__`` imports its submodules, the one reached first comes
    last).

    Returns:
        Module names in an order in which executing them one after another succeeds.
    """
    order: list[str] = []
    visiting: set[str] = set()

    def visit(name: str) -> None:
        if name in order or name in visiting:
            return
        visiting.add(name)
        for node in ast.walk(ast.parse(_module_file_source(name))):
            targets: list[str] = []
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and \
                    node.module.split(".")[0] == "engine":
                for alias in node.names:
                    sub = f"{node.module}.{alias.name}"
                    targets.append(sub if sub in sys.modules else node.module)
            elif isinstance(node, ast.Import):
                targets += [a.name for a in node.names if a.name.split(".")[0] == "engine"]
            for target in targets:
                visit(target)
        visiting.discard(name)
        order.append(name)
        parent = name.rpartition(".")[0]
        if parent:  # after: a package's __init__ may import this module (every module is registered first)
            visit(parent)

    for module in sorted(modules):
        visit(module)
    return order


def engine_sources(modules: set[str]) -> dict[str, tuple[str, str]]:
    """``{module name: (relative file path, source)}`` of :func:`engine_closure`, in its order."""
    out = {}
    for name in engine_closure(modules):
        module = sys.modules[name]
        path = name.replace(".", "/") + ("/__init__.py" if hasattr(module, "__path__") else ".py")
        out[name] = (path, _module_file_source(name))
    return out


def _literal(name: str, value: object) -> str:
    """``name = <value as a Python literal>``.

    Raises:
        ValueError: when ``value`` is not a literal of str, numbers, bools, None, lists, tuples and dicts, or
            longer than :data:`MAX_SETTING_CHARS`.
    """
    text = repr(value)
    if len(text) > MAX_SETTING_CHARS:
        raise ValueError(f"setting {name!r} is {len(text)} characters long (at most {MAX_SETTING_CHARS})")
    try:
        ast.literal_eval(text)
    except (ValueError, SyntaxError) as exc:
        raise ValueError(f"setting {name!r} is not a plain literal: {text[:80]}") from exc
    return f"{name} = {text}"


def settings_cell(recipes: Sequence[Callable], settings: Mapping[str, object]) -> str:
    """The cell that sets the reader's controls: one line per parameter of ``recipes`` (their defaults are
    the page's), the reader's value where ``settings`` has one.

    Raises:
        ValueError: for a setting no recipe takes, or a value :func:`_literal` refuses.
    """
    defaults: dict[str, object] = {}
    for recipe in recipes:
        for param in inspect.signature(recipe).parameters.values():
            defaults.setdefault(param.name, param.default)
    unknown = set(settings) - set(defaults)
    if unknown:
        raise ValueError(f"no recipe of this page takes the settings {sorted(unknown)}")
    return "\n".join(_literal(name, settings.get(name, default)) for name, default in defaults.items())


def _markdown_listing(obj: Callable | type) -> str:
    return "```python\n" + listing(obj).rstrip() + "\n```"


def build(slug: str, items: Sequence[Prose | Listing], settings: Mapping[str, object],
          labels: NotebookLabels) -> nbformat.NotebookNode:
    """The notebook of page ``slug``.

    Args:
        slug: the page's slug (``self_attention``); selects its recipes in :data:`engine.notebook_recipes.RECIPES`.
        items: the page's prose parts and listings in the page's order.
        settings: the reader's controls by recipe parameter name (plain literals); a missing one takes the
            page's default.
        labels: the notebook's own sentences.

    Returns:
        An nbformat v4 notebook; code cells that print the page's numbers carry the tag :data:`NUMBERS_TAG`.

    Raises:
        KeyError: for a slug without recipes.
        ValueError: for a setting no recipe takes, a value that is no plain literal, or two listings that need
            one name bound two ways.
    """
    import nbformat  # here, not at the top: importing it costs the app's pages a quarter of a second

    recipes = notebook_recipes.RECIPES[slug]
    listings = [obj for item in items if isinstance(item, Listing) for obj in item.objects if not is_method(obj)]
    defined = {obj.__name__ for obj in listings} | {notebook_recipes.show.__name__, notebook_recipes.say.__name__}
    imports = _Imports()
    for obj in listings:
        _add_imports(imports, listing(obj), obj.__module__, defined)
    used = [recipe for recipe in recipes.values()]
    for recipe in used:  # what a recipe cell sets, a later one reads from the notebook, not from an import
        defined |= _global_names(body_of(recipe))
    for recipe in [notebook_recipes.show, notebook_recipes.say, *used]:
        helper = recipe in (notebook_recipes.show, notebook_recipes.say)
        source = listing(recipe) if helper else body_of(recipe)
        params = set() if helper else set(inspect.signature(recipe).parameters)
        _add_imports(imports, source, notebook_recipes.__name__, defined | params)
    sources = engine_sources(imports.modules)
    loader = _Imports()
    _add_imports(loader, listing(notebook_recipes.load_engine), notebook_recipes.__name__, set())

    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = KERNEL
    nb.metadata["language_info"] = {"name": "python"}
    cells = [nbformat.v4.new_markdown_cell(f"# {labels.title}\n\n{labels.about}"),
             nbformat.v4.new_markdown_cell(labels.engine),
             nbformat.v4.new_code_cell(
                 "\n".join(sorted(loader.lines.values()))
                 + f"\n\nENGINE_SOURCES = {json.dumps(sources, ensure_ascii=False, indent=0)}\n\n"
                 + listing(notebook_recipes.load_engine) + "\n\nload_engine(ENGINE_SOURCES)"),
             nbformat.v4.new_code_cell("\n".join(sorted(imports.lines.values())) + "\n\n"
                                       + listing(notebook_recipes.show) + "\n\n" + listing(notebook_recipes.say)),
             nbformat.v4.new_markdown_cell(labels.settings),
             nbformat.v4.new_code_cell(settings_cell(used, settings))]
    for item in items:
        if isinstance(item, Prose):
            cells.append(nbformat.v4.new_markdown_cell(item.markdown))
            continue
        for obj in item.objects:
            if is_method(obj):
                cells.append(nbformat.v4.new_markdown_cell(
                    f"{labels.method_note}\n\n`{obj.__module__}.{obj.__qualname__}`\n\n{_markdown_listing(obj)}"))
            else:
                cells.append(nbformat.v4.new_code_cell(f"# {obj.__module__}.{obj.__qualname__}\n{listing(obj)}"))
        recipe = recipes.get(item.objects[0].__qualname__) if item.objects else None
        if recipe in notebook_recipes.TIMING:
            cells.append(nbformat.v4.new_markdown_cell(labels.timing))
            cells.append(nbformat.v4.new_code_cell(body_of(recipe)))
        elif recipe is not None:
            cells.append(nbformat.v4.new_markdown_cell(labels.numbers))
            cells.append(nbformat.v4.new_code_cell(body_of(recipe), metadata={"tags": [NUMBERS_TAG]}))
    nb.cells = cells
    nbformat.validate(nb)
    return nb


def to_bytes(nb: nbformat.NotebookNode) -> bytes:
    """The notebook as the UTF-8 JSON of an ``.ipynb`` file."""
    import nbformat

    return nbformat.writes(nb).encode("utf-8")
