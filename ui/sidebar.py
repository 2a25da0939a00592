"""The sidebar every page shares: the reader's language, where the code runs and what versions it uses."""

from __future__ import annotations

import platform
import re

import streamlit as st
import torch

from engine.device import describe_device, pick_device
from ui.gates import predict_switch
from ui.i18n import DEFAULT_LANGUAGE, LANG_KEY, LANGUAGES, _, ngettext


def browser_language(locale: str | None) -> str:
    """The app language for a browser locale such as ``fr-CH`` or ``de``: fr, de, else en."""
    code = re.split(r"[-_]", (locale or "").strip().lower(), maxsplit=1)[0]
    return code if code in LANGUAGES else DEFAULT_LANGUAGE


def language_selector() -> str:
    """The language selector, mirrored in the URL as ``lang=fr|de|en``; the first visit follows the browser.

    Streamlit's ``bind="query-params"`` would write the option's displayed name ("Français") into the
    URL, so this one control keeps the code itself: the URL value is checked against the known codes
    before it is used (anything else is ignored), and written back after each run.
    """
    if LANG_KEY not in st.session_state:
        from_url = st.query_params.get(LANG_KEY)
        st.session_state[LANG_KEY] = from_url if from_url in LANGUAGES else browser_language(st.context.locale)
    lang = st.sidebar.selectbox("Language · Langue · Sprache", tuple(LANGUAGES),
                                format_func=lambda code: LANGUAGES[code].name, key=LANG_KEY)
    if st.query_params.get(LANG_KEY) != lang:
        st.query_params[LANG_KEY] = lang
    return lang


def render_sidebar() -> None:
    """The switch of the prediction gates (``predict=on|off``), the compute device (CUDA, Apple MPS or CPU) and the
    library versions."""
    predict_switch()
    with st.sidebar:
        device = pick_device()
        threads = torch.get_num_threads()
        st.caption(_("Device: **{device}**").format(device=describe_device(device)) + " · "
                   + ngettext("{n} CPU thread", "{n} CPU threads", threads).format(n=threads))
        st.caption(f"PyTorch {torch.__version__} · Streamlit {st.__version__} · Python {platform.python_version()}")
