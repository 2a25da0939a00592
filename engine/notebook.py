"""A page of the essay as a Jupyter notebook (nbformat v4) that runs on its own.

The notebook holds, in the page's order, the page's prose (Markdown handed in by the caller, in the reader's
language), the listings the page shows under "Code that ran" (the same source, :func:`listing`), and after a
listing the cells of the page's recipes module (``engine/notebooks/<slug>.py``, see :mod:`engine.notebooks`) that
print the numbers the page shows with the reader's settings, beside the chapters' printed values where the page
checks them, and draw its charts; and where the page asks its prediction gates (:class:`GateMark`), each as an
exercise (:class:`Exercise`): the question, an empty cell, and a folded cell that prints the answer computed by the
engine the notebook carries, before the cells that print the numbers it asks about.

It needs no file outside itself and no install of this project. Its first cells say how to install what it
imports (:func:`requirements`: read from the imports of every module it carries, so a module cannot be missing
from the line) and set the reader's settings; then one folded cell carries the source of every ``engine`` module
the listings and recipes import (their import closure, read from the modules' own files) and registers them as
in-memory modules, so the notebook runs what the app ran, at the version the app ran. The listings are then
defined again in the notebook's own namespace, so a reader who edits one and reruns the cells below sees its
effect.
"""

from __future__ import annotations

import ast
import builtins
import importlib.metadata
import inspect
import json
import math
import struct
import sys
import textwrap
import types
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from engine.notebooks import core

if TYPE_CHECKING:
    import nbformat

#: Kernel name written into the notebook's metadata.
KERNEL = {"name": "python3", "display_name": "Python 3", "language": "python"}
#: Tag of the cells that print the page's numbers (the test reads their output).
NUMBERS_TAG = "numbers"
#: Largest settings value accepted, as the length of its Python literal (a Lab corpus slice included).
MAX_SETTING_CHARS = 2_000_000
#: A setting whose literal is longer than this goes into a folded cell of its own, after the settings cell.
BULKY_SETTING_CHARS = 2_000
#: PyTorch's index of CPU-only wheels: the build the notebook installs where there is no GPU (PyPI's Linux wheel
#: is the CUDA build, 2.9 GB).
TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"
#: The command the install lines begin with.
PIP_INSTALL = ("pip", "install")
#: What opens the notebook (not imported by it): the last word of its install line.
JUPYTER = "jupyterlab"
#: Modules a notebook needs beside one it imports, for that one's output to show in Jupyter: Plotly's
#: ``Figure.show()`` draws through nbformat, which it imports only then.
SHOWN_WITH: dict[str, tuple[str, ...]] = {"plotly": ("nbformat",)}
#: Cell metadata that folds a cell's source in JupyterLab and classic Jupyter.
FOLDED = {"jupyter": {"source_hidden": True}, "collapsed": True}


@dataclass(frozen=True)
class Install:
    """How to install what a notebook imports: ``pip install`` lines, with the versions the app runs.

    Attributes:
        torch: ``torch==<version>``, or "" when the notebook does not import it.
        others: ``name==version`` of every other distribution it imports, sorted.
    """

    torch: str
    others: tuple[str, ...]

    @property
    def cpu_lines(self) -> tuple[str, ...]:
        """The commands for a machine without a GPU: PyTorch's CPU build from its own index, then the rest."""
        first = (" ".join((*PIP_INSTALL, self.torch, "--index-url", TORCH_CPU_INDEX)),) if self.torch else ()
        return (*first, " ".join((*PIP_INSTALL, *self.others, JUPYTER)))

    @property
    def cuda_line(self) -> str:
        """The command that takes PyPI's CUDA build of PyTorch instead (a machine with an NVIDIA GPU), or ""."""
        return " ".join((*PIP_INSTALL, self.torch)) if self.torch else ""


