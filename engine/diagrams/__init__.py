"""Diagrams of what each page computes, as Graphviz DOT source: one module per page slug.

``engine.diagrams.<slug>`` (the slugs of ``ui/nav.py``, the same names as ``engine.figures`` and
``engine.sections``) holds that page's diagrams; :mod:`engine.diagrams.core` holds what they share
(the DOT writer, escaping, node and arrow styles, shape text, the checks on labels and shapes).
A function returns a DOT string and draws nothing: the view hands it to ``ui.diagram.diagram``,
which lays it out with Graphviz's ``dot`` program on the server and shows the SVG, or, where
``dot`` is missing or fails, passes the same source to ``st.graphviz_chart`` for the browser to
lay out.

Every diagram takes two frozen dataclasses:

* ``labels``: every word the diagram shows, already translated by the view (the engine holds
  no sentence for the reader). All fields are required. A field is a ``str``; token lists are
  ``tuple[str, ...]``; texts that hold a number (a head's index, a parameter count) are
  callables ``int -> str``, so the view can use ``ngettext`` and its own number format.
  Labels are HTML-escaped (``&``, ``<``, ``>``, quotes) and may hold any Unicode (CJK, √, −∞,
  ×); a newline breaks the line.
* ``shapes``: the tensor shapes the page produced, as tuples of ints (``tensor.shape`` works:
  ``torch.Size`` is a tuple), written on the arrows as Python prints them, e.g. ``(6, 3)``,
  ``(6,)``, ``(1, 4, 5, 8)``. Never re-type them: pass the shapes of the tensors the page ran.

Diagrams are written notation-first: operation boxes (white, outlined in the colour of what they
produce) joined by arrows that carry tensors (coloured by role, labelled with the tensor's name
and shape); inputs and results are filled, rounded boxes. Colours come from ``engine.palette``.
Long chains run top to bottom (``rankdir="TB"``, the default) to stay narrow on a phone; each
function takes ``rankdir`` for a wide screen.

Example (views/self_attention.py)::

    from engine.diagrams import self_attention as diagrams
    from ui.diagram import diagram

    dot = diagrams.self_attention(
        diagrams.SelfAttentionLabels(inputs=_("inputs"), query=_("query"), ...),
        diagrams.SelfAttentionShapes(inputs=inputs.shape, query=inputs[query_index].shape, ...),
    )
    diagram(dot, alt=_("Diagram: ..."))
"""
