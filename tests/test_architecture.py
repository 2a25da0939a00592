"""The house rules that a reader of the code relies on, checked by walking the sources with ``ast``.

* imports run one way: no circle between the project's modules, and ``engine/`` never imports
  Streamlit, ``ui/`` or ``views/``; no import of a project module hidden inside a function;
* the engine returns data, the pages say words: no user-visible English sentence in ``engine/``
  outside docstrings, exceptions, command-line help and log lines;
* every visible sentence of ``views/``, ``ui/`` and ``app.py`` goes through the catalog (``_``,
  ``N_`` or ``ngettext``), so that French and German readers see no English.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("engine", "ui", "views", "tools")


def project_files() -> list[Path]:
    files = [ROOT / "app.py"]
    for pkg in PACKAGES:
        files += sorted((ROOT / pkg).rglob("*.py"))
    return files


def module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def _resolve(node: ast.ImportFrom, current: str, is_package: bool) -> str:
    if node.level == 0:
        return node.module or ""
    base = current.split(".")
    base = base if is_package else base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def imports_of(path: Path) -> list[tuple[str, bool]]:
    """(imported module, at module level?) for every import statement of ``path``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    current = module_name(path)
    top = {id(n) for n in tree.body}
    for node in tree.body:  # imports under ``if TYPE_CHECKING:`` or try/except at top level count as top level
        if isinstance(node, ast.If | ast.Try):
            top |= {id(n) for n in ast.walk(node)}
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(alias.name, id(node) in top) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = _resolve(node, current, path.name == "__init__.py")
            out.append((base, id(node) in top))
            out += [(f"{base}.{alias.name}", id(node) in top) for alias in node.names]
    return out


def graph() -> dict[str, set[str]]:
    modules = {module_name(p): p for p in project_files()}
    edges: dict[str, set[str]] = {m: set() for m in modules}
    for name, path in modules.items():
        for target, _top in imports_of(path):
            if target in modules and target != name:
                edges[name].add(target)
    return edges


def find_cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """One import circle, as a list of modules, or None (depth-first search with colours)."""
    colour = dict.fromkeys(edges, 0)
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        colour[node] = 1
        stack.append(node)
        for nxt in sorted(edges[node]):
            if colour[nxt] == 1:
                return stack[stack.index(nxt):] + [nxt]
            if colour[nxt] == 0 and (found := visit(nxt)):
                return found
        stack.pop()
        colour[node] = 2
        return None

    for start in sorted(edges):
        if colour[start] == 0 and (found := visit(start)):
            return found
    return None


def test_cycle_finder_finds_a_planted_circle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_no_import_circle():
    assert find_cycle(graph()) is None


def test_engine_never_imports_the_ui():
    bad = []
    for path in (ROOT / "engine").rglob("*.py"):
        for target, _top in imports_of(path):
            if target.split(".")[0] in ("streamlit", "ui", "views"):
                bad.append(f"{path.relative_to(ROOT)} imports {target}")
    assert not bad, bad


def test_no_project_import_inside_a_function():
    """A lazy import of the project's own code is how a circle hides; none is allowed."""
    modules = {module_name(p) for p in project_files()}
    bad = []
    for path in project_files():
        for target, top in imports_of(path):
            if not top and target in modules:
                bad.append(f"{path.relative_to(ROOT)}: {target}")
    assert not bad, bad


# --------------------------------------------------------------------------------------------------
# Words
# --------------------------------------------------------------------------------------------------

#: Two words of letters separated by a space: a phrase a reader would read.
_PHRASE = re.compile(r"[A-Za-z]{2,}[,:;]? +[A-Za-z]{2,}")
_CATALOG_CALLS = {"_", "N_", "ngettext"}
#: Calls whose string arguments are for developers: exceptions, logs, warnings, command-line output.
_DEVELOPER_CALLS = {"print", "warn", "debug", "info", "warning", "error", "exception", "critical", "add_argument",
                    "ArgumentParser", "add_parser", "add_subparsers", "add_argument_group", "exit"}


def _docstring_ids(tree: ast.AST) -> set[int]:
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                ids.add(id(body[0].value))
    return ids


def _call_name(node: ast.Call) -> str:
    func = node.func
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""


def _exempt_ids(tree: ast.AST, calls: set[str], with_raise: bool) -> set[int]:
    """Ids of every node under a call in ``calls`` (and under ``raise`` / ``assert`` when asked)."""
    ids: set[int] = set()
    for node in ast.walk(tree):
        under = (isinstance(node, ast.Call) and _call_name(node) in calls) or (
            with_raise and isinstance(node, ast.Raise | ast.Assert))
        if under:
            ids |= {id(n) for n in ast.walk(node)}
    return ids


#: Plotly's enumerated values and product names: words, but not sentences for a reader to translate.
_NOT_SENTENCES = re.compile(r"(top|middle|bottom) (left|center|right)|.*sans-serif|Apple MPS|model name")
#: A line of code shown as it ran, e.g. ``keys = keys.view(b, num_tokens, ...)``.
_CODE_LINE = re.compile(r"[\w, ]+ = [\w.\[\]]+\(.*\)")
#: Strings on a line ending with this comment are data keys (e.g. column names of a results file).
_DATA_KEY = "# data key"
#: Developer commands (benchmarks and the training command): what they print are log lines.
_DEVELOPER_MODULES = ("engine/bench/", "engine/train.py")


