"""What every page's diagram shares: the DOT writer, escaping, node and arrow styles, shape text.

:class:`Dot` writes a directed graph line by line (edges only between declared nodes, written
after every node); :func:`tensor_node`, :func:`op_node`, :func:`add_node`, :func:`flow` and
:func:`residual` draw the project's notation (filled boxes for tensors, white boxes outlined in
the colour of what an operation produces, arrows coloured by role and labelled with the tensor's
name and shape). :class:`CheckedLabels` and :class:`CheckedShapes` are the bases of every page's
frozen ``*Labels`` and ``*Shapes`` dataclasses: they check the caller's words and normalise
shapes to tuples of ints. Every caller's text goes through :func:`esc` (HTML-like labels) or
:func:`_quote` (attributes), so a label cannot break the DOT source.
"""

from __future__ import annotations

import html
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import fields

from engine import palette as P

Shape = tuple[int, ...]

#: Layout directions Graphviz accepts; "TB" (top to bottom) keeps a chain narrow.
RANKDIRS = ("TB", "LR", "BT", "RL")
#: Font list for every text; the browser picks the first it has (CJK falls back to a system font).
FONT = "Helvetica,Arial,sans-serif"
#: Point sizes: node titles, the second line of a node, arrow labels. (Streamlit restyles the text of
#: graphviz charts to its own font at one small size; these sizes set the layout and other renderers.)
TITLE_PT, SUB_PT, EDGE_PT = 11, 9, 9
#: How much of its colour's way to white a filled box goes (lighter fill, black text stays readable).
FILL_LIGHTEN = 0.55
#: Most rows (tokens, heads) drawn before the middle ones collapse into "⋯".
MAX_ROWS = 4


# --------------------------------------------------------------------------------------------------
# Labels and shapes
# --------------------------------------------------------------------------------------------------


def shape_text(shape: Sequence[int]) -> str:
    """A shape as Python prints a tuple: ``(6, 3)``, ``(6,)``, ``()``.

    Raises:
        TypeError: if an entry is not an int (bools are refused).
        ValueError: if an entry is negative.
    """
    dims = _as_shape("shape", shape)
    if len(dims) == 1:
        return f"({dims[0]},)"
    return "(" + ", ".join(str(d) for d in dims) + ")"


def _as_shape(name: str, value: object) -> Shape:
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise TypeError(f"{name} must be a tuple of ints (e.g. tensor.shape), got {type(value).__name__}")
    dims = tuple(value)
    for d in dims:
        if isinstance(d, bool) or not isinstance(d, int):
            raise TypeError(f"{name} must hold ints, got {d!r} in {dims!r}")
        if d < 0:
            raise ValueError(f"{name} must hold sizes >= 0, got {dims!r}")
    return tuple(int(d) for d in dims)


class CheckedLabels:
    """Checks the types of a labels dataclass: ``str``, ``tuple[str, ...]`` or ``Callable[[int], str]``."""

    def __post_init__(self) -> None:
        for f in fields(self):  # type: ignore[arg-type]
            value = getattr(self, f.name)
            kind = str(f.type)
            if kind.startswith("Callable"):
                ok = callable(value)
            elif kind.startswith("tuple"):
                ok = isinstance(value, tuple) and all(isinstance(v, str) for v in value)
            else:
                ok = isinstance(value, str)
            if not ok:
                raise TypeError(f"{type(self).__name__}.{f.name} must be {kind}, got {type(value).__name__}")


class CheckedShapes:
    """Normalises a shapes dataclass: shapes become tuples of ints, sizes must be positive ints."""

    def __post_init__(self) -> None:
        for f in fields(self):  # type: ignore[arg-type]
            value = getattr(self, f.name)
            kind = str(f.type)
            if kind == "int":
                if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                    raise ValueError(f"{type(self).__name__}.{f.name} must be a positive int, got {value!r}")
            elif kind == "float":
                if isinstance(value, bool) or not isinstance(value, int | float):
                    raise TypeError(f"{type(self).__name__}.{f.name} must be a number, got {value!r}")
            elif value is None and "None" in kind:
                continue
            else:
                object.__setattr__(self, f.name, _as_shape(f"{type(self).__name__}.{f.name}", value))


