"""What every page's notebook holds besides its recipes: the printers of the numbers cells and the loader of the
engine modules a notebook carries (their sources become cells of the notebook, :mod:`engine.notebook`)."""

from __future__ import annotations

import json
import linecache
import sys
import types

import torch

from engine import chapter


def load_engine(sources):
    """Register the engine modules ``{name: (path, source)}`` as in-memory modules, in the given order.

    Every module object is made and registered first (a package's ``__init__`` may import its submodules, which
    the order puts before it), then each is executed once under its own name (``engine.attention``), so
    ``from engine import attention`` works as in the project; its source is put in ``linecache`` under its
    relative path so tracebacks and ``inspect.getsource`` show its lines.
    """
    for name, (path, source) in sources.items():
        module = types.ModuleType(name)
        module.__file__ = path
        is_package = path.endswith("__init__.py")
        if is_package:
            module.__path__ = []
        module.__package__ = name if is_package else name.rpartition(".")[0]
        linecache.cache[path] = (len(source), None, source.splitlines(keepends=True), path)
        sys.modules[name] = module
    for name in sources:
        parent, _dot, child = name.rpartition(".")
        if parent:
            setattr(sys.modules[parent], child, sys.modules[name])
    for name, (path, source) in sources.items():
        exec(compile(source, path, "exec"), sys.modules[name].__dict__)


def show(name, value, expected=None, decimals=4):
    """Print ``name = value`` at ``decimals`` decimals, and under it the chapter's ``expected`` value with ✓
    when the two agree at those decimals (✗ when not)."""
    rounded = torch.as_tensor(value, dtype=torch.float64).round(decimals=decimals).tolist()
    print(f"{name} = {json.dumps(rounded)}")
    if expected is not None:
        mark = "✓" if chapter.matches(value, expected, decimals) else "✗"
        print(f"{' ' * len(name)} ≈ {json.dumps(torch.as_tensor(expected, dtype=torch.float64).tolist())} {mark}")


def say(name, value):
    """Print ``name = value`` for a value that is no number: text, a truth value, a list of them (JSON)."""
    print(f"{name} = {json.dumps(value, ensure_ascii=False)}")