def _is_code(text: str) -> bool:
    """Code, paths, format specs and identifiers shown as they are (not sentences)."""
    stripped = text.strip()
    if _NOT_SENTENCES.fullmatch(stripped) or _CODE_LINE.fullmatch(stripped):
        return True
    return (stripped.startswith(("torch.", "F.", "nn.", "x.", "m.", "<", "%{", "python -m", "```", ":material/"))
            or bool(re.fullmatch(r"[\w.:/\-]+(\(.*\))?", stripped)))


def phrases(path: Path, calls: set[str], with_raise: bool) -> list[str]:
    """The phrases of ``path`` that are neither docstrings nor under an exempt call."""
    source = path.read_text(encoding="utf-8")
    lines = source.splitlines()
    tree = ast.parse(source)
    skip = _docstring_ids(tree) | _exempt_ids(tree, calls, with_raise)
    found = []
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            text = node.value
        elif isinstance(node, ast.JoinedStr):
            text = "".join(v.value for v in node.values if isinstance(v, ast.Constant))
            skip |= {id(v) for v in node.values}
        else:
            continue
        if lines[node.lineno - 1].rstrip().endswith(_DATA_KEY):
            continue
        if _PHRASE.search(text) and not _is_code(text):
            found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {text[:70]!r}")
    return found


def test_phrase_finder_sees_sentences_and_spares_code():
    assert _PHRASE.search("matches the chapter") and not _PHRASE.search("max_abs_diff")
    assert _is_code("torch.manual_seed(123)") and not _is_code("the difference is 0")


def test_engine_holds_no_sentence_for_the_reader():
    found = []
    for path in sorted((ROOT / "engine").rglob("*.py")):
        if str(path.relative_to(ROOT)).startswith(_DEVELOPER_MODULES):
            continue
        found += phrases(path, _DEVELOPER_CALLS, with_raise=True)
    assert not found, "\n".join(found)


@pytest.mark.parametrize("folder", ["views", "ui", "app.py"])
def test_every_visible_sentence_goes_through_the_catalog(folder):
    paths = [ROOT / folder] if folder.endswith(".py") else sorted((ROOT / folder).rglob("*.py"))
    found = []
    for path in paths:
        found += phrases(path, _CATALOG_CALLS | _DEVELOPER_CALLS, with_raise=True)
    assert not found, "\n".join(found)


# --------------------------------------------------------------------------------------------------
# The Lab: one owner of the reader's state, a package that imports one way, figures that take Labels
# --------------------------------------------------------------------------------------------------

LAB_SESSION = ROOT / "ui" / "lab" / "session.py"


def _mentions_session_state(node: ast.AST) -> bool:
    return any(isinstance(n, ast.Attribute) and n.attr == "session_state"
               or isinstance(n, ast.Name) and n.id == "session_state" for n in ast.walk(node))


def lab_state_literals(path: Path) -> list[str]:
    """``"lab_*"`` literals used as session-state keys in ``path``: subscripts, get/pop/setdefault/update, ``in``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.Subscript | ast.Call | ast.Compare) or not _mentions_session_state(node):
            continue
        for n in ast.walk(node):
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value.startswith("lab_"):
                found.append(f"{path.relative_to(ROOT)}:{n.lineno}: {n.value!r}")
    return found


def test_lab_state_finder_sees_a_key():
    tree = ast.parse('st.session_state["lab_x"] = 1\nst.session_state.get("lab_y")\n"lab_z" in st.session_state')
    keys = {n.value for node in ast.walk(tree) if isinstance(node, ast.Subscript | ast.Call | ast.Compare)
            and _mentions_session_state(node) for n in ast.walk(node) if isinstance(n, ast.Constant)}
    assert {"lab_x", "lab_y", "lab_z"} <= keys


def test_the_lab_state_has_one_owner():
    """No ``"lab_*"`` session-state key outside ``ui/lab/session.py``; the Lab's other modules never touch the state."""
    paths = [p for folder in ("views", "ui") for p in sorted((ROOT / folder).rglob("*.py")) if p != LAB_SESSION]
    found = [hit for p in paths for hit in lab_state_literals(p)]
    for path in [ROOT / "views" / "lab.py", *sorted((ROOT / "ui" / "lab").glob("*.py"))]:
        if path == LAB_SESSION:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        found += [f"{path.relative_to(ROOT)}:{n.lineno}: session_state" for n in ast.walk(tree)
                  if isinstance(n, ast.Attribute) and n.attr in ("session_state", "query_params")]
    assert not found, "\n".join(found)


def lab_order() -> list[str]:
    """The modules of ``engine.lab`` in the order its package docstring lists them."""
    doc = ast.get_docstring(ast.parse((ROOT / "engine" / "lab" / "__init__.py").read_text(encoding="utf-8")))
    order: list[str] = []
    for name in re.findall(r":mod:`engine\.lab\.(\w+)`", doc or ""):
        if name not in order:
            order.append(name)
    return order