# --------------------------------------------------------------------------------------------------
# DOT writing
# --------------------------------------------------------------------------------------------------


class Html(str):
    """Text already in Graphviz's HTML-like label syntax (written between < and >, not quoted)."""


def esc(text: str) -> str:
    """Escape a caller's text for an HTML-like label; newlines become line breaks."""
    escaped = html.escape(text, quote=True).replace("&#x27;", "&#39;")
    return escaped.replace("\r\n", "\n").replace("\n", "<BR/>")


def node_label(title: str, sub: str | None = None, bold: bool = True) -> Html:
    """A node label: the title, and an optional smaller second line."""
    head = f"<B>{esc(title)}</B>" if bold and title else esc(title)
    if sub:
        return Html(f'{head}<BR/><FONT POINT-SIZE="{SUB_PT}">{esc(sub)}</FONT>')
    return Html(head)


def arrow_label(name: str | None, shape: Sequence[int] | None) -> Html:
    """An arrow's label: the tensor's name over its shape."""
    parts = [esc(name)] if name else []
    if shape is not None:
        parts.append(esc(shape_text(shape)))
    return Html("<BR/>".join(parts))


def _quote(value: object) -> str:
    if isinstance(value, Html):
        return f"<{value}>"
    text = str(value).replace("\\", "\\\\").replace('"', '\\"')
    return f'"{text}"'


def _attrs(attrs: dict[str, object]) -> str:
    items = [f"{k}={_quote(v)}" for k, v in attrs.items() if v is not None]
    return f" [{', '.join(items)}]" if items else ""


class Dot:
    """A directed graph written line by line; edges may only join nodes already declared.

    Edges are written after every node, at the top level: an edge written inside a cluster
    would pull both its ends into that cluster.
    """

    def __init__(self, rankdir: str) -> None:
        if rankdir not in RANKDIRS:
            raise ValueError(f"rankdir must be one of {RANKDIRS}, got {rankdir!r}")
        self.nodes: set[str] = set()
        self.edges: list[str] = []
        self.depth = 1
        self.lines = [
            "digraph {",
            "  graph" + _attrs(dict(rankdir=rankdir, bgcolor=P.PAPER, fontname=FONT, fontsize=TITLE_PT,
                                    nodesep=0.25, ranksep=0.3, pad=0.15)),
            "  node" + _attrs(dict(fontname=FONT, fontsize=TITLE_PT, fontcolor=P.INK, color=P.INK,
                                   margin="0.12,0.05", height=0.3)),
            "  edge" + _attrs(dict(fontname=FONT, fontsize=EDGE_PT, fontcolor=P.INK, color=P.INK,
                                   arrowsize=0.7, penwidth=1.4)),
        ]

    def _line(self, text: str) -> None:
        self.lines.append("  " * self.depth + text)

    def node(self, node_id: str, **attrs: object) -> str:
        """Declare a node with Graphviz attributes; returns its id. Raises ValueError if declared twice."""
        if node_id in self.nodes:
            raise ValueError(f"node {node_id!r} declared twice")
        self.nodes.add(node_id)
        self._line(_quote(node_id) + _attrs(attrs))
        return node_id

    def edge(self, a: str, b: str, **attrs: object) -> None:
        """An arrow from ``a`` to ``b`` (written after every node). Raises ValueError for an undeclared end."""
        for end in (a, b):
            if end not in self.nodes:
                raise ValueError(f"edge to undeclared node {end!r}")
        self.edges.append(f"  {_quote(a)} -> {_quote(b)}" + _attrs(attrs))

    def same_rank(self, *node_ids: str) -> None:
        """Put these nodes on one rank (one row for "TB")."""
        self._line("{ rank=same; " + " ".join(_quote(n) + ";" for n in node_ids) + " }")

    @contextmanager
    def cluster(self, cluster_id: str, title: str | None, dashed: bool = False) -> Iterator[None]:
        """A context in which declared nodes sit in one rounded (or dashed) box under ``title``."""
        self._line(f"subgraph {_quote('cluster_' + cluster_id)} {{")
        self.depth += 1
        self._line("graph" + _attrs(dict(label=node_label(title) if title else None, labeljust="l",
                                           style="rounded,dashed" if dashed else "rounded",
                                           color=P.RESIDUAL, margin=8)))
        yield
        self.depth -= 1
        self._line("}")

    def source(self) -> str:
        """The DOT source: nodes and clusters, then every edge."""
        return "\n".join(self.lines + self.edges + ["}"]) + "\n"


