"""The reader's language: one gettext translation per session, never a process-wide one.

Every visible string of ``views/`` and ``ui/`` goes through :func:`_` (or :func:`ngettext` for
plurals), with named placeholders so that a translation may reorder them::

    st.caption(_("Trained {steps} steps in {seconds:.0f} s").format(steps=n, seconds=t))

Readers are threads of one Streamlit process, so the language is read from the reader's own
``st.session_state`` at each call; ``gettext.install()`` (which sets a builtin for the whole
process) is never used. Catalogs live in ``locales/<lang>/LC_MESSAGES/messages.po`` and are
compiled to ``.mo`` files that the repository ships (Community Cloud runs no build step).

The languages are one record, :data:`LANGUAGES` (code -> :class:`Language`): the selector, the number formats
(``ui.numbers``), the tools and the tests take them from it, so a language added there is checked everywhere
(its prose parts in ``content/<code>/``, its catalog) before a reader sees it.
"""

from __future__ import annotations

import functools
import gettext
from dataclasses import dataclass
from pathlib import Path

import streamlit as st
from babel import Locale

LOCALE_DIR = Path(__file__).resolve().parent.parent / "locales"


@dataclass(frozen=True)
class Language:
    """One language the app speaks: its name and number conventions from CLDR (through Babel), and the
    typography Babel does not hold, written here.

    Attributes:
        code: the URL value (``?lang=fr``), the catalog's folder ``locales/<code>/`` and the prose's
            ``content/<code>/``; also the Babel locale whose conventions follow.
        name: the language's name in itself, capitalised, as the selector shows it ("Français"). Babel.
        decimal: the decimal sign ("," in French and German). Babel.
        group: the thousands separator (U+202F, a narrow no-break space, in French; "." in German). Babel.
        percent: CLDR's percent pattern ("#,##0\u00a0%" in French: a no-break space before the sign). Babel.
        colon: what joins a label to its value ("\u202f: " in French, whose typography puts a narrow no-break
            space before a colon).
        list_separator: what separates the numbers of a list: a semicolon where the comma is the decimal sign.
        byte_units: binary (IEC) byte units from B to TiB (French writes octets: o, Kio, Mio …).
    """

    code: str
    name: str
    decimal: str
    group: str
    percent: str
    colon: str
    list_separator: str
    byte_units: tuple[str, ...]


def _language(code: str, colon: str, list_separator: str, byte_units: tuple[str, ...]) -> Language:
    """The record of ``code``: name and number symbols read from Babel's CLDR data (Latin digits), the rest given."""
    locale = Locale.parse(code)
    symbols = locale.number_symbols.get("latn", locale.number_symbols)
    name = locale.get_display_name(code)
    return Language(code=code, name=name[:1].upper() + name[1:], decimal=symbols["decimal"], group=symbols["group"],
                    percent=locale.percent_formats[None].pattern, colon=colon, list_separator=list_separator,
                    byte_units=byte_units)


_IEC_BYTES = ("B", "KiB", "MiB", "GiB", "TiB")
#: The languages the app speaks, code -> record, in the order the selector shows them. ``lang in LANGUAGES`` and
#: iterating it go by code.
LANGUAGES: dict[str, Language] = {record.code: record for record in (
    _language("fr", colon="\u202f: ", list_separator="\u202f; ", byte_units=("o", "Kio", "Mio", "Gio", "Tio")),
    _language("de", colon=": ", list_separator="; ", byte_units=_IEC_BYTES),
    _language("en", colon=": ", list_separator=", ", byte_units=_IEC_BYTES),
)}
#: The source language of the code's messages and the prose; a reader's unknown language falls back to it.
DEFAULT_LANGUAGE = "en"
#: The languages with a catalog to translate into: every one but the source language.
TRANSLATED: tuple[str, ...] = tuple(code for code in LANGUAGES if code != DEFAULT_LANGUAGE)
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