def test_the_lab_package_imports_one_way():
    """Each module of engine/lab imports only the modules its package docstring lists before it."""
    order = lab_order()
    lab = ROOT / "engine" / "lab"
    units = {p.stem for p in lab.glob("*.py") if p.stem != "__init__"} | {
        p.name for p in lab.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert units <= set(order), f"engine/lab modules missing from the package docstring: {units - set(order)}"
    bad = []
    for path in sorted(lab.rglob("*.py")):
        rel = path.relative_to(lab).parts
        unit = rel[0].removesuffix(".py")
        if unit == "__init__" or unit not in order:
            continue
        allowed = set(order[:order.index(unit)]) | {unit}
        for target, _top in imports_of(path):
            parts = target.split(".")
            if parts[:2] == ["engine", "lab"] and len(parts) > 2 and parts[2] not in allowed:
                bad.append(f"{path.relative_to(ROOT)} imports {target}")
    assert not bad, "\n".join(bad)


def test_no_figure_takes_a_plain_mapping_of_labels():
    """Figures take their words in frozen ``*Labels`` dataclasses, never in a ``text`` mapping with magic keys."""
    bad = []
    for path in sorted((ROOT / "engine" / "figures").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.FunctionDef):
                continue
            for arg in node.args.args + node.args.kwonlyargs:
                note = ast.unparse(arg.annotation) if arg.annotation is not None else ""
                if arg.arg in ("text", "labels", "words") and re.search(r"Mapping|dict", note):
                    bad.append(f"{path.relative_to(ROOT)}:{node.lineno}: {node.name}({arg.arg}: {note})")
    assert not bad, "\n".join(bad)


# --------------------------------------------------------------------------------------------------
# Diagrams: one module per page slug; one colour legend
# --------------------------------------------------------------------------------------------------


def page_slugs() -> set[str]:
    """The slugs of ``ui/nav.py``'s registry, read from its source (the first argument of each ``PageInfo``)."""
    tree = ast.parse((ROOT / "ui" / "nav.py").read_text(encoding="utf-8"))
    return {node.args[0].value for node in ast.walk(tree)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "PageInfo"
            and node.args and isinstance(node.args[0], ast.Constant)}


def test_diagram_modules_are_named_by_page_slug():
    """engine/diagrams/ holds core.py and one module per page slug, as engine/figures/ and engine/sections/ do."""
    slugs = page_slugs()
    assert {"home", "self_attention", "lab"} <= slugs  # the reader found the registry
    folder = ROOT / "engine" / "diagrams"
    assert not (ROOT / "engine" / "diagrams.py").exists(), "engine/diagrams.py and the package would shadow each other"
    modules = {p.stem for p in folder.glob("*.py")} - {"__init__", "core"}
    assert modules, "engine/diagrams/ has no page module"
    assert modules <= slugs, f"not a page slug: {sorted(modules - slugs)}"
    assert not [p for p in folder.iterdir() if p.is_dir() and p.name != "__pycache__"], "no sub-packages"


#: The first words of the diagram-colour legend, written once, by ``ui.diagram.colour_legend``.
LEGEND_START = "Diagram colours"


def test_no_view_writes_the_colour_legend_itself():
    """The legend's sentence lives in ui/diagram.py only; views call ``colour_legend()``."""
    where = []
    for path in [*sorted((ROOT / "views").glob("*.py")), *sorted((ROOT / "ui").rglob("*.py"))]:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and LEGEND_START in node.value:
                where.append(str(path.relative_to(ROOT)))
    assert where == ["ui/diagram.py"], where
    callers = [p.name for p in sorted((ROOT / "views").glob("*.py")) if "colour_legend()" in p.read_text("utf-8")]
    assert len(callers) >= 7, callers


#: The longest function a page's view may hold: a section a reader of the code takes in at one sitting (a longer
#: one splits into named sections, as views/positional_encodings.py's rope_and_scores into its controls and views).
VIEW_FUNCTION_LINES = 50


def _long_functions(source: str, limit: int) -> list[tuple[str, int]]:
    """(name, lines) of every function of ``source`` longer than ``limit`` lines, decorators excluded."""
    return [(node.name, node.end_lineno - node.lineno + 1) for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.end_lineno - node.lineno + 1 > limit]


def test_long_function_finder_counts_a_planted_one():
    body = "".join(f"    x{i} = {i}\n" for i in range(VIEW_FUNCTION_LINES))
    assert _long_functions(f"def long():\n{body}\ndef short():\n    pass\n", VIEW_FUNCTION_LINES) == [
        ("long", VIEW_FUNCTION_LINES + 1)]


def test_every_view_function_reads_in_one_sitting():
    long = {path.name: found for path in sorted((ROOT / "views").glob("*.py"))
            if (found := _long_functions(path.read_text(encoding="utf-8"), VIEW_FUNCTION_LINES))}
    assert not long, long