def tensor_node(dot: Dot, node_id: str, title: str, sub: str | None = None, colour: str | None = None) -> str:
    """A filled, rounded box for an input or a result; ``colour`` is its role (None: plain)."""
    fill = P.lighten(colour, FILL_LIGHTEN) if colour else P.PAPER
    return dot.node(node_id, label=node_label(title, sub), shape="box", style="rounded,filled", fillcolor=fill,
                    color=colour or P.INK, penwidth=1.6, fontcolor=P.text_colour(fill))


def op_node(dot: Dot, node_id: str, title: str | Html, sub: str | None = None, colour: str | None = None) -> str:
    """A white box for an operation, outlined in the colour of what it produces."""
    label = title if isinstance(title, Html) else node_label(title, sub)
    outline = colour or P.INK
    return dot.node(node_id, label=label, shape="box", style="filled", fillcolor=P.PAPER,
                    color=P.darken(outline, 0.15) if outline == P.DROPOUT else outline,
                    penwidth=2.2 if colour else 1.2)


def add_node(dot: Dot, node_id: str) -> str:
    """The ⊕ where two tensors are added."""
    return dot.node(node_id, label="+", shape="circle", width=0.32, height=0.32, fixedsize="true",
                    fontsize=16, color=P.RESIDUAL, penwidth=2, style="filled", fillcolor=P.PAPER)


def flow(dot: Dot, a: str, b: str, name: str | None = None, shape: Sequence[int] | None = None,
          colour: str | None = None, **attrs: object) -> None:
    """An arrow carrying a tensor: coloured by role, labelled with its name and shape."""
    label = arrow_label(name, shape) if (name or shape is not None) else None
    dot.edge(a, b, label=label, color=colour or P.INK, fontcolor=P.INK, **attrs)


def residual(dot: Dot, a: str, b: str, name: str | None = None, shape: Sequence[int] | None = None,
              **attrs: object) -> None:
    """An arrow of the residual stream: thick and grey."""
    flow(dot, a, b, name, shape, colour=P.RESIDUAL, penwidth=3.5, **attrs)


def cells(colours: Sequence[tuple[str, str]], title: str | None = None, sub: str | None = None,
           vertical: bool = False) -> Html:
    """A label of coloured cells (e.g. W_query | W_key | W_value), side by side or stacked, under an optional title."""
    cells = [f'<TD BGCOLOR="{P.lighten(c, FILL_LIGHTEN)}" BORDER="1" COLOR="{c}">{esc(text)}</TD>'
             for text, c in colours]
    span = 1 if vertical else len(colours)
    rows = []
    if title:
        rows.append(f'<TR><TD COLSPAN="{span}" BORDER="0">{node_label(title, sub)}</TD></TR>')
    rows += [f"<TR>{cell}</TR>" for cell in cells] if vertical else [f"<TR>{''.join(cells)}</TR>"]
    return Html(f'<TABLE BORDER="0" CELLBORDER="0" CELLSPACING="2" CELLPADDING="3">{"".join(rows)}</TABLE>')


def shown_rows(count: int, limit: int = MAX_ROWS) -> list[int | None]:
    """Indices 0 … count-1 to draw; None stands for the collapsed middle (at most ``limit`` entries, limit >= 3)."""
    if count <= limit:
        return list(range(count))
    return list(range(limit - 2)) + [None, count - 1]


def call_label(label: Callable[[int], str], n: int) -> str:
    """A callable label's text for ``n``; raises TypeError if it does not return a str."""
    text = label(n)
    if not isinstance(text, str):
        raise TypeError(f"a label callable must return str, got {type(text).__name__} for {n}")
    return text