def requirements(sources: Mapping[str, tuple[str, str]], cells: Sequence[str] = ()) -> Install:
    """The distributions the notebook imports: the top-level modules named by every import statement (at any
    depth) of the carried engine ``sources`` and of its code ``cells``, less the standard library and
    ``engine``, with the modules :data:`SHOWN_WITH` adds, each as the installed distribution that provides it
    and its version (its public part: a ``+cpu`` local label dropped).

    Raises:
        LookupError: for an imported module no installed distribution provides.
    """
    names: set[str] = set()
    for source in [src for _path, src in sources.values()] + list(cells):
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Import):
                names |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module.split(".")[0])
    names -= set(sys.stdlib_module_names) | {"engine", "__future__"}
    names |= {extra for name in list(names) for extra in SHOWN_WITH.get(name, ())}
    providers = importlib.metadata.packages_distributions()
    pins = {}
    for name in sorted(names):
        if name not in providers:
            raise LookupError(f"no installed distribution provides the module {name!r}")
        dist = providers[name][0]
        pins[dist.lower()] = f"{dist.lower()}=={importlib.metadata.version(dist).split('+')[0]}"
    torch = pins.pop("torch", "")
    return Install(torch, tuple(sorted(pins.values())))


@dataclass(frozen=True)
class Prose:
    """A Markdown cell: one part of the page's prose, already in the reader's language."""

    markdown: str


@dataclass(frozen=True)
class Listing:
    """The objects one "Code that ran" expander of the page shows, in its order."""

    objects: tuple[Callable | type, ...]


@dataclass(frozen=True)
class GateMark:
    """Where the page asks one of its prediction gates (``ui.questions.Gate.id``): its exercise goes here."""

    gate: str


@dataclass(frozen=True)
class Exercise:
    """One of the page's prediction gates as an exercise: its question, an empty cell for the reader, then a folded
    cell that computes the answer with the notebook's own code and the reader's settings, and prints it.

    Attributes:
        question: the Markdown cell (the question, its options listed), in the reader's language.
        answer: the engine function that answers it (the page's gate calls the same one).
        controls: ``(parameter, expression)`` of each argument of ``answer``: Python over the notebook's settings
            and the names of the page's recipes module or of ``answer``'s module.
        comment: the first line of the answer cell, a comment (without its ``#``).
        decimals: the decimals of a number answer, printed by ``show``; None for an option's key, printed by
            ``say`` with the option's label under it.
        options: ``{key: label}`` of an option answer.
        gate: the id of its gate; the exercise goes where the page's items mark it (:class:`GateMark`), or after
            the page's cells when they do not.
    """

    question: str
    answer: Callable
    controls: tuple[tuple[str, str], ...]
    comment: str
    decimals: int | None = None
    options: Mapping[str, str] = field(default_factory=dict)
    gate: str = ""


#: Name the answer cell of an exercise binds and prints (the test reads its ``name = value`` line).
ANSWER = "answer"
#: Tag of an exercise's answer cell.
EXERCISE_TAG = "exercise"


@dataclass(frozen=True)
class NotebookLabels:
    """Every sentence of the notebook's own cells, in the reader's language (from the caller).

    Attributes:
        title: the notebook's first heading (the page's title).
        about: Markdown under the title: what the notebook is, how to run it.
        install: Markdown before the install commands for a machine without a GPU.
        cuda: Markdown before the command that takes PyTorch's CUDA build instead.
        engine: Markdown before the folded cell that carries the engine's modules.
        settings: Markdown before the cell of the reader's settings.
        numbers: Markdown before each cell that prints the page's numbers.
        data: Markdown before the folded cell of the settings too long to read (a corpus slice).
        timing: Markdown before a cell that times code (a recipes module's ``TIMING``): times depend on
            the machine, so the notebook shows how to measure them instead of the page's.
        method_note: Markdown before a listing of a method, shown as text (it runs inside its class).
    """

    title: str
    about: str
    install: str
    cuda: str
    engine: str
    settings: str
    data: str
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


def _float32_text(value: float) -> float:
    """``value`` as the reader set it when it is a float32 widened to float64 (0.4300000071525574 -> 0.43):
    the shortest decimal that reads back as the same float32; any other float unchanged."""
    if not math.isfinite(value) or struct.unpack("f", struct.pack("f", value))[0] != value:
        return value
    for digits in range(1, 10):
        short = float(f"{value:.{digits}g}")
        if struct.unpack("f", struct.pack("f", short))[0] == value:
            return short
    return value


