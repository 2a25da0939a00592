"""Shareable state: a page's controls mirrored in the URL (``st.query_params``).

A page creates each control with ``key=bound("sa_scale", 1.0, lo=-150, hi=150)``
and without a ``value``/``index`` argument. :func:`bound` seeds the widget's
session state from the URL when the link carries a valid value, else from the
default, and records the key; after the page ran, ``app.py`` calls
:func:`publish`, which writes every recorded control back into the URL. A link
therefore reproduces what its sender saw; a malformed or out-of-range value in
a link is ignored (the default is used) and reported once with a toast that names the
parameter but never repeats the link's text (it could carry Markdown).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import streamlit as st

from ui.i18n import _

_REGISTRY = "_bound_keys"


def start_run() -> None:
    """Forget the keys bound in the previous run (called by ``app.py`` before the page runs)."""
    st.session_state[_REGISTRY] = {}


def _parse(raw: str, default: Any, lo=None, hi=None, options: Sequence | None = None):
    """Convert a URL string to the default's type and check it; raise ValueError when invalid."""
    if isinstance(default, bool):
        if raw not in ("true", "false"):
            raise ValueError(raw)
        value: Any = raw == "true"
    elif isinstance(default, int):
        value = int(raw)
    elif isinstance(default, float):
        value = float(raw)
        if value != value:  # NaN
            raise ValueError(raw)
    else:
        value = raw
    if options is not None:
        matches = [o for o in options if str(o) == raw]
        if not matches:
            raise ValueError(raw)
        value = matches[0]
    if lo is not None and value < lo or hi is not None and value > hi:
        raise ValueError(raw)
    return value


def _encode(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def bound(key: str, default: Any, lo=None, hi=None, options: Sequence | None = None) -> str:
    """Seed ``st.session_state[key]`` from the URL (or ``default``) and return ``key`` for the widget.

    Args:
        key: the widget key, also the URL parameter name.
        default: the value when the URL has none; its type decides how the URL is parsed
            (bool, int, float or str).
        lo, hi: accepted range for numbers (a slider's min and max).
        options: accepted values (a selectbox's options), compared by their text.

    Returns:
        ``key``, so a page writes ``st.slider(..., key=bound("k", 3, lo=1, hi=8))``.
    """
    registry = st.session_state.setdefault(_REGISTRY, {})
    registry[key] = True
    if key not in st.session_state:
        value = default
        raw = st.query_params.get(key)
        if raw is not None:
            try:
                value = _parse(raw, default, lo, hi, options)
            except (ValueError, TypeError):
                # The raw value is never echoed: a link's text could carry Markdown (links, images).
                st.toast(_("The link held an invalid value for {name}; the default is used.").format(name=key),
                         icon=":material/link_off:")
        st.session_state[key] = value
    return key


def publish() -> None:
    """Write every control bound in this run into the URL; drop parameters of other pages."""
    registry = st.session_state.get(_REGISTRY, {})
    wanted = {k: _encode(st.session_state[k]) for k in registry if k in st.session_state}
    if dict(st.query_params) != wanted:
        st.query_params.from_dict(wanted)
