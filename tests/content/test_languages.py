"""The languages are one record (ui.i18n.LANGUAGES): each has its number conventions from Babel, every prose part
and every catalog entry, or a test fails.

The app falls back for a reader where a language lacks something (ui.page.part_text shows the English part under
"This part is not translated yet", ui.i18n.translations the English message), so that a reader never meets a
traceback; these tests make that fallback a failure for the languages the record lists, so a language added to
the record is complete before it ships. The gap finders are tested on a made-up language to show that they find
a missing file, a missing or empty part, a missing catalog and a missing or untranslated entry.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from babel import Locale
from babel.messages.catalog import Catalog
from babel.messages.mofile import write_mo
from babel.messages.pofile import read_po, write_po

from tests.ui.test_i18n import extracted_ids
from ui.i18n import DEFAULT_LANGUAGE, LANGUAGES, LOCALE_DIR, TRANSLATED, Language

ROOT = Path(__file__).resolve().parents[2]
CONTENT = ROOT / "content"
PART = re.compile(r"^<!--\s*part:\s*([\w-]+)\s*-->\s*$", re.MULTILINE)


def parts(path: Path) -> dict[str, str]:
    """``{part name: body}`` of one prose file."""
    pieces = PART.split(path.read_text(encoding="utf-8"))
    return {name: body.strip() for name, body in zip(pieces[1::2], pieces[2::2], strict=False)}


def content_gaps(lang: str, content: Path = CONTENT) -> list[str]:
    """What ``content/<lang>/`` lacks against the source language's prose: files, parts, and parts left empty."""
    gaps = []
    for source in sorted((content / DEFAULT_LANGUAGE).glob("*.md")):
        path = content / lang / source.name
        if not path.is_file():
            gaps.append(f"{lang}/{source.name}: missing")
            continue
        mine = parts(path)
        gaps += [f"{lang}/{source.name}: part {name!r} missing" for name in parts(source) if name not in mine]
        gaps += [f"{lang}/{source.name}: part {name!r} empty" for name, body in mine.items() if not body]
    return gaps


def catalog_gaps(lang: str, ids: set[str], locale_dir: Path = LOCALE_DIR) -> list[str]:
    """What ``locales/<lang>/`` lacks: the .po and .mo files, an entry for each of ``ids``, a translation in each."""
    folder = locale_dir / lang / "LC_MESSAGES"
    missing = [f"{lang}: {name} missing" for name in ("messages.po", "messages.mo") if not (folder / name).is_file()]
    if missing:
        return missing
    with open(folder / "messages.po", "rb") as f:
        entries = {(m.id if isinstance(m.id, str) else m.id[0]): m for m in read_po(f, locale=lang) if m.id}
    gaps = [f"{lang}: no entry for {i!r}" for i in sorted(ids - entries.keys())]
    for i in sorted(ids & entries.keys()):
        strings = entries[i].string if isinstance(entries[i].string, tuple) else (entries[i].string,)
        if not all(strings):
            gaps.append(f"{lang}: {i!r} not translated")
    return gaps


@pytest.fixture(scope="module")
def ids() -> set[str]:
    return extracted_ids()


def test_the_record_reads_its_conventions_from_babel():
    """Names and number symbols are CLDR's (the printed values are the ones the pages' tests rely on)."""
    assert list(LANGUAGES) == ["fr", "de", "en"] and DEFAULT_LANGUAGE in LANGUAGES
    assert TRANSLATED == tuple(code for code in LANGUAGES if code != DEFAULT_LANGUAGE)
    for code, record in LANGUAGES.items():
        assert isinstance(record, Language) and record.code == code
        locale = Locale.parse(code)
        symbols = locale.number_symbols.get("latn", locale.number_symbols)
        assert (record.decimal, record.group) == (symbols["decimal"], symbols["group"])
        assert record.percent == locale.percent_formats[None].pattern
        assert record.name.lower() == locale.get_display_name(code).lower()
        assert len(record.byte_units) == 5 and record.decimal not in record.list_separator
    summary = {c: (r.name, r.decimal, r.group, r.percent) for c, r in LANGUAGES.items()}
    assert summary == {"fr": ("Français", ",", "\u202f", "#,##0\u00a0%"), "de": ("Deutsch", ",", ".", "#,##0\u00a0%"),
                       "en": ("English", ".", ",", "#,##0%")}


@pytest.mark.parametrize("lang", LANGUAGES)
def test_every_language_has_every_prose_part(lang):
    assert content_gaps(lang) == []


@pytest.mark.parametrize("lang", TRANSLATED)
def test_every_translated_language_has_every_catalog_entry(lang, ids):
    assert catalog_gaps(lang, ids) == []


def test_the_gap_finders_find_what_a_new_language_lacks(tmp_path, ids):
    """A made-up language "it" with one page of two, a missing part, an empty part, then a catalog with one entry
    missing and one untranslated: each gap is named; with nothing at all, the missing files are."""
    content = tmp_path / "content"
    (content / "en").mkdir(parents=True)
    (content / "it").mkdir()
    (content / "en" / "a.md").write_text("<!-- part: intro -->\nHello\n<!-- part: quiz -->\n### Q\nA\n")
    (content / "en" / "b.md").write_text("<!-- part: intro -->\nHello\n")
    (content / "it" / "a.md").write_text("<!-- part: intro -->\n\n")
    assert content_gaps("it", content) == ["it/a.md: part 'quiz' missing", "it/a.md: part 'intro' empty",
                                           "it/b.md: missing"]
    assert content_gaps("en", content) == []

    locales = tmp_path / "locales"
    assert catalog_gaps("it", ids, locales) == ["it: messages.po missing", "it: messages.mo missing"]
    wanted = sorted(ids)[:3]
    catalog = Catalog(locale="it")
    catalog.add(wanted[0], "tradotto")
    catalog.add(wanted[1], "")
    folder = locales / "it" / "LC_MESSAGES"
    folder.mkdir(parents=True)
    with open(folder / "messages.po", "wb") as f:
        write_po(f, catalog)
    with open(folder / "messages.mo", "wb") as f:
        write_mo(f, catalog)
    assert catalog_gaps("it", set(wanted), locales) == [f"it: no entry for {wanted[2]!r}",
                                                        f"it: {wanted[1]!r} not translated"]