def plain(value: object) -> object:
    """``value`` with every float that is a widened float32 written as the reader set it (:func:`_float32_text`),
    in lists, tuples and dicts too; float64 values are written as they are (repr is already the shortest)."""
    if isinstance(value, float):
        return _float32_text(value)
    if isinstance(value, list | tuple):
        return type(value)(plain(v) for v in value)
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    return value


def _literal(name: str, value: object) -> str:
    """``name = <value as a Python literal>`` (floats as :func:`plain` writes them).

    Raises:
        ValueError: when ``value`` is not a literal of str, numbers, bools, None, lists, tuples and dicts, or
            longer than :data:`MAX_SETTING_CHARS`.
    """
    text = repr(plain(value))
    if len(text) > MAX_SETTING_CHARS:
        raise ValueError(f"setting {name!r} is {len(text)} characters long (at most {MAX_SETTING_CHARS})")
    try:
        ast.literal_eval(text)
    except (ValueError, SyntaxError) as exc:
        raise ValueError(f"setting {name!r} is not a plain literal: {text[:80]}") from exc
    return f"{name} = {text}"


def settings_cells(recipes: Sequence[Callable], settings: Mapping[str, object]) -> tuple[str, str]:
    """The cells that set the reader's controls: one line per parameter of ``recipes`` (their defaults are the
    page's), the reader's value where ``settings`` has one; ``(short lines, long lines)``, a line longer than
    :data:`BULKY_SETTING_CHARS` in the second (a folded cell), "" when there is none.

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
    lines = [_literal(name, settings.get(name, default)) for name, default in defaults.items()]
    return ("\n".join(line for line in lines if len(line) <= BULKY_SETTING_CHARS),
            "\n".join(line for line in lines if len(line) > BULKY_SETTING_CHARS))


def settings_cell(recipes: Sequence[Callable], settings: Mapping[str, object]) -> str:
    """Every line of :func:`settings_cells` in one text (the two cells run one after the other)."""
    return "\n".join(part for part in settings_cells(recipes, settings) if part)


def _markdown_listing(obj: Callable | type) -> str:
    return "```python\n" + listing(obj).rstrip() + "\n```"


def page_recipes(page: types.ModuleType) -> dict[str, Callable]:
    """The ``RECIPES`` of a page's recipes module (:mod:`engine.notebooks`).

    Raises:
        TypeError: for a module without a ``RECIPES`` dict of functions defined in it.
    """
    recipes = getattr(page, "RECIPES", None)
    if not isinstance(recipes, dict) or not all(
            inspect.isfunction(r) and r.__module__ == page.__name__ for r in recipes.values()):
        raise TypeError(f"{page.__name__} has no RECIPES dict of its own functions")
    return recipes


def _exercise_code(exercise: Exercise, home: str, defined: set[str], imports: _Imports) -> str:
    """The answer cell of ``exercise``: its comment, the imports its expressions and its engine function need
    (resolved in the recipes module ``home``, then in the function's module), the call, the print; the engine
    modules it reaches are added to ``imports``."""
    call = f"{exercise.answer.__name__}(" + ", ".join(f"{p}={e}" for p, e in exercise.controls) + ")"
    own = _Imports()
    own.lines[exercise.answer.__name__] = _import_line(exercise.answer.__name__, exercise.answer,
                                                       exercise.answer.__module__)
    own.modules.add(exercise.answer.__module__)
    _add_imports(own, call, home, defined | set(own.lines))
    _add_imports(own, call, exercise.answer.__module__, defined | set(own.lines))
    imports.modules.update(own.modules)
    if exercise.decimals is None:
        shown = (f"say({ANSWER!r}, {ANSWER})\nprint({json.dumps(dict(exercise.options), ensure_ascii=False)}"
                 f"[{ANSWER}])")
    else:
        shown = f"show({ANSWER!r}, {ANSWER}, decimals={int(exercise.decimals)})"
    return (f"# {exercise.comment}\n" + "\n".join(sorted(own.lines.values())) + f"\n\n{ANSWER} = {call}\n{shown}")


def _exercise_needs(exercise: Exercise, home: str) -> set[str]:
    """The names the answer cell of ``exercise`` reads that no import gives it: a cell before it must define them."""
    call = ", ".join(e for _p, e in exercise.controls) or "None"
    importable = set(vars(sys.modules[home])) | set(vars(sys.modules[exercise.answer.__module__]))
    return _free_names(call) - importable


def _exercise_cells(exercise: Exercise, home: str, defined: set[str], imports: _Imports) -> list:
    """The question, the empty cell and the folded answer cell of ``exercise``."""
    import nbformat

    return [nbformat.v4.new_markdown_cell(exercise.question), nbformat.v4.new_code_cell(""),
            nbformat.v4.new_code_cell(_exercise_code(exercise, home, defined, imports),
                                      metadata={**FOLDED, "tags": [EXERCISE_TAG]})]


def _page_cells(page: types.ModuleType, items: Sequence[Prose | Listing | GateMark], labels: NotebookLabels,
                exercises: Sequence[Exercise], recipes: Mapping[str, Callable], timing: frozenset,
                defined: set[str], imports: _Imports) -> list:
    """The page's cells in its order: prose, listings with their recipes' cells, and each exercise at its gate's
    mark, or later when a name its answer reads is defined later; the exercises left over at the end.

    ``defined`` holds the names the cells above the page define (the helpers, the settings); each listing and
    recipe cell adds its own as the page goes.
    """
    import nbformat

    by_gate = {exercise.gate: exercise for exercise in exercises if exercise.gate}
    cells: list = []
    waiting: list[Exercise] = []
    placed: set[int] = set()

    def place_ready() -> None:
        for exercise in [e for e in waiting if _exercise_needs(e, page.__name__) <= defined]:
            cells.extend(_exercise_cells(exercise, page.__name__, set(defined), imports))
            waiting.remove(exercise)

    for item in items:
        if isinstance(item, GateMark):
            exercise = by_gate.get(item.gate)
            if exercise is not None and id(exercise) not in placed:
                placed.add(id(exercise))
                waiting.append(exercise)
                place_ready()
            continue
        if isinstance(item, Prose):
            cells.append(nbformat.v4.new_markdown_cell(item.markdown))
            continue
        for obj in item.objects:
            if is_method(obj):
                cells.append(nbformat.v4.new_markdown_cell(
                    f"{labels.method_note}\n\n`{obj.__module__}.{obj.__qualname__}`\n\n{_markdown_listing(obj)}"))
            else:
                cells.append(nbformat.v4.new_code_cell(f"# {obj.__module__}.{obj.__qualname__}\n{listing(obj)}"))
                defined.add(obj.__name__)
        recipe = recipes.get(item.objects[0].__qualname__) if item.objects else None
        if recipe in timing:
            cells.append(nbformat.v4.new_markdown_cell(labels.timing))
            cells.append(nbformat.v4.new_code_cell(body_of(recipe)))
        elif recipe is not None:
            cells.append(nbformat.v4.new_markdown_cell(labels.numbers))
            cells.append(nbformat.v4.new_code_cell(body_of(recipe), metadata={"tags": [NUMBERS_TAG]}))
        if recipe is not None:
            defined |= _global_names(body_of(recipe))
        place_ready()
    for exercise in waiting + [e for e in exercises if id(e) not in placed]:
        cells.extend(_exercise_cells(exercise, page.__name__, set(defined), imports))
    return cells


def build(page: types.ModuleType, items: Sequence[Prose | Listing | GateMark], settings: Mapping[str, object],
          labels: NotebookLabels, exercises: Sequence[Exercise] = ()) -> nbformat.NotebookNode:
    """The notebook of one page.

    Args:
        page: the page's recipes module, ``engine.notebooks.<slug>`` (``RECIPES``, optional ``TIMING``).
        items: the page's prose parts, listings and gates in the page's order.
        settings: the reader's controls by recipe parameter name (plain literals); a missing one takes the
            page's default.
        labels: the notebook's own sentences.
        exercises: the page's prediction gates: each its question, an empty cell, and its answer in a folded
            cell (:data:`FOLDED`) that prints ``answer = ...``, where ``items`` mark its gate (once the cells
            before it define every name its answer reads), else after the page's cells.

    Returns:
        An nbformat v4 notebook: the title, the install commands (:func:`requirements`), the settings, the folded
        cells of long settings and of the engine's modules, then the page; code cells that print the page's
        numbers carry the tag :data:`NUMBERS_TAG`.

    Raises:
        TypeError: for a module without recipes.
        ValueError: for a setting no recipe takes, a value that is no plain literal, or two listings that need
            one name bound two ways.
        LookupError: for an imported module no installed distribution provides.
    """
    import nbformat  # here, not at the top: importing it costs the app's pages a quarter of a second

    recipes = page_recipes(page)
    timing = getattr(page, "TIMING", frozenset())
    helpers = (core.show, core.say)
    listings = [obj for item in items if isinstance(item, Listing) for obj in item.objects if not is_method(obj)]
    defined = {obj.__name__ for obj in listings} | {helper.__name__ for helper in helpers}
    imports = _Imports()
    for obj in listings:
        _add_imports(imports, listing(obj), obj.__module__, defined)
    used = list(recipes.values())
    for recipe in used:  # what a recipe cell sets, a later one reads from the notebook, not from an import
        defined |= _global_names(body_of(recipe))
    for helper in helpers:
        _add_imports(imports, listing(helper), core.__name__, defined)
    for recipe in used:
        _add_imports(imports, body_of(recipe), page.__name__, defined | set(inspect.signature(recipe).parameters))
    settings_names = {p for recipe in used for p in inspect.signature(recipe).parameters}
    page_cells = _page_cells(page, items, labels, exercises, recipes, timing,
                             {helper.__name__ for helper in helpers} | settings_names, imports)
    sources = engine_sources(imports.modules)
    loader = _Imports()
    _add_imports(loader, listing(core.load_engine), core.__name__, set())
    short, bulky = settings_cells(used, settings)
    engine_code = ("\n".join(sorted(loader.lines.values()))
                   + f"\n\nENGINE_SOURCES = {json.dumps(sources, ensure_ascii=False, indent=0)}\n\n"
                   + listing(core.load_engine) + "\n\nload_engine(ENGINE_SOURCES)")
    helpers_code = ("\n".join(sorted(imports.lines.values())) + "\n\n"
                    + "\n\n".join(listing(helper) for helper in helpers))
    install = requirements(sources, [helpers_code, engine_code] + [c.source for c in page_cells
                                                                   if c.cell_type == "code"])
    commands = "```bash\n" + "\n".join(install.cpu_lines) + "\n```"
    install_md = f"{labels.install}\n\n{commands}"
    if install.cuda_line:
        install_md += f"\n\n{labels.cuda}\n\n```bash\n{install.cuda_line}\n```"

    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = KERNEL
    nb.metadata["language_info"] = {"name": "python"}
    cells = [nbformat.v4.new_markdown_cell(f"# {labels.title}\n\n{labels.about}"),
             nbformat.v4.new_markdown_cell(install_md),
             nbformat.v4.new_markdown_cell(labels.settings),
             nbformat.v4.new_code_cell(short)]
    if bulky:
        cells += [nbformat.v4.new_markdown_cell(labels.data), nbformat.v4.new_code_cell(bulky, metadata=dict(FOLDED))]
    cells += [nbformat.v4.new_markdown_cell(labels.engine),
              nbformat.v4.new_code_cell(engine_code, metadata=dict(FOLDED)),
              nbformat.v4.new_code_cell(helpers_code), *page_cells]
    nb.cells = cells
    nbformat.validate(nb)
    return nb


def to_bytes(nb: nbformat.NotebookNode) -> bytes:
    """The notebook as the UTF-8 JSON of an ``.ipynb`` file."""
    import nbformat

    return nbformat.writes(nb).encode("utf-8")
