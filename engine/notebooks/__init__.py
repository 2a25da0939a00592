"""The notebook recipes of each page: one module per page slug, ``engine/notebooks/<slug>.py``, beside the page's
other per-slug modules (``engine/sections/<slug>.py``, ``engine/figures/<slug>.py``, ``views/<slug>.py``).

A page's module is what :func:`engine.notebook.build` reads to turn the page into a notebook. It defines:

``RECIPES: dict[str, Callable]``
    By the qualified name of the first object of a "Code that ran" expander of the page (``page.show_code``), the
    recipe whose *body* becomes the code cell that follows that listing in the notebook. A recipe is a real
    function of the module: it calls the page's listed functions by their bare names (so in the notebook it runs
    the listings just above it, edited or not) and prints with :func:`engine.notebooks.core.show` and
    :func:`~engine.notebooks.core.say`. Its parameters are the notebook's settings (one line each in the
    settings cell); their defaults are the page's. A recipe that sets a name for a later cell declares it
    ``global``.

``TIMING: frozenset[Callable]`` (optional)
    The recipes whose cell shows how to measure a time rather than print a number the page shows.

Nothing else: the notebook's install line is read from the imports of what it carries
(:func:`engine.notebook.requirements`), its settings from the recipes' parameters. To add cells to a page's
notebook, add a recipe and file it under the listing it follows. The page's prediction gates become the notebook's
exercises on their own (``Gate.exercise`` in ``ui/questions/<slug>.py``, whose expressions read these modules' names).

``ui/nav.py``'s page registry names each page's module (``PageInfo.notebook``); a page without one has no button.
"""
