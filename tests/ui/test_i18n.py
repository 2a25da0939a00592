"""The translation layer: catalogs complete and up to date, placeholders kept, language chosen per reader."""

from __future__ import annotations

import ast
import gettext
import io
import re
from pathlib import Path

import pytest
from babel.messages.extract import extract_from_dir
from babel.messages.pofile import read_po
from streamlit.testing.v1 import AppTest

from ui.i18n import LOCALE_DIR, TRANSLATED, translations
from ui.sidebar import browser_language

ROOT = Path(__file__).resolve().parents[2]
KEYWORDS = {"_": None, "N_": None, "ngettext": (1, 2)}
_PLACEHOLDER = re.compile(r"\{(\w*)[^{}]*\}")


def catalog(lang: str):
    with open(LOCALE_DIR / lang / "LC_MESSAGES" / "messages.po", "rb") as f:
        return read_po(f, locale=lang)


def extracted_ids() -> set[str]:
    """Every message id in the code now (what ``make catalogs`` would extract)."""
    ids = set()
    for _file, _line, message, _comments, _ctx in extract_from_dir(
        str(ROOT), method_map=[("app.py", "python"), ("ui/**.py", "python"), ("views/**.py", "python")],
        keywords=KEYWORDS,
    ):
        ids.add(message if isinstance(message, str) else message[0])
    return ids


@pytest.mark.parametrize("lang", TRANSLATED)
def test_catalog_holds_every_message_of_the_code(lang):
    ids = {m.id if isinstance(m.id, str) else m.id[0] for m in catalog(lang) if m.id}
    missing = sorted(extracted_ids() - ids)
    assert not missing, f"run `make catalogs` and translate: {missing[:10]}"


@pytest.mark.parametrize("lang", TRANSLATED)
def test_every_message_is_translated_with_its_placeholders(lang):
    untranslated, fuzzy, broken = [], [], []
    for m in catalog(lang):
        if not m.id:
            continue
        ids = [m.id] if isinstance(m.id, str) else list(m.id)
        strs = [m.string] if isinstance(m.string, str) else list(m.string)
        if not all(strs):
            untranslated.append(ids[0])
        if m.fuzzy:
            fuzzy.append(ids[0])
        wanted = {p for i in ids for p in _PLACEHOLDER.findall(i)}
        for s in strs:
            if s and {p for p in _PLACEHOLDER.findall(s)} != wanted:
                broken.append((ids[0], s))
    assert not untranslated, untranslated[:10]
    assert not fuzzy, fuzzy[:10]
    assert not broken, broken[:5]


@pytest.mark.parametrize("lang", TRANSLATED)
def test_compiled_catalog_matches_the_po_file(lang):
    """The shipped .mo (Community Cloud runs no build step) says what the .po says."""
    mo = gettext.GNUTranslations(io.BytesIO((LOCALE_DIR / lang / "LC_MESSAGES" / "messages.mo").read_bytes()))
    for m in catalog(lang):
        if m.id and isinstance(m.id, str) and m.string:
            assert mo.gettext(m.id) == m.string, m.id


def test_a_translation_changes_the_words_but_not_the_placeholders():
    fr, de = translations("fr"), translations("de")
    msgid = "{label}: matches the chapter to {decimals} decimals"
    assert fr.gettext(msgid) != msgid and de.gettext(msgid) != msgid
    assert "{label}" in fr.gettext(msgid) and "{decimals}" in de.gettext(msgid)
    assert translations("en").gettext(msgid) == msgid


@pytest.mark.parametrize(("locale", "lang"), [
    ("fr-FR", "fr"), ("fr", "fr"), ("FR-ch", "fr"), ("de-AT", "de"), ("de", "de"), ("en-GB", "en"),
    ("es-ES", "en"), ("", "en"), (None, "en"), ("frisian", "en"), ("fr_CA", "fr"), ("x", "en"),
])
def test_browser_locale_picks_the_language(locale, lang):
    assert browser_language(locale) == lang


def test_no_process_wide_translation():
    """``gettext.install`` would set one language for every reader of the process."""
    for path in [ROOT / "app.py", *ROOT.glob("ui/*.py"), *ROOT.glob("views/*.py")]:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr == "install":
                assert not (isinstance(node.value, ast.Name) and node.value.id == "gettext"), path


@pytest.mark.parametrize(("value", "lang"), [("fr", "fr"), ("de", "de"), ("en", "en"), ("Français", "en"),
                                              ("[x](https://attacker.example)", "en"), ("", "en")])
def test_the_link_chooses_the_language(value, lang):
    """``?lang=fr`` opens the app in French; anything but a known code is ignored (English here)."""
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.query_params["lang"] = value
    at.run()
    assert not at.exception
    assert at.session_state["lang"] == lang
    assert at.query_params["lang"] == lang
    assert at.title[0].value == translations(lang).gettext("Attention, step by step")
