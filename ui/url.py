"""Integer inputs bound to the URL that a crafted link cannot crash."""

from __future__ import annotations

import math

import streamlit as st


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
