"""The reader's language: one gettext translation per session, never a process-wide one.

Every visible string of ``views/`` and ``ui/`` goes through :func:`_` (or :func:`ngettext` for
plurals), with named placeholders so that a translation may reorder them::

    st.caption(_("Trained {steps} steps in {seconds:.0f} s").format(steps=n, seconds=t))

Readers are threads of one Streamlit process, so the language is read from the reader's own
``st.session_state`` at each call; ``gettext.install()`` (which sets a builtin for the whole
process) is never used. Catalogs live in ``locales/<lang>/LC_MESSAGES/messages.po`` and are
compiled to ``.mo`` files that the repository ships (Community Cloud runs no build step).
"""

from __future__ import annotations

import functools
import gettext
from pathlib import Path

import streamlit as st

LOCALE_DIR = Path(__file__).resolve().parent.parent / "locales"
#: The languages the app speaks, in the order the selector shows them.
LANGUAGES = ("fr", "de", "en")
DEFAULT_LANGUAGE = "en"
#: The session-state key (and URL parameter) holding the reader's language.
LANG_KEY = "lang"


@functools.cache
def translations(lang: str) -> gettext.NullTranslations:
    """The compiled catalog of ``lang`` (English, the source language, is the identity)."""
    if lang not in LANGUAGES or lang == DEFAULT_LANGUAGE:
        return gettext.NullTranslations()
    return gettext.translation("messages", localedir=LOCALE_DIR, languages=[lang], fallback=True)


def current_language() -> str:
    """The reader's language code ("fr", "de" or "en")."""
    lang = st.session_state.get(LANG_KEY, DEFAULT_LANGUAGE)
    return lang if lang in LANGUAGES else DEFAULT_LANGUAGE


def N_(message: str) -> str:
    """Mark ``message`` for extraction without translating it (for constants translated when drawn)."""
    return message


def _(message: str) -> str:
    """``message`` in the reader's language."""
    return translations(current_language()).gettext(message)


def ngettext(singular: str, plural: str, n: int) -> str:
    """The singular or plural form for ``n`` in the reader's language."""
    return translations(current_language()).ngettext(singular, plural, n)
