"""Controls bound to the URL that a crafted link cannot crash: integer inputs, and choices whose link holds the
option itself rather than its translated label."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from typing import TypeVar

import streamlit as st

#: An option of :func:`choice`: a program name or a number, the same text in the link in every language.
Option = TypeVar("Option", str, int)


def is_unreadable(value: str | None) -> bool:
    """True for a value that reads as an infinite number ("inf", "-Infinity", "1e309").

    Streamlit's URL binding turns a bound integer number input's value into ``int(float(value))``, which raises
    ``OverflowError`` for an infinite one: a shared link such as ``?tw_seed=inf`` showed a traceback instead of
    the page. Every other malformed value the binding already ignores (the control keeps its default).
    """
    try:
        return math.isinf(float(value))
    except (TypeError, ValueError):
        return False


def int_input(container, label: str, *args, key: str, **options) -> int:
    """``container.number_input(label, *args, key=key, bind="query-params", **options)`` as an ``int``, safe from
    links.

    When the link gives ``key`` an infinite value, the parameter is removed from the URL and the input is not
    bound for this one run (Streamlit would read the value from the link it was opened with, whatever the URL
    says now): it shows its default, and from the next run on it is bound as usual (its identity is its key).

    Args:
        container: ``st`` or a column / container to draw in.
        label: the input's label, already translated.
        key: the widget key, which is also the URL parameter's name.
        args, options: the other ``number_input`` arguments (range, step, value), integers.
    """
    unreadable = is_unreadable(st.query_params.get(key))
    if unreadable:
        del st.query_params[key]
    return int(container.number_input(label, *args, key=key, bind=None if unreadable else "query-params",
                                      **options))


def choice(widget: Callable, label: str, options: Sequence[Option], *, key: str, default: Option,
           format_func: Callable[[Option], str], aliases: Callable[[Option], Iterable[str]] | None = None,
           **kwargs) -> Option:
    """A selectbox or radio whose URL parameter ``key`` holds the chosen option (``rope``, ``7``), not its label.

    Streamlit's ``bind="query-params"`` writes the option's displayed text into the URL, so a link made on the
    French page would say ``apprise`` and mean nothing on the English one. This control is bound by hand, as the
    language selector is: on the session's first run the link's value is taken when it is one of ``options``
    (anything else is ignored); after every run the URL holds the chosen option, or nothing for ``default``, so an
    ignored value leaves the link too. An option that is not a string (an ``int``) is written as ``str(option)``
    and read back by the same text. The value outlives a page switch (``persist_state="session"``).

    Args:
        widget: ``st.selectbox``, ``st.radio`` or a column's (``c3.selectbox``).
        label: the control's label, already translated.
        options: the options as the program names them (strings or integers); the URL holds one of them.
        key: the widget key, which is also the URL parameter's name.
        default: the option a link without ``key`` opens on; one of ``options``.
        format_func: an option's label in the reader's language.
        aliases: the other texts an older link may hold for an option (its labels in every language, which
            Streamlit's own binding once wrote: ``0,9``); such a link opens on that option and the URL is
            rewritten to the option itself. Anything else is ignored as above.
        kwargs: the widget's other arguments (``help``, ``horizontal``, ...).

    Raises:
        ValueError: ``default`` is not one of ``options``.
    """
    if default not in options:
        raise ValueError(f"default {default!r} is not one of {list(options)!r}")
    if key not in st.session_state:
        from_link = st.query_params.get(key)
        st.session_state[key] = next((o for o in options if str(o) == from_link
                                      or (aliases is not None and from_link in set(aliases(o)))), default)
    value = widget(label, options, format_func=format_func, key=key, persist_state="session", **kwargs)
    if value == default:
        if key in st.query_params:
            del st.query_params[key]
    elif st.query_params.get(key) != str(value):
        st.query_params[key] = str(value)
    return value
